/*
** cuda_int.h -- internal interface of the CUDA backend (kernels/): the
** per-context state, the status macros for CUDA/cuBLAS/NCCL failures, and
** the kernel launchers each .cu file exports to kernels/cuda_backend.cu.
** Included only by .cu files (compiled as C++ by nvcc).
*/
#ifndef NVFP4_CUDA_INT_H
#define NVFP4_CUDA_INT_H

#include <cuda_runtime.h>
#include "nvfp4_int.h"

/* cudaMallocAsync for the backend's own temporaries (a GEMM's, col_sum's,
** the quantize workspace), which do not go through nvfp4i_buf_alloc:
** refused as out of memory when nvfp4i_alloc_fail_after says so. */
template <typename T>
static inline cudaError_t nvfp4i_cuda_malloc_async (T **p, size_t bytes, cudaStream_t s) {
  return nvfp4i_alloc_refused() ? cudaErrorMemoryAllocation : cudaMallocAsync((void **)p, bytes, s);
}

/* One per context: everything is queued on `stream` in call order. */
typedef struct nvfp4i_cuda {
  cudaStream_t stream;
  int device;
  void *blas;                  /* cublasHandle_t, created on first GEMM */
  float *amax_dev;             /* 2 floats of scratch for the amax pass */
  float *amax_host;            /* pinned, 2 floats */
  float *gemm_scalars;         /* 2 floats: a GEMM's alpha formed on the device, beta = 0 */
  /* the quantize kernels' workspace (kernels/quantize.cu, ctx_buffer):
  ** the RHT fast path's deferred-block list, the scale gather's scratch */
  void *rht_defer;
  size_t rht_defer_bytes;
  void *scale_gather;
  size_t scale_gather_bytes;
  struct nvfp4_comm *nccl_comms;  /* its comms on NCCL, linked by nccl_next (kernels/cuda_comm.cu) */
  int modules_loaded;          /* the kernel files' modules, loaded with its first NCCL comm */
} nvfp4i_cuda;

static inline nvfp4i_cuda *nvfp4i_cuda_of (nvfp4_ctx *ctx) {
  return (nvfp4i_cuda *)ctx->impl;
}

static inline cudaStream_t nvfp4i_stream (nvfp4_ctx *ctx) {
  return ((nvfp4i_cuda *)ctx->impl)->stream;
}

/* CTAs of `threads` for a grid-stride loop over `work` items: enough to
** cover them, at most `cap` (by default NVFP4I_GRID_CAP: 32 per SM of an
** H100/H200), at least 1. */
#define NVFP4I_GRID_CAP (132 * 32)
static inline unsigned nvfp4i_grid_for (int64_t work, int threads, int64_t cap = NVFP4I_GRID_CAP) {
  int64_t g = (work + threads - 1) / threads;
  if (g > cap) g = cap;
  return (unsigned)(g < 1 ? 1 : g);
}

/* Turn a failed CUDA call into ECUDA naming the call and CUDA's message. */
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_fail (nvfp4_ctx *ctx, cudaError_t e,
                                           const char *call, const char *file,
                                           int line);

#define CU_CHECK(ctx, call)  \
  do { cudaError_t e_ = (call); \
       if (e_ != cudaSuccess) return nvfp4i_cuda_fail((ctx), e_, #call, __FILE__, __LINE__); \
  } while (0)

/* Wait for everything queued on ctx's stream (kernels/cuda_comm.cu).  With
** NCCL comms on ctx, a wait that finds one of them stuck behind a peer's
** failure aborts it: EPEER (a peer's note, or no progress in the comm's
** timeout), ENCCL (NCCL's asynchronous error), the stream drained either
** way; ECUDA with the failing call otherwise. */
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_wait (nvfp4_ctx *ctx);

/* Each kernel file's module loaded (cudaFuncGetAttributes on one of its
** kernels): CUDA's lazy loading (its default) loads a module at its first
** launch and waits for the device to go idle first (kernels/cuda_comm.cu). */
NVFP4I_FUNC cudaError_t nvfp4i_cuda_load_quantize (void);
NVFP4I_FUNC cudaError_t nvfp4i_cuda_load_dequantize (void);
NVFP4I_FUNC cudaError_t nvfp4i_cuda_load_elementwise (void);
NVFP4I_FUNC cudaError_t nvfp4i_cuda_load_gemm (void);
NVFP4I_FUNC cudaError_t nvfp4i_cuda_load_transpose (void);

/* After a kernel launch: a bad configuration shows up here, named by the
** kernel (name: a string literal). */
#define CU_LAUNCHED(ctx, name)  \
  do { cudaError_t e_ = cudaGetLastError(); \
       if (e_ != cudaSuccess) return nvfp4i_cuda_fail((ctx), e_, name " launch", __FILE__, __LINE__); \
  } while (0)

/* Launchers (kernels/quantize.cu, dequantize.cu, transpose.cu, gemm.cu);
** arguments already validated by lib/. */
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_amax (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                           int rht, unsigned sign_mask,
                                           float amax[2]);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_amax_to (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                              int rht, unsigned sign_mask, float *dst);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                               const nvfp4_qopts *o, nvfp4_tensor *q);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                                 nvfp4_tensor *out);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_swap_first_dims (nvfp4_ctx *ctx, void *out,
                                                      const void *in, int64_t A,
                                                      int64_t B, size_t inner);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_add_f32 (nvfp4_ctx *ctx, float *acc,
                                              const void *src, nvfp4_dtype dt,
                                              size_t n);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_gemm (nvfp4_ctx *ctx, const nvfp4i_gemm_operand *a,
                                           const nvfp4i_gemm_operand *b,
                                           const nvfp4_tensor *bias, nvfp4_tensor *d);
NVFP4I_FUNC void nvfp4i_cuda_gemm_fini (nvfp4_ctx *ctx);
/* kernels/elementwise.cu: the convert, bias_add and col_sum entries. */
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_convert (nvfp4_ctx *ctx, void *dst, nvfp4_dtype dst_dt,
                                              const void *src, nvfp4_dtype src_dt,
                                              size_t n);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_bias_add (nvfp4_ctx *ctx, void *y, nvfp4_dtype y_dt,
                                               const void *bias, nvfp4_dtype b_dt,
                                               int64_t rows, int64_t cols);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_col_sum (nvfp4_ctx *ctx, void *out,
                                              nvfp4_dtype out_dt, const void *x,
                                              nvfp4_dtype x_dt, int64_t rows,
                                              int64_t cols);

#endif
