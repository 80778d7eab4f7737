/*
** test_ref_codec.c -- lib/ref_codec.[ch]: E2M1 (RNE exhaustive over bf16,
** stochastic rounding, the CUDA fast path's forms of both), E4M3 (all 256
** bytes, every tie point, saturation), S_enc edge cases, bf16 rounding of
** doubles and the exact 16-point RHT (spec/nvfp4-numerics.md §1-§5, §8).
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <float.h>
#include <string.h>
#include <cmocka.h>
#include "ref_codec.h"
#include "nvfp4_int.h"

static const float e2m1_mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};


/* Independent E2M1 RNE: the nearest grid magnitude, ties to the code with
** an even mantissa bit (even code), then satfinite, NaN -> 0x7. */
static unsigned e2m1_nearest (float y) {
  double a = fabs((double)y), best = 1e300;
  unsigned c, pick = 0;
  if (isnan(y)) return 0x7;
  if (a > 6.0) pick = 7;
  else
    for (c = 0; c < 8; c++) {
      double d = fabs(a - e2m1_mag[c]);
      if (d < best || (d == best && (c & 1) == 0)) { best = d; pick = c; }
    }
  return pick | (signbit(y) ? 8u : 0u);
}


static void test_e2m1_exhaustive_bf16 (void **state) {
  unsigned h;
  for (h = 0; h < 65536; h++) {
    float y = nvfp4i_bf16_to_f32((uint16_t)h);
    unsigned got = nvfp4i_e2m1_encode(y), want = e2m1_nearest(y);
    if (got != want) fail_msg("bf16 0x%04x (%g): code 0x%x, expected 0x%x", h, y, got, want);
  }
}


/* The interval table of spec §1 at fp32 resolution around each boundary. */
static void test_e2m1_interval_table (void **state) {
  static const struct { float b; unsigned at, below, above; } t[] = {
    {0.25f, 0, 0, 1}, {0.75f, 2, 1, 2}, {1.25f, 2, 2, 3}, {1.75f, 4, 3, 4},
    {2.5f, 4, 4, 5}, {3.5f, 6, 5, 6}, {5.0f, 6, 6, 7}, {6.0f, 7, 7, 7},
  };
  unsigned i;
  for (i = 0; i < sizeof t / sizeof t[0]; i++) {
    assert_int_equal(nvfp4i_e2m1_encode(t[i].b), t[i].at);
    assert_int_equal(nvfp4i_e2m1_encode(nextafterf(t[i].b, 0)), t[i].below);
    assert_int_equal(nvfp4i_e2m1_encode(nextafterf(t[i].b, 100)), t[i].above);
    assert_int_equal(nvfp4i_e2m1_encode(-t[i].b), t[i].at | 8);
  }
  assert_int_equal(nvfp4i_e2m1_encode(7.0f), 0x7);
  assert_int_equal(nvfp4i_e2m1_encode(-6.5f), 0xF);
  assert_int_equal(nvfp4i_e2m1_encode(INFINITY), 0x7);
  assert_int_equal(nvfp4i_e2m1_encode(-INFINITY), 0xF);
  assert_int_equal(nvfp4i_e2m1_encode(FLT_MAX), 0x7);
  assert_int_equal(nvfp4i_e2m1_encode(NAN), 0x7);
  assert_int_equal(nvfp4i_e2m1_encode(-NAN), 0x7);
  assert_int_equal(nvfp4i_e2m1_encode(-0.0f), 0x8);
  assert_int_equal(nvfp4i_e2m1_encode(0.0f), 0x0);
  assert_int_equal(nvfp4i_e2m1_encode(-0.1f), 0x8);
  assert_int_equal(nvfp4i_e2m1_encode(FLT_TRUE_MIN), 0x0);
  assert_int_equal(nvfp4i_e2m1_encode(-FLT_TRUE_MIN), 0x8);
}


static void test_e2m1_decode (void **state) {
  unsigned c;
  for (c = 0; c < 16; c++) {
    float v = nvfp4i_e2m1_value(c);
    assert_true(fabsf(v) == e2m1_mag[c & 7]);
    assert_int_equal(signbit(v) != 0, (c & 8) != 0);
    assert_int_equal(nvfp4i_e2m1_encode(v), c);        /* round trip */
  }
}


/* Spec §5.2 worked examples, and grid points / saturation / NaN. */
static void test_e2m1_sr_examples (void **state) {
  unsigned r;
  assert_int_equal(nvfp4i_e2m1_encode_sr(2.3f, 179), 0x4);
  assert_int_equal(nvfp4i_e2m1_encode_sr(2.3f, 180), 0x5);
  assert_int_equal(nvfp4i_e2m1_encode_sr(0.3f, 102), 0x0);
  assert_int_equal(nvfp4i_e2m1_encode_sr(0.3f, 103), 0x1);
  assert_int_equal(nvfp4i_e2m1_encode_sr(-1.2f, 153), 0xA);
  assert_int_equal(nvfp4i_e2m1_encode_sr(-1.2f, 154), 0xB);
  assert_int_equal(nvfp4i_e2m1_encode_sr(5.0f, 127), 0x6);
  assert_int_equal(nvfp4i_e2m1_encode_sr(5.0f, 128), 0x7);
  assert_int_equal(nvfp4i_e2m1_encode_sr(3.75f, 63), 0x5);
  assert_int_equal(nvfp4i_e2m1_encode_sr(3.75f, 64), 0x6);
  /* BH-08: 0.30078125 rounds up for 154 of the 256 byte values */
  assert_int_equal(nvfp4i_e2m1_encode_sr(0.30078125f, 101), 0x0);
  assert_int_equal(nvfp4i_e2m1_encode_sr(0.30078125f, 102), 0x1);
  /* the exact rule, where the spec's fallback floor(fmaf(r/256, step, a)) is not:
  ** frac + r/256 = 0.44140622.. + 0.55859375 < 1, but the fma rounds to 0.5
  ** (lib/NUMERICS.md, found by an independent implementation) */
  assert_true(floorf(fmaf(143.0f / 256.0f, 0.5f, 0.22070311f) / 0.5f) == 1.0f);
  assert_int_equal(nvfp4i_e2m1_encode_sr(-0.22070311f, 143), 0x8);
  assert_int_equal(nvfp4i_e2m1_encode_sr(-0.22070311f, 144), 0x9);
  for (r = 0; r < 256; r++) {
    unsigned c;
    for (c = 0; c < 16; c++)             /* grid values never move */
      assert_int_equal(nvfp4i_e2m1_encode_sr(nvfp4i_e2m1_value(c), r), c);
    assert_int_equal(nvfp4i_e2m1_encode_sr(7.5f, r), 0x7);
    assert_int_equal(nvfp4i_e2m1_encode_sr(-INFINITY, r), 0xF);
    assert_int_equal(nvfp4i_e2m1_encode_sr(NAN, r), 0x7);
    assert_int_equal(nvfp4i_e2m1_encode_sr(-1e-30f, r), 0x8);
  }
}


/* Over all 256 bytes the SR mean is y rounded down to a multiple of
** step/256 (exactly unbiased up to the 8-bit resolution), and every
** result is one of the two neighbours. */
static void test_e2m1_sr_unbiased (void **state) {
  uint32_t seed = 12345;
  int n;
  for (n = 0; n < 2000; n++) {
    float y, step;
    double sum = 0.0;
    unsigned r;
    seed = seed * 1664525u + 1013904223u;
    y = ((float)(seed >> 8) / 16777216.0f) * 12.0f - 6.0f;
    step = fabsf(y) >= 4 ? 2 : fabsf(y) >= 2 ? 1 : 0.5f;
    for (r = 0; r < 256; r++) {
      float q = nvfp4i_e2m1_value(nvfp4i_e2m1_encode_sr(y, r));
      assert_true(fabsf(q - y) < step);
      sum += q;
    }
    assert_true(fabs(sum / 256.0 - y) <= step / 256.0);
  }
}


/* The bits of a * 2^-126 rounded toward zero, 0 <= a < 8 (what the GPU's
** mul.rz gives): the exponent moved down for a >= 1, floor(a * 2^23) as a
** subnormal below (the product is exact in fp32). */
static uint32_t rz_scaled_bits (float a) {
  uint32_t u;
  if (a < 1.0f) return (uint32_t)(a * 8388608.0f);
  memcpy(&u, &a, 4);
  return u - (126u << 23);
}

static void check_sr_rz (float a) {
  uint32_t z = rz_scaled_bits(a), r;
  for (r = 0; r < 256; r++) {
    uint32_t c = nvfp4i_e2m1_sr_rz_term(z, r);
    assert_int_equal(c < 7 ? c : 7, nvfp4i_e2m1_encode_sr(a, r));
  }
}

/* check(a) for the floats of [0, lim): every multiple of 1/steps and its nb
** float neighbours on each side (the rounding rules' ties and near-ties),
** nrand random floats (uniform over the bit patterns below lim), then the
** nextra values extra[]. */
static void sweep_floats (float lim, uint32_t steps, int nb, uint32_t nrand, uint32_t seed,
                          const float *extra, int nextra, void (*check) (float)) {
  uint32_t k, end;
  int d;
  memcpy(&end, &lim, 4);
  for (k = 0; (float)k / (float)steps < lim; k++) {
    float g = (float)k / (float)steps;
    uint32_t u;
    memcpy(&u, &g, 4);
    for (d = -nb; d <= nb; d++) {
      uint32_t v = u + (uint32_t)d;
      float a;
      if (g == 0.0f && d < 0) continue;
      memcpy(&a, &v, 4);
      if (a < lim) check(a);
    }
  }
  for (k = 0; k < nrand; k++) {
    uint32_t v;
    float a;
    seed = seed * 1664525u + 1013904223u;
    v = seed % end;
    memcpy(&a, &v, 4);
    check(a);
  }
  for (d = 0; d < nextra; d++) check(extra[d]);
}

/* The CUDA fast path's SR by integer arithmetic (nvfp4i_e2m1_sr_rz_term)
** against nvfp4i_e2m1_encode_sr, all 256 bytes: every multiple of 2^-9 in
** [0, 8) and its float neighbours (where frac + u meets 1 exactly or
** nearly), random floats, subnormals and values just below 1. */
static void test_e2m1_sr_rz_term (void **state) {
  static const float extra[] = {0x1p-149f, 0x1p-126f, 0x1.fffffep-1f, 0x1.fffffcp-2f,
                                0x1.000002p-2f, 0x1.7ffffep-1f, 6.0f, 0x1.fffffep+2f};
  sweep_floats(8.0f, 512, 1, 4000, 777, extra, (int)(sizeof extra / sizeof extra[0]), check_sr_rz);
}


static void check_rn_grid (float a) {
  uint32_t g = nvfp4i_e2m1_rn_grid(a);
  if (g - NVFP4I_RN_GRID_BASE != nvfp4i_e2m1_encode(a))
    fail_msg("rn_grid(%a) = 0x%08x, code %u; nvfp4i_e2m1_encode gives %u", (double)a, g,
             g - NVFP4I_RN_GRID_BASE, nvfp4i_e2m1_encode(a));
}

/* The CUDA fast path's RN by two rounding grids (nvfp4i_e2m1_rn_grid)
** against nvfp4i_e2m1_encode on [0, 6.5): every multiple of 2^-10 (the
** ties 0.25, 0.75, ..., 5 among them) and its two float neighbours on each
** side, random floats, subnormals, and the ends of the domain. */
static void test_e2m1_rn_grid (void **state) {
  /* 0x1.9ffffep+2: the largest float below 6.5 */
  static const float extra[] = {0x1p-149f, 0x1p-126f, 0x1.fffffep-3f, 0x1.000002p-2f,
                                0x1.7ffffep+1f, 0x1.fffffep+1f, 6.0f, 0x1.9ffffep+2f};
  sweep_floats(6.5f, 1024, 2, 200000, 4242, extra, (int)(sizeof extra / sizeof extra[0]),
               check_rn_grid);
}


/* SR with Philox bytes: the mean of many draws is within 3 sigma of y. */
static void test_e2m1_sr_philox_mean (void **state) {
  static const float ys[] = {0.3f, -1.2f, 2.3f, 4.9f, 0.1f, -3.3f};
  unsigned i;
  for (i = 0; i < sizeof ys / sizeof ys[0]; i++) {
    const int N = 40000;
    double sum = 0.0, lo, hi, p, sigma;
    int e;
    float a = fabsf(ys[i]), step = a >= 4 ? 2 : a >= 2 ? 1 : 0.5f;
    for (e = 0; e < N; e++)
      sum += nvfp4i_e2m1_value(nvfp4i_e2m1_encode_sr(ys[i], nvfp4i_sr_byte(7, 0, 0, (uint64_t)e)));
    lo = floor(a / step) * step;
    hi = lo + step;
    p = (a - lo) / step;
    sigma = step * sqrt(p * (1 - p) / N);
    assert_true(fabs(fabs(sum / N) - a) <= 3 * sigma + step / 256.0);
    (void)hi;
  }
}


static double e4m3_formula (unsigned b) {
  unsigned E = (b >> 3) & 15, M = b & 7;
  double v = E == 0 ? M * ldexp(1.0, -9) : (1.0 + M / 8.0) * ldexp(1.0, (int)E - 7);
  return (b & 0x80) ? -v : v;
}


static void test_e4m3_decode_all (void **state) {
  unsigned b;
  for (b = 0; b < 256; b++) {
    float v = nvfp4i_e4m3_value(b);
    if ((b & 0x7f) == 0x7f) { assert_true(isnan(v)); continue; }
    if ((double)v != e4m3_formula(b)) fail_msg("byte 0x%02x: %g, expected %g", b, v, e4m3_formula(b));
    assert_int_equal(signbit(v) != 0, (b & 0x80) != 0);
  }
  assert_true(nvfp4i_e4m3_value(0x38) == 1.0f);
  assert_true(nvfp4i_e4m3_value(0x7E) == 448.0f);
  assert_true(nvfp4i_e4m3_value(0x01) == 0.001953125f);
  assert_true(nvfp4i_e4m3_value(0x73) == 176.0f);
}


/* Every representable value round-trips; every midpoint between
** neighbours goes to the even byte; one ulp either side goes to the near
** neighbour. */
static void test_e4m3_encode_ties (void **state) {
  unsigned b;
  for (b = 0; b < 0x7E; b++) {
    float lo = nvfp4i_e4m3_value(b), hi = nvfp4i_e4m3_value(b + 1);
    float mid = (lo + hi) / 2;            /* exact */
    unsigned even = (b & 1) ? b + 1 : b;
    assert_int_equal(nvfp4i_e4m3_encode(lo), b);
    assert_int_equal(nvfp4i_e4m3_encode(-lo), b | 0x80);
    if (nvfp4i_e4m3_encode(mid) != even)
      fail_msg("tie %g between 0x%02x and 0x%02x -> 0x%02x", mid, b, b + 1,
               nvfp4i_e4m3_encode(mid));
    assert_int_equal(nvfp4i_e4m3_encode(nextafterf(mid, 0)), b);
    assert_int_equal(nvfp4i_e4m3_encode(nextafterf(mid, 1000)), b + 1);
    assert_int_equal(nvfp4i_e4m3_encode(-mid), even | 0x80);
  }
  assert_int_equal(nvfp4i_e4m3_encode(448.0f), 0x7E);
  assert_int_equal(nvfp4i_e4m3_encode(464.0f), 0x7E);   /* tie -> 448 */
  assert_int_equal(nvfp4i_e4m3_encode(nextafterf(464.0f, 1000)), 0x7E);
  assert_int_equal(nvfp4i_e4m3_encode(1e30f), 0x7E);
  assert_int_equal(nvfp4i_e4m3_encode(INFINITY), 0x7E);
  assert_int_equal(nvfp4i_e4m3_encode(-INFINITY), 0xFE);
  assert_int_equal(nvfp4i_e4m3_encode(NAN), 0x7F);
  assert_int_equal(nvfp4i_e4m3_encode(ldexpf(1, -10)), 0x00);
  assert_int_equal(nvfp4i_e4m3_encode(ldexpf(1.0001f, -10)), 0x01);
  assert_int_equal(nvfp4i_e4m3_encode(-ldexpf(1, -12)), 0x80);
  assert_int_equal(nvfp4i_e4m3_encode(FLT_TRUE_MIN), 0x00);
  assert_int_equal(nvfp4i_e4m3_encode(0.126953125f), 0x20);   /* TV1 */
  assert_int_equal(nvfp4i_e4m3_encode(0.0022421875f), 0x01);  /* TV5 */
}


/* E4M3 encode vs brute-force nearest-even over many fp32 values. */
static void test_e4m3_encode_random (void **state) {
  uint32_t s = 1;
  int n;
  for (n = 0; n < 200000; n++) {
    float v;
    double best = 1e300, a;
    unsigned b, pick = 0;
    s = s * 1664525u + 1013904223u;
    v = nvfp4i_bits_f32(0x30000000u + (s % 0x14000000u));   /* ~4.7e-10 .. 2.7e3 */
    a = v;
    if (a >= 448) pick = 0x7E;
    else
      for (b = 0; b <= 0x7E; b++) {
        double d = fabs(a - e4m3_formula(b));
        if (d < best || (d == best && (b & 1) == 0)) { best = d; pick = b; }
      }
    if (nvfp4i_e4m3_encode(v) != pick)
      fail_msg("%.9g -> 0x%02x, expected 0x%02x", v, nvfp4i_e4m3_encode(v), pick);
  }
}


static void test_senc_edges (void **state) {
  nvfp4i_gscale g;
  assert_true(nvfp4i_senc(0.0f) == 1.0f);
  assert_true(nvfp4i_senc(INFINITY) == 1.0f);
  assert_true(nvfp4i_senc(NAN) == FLT_MAX);
  assert_true(nvfp4i_senc(1e-40f) == FLT_MAX);   /* 2688/tiny overflows */
  assert_true(nvfp4i_senc(21504.0f) == 0.125f);
  assert_true(nvfp4i_senc(2688.0f) == 1.0f);
  g = nvfp4i_gscale_make(3.0f);                   /* TV2 */
  assert_int_equal(nvfp4i_f32_bits(g.s_enc), 0x44600000u);
  assert_int_equal(nvfp4i_f32_bits(g.s_dec), 0x3A924925u);
  assert_int_equal(nvfp4i_f32_bits(g.m), 0x43155556u);
  g = nvfp4i_gscale_make(10000.0f);               /* TV5 */
  assert_int_equal(nvfp4i_f32_bits(g.s_enc), 0x3E89A027u);
  assert_int_equal(nvfp4i_f32_bits(g.s_dec), 0x406E1862u);
  assert_int_equal(nvfp4i_f32_bits(g.m), 0x3D378034u);
  assert_int_equal(nvfp4i_f32_bits(NVFP4I_INV6), 0x3E2AAAABu);
}


static void test_bf16_from_double (void **state) {
  assert_int_equal(nvfp4i_bf16_from_double(1.0), 0x3F80);
  assert_int_equal(nvfp4i_bf16_from_double(1.0 + ldexp(1, -8)), 0x3F80);      /* tie, even */
  assert_int_equal(nvfp4i_bf16_from_double(1.0 + 3 * ldexp(1, -8)), 0x3F82);  /* tie, up */
  assert_int_equal(nvfp4i_bf16_from_double(1.0 + ldexp(1, -8) + ldexp(1, -40)), 0x3F81);
  assert_int_equal(nvfp4i_bf16_from_double(-2.0), 0xC000);
  assert_int_equal(nvfp4i_bf16_from_double(ldexp(1, -134)), 0x0000);          /* tie -> 0 */
  assert_int_equal(nvfp4i_bf16_from_double(3 * ldexp(1, -134)), 0x0002);
  assert_int_equal(nvfp4i_bf16_from_double(ldexp(1, -133)), 0x0001);
  assert_int_equal(nvfp4i_bf16_from_double(ldexp(255, 120)), 0x7F7F);         /* bf16 max */
  assert_int_equal(nvfp4i_bf16_from_double(ldexp(511, 119)), 0x7F80);         /* tie -> Inf */
  assert_int_equal(nvfp4i_bf16_from_double(-ldexp(1, 200)), 0xFF80);
  assert_int_equal(nvfp4i_bf16_from_double(-0.0), 0x8000);
  assert_int_equal(nvfp4i_bf16_from_double(NAN) & 0x7fc0, 0x7fc0);
}


/* TV9: exact RHT values with and without the sign mask. */
static void test_rht_tv9 (void **state) {
  static const float v[16] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f,
                              1.25f, -3.5f, 0.125f, 4.0f, -0.5f, 1.75f, -2.25f, 0.375f};
  static const uint16_t signed_[16] = {0x3F70, 0xBFA0, 0xBD80, 0xBF60, 0x3EC0, 0x3D80,
                                       0x0000, 0x3EA0, 0xC086, 0x4020, 0x3F10, 0x3FB0,
                                       0xBF20, 0x40A6, 0x3F80, 0xBFA8};
  static const float plain[16] = {0.9375f, -0.625f, -2.5625f, 2.5f, 1.25f, 1.3125f,
                                  -2.875f, 4.5625f, 0.3125f, 1.375f, -0.9375f, -2.0f,
                                  0.0f, -1.5625f, 1.875f, 0.4375f};
  uint16_t out[16];
  int i;
  nvfp4i_rht16(v, NVFP4_RHT_SIGNS, out);
  assert_memory_equal(out, signed_, sizeof out);
  nvfp4i_rht16(v, 0, out);
  for (i = 0; i < 16; i++) assert_true(nvfp4i_bf16_to_f32(out[i]) == plain[i]);
}


/* Q = diag(s) H / 4 is orthogonal: v = (v Q) H/4 with the signs re-applied.
** Exact when v Q is exact in bf16, within bf16 rounding otherwise. */
static void test_rht_orthogonal (void **state) {
  uint32_t s = 7;
  int n, i;
  for (n = 0; n < 2000; n++) {
    float v[16], y[16], z[16], amax = 0;
    uint16_t h[16];
    unsigned mask = (n & 1) ? NVFP4_RHT_SIGNS : (unsigned)(n * 2654435761u) & 0xffff;
    for (i = 0; i < 16; i++) {
      s = s * 1664525u + 1013904223u;
      v[i] = nvfp4i_bf16_to_f32(nvfp4i_f32_to_bf16(((float)(s >> 8) / 16777216.0f - 0.5f) * 8));
      if (fabsf(v[i]) > amax) amax = fabsf(v[i]);
    }
    nvfp4i_rht16(v, mask, h);
    for (i = 0; i < 16; i++) y[i] = nvfp4i_bf16_to_f32(h[i]);
    nvfp4i_rht16(y, 0, h);
    for (i = 0; i < 16; i++) {
      z[i] = nvfp4i_bf16_to_f32(h[i]);
      if ((mask >> i) & 1) z[i] = -z[i];
      /* bf16 rounding of y (<= 2^-9 relative, |y| <= 4 amax) and of z */
      if (fabsf(z[i] - v[i]) > amax * 0x1p-5f + fabsf(v[i]) * 0x1p-8f)
        fail_msg("round trip %d elem %d: %g vs %g", n, i, z[i], v[i]);
    }
  }
  {   /* exact case: TV9's vector comes back bit for bit */
    static const float v[16] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f,
                                1.25f, -3.5f, 0.125f, 4.0f, -0.5f, 1.75f, -2.25f, 0.375f};
    float y[16];
    uint16_t h[16];
    nvfp4i_rht16(v, NVFP4_RHT_SIGNS, h);
    for (i = 0; i < 16; i++) y[i] = nvfp4i_bf16_to_f32(h[i]);
    nvfp4i_rht16(y, 0, h);
    for (i = 0; i < 16; i++) {
      float z = nvfp4i_bf16_to_f32(h[i]);
      if ((NVFP4_RHT_SIGNS >> i) & 1) z = -z;
      assert_true(z == v[i]);
    }
  }
}


/* Inputs 200 binades apart: a plain fp64 butterfly would lose 2^-100 to
** absorption before 2^100 - 2^100 cancels; the sum must stay exact. */
static void test_rht_wide_span (void **state) {
  float v[16] = {0};
  uint16_t h[16];
  int c;
  v[0] = 0x1p100f;
  v[1] = 0x1p-100f;
  v[2] = -0x1p100f;
  nvfp4i_rht16(v, 0, h);
  for (c = 0; c < 16; c++) {
    /* y_c = (v0 + (-1)^{c&1} v1 + (-1)^{popcount(c&2)} v2) / 4 */
    double big = 0x1p100 + ((c & 2) ? 0x1p100 : -0x1p100);
    double small = (c & 1) ? -0x1p-100 : 0x1p-100;
    float want = big == 0 ? (float)(small / 4) : (float)(big / 4);
    if (nvfp4i_bf16_to_f32(h[c]) != want)
      fail_msg("c=%d: %g, expected %g", c, nvfp4i_bf16_to_f32(h[c]), want);
  }
  /* a tie broken only by a far-away term: 1 + 2^-8 (a bf16 tie) + 2^-120 */
  memset(v, 0, sizeof v);
  v[0] = v[1] = v[2] = v[3] = 1.0f;       /* y_0 = 1 */
  v[4] = v[5] = v[6] = v[7] = 0x1p-8f;    /* y_0 += 2^-8: a tie at 1 + 2^-8 */
  v[8] = v[9] = v[10] = v[11] = 0x1p-120f;
  nvfp4i_rht16(v, 0, h);
  assert_int_equal(h[0], 0x3F81);         /* rounded up by the 2^-120 sticky */
  v[8] = v[9] = v[10] = v[11] = -0x1p-120f;
  nvfp4i_rht16(v, 0, h);
  assert_int_equal(h[0], 0x3F80);
}


/* Inf and NaN inputs: every output sums every input, so all 16 are Inf or
** NaN, as IEEE sums give them (TE's tensor cores, torch's bf16 matmul): NaN
** from a NaN, or where Infs of both signs meet in an output's sum; else
** the Inf's sign times H[r][c] (times the sign mask's).  Other inputs far
** below once sent the block to the wide path, which read the exponent
** field 255 as 2^128 and gave finite outputs. */
static void test_rht_inf_nan (void **state) {
  float v[16];
  uint16_t h[16];
  int r, c;
  for (r = 0; r < 16; r++) v[r] = r == 7 ? 0x1p-100f : 1.0f;   /* > 41 binades below 1 */
  v[3] = INFINITY;
  nvfp4i_rht16(v, 0, h);
  for (c = 0; c < 16; c++) assert_int_equal(h[c], (__builtin_popcount(3 & c) & 1) ? 0xFF80 : 0x7F80);
  nvfp4i_rht16(v, 1u << 3, h);                                  /* the sign mask flips it */
  for (c = 0; c < 16; c++) assert_int_equal(h[c], (__builtin_popcount(3 & c) & 1) ? 0x7F80 : 0xFF80);
  v[5] = -INFINITY;            /* +Inf H[3][c] - Inf H[5][c]: NaN where H[3][c] == H[5][c] */
  nvfp4i_rht16(v, 0, h);
  for (c = 0; c < 16; c++) {
    const int s3 = __builtin_popcount(3 & c) & 1, s5 = __builtin_popcount(5 & c) & 1;
    assert_int_equal(h[c], s3 == s5 ? 0x7FC0 : s3 ? 0xFF80 : 0x7F80);
  }
  v[5] = 1.0f;
  v[9] = NAN;
  nvfp4i_rht16(v, 0, h);
  for (c = 0; c < 16; c++) assert_int_equal(h[c], 0x7FC0);
  v[9] = -NAN;                 /* the same NaN whatever its sign */
  nvfp4i_rht16(v, NVFP4_RHT_SIGNS, h);
  for (c = 0; c < 16; c++) assert_int_equal(h[c], 0x7FC0);
}


int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_e2m1_exhaustive_bf16),
    cmocka_unit_test(test_e2m1_interval_table),
    cmocka_unit_test(test_e2m1_decode),
    cmocka_unit_test(test_e2m1_sr_examples),
    cmocka_unit_test(test_e2m1_sr_unbiased),
    cmocka_unit_test(test_e2m1_sr_rz_term),
    cmocka_unit_test(test_e2m1_rn_grid),
    cmocka_unit_test(test_e2m1_sr_philox_mean),
    cmocka_unit_test(test_e4m3_decode_all),
    cmocka_unit_test(test_e4m3_encode_ties),
    cmocka_unit_test(test_e4m3_encode_random),
    cmocka_unit_test(test_senc_edges),
    cmocka_unit_test(test_bf16_from_double),
    cmocka_unit_test(test_rht_tv9),
    cmocka_unit_test(test_rht_orthogonal),
    cmocka_unit_test(test_rht_wide_span),
    cmocka_unit_test(test_rht_inf_nan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
