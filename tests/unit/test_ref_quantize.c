/*
** test_ref_quantize.c -- lib/ref_quantize.c and lib/quantize.c on the CPU
** backend: the hand-checkable vectors TV1-TV12 of spec/nvfp4-numerics.md
** §16 byte for byte, the quantize/dequantize/scale-shape field cases of
** cases/field-cases.md, 2D and RHT and SR against a naive re-derivation,
** 4over6's edges (tie rule, MAE vs MSE, amax 0 / Inf, 2D tree order) and SR
** bytes against values from an independent model, bad inputs,
** swap_first_dims and random tensors.
*/
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>
#include "nvfp4_int.h"
#include "ref_quantize.h"
#include "ref_codec.h"
#include "philox.h"

static nvfp4_ctx *ctx;

#define D(x) ((int64_t)(x))

static nvfp4_shape S2 (int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return nvfp4_shape_make(2, d);
}


static nvfp4_shape S3 (int64_t a, int64_t b, int64_t c) {
  int64_t d[3] = {a, b, c};
  return nvfp4_shape_make(3, d);
}


static void assert_shape (nvfp4_shape got, nvfp4_shape want) {
  char a[128], b[128];
  if (!nvfp4_shape_equal(got, want))
    fail_msg("shape %s, expected %s", nvfp4_shape_format(got, a, sizeof a),
             nvfp4_shape_format(want, b, sizeof b));
}


static void assert_err (nvfp4_status got, nvfp4_status want, const char *needle) {
  if (got != want)
    fail_msg("status %s (%s), expected %s", nvfp4_status_string(got),
             nvfp4_last_error(ctx), nvfp4_status_string(want));
  if (needle != NULL && strstr(nvfp4_last_error(ctx), needle) == NULL)
    fail_msg("message \"%s\" does not mention \"%s\"", nvfp4_last_error(ctx), needle);
}


static uint16_t bf (float f) {
  uint16_t h = nvfp4i_f32_to_bf16(f);
  assert_true(nvfp4i_bf16_to_f32(h) == f || isnan(f));   /* inputs are exact */
  return h;
}


static nvfp4_tensor *bf16_tensor (nvfp4_shape s, const uint16_t *h) {
  nvfp4_tensor *t = NULL;
  assert_int_equal(nvfp4_tensor_from_host(ctx, s, NVFP4_BF16, h,
                                          (size_t)nvfp4_shape_numel(s) * 2, &t), NVFP4_OK);
  return t;
}


static uint8_t *read_buf (const nvfp4_tensor *q, nvfp4_buffer b, size_t *n) {
  nvfp4_shape s = nvfp4_tensor_buffer_shape(q, b);
  size_t nb = (size_t)nvfp4_shape_numel(s);
  uint8_t *p = (uint8_t *)malloc(nb + 1);
  assert_non_null(p);
  assert_int_equal(nvfp4_tensor_buffer_read(q, b, p, nb), NVFP4_OK);
  if (n) *n = nb;
  return p;
}


/* x quantized again through the backend entry into a fresh NVFP4 tensor
** whose four buffers are pre-filled with 0xFF, with q's amaxes: what an
** in-place update writes (the caller compares it with q). */
static nvfp4_tensor *quantize_prefilled (const nvfp4_tensor *x, const nvfp4_qopts *o,
                                         const nvfp4_tensor *q) {
  nvfp4_tensor *q2 = NULL;
  assert_int_equal(nvfp4i_tensor_alloc_fp4(ctx, x->shape, 1, 1, &q2), NVFP4_OK);
  memset(q2->row_data.p, 0xFF, q2->row_data.nbytes);
  memset(q2->row_scale.p, 0xFF, q2->row_scale.nbytes);
  memset(q2->col_data.p, 0xFF, q2->col_data.nbytes);
  memset(q2->col_scale.p, 0xFF, q2->col_scale.nbytes);
  assert_int_equal(nvfp4i_amax_values(q, q2->amax), NVFP4_OK);   /* q's may be unread */
  assert_int_equal(nvfp4i_ref_quantize(ctx, x, o, q2), NVFP4_OK);
  return q2;
}


/* One [1, 16] bf16 row quantized rowwise (1D, RN) with a given amax: its
** scale byte and 8 data bytes must be `scale` and `data`. */
static void expect_row16 (const uint16_t *x, float amax, uint8_t scale, const uint8_t *data) {
  nvfp4_tensor *xt = bf16_tensor(S2(1, 16), x), *q = NULL;
  nvfp4_qopts o;
  uint8_t *d, *sc;
  memset(&o, 0, sizeof o);
  o.rowwise = o.has_amax = 1;
  o.amax[0] = o.amax[1] = amax;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  sc = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  assert_int_equal(sc[0], scale);
  assert_memory_equal(d, data, 8);
  free(d); free(sc);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


static uint16_t *dequant_bf16 (const nvfp4_tensor *q) {
  nvfp4_tensor *y = NULL;
  size_t n = (size_t)nvfp4_shape_numel(nvfp4_tensor_shape(q));
  uint16_t *h = (uint16_t *)malloc(2 * n + 2);
  assert_int_equal(nvfp4_dequantize(ctx, q, NVFP4_BF16, &y), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(y, h, 2 * n), NVFP4_OK);
  nvfp4_tensor_destroy(y);
  return h;
}


/* ---- TV1-TV12 ----------------------------------------------------------- */

typedef struct tv {
  const char *name;
  uint16_t x[16];       /* bf16 bits (0 with xf given) */
  float xf[16];         /* or exact decimal inputs */
  int use_xf;
  float amax;           /* < 0: computed by the library */
  uint8_t sf;
  uint8_t packed[8];
  float deq[16];        /* expected bf16 dequant (-0.0f marks -0) */
  uint32_t final_bits;  /* != 0: deq is bf16(value(code) * this) instead */
} tv;

static const tv tvs[] = {
  {"TV1", {0x3DCD, 0xBE4D, 0x3EB3, 0x3F00, 0xBF40, 0x3F80, 0x3FA6, 0xBFDA, 0x400D, 0x4026,
           0xC046, 0x4053, 0x408D, 0xC0A0, 0x40B0, 0x40C3}, {0}, 0, 21504.0f, 0x20,
   {0x80, 0x11, 0x2A, 0xB3, 0x54, 0x5D, 0xE6, 0x77},
   {0, -0.0f, 0.5f, 0.5f, -1, 1, 1.5f, -1.5f, 2, 3, -3, 3, 4, -4, 6, 6}, 0},
  {"TV2", {0x4040, 0xC03A, 0x3C24, 0xBCA4, 0x3F8D, 0x3F1A, 0xBECD, 0x4010, 0xBFCD, 0x3F66,
           0x3E9A, 0xC006, 0x3FF3, 0xBE1A, 0x3D4D, 0x402D}, {0}, 0, -1.0f, 0x7E,
   {0xF7, 0x80, 0x24, 0x6A, 0x4D, 0xE1, 0x96, 0x70},
   {3, -3, 0, -0.0f, 1, 0.5f, -0.5f, 2, -1.5f, 1, 0.25f, -2, 2, -0.25f, 0, 3}, 0},
  {"TV3", {0}, {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, -0.25f, -0.75f, -1.25f,
                -1.75f, -2.5f, -3.5f, -5.0f, 0.0f}, 1, 2688.0f, 0x38,
   {0x20, 0x42, 0x64, 0x76, 0xA8, 0xCA, 0xEC, 0x0E},
   {0, 1, 1, 2, 2, 4, 4, 6, -0.0f, -1, -1, -2, -2, -4, -4, 0}, 0},
  {"TV4", {0}, {-0.125f, -0.2421875f, 0.2578125f, -0.2578125f, 0.7421875f, -0.7578125f,
                4.96875f, -5.03125f, 6.0f, -6.0f, 1.0f, -1.0f, 0.5f, -0.5f, 0.0078125f,
                -0.0078125f}, 1, 2688.0f, 0x38,
   {0x88, 0x91, 0xA1, 0xF6, 0xF7, 0xA2, 0x91, 0x80},
   {-0.0f, -0.0f, 0.5f, -0.5f, 0.5f, -1, 4, -6, 6, -6, 1, -1, 0.5f, -0.5f, 0, -0.0f}, 0},
  {"TV5", {0x3D4D, 0xBD24, 0x3CF6, 0xBCA4, 0x3C24, 0x3BA4, 0xBD38, 0x3D0F, 0x3CCD, 0xBC76,
           0x0000, 0x3D49, 0xBA83, 0x3C45, 0xBD07, 0x3D28}, {0}, 0, 10000.0f, 0x01,
   {0xF7, 0xD6, 0x13, 0x6F, 0xC5, 0x70, 0x38, 0x7E},
   {0.043701171875f, -0.043701171875f, 0.029052734375f, -0.0218505859375f,
    0.01092529296875f, 0.003631591796875f, -0.043701171875f, 0.029052734375f,
    0.0218505859375f, -0.0145263671875f, 0, 0.043701171875f, -0.0f, 0.01092529296875f,
    -0.029052734375f, 0.043701171875f}, 0},
  {"TV6", {0x3A83, 0xBA03, 0x0000, 0x3952, 0xBA83, 0x3A6C, 0x38D2, 0xB99D, 0x0000, 0x39D2,
           0xBA38, 0x3A1D, 0x3A52, 0xB952, 0x399D, 0xBA6C}, {0}, 0, 2688.0f, 0x00,
   {0xF7, 0x70, 0x7F, 0xF7, 0x70, 0x7F, 0xF7, 0xF7},
   {0, -0.0f, 0, 0, -0.0f, 0, 0, -0.0f, 0, 0, -0.0f, 0, 0, -0.0f, 0, -0.0f}, 0},
  {"TV7", {0}, {4.0f, -3.0f, 2.0f, -1.0f, 0.5f, 0.25f, -0.125f, 1.5f, -2.5f, 3.5f, 0.75f,
                -0.0625f, 1.25f, -1.75f, 0.0f, 0.10009765625f}, 1, 1.0f, 0x7E,
   {0xF7, 0xF7, 0x35, 0x7A, 0x7F, 0x96, 0xF7, 0x10},
   {1, -1, 1, -1, 0.5f, 0.25f, -0.1669921875f, 1, -1, 1, 0.66796875f, -0.08349609375f, 1,
    -1, 0, 0.08349609375f}, 0},
  {"TV8", {0}, {0}, 1, -1.0f, 0x00, {0, 0, 0, 0, 0, 0, 0, 0}, {0}, 0},
  {"TV11", {0}, {5.25f, 1.5625f, -1.5625f, 0.5f, -2.0f, 3.0f, 0.10009765625f, -0.30078125f,
                 4.0f, -4.5f, 2.59375f, -0.8984375f, 1.203125f, 0.0f, -5.0f, 0.69921875f},
   1, 60.0f, 0x62, {0x37, 0x1B, 0x5C, 0x90, 0xF6, 0xA5, 0x03, 0x2F}, {0}, 0x3F649249u},
  {"TV12", {0}, {36, -20, 12.5f, -7, 3, 30, -33, 0.5f, 18, -25, 9, 1, -14, 27, -4, 0}, 1,
   96.0f, 0x73, {0xD7, 0xA4, 0x61, 0x0F, 0xE5, 0x03, 0x6C, 0x09},
   {37.75f, -18.875f, 12.5625f, -6.28125f, 3.140625f, 25.125f, -37.75f, 0, 18.875f,
    -25.125f, 9.4375f, 0, -12.5625f, 25.125f, -3.140625f, 0}, 0},
};


/* The same block through the columnwise path: the 16 values down column 5
** of a [16, 16] tensor (every other element 0, so the tensor amax is the
** block's), quantized columnwise only; the column's 16 consecutive rows
** form one columnwise block, so row 5 of the columnwise data [16, 8] holds
** the spec's packed bytes and its scale [5][0] the spec's byte, and every
** other row and scale byte is 0 (all-zero blocks). */
static void check_tv_columnwise (const tv *t, const uint16_t x[16]) {
  uint16_t h[256] = {0};
  uint8_t *data, *scale;
  nvfp4_qopts o;
  nvfp4_tensor *xt, *q = NULL;
  size_t nd, ns;
  int i;
  for (i = 0; i < 16; i++) h[i * 16 + 5] = x[i];
  xt = bf16_tensor(S2(16, 16), h);
  memset(&o, 0, sizeof o);
  o.columnwise = 1;
  if (t->amax >= 0) { o.has_amax = 1; o.amax[0] = o.amax[1] = t->amax; }
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  data = read_buf(q, NVFP4_COLUMNWISE_DATA, &nd);
  scale = read_buf(q, NVFP4_COLUMNWISE_SCALE, &ns);
  assert_int_equal(nd, 16 * 8);
  assert_int_equal(ns, 128 * 4);
  for (i = 0; i < (int)ns; i++)
    if (scale[i] != (i == 5 * 4 ? t->sf : 0))
      fail_msg("%s columnwise: scale byte %d is 0x%02x, expected 0x%02x", t->name, i, scale[i],
               i == 5 * 4 ? t->sf : 0);
  for (i = 0; i < (int)nd; i++)
    if (data[i] != (i / 8 == 5 ? t->packed[i % 8] : 0))
      fail_msg("%s columnwise: data byte %d is 0x%02x, expected 0x%02x", t->name, i, data[i],
               i / 8 == 5 ? t->packed[i % 8] : 0);
  free(data); free(scale);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


static void check_tv (const tv *t) {
  uint16_t x[16], *y;
  uint8_t *data, *scale;
  nvfp4_qopts o;
  nvfp4_tensor *xt, *q = NULL;
  size_t ns;
  int i;
  for (i = 0; i < 16; i++) x[i] = t->use_xf ? bf(t->xf[i]) : t->x[i];
  xt = bf16_tensor(S2(1, 16), x);
  memset(&o, 0, sizeof o);
  o.rowwise = 1;
  if (t->amax >= 0) { o.has_amax = 1; o.amax[0] = o.amax[1] = t->amax; }
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  data = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  scale = read_buf(q, NVFP4_ROWWISE_SCALE, &ns);
  assert_int_equal(ns, 128 * 4);
  if (scale[0] != t->sf) fail_msg("%s: scale 0x%02x, expected 0x%02x", t->name, scale[0], t->sf);
  for (i = 1; i < (int)ns; i++) assert_int_equal(scale[i], 0);
  for (i = 0; i < 8; i++)
    if (data[i] != t->packed[i])
      fail_msg("%s: packed byte %d is 0x%02x, expected 0x%02x", t->name, i, data[i], t->packed[i]);
  y = dequant_bf16(q);
  for (i = 0; i < 16; i++) {
    uint16_t want;
    if (t->final_bits)
      want = nvfp4i_f32_to_bf16(nvfp4i_e2m1_value((data[i / 2] >> (4 * (i & 1))) & 15) *
                                nvfp4i_bits_f32(t->final_bits));
    else want = nvfp4i_f32_to_bf16(t->deq[i]);
    if (y[i] != want)
      fail_msg("%s: dequant %d is 0x%04x (%g), expected 0x%04x", t->name, i, y[i],
               nvfp4i_bf16_to_f32(y[i]), want);
  }
  free(y); free(data); free(scale);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
  check_tv_columnwise(t, x);
}


static void test_tv_1_to_12 (void **state) {
  unsigned i;
  /* TV10 (4over6) has its own test below. */
  for (i = 0; i < sizeof tvs / sizeof tvs[0]; i++) check_tv(&tvs[i]);
}


/* TV10 (spec §16, §9.1): 4over6 with MAE, amax 20.  EMAX 256 (the default
** for 4over6): map-to-4 wins, sf 0x6C, dequant factor 1/1536; EMAX 448:
** sf 0x72.  Then MSE on the same block against both candidates' codes
** from the spec, a 2D tile of 16 copies of the row (same choice, every
** block and the columnwise copy), and the GEMM's alpha with EMAX 256. */
static const float tv10_x[16] = {5.0f, 4.09375f, -3.90625f, 2.046875f, 1.0f, -0.6015625f,
                                 0.44921875f, 3.046875f, -2.90625f, 1.546875f,
                                 0.2001953125f, -4.59375f, 2.453125f, -1.1015625f,
                                 0.80078125f, 3.59375f};

static nvfp4_tensor *tv10_quantize (nvfp4_shape s, int emax448, int mse, int two_d,
                                    int col) {
  uint16_t x[256];
  nvfp4_qopts o;
  nvfp4_tensor *xt, *q = NULL;
  int i;
  for (i = 0; i < 256; i++) x[i] = bf(tv10_x[i % 16]);
  xt = bf16_tensor(s, x);
  memset(&o, 0, sizeof o);
  o.rowwise = 1;
  o.columnwise = (unsigned)col;
  o.four_over_six = 1;
  o.four_over_six_emax448 = (unsigned)emax448;
  o.four_over_six_mse = (unsigned)mse;
  o.two_d = (unsigned)two_d;
  o.has_amax = 1;
  o.amax[0] = o.amax[1] = 20.0f;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  nvfp4_tensor_destroy(xt);
  return q;
}


/* The fp32 error of §9.1 for the 16 codes c (nibbles of spec order). */
static float tv10_error (const uint8_t *c, uint8_t sf, float e6, int mse) {
  float e = 0.0f, s = nvfp4i_e4m3_value(sf);
  int i;
  for (i = 0; i < 16; i++) {
    float d = ((nvfp4i_e2m1_value(c[i]) * s) * 20.0f) / e6 - nvfp4i_bf16_to_f32(bf(tv10_x[i]));
    e += mse ? d * d : fabsf(d);
  }
  return e;
}


static void test_tv10_four_over_six (void **state) {
  static const uint8_t p256[8] = {0x56, 0x3D, 0x92, 0x41, 0x2C, 0xE0, 0xA4, 0x51};
  static const uint8_t p448[8] = {0x56, 0x3D, 0x92, 0x51, 0x3C, 0xE0, 0xA4, 0x51};
  static const float deq[16] = {5, 3.75f, -3.75f, 1.875f, 1.25f, -0.625f, 0.625f, 2.5f, -2.5f,
                                1.25f, 0, -5, 2.5f, -1.25f, 0.625f, 3.75f};
  static const uint8_t c4[16] = {6, 5, 0xD, 3, 2, 9, 1, 4, 0xC, 2, 0, 0xE, 4, 0xA, 1, 5};
  static const uint8_t c6[16] = {7, 6, 0xE, 4, 2, 9, 1, 6, 0xD, 4, 0, 0xF, 5, 0xB, 2, 6};
  nvfp4_tensor *q, *y = NULL;
  uint8_t *data, *scale, *cd, *cs;
  uint16_t *dq;
  float e4, e6, yv, ref = 0;
  int i, r, k;
  (void)state;
  /* the spec's candidate errors, MAE */
  assert_true(tv10_error(c4, 0x6C, 1536.0f, 0) == 3.5048828125f);
  assert_true(tv10_error(c6, 0x68, 1536.0f, 0) == 4.0048828125f);
  /* EMAX 256 */
  q = tv10_quantize(S2(1, 16), 0, 0, 0, 0);
  data = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  scale = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  assert_int_equal(scale[0], 0x6C);
  assert_memory_equal(data, p256, 8);
  dq = dequant_bf16(q);                       /* factor 1/1536: final 1.25 */
  for (i = 0; i < 16; i++)
    if (dq[i] != nvfp4i_f32_to_bf16(deq[i]))
      fail_msg("TV10 dequant %d: %g, expected %g", i, nvfp4i_bf16_to_f32(dq[i]), deq[i]);
  /* alpha with EMAX 256: q . q = sum of deq^2 (exact in double) */
  assert_int_equal(nvfp4_gemm(ctx, q, NVFP4_ROWWISE, q, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                   NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(y, &yv, sizeof yv), NVFP4_OK);
  for (i = 0; i < 16; i++) ref += deq[i] * deq[i];
  if (fabsf(yv - ref) > 1e-5f * ref) fail_msg("TV10 q.q = %g, expected %g", yv, ref);
  nvfp4_tensor_destroy(y);
  y = NULL;
  {   /* mixed: EMAX 256 against a standard (448) operand of the same row */
    nvfp4_tensor *std = NULL;
    uint16_t xs[16], *ds;
    nvfp4_qopts o;
    double mref = 0;
    for (i = 0; i < 16; i++) xs[i] = bf(tv10_x[i]);
    memset(&o, 0, sizeof o);
    {
      nvfp4_tensor *xt = bf16_tensor(S2(1, 16), xs);
      assert_int_equal(nvfp4_quantize(ctx, xt, &o, &std), NVFP4_OK);
      nvfp4_tensor_destroy(xt);
    }
    ds = dequant_bf16(std);
    for (i = 0; i < 16; i++) mref += (double)deq[i] * nvfp4i_bf16_to_f32(ds[i]);
    assert_int_equal(nvfp4_gemm(ctx, q, NVFP4_ROWWISE, std, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                     NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(y, &yv, sizeof yv), NVFP4_OK);
    /* the bf16 dequantization of the standard operand is within 2^-8 */
    if (fabs(yv - mref) > 1e-2 * fabs(mref)) fail_msg("TV10 mixed gemm %g, expected %g", yv, mref);
    free(ds);
    nvfp4_tensor_destroy(std);
  }
  free(dq); free(data); free(scale);
  nvfp4_tensor_destroy(y);
  nvfp4_tensor_destroy(q);
  /* EMAX 448 */
  q = tv10_quantize(S2(1, 16), 1, 0, 0, 0);
  data = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  scale = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  assert_int_equal(scale[0], 0x72);
  assert_memory_equal(data, p448, 8);
  free(data); free(scale);
  nvfp4_tensor_destroy(q);
  /* the spec's comparison line: standard NVFP4 (no 4over6) with amax 20 */
  {
    static const uint8_t pstd[8] = {0x67, 0x4E, 0x92, 0x61, 0x4D, 0xF0, 0xB5, 0x62};
    uint16_t xs[16];
    for (i = 0; i < 16; i++) xs[i] = bf(tv10_x[i]);
    expect_row16(xs, 20.0f, 0x6E, pstd);
  }
  /* 1D columnwise, EMAX 256: the block down column 5 of a [16, 16] */
  {
    uint16_t xc[256] = {0};
    nvfp4_qopts o;
    nvfp4_tensor *xt;
    for (i = 0; i < 16; i++) xc[i * 16 + 5] = bf(tv10_x[i]);
    xt = bf16_tensor(S2(16, 16), xc);
    memset(&o, 0, sizeof o);
    o.columnwise = o.four_over_six = o.has_amax = 1;
    o.amax[0] = o.amax[1] = 20.0f;
    assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
    cd = read_buf(q, NVFP4_COLUMNWISE_DATA, NULL);
    cs = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);
    assert_int_equal(cs[5 * 4], 0x6C);
    assert_memory_equal(cd + 5 * 8, p256, 8);
    free(cd); free(cs);
    nvfp4_tensor_destroy(q);
    nvfp4_tensor_destroy(xt);
  }
  /* MSE picks the candidate with the smaller squared error */
  e4 = tv10_error(c4, 0x6C, 1536.0f, 1);
  e6 = tv10_error(c6, 0x68, 1536.0f, 1);
  q = tv10_quantize(S2(1, 16), 0, 1, 0, 0);
  scale = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  assert_int_equal(scale[0], e4 < e6 ? 0x6C : 0x68);
  free(scale);
  nvfp4_tensor_destroy(q);
  /* 2D: a 16x16 tile of 16 equal rows; rowwise and columnwise alike */
  q = tv10_quantize(S2(16, 16), 0, 0, 1, 1);
  data = read_buf(q, NVFP4_ROWWISE_DATA, NULL);      /* [16, 8] */
  scale = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);    /* [128, 4] */
  cd = read_buf(q, NVFP4_COLUMNWISE_DATA, NULL);     /* [16, 8] */
  cs = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);    /* [128, 4] */
  for (r = 0; r < 16; r++) {
    assert_int_equal(scale[r * 4], 0x6C);
    assert_memory_equal(data + r * 8, p256, 8);
  }
  for (k = 0; k < 16; k++) {
    assert_int_equal(cs[k * 4], 0x6C);
    for (i = 0; i < 8; i++) assert_int_equal(cd[k * 8 + i], c4[k] | (c4[k] << 4));
  }
  free(data); free(scale); free(cd); free(cs);
  nvfp4_tensor_destroy(q);
}


/* TV9: a 16x16 bf16 tensor with v in column 5; columnwise + RHT (0xD7E8).
** Post-RHT amax is that of the only non-zero RHT block, 5.1875; the
** rowwise (pre-RHT) amax is 4. */
static void test_tv9_rht_columnwise (void **state) {
  static const float v[16] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f, 1.25f,
                              -3.5f, 0.125f, 4.0f, -0.5f, 1.75f, -2.25f, 0.375f};
  static const uint8_t packed[8] = {0xB2, 0xA8, 0x01, 0x10, 0x5E, 0x31, 0x79, 0xB2};
  static const float deq[16] = {0.86328125f, -1.296875f, -0.0f, -0.86328125f, 0.431640625f,
                                0, 0, 0.431640625f, -3.453125f, 2.59375f, 0.431640625f,
                                1.296875f, -0.431640625f, 5.1875f, 0.86328125f, -1.296875f};
  uint16_t x[256] = {0}, *y;
  uint8_t *cd, *cs;
  nvfp4_qopts o;
  nvfp4_tensor *xt, *q = NULL, *r = NULL;
  float a;
  int i, k;
  for (i = 0; i < 16; i++) x[i * 16 + 5] = bf(v[i]);
  xt = bf16_tensor(S2(16, 16), x);
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.rht = 1;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_OK);
  assert_true(a == 5.1875f);
  assert_int_equal(nvfp4_tensor_amax(q, 0, &a), NVFP4_OK);
  assert_true(a == 4.0f);
  /* the amax's errors name the value and the rule and leave *amax as it was */
  assert_err(nvfp4_tensor_amax(xt, 0, &a), NVFP4_EUSAGE,
             "amax: a tensor of dtype bf16 has no amax (fp4 only)");
  assert_err(nvfp4_tensor_amax(q, 2, &a), NVFP4_EINVAL,
             "direction 2 is not 0 (rowwise) or 1 (columnwise)");
  assert_true(a == 4.0f);
  cd = read_buf(q, NVFP4_COLUMNWISE_DATA, NULL);   /* [16, 8] */
  cs = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);  /* [128, 4] */
  assert_memory_equal(cd + 5 * 8, packed, 8);
  for (k = 0; k < 16; k++) {
    assert_int_equal(cs[k * 4], k == 5 ? 0x7E : 0x00);
    if (k != 5) for (i = 0; i < 8; i++) assert_int_equal(cd[k * 8 + i], 0);
  }
  /* dequantize that block as a rowwise tensor with the columnwise amax */
  {
    uint8_t rs[128 * 4] = {0x7E};
    float am[2] = {5.1875f, 5.1875f};
    assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, S2(1, 16), cd + 5 * 8, rs, NULL, NULL,
                                                am, &r), NVFP4_OK);
    y = dequant_bf16(r);
    for (i = 0; i < 16; i++)
      if (y[i] != nvfp4i_f32_to_bf16(deq[i]))
        fail_msg("TV9 dequant %d: %g, expected %g", i, nvfp4i_bf16_to_f32(y[i]), deq[i]);
    free(y);
  }
  /* without signs the block is the plain H/4 transform: amax 4.5625 */
  nvfp4_tensor_destroy(q);
  o.rht_no_signs = 1;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_OK);
  assert_true(a == 4.5625f);
  free(cd); free(cs);
  nvfp4_tensor_destroy(r);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


/* ---- a naive re-derivation of §4 / §7 / §8 / §5.2 --------------------- */

typedef struct naive_opts { int sr; uint64_t seed, off; int stream; const float *tile_amax; } naive_opts;

/* Rowwise quantization of the R x C fp32 matrix X into data [R, C/2] and a
** scale [ru(R,128), ru(C/16,4)], element by element, straight from §4. */
static void naive_rows (const float *X, int64_t R, int64_t C, float amax,
                        const naive_opts *no, uint8_t *data, uint8_t *scale) {
  int64_t scols = (C / 16 + 3) / 4 * 4, r, j, i;
  float s_enc = amax == 0 ? 1.0f : fminf(2688.0f / amax, 3.4028234663852886e38f);
  float s_dec, m;
  if (s_enc == 0) s_enc = 1.0f;
  s_dec = 1.0f / s_enc;
  m = s_enc * 0.16666667163372040f;
  memset(scale, 0, (size_t)((R + 127) / 128 * 128 * scols));
  for (r = 0; r < R; r++)
    for (j = 0; j < C / 16; j++) {
      const float *x = X + r * C + 16 * j;
      float ab = 0, s, d, enc;
      uint8_t sf;
      if (no->tile_amax) ab = no->tile_amax[(r / 16) * (C / 16) + j];
      else for (i = 0; i < 16; i++) if (fabsf(x[i]) > ab) ab = fabsf(x[i]);
      s = fminf(ab * m, 3.4028234663852886e38f);
      sf = nvfp4i_e4m3_encode(s);
      d = nvfp4i_e4m3_value(sf) * s_dec;
      enc = fminf(1.0f / d, 3.4028234663852886e38f);
      scale[r * scols + j] = sf;
      for (i = 0; i < 16; i++) {
        int64_t e = r * C + 16 * j + i;
        uint8_t c = no->sr ? nvfp4i_e2m1_encode_sr(x[i] * enc,
                                                   nvfp4i_sr_byte(no->seed, no->off, no->stream, (uint64_t)e))
                           : nvfp4i_e2m1_encode(x[i] * enc);
        uint8_t *b = data + e / 2;
        if (i & 1) *b = (uint8_t)((*b & 0x0f) | (c << 4));
        else *b = (uint8_t)((*b & 0xf0) | c);
      }
    }
}


/* X^T of the M x K matrix, with each 16-chunk of its rows RHT'd directly
** (16-term sum in fp64; inputs here span few binades, so it is exact). */
static float *naive_transpose (const float *X, int64_t M, int64_t K, int rht, unsigned mask) {
  float *T = (float *)malloc((size_t)(M * K) * sizeof(float));
  int64_t m, k, c, r;
  for (m = 0; m < M; m++)
    for (k = 0; k < K; k++) T[k * M + m] = X[m * K + k];
  if (rht)
    for (k = 0; k < K; k++)
      for (m = 0; m < M; m += 16) {
        float y[16];
        for (c = 0; c < 16; c++) {
          double sum = 0;
          for (r = 0; r < 16; r++) {
            double w = T[k * M + m + r] * (((mask >> r) & 1) ? -1.0 : 1.0);
            sum += (__builtin_popcountll((unsigned long long)(r & c)) & 1) ? -w : w;
          }
          y[c] = nvfp4i_bf16_to_f32(nvfp4i_bf16_from_double(sum * 0.25));
        }
        for (c = 0; c < 16; c++) T[k * M + m + c] = y[c];
      }
  return T;
}


static float amax_of (const float *X, int64_t n) {
  float a = 0;
  int64_t i;
  for (i = 0; i < n; i++) if (fabsf(X[i]) > a) a = fabsf(X[i]);
  return a;
}


/* Quantize a random bf16 [M, K] with o and compare all four buffers and the
** amaxes with the naive derivation. */
static void compare_with_naive (int64_t M, int64_t K, const nvfp4_qopts *o, uint64_t seed) {
  nvfp4_tensor *xt = NULL, *q = NULL;
  uint16_t *h = (uint16_t *)malloc((size_t)(M * K) * 2);
  float *X = (float *)malloc((size_t)(M * K) * sizeof(float)), *T, *tam = NULL, *tamT = NULL;
  unsigned mask = o->rht_no_signs ? 0 : NVFP4_RHT_SIGNS;
  int64_t i, n = M * K;
  naive_opts no;
  size_t nb;
  uint8_t *got, *want;
  float a, arow, acol;
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(M, K), NVFP4_BF16, seed, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(xt, h, (size_t)n * 2), NVFP4_OK);
  for (i = 0; i < n; i++) X[i] = nvfp4i_bf16_to_f32(h[i]);
  T = naive_transpose(X, M, K, o->rht, mask);
  arow = amax_of(X, n);
  acol = o->rht ? amax_of(T, n) : arow;
  assert_int_equal(nvfp4_quantize(ctx, xt, o, &q), NVFP4_OK);
  if (o->two_d) {
    int64_t r, c;
    tam = (float *)calloc((size_t)((M / 16) * (K / 16)), sizeof(float));
    tamT = (float *)calloc((size_t)((M / 16) * (K / 16)), sizeof(float));
    for (r = 0; r < M; r++)
      for (c = 0; c < K; c++) {
        float *d = &tam[(r / 16) * (K / 16) + c / 16];
        if (fabsf(X[r * K + c]) > *d) *d = fabsf(X[r * K + c]);
      }
    for (r = 0; r < K / 16; r++)
      for (c = 0; c < M / 16; c++) tamT[r * (M / 16) + c] = tam[c * (K / 16) + r];
  }
  if (o->rowwise) {
    assert_int_equal(nvfp4_tensor_amax(q, 0, &a), NVFP4_OK);
    assert_true(a == arow);
    memset(&no, 0, sizeof no);
    no.sr = o->sr; no.seed = o->sr_seed; no.off = o->sr_offset; no.stream = 0;
    no.tile_amax = tam;
    got = read_buf(q, NVFP4_ROWWISE_DATA, &nb);
    want = (uint8_t *)calloc(1, nb + (size_t)((M + 127) / 128 * 128 * ((K / 16 + 3) / 4 * 4)));
    naive_rows(X, M, K, arow, &no, want, want + nb);
    assert_memory_equal(got, want, nb);
    free(got);
    got = read_buf(q, NVFP4_ROWWISE_SCALE, &nb);
    assert_memory_equal(got, want + (size_t)(M * K / 2), nb);
    free(got); free(want);
  }
  if (o->columnwise) {
    assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_OK);
    assert_true(a == acol);
    memset(&no, 0, sizeof no);
    no.sr = o->sr; no.seed = o->sr_seed; no.off = o->sr_offset; no.stream = 1;
    if (o->two_d) {
      /* 2D: the tile of transposed block (k, j) is tile (j, k/16): expand
      ** per 16 rows of T into a per-row-group table */
      no.tile_amax = tamT;
    }
    got = read_buf(q, NVFP4_COLUMNWISE_DATA, &nb);
    want = (uint8_t *)calloc(1, nb + (size_t)((K + 127) / 128 * 128 * ((M / 16 + 3) / 4 * 4)));
    naive_rows(T, K, M, acol, &no, want, want + nb);
    assert_memory_equal(got, want, nb);
    free(got);
    got = read_buf(q, NVFP4_COLUMNWISE_SCALE, &nb);
    assert_memory_equal(got, want + (size_t)(M * K / 2), nb);
    free(got); free(want);
  }
  free(tam); free(tamT); free(T); free(X); free(h);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


static void test_naive_1d_rn (void **state) {
  nvfp4_qopts o;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  compare_with_naive(48, 64, &o, 1);
  compare_with_naive(144, 32, &o, 2);
}


static void test_naive_rht (void **state) {
  nvfp4_qopts o;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.rht = 1;
  compare_with_naive(64, 48, &o, 3);
  o.rht_no_signs = 1;
  compare_with_naive(32, 32, &o, 4);
}


static void test_naive_sr (void **state) {
  nvfp4_qopts o;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.sr = 1;
  o.sr_seed = 0x1234;
  o.sr_offset = 77;
  compare_with_naive(32, 64, &o, 5);
  o.rht = 1;
  compare_with_naive(48, 32, &o, 6);
}


/* 2D (§7): one scale per 16x16 tile, replicated; the columnwise codes are
** the nibble transpose of the rowwise codes, and scale_t[16kt+r][mt] =
** scale[16mt][kt]. */
static void test_2d_blocks (void **state) {
  nvfp4_qopts o;
  nvfp4_tensor *xt = NULL, *q = NULL;
  uint8_t *rd, *rs, *cd, *cs;
  int64_t M = 48, K = 64, m, k;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.two_d = 1;
  compare_with_naive(M, K, &o, 7);
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(M, K), NVFP4_BF16, 8, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  rd = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  rs = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  cd = read_buf(q, NVFP4_COLUMNWISE_DATA, NULL);
  cs = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);
  for (m = 0; m < M; m++)
    for (k = 0; k < K; k++) {
      unsigned a = (rd[m * (K / 2) + k / 2] >> (4 * (k & 1))) & 15;
      unsigned b = (cd[k * (M / 2) + m / 2] >> (4 * (m & 1))) & 15;
      assert_int_equal(a, b);
      if (k % 16 == 0) assert_int_equal(rs[m * 4 + k / 16], rs[(m / 16) * 16 * 4 + k / 16]);
      if (m % 16 == 0) assert_int_equal(cs[k * 4 + m / 16], rs[m * 4 + k / 16]);
    }
  free(rd); free(rs); free(cd); free(cs);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


/* ---- field cases (cases/field-cases.md) ------------------------------- */

/* BH-06: 3-D [4, 8, 64] row + col; columnwise is 2-D; dequant keeps 3-D;
** the rowwise bytes equal those of the flattened [32, 64]; quantizing into
** an existing 3-D tensor gives the same buffers. */
static void test_bh06_3d (void **state) {
  nvfp4_qopts o;
  nvfp4_tensor *xt = NULL, *x2 = NULL, *q = NULL, *q2 = NULL, *y = NULL;
  uint8_t *a, *b, *cs;
  size_t na, nb;
  int r, c;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  assert_int_equal(nvfp4_tensor_randn(ctx, S3(4, 8, 64), NVFP4_BF16, 11, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA), S3(4, 8, 32));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), S2(128, 4));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA), S2(64, 16));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_SCALE), S2(128, 4));
  cs = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);
  for (r = 0; r < 128; r++)
    for (c = 0; c < 4; c++)
      if (r >= 64 || c >= 2) assert_int_equal(cs[r * 4 + c], 0);
      else assert_int_not_equal(cs[r * 4 + c], 0);
  assert_int_equal(nvfp4_tensor_reshape(xt, S2(32, 64), &x2), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, x2, &o, &q2), NVFP4_OK);
  a = read_buf(q, NVFP4_ROWWISE_DATA, &na);
  b = read_buf(q2, NVFP4_ROWWISE_DATA, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a); free(b);
  a = read_buf(q, NVFP4_COLUMNWISE_DATA, &na);
  b = read_buf(q2, NVFP4_COLUMNWISE_DATA, &nb);
  assert_memory_equal(a, b, na);
  assert_int_equal(nvfp4_dequantize(ctx, q, NVFP4_F32, &y), NVFP4_OK);
  assert_shape(nvfp4_tensor_shape(y), S3(4, 8, 64));
  free(a); free(b); free(cs);
  /* the row's in-place update: quantizing into an existing 3-D NVFP4 tensor
  ** (the backend entry, on buffers pre-filled with 0xFF) is accepted, its
  ** buffers have the fresh tensor's shapes and bytes */
  nvfp4_tensor_destroy(q2);
  q2 = quantize_prefilled(xt, &o, q);
  for (r = 0; r < 4; r++) {
    assert_shape(nvfp4_tensor_buffer_shape(q2, (nvfp4_buffer)r),
                 nvfp4_tensor_buffer_shape(q, (nvfp4_buffer)r));
    a = read_buf(q, (nvfp4_buffer)r, &na);
    b = read_buf(q2, (nvfp4_buffer)r, NULL);
    assert_memory_equal(a, b, na);
    free(a); free(b);
  }
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(q2); nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(x2); nvfp4_tensor_destroy(xt);
}


/* BH-08: SR of [4096, 16] rows [6, 15 x 0.30078125]: S_enc 448, scale
** 0x7E, enc 1; each 0.3 goes to 0.5 iff its byte >= 102 (154/256). */
static uint8_t *bh08_run (uint64_t seed, uint64_t off, nvfp4_tensor *xt) {
  nvfp4_qopts o;
  nvfp4_tensor *q = NULL;
  uint8_t *d;
  memset(&o, 0, sizeof o);
  o.rowwise = o.sr = 1;
  o.sr_seed = seed;
  o.sr_offset = off;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  nvfp4_tensor_destroy(q);
  return d;
}


static void test_bh08_sr (void **state) {
  const int M = 4096;
  uint16_t *h = (uint16_t *)malloc((size_t)M * 16 * 2);
  nvfp4_tensor *xt, *q = NULL;
  nvfp4_qopts o;
  uint8_t *d, *d2, *d3, *s;
  uint16_t *y;
  long ups = 0, n = (long)M * 15;
  double p, sigma, mean = 0;
  int m, i;
  for (m = 0; m < M; m++)
    for (i = 0; i < 16; i++) h[m * 16 + i] = bf(i == 0 ? 6.0f : 0.30078125f);
  xt = bf16_tensor(S2(M, 16), h);
  d = bh08_run(42, 0, xt);
  for (m = 0; m < M; m++)
    for (i = 0; i < 16; i++) {
      unsigned c = (d[m * 8 + i / 2] >> (4 * (i & 1))) & 15;
      uint8_t r = nvfp4i_sr_byte(42, 0, NVFP4I_SR_ROWWISE, (uint64_t)(m * 16 + i));
      if (i == 0) { assert_int_equal(c, 0x7); continue; }
      assert_true(c == 0 || c == 1);
      assert_int_equal(c, r >= 102 ? 1 : 0);       /* the documented mapping */
      ups += c;
    }
  p = 154.0 / 256.0;
  sigma = sqrt(p * (1 - p) / (double)n);
  if (fabs((double)ups / (double)n - p) > 3 * sigma)
    fail_msg("fraction rounded up %.5f, expected %.5f +- %.5f", (double)ups / n, p, 3 * sigma);
  memset(&o, 0, sizeof o);
  o.rowwise = o.sr = 1;
  o.sr_seed = 42;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  s = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  for (m = 0; m < M; m++) assert_int_equal(s[m * 4], 0x7E);
  y = dequant_bf16(q);
  for (m = 0; m < M; m++)
    for (i = 1; i < 16; i++) mean += nvfp4i_bf16_to_f32(y[m * 16 + i]);
  mean /= (double)n;                       /* 0.5 * fraction: ~0.3008 */
  assert_true(fabs(mean - 0.30078125) < 3 * 0.5 * sigma + 1e-9);
  d2 = bh08_run(42, 0, xt);
  assert_memory_equal(d, d2, (size_t)M * 8);       /* same seed, same bytes */
  d3 = bh08_run(43, 0, xt);
  assert_memory_not_equal(d, d3, (size_t)M * 8);   /* another seed differs */
  free(d3);
  d3 = bh08_run(42, 1, xt);
  assert_memory_not_equal(d, d3, (size_t)M * 8);   /* another offset differs */
  free(d); free(d2); free(d3); free(s); free(y); free(h);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


/* BH-11: all zeros (and a -0.0 variant, and that variant with the RHT on
** the columnwise copy, with 4over6 (its own S_enc, EMAX 256), 2D blocks and
** SR): both amaxes 0, S_enc 1, scales 0x00, data 0x00 (-0.0 -> nibble 0x8
** in both copies, our documented kernel behaviour; the RHT sums the block,
** and a sum of zeros is +0), dequant 0. */
static void test_bh11_zeros (void **state) {
  uint16_t *h = (uint16_t *)calloc(128 * 64, 2), *y;
  nvfp4_tensor *xt, *q = NULL;
  nvfp4_qopts o;
  uint8_t *b;
  size_t n;
  float a;
  int v, i, d;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  for (v = 0; v < 6; v++) {
    if (v) h[3] = h[64 * 5 + 17] = 0x8000;          /* -0.0 at (0, 3) and (5, 17) */
    o.rht = v == 2;
    o.four_over_six = v == 3;
    o.two_d = v == 4;
    o.sr = v == 5;
    o.sr_seed = 11;
    xt = bf16_tensor(S2(128, 64), h);
    assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
    for (d = 0; d < 2; d++) {
      a = -1;
      assert_int_equal(nvfp4_tensor_amax(q, d, &a), NVFP4_OK);
      assert_true(a == 0.0f);
    }
    b = read_buf(q, NVFP4_ROWWISE_SCALE, &n);
    for (i = 0; i < (int)n; i++) assert_int_equal(b[i], 0);
    free(b);
    b = read_buf(q, NVFP4_COLUMNWISE_SCALE, &n);
    for (i = 0; i < (int)n; i++) assert_int_equal(b[i], 0);
    free(b);
    b = read_buf(q, NVFP4_ROWWISE_DATA, &n);
    for (i = 0; i < (int)n; i++)
      assert_int_equal(b[i], (v && i == 1) ? 0x80 : (v && i == 32 * 5 + 8) ? 0x80 : 0);
    free(b);
    /* columnwise [64, 64]: X[m][k] is byte (k, m/2), high nibble for odd m */
    b = read_buf(q, NVFP4_COLUMNWISE_DATA, &n);
    assert_int_equal(n, 64 * 64);
    for (i = 0; i < (int)n; i++)
      assert_int_equal(b[i], (v && v != 2 && i == 3 * 64) ? 0x08
                             : (v && v != 2 && i == 17 * 64 + 2) ? 0x80 : 0);
    free(b);
    y = dequant_bf16(q);
    for (i = 0; i < 128 * 64; i++) {
      assert_true(nvfp4i_bf16_to_f32(y[i]) == 0.0f);   /* no NaN/Inf */
      assert_int_equal(y[i], h[i]);                     /* -0 stays -0 */
    }
    free(y);
    nvfp4_tensor_destroy(q);
    nvfp4_tensor_destroy(xt);
  }
  free(h);
}


/* BH-12: amax is max |x| even when the largest magnitudes are negative. */
static void test_bh12_negative_amax (void **state) {
  uint16_t h[256], *y;
  nvfp4_tensor *xt, *q = NULL;
  uint8_t *d, *s;
  float a;
  int m, i;
  for (m = 0; m < 16; m++)
    for (i = 0; i < 16; i++) h[m * 16 + i] = bf(i == 0 ? -6.0f : -1.0f);
  xt = bf16_tensor(S2(16, 16), h);
  assert_int_equal(nvfp4_quantize(ctx, xt, NULL, &q), NVFP4_OK);   /* defaults: rowwise */
  assert_int_equal(nvfp4_tensor_amax(q, 0, &a), NVFP4_OK);
  assert_true(a == 6.0f);
  d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  s = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  for (m = 0; m < 16; m++) {
    assert_int_equal(s[m * 4], 0x7E);
    assert_int_equal(d[m * 8], 0xAF);
    for (i = 1; i < 8; i++) assert_int_equal(d[m * 8 + i], 0xAA);
  }
  y = dequant_bf16(q);
  for (i = 0; i < 256; i++) assert_true(nvfp4i_bf16_to_f32(y[i]) == (i % 16 ? -1.0f : -6.0f));
  free(y); free(d); free(s);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


/* BH-13: ties to even, subnormal round-up, nibble order. */
static void test_bh13_ties (void **state) {
  static const float row0[32] = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -.25f, -.75f,
                                 -1.25f, -1.75f, -2.5f, -3.5f, -5, 0, 2688};
  static const uint8_t data0[16] = {0x07, 0x22, 0x44, 0x66, 0xA8, 0xCA, 0xEC, 0x0E,
                                    0x07, 0, 0, 0, 0, 0, 0, 0};
  static const float deq0[32] = {6, 0, 1, 1, 2, 2, 4, 4, -0.0f, -1, -1, -2, -2, -4, -4, 0,
                                 2688};
  uint16_t h[16 * 32] = {0}, *y;
  nvfp4_tensor *xt, *q = NULL;
  uint8_t *d, *s;
  size_t n;
  int i;
  for (i = 0; i < 32; i++) h[i] = bf(row0[i]);
  xt = bf16_tensor(S2(16, 32), h);
  assert_int_equal(nvfp4_quantize(ctx, xt, NULL, &q), NVFP4_OK);
  d = read_buf(q, NVFP4_ROWWISE_DATA, &n);
  s = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  assert_memory_equal(d, data0, 16);
  for (i = 16; i < (int)n; i++) assert_int_equal(d[i], 0);
  assert_int_equal(s[0], 0x38);
  assert_int_equal(s[1], 0x7E);
  for (i = 2; i < 128 * 4; i++) assert_int_equal(s[i], 0);
  y = dequant_bf16(q);
  for (i = 0; i < 32; i++) assert_int_equal(y[i], nvfp4i_f32_to_bf16(deq0[i]));
  assert_int_equal(nvfp4i_e2m1_encode(0.251953125f), 0x1);
  assert_int_equal(nvfp4i_e2m1_encode(0.74609375f), 0x1);
  free(y); free(d); free(s);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
  /* the extras through quantize too (enc 1: amax 2688, a 6 in the block):
  ** [6, 0.251953125, 0.74609375, 0 ..] packs to 17 01 00 .., scale 0x38 */
  {
    static const uint8_t want[8] = {0x17, 0x01, 0, 0, 0, 0, 0, 0};
    uint16_t e[16] = {0};
    e[0] = bf(6.0f); e[1] = bf(0.251953125f); e[2] = bf(0.74609375f);
    expect_row16(e, 2688.0f, 0x38, want);
  }
}


/* BH-14: hand-made bytes decode with even = low nibble; quantizing the
** decoded tensor returns the same bytes. */
static void test_bh14_nibble_order (void **state) {
  static const uint8_t row[8] = {0x21, 0x43, 0x65, 0x07, 0xA9, 0xCB, 0xED, 0x8F};
  static const float want[16] = {0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4,
                                 -6, -0.0f};
  uint8_t data[16 * 8] = {0}, scale[128 * 4] = {0}, *d2, *s2;
  float am[2] = {2688.0f, 2688.0f};
  nvfp4_tensor *q = NULL, *yt = NULL, *q2 = NULL;
  nvfp4_qopts o;
  uint16_t *y;
  int i;
  memcpy(data, row, 8);
  scale[0] = 0x38;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, S2(16, 16), data, scale, NULL, NULL, am, &q),
                   NVFP4_OK);
  y = dequant_bf16(q);
  for (i = 0; i < 16; i++) assert_int_equal(y[i], nvfp4i_f32_to_bf16(want[i]));
  for (i = 16; i < 256; i++) assert_int_equal(y[i], 0);
  yt = bf16_tensor(S2(16, 16), y);
  memset(&o, 0, sizeof o);
  o.rowwise = o.has_amax = 1;
  o.amax[0] = o.amax[1] = 2688.0f;
  assert_int_equal(nvfp4_quantize(ctx, yt, &o, &q2), NVFP4_OK);
  d2 = read_buf(q2, NVFP4_ROWWISE_DATA, NULL);
  s2 = read_buf(q2, NVFP4_ROWWISE_SCALE, NULL);
  assert_memory_equal(d2, data, sizeof data);
  assert_memory_equal(s2, scale, sizeof scale);
  free(y); free(d2); free(s2);
  nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(yt); nvfp4_tensor_destroy(q2);
}


static void check_scale_padding (const nvfp4_tensor *q, nvfp4_buffer b, int64_t rows,
                                 int64_t cols) {
  nvfp4_shape s = nvfp4_tensor_buffer_shape(q, b);
  uint8_t *p = read_buf(q, b, NULL);
  int64_t r, c, nz = 0;
  for (r = 0; r < s.dim[0]; r++)
    for (c = 0; c < s.dim[1]; c++) {
      if (r >= rows || c >= cols) {
        if (p[r * s.dim[1] + c] != 0) fail_msg("padding byte (%lld, %lld) is 0x%02x",
                                               (long long)r, (long long)c, p[r * s.dim[1] + c]);
      }
      else nz += p[r * s.dim[1] + c] != 0;
    }
  assert_true(nz > 0);
  free(p);
}


/* BH-16: M = 576 pads the rowwise scale to [640, 128], rows 576.. zero. */
static void test_bh16_scale_rows (void **state) {
  nvfp4_tensor *xt = NULL, *q = NULL;
  assert_int_equal(nvfp4_tensor_uniform(ctx, S2(576, 2048), NVFP4_BF16, 16, -3, 3, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, xt, NULL, &q), NVFP4_OK);
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), S2(640, 128));
  check_scale_padding(q, NVFP4_ROWWISE_SCALE, 576, 128);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xt);
}


/* BH-17: the small shapes [128, 48] (3 scale columns padded to 4) and
** [256, 80] (5 to 8), and the real K_local = 3696 (231 to 232) at M = 128:
** scale shapes [ru(M,128), ru(K/16,4)], byte (r, c) at r * padded_cols + c
** (each real byte is its block's scale, recomputed from the input), padded
** columns and rows 0x00 -- also when the backend entry writes into buffers
** pre-filled with 0xFF, scales and data of both copies. */
static void test_bh17_scale_padding (void **state) {
  static const int64_t shapes[3][3] = {{128, 48, 4}, {256, 80, 8}, {128, 3696, 232}};
  int i;
  for (i = 0; i < 3; i++) {
    int64_t M = shapes[i][0], K = shapes[i][1], pc = shapes[i][2], r, c;
    nvfp4_tensor *xt = NULL, *q = NULL, *q2 = NULL;
    nvfp4_qopts o;
    uint8_t *a, *b;
    size_t n;
    float *x = (float *)malloc((size_t)(M * K) * sizeof(float)), amax;
    naive_opts no;
    uint8_t *wd, *ws;
    memset(&o, 0, sizeof o);
    o.rowwise = o.columnwise = 1;
    assert_int_equal(nvfp4_tensor_randn(ctx, S2(M, K), NVFP4_F32, 17 + (uint64_t)i, &xt), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(xt, x, (size_t)(M * K) * sizeof(float)), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
    assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), S2((M + 127) / 128 * 128, pc));
    assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_SCALE),
                 S2((K + 127) / 128 * 128, (M / 16 + 3) / 4 * 4));
    check_scale_padding(q, NVFP4_ROWWISE_SCALE, M, K / 16);
    check_scale_padding(q, NVFP4_COLUMNWISE_SCALE, K, M / 16);
    a = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
    amax = amax_of(x, M * K);
    /* the expected bytes from the naive derivation of §4 (not the library's
    ** block-scale functions, which the quantizer itself calls) */
    memset(&no, 0, sizeof no);
    wd = (uint8_t *)malloc((size_t)(M * K / 2));
    ws = (uint8_t *)malloc((size_t)((M + 127) / 128 * 128 * pc));
    naive_rows(x, M, K, amax, &no, wd, ws);
    for (r = 0; r < M; r++)
      for (c = 0; c < K / 16; c++) {
        uint8_t want = ws[r * pc + c];
        if (a[r * pc + c] != want)
          fail_msg("[%lld, %lld]: scale byte (%lld, %lld) at offset %lld is 0x%02x, expected 0x%02x",
                   (long long)M, (long long)K, (long long)r, (long long)c,
                   (long long)(r * pc + c), a[r * pc + c], want);
      }
    free(a);
    a = read_buf(q, NVFP4_ROWWISE_DATA, &n);
    assert_memory_equal(a, wd, n);
    free(a); free(wd); free(ws);
    /* the backend entry on buffers pre-filled with 0xFF */
    q2 = quantize_prefilled(xt, &o, q);
    for (c = 0; c < 4; c++) {
      a = read_buf(q, (nvfp4_buffer)c, &n);
      b = read_buf(q2, (nvfp4_buffer)c, NULL);
      assert_memory_equal(a, b, n);
      free(a); free(b);
    }
    free(x);
    nvfp4_tensor_destroy(q2); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(xt);
  }
}


/* BH-19: NaN rows after 8 valid rows do not leak: amax ignores NaN, and
** rows 0-7 are byte-identical to quantizing the 8 valid rows alone (1D, and
** 2D, whose 16x16 tiles reduce across rows); the NaN rows get scale 0x00
** and codes 0x7 (the kernel's NaN rule, spec TV4) and dequantize to 0. */
static void test_bh19_nan_rows (void **state) {
  nvfp4_tensor *small = NULL, *full, *q8 = NULL, *q = NULL;
  uint16_t *h = (uint16_t *)malloc(64 * 128 * 2);
  uint8_t *a, *b;
  float a8, a64;
  int i;
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(8, 128), NVFP4_BF16, 19, &small), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(small, h, 8 * 128 * 2), NVFP4_OK);
  for (i = 8 * 128; i < 64 * 128; i++) h[i] = 0x7FC0;   /* NaN */
  full = bf16_tensor(S2(64, 128), h);
  assert_int_equal(nvfp4_quantize(ctx, small, NULL, &q8), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, full, NULL, &q), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_amax(q8, 0, &a8), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_amax(q, 0, &a64), NVFP4_OK);
  assert_true(isfinite(a64) && a64 == a8 && a8 > 0);
  a = read_buf(q8, NVFP4_ROWWISE_DATA, NULL);
  b = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  assert_memory_equal(a, b, 8 * 64);
  for (i = 8 * 64; i < 64 * 64; i++) assert_int_equal(b[i], 0x77);   /* NaN -> 0x7 (spec TV4) */
  free(a); free(b);
  {   /* the padding rows dequantize to 0 (code 7 times scale 0), not NaN */
    uint16_t *y = dequant_bf16(q);
    for (i = 8 * 128; i < 64 * 128; i++) assert_int_equal(y[i], 0x0000);
    free(y);
  }
  a = read_buf(q8, NVFP4_ROWWISE_SCALE, NULL);
  b = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  assert_memory_equal(a, b, 8 * 8);
  for (i = 8 * 8; i < 128 * 8; i++) assert_int_equal(b[i], 0);   /* NaN rows: scale 0 */
  free(a); free(b);
  {   /* 2D blocks: our one reduction across rows, the 16x16 tile amax; tile
      ** row 0 holds the 8 valid rows and 8 NaN rows, and must give the valid
      ** rows what the 8-row tensor's partial tile gives them */
    nvfp4_qopts o;
    nvfp4_tensor *q8t = NULL, *qt = NULL;
    memset(&o, 0, sizeof o);
    o.rowwise = o.two_d = 1;
    assert_int_equal(nvfp4_quantize(ctx, small, &o, &q8t), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, full, &o, &qt), NVFP4_OK);
    a = read_buf(q8t, NVFP4_ROWWISE_DATA, NULL);
    b = read_buf(qt, NVFP4_ROWWISE_DATA, NULL);
    assert_memory_equal(a, b, 8 * 64);
    free(a); free(b);
    a = read_buf(q8t, NVFP4_ROWWISE_SCALE, NULL);
    b = read_buf(qt, NVFP4_ROWWISE_SCALE, NULL);
    assert_memory_equal(a, b, 8 * 8);
    for (i = 0; i < 8 * 8; i++) assert_int_not_equal(b[i], 0x7F);   /* no NaN scale */
    free(a); free(b);
    nvfp4_tensor_destroy(q8t); nvfp4_tensor_destroy(qt);
  }
  free(h);
  nvfp4_tensor_destroy(q8); nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(small); nvfp4_tensor_destroy(full);
}


/* BH-21: M = 1 and 33 rowwise (fp32) round-trip as the formula says, the
** scale's padding rows are 0; columnwise on M = 1 (and 33) is a clean
** EINVAL. */
static void test_bh21_small_m (void **state) {
  static const int64_t Ms[2] = {1, 33};
  int t;
  for (t = 0; t < 2; t++) {
    int64_t M = Ms[t], i;
    nvfp4_tensor *xt = NULL, *q = NULL, *y = NULL;
    float *x = (float *)malloc((size_t)M * 16 * 4), *yv = (float *)malloc((size_t)M * 16 * 4);
    float amax;
    uint8_t *d, *s;
    assert_int_equal(nvfp4_tensor_randn(ctx, S2(M, 16), NVFP4_F32, 21, &xt), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(xt, x, (size_t)M * 64), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, xt, NULL, &q), NVFP4_OK);
    assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA), S2(M, 8));
    assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), S2(128, 4));
    assert_int_equal(nvfp4_dequantize(ctx, q, NVFP4_F32, &y), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(y, yv, (size_t)M * 64), NVFP4_OK);
    d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
    s = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
    amax = amax_of(x, M * 16);
    /* expected bytes from the naive derivation of §4, values from §10's
    ** formula with E2M1 and E4M3 decoded here by hand */
    {
      static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
      naive_opts no;
      uint8_t *wd = (uint8_t *)malloc((size_t)M * 8), *ws = (uint8_t *)malloc(128 * 4);
      memset(&no, 0, sizeof no);
      naive_rows(x, M, 16, amax, &no, wd, ws);
      for (i = 0; i < M * 16; i++) {
        uint8_t sf = ws[(i / 16) * 4], c = (uint8_t)((wd[i / 2] >> (4 * (i & 1))) & 15);
        int ex = (sf >> 3) & 15, mant = sf & 7;
        float sf32 = ex ? ldexpf(1 + mant / 8.0f, ex - 7) : ldexpf(mant / 8.0f, -6);
        float v = (c & 8) ? -e2m1[c & 7] : e2m1[c & 7];
        assert_int_equal(s[(i / 16) * 4], sf);
        assert_int_equal((d[i / 2] >> (4 * (i & 1))) & 15, c);
        assert_true(yv[i] == v * ((sf32 * amax) * (1.0f / 2688.0f)));
        assert_true(fabsf(yv[i] - x[i]) <= 0.25f * amax + 1e-6f);
      }
      free(wd); free(ws);
    }
    check_scale_padding(q, NVFP4_ROWWISE_SCALE, M, 1);   /* 1 or 33 real rows */
    {   /* columnwise: M % 16 != 0 (and M = 1: M/2 not whole) is a clean EINVAL */
      nvfp4_qopts o;
      nvfp4_tensor *bad = (nvfp4_tensor *)0x1;
      char want[16];
      memset(&o, 0, sizeof o);
      o.columnwise = 1;
      snprintf(want, sizeof want, "M=%lld", (long long)M);
      assert_err(nvfp4_quantize(ctx, xt, &o, &bad), NVFP4_EINVAL, want);
      assert_null(bad);
    }
    free(d); free(s); free(x); free(yv);
    nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(xt);
  }
}


/* BH-22: an empty [0, 64] quantizes: rowwise data [0, 32], scale [0, 4];
** columnwise data [64, 0], scale [128, 0] (the formulas of §6, no special
** case); amax 0; dequantize gives an empty [0, 64]. */
static void test_bh22_empty (void **state) {
  nvfp4_tensor *xt = NULL, *q = NULL, *y = NULL;
  nvfp4_qopts o;
  float a = -1;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  assert_int_equal(nvfp4_tensor_create(ctx, S2(0, 64), NVFP4_BF16, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA), S2(0, 32));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), S2(0, 4));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA), S2(64, 0));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_SCALE), S2(128, 0));
  assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_OK);
  assert_true(a == 0.0f);
  assert_int_equal(nvfp4_dequantize(ctx, q, NVFP4_BF16, &y), NVFP4_OK);
  assert_shape(nvfp4_tensor_shape(y), S2(0, 64));
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(xt);
  o.rht = 1;
  assert_int_equal(nvfp4_tensor_create(ctx, S3(0, 4, 64), NVFP4_BF16, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA), S3(0, 4, 32));
  assert_shape(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA), S2(64, 0));
  nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(xt);
  /* the grouped variant, split sizes [0, 32, 0, 16] of a [48, 64] (we have
  ** no grouped kernel: one quantize per group, in order): the empty groups
  ** give the formula's empty buffers, and the non-empty ones the bytes of
  ** quantizing their rows alone, before any empty group ran */
  {
    static const int64_t split[4] = {0, 32, 0, 16};
    uint16_t *h = (uint16_t *)malloc(48 * 64 * 2);
    nvfp4_tensor *full = NULL, *part[4], *qs[4], *alone[2] = {NULL, NULL};
    int64_t off = 0;
    int g, b, k = 0;
    o.rht = 0;
    assert_int_equal(nvfp4_tensor_randn(ctx, S2(48, 64), NVFP4_BF16, 22, &full), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(full, h, 48 * 64 * 2), NVFP4_OK);
    for (g = 0; g < 4; g++) {
      part[g] = bf16_tensor(S2(split[g], 64), h + off * 64);
      off += split[g];
    }
    alone[0] = NULL;
    assert_int_equal(nvfp4_quantize(ctx, part[1], &o, &alone[0]), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, part[3], &o, &alone[1]), NVFP4_OK);
    for (g = 0; g < 4; g++) {
      qs[g] = NULL;
      assert_int_equal(nvfp4_quantize(ctx, part[g], &o, &qs[g]), NVFP4_OK);
    }
    for (g = 0; g < 4; g++) {
      if (split[g] == 0) {
        assert_shape(nvfp4_tensor_buffer_shape(qs[g], NVFP4_ROWWISE_DATA), S2(0, 32));
        assert_shape(nvfp4_tensor_buffer_shape(qs[g], NVFP4_ROWWISE_SCALE), S2(0, 4));
        assert_shape(nvfp4_tensor_buffer_shape(qs[g], NVFP4_COLUMNWISE_DATA), S2(64, 0));
        assert_shape(nvfp4_tensor_buffer_shape(qs[g], NVFP4_COLUMNWISE_SCALE), S2(128, 0));
        continue;
      }
      for (b = 0; b < 4; b++) {
        size_t n;
        uint8_t *x = read_buf(qs[g], (nvfp4_buffer)b, &n), *w = read_buf(alone[k], (nvfp4_buffer)b, NULL);
        assert_memory_equal(x, w, n);
        free(x); free(w);
      }
      k++;
    }
    for (g = 0; g < 4; g++) { nvfp4_tensor_destroy(qs[g]); nvfp4_tensor_destroy(part[g]); }
    nvfp4_tensor_destroy(alone[0]); nvfp4_tensor_destroy(alone[1]);
    nvfp4_tensor_destroy(full);
    free(h);
  }
}


/* BH-27 (the CPU half; the second-device half needs two GPUs): the
** columnwise amax of X bf16 [1024, 4096] with the RHT equals max |bf16(16x16
** block-Hadamard(X^T))| from a host reference built from the spec's sign
** vector (normalized H16, the sign on the input index), the rowwise amax is
** max |X|; and 100 runs of the RHT amax give the same bits. */
static void test_bh27_rht_amax (void **state) {
  static const int sgn[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  const int64_t M = 1024, K = 4096, n = M * K;
  uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
  float *X = (float *)malloc((size_t)n * sizeof(float)), *T, a, first = -1;
  nvfp4_tensor *xt = NULL, *small = NULL, *q = NULL;
  nvfp4_qopts o;
  unsigned mask = 0;
  int64_t i;
  int r;
  for (r = 0; r < 16; r++) if (sgn[r] < 0) mask |= 1u << r;
  assert_int_equal(mask, 0xD7E8);
  assert_int_equal(NVFP4_RHT_SIGNS, mask);
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(M, K), NVFP4_BF16, 27, &xt), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(xt, h, (size_t)n * 2), NVFP4_OK);
  for (i = 0; i < n; i++) X[i] = nvfp4i_bf16_to_f32(h[i]);
  T = naive_transpose(X, M, K, 1, mask);
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.rht = 1;
  assert_int_equal(nvfp4_quantize(ctx, xt, &o, &q), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_OK);
  if (a != amax_of(T, n)) fail_msg("post-RHT amax %.9g, host reference %.9g", a, amax_of(T, n));
  assert_int_equal(nvfp4_tensor_amax(q, 0, &a), NVFP4_OK);
  assert_true(a == amax_of(X, n));
  nvfp4_tensor_destroy(q);
  /* 100 runs, a smaller tensor (the CPU reference is one thread; the race
  ** of the row was a GPU kernel's) */
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(64, 1024), NVFP4_BF16, 28, &small), NVFP4_OK);
  o.rowwise = 0;
  for (r = 0; r < 100; r++) {
    q = NULL;
    assert_int_equal(nvfp4_quantize(ctx, small, &o, &q), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_OK);
    if (r == 0) first = a;
    else if (nvfp4i_f32_bits(a) != nvfp4i_f32_bits(first))
      fail_msg("run %d: RHT amax %.9g, run 0 gave %.9g", r, a, first);
    nvfp4_tensor_destroy(q);
  }
  free(T); free(X); free(h);
  nvfp4_tensor_destroy(small);
  nvfp4_tensor_destroy(xt);
}


/* ---- bad inputs: right status, a message naming the value, inputs kept -- */

static void test_quantize_bad_inputs (void **state) {
  nvfp4_tensor *x = NULL, *xf = NULL, *xu = NULL, *x20 = NULL, *x8 = NULL, *q = NULL;
  nvfp4_ctx *other = NULL;
  nvfp4_tensor *foreign = NULL;
  nvfp4_qopts o;
  uint16_t before[32 * 32], after[32 * 32];
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(32, 32), NVFP4_BF16, 1, &x), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(32, 32), NVFP4_F32, 1, &xf), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_create(ctx, S2(32, 32), NVFP4_U8, &xu), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(32, 20), NVFP4_BF16, 1, &x20), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(8, 32), NVFP4_BF16, 1, &x8), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(x, before, sizeof before), NVFP4_OK);
  memset(&o, 0, sizeof o);

  assert_int_equal(nvfp4_quantize(NULL, x, &o, &q), NVFP4_EINVAL);
  assert_err(nvfp4_quantize(ctx, NULL, &o, &q), NVFP4_EINVAL, "NULL");
  assert_err(nvfp4_quantize(ctx, x, &o, NULL), NVFP4_EINVAL, "out");
  assert_err(nvfp4_quantize(ctx, xu, &o, &q), NVFP4_EINVAL, "u8");
  assert_null(q);
  assert_err(nvfp4_quantize(ctx, x20, &o, &q), NVFP4_EINVAL, "K=20");
  o.columnwise = 1;
  assert_err(nvfp4_quantize(ctx, x8, &o, &q), NVFP4_EINVAL, "M=8");
  o.rht = 1;
  assert_err(nvfp4_quantize(ctx, xf, &o, &q), NVFP4_EINVAL, "fp32");
  o.columnwise = 0; o.rowwise = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "columnwise");
  o.rht = 0; o.rht_no_signs = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "rht_no_signs");
  o.rht_no_signs = 0; o.two_d = 1; o.sr = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "stochastic");
  o.sr = 0; o.rht = 1; o.columnwise = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "RHT");
  memset(&o, 0, sizeof o);
  o.has_amax = 1; o.amax[0] = -1.5f; o.amax[1] = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "-1.5");
  o.amax[0] = 1; o.amax[1] = NAN;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "nan");
  assert_null(q);
  /* 4over6 (§9.1): no RHT, no SR; its options need it; 2D needs whole tiles */
  memset(&o, 0, sizeof o);
  o.four_over_six = 1; o.columnwise = 1; o.rht = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "4over6 excludes RHT");
  o.rht = 0; o.sr = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "4over6 excludes stochastic");
  memset(&o, 0, sizeof o);
  o.four_over_six_mse = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "four_over_six_mse is set without");
  o.four_over_six_mse = 0; o.four_over_six_emax448 = 1;
  assert_err(nvfp4_quantize(ctx, x, &o, &q), NVFP4_EINVAL, "four_over_six_emax448");
  memset(&o, 0, sizeof o);
  o.four_over_six = 1; o.two_d = 1;
  assert_err(nvfp4_quantize(ctx, x8, &o, &q), NVFP4_EINVAL, "M=8");
  assert_null(q);
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &other, NULL), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_randn(other, S2(32, 32), NVFP4_BF16, 1, &foreign), NVFP4_OK);
  assert_err(nvfp4_quantize(ctx, foreign, NULL, &q), NVFP4_EUSAGE, "another context");
  assert_int_equal(nvfp4_tensor_to_host(x, after, sizeof after), NVFP4_OK);
  assert_memory_equal(before, after, sizeof before);
  assert_null(q);
  nvfp4_tensor_destroy(foreign);
  nvfp4_ctx_destroy(other);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(xf); nvfp4_tensor_destroy(xu);
  nvfp4_tensor_destroy(x20); nvfp4_tensor_destroy(x8);
}


static void test_dequantize_bad_inputs (void **state) {
  nvfp4_tensor *x = NULL, *q = NULL, *y = NULL;
  nvfp4_qopts o;
  memset(&o, 0, sizeof o);
  o.columnwise = 1;
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(32, 32), NVFP4_BF16, 1, &x), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, x, &o, &q), NVFP4_OK);
  assert_int_equal(nvfp4_dequantize(NULL, q, NVFP4_F32, &y), NVFP4_EINVAL);
  assert_err(nvfp4_dequantize(ctx, NULL, NVFP4_F32, &y), NVFP4_EINVAL, "NULL");
  assert_err(nvfp4_dequantize(ctx, x, NVFP4_F32, &y), NVFP4_EINVAL, "bf16");
  assert_err(nvfp4_dequantize(ctx, q, NVFP4_F32, &y), NVFP4_EUSAGE, "rowwise");
  nvfp4_tensor_destroy(q);
  assert_int_equal(nvfp4_quantize(ctx, x, NULL, &q), NVFP4_OK);
  assert_err(nvfp4_dequantize(ctx, q, NVFP4_U8, &y), NVFP4_EINVAL, "u8");
  assert_err(nvfp4_dequantize(ctx, q, (nvfp4_dtype)42, &y), NVFP4_EINVAL,
             "output dtype 42 (not a dtype) is not fp32 or bf16");
  assert_err(nvfp4_dequantize(ctx, q, NVFP4_BF16, NULL), NVFP4_EINVAL, "out");
  assert_null(y);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(x);
}


/* The columnwise copy dequantized ([K, M], the transpose) equals the
** rowwise copy of the transposed input quantized with the same amax: the
** layout is the same, the blocks run along M.  3-D input (M = 2 * 48), RNE
** and 2D blocks; with the RHT the values are the rotated ones, whose
** squared norm per 16-block is the input's (H/4 is orthogonal) up to the
** quantization's error.  Errors: no columnwise copy, a plain tensor. */
static void test_dequantize_columnwise (void **state) {
  nvfp4_tensor *x = NULL, *x2 = NULL, *xt = NULL, *q = NULL, *qt = NULL, *y = NULL, *yt = NULL;
  nvfp4_qopts o, ot;
  int twod;
  (void)state;
  assert_int_equal(nvfp4_tensor_randn(ctx, S3(2, 48, 64), NVFP4_BF16, 5, &x), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_reshape(x, S2(96, 64), &x2), NVFP4_OK);
  assert_int_equal(nvfp4_swap_first_dims(ctx, x2, &xt), NVFP4_OK);         /* [64, 96] */
  for (twod = 0; twod < 2; twod++) {
    size_t n = 64 * 96 * sizeof(float);
    float *a = malloc(n), *b = malloc(n);
    memset(&o, 0, sizeof o);
    o.columnwise = 1;
    o.two_d = (unsigned)twod;
    o.has_amax = 1;
    o.amax[0] = o.amax[1] = 4.5f;
    ot = o;
    ot.columnwise = 0;
    ot.rowwise = 1;
    assert_int_equal(nvfp4_quantize(ctx, x, &o, &q), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, xt, &ot, &qt), NVFP4_OK);
    assert_int_equal(nvfp4_dequantize_columnwise(ctx, q, NVFP4_F32, &y), NVFP4_OK);
    assert_int_equal(nvfp4_dequantize(ctx, qt, NVFP4_F32, &yt), NVFP4_OK);
    assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(y), S2(64, 96)));
    assert_int_equal(nvfp4_tensor_to_host(y, a, n), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(yt, b, n), NVFP4_OK);
    assert_memory_equal(a, b, n);
    free(a); free(b);
    nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(qt);
    nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(yt);
    q = qt = y = yt = NULL;
  }
  {   /* RHT: per 16-block along M, ||dequantized||^2 is the input's within 20% */
    size_t n = 64 * 96;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    nvfp4_tensor *xf = NULL;
    int k, blk, i, bad = 0;
    memset(&o, 0, sizeof o);
    o.columnwise = 1;
    o.rht = 1;
    assert_int_equal(nvfp4_quantize(ctx, x, &o, &q), NVFP4_OK);
    assert_int_equal(nvfp4_dequantize_columnwise(ctx, q, NVFP4_F32, &y), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_convert(xt, NVFP4_F32, &xf), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(y, a, n * sizeof(float)), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(xf, b, n * sizeof(float)), NVFP4_OK);
    for (k = 0; k < 64; k++)
      for (blk = 0; blk < 6; blk++) {
        double sa = 0, sb = 0;
        for (i = 0; i < 16; i++) {
          sa += (double)a[k * 96 + blk * 16 + i] * a[k * 96 + blk * 16 + i];
          sb += (double)b[k * 96 + blk * 16 + i] * b[k * 96 + blk * 16 + i];
        }
        bad += fabs(sa - sb) > 0.2 * sb;
      }
    assert_int_equal(bad, 0);
    {   /* and they are not the unrotated values (the RHT is not undone) */
      double d = 0;
      for (i = 0; i < (int)n; i++) d += fabs((double)a[i] - b[i]);
      assert_true(d > 0.5 * (double)n * 0.1);
    }
    free(a); free(b);
    nvfp4_tensor_destroy(xf); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(y);
    q = y = NULL;
  }
  /* errors */
  assert_int_equal(nvfp4_quantize(ctx, x, NULL, &q), NVFP4_OK);           /* rowwise only */
  assert_err(nvfp4_dequantize_columnwise(ctx, q, NVFP4_F32, &y), NVFP4_EUSAGE,
             "dequantize_columnwise: the tensor has no columnwise copy");
  assert_err(nvfp4_dequantize_columnwise(ctx, x, NVFP4_F32, &y), NVFP4_EINVAL,
             "dequantize_columnwise: input has dtype bf16, not fp4");
  nvfp4_tensor_destroy(q);
  memset(&o, 0, sizeof o);
  o.columnwise = 1;
  assert_int_equal(nvfp4_quantize(ctx, x, &o, &q), NVFP4_OK);
  assert_err(nvfp4_dequantize_columnwise(ctx, q, NVFP4_U8, &y), NVFP4_EINVAL,
             "dequantize_columnwise: output dtype u8 is not fp32 or bf16");
  assert_null(y);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(x2); nvfp4_tensor_destroy(xt);
}


/* ---- swap_first_dims (spec §13) ----------------------------------------- */

static void test_swap_first_dims_shapes (void **state) {
  static const int64_t shapes[4][8] = {
    {4, 64, 1280}, {48, 8, 128, 16}, {229, 173}, {113, 71, 1, 1, 1, 29, 1, 1}};
  static const int nd[4] = {3, 4, 2, 8};
  int t;
  for (t = 0; t < 4; t++) {
    nvfp4_shape s = nvfp4_shape_make(nd[t], shapes[t]), so;
    int64_t n = nvfp4_shape_numel(s), A = s.dim[0], B = s.dim[1], C = n / (A * B), a, b, c;
    uint8_t *in = (uint8_t *)malloc((size_t)n), *out = (uint8_t *)malloc((size_t)n);
    nvfp4_tensor *x = NULL, *y = NULL;
    for (a = 0; a < n; a++) in[a] = (uint8_t)(a * 2654435761u >> 13);
    assert_int_equal(nvfp4_tensor_from_host(ctx, s, NVFP4_U8, in, (size_t)n, &x), NVFP4_OK);
    assert_int_equal(nvfp4_swap_first_dims(ctx, x, &y), NVFP4_OK);
    so = s;
    so.dim[0] = B;
    so.dim[1] = A;
    assert_shape(nvfp4_tensor_shape(y), so);
    assert_int_equal(nvfp4_tensor_to_host(y, out, (size_t)n), NVFP4_OK);
    for (a = 0; a < A; a++)
      for (b = 0; b < B; b++)
        for (c = 0; c < C; c++)
          if (out[(b * A + a) * C + c] != in[(a * B + b) * C + c])
            fail_msg("shape %d: out[%lld][%lld][%lld] differs", t, (long long)b,
                     (long long)a, (long long)c);
    free(in); free(out);
    nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(y);
  }
}


static void test_swap_first_dims_bad (void **state) {
  nvfp4_tensor *e = NULL, *one = NULL, *q = NULL, *x = NULL, *y = NULL;
  assert_int_equal(nvfp4_tensor_create(ctx, S3(0, 4, 64), NVFP4_U8, &e), NVFP4_OK);
  assert_err(nvfp4_swap_first_dims(ctx, e, &y), NVFP4_EINVAL, "Input is not allocated");
  assert_err(nvfp4_swap_first_dims(ctx, NULL, &y), NVFP4_EINVAL, "NULL");
  {
    int64_t d = 16;
    assert_int_equal(nvfp4_tensor_create(ctx, nvfp4_shape_make(1, &d), NVFP4_F32, &one), NVFP4_OK);
  }
  assert_err(nvfp4_swap_first_dims(ctx, one, &y), NVFP4_EINVAL, "rank 1");
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(16, 16), NVFP4_BF16, 1, &x), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, x, NULL, &q), NVFP4_OK);
  assert_err(nvfp4_swap_first_dims(ctx, q, &y), NVFP4_EINVAL, "fp4");
  assert_null(y);
  nvfp4_tensor_destroy(e); nvfp4_tensor_destroy(one); nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(x);
}


/* ---- 4over6 edges and SR bytes, expected values computed independently -----
** The bytes below come from a separate exact-rational model of spec
** §3-§5.2, §7 and §9.1 (Python fractions, explicit RNE to fp32 / E4M3 /
** E2M1, its own Philox4x32-10), not from this library. */

/* A bf16 tensor [M, K] (bits h) quantized with o; returns q. */
static nvfp4_tensor *quantize_bits (int64_t M, int64_t K, const uint16_t *h,
                                    const nvfp4_qopts *o) {
  nvfp4_tensor *xt = bf16_tensor(S2(M, K), h), *q = NULL;
  assert_int_equal(nvfp4_quantize(ctx, xt, o, &q), NVFP4_OK);
  nvfp4_tensor_destroy(xt);
  return q;
}


/* One 4over6 block [1, 16]: its scale byte and 8 data bytes. */
static void expect_fo6_row16 (const uint16_t *h, int mse, int has_amax, float amax,
                              uint8_t sf, const uint8_t *data, const char *what) {
  nvfp4_qopts o;
  nvfp4_tensor *q;
  uint8_t *d, *sc;
  memset(&o, 0, sizeof o);
  o.four_over_six = 1;
  o.four_over_six_mse = (unsigned)mse;
  o.has_amax = (unsigned)has_amax;
  o.amax[0] = o.amax[1] = amax;
  q = quantize_bits(1, 16, h, &o);
  d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
  sc = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
  if (sc[0] != sf) fail_msg("%s: scale 0x%02X, expected 0x%02X", what, sc[0], sf);
  assert_memory_equal(d, data, 8);
  free(d); free(sc);
  nvfp4_tensor_destroy(q);
}


static void test_fo6_edges (void **state) {
  /* tie rule (§9.1 "map-to-4 iff err_4 < err_6"): x = [1, -1, 0 ..], amax 1,
  ** EMAX 256: S_enc 1536, base = fl(fl(1/6) * 1536) = 256, map-to-6 0x78
  ** (256) codes 7, F; map-to-4 0x7C (384) codes 6, E; both dequantize to
  ** exactly +-1: both errors 0, so map-to-6 (a "<=" would give 0x7C). */
  static const uint16_t tie[16] = {0x3F80, 0xBF80};
  static const uint8_t tie_d[8] = {0xF7};
  /* MAE and MSE choose differently (amax 20, EMAX 256): MAE errors
  ** 2.857422 (map-to-4) < 3.378256; MSE errors 1.024509 > 0.997383. */
  static const uint16_t b1[16] = {0x40B2, 0xBF50, 0xBF94, 0x3F3D, 0xC051, 0xC0CD, 0xBFBB,
                                  0x3F3B, 0x3F1B, 0xBF9A, 0x3F3A, 0xBF56, 0xBFF8, 0xBE56,
                                  0xC017, 0xBF41};
  static const uint8_t b1_mae[8] = {0x96, 0x19, 0xEC, 0x1A, 0xA1, 0x91, 0x8A, 0x9B};
  static const uint8_t b1_mse[8] = {0xA7, 0x1A, 0xFD, 0x1B, 0xA1, 0xA1, 0x8C, 0x9C};
  /* TV10's block with a given amax of 0 (S_enc 1, every error sum |x|) and
  ** of +Inf (S_enc 1, errors NaN): equal or unordered errors, map-to-6:
  ** sf = e4m3(fl(5/6)) = 0x35, not map-to-4's 0x3A. */
  static const uint16_t tv10[16] = {0x40A0, 0x4083, 0xC07A, 0x4003, 0x3F80, 0xBF1A, 0x3EE6,
                                    0x4043, 0xC03A, 0x3FC6, 0x3E4D, 0xC093, 0x401D, 0xBF8D,
                                    0x3F4D, 0x4066};
  static const uint8_t tv10_d[8] = {0x77, 0x5E, 0x92, 0x61, 0x4E, 0xF0, 0xB5, 0x62};
  /* 2D 4over6 (§9.1): 16x16 tiles whose rows are [1, 0 ..] except rows 0,
  ** 1 and 8 (P, Q, R).  Each row's error sums its 16 elements; the tile
  ** adds the rows as a tree, (e0 + e8) + e1 here (all other rows 0), not
  ** (e0 + e1) + e8.  Tile 1 (P, Q, R): the tree ties (map-to-6, 0x78), the
  ** row-order sum gives map-to-4; tile 2 (P, R, Q): the tree gives map-to-4
  ** (0x7C), the row-order sum ties. */
  static const uint16_t P[16] = {0x3E02, 0x3F67, 0x3F45, 0x3EDA, 0xBEEF, 0x3E86, 0x3EDB,
                                 0x3D86, 0xBE69, 0xBD2A, 0xBB0A, 0x3E9A, 0xBEF8, 0xBE5D,
                                 0xBE8D, 0xBF1B};
  static const uint16_t Q[16] = {0x3D2A, 0xBE99, 0xBE4D, 0xBDD5, 0xBDC9, 0x3D19, 0xBEE0,
                                 0x3F60, 0x3DAC, 0x3EBB, 0xBD4E, 0xBD13, 0xBE03, 0xBDFD,
                                 0xBEE1, 0xBD30};
  static const uint16_t R[16] = {0xBC21, 0x3E98, 0x3E28, 0x3CC7, 0x3E0D, 0xBE00, 0x3EA7,
                                 0x3E0E, 0x3EAE, 0xBCA8, 0xBCFB, 0x3DD0, 0x3DBE, 0x3E96,
                                 0x3B92, 0x3E0A};
  static const uint8_t t1_row0[8] = {0x72, 0x56, 0x3D, 0x15, 0x8B, 0x48, 0xBD, 0xEB};
  static const uint8_t t2_row0[8] = {0x61, 0x35, 0x2C, 0x13, 0x8A, 0x28, 0xAC, 0xCA};
  int mse, t, r, k;
  (void)state;
  for (mse = 0; mse < 2; mse++) {
    expect_fo6_row16(tie, mse, 0, 0.0f, 0x78, tie_d, "tie");
    expect_fo6_row16(tv10, mse, 1, 0.0f, 0x35, tv10_d, "amax 0");
    expect_fo6_row16(tv10, mse, 1, INFINITY, 0x35, tv10_d, "amax Inf");
  }
  expect_fo6_row16(b1, 0, 1, 20.0f, 0x6F, b1_mae, "MAE");
  expect_fo6_row16(b1, 1, 1, 20.0f, 0x6A, b1_mse, "MSE");
  for (t = 0; t < 2; t++) {
    uint16_t h[256];
    nvfp4_qopts o;
    nvfp4_tensor *q;
    uint8_t *d, *sc, *cd, *cs, want = t ? 0x7C : 0x78;
    for (r = 0; r < 16; r++)
      for (k = 0; k < 16; k++) h[r * 16 + k] = k == 0 ? 0x3F80 : 0;
    memcpy(h, P, sizeof P);
    memcpy(h + 16, t ? R : Q, sizeof Q);
    memcpy(h + 8 * 16, t ? Q : R, sizeof R);
    memset(&o, 0, sizeof o);
    o.rowwise = o.columnwise = o.two_d = o.four_over_six = 1;
    q = quantize_bits(16, 16, h, &o);
    d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);
    sc = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);
    cd = read_buf(q, NVFP4_COLUMNWISE_DATA, NULL);
    cs = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);
    for (r = 0; r < 16; r++) {
      if (sc[r * 4] != want || cs[r * 4] != want)
        fail_msg("2D tile %d: scale rowwise[%d] 0x%02X, columnwise[%d] 0x%02X, expected 0x%02X",
                 t + 1, r, sc[r * 4], r, cs[r * 4], want);
      for (k = 0; k < 16; k++)   /* the columnwise codes are the transpose */
        assert_int_equal((d[r * 8 + k / 2] >> (4 * (k & 1))) & 0xF,
                         (cd[k * 8 + r / 2] >> (4 * (r & 1))) & 0xF);
    }
    assert_memory_equal(d, t ? t2_row0 : t1_row0, 8);
    free(d); free(sc); free(cd); free(cs);
    nvfp4_tensor_destroy(q);
  }
}


/* SR (NUMERICS.md "Stochastic rounding"): x[i] = ((37 i) mod 97 - 48) / 8
** on [16, 32], amax 2688, seed 0x0123456789ABCDEF, offset 2^32 - 1 (the
** block counter crosses into its high word after block 0), both copies
** (rowwise stream 0, columnwise [32, 16] stream 1).  102 rowwise and 118
** columnwise codes differ from round-to-nearest. */
static void test_sr_bytes_independent (void **state) {
  static const char *rs = "3838373838373838373838373838373838373838373838373838373837383838";
  static const char *rd =
    "AFE5604CAFE6724C8ED6F35B1EC6F5692EC7E5604DAFE5725C9EE6725B0ED6F46A2EC7E4683EB7E5714DAFE6"
    "725C8FE6F35B1ED7E4692EC7F5683DAFE5714C9EE6735C0EE6F45A1EC6E4693DB7E5603DAFE6624C9ED6725B"
    "1FD7F46A2EC7F5683DBFE5604D9FE6725C8ED6F36B1FC6E46A2EB7E5603DAFE5714C9FE6725B0EC6F46A2EC7"
    "F5692EB7E5704D9FE6715D9FD6F36A1EC7F46A2EC7E5683DAEE5714CAFE6725C0ED6F45A1ED7E4692DB7E570"
    "4DAFD6715C9EE6735B0ED6E56A2EC7F5783DAFE6615DAFE6725B8ED6F35B1EC6E46A2EC7F5704DAFE5625C9F"
    "D6725B1FD7F46A2ED7F5693EB7E5704CAFE6725C9ED6F35B1FD6F4692EC7F5793DAFE661";
  static const char *cs = "3838383838383736363637373838383838373736373838383838383837373637";
  static const char *cd =
    "DF3AF69D64CE48F62BF5AE63DF49E79D65BE52EF3AF69D64CE51E72BF6AE63DF50E61C65BE53DF3AE71D75BE"
    "51E72BF50D75CE51E72B75BE74DF50F71D75CE62EF59F70D74DF60E74AF69D75DF50E71CF6AE73DF59F70D64"
    "AE63DF49F68D74DF62D72BF6AD64CF49E72B75AD63DE4AF62B75BE62D73AF6AE75CE51E72B75BE63CF40E61C"
    "65BE62E759F71C75CE62E72CF68C65DF51E71C769E65DF59E71D75DF64DF49F78D75CF51EF3AE79D64DE49E6"
    "3AF6AD63DE49E79D65AE63DF39F69D74BE52E73BF69D63DF51E72C75AE62DF39E71C75BE62E72BE60C75CE51"
    "E62B76AE64DE41F71C75CE52DF49E70D74CE51E749F69D65CF50F71CF69E74DF59E61D75";
  uint16_t h[16 * 32];
  nvfp4_qopts o;
  nvfp4_tensor *q;
  uint8_t *d, *sc;
  unsigned v;
  int i;
  (void)state;
  for (i = 0; i < 16 * 32; i++) h[i] = bf((float)((37 * i) % 97 - 48) / 8.0f);
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.sr = o.has_amax = 1;
  o.amax[0] = o.amax[1] = 2688.0f;
  o.sr_seed = 0x0123456789ABCDEFull;
  o.sr_offset = 0xFFFFFFFFull;
  q = quantize_bits(16, 32, h, &o);
  sc = read_buf(q, NVFP4_ROWWISE_SCALE, NULL);      /* [128, 4] */
  d = read_buf(q, NVFP4_ROWWISE_DATA, NULL);        /* [16, 16] */
  for (i = 0; i < 32; i++) {
    sscanf(rs + 2 * i, "%2x", &v);
    if (sc[(i / 2) * 4 + i % 2] != v) fail_msg("rowwise scale %d: 0x%02X, expected 0x%02X", i, sc[(i / 2) * 4 + i % 2], v);
  }
  for (i = 0; i < 256; i++) {
    sscanf(rd + 2 * i, "%2x", &v);
    if (d[i] != v) fail_msg("rowwise data byte %d: 0x%02X, expected 0x%02X", i, d[i], v);
  }
  free(d); free(sc);
  sc = read_buf(q, NVFP4_COLUMNWISE_SCALE, NULL);   /* [128, 4] */
  d = read_buf(q, NVFP4_COLUMNWISE_DATA, NULL);     /* [32, 8] */
  for (i = 0; i < 32; i++) {
    sscanf(cs + 2 * i, "%2x", &v);
    if (sc[i * 4] != v) fail_msg("columnwise scale %d: 0x%02X, expected 0x%02X", i, sc[i * 4], v);
  }
  for (i = 0; i < 256; i++) {
    sscanf(cd + 2 * i, "%2x", &v);
    if (d[i] != v) fail_msg("columnwise data byte %d: 0x%02X, expected 0x%02X", i, d[i], v);
  }
  free(d); free(sc);
  nvfp4_tensor_destroy(q);
}


/* ---- random tensors ----------------------------------------------------- */

static void test_random_tensors (void **state) {
  const int64_t n = 65536;
  nvfp4_tensor *a = NULL, *b = NULL, *c = NULL, *u = NULL;
  float *fa = (float *)malloc((size_t)n * 4), *fb = (float *)malloc((size_t)n * 4);
  uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
  double mean = 0, var = 0;
  int64_t i;
  uint32_t w[4];
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(256, 256), NVFP4_F32, 5, &a), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(256, 256), NVFP4_F32, 5, &b), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(a, fa, (size_t)n * 4), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(b, fb, (size_t)n * 4), NVFP4_OK);
  assert_memory_equal(fa, fb, (size_t)n * 4);                /* same seed */
  for (i = 0; i < n; i++) mean += fa[i];
  mean /= (double)n;
  for (i = 0; i < n; i++) var += (fa[i] - mean) * (fa[i] - mean);
  var /= (double)n;
  assert_true(fabs(mean) < 4.0 / 256.0);                     /* 4 sigma */
  assert_true(fabs(var - 1.0) < 0.03);
  { /* element 5 is the sin half of pair 0 of Philox block 1, stream 3 */
    uint32_t ctr[4] = {1, 0, 3, 0};
    double u1, u2;
    nvfp4i_philox4x32_10(ctr, 5, w);
    u1 = ((double)w[2] + 1.0) * 0x1p-32;
    u2 = (double)w[3] * 0x1p-32;
    assert_true(fa[7] == (float)(sqrt(-2.0 * log(u1)) * sin(2.0 * M_PI * u2)));
  }
  assert_int_equal(nvfp4_tensor_randn(ctx, S2(256, 256), NVFP4_F32, 6, &c), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(c, fb, (size_t)n * 4), NVFP4_OK);
  assert_memory_not_equal(fa, fb, (size_t)n * 4);            /* another seed */
  assert_int_equal(nvfp4_tensor_uniform(ctx, S2(256, 256), NVFP4_BF16, 9, -2.0, 3.0, &u), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(u, h, (size_t)n * 2), NVFP4_OK);
  mean = 0;
  for (i = 0; i < n; i++) {
    float v = nvfp4i_bf16_to_f32(h[i]);
    assert_true(v >= -2.0f && v <= 3.0f);
    mean += v;
  }
  assert_true(fabs(mean / (double)n - 0.5) < 0.03);
  nvfp4_tensor_destroy(a);                          /* a is reused as out below */
  a = NULL;
  assert_err(nvfp4_tensor_randn(ctx, S2(4, 4), NVFP4_U8, 1, &a), NVFP4_EINVAL, "u8");
  assert_null(a);
  assert_err(nvfp4_tensor_uniform(ctx, S2(4, 4), NVFP4_F32, 1, 3.0, 3.0, &a), NVFP4_EINVAL, "[3, 3)");
  /* a NaN bound reads "nan" whatever its sign bit (0.0/0.0 is -nan on x86: it printed "-nan") */
  {
    volatile double zero = 0.0;
    assert_err(nvfp4_tensor_uniform(ctx, S2(4, 4), NVFP4_F32, 1, zero / zero, 1.0, &a), NVFP4_EINVAL,
               "uniform: range [nan, 1) is empty or not finite");
    assert_err(nvfp4_tensor_uniform(ctx, S2(4, 4), NVFP4_F32, 1, 0.0, -(zero / zero), &a),
               NVFP4_EINVAL, "uniform: range [0, nan) is empty or not finite");
  }
  /* finite bounds beyond the dtype's range gave a tensor of Infs */
  assert_err(nvfp4_tensor_uniform(ctx, S2(4, 4), NVFP4_F32, 1, -1e300, 1e300, &a), NVFP4_EINVAL,
             "leaves fp32's finite range");
  assert_err(nvfp4_tensor_uniform(ctx, S2(4, 4), NVFP4_BF16, 1, 0.0, 3.4e38, &a), NVFP4_EINVAL,
             "leaves bf16's finite range");
  assert_null(a);
  assert_int_equal(nvfp4_tensor_uniform(ctx, S2(4, 4), NVFP4_F32, 1, -3.4e38, 3.4e38, &a), NVFP4_OK);
  {
    float v[16];
    int i;
    assert_int_equal(nvfp4_tensor_to_host(a, v, sizeof v), NVFP4_OK);
    for (i = 0; i < 16; i++) assert_true(isfinite(v[i]) && fabsf(v[i]) <= 3.4e38f);
  }
  nvfp4_tensor_destroy(a);
  a = NULL;
  assert_err(nvfp4_tensor_randn(ctx, S2(4, -4), NVFP4_F32, 1, &a), NVFP4_EINVAL, "negative");
  assert_err(nvfp4_tensor_randn(ctx, S2(4, 4), NVFP4_F32, 1, NULL), NVFP4_EINVAL, "out");
  nvfp4_tensor_destroy(b); nvfp4_tensor_destroy(c); nvfp4_tensor_destroy(u);
  free(fa); free(fb); free(h);
}


static int setup (void **state) {
  return nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL) == NVFP4_OK ? 0 : -1;
}


static int teardown (void **state) {
  nvfp4_ctx_destroy(ctx);
  return 0;
}


int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tv_1_to_12),
    cmocka_unit_test(test_tv9_rht_columnwise),
    cmocka_unit_test(test_tv10_four_over_six),
    cmocka_unit_test(test_fo6_edges),
    cmocka_unit_test(test_sr_bytes_independent),
    cmocka_unit_test(test_naive_1d_rn),
    cmocka_unit_test(test_naive_rht),
    cmocka_unit_test(test_naive_sr),
    cmocka_unit_test(test_2d_blocks),
    cmocka_unit_test(test_bh06_3d),
    cmocka_unit_test(test_bh08_sr),
    cmocka_unit_test(test_bh11_zeros),
    cmocka_unit_test(test_bh12_negative_amax),
    cmocka_unit_test(test_bh13_ties),
    cmocka_unit_test(test_bh14_nibble_order),
    cmocka_unit_test(test_bh16_scale_rows),
    cmocka_unit_test(test_bh17_scale_padding),
    cmocka_unit_test(test_bh19_nan_rows),
    cmocka_unit_test(test_bh21_small_m),
    cmocka_unit_test(test_bh22_empty),
    cmocka_unit_test(test_bh27_rht_amax),
    cmocka_unit_test(test_quantize_bad_inputs),
    cmocka_unit_test(test_dequantize_bad_inputs),
    cmocka_unit_test(test_dequantize_columnwise),
    cmocka_unit_test(test_swap_first_dims_shapes),
    cmocka_unit_test(test_swap_first_dims_bad),
    cmocka_unit_test(test_random_tensors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
