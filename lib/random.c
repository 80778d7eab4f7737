/*
** random.c -- reproducible random tensors.  Values are generated on the
** host with Philox4x32-10 (lib/philox.h) keyed by the seed, then copied to
** the context's memory with ops->from_host, so every backend holds the same
** bits for one seed.
**
** Mapping (element index i = row-major flat index of the tensor):
**   uniform: word (i & 3) of philox(key = seed, counter = {n lo32, n hi32,
**            2, 0}), n = i >> 2;  u = (word >> 8) * 2^-24 in [0, 1);
**            value = lo + (hi - lo) * u in double, rounded once to dt.
**   randn:   block n = i >> 2 of philox(key = seed, counter = {n lo32,
**            n hi32, 3, 0}) = words w0..w3; element i uses the pair
**            p = (i >> 1) & 1: u1 = (w[2p] + 1) * 2^-32 in (0, 1],
**            u2 = w[2p+1] * 2^-32, r = sqrt(-2 ln u1), and r cos(2 pi u2)
**            for even i, r sin(2 pi u2) for odd i (Box-Muller), in double,
**            rounded once to dt.
** Counter word 2 (2 and 3) keeps these streams apart from the SR streams
** (0 rowwise, 1 columnwise) under the same seed.  Values computed with the
** host libm (log, cos, sin): identical for one libm; across libm versions a
** rare last-bit difference is possible.  Uniform values may round up to hi
** itself in bf16.
*/
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include "nvfp4_int.h"
#include "philox.h"
#include "ref_codec.h"

#define STREAM_UNIFORM  2
#define STREAM_NORMAL   3


static void store (void *buf, nvfp4_dtype dt, int64_t i, double v) {
  if (dt == NVFP4_F32) ((float *)buf)[i] = (float)v;
  else ((uint16_t *)buf)[i] = nvfp4i_bf16_from_double(v);
}


/* Common part: validate, fill a host buffer with gen(), copy to ctx. */
static nvfp4_status make_random (nvfp4_ctx *ctx, nvfp4_shape shape,
                                 nvfp4_dtype dt, uint64_t seed, int normal,
                                 double lo, double hi, const char *what,
                                 nvfp4_tensor **out) {
  nvfp4_tensor *t;
  nvfp4_status st = NVFP4_OK;
  void *host;
  int64_t n, i;
  uint32_t w[4];
  double r = 0.0;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  FAIL_IF(ctx, out == NULL, NVFP4_EINVAL, "%s: out is NULL", what);
  FAIL_IF(ctx, dt != NVFP4_F32 && dt != NVFP4_BF16, NVFP4_EINVAL,
          "%s: dtype %s is not fp32 or bf16", what, NVFP4I_DTYPE(dt));
  FAIL_IF(ctx, !normal && !(isfinite(lo) && isfinite(hi) && lo < hi),
          NVFP4_EINVAL, "%s: range [%g, %g) is empty or not finite", what,
          isnan(lo) ? (double)NAN : lo, isnan(hi) ? (double)NAN : hi);  /* "nan", never "-nan" */
  {
    /* the values lie in [lo, hi]: bounds the dtype holds keep them finite */
    const double vmax = dt == NVFP4_BF16 ? 0x1.FEp127 : (double)FLT_MAX;
    FAIL_IF(ctx, !normal && (fabs(lo) > vmax || fabs(hi) > vmax), NVFP4_EINVAL,
            "%s: range [%g, %g) leaves %s's finite range (|bound| <= %g)", what, lo, hi,
            nvfp4_dtype_name(dt), vmax);
  }
  CHECK(nvfp4i_check_plain(ctx, what, shape, dt));    /* named after this call */
  CHECK(nvfp4i_tensor_alloc_plain(ctx, shape, dt, &t));
  n = nvfp4_shape_numel(shape);
  if (n == 0) { *out = t; return NVFP4_OK; }
  host = nvfp4i_malloc(t->data.nbytes);
  if (host == NULL) {
    const size_t nbytes = t->data.nbytes;       /* named after t is gone */
    nvfp4_tensor_destroy(t);
    return nvfp4i_fail(ctx, NVFP4_ENOMEM, "%s: cannot allocate %zu host bytes", what, nbytes);
  }
  for (i = 0; i < n; i++) {
    if ((i & 3) == 0)
      nvfp4i_philox_block_words(seed, (uint64_t)i >> 2, normal ? STREAM_NORMAL : STREAM_UNIFORM, w);
    if (normal) {
      int p = (int)((i >> 1) & 1);
      double u2 = (double)w[2 * p + 1] * 0x1p-32;
      if ((i & 1) == 0)   /* the pair's radius, once (i starts even) */
        r = sqrt(-2.0 * log(((double)w[2 * p] + 1.0) * 0x1p-32));
      store(host, dt, i, (i & 1) ? r * sin(2.0 * M_PI * u2) : r * cos(2.0 * M_PI * u2));
    }
    else
      store(host, dt, i, lo + (hi - lo) * ((double)(w[i & 3] >> 8) * 0x1p-24));
  }
  st = ctx->ops->from_host(ctx, t->data.p, host, t->data.nbytes);
  free(host);
  if (st != NVFP4_OK) {
    nvfp4_tensor_destroy(t);
    return st;
  }
  *out = t;
  return NVFP4_OK;
}


nvfp4_status nvfp4_tensor_randn (nvfp4_ctx *ctx, nvfp4_shape shape,
                                 nvfp4_dtype dt, uint64_t seed,
                                 nvfp4_tensor **out) {
  return make_random(ctx, shape, dt, seed, 1, 0.0, 1.0, "randn", out);
}


nvfp4_status nvfp4_tensor_uniform (nvfp4_ctx *ctx, nvfp4_shape shape,
                                   nvfp4_dtype dt, uint64_t seed, double lo,
                                   double hi, nvfp4_tensor **out) {
  return make_random(ctx, shape, dt, seed, 0, lo, hi, "uniform", out);
}
