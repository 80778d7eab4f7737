/*
** ref_codec.c -- host-only parts of the codecs: rounding an exact double to
** bf16 once, and the exact 16-point random Hadamard transform (spec §8).
** The scalar E2M1/E4M3 codecs are inline in ref_codec.h; the wide-integer
** RHT column and the general double->bf16 rounding in rht_wide.h (shared
** with kernels/quantize.cu).
*/
#include <math.h>
#include <string.h>
#include "ref_codec.h"
#include "rht_wide.h"


/* Fast path for |d| in the bf16 normal range [2^-126, 2^128): RNE of the
** 52-bit double significand to 7 bits on the bit pattern (a carry out of
** the significand bumps the exponent, 2^128 becomes Inf), then rebias the
** exponent 1023 -> 127.  Zeros, subnormal results, Inf and NaN take the
** general path; both give the same bits. */
uint16_t nvfp4i_bf16_from_double (double d) {
  uint64_t u, a, r;
  int e;
  memcpy(&u, &d, sizeof u);
  a = u & 0x7fffffffffffffffull;
  e = (int)(a >> 52);
  if (e < 1023 - 126 || e > 1023 + 127) return nvfp4i_bf16_from_double_any(d);
  r = (a + 0x00000fffffffffffull + ((a >> 45) & 1u)) >> 45;  /* exp | 7 bits */
  e = (int)(r >> 7) - 1023 + 127;
  if (e >= 255) return (uint16_t)(((u >> 48) & 0x8000u) | 0x7f80u);
  return (uint16_t)(((u >> 48) & 0x8000u) | ((unsigned)e << 7) | (unsigned)(r & 0x7fu));
}


/* ---- exact RHT -------------------------------------------------------- */

void nvfp4i_rht16 (const float v[16], unsigned sign_mask, uint16_t out[16]) {
  float w[16];
  double x[16];
  int emin = 1000, emax = -1000, r, h, j, k;
  for (r = 0; r < 16; r++) {
    w[r] = ((sign_mask >> r) & 1u) ? -v[r] : v[r];
    x[r] = w[r];
    if (w[r] != 0.0f) {
      int E = (int)((nvfp4i_f32_bits(w[r]) >> 23) & 0xffu);
      if (E == 0) E = 1;
      if (E < emin) emin = E;
      if (E > emax) emax = E;
    }
  }
  /* an Inf or NaN input (exponent field 255) makes every output of the
  ** transform Inf or NaN, as IEEE arithmetic and TE's tensor cores give it
  ** (each output sums every input): the fp64 butterfly below says which
  ** (NaN from a NaN, or from Infs of both signs in that output's sum); the
  ** wide path would read the field as a number */
  if (emax - emin > 41 && emax < 255) {   /* fp64 might round: go wide */
    for (r = 0; r < 16; r++) out[r] = nvfp4i_rht_wide(w, r);
    return;
  }
  /* Every partial sum is a multiple of 2^(emin-134) below 2^(emax-122):
  ** at most 53 bits, so the fast Walsh-Hadamard butterflies are exact. */
  for (h = 1; h < 16; h <<= 1)
    for (j = 0; j < 16; j += 2 * h)
      for (k = j; k < j + h; k++) {
        double a = x[k], b = x[k + h];
        x[k] = a + b;
        x[k + h] = a - b;
      }
  for (r = 0; r < 16; r++)
    out[r] = x[r] == 0.0 ? 0 : nvfp4i_bf16_from_double(0.25 * x[r]);
}
