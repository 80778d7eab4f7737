/*
** elementwise.c -- the CPU backend's element-wise entries (nvfp4_int.h:
** convert, bias_add, col_sum), used by the Linear layer (lib/linear.c) and
** the reductions of lib/collectives.c so that a device backend never stages
** tensor elements through host memory.  These are the reference results:
** the CUDA versions (kernels/elementwise.cu) match convert bit for bit,
** bias_add too but for a NaN's sign and payload; col_sum there sums in
** another (fixed) order.
**
** The arithmetic is exactly what lib/linear.c did on the host before these
** entries existed: BF16 is widened exactly, every result is rounded once
** (RNE, spec/nvfp4-numerics.md §10), and grad_bias is the CPU GEMM of the
** columnwise grad_output with a row of ones (the same BLAS call, so the
** same summation order).
*/
#include <stdlib.h>
#include <string.h>
#include "nvfp4_int.h"


static float load (const void *p, nvfp4_dtype dt, size_t i) {
  return dt == NVFP4_F32 ? ((const float *)p)[i]
         : nvfp4i_bf16_to_f32(((const uint16_t *)p)[i]);
}


static void store (void *p, nvfp4_dtype dt, size_t i, float f) {
  if (dt == NVFP4_F32) ((float *)p)[i] = f;
  else ((uint16_t *)p)[i] = nvfp4i_f32_to_bf16(f);
}


/* dst[i] = src[i] in dst_dt; dst and src: n elements of host memory, F32 or
** BF16 (validated by the caller).  Never fails. */
nvfp4_status nvfp4i_cpu_convert (nvfp4_ctx *ctx, void *dst, nvfp4_dtype dst_dt,
                                 const void *src, nvfp4_dtype src_dt, size_t n) {
  size_t i;
  (void)ctx;
  if (n == 0) return NVFP4_OK;
  if (dst_dt == src_dt) {
    memmove(dst, src, n * nvfp4_dtype_size(dst_dt));
    return NVFP4_OK;
  }
  for (i = 0; i < n; i++) store(dst, dst_dt, i, load(src, src_dt, i));
  return NVFP4_OK;
}


/* y [rows, cols] (y_dt) += bias [cols] (b_dt), one fp32 add per element,
** rounded once to y_dt.  Never fails. */
nvfp4_status nvfp4i_cpu_bias_add (nvfp4_ctx *ctx, void *y, nvfp4_dtype y_dt,
                                  const void *bias, nvfp4_dtype b_dt,
                                  int64_t rows, int64_t cols) {
  int64_t r, c;
  (void)ctx;
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c++) {
      size_t i = (size_t)r * (size_t)cols + (size_t)c;
      store(y, y_dt, i, load(y, y_dt, i) + load(bias, b_dt, (size_t)c));
    }
  return NVFP4_OK;
}


/* out [cols] (out_dt) = column sums of x [rows, cols] (x_dt): the CPU GEMM
** (lib/gemm.c) of x read columnwise, [cols, rows] K-major, with a [1, rows]
** row of fp32 ones, alpha 1, exactly as nvfp4_gemm(x, COLUMNWISE, ones,
** ROWWISE) computes it.  ENOMEM (ctx message) when the ones or the fp32
** copy of a BF16 x cannot be allocated. */
nvfp4_status nvfp4i_cpu_col_sum (nvfp4_ctx *ctx, void *out, nvfp4_dtype out_dt,
                                 const void *x, nvfp4_dtype x_dt, int64_t rows,
                                 int64_t cols) {
  nvfp4i_gemm_operand a, b;
  nvfp4_tensor d;
  float *ones;
  nvfp4_status st;
  int64_t i;
  if (cols == 0) return NVFP4_OK;
  ones = (float *)nvfp4i_malloc((size_t)(rows ? rows : 1) * sizeof *ones);
  FAIL_IF(ctx, ones == NULL, NVFP4_ENOMEM,
          "col_sum: out of host memory (%lld ones)", (long long)rows);
  for (i = 0; i < rows; i++) ones[i] = 1.0f;
  memset(&a, 0, sizeof a);
  a.dt = x_dt;
  a.data = x;
  a.trans = 1;
  a.rows = cols;
  a.cols = rows;
  memset(&b, 0, sizeof b);
  b.dt = NVFP4_F32;
  b.data = ones;
  b.rows = 1;
  b.cols = rows;
  memset(&d, 0, sizeof d);
  d.ctx = ctx;
  d.dtype = out_dt;
  d.data.p = out;
  st = nvfp4i_cpu_gemm(ctx, &a, &b, NULL, &d);   /* plain: alpha 1 */
  free(ones);
  return st;
}
