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

/* A communicator over mc (borrowed: the caller keeps mc and frees it after
** nvfp4_comm_destroy; *out is the caller's).  With the CUDA backend, NCCL is
** used when every rank has its own GPU, otherwise, and whenever NCCL's
** set-up fails or $NVFP4_TRANSPORT=mpi-staged, device buffers are staged
** through host memory (nvfp4_comm_transport says which).  Sets
** MPI_ERRORS_RETURN on mc, so that MPI errors come back as statuses instead
** of aborting.  Collective over mc (with CUDA).  Errors: EINVAL (NULL out,
** MPI_COMM_NULL), ENOMEM.  sp-linear-and-gather.md §1. */
nvfp4_status nvfp4_comm_create_mpi (nvfp4_ctx *ctx, MPI_Comm mc,
                                    nvfp4_comm **out);
/* The MPI communicator a comm runs over (owned by the comm for split ones);
** MPI_COMM_NULL for NULL. */
MPI_Comm     nvfp4_comm_mpi (const nvfp4_comm *c);

#ifdef __cplusplus
}
#endif
#endif
