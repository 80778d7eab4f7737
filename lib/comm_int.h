/*
** comm_int.h -- the communicator structure, shared by lib/comm.c,
** lib/collectives.c, lib/gather.c and the CUDA backend's transports.
*/
#ifndef NVFP4_COMM_INT_H
#define NVFP4_COMM_INT_H

#include <mpi.h>
#include "nvfp4_int.h"

typedef enum nvfp4i_transport {
  NVFP4I_MPI = 0,        /* host buffers straight through MPI */
  NVFP4I_MPI_STAGED,     /* device buffers copied through host memory */
  NVFP4I_NCCL            /* device buffers through NCCL */
} nvfp4i_transport;

struct nvfp4_comm {
  nvfp4_ctx *ctx;
  MPI_Comm mpi;          /* borrowed (world) or owned (split) */
  int owns_mpi;
  int rank, size;
  nvfp4i_transport transport;
  void *nccl;            /* ncclComm_t when transport == NVFP4I_NCCL */
};

/* Byte all-gather in rank order: recv holds size * n bytes.  Buffers are in
** the ctx's memory; the transport decides how they move. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_all_gather_bytes (nvfp4_comm *c,
                                                       const void *send,
                                                       size_t n, void *recv);

#endif
