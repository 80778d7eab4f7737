/*
** ref_codec.c -- host-only parts of the codecs: rounding an exact double to
** bf16 once, and the exact 16-point random Hadamard transform (spec §8).
** The scalar E2M1/E4M3 codecs are inline in ref_codec.h.
*/
#include <math.h>
#include <string.h>
#include "ref_codec.h"


/* The general case: frexp/ldexp/nearbyint, every class of input. */
static uint16_t bf16_from_double_slow (double d) {
  uint16_t sign = signbit(d) ? 0x8000u : 0u;
  double a = fabs(d), r;
  int ex, qe;
  if (isnan(d)) return (uint16_t)(sign | 0x7fc0u);
  if (isinf(d)) return (uint16_t)(sign | 0x7f80u);
  if (a == 0.0) return sign;
  frexp(a, &ex);                         /* a = f * 2^ex, f in [0.5, 1) */
  qe = ex - 1 - 7;                       /* lsb of 8 significant bits */
  if (qe < -133) qe = -133;              /* bf16 subnormal quantum */
  r = ldexp(nearbyint(ldexp(a, -qe)), qe);  /* RNE, exact scalings */
  if (r >= 0x1p128) return (uint16_t)(sign | 0x7f80u);
  return (uint16_t)(sign | (nvfp4i_f32_bits((float)r) >> 16));
}


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
  if (e < 1023 - 126 || e > 1023 + 127) return bf16_from_double_slow(d);
  r = (a + 0x00000fffffffffffull + ((a >> 45) & 1u)) >> 45;  /* exp | 7 bits */
  e = (int)(r >> 7) - 1023 + 127;
  if (e >= 255) return (uint16_t)(((u >> 48) & 0x8000u) | 0x7f80u);
  return (uint16_t)(((u >> 48) & 0x8000u) | ((unsigned)e << 7) | (unsigned)(r & 0x7fu));
}


/* ---- exact RHT -------------------------------------------------------- */

#define WIDE_WORDS 5        /* 320-bit two's complement, lsb = 2^-135 */

/* acc += sign * (sig << p) */
static void wide_add (uint64_t acc[WIDE_WORDS], uint64_t sig, int p, int neg) {
  uint64_t t[WIDE_WORDS] = {0, 0, 0, 0, 0}, carry = 0;
  int w = p / 64, b = p % 64, i;
  t[w] = sig << b;
  if (b > 0 && w + 1 < WIDE_WORDS) t[w + 1] = sig >> (64 - b);
  for (i = 0; i < WIDE_WORDS; i++) {
    uint64_t x = acc[i], y = t[i], s;
    if (!neg) {
      s = x + y;
      uint64_t c1 = s < x;
      s += carry;
      carry = c1 | (s < carry);
    }
    else {
      s = x - y;
      uint64_t b1 = x < y;
      uint64_t s2 = s - carry;
      carry = b1 | (s < carry);
      s = s2;
    }
    acc[i] = s;
  }
}


static int wide_bit (const uint64_t acc[WIDE_WORDS], int i) {
  return (int)((acc[i / 64] >> (i % 64)) & 1u);
}


/* Round the exact value N * 2^-135 held in acc to bf16 bits. */
static uint16_t wide_to_bf16 (uint64_t acc[WIDE_WORDS]) {
  int neg = (int)(acc[WIDE_WORDS - 1] >> 63), P = -1, rp, i;
  uint64_t q = 0;
  int half, sticky = 0;
  double r;
  if (neg) {                              /* negate: ~x + 1 */
    uint64_t carry = 1;
    for (i = 0; i < WIDE_WORDS; i++) {
      acc[i] = ~acc[i] + carry;
      carry = carry && acc[i] == 0;
    }
  }
  for (i = WIDE_WORDS * 64 - 1; i >= 0; i--)
    if (wide_bit(acc, i)) { P = i; break; }
  if (P < 0) return 0;                    /* exact zero: +0 */
  rp = P - 7 > 2 ? P - 7 : 2;             /* 2^(2-135) = bf16 subnormal lsb */
  for (i = P; i >= rp; i--) q = (q << 1) | (uint64_t)wide_bit(acc, i);
  half = wide_bit(acc, rp - 1);
  for (i = rp - 2; i >= 0 && !sticky; i--) sticky = wide_bit(acc, i);
  if (half && (sticky || (q & 1u))) q++;
  r = ldexp((double)q, rp - 135);
  return nvfp4i_bf16_from_double(neg ? -r : r);
}


static uint16_t rht_wide (const float w[16], int c) {
  uint64_t acc[WIDE_WORDS] = {0, 0, 0, 0, 0};
  int r;
  for (r = 0; r < 16; r++) {
    uint32_t u = nvfp4i_f32_bits(w[r]);
    int E = (int)((u >> 23) & 0xffu);
    uint64_t sig = ((u >> 16) & 0x7fu) | (E ? 0x80u : 0u);
    int neg = (int)(u >> 31) ^ (__builtin_popcount((unsigned)(r & c)) & 1);
    if (sig == 0) continue;
    /* value = sig * 2^(max(E,1) - 134); times 1/4 with lsb 2^-135 */
    wide_add(acc, sig, (E ? E : 1) - 1, neg);
  }
  return wide_to_bf16(acc);
}


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
  if (emax - emin > 41) {                 /* fp64 might round: go wide */
    for (r = 0; r < 16; r++) out[r] = rht_wide(w, r);
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
