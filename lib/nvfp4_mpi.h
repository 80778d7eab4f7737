/*
** nvfp4_mpi.h -- create communicators from MPI.  Kept apart from nvfp4.h so
** that nvfp4.h stays free of MPI types.
*/
#ifndef NVFP4_MPI_H
#define NVFP4_MPI_H

#include <mpi.h>
#include "nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator over mc (borrowed: the caller keeps and frees mc).  With
** the CUDA backend, NCCL is used when every rank has its own GPU, otherwise
** device buffers are staged through host memory.  Collective over mc.
** Errors: EINVAL (NULL), EMPI, ENCCL, ENOMEM. */
nvfp4_status nvfp4_comm_create_mpi (nvfp4_ctx *ctx, MPI_Comm mc,
                                    nvfp4_comm **out);
/* The MPI communicator a comm runs over (owned by the comm for split ones). */
MPI_Comm     nvfp4_comm_mpi (const nvfp4_comm *c);

#ifdef __cplusplus
}
#endif
#endif
