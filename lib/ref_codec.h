/*
** ref_codec.h -- the scalar NVFP4 codecs of the CPU reference, written once
** (spec/nvfp4-numerics.md §1-§5, §10): E2M1 (RNE and stochastic, satfinite),
** E4M3 (RNE, satfinite), the global scale S_enc and the per-block §4 step.
** Everything here is static inline, integer or exactly rounded fp32 only,
** and __host__ __device__ under nvcc, so kernels/ can call the same code.
**
** Decisions (kernel behaviour, spec §1, §2, §17): -0.0 and y in [-0.25, 0)
** encode to E2M1 0x8; NaN encodes to +6 (0x7); E4M3 NaN is 0x7F; |v| >= 448
** and Inf saturate to 448 (0x7E / 0xFE); amax 0 or +Inf gives S_enc = 1.
*/
#ifndef NVFP4_REF_CODEC_H
#define NVFP4_REF_CODEC_H

#include <stdint.h>
#include <float.h>
#include <math.h>
#include "philox.h"              /* NVFP4I_HD */

#ifdef __cplusplus
extern "C" {
#endif

#define NVFP4I_INV6       0.16666667163372040f  /* fl(1/6) = 0x3E2AAAAB */

static inline NVFP4I_HD uint32_t nvfp4i_f32_bits (float f) {
  union { float f; uint32_t u; } v;
  v.f = f;
  return v.u;
}


static inline NVFP4I_HD float nvfp4i_bits_f32 (uint32_t u) {
  union { float f; uint32_t u; } v;
  v.u = u;
  return v.f;
}


/* E2M1 code -> value (§1 table; 0x8 is -0.0). */
static inline NVFP4I_HD float nvfp4i_e2m1_value (unsigned c) {
  unsigned m = c & 7u;                       /* 0 .5 1 1.5 2 3 4 6 */
  float v = m < 4 ? 0.5f * (float)m : m == 7 ? 6.0f : (float)(m - 2);
  return (c & 8) ? -v : v;
}


/* fp32 -> E2M1, round to nearest even, satfinite (cvt.rn.satfinite.e2m1x2).
** Ties: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4; |y| > 6 and
** Inf -> +-6; NaN -> 0x7; the sign is kept for results that round to 0
** (-0.0 -> 0x8).  fp32 subnormals are not flushed (they round to +-0). */
static inline NVFP4I_HD uint8_t nvfp4i_e2m1_encode (float y) {
  uint32_t u = nvfp4i_f32_bits(y);
  float a = nvfp4i_bits_f32(u & 0x7fffffffu);
  /* the interval table as a branch-free count of thresholds passed
  ** (strict where the tie goes down, >= where it goes up) */
  unsigned c = (unsigned)(a > 0.25f) + (unsigned)(a >= 0.75f) +
               (unsigned)(a > 1.25f) + (unsigned)(a >= 1.75f) +
               (unsigned)(a > 2.5f) + (unsigned)(a >= 3.5f) + (unsigned)(a > 5.0f);
  c |= (u >> 28) & 8u;
  return (uint8_t)(((u & 0x7fffffffu) > 0x7f800000u) ? 0x7u : c);   /* NaN */
}


/* The round-to-nearest-even code by two fp32 roundings, for the CUDA fast
** path (kernels/quantize.cu, codes8_fast): for a = |y| in [0, 6.5) returns
** NVFP4I_RN_GRID_BASE + nvfp4i_e2m1_encode(a).  Each term adds a constant
** that leaves one rounding step per grid point, RNE (ties to the even
** integer, as E2M1 ties to the even code):
**   fl(2a + 2^24 - 6) = 2^24 - 6 + rn(2a) for a < 3 (ulp 1): the step-0.5
**     grid of [0, 2);
**   fl(a + 2^24 - 4) = 2^24 - 4 + rn(a) below 4 (ulp 1: the step-1 grid of
**     [2, 4)) and 2^24 + 2 rn((a - 4) / 2) from 4 (ulp 2: the step-2 grid).
** As bits, 2^24 - 6 + n is 0x4B7FFFFA + n and 2^24 + 2n is 0x4B800000 + n:
** both are NVFP4I_RN_GRID_BASE + code where they are right, and each is
** larger where the other is right (the first from a = 1.75, the second
** below), so the smaller bit pattern (positive floats order as their bits)
** is the answer.  The product 2a is exact, so the fma rounds once.  Equal
** to nvfp4i_e2m1_encode for every fp32 a in [0, 6.5) (checked over all of
** them once; test_ref_codec samples the ties).  Spec §1, §5.1; no errors;
** a >= 6.5, Inf and NaN are outside its domain (the caller clamps or takes
** the exact path). */
#define NVFP4I_RN_GRID_BASE 0x4B7FFFFAu

static inline NVFP4I_HD uint32_t nvfp4i_e2m1_rn_grid (float a) {
  uint32_t g1 = nvfp4i_f32_bits(fmaf(a, 2.0f, 16777210.0f));
  uint32_t g2 = nvfp4i_f32_bits(a + 16777212.0f);
  return g1 < g2 ? g1 : g2;
}


/* fp32 -> E2M1 with stochastic rounding by the random byte r (spec §5.2
** software rule): with lo <= |y| < hi the two grid neighbours and
** frac = (|y| - lo) / (hi - lo), round away from zero iff
** frac + r/256 >= 1, evaluated exactly: (|y| - lo)*256 >= (256 - r)*step.
** Grid points stay put; |y| >= 6 and Inf -> +-6; NaN -> 0x7; sign kept. */
static inline NVFP4I_HD uint8_t nvfp4i_e2m1_encode_sr (float y, unsigned r) {
  uint32_t u = nvfp4i_f32_bits(y);
  float a = nvfp4i_bits_f32(u & 0x7fffffffu);
  float step, lo;
  uint8_t c;
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7;
  if (a >= 6.0f) return (uint8_t)(7 | ((u >> 28) & 8u));
  step = a >= 4.0f ? 2.0f : a >= 2.0f ? 1.0f : 0.5f;
  lo = floorf(a / step) * step;              /* exact: step is 2^k */
  /* a - lo is exact (same binade or lo = 0); both products are exact */
  if ((a - lo) * 256.0f >= (float)(256u - (r & 0xffu)) * step) lo += step;
  /* lo is now a grid value: 0, .5, 1, 1.5, 2, 3, 4 or 6 */
  if (lo < 2.0f) c = (uint8_t)(lo * 2.0f);   /* 0..3 */
  else if (lo < 4.0f) c = (uint8_t)(lo + 2.0f);  /* 2 -> 4, 3 -> 5 */
  else c = lo < 6.0f ? 6 : 7;
  return (uint8_t)(c | ((u >> 28) & 8u));
}


/* The stochastic-rounding code by integer arithmetic, for the CUDA fast path
** (kernels/quantize.cu, codes8_sr): z is the bit pattern of a * 2^-126
** rounded toward zero for a = |y| in [0, 8) -- a normal float for a >= 1
** (exponent field 1..3 for the binades [1,2), [2,4), [4,8)), a subnormal
** below (floor(a * 2^23)) -- and r < 256 the random byte.  Bits 22 up of z
** are the code of a rounded down, bits 0..21 the fraction of a step (for
** a < 1 rounded down, which decides nothing: r * 2^14 is an integer), so
** the sum carries into bit 22 exactly when nvfp4i_e2m1_encode_sr rounds
** up.  nvfp4i_e2m1_sr_rz_sum: that sum times 4, 4z + r16 with r16 = r * 2^16
** (the byte already in bits 16..23, as the kernel's byte permute places
** it), below 2^28 since z < 2^25; its bits 24..27 are the code -- the form
** codes8_sr packs from.  nvfp4i_e2m1_sr_rz_term: the magnitude code (0..7),
** or 8 where that is 7 (a >= 6 rounded up).  Spec §5.2; no errors. */
static inline NVFP4I_HD uint32_t nvfp4i_e2m1_sr_rz_sum (uint32_t z, uint32_t r16) {
  return z * 4u + r16;
}

static inline NVFP4I_HD uint32_t nvfp4i_e2m1_sr_rz_term (uint32_t z, uint32_t r) {
  return nvfp4i_e2m1_sr_rz_sum(z, r << 16) >> 24;
}


/* Shift m right by s (1..31) with round to nearest even. */
static inline NVFP4I_HD uint32_t nvfp4i_rne_shift (uint32_t m, int s) {
  uint32_t q, rem, half;
  if (s >= 32) return 0;                     /* m < 2^24 < half */
  q = m >> s;
  rem = m & ((1u << s) - 1u);
  half = 1u << (s - 1);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return q;
}


/* fp32 -> E4M3 ("fn": no Inf, 0x7F NaN), RNE, satfinite
** (cvt.rn.satfinite.e4m3x2.f32): |v| >= 448 (and Inf) -> +-448 (464 is a
** tie that goes to 448), |v| <= 2^-10 -> +-0, NaN -> 0x7F, sign kept. */
static inline NVFP4I_HD uint8_t nvfp4i_e4m3_encode (float v) {
  uint32_t u = nvfp4i_f32_bits(v);
  uint32_t a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u, m, q;
  int e;
  if (a > 0x7f800000u) return 0x7F;
  if (a >= 0x43e00000u) return (uint8_t)(0x7E | sign);          /* 448 */
  e = (int)(a >> 23);                                           /* biased */
  m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
  if (e == 0) e = 1;                         /* fp32 subnormal: 2^-149 lsb */
  if (e - 127 < -6) {
    /* E4M3 subnormal: count units of 2^-9; value = m * 2^(e-150) */
    q = nvfp4i_rne_shift(m, 141 - e);        /* 0..8; 8 is min normal 0x08 */
    return (uint8_t)(q | sign);
  }
  q = nvfp4i_rne_shift(m, 20);               /* 8..16, 16 carries */
  return (uint8_t)((((uint32_t)(e - 127 + 7) << 3) + (q - 8)) | sign);
}


/* E4M3 byte -> exact fp32 value (NaN for 0x7F/0xFF). */
static inline NVFP4I_HD float nvfp4i_e4m3_value (unsigned b) {
  unsigned E = (b >> 3) & 15u, M = b & 7u;
  float v;
  if (E == 15 && M == 7) return nvfp4i_bits_f32(0x7fc00000u);
  if (E == 0) v = (float)M * 0.001953125f;               /* M * 2^-9 */
  else v = nvfp4i_bits_f32(((E - 7 + 127) << 23) | (M << 20));
  return (b & 0x80u) ? -v : v;
}


/* Global encode scale (spec §3.2, main kernels) for E4M3 maximum emax
** (448, or 256 with 4over6, §3.3): amax 0 -> 1; otherwise
** fminf(fl(6*emax/amax), FLT_MAX), and a result of 0 (amax = +Inf) -> 1.
** A NaN amax gives FLT_MAX. */
static inline NVFP4I_HD float nvfp4i_senc_e (float amax, float emax) {
  float t;
  if (amax == 0.0f) return 1.0f;
  t = fminf((6.0f * emax) / amax, FLT_MAX);     /* 2688 or 1536: exact */
  return t == 0.0f ? 1.0f : t;
}

static inline NVFP4I_HD float nvfp4i_senc (float amax) {
  return nvfp4i_senc_e(amax, 448.0f);
}


/* Per-tensor constants of one direction (spec §4 steps 1-2). */
typedef struct nvfp4i_gscale {
  float s_enc;          /* S_enc */
  float s_dec;          /* fl(1/S_enc) */
  float m;              /* fl(S_enc * fl(1/6)) */
} nvfp4i_gscale;

static inline NVFP4I_HD nvfp4i_gscale nvfp4i_gscale_make_e (float amax, float emax) {
  nvfp4i_gscale g;
  g.s_enc = nvfp4i_senc_e(amax, emax);
  g.s_dec = 1.0f / g.s_enc;
  g.m = g.s_enc * NVFP4I_INV6;
  return g;
}

static inline NVFP4I_HD nvfp4i_gscale nvfp4i_gscale_make (float amax) {
  return nvfp4i_gscale_make_e(amax, 448.0f);
}


/* Spec §4 steps 4-6 for a block of amax a_b (NaN-free, >= 0): returns the
** E4M3 scale byte and sets *enc, the multiplier applied to every element:
** s = fminf(fl(a_b*m), FLT_MAX); sf = e4m3(s);
** enc = fminf(fl(1 / fl(sf32 * S_dec)), FLT_MAX). */
/* The multiplier of scale byte sf (spec §4 step 6):
** fminf(fl(1 / fl(sf32 * S_dec)), FLT_MAX). */
static inline NVFP4I_HD float nvfp4i_scale_enc (unsigned sf, float s_dec) {
  float d = nvfp4i_e4m3_value(sf) * s_dec;
  return fminf(1.0f / d, FLT_MAX);
}

static inline NVFP4I_HD uint8_t nvfp4i_block_scale (float a_b, nvfp4i_gscale g,
                                                    float *enc) {
  float s = fminf(a_b * g.m, FLT_MAX);
  uint8_t sf = nvfp4i_e4m3_encode(s);
  *enc = nvfp4i_scale_enc(sf, g.s_dec);
  return sf;
}


/* ---- 4over6 (spec §9.1), shared by lib/ref_quantize.c and kernels/ -------
** The arithmetic only; each side encodes with its own E4M3/E2M1 encoder. */

/* The two candidate scales of block (tile) amax a_b before E4M3 encoding:
** t[0] map-to-4 = fminf(fl(base*1.5), 448), t[1] map-to-6 = fminf(base,
** 448), base = fl(fl(a_b/6) * S_enc) (a division, unlike §4). */
static inline NVFP4I_HD void nvfp4i_fo6_targets (float a_b, float s_enc, float t[2]) {
  float base = (a_b / 6.0f) * s_enc;
  t[0] = fminf(base * 1.5f, 448.0f);
  t[1] = fminf(base, 448.0f);
}

/* The error of 16 elements x encoded as codes c with scale byte sf: the
** fp32 running sum, in element order, of |d| (MAE) or fl(d*d) (MSE), d =
** fl(fl(fl(fl(q*sf)*amax) / e6) - x), e6 = 6*EMAX. */
static inline NVFP4I_HD float nvfp4i_fo6_error (const float *x, const uint8_t *c, unsigned sf,
                                                float amax, float e6, int mse) {
  float s = nvfp4i_e4m3_value(sf), err = 0.0f;
  int i;
  for (i = 0; i < 16; i++) {
    float d = ((nvfp4i_e2m1_value(c[i]) * s) * amax) / e6 - x[i];
    err += mse ? d * d : fabsf(d);
  }
  return err;
}

/* A 2D tile's error from its 16 row errors e (overwritten), in TE's
** shuffle-tree order: r + r+8, then +4, +2, +1. */
static inline NVFP4I_HD float nvfp4i_fo6_tree_sum (float *e) {
  int h, r;
  for (h = 8; h >= 1; h >>= 1)
    for (r = 0; r < h; r++) e[r] += e[r + h];
  return e[0];
}


/* Dequantization factor of a block (spec §10): fl(fl(sf32 * amax) *
** fl(1/(6*emax))), fl(1/2688) for emax 448, fl(1/1536) for 256. */
static inline NVFP4I_HD float nvfp4i_dequant_scale_e (uint8_t sf, float amax, float emax) {
  return (nvfp4i_e4m3_value(sf) * amax) * (1.0f / (6.0f * emax));
}

static inline NVFP4I_HD float nvfp4i_dequant_scale (uint8_t sf, float amax) {
  return nvfp4i_dequant_scale_e(sf, amax, 448.0f);
}


/* ---- host-only helpers (lib/ref_codec.c) ------------------------------ */
/* Round a double to bf16 bits once, RNE, with bf16 subnormals and overflow
** to +-Inf; NaN -> quiet NaN.  Exact for exact inputs (no double rounding
** through fp32). */
uint16_t nvfp4i_bf16_from_double (double d);

/* The 16-point RHT of spec §8: out_c = bf16_rn(0.25 * sum_r v_r s_r H[r][c])
** with s_r = -1 iff bit r of sign_mask is set, H the Sylvester Hadamard
** matrix; the sum is exact (fp64 fast path when exact, otherwise a wide
** integer accumulator), rounded once.  An exactly-zero sum gives +0.
** v: 16 values that are exact bf16 values (as fp32); out: bf16 bits. */
void nvfp4i_rht16 (const float v[16], unsigned sign_mask, uint16_t out[16]);

#ifdef __cplusplus
}
#endif
#endif
