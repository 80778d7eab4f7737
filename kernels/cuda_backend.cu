/*
** cuda_backend.cu -- the CUDA backend table: one device and one stream per
** context, device memory (stream-ordered cudaMallocAsync from the device's
** default pool, which keeps freed memory; zero-filled unless asked not to),
** copies, and the kernels of quantize.cu, dequantize.cu, transpose.cu and
** gemm.cu.  Every entry only enqueues work on the context's stream, except
** to_host and sync, which wait for it (nvfp4.h "return when enqueued"), and
** from_host from page-locked or managed memory, which waits for its copy.
**
** Device choice: $NVFP4_CUDA_DEVICE if set (0..count-1), else the MPI local rank
** (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID) modulo the
** device count, so ranks spread over the GPUs of a node and share them when
** there are fewer GPUs than ranks (kernels/cuda_comm.cu then stages).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "cuda_int.h"


nvfp4_status nvfp4i_cuda_fail (nvfp4_ctx *ctx, cudaError_t e, const char *call,
                               const char *file, int line) {
  cudaGetLastError();              /* clear a sticky launch error */
  /* out of device memory (a call's temporaries, a workspace): ENOMEM, as
  ** for a tensor's buffer, so that a caller may free memory and call again */
  return nvfp4i_fail(ctx, e == cudaErrorMemoryAllocation ? NVFP4_ENOMEM : NVFP4_ECUDA,
                     "%s failed: %s (%s) at %s:%d", call,
                     cudaGetErrorString(e), cudaGetErrorName(e), file, line);
}


extern "C" int nvfp4i_cuda_usable (const char **why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *why = (e == cudaErrorNoDevice) ? "no CUDA device found"
         : (e == cudaErrorInsufficientDriver) ? "no CUDA driver (or too old) on this machine"
         : "the CUDA runtime cannot enumerate devices";
    return 0;
  }
  if (n == 0) { *why = "no CUDA device found"; return 0; }
  return 1;
}


/* The device for a context, among count: $NVFP4_CUDA_DEVICE as given (an
** integer in 0..count-1, else EINVAL naming it), else the first local-rank
** variable set, modulo count (a value that is no integer counts as 0, as
** those come from the launcher). */
static nvfp4_status pick_device (nvfp4_ctx *ctx, int count, int *dev) {
  static const char *const vars[] = {
    "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", NULL
  };
  const char *v = getenv("NVFP4_CUDA_DEVICE");
  int i;
  *dev = 0;
  if (v != NULL && *v != '\0') {
    char *end;
    long d = strtol(v, &end, 10);
    FAIL_IF(ctx, *end != '\0' || d < 0 || d >= count, NVFP4_EINVAL,
            "NVFP4_CUDA_DEVICE='%s' is not a device number in 0..%d (%d CUDA device%s)", v,
            count - 1, count, count == 1 ? "" : "s");
    *dev = (int)d;
    return NVFP4_OK;
  }
  for (i = 0; vars[i] != NULL; i++) {
    v = getenv(vars[i]);
    if (v != NULL && *v != '\0') {
      *dev = abs(atoi(v)) % count;
      break;
    }
  }
  return NVFP4_OK;
}


static nvfp4_status cuda_init (nvfp4_ctx *ctx) {
  nvfp4i_cuda *c;
  int count = 0;
  nvfp4_status st;
  c = (nvfp4i_cuda *)nvfp4i_calloc(1, sizeof *c);
  FAIL_IF(ctx, c == NULL, NVFP4_ENOMEM, "cannot allocate the CUDA backend's state");
  ctx->impl = c;               /* freed by cuda_fini, also after a failure below */
  CU_CHECK(ctx, cudaGetDeviceCount(&count));
  if ((st = pick_device(ctx, count > 0 ? count : 1, &c->device)) != NVFP4_OK) return st;
  CU_CHECK(ctx, cudaSetDevice(c->device));
  CU_CHECK(ctx, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  {
    /* Keep freed memory in the device's default pool across synchronizations
    ** (the default release threshold, 0, hands it back to the driver at each
    ** sync, and every large cudaMallocAsync then maps pages again: about a
    ** millisecond per GB, the bulk of a Linear layer's overhead). */
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    CU_CHECK(ctx, cudaDeviceGetDefaultMemPool(&pool, c->device));
    CU_CHECK(ctx, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  CU_CHECK(ctx, cudaMalloc((void **)&c->amax_dev, 2 * sizeof(float)));
  CU_CHECK(ctx, cudaMallocHost((void **)&c->amax_host, 2 * sizeof(float)));
  CU_CHECK(ctx, cudaMalloc((void **)&c->gemm_scalars, 2 * sizeof(float)));  /* gemm_alpha_kernel's */
  return NVFP4_OK;
}


static void cuda_fini (nvfp4_ctx *ctx) {
  nvfp4i_cuda *c = nvfp4i_cuda_of(ctx);
  if (c == NULL) return;
  if (c->stream == NULL) {   /* cuda_init failed before its stream: nothing on a device to undo (and a
                             ** cudaSetDevice here would create a context on device 0 for nothing) */
    free(c);
    ctx->impl = NULL;
    return;
  }
  cudaSetDevice(c->device);
  cudaStreamSynchronize(c->stream);
  nvfp4i_cuda_gemm_fini(ctx);
  if (c->rht_defer) cudaFree(c->rht_defer);
  if (c->scale_gather) cudaFree(c->scale_gather);
  if (c->amax_dev) cudaFree(c->amax_dev);
  if (c->amax_host) cudaFreeHost(c->amax_host);
  if (c->gemm_scalars) cudaFree(c->gemm_scalars);
  cudaStreamDestroy(c->stream);
  free(c);
  ctx->impl = NULL;
}


/* cuda_alloc without the memset: for buffers a collective or a kernel
** overwrites entirely (the NVFP4 all-gather's gathered and swapped ones).
** ENOMEM when the device is out of memory; any other failure (a sticky
** error of an earlier kernel) is ECUDA with CUDA's message, so that a
** caller does not free memory and retry in vain. */
static nvfp4_status cuda_alloc_uninit (nvfp4_ctx *ctx, size_t bytes, void **p) {
  const cudaError_t e = cudaMallocAsync(p, bytes, nvfp4i_stream(ctx));
  if (e != cudaSuccess) {
    *p = NULL;
    return nvfp4i_cuda_fail(ctx, e, "cudaMallocAsync", __FILE__, __LINE__);
  }
  return NVFP4_OK;
}


/* Stream-ordered: the memory is usable by everything queued after this
** call, and zeroed before it (padding of scale buffers stays 0x00); freed
** again when the memset cannot be queued. */
static nvfp4_status cuda_alloc (nvfp4_ctx *ctx, size_t bytes, void **p) {
  cudaStream_t s = nvfp4i_stream(ctx);
  cudaError_t e;
  CHECK(cuda_alloc_uninit(ctx, bytes, p));
  if ((e = cudaMemsetAsync(*p, 0, bytes, s)) != cudaSuccess) {
    cudaFreeAsync(*p, s);
    *p = NULL;
    return nvfp4i_cuda_fail(ctx, e, "cudaMemsetAsync", __FILE__, __LINE__);
  }
  return NVFP4_OK;
}


static void cuda_free (nvfp4_ctx *ctx, void *p) {
  if (p != NULL) cudaFreeAsync(p, nvfp4i_stream(ctx));
}


/* A copy to pageable memory returns only when it is done, so it would wait
** for a stream stuck behind a peer's NCCL failure without looking: with
** NCCL comms on ctx the stream is drained first by the wait that looks
** (nvfp4i_cuda_wait). */
static nvfp4_status cuda_to_host (nvfp4_ctx *ctx, void *dst, const void *src, size_t n) {
  cudaStream_t s = nvfp4i_stream(ctx);
  if (n == 0) return NVFP4_OK;
  if (nvfp4i_cuda_of(ctx)->nccl_comms != NULL) CHECK(nvfp4i_cuda_wait(ctx));
  CU_CHECK(ctx, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s));
  return nvfp4i_cuda_wait(ctx);
}


/* From pageable host memory the runtime copies src out before returning,
** so the caller may reuse it at once.  From page-locked memory
** (cudaMallocHost, cudaHostRegister, or a buffer MPI registered) or
** managed memory the copy is asynchronous: it is waited for, for the same
** promise. */
static nvfp4_status cuda_from_host (nvfp4_ctx *ctx, void *dst, const void *src, size_t n) {
  cudaPointerAttributes at;
  if (n == 0) return NVFP4_OK;
  /* a large copy from pageable memory waits for the driver's staging
  ** buffers, which a stuck stream never frees: drained first, as to_host
  ** (a small one, such as a quantize's given amax, is staged at once) */
  if (n > ((size_t)64 << 10) && nvfp4i_cuda_of(ctx)->nccl_comms != NULL)
    CHECK(nvfp4i_cuda_wait(ctx));
  CU_CHECK(ctx, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, nvfp4i_stream(ctx)));
  if (cudaPointerGetAttributes(&at, src) != cudaSuccess) {
    cudaGetLastError();                   /* not known to CUDA: pageable */
    return NVFP4_OK;
  }
  return at.type == cudaMemoryTypeHost || at.type == cudaMemoryTypeManaged ? nvfp4i_cuda_wait(ctx)
                                                                          : NVFP4_OK;
}


/* cudaMemcpy2DAsync refuses a pitch above the device's maximum (2^31 - 1
** on the H200), which a copy of 2 GiB or more reaches (a clone, the first
** dim of a narrow): a contiguous copy (one row, or rows packed on both
** sides) goes as one cudaMemcpyAsync, a wider pitch row by row. */
static nvfp4_status cuda_copy2d (nvfp4_ctx *ctx, void *dst, size_t dld, const void *src,
                                 size_t sld, size_t rows, size_t row_bytes) {
  cudaStream_t s = nvfp4i_stream(ctx);
  size_t r;
  if (rows == 0 || row_bytes == 0) return NVFP4_OK;
  if (rows == 1 || (dld == row_bytes && sld == row_bytes)) {
    CU_CHECK(ctx, cudaMemcpyAsync(dst, src, rows * row_bytes, cudaMemcpyDeviceToDevice, s));
    return NVFP4_OK;
  }
  if (dld > (size_t)INT32_MAX || sld > (size_t)INT32_MAX) {
    for (r = 0; r < rows; r++)
      CU_CHECK(ctx, cudaMemcpyAsync((char *)dst + r * dld, (const char *)src + r * sld, row_bytes,
                                    cudaMemcpyDeviceToDevice, s));
    return NVFP4_OK;
  }
  CU_CHECK(ctx, cudaMemcpy2DAsync(dst, dld, src, sld, row_bytes, rows,
                                  cudaMemcpyDeviceToDevice, s));
  return NVFP4_OK;
}


static nvfp4_status cuda_memset (nvfp4_ctx *ctx, void *dst, int v, size_t n) {
  if (n == 0) return NVFP4_OK;
  CU_CHECK(ctx, cudaMemsetAsync(dst, v, n, nvfp4i_stream(ctx)));
  return NVFP4_OK;
}


static nvfp4_status cuda_sync (nvfp4_ctx *ctx) {
  return nvfp4i_cuda_wait(ctx);
}


extern "C" const nvfp4_backend_ops nvfp4i_cuda_ops = {
  /* .name = */ "cuda",
  /* .init = */ cuda_init,
  /* .fini = */ cuda_fini,
  /* .alloc = */ cuda_alloc,
  /* .alloc_uninit = */ cuda_alloc_uninit,
  /* .free = */ cuda_free,
  /* .to_host = */ cuda_to_host,
  /* .from_host = */ cuda_from_host,
  /* .copy2d = */ cuda_copy2d,
  /* .memset = */ cuda_memset,
  /* .amax = */ nvfp4i_cuda_amax,
  /* .amax_to = */ nvfp4i_cuda_amax_to,
  /* .quantize = */ nvfp4i_cuda_quantize,
  /* .dequantize = */ nvfp4i_cuda_dequantize,
  /* .swap_first_dims = */ nvfp4i_cuda_swap_first_dims,
  /* .sync = */ cuda_sync,
  /* .add_f32 = */ nvfp4i_cuda_add_f32,
  /* .gemm = */ nvfp4i_cuda_gemm,
  /* .convert = */ nvfp4i_cuda_convert,     /* kernels/elementwise.cu */
  /* .bias_add = */ nvfp4i_cuda_bias_add,
  /* .col_sum = */ nvfp4i_cuda_col_sum,
};
