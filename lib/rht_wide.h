/*
** rht_wide.h -- the exact 16-point RHT of one output column in 320-bit
** integer arithmetic, for blocks whose inputs span too many binades for an
** exact fp64 sum (spec §8: compute the 16-term sum exactly, round once to
** bf16).  Shared by the CPU reference (lib/ref_codec.c, nvfp4i_rht16) and
** the CUDA kernels (kernels/quantize.cu): static inline, __host__ __device__
** under nvcc, so both run the same code.
*/
#ifndef NVFP4_RHT_WIDE_H
#define NVFP4_RHT_WIDE_H

#include <math.h>
#include <stdint.h>
#include "ref_codec.h"          /* NVFP4I_HD, nvfp4i_f32_bits */

#define NVFP4I_WIDE_WORDS 5     /* two's complement, lsb = 2^-135 */


/* RNE of any double to bf16 bits (frexp/ldexp/rint: every class of input). */
static inline NVFP4I_HD uint16_t nvfp4i_bf16_from_double_any (double d) {
  uint16_t sign = signbit(d) ? 0x8000u : 0u;
  double a = fabs(d), r;
  int ex, qe;
  if (isnan(d)) return 0x7fc0u;          /* one NaN: the sign of a NaN sum differs by machine */
  if (isinf(d)) return (uint16_t)(sign | 0x7f80u);
  if (a == 0.0) return sign;
  frexp(a, &ex);                         /* a = f * 2^ex, f in [0.5, 1) */
  qe = ex - 1 - 7;                       /* lsb of 8 significant bits */
  if (qe < -133) qe = -133;              /* bf16 subnormal quantum */
  r = ldexp(rint(ldexp(a, -qe)), qe);    /* RNE, exact scalings */
  if (r >= 0x1p128) return (uint16_t)(sign | 0x7f80u);
  return (uint16_t)(sign | (nvfp4i_f32_bits((float)r) >> 16));
}


/* acc += sign * (sig << p) */
static inline NVFP4I_HD void nvfp4i_wide_add (uint64_t *acc, uint64_t sig, int p, int neg) {
  uint64_t t[NVFP4I_WIDE_WORDS] = {0, 0, 0, 0, 0}, carry = 0;
  int w = p / 64, b = p % 64, i;
  t[w] = sig << b;
  if (b > 0 && w + 1 < NVFP4I_WIDE_WORDS) t[w + 1] = sig >> (64 - b);
  for (i = 0; i < NVFP4I_WIDE_WORDS; i++) {
    uint64_t x = acc[i], y = t[i], s;
    if (!neg) {
      uint64_t c1;
      s = x + y;
      c1 = s < x;
      s += carry;
      carry = c1 | (s < carry);
    }
    else {
      uint64_t b1 = x < y, s2;
      s = x - y;
      s2 = s - carry;
      carry = b1 | (s < carry);
      s = s2;
    }
    acc[i] = s;
  }
}


static inline NVFP4I_HD int nvfp4i_wide_bit (const uint64_t *acc, int i) {
  return (int)((acc[i / 64] >> (i % 64)) & 1u);
}


/* Round the exact value N * 2^-135 held in acc (clobbered) to bf16 bits. */
static inline NVFP4I_HD uint16_t nvfp4i_wide_to_bf16 (uint64_t *acc) {
  int neg = (int)(acc[NVFP4I_WIDE_WORDS - 1] >> 63), P = -1, rp, i;
  uint64_t q = 0;
  int half, sticky = 0;
  double r;
  if (neg) {                              /* negate: ~x + 1 */
    uint64_t carry = 1;
    for (i = 0; i < NVFP4I_WIDE_WORDS; i++) {
      acc[i] = ~acc[i] + carry;
      carry = carry && acc[i] == 0;
    }
  }
  for (i = NVFP4I_WIDE_WORDS * 64 - 1; i >= 0; i--)
    if (nvfp4i_wide_bit(acc, i)) { P = i; break; }
  if (P < 0) return 0;                    /* exact zero: +0 */
  rp = P - 7 > 2 ? P - 7 : 2;             /* 2^(2-135) = bf16 subnormal lsb */
  for (i = P; i >= rp; i--) q = (q << 1) | (uint64_t)nvfp4i_wide_bit(acc, i);
  half = nvfp4i_wide_bit(acc, rp - 1);
  for (i = rp - 2; i >= 0 && !sticky; i--) sticky = nvfp4i_wide_bit(acc, i);
  if (half && (sticky || (q & 1u))) q++;
  r = ldexp((double)q, rp - 135);
  return nvfp4i_bf16_from_double_any(neg ? -r : r);
}


/* Output column c of the exact RHT of w (signs already applied to w):
** bf16 bits of 0.25 * sum_r w[r] * H[r][c], H[r][c] = (-1)^popcount(r & c). */
static inline NVFP4I_HD uint16_t nvfp4i_rht_wide (const float *w, int c) {
  uint64_t acc[NVFP4I_WIDE_WORDS] = {0, 0, 0, 0, 0};
  int r;
  for (r = 0; r < 16; r++) {
    uint32_t u = nvfp4i_f32_bits(w[r]), rc = (uint32_t)(r & c);
    int E = (int)((u >> 23) & 0xffu);
    uint64_t sig = ((u >> 16) & 0x7fu) | (E ? 0x80u : 0u);
    int neg = (int)(u >> 31) ^ (int)((rc ^ (rc >> 1) ^ (rc >> 2) ^ (rc >> 3)) & 1u);
    if (sig == 0) continue;
    /* value = sig * 2^(max(E,1) - 134); times 1/4 with lsb 2^-135 */
    nvfp4i_wide_add(acc, sig, (E ? E : 1) - 1, neg);
  }
  return nvfp4i_wide_to_bf16(acc);
}

#endif
