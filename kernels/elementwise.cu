/*
** elementwise.cu -- the CUDA backend's element-wise entries (nvfp4_int.h:
** convert, bias_add, col_sum), so that the Linear layer and the reductions
** of lib/collectives.c keep tensor elements on the device.  The CPU
** versions, the reference, are in lib/elementwise.c.
**
**   convert   F32 <-> BF16 (RNE, NaN kept quiet: bit for bit the CPU's
**             nvfp4i_f32_to_bf16), or a device copy for equal dtypes.
**   bias_add  y[r][c] = fl(fp32(y[r][c]) + fp32(bias[c])): one IEEE add
**             (__fadd_rn) and one rounding, bit for bit the CPU's except
**             for a NaN's sign and payload (CUDA's add returns the
**             canonical NaN; a NaN stays a NaN).
**   col_sum   out[c] = sum over r of x[r][c] in fp32, in this fixed order
**             (so a run repeats itself bit for bit; not the CPU's BLAS
**             order): rows are cut into chunks of CHUNK rows (more when
**             there would be over 65535 chunks); pass 1 sums each chunk's
**             rows in increasing r from +0.0f into partial[chunk][c]; pass 2
**             sums the partials in increasing chunk order from +0.0f and
**             rounds once to out_dt.
**
** Every entry only enqueues work on the context's stream.
*/
#include <stdint.h>
#include <stdio.h>
#include "config.h"
#include "cuda_int.h"

#define CHUNK 256
#define THREADS 256


static __device__ __forceinline__ float ld (const void *p, int bf16, int64_t i) {
  return bf16 ? __uint_as_float((uint32_t)((const uint16_t *)p)[i] << 16)
              : ((const float *)p)[i];
}


static __device__ __forceinline__ void st (void *p, int bf16, int64_t i, float f) {
  if (bf16) ((uint16_t *)p)[i] = nvfp4i_f32_to_bf16(f);
  else ((float *)p)[i] = f;
}


static __global__ void convert_kernel (void *dst, int dst_bf16, const void *src, int src_bf16,
                                int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    st(dst, dst_bf16, i, ld(src, src_bf16, i));
}


nvfp4_status nvfp4i_cuda_convert (nvfp4_ctx *ctx, void *dst, nvfp4_dtype dst_dt,
                                             const void *src, nvfp4_dtype src_dt, size_t n) {
  cudaStream_t s = nvfp4i_stream(ctx);
  if (n == 0) return NVFP4_OK;
  if (dst_dt == src_dt) {
    CU_CHECK(ctx, cudaMemcpyAsync(dst, src, n * nvfp4_dtype_size(dst_dt),
                                  cudaMemcpyDeviceToDevice, s));
    return NVFP4_OK;
  }
  convert_kernel<<<nvfp4i_grid_for((int64_t)n, THREADS), THREADS, 0, s>>>(dst, dst_dt == NVFP4_BF16, src,
                                                                         src_dt == NVFP4_BF16, (int64_t)n);
  CU_LAUNCHED(ctx, "convert");
  return NVFP4_OK;
}


/* blockIdx.x: a run of THREADS columns; rows strided by gridDim.y. */
static __global__ void bias_add_kernel (void *y, int y_bf16, const void *bias, int b_bf16,
                                 int64_t rows, int64_t cols) {
  int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float b = ld(bias, b_bf16, c);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    int64_t i = r * cols + c;
    st(y, y_bf16, i, __fadd_rn(ld(y, y_bf16, i), b));
  }
}


nvfp4_status nvfp4i_cuda_bias_add (nvfp4_ctx *ctx, void *y, nvfp4_dtype y_dt,
                                              const void *bias, nvfp4_dtype b_dt,
                                              int64_t rows, int64_t cols) {
  cudaStream_t s = nvfp4i_stream(ctx);
  int64_t gx = (cols + THREADS - 1) / THREADS, gy;
  if (rows <= 0 || cols <= 0) return NVFP4_OK;
  FAIL_IF(ctx, gx > 0x7fffffff, NVFP4_EINVAL, "bias_add: %lld columns need %lld blocks of "
          "%d threads, more than a CUDA grid's 2^31-1", (long long)cols, (long long)gx, THREADS);
  gy = (4096 + gx - 1) / gx;            /* about 4096 blocks in all */
  if (gy > rows) gy = rows;
  if (gy > 65535) gy = 65535;
  bias_add_kernel<<<dim3((unsigned)gx, (unsigned)gy), THREADS, 0, s>>>(
      y, y_dt == NVFP4_BF16, bias, b_dt == NVFP4_BF16, rows, cols);
  CU_LAUNCHED(ctx, "bias_add");
  return NVFP4_OK;
}


/* Pass 1: partial[blockIdx.y][c] = sum of rows [y*chunk, (y+1)*chunk). */
static __global__ void col_sum_partial (float *partial, const void *x, int x_bf16, int64_t rows,
                                 int64_t cols, int64_t chunk) {
  int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t r0 = blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
  float acc = 0.0f;
  if (c >= cols) return;
#pragma unroll 8
  for (int64_t r = r0; r < r1; r++) acc = __fadd_rn(acc, ld(x, x_bf16, r * cols + c));
  partial[blockIdx.y * cols + c] = acc;
}


/* Pass 2: out[c] = sum of partial[k][c] for k = 0, 1, ..; rounded once. */
static __global__ void col_sum_final (void *out, int out_bf16, const float *partial,
                               int64_t nchunks, int64_t cols) {
  int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  float acc = 0.0f;
  if (c >= cols) return;
  for (int64_t k = 0; k < nchunks; k++) acc = __fadd_rn(acc, partial[k * cols + c]);
  st(out, out_bf16, c, acc);
}


nvfp4_status nvfp4i_cuda_col_sum (nvfp4_ctx *ctx, void *out, nvfp4_dtype out_dt,
                                             const void *x, nvfp4_dtype x_dt, int64_t rows,
                                             int64_t cols) {
  cudaStream_t s = nvfp4i_stream(ctx);
  int64_t gx = (cols + THREADS - 1) / THREADS, chunk = CHUNK, nchunks;
  float *partial = NULL;
  nvfp4_status st_ = NVFP4_OK;
  if (cols <= 0) return NVFP4_OK;
  FAIL_IF(ctx, gx > 0x7fffffff, NVFP4_EINVAL, "col_sum: %lld columns need %lld blocks of "
          "%d threads, more than a CUDA grid's 2^31-1", (long long)cols, (long long)gx, THREADS);
  if (rows > 65535 * chunk) chunk = (rows + 65534) / 65535;
  nchunks = rows > 0 ? (rows + chunk - 1) / chunk : 1;
  {
    const cudaError_t e = nvfp4i_cuda_malloc_async((void **)&partial, (size_t)nchunks * (size_t)cols * sizeof(float), s);
    if (e != cudaSuccess) {             /* ENOMEM when out of memory, else ECUDA */
      char what[96];
      snprintf(what, sizeof what, "col_sum: cudaMallocAsync of %lld x %lld fp32 partial sums",
               (long long)nchunks, (long long)cols);
      return nvfp4i_cuda_fail(ctx, e, what, __FILE__, __LINE__);
    }
  }
  col_sum_partial<<<dim3((unsigned)gx, (unsigned)nchunks), THREADS, 0, s>>>(
      partial, x, x_dt == NVFP4_BF16, rows, cols, chunk);
  col_sum_final<<<(unsigned)gx, THREADS, 0, s>>>(out, out_dt == NVFP4_BF16, partial,
                                                 nchunks, cols);
  {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) st_ = nvfp4i_cuda_fail(ctx, e, "col_sum launch", __FILE__, __LINE__);
  }
  cudaFreeAsync(partial, s);
  return st_;
}


/* Load this file's module now: under CUDA's lazy loading its first launch
** would wait for the device to go idle (kernels/cuda_comm.cu,
** nvfp4i_cuda_load_modules). */
cudaError_t nvfp4i_cuda_load_elementwise (void) {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, convert_kernel);
}
