/*
** ref_backend.c -- the CPU backend table: host memory, and the reference
** numerics of lib/ref_quantize.c.  Always built; it is the oracle the CUDA
** backend is compared against (design.md decision 1).
*/
#include <stdlib.h>
#include <string.h>
#include "nvfp4_int.h"
#include "ref_quantize.h"


static nvfp4_status cpu_alloc (nvfp4_ctx *ctx, size_t bytes, void **p) {
  *p = calloc(1, bytes);
  return *p ? NVFP4_OK : NVFP4_ENOMEM;
}


/* No zero fill: for buffers that are overwritten entirely. */
static nvfp4_status cpu_alloc_uninit (nvfp4_ctx *ctx, size_t bytes, void **p) {
  *p = malloc(bytes);
  return *p ? NVFP4_OK : NVFP4_ENOMEM;
}


static void cpu_free (nvfp4_ctx *ctx, void *p) {
  free(p);
}


static nvfp4_status cpu_copy (nvfp4_ctx *ctx, void *dst, const void *src, size_t n) {
  if (n > 0) memcpy(dst, src, n);
  return NVFP4_OK;
}


static nvfp4_status cpu_copy2d (nvfp4_ctx *ctx, void *dst, size_t dld,
                                const void *src, size_t sld, size_t rows,
                                size_t row_bytes) {
  size_t r;
  for (r = 0; r < rows; r++)
    memcpy((char *)dst + r * dld, (const char *)src + r * sld, row_bytes);
  return NVFP4_OK;
}


static nvfp4_status cpu_memset (nvfp4_ctx *ctx, void *dst, int v, size_t n) {
  if (n > 0) memset(dst, v, n);
  return NVFP4_OK;
}


static nvfp4_status cpu_swap_first_dims (nvfp4_ctx *ctx, void *out, const void *in,
                                         int64_t A, int64_t B, size_t inner) {
  int64_t a, b;
  for (b = 0; b < B; b++)
    for (a = 0; a < A; a++)
      memcpy((char *)out + ((size_t)b * (size_t)A + (size_t)a) * inner,
             (const char *)in + ((size_t)a * (size_t)B + (size_t)b) * inner, inner);
  return NVFP4_OK;
}


static nvfp4_status cpu_add_f32 (nvfp4_ctx *ctx, float *acc, const void *src,
                                 nvfp4_dtype dt, size_t n) {
  size_t i;
  if (dt == NVFP4_F32)
    for (i = 0; i < n; i++) acc[i] += ((const float *)src)[i];
  else
    for (i = 0; i < n; i++) acc[i] += nvfp4i_bf16_to_f32(((const uint16_t *)src)[i]);
  return NVFP4_OK;
}


/* The amax pass into dst (backend memory, which is the host's here), as
** the CUDA backend's: the quantize then keeps the amax with its tensor
** until it is asked for (lib/quantize.c, nvfp4i_amax_ready), so that every
** CPU test runs that path too. */
static nvfp4_status cpu_amax_to (nvfp4_ctx *ctx, const nvfp4_tensor *x, int rht,
                                 unsigned sign_mask, float *dst) {
  float a[2];
  CHECK(nvfp4i_ref_amax(ctx, x, rht, sign_mask, a));
  dst[0] = a[0];
  if (rht) dst[1] = a[1];
  return NVFP4_OK;
}


const nvfp4_backend_ops nvfp4i_cpu_ops = {
  .name = "cpu",
  .init = NULL,
  .fini = NULL,
  .alloc = cpu_alloc,
  .alloc_uninit = cpu_alloc_uninit,
  .free = cpu_free,
  .to_host = cpu_copy,
  .from_host = cpu_copy,
  .copy2d = cpu_copy2d,
  .memset = cpu_memset,
  .amax = nvfp4i_ref_amax,
  .amax_to = cpu_amax_to,
  .quantize = nvfp4i_ref_quantize,
  .dequantize = nvfp4i_ref_dequantize,
  .swap_first_dims = cpu_swap_first_dims,
  .sync = NULL,
  .add_f32 = cpu_add_f32,
  .gemm = nvfp4i_cpu_gemm,   /* lib/gemm.c */
  .convert = nvfp4i_cpu_convert,     /* lib/elementwise.c */
  .bias_add = nvfp4i_cpu_bias_add,
  .col_sum = nvfp4i_cpu_col_sum,
};
