/*
** cuda_comm.cu -- the device transports behind lib/comm.c's byte
** collectives and its float MAX all-reduce of a device buffer (the amax
** of a quantize with amax_group), for communicators of a CUDA context
** (design.md decision 7):
**  - "nccl" when every rank of the communicator has its own GPU (NCCL
**    refuses two ranks on one GPU): bootstrap as nccl-tests does, the
**    unique id made on rank 0 and broadcast with MPI, one ncclComm_t per
**    nvfp4_comm (so one per tensor-parallel group after a split);
**    collectives are queued on the context's stream;
**  - "mpi-staged" otherwise (ranks sharing a GPU, or no NCCL in the
**    build): device -> host copy, the MPI collective on host memory (Open
**    MPI here is not CUDA-aware), host -> device copy.
** The choice is made once per communicator from an MPI all-gather of the
** ranks' GPU PCI ids, so every rank makes the same one.  $NVFP4_TRANSPORT
** = "mpi-staged" forces the staged path.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "cuda_int.h"
#include "comm_int.h"
#ifdef HAVE_NCCL
#include <nccl.h>
#endif


#ifdef HAVE_NCCL
static nvfp4_status nccl_fail (nvfp4_ctx *ctx, ncclResult_t r, const char *call) {
  return nvfp4i_fail(ctx, NVFP4_ENCCL, "%s failed: %s (%s)", call,
                     ncclGetErrorString(r), ncclGetLastError(NULL));
}

#define NCCL_CHECK(ctx, call)  \
  do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) return nccl_fail((ctx), r_, #call); } while (0)
#endif


/* Collective over c->mpi.  1 when the ranks' GPUs (host name + PCI bus
** id) are pairwise distinct. */
static int own_gpus (nvfp4_comm *c) {
  enum { ID = 96 };
  char mine[ID], *all;
  int i, j, distinct = 1;
  memset(mine, 0, sizeof mine);
  if (cudaDeviceGetPCIBusId(mine, 32, nvfp4i_cuda_of(c->ctx)->device) != cudaSuccess) {
    cudaGetLastError();
    snprintf(mine, 32, "dev%d", nvfp4i_cuda_of(c->ctx)->device);
  }
  gethostname(mine + 32, ID - 33);
  all = (char *)malloc((size_t)ID * (size_t)c->size);
  if (all == NULL) return 0;
  if (MPI_Allgather(mine, ID, MPI_CHAR, all, ID, MPI_CHAR, c->mpi) != MPI_SUCCESS) {
    free(all);
    return 0;
  }
  for (i = 0; i < c->size && distinct; i++)
    for (j = i + 1; j < c->size && distinct; j++)
      if (memcmp(all + (size_t)i * ID, all + (size_t)j * ID, ID) == 0) distinct = 0;
  free(all);
  return distinct;
}


#ifdef HAVE_NCCL
/* Collective over c->mpi, on a new NCCL communicator nc: NCCL connects its
** peers lazily, in the first collective (seconds, more on a busy machine),
** which would be charged to the first gather (a case's timeout in the
** harness: a 2 s case timed out in its first all-gather under make -j check
** on two GPUs).  One all-gather of a byte per rank does it here.  1 when it
** worked on every rank; else nc is aborted (on every rank: a rank whose
** all-gather was refused leaves the others' pending, which the abort
** cancels instead of their waiting on it). */
static int nccl_warm_up (nvfp4_comm *c, ncclComm_t nc) {
  cudaStream_t s = nvfp4i_stream(c->ctx);
  unsigned char *d = NULL;
  int ok, all_ok = 0;
  ok = cudaMalloc((void **)&d, (size_t)c->size) == cudaSuccess;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);
  if (all_ok) {
    ok = ncclAllGather(d + c->rank, d, 1, ncclUint8, nc, s) == ncclSuccess;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);       /* all queued? */
    if (all_ok) {
      ok = cudaStreamSynchronize(s) == cudaSuccess;
      MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);
    }
  }
  if (!all_ok) ncclCommAbort(nc);
  if (d != NULL) cudaFree(d);
  cudaGetLastError();
  return all_ok;
}
#endif


/* Collective: pick the transport of a new communicator of a CUDA ctx and
** create its NCCL communicator if NCCL is picked.  Falls back to the
** staged path (on every rank) when NCCL cannot be set up. */
extern "C" nvfp4_status nvfp4i_cuda_comm_setup (nvfp4_comm *c) {
  const char *force = getenv("NVFP4_TRANSPORT");
  c->transport = NVFP4I_MPI_STAGED;
  c->nccl = NULL;
  if (force != NULL && strcmp(force, "mpi-staged") == 0) return NVFP4_OK;
#ifdef HAVE_NCCL
  if (c->size > 1 && own_gpus(c)) {
    ncclUniqueId id;
    ncclComm_t nc = NULL;
    int ok = 1, all_ok = 0;
    if (c->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) ok = 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, c->mpi);
    if (!ok) return NVFP4_OK;
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->mpi);
    cudaSetDevice(nvfp4i_cuda_of(c->ctx)->device);
    ok = ncclCommInitRank(&nc, c->size, id, c->rank) == ncclSuccess;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);
    if (!all_ok) {
      if (ok) ncclCommAbort(nc);     /* not Destroy: it would wait for the ranks that failed */
      return NVFP4_OK;
    }
    if (!nccl_warm_up(c, nc)) return NVFP4_OK;      /* nc aborted there */
    c->nccl = nc;
    c->transport = NVFP4I_NCCL;
  }
#endif
  return NVFP4_OK;
}


/* Does not wait for the other ranks to free theirs.  ncclCommDestroy does
** (NCCL 2.28 on two H200s: a group closed on one rank only held that rank
** until the job's timeout), so a rank closing a group alone, or Lua's
** collector freeing one at another moment on each rank, would hang it.
** The context's stream is drained first, so no operation of this rank is
** pending when the communicator is aborted (PyTorch's process groups abort
** theirs at shutdown too).  NCCL documents neither call as local: on one
** node over NVLink the abort returned at once; across nodes, where the
** proxy thread may still be sending after the kernel ended, an abort could
** cancel a send a peer waits for (not run: one node here). */
extern "C" void nvfp4i_cuda_comm_fini (nvfp4_comm *c) {
#ifdef HAVE_NCCL
  if (c->nccl != NULL) {
    cudaStreamSynchronize(nvfp4i_stream(c->ctx));
    ncclCommAbort((ncclComm_t)c->nccl);
  }
#endif
  c->nccl = NULL;
}


/* Open (start != 0) or close an NCCL group; no-op for the staged path. */
extern "C" nvfp4_status nvfp4i_cuda_comm_group (nvfp4_comm *c, int start) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    if (start) NCCL_CHECK(c->ctx, ncclGroupStart());
    else NCCL_CHECK(c->ctx, ncclGroupEnd());
  }
#endif
  return NVFP4_OK;
}


static nvfp4_status staged_all_gather (nvfp4_comm *c, const void *send, size_t n,
                                       void *recv) {
  nvfp4_ctx *ctx = c->ctx;
  size_t total = n * (size_t)c->size;
  nvfp4_status st = NVFP4_OK;
  char *hs, *hr;
  int rc;
  FAIL_IF(ctx, n > (size_t)0x7fffffff, NVFP4_EINVAL,
          "all_gather: %zu bytes per rank exceed MPI's int count", n);
  hs = (char *)malloc(n > 0 ? n : 1);
  hr = (char *)malloc(total > 0 ? total : 1);
  if (hs == NULL || hr == NULL) {
    free(hs); free(hr);
    return nvfp4i_fail(ctx, NVFP4_ENOMEM, "all_gather: cannot stage %zu bytes", total);
  }
  if (n > 0 && (st = ctx->ops->to_host(ctx, hs, send, n)) != NVFP4_OK) goto done;
  rc = MPI_Allgather(hs, (int)n, MPI_BYTE, hr, (int)n, MPI_BYTE, c->mpi);
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    st = nvfp4i_fail(ctx, NVFP4_EMPI, "MPI_Allgather (staged) failed: %.*s", len, msg);
    goto done;
  }
  if (total > 0) st = ctx->ops->from_host(ctx, recv, hr, total);
done:
  free(hs);
  free(hr);
  return st;
}


/* MAX all-reduce of n floats in place in a device buffer over NCCL, on the
** ctx's stream (lib/comm.c dispatch, NCCL transport only). */
extern "C" nvfp4_status nvfp4i_cuda_all_reduce_max_f32 (nvfp4_comm *c, float *buf, int n) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    if (n == 0) return NVFP4_OK;
    NCCL_CHECK(c->ctx, ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, ncclMax,
                                     (ncclComm_t)c->nccl, nvfp4i_stream(c->ctx)));
    return NVFP4_OK;
  }
#endif
  (void)buf; (void)n;
  return nvfp4i_fail(c->ctx, NVFP4_ENOTSUP, "all-reduce: not an NCCL communicator");
}


/* Byte all-gather in rank order of device buffers (lib/comm.c dispatch). */
extern "C" nvfp4_status nvfp4i_cuda_all_gather_bytes (nvfp4_comm *c, const void *send,
                                                      size_t n, void *recv) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    if (n == 0) return NVFP4_OK;
    NCCL_CHECK(c->ctx, ncclAllGather(send, recv, n, ncclUint8, (ncclComm_t)c->nccl,
                                     nvfp4i_stream(c->ctx)));
    return NVFP4_OK;
  }
#endif
  return staged_all_gather(c, send, n, recv);
}
