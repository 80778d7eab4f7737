/*
** test_gemm.c -- lib/gemm.c: the GEMM on NVFP4 and plain operands against a
** double-precision product computed here from the raw bytes (an independent
** decoder), operand usages (fprop/dgrad/wgrad), output shapes, bias, bf16
** output, the scale-shape check that catches a wrong-width gathered scale,
** scale padding never read (field case BH-20), the nibble order an FP4
** operand is decoded in against a plain one (BH-14), the float64 oracle and the
** relative error, and alpha with an E4M3_MAX = 256 operand bit for bit.
*/
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "nvfp4.h"
#include "nvfp4_int.h"     /* to forge a wrong-width scale, as the nd rule makes */


static uint32_t lcg = 12345u;
static uint32_t rnd (void) { lcg = lcg * 1664525u + 1013904223u; return lcg >> 8; }


static int setup (void **state) {
  nvfp4_ctx *ctx = NULL;
  if (nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL) != NVFP4_OK) return -1;
  *state = ctx;
  return 0;
}


static int teardown (void **state) {
  nvfp4_ctx_destroy((nvfp4_ctx *)*state);
  return 0;
}


static nvfp4_shape shp (int n, int64_t a, int64_t b, int64_t c) {
  int64_t d[3] = {a, b, c};
  return nvfp4_shape_make(n, d);
}


static int64_t ru (int64_t x, int64_t m) { return (x + m - 1) / m * m; }


/* Independent decoders: E2M1 by formula, E4M3 by fields. */
static double e2m1 (unsigned c) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8) ? -mag[c & 7] : mag[c & 7];
}


static double e4m3 (uint8_t b) {
  int e = (b >> 3) & 15, m = b & 7;
  double v = e ? (1 + m / 8.0) * pow(2, e - 7) : m / 8.0 * pow(2, -6);
  return (b & 0x80) ? -v : v;
}


/* A random 2-D matrix [R, C] of codes + positive scales (0x20..0x57), as
** one NVFP4 buffer pair; dec[R*C] gets code*scale. */
typedef struct qmat { uint8_t *data, *scale; double *dec; int64_t R, C, sw; } qmat;

static qmat make_qmat (int64_t R, int64_t C) {
  qmat q;
  int64_t r, c;
  q.R = R; q.C = C; q.sw = ru(C / 16, 4);
  q.data = calloc((size_t)(R * C / 2 + 1), 1);
  q.scale = calloc((size_t)(ru(R, 128) * q.sw), 1);
  q.dec = calloc((size_t)(R * C), sizeof(double));
  for (r = 0; r < R; r++)
    for (c = 0; c < C / 16; c++) q.scale[r * q.sw + c] = (uint8_t)(0x20 + rnd() % 0x38);
  for (r = 0; r < R; r++)
    for (c = 0; c < C; c += 2) {
      uint8_t b = (uint8_t)(rnd() & 0xff);
      q.data[(r * C + c) / 2] = b;
      q.dec[r * C + c] = e2m1(b & 15) * e4m3(q.scale[r * q.sw + c / 16]);
      q.dec[r * C + c + 1] = e2m1(b >> 4) * e4m3(q.scale[r * q.sw + c / 16]);
    }
  return q;
}


static void free_qmat (qmat *q) { free(q->data); free(q->scale); free(q->dec); }


/* out[q][p] = sum_r B[q][r] A[p][r] in double. */
static double *ref_bat (const double *A, const double *B, int64_t P, int64_t Q, int64_t R) {
  double *o = calloc((size_t)(P * Q), sizeof(double));
  int64_t p, q, r;
  for (q = 0; q < Q; q++)
    for (p = 0; p < P; p++) {
      double s = 0;
      for (r = 0; r < R; r++) s += B[q * R + r] * A[p * R + r];
      o[q * P + p] = s;
    }
  return o;
}


static double max_rel (const float *got, const double *want, int64_t n) {
  double num = 0, den = 0;
  int64_t i;
  for (i = 0; i < n; i++) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return sqrt(num / den);
}


/* fprop with two rowwise FP4 operands: exact dequant, alpha from amaxes. */
static void test_gemm_fp4_rowwise_matches_double (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  const int64_t P = 48, Q = 40, R = 96;
  qmat a = make_qmat(P, R), b = make_qmat(Q, R);
  float amax_a[2] = {3.5f, 3.5f}, amax_b[2] = {1200.0f, 1200.0f};
  nvfp4_tensor *ta = NULL, *tb = NULL, *y = NULL, *y64 = NULL;
  float *got = malloc((size_t)(P * Q) * sizeof(float));
  double *want, alpha = 3.5 * 1200.0 / (6.0 * 6 * 448 * 448), err;
  int64_t i;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(2, P, R, 0), a.data, a.scale, NULL,
                                              NULL, amax_a, &ta), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(3, 5, 8, R), b.data, b.scale, NULL,
                                              NULL, amax_b, &tb), NVFP4_OK);
  assert_int_equal(nvfp4_gemm(ctx, ta, NVFP4_ROWWISE, tb, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                   NVFP4_OK);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(y), shp(3, 5, 8, P)));  /* N-D kept */
  assert_int_equal(nvfp4_tensor_to_host(y, got, (size_t)(P * Q) * sizeof(float)), NVFP4_OK);
  want = ref_bat(a.dec, b.dec, P, Q, R);
  for (i = 0; i < P * Q; i++) want[i] *= alpha;
  assert_true(max_rel(got, want, P * Q) < 1e-6);
  /* the float64 oracle agrees, and so does rel_error */
  assert_int_equal(nvfp4_gemm_ref64(ctx, ta, NVFP4_ROWWISE, tb, NVFP4_ROWWISE, &y64), NVFP4_OK);
  assert_int_equal(nvfp4_rel_error(NULL, y, y64, &err), NVFP4_OK);
  assert_true(err < 1e-6);
  assert_true(err > 0 || max_rel(got, want, P * Q) == 0);
  nvfp4_tensor_destroy(ta); nvfp4_tensor_destroy(tb);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(y64);
  free(got); free(want); free_qmat(&a); free_qmat(&b);
}


/* Columnwise operands: wgrad dW[N,K] = dY^T X reads both [.., M] matrices. */
static void test_gemm_fp4_columnwise_wgrad_shape_and_values (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  const int64_t M = 64, K = 32, N = 48;      /* X [4,16,K], dY [4,16,N] */
  qmat xc = make_qmat(K, M), dyc = make_qmat(N, M);
  float ax[2] = {0, 6.0f}, ady[2] = {0, 2688.0f};
  nvfp4_tensor *x = NULL, *dy = NULL, *dw = NULL;
  float *got = malloc((size_t)(N * K) * sizeof(float));
  double *want;
  int64_t i;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(3, 4, 16, K), NULL, NULL, xc.data,
                                              xc.scale, ax, &x), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(3, 4, 16, N), NULL, NULL, dyc.data,
                                              dyc.scale, ady, &dy), NVFP4_OK);
  assert_int_equal(nvfp4_gemm(ctx, x, NVFP4_COLUMNWISE, dy, NVFP4_COLUMNWISE, NULL,
                              NVFP4_F32, &dw), NVFP4_OK);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(dw), shp(2, N, K, 0)));
  assert_int_equal(nvfp4_tensor_to_host(dw, got, (size_t)(N * K) * sizeof(float)), NVFP4_OK);
  want = ref_bat(xc.dec, dyc.dec, K, N, M);
  for (i = 0; i < N * K; i++) want[i] *= 6.0 * 2688.0 / (6.0 * 6 * 448 * 448);
  assert_true(max_rel(got, want, N * K) < 1e-6);
  /* a missing usage is a clear EUSAGE */
  nvfp4_tensor_destroy(dw);
  dw = NULL;
  assert_int_equal(nvfp4_gemm(ctx, x, NVFP4_ROWWISE, dy, NVFP4_COLUMNWISE, NULL, NVFP4_F32,
                              &dw), NVFP4_EUSAGE);
  assert_null(dw);
  assert_string_equal(nvfp4_last_error(ctx), "gemm: operand A has no rowwise data (usage missing)");
  /* every message names its call: gemm_ref64's are its own, a NULL operand's too */
  assert_int_equal(nvfp4_gemm_ref64(ctx, x, NVFP4_ROWWISE, dy, NVFP4_COLUMNWISE, &dw), NVFP4_EUSAGE);
  assert_string_equal(nvfp4_last_error(ctx), "gemm_ref64: operand A has no rowwise data (usage missing)");
  assert_int_equal(nvfp4_gemm(ctx, NULL, NVFP4_ROWWISE, dy, NVFP4_COLUMNWISE, NULL, NVFP4_F32, &dw),
                   NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "gemm: operand A: tensor is NULL");
  assert_int_equal(nvfp4_gemm_ref64(ctx, x, NVFP4_COLUMNWISE, NULL, NVFP4_COLUMNWISE, &dw),
                   NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "gemm_ref64: operand B: tensor is NULL");
  assert_null(dw);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy);
  free(got); free(want); free_qmat(&xc); free_qmat(&dyc);
}


/* The consumer's check: a columnwise scale of the wrong width (what the
** `nd` rule gathers for (64,5,64,TP 2): 16 columns instead of 20) fails with
** TE's message instead of being read. */
static void test_gemm_rejects_wrong_width_columnwise_scale (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  const int64_t M = 320, K = 64;              /* logical [64, 5, 64] */
  qmat c = make_qmat(K, M);
  float am[2] = {1, 1};
  nvfp4_tensor *t = NULL, *w = NULL, *y = NULL;
  assert_int_equal(c.sw, 20);
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(3, 64, 5, K), NULL, NULL, c.data,
                                              c.scale, am, &t), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(3, 64, 5, K), NULL, NULL, c.data,
                                              c.scale, am, &w), NVFP4_OK);
  assert_int_equal(nvfp4_gemm(ctx, w, NVFP4_COLUMNWISE, t, NVFP4_COLUMNWISE, NULL,
                              NVFP4_F32, &y), NVFP4_OK);
  nvfp4_tensor_destroy(y);
  y = NULL;
  t->col_scale.shape.dim[1] = 16;             /* forge the nd-rule result */
  t->col_scale.nbytes = 128 * 16;
  assert_int_equal(nvfp4_gemm(ctx, w, NVFP4_COLUMNWISE, t, NVFP4_COLUMNWISE, NULL,
                              NVFP4_F32, &y), NVFP4_EINVAL);
  assert_null(y);
  assert_non_null(strstr(nvfp4_last_error(ctx),
                         "invalid columnwise_scale_inv shape (expected (128,20), got (128,16))"));
  t->col_scale.shape.dim[1] = 20;
  t->col_scale.nbytes = 128 * 20;
  nvfp4_tensor_destroy(t); nvfp4_tensor_destroy(w);
  free_qmat(&c);
}


/* A rowwise-only copy may have any M (nvfp4.h: the library's extension of
** spec §6); read columnwise it is a missing usage, EUSAGE as nvfp4_gemm
** says, not EINVAL for its M (the shape check came first). */
static void test_gemm_missing_columnwise_any_m_is_eusage (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  nvfp4_tensor *x = NULL, *q = NULL, *y = NULL;
  nvfp4_qopts o;
  memset(&o, 0, sizeof o);                    /* rowwise only */
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 8, 32, 0), NVFP4_F32, 7, &x), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, x, &o, &q), NVFP4_OK);   /* M = 8 */
  assert_int_equal(nvfp4_gemm(ctx, q, NVFP4_COLUMNWISE, q, NVFP4_COLUMNWISE, NULL, NVFP4_F32,
                              &y), NVFP4_EUSAGE);
  assert_null(y);
  assert_string_equal(nvfp4_last_error(ctx),
                      "gemm: operand A has no columnwise data (usage missing)");
  assert_int_equal(nvfp4_gemm(ctx, x, NVFP4_COLUMNWISE, q, NVFP4_COLUMNWISE, NULL, NVFP4_F32,
                              &y), NVFP4_EUSAGE);
  assert_string_equal(nvfp4_last_error(ctx),
                      "gemm: operand B has no columnwise data (usage missing)");
  assert_int_equal(nvfp4_gemm_ref64(ctx, q, NVFP4_COLUMNWISE, q, NVFP4_COLUMNWISE, &y),
                   NVFP4_EUSAGE);
  assert_null(y);
  assert_string_equal(nvfp4_last_error(ctx),
                      "gemm_ref64: operand A has no columnwise data (usage missing)");
  /* read rowwise, the same copy is a valid operand */
  assert_int_equal(nvfp4_gemm(ctx, q, NVFP4_ROWWISE, q, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                   NVFP4_OK);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(y), shp(2, 8, 8, 0)));
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(x);
}


/* Plain operands in every usage, bias, bf16 output, errors. */
static void test_gemm_plain_usages_bias_bf16 (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  enum { M = 6, K = 5, N = 3 };
  float x[M * K], w[N * K], dy[M * N], bias[N], got[M * N * 2];
  uint16_t gb[M * N];
  nvfp4_tensor *tx = NULL, *tw = NULL, *tdy = NULL, *tb = NULL, *y = NULL;
  int i, j, k;
  for (i = 0; i < M * K; i++) x[i] = (float)((int)(rnd() % 17) - 8) / 4;
  for (i = 0; i < N * K; i++) w[i] = (float)((int)(rnd() % 17) - 8) / 8;
  for (i = 0; i < M * N; i++) dy[i] = (float)((int)(rnd() % 9) - 4);
  for (i = 0; i < N; i++) bias[i] = 0.5f * (float)i;
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(2, M, K, 0), NVFP4_F32, x, sizeof x, &tx), 0);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(2, N, K, 0), NVFP4_F32, w, sizeof w, &tw), 0);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(2, M, N, 0), NVFP4_F32, dy, sizeof dy, &tdy), 0);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(1, N, 0, 0), NVFP4_F32, bias, sizeof bias, &tb), 0);
  /* fprop + bias (small integers / 32: exact in fp32) */
  assert_int_equal(nvfp4_gemm(ctx, tw, NVFP4_ROWWISE, tx, NVFP4_ROWWISE, tb, NVFP4_F32, &y), 0);
  assert_int_equal(nvfp4_tensor_to_host(y, got, M * N * sizeof(float)), 0);
  for (i = 0; i < M; i++)
    for (j = 0; j < N; j++) {
      float s = bias[j];
      for (k = 0; k < K; k++) s += x[i * K + k] * w[j * K + k];
      assert_true(got[i * N + j] == s);
    }
  nvfp4_tensor_destroy(y);
  /* dgrad dX = dY W [M, K] */
  assert_int_equal(nvfp4_gemm(ctx, tw, NVFP4_COLUMNWISE, tdy, NVFP4_ROWWISE, NULL, NVFP4_F32, &y), 0);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(y), shp(2, M, K, 0)));
  assert_int_equal(nvfp4_tensor_to_host(y, got, M * K * sizeof(float)), 0);
  for (i = 0; i < M; i++)
    for (k = 0; k < K; k++) {
      float s = 0;
      for (j = 0; j < N; j++) s += dy[i * N + j] * w[j * K + k];
      assert_true(got[i * K + k] == s);
    }
  nvfp4_tensor_destroy(y);
  /* wgrad dW = dY^T X [N, K], bf16 output rounded once */
  assert_int_equal(nvfp4_gemm(ctx, tx, NVFP4_COLUMNWISE, tdy, NVFP4_COLUMNWISE, NULL, NVFP4_BF16, &y), 0);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(y), shp(2, N, K, 0)));
  assert_int_equal(nvfp4_tensor_to_host(y, gb, N * K * sizeof(uint16_t)), 0);
  for (j = 0; j < N; j++)
    for (k = 0; k < K; k++) {
      float s = 0;
      for (i = 0; i < M; i++) s += dy[i * N + j] * x[i * K + k];
      assert_int_equal(gb[j * K + k], nvfp4i_f32_to_bf16(s));
    }
  nvfp4_tensor_destroy(y);
  y = NULL;
  /* errors: reduction mismatch, bias length, output dtype */
  assert_int_equal(nvfp4_gemm(ctx, tw, NVFP4_ROWWISE, tdy, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                   NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "gemm: reduction dims differ: A rowwise reads [3, 5], "
                                             "B rowwise reads [6, 3]");
  /* the oracle says it as gemm does, naming both operands' matrices */
  assert_int_equal(nvfp4_gemm_ref64(ctx, tw, NVFP4_ROWWISE, tdy, NVFP4_ROWWISE, &y), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "gemm_ref64: reduction dims differ: A rowwise reads "
                                             "[3, 5], B rowwise reads [6, 3]");
  {  /* a 0-d operand: the rule with the value */
    nvfp4_tensor *sc = NULL;
    assert_int_equal(nvfp4_tensor_create(ctx, shp(0, 0, 0, 0), NVFP4_F32, &sc), 0);
    assert_int_equal(nvfp4_gemm(ctx, tw, NVFP4_ROWWISE, sc, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                     NVFP4_EINVAL);
    assert_string_equal(nvfp4_last_error(ctx), "gemm: operand B is a scalar (ndim 0); a GEMM "
                                               "operand needs ndim >= 1 (its last dim is K)");
    nvfp4_tensor_destroy(sc);
  }
  assert_null(y);
  assert_int_equal(nvfp4_gemm(ctx, tx, NVFP4_ROWWISE, tx, NVFP4_ROWWISE, tb, NVFP4_F32, &y),
                   NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "bias"));
  assert_int_equal(nvfp4_gemm(ctx, tw, NVFP4_ROWWISE, tx, NVFP4_ROWWISE, NULL, NVFP4_U8, &y),
                   NVFP4_EINVAL);
  assert_null(y);
  {   /* a bias of N elements but 2-D: refused (the header says [P]) */
    nvfp4_tensor *t2 = NULL;
    assert_int_equal(nvfp4_tensor_reshape(tb, shp(2, 1, N, 0), &t2), 0);
    assert_int_equal(nvfp4_gemm(ctx, tw, NVFP4_ROWWISE, tx, NVFP4_ROWWISE, t2, NVFP4_F32, &y),
                     NVFP4_EINVAL);
    assert_non_null(strstr(nvfp4_last_error(ctx), "bias must be fp32/bf16 of shape [3] (got fp32 [1, 3])"));
    nvfp4_tensor_destroy(t2);
  }
  {   /* a reduction of 2^31 + 16 (zero rows: nothing allocated): the BLAS's int
      ** would wrap and OpenBLAS returned garbage with a warning */
    nvfp4_tensor *za = NULL, *zb = NULL;
    const int64_t big = ((int64_t)1 << 31) + 16;
    assert_int_equal(nvfp4_tensor_create(ctx, shp(2, 0, big, 0), NVFP4_F32, &za), 0);
    assert_int_equal(nvfp4_tensor_create(ctx, shp(2, 0, big, 0), NVFP4_F32, &zb), 0);
    assert_int_equal(nvfp4_gemm(ctx, za, NVFP4_ROWWISE, zb, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                     NVFP4_EINVAL);
    assert_non_null(strstr(nvfp4_last_error(ctx), "reduction 2147483664): the BLAS takes int"));
    assert_int_equal(nvfp4_gemm_ref64(ctx, za, NVFP4_ROWWISE, zb, NVFP4_ROWWISE, &y), NVFP4_EINVAL);
    nvfp4_tensor_destroy(za);
    nvfp4_tensor_destroy(zb);
  }
  {   /* an output of (2^31 - 1)^2 elements from operands of none (K = 0): refused by both GEMMs,
      ** naming them, before any allocation (gemm_ref64 tried 16 EiB: ENOMEM, or an abort under a
      ** sanitizer; gemm's message was the tensor's, naming no GEMM) */
    nvfp4_tensor *za = NULL;
    const int64_t big = 2147483647;
    assert_int_equal(nvfp4_tensor_create(ctx, shp(2, big, 0, 0), NVFP4_F32, &za), 0);
    assert_int_equal(nvfp4_gemm(ctx, za, NVFP4_ROWWISE, za, NVFP4_ROWWISE, NULL, NVFP4_F32, &y),
                     NVFP4_EINVAL);
    assert_null(y);
    assert_string_equal(nvfp4_last_error(ctx), "gemm: the output [2147483647, 2147483647] has more "
                                               "than 2^60 elements");
    assert_int_equal(nvfp4_gemm_ref64(ctx, za, NVFP4_ROWWISE, za, NVFP4_ROWWISE, &y), NVFP4_EINVAL);
    assert_null(y);
    assert_string_equal(nvfp4_last_error(ctx), "gemm_ref64: the output [2147483647, 2147483647] has "
                                               "more than 2^60 elements");
    nvfp4_tensor_destroy(za);
  }
  nvfp4_tensor_destroy(tx); nvfp4_tensor_destroy(tw);
  nvfp4_tensor_destroy(tdy); nvfp4_tensor_destroy(tb);
}


/* BH-14's consumer side: the GEMM decodes each byte even element = low
** nibble.  With two FP4 operands packed along the same reduction a swapped
** decode permutes both alike and the product barely moves (the tests above
** pass with it), so here the FP4 operand meets a plain bf16 identity: the
** output is the operand's decoded values themselves, times alpha =
** fl(amax * fl(1/2688)) (one FP4 operand, nvfp4.h).  The row's hand-made
** bytes 21 43 65 07 A9 CB ED 8F, scale 0x38, amax 2688, in a 16-row tensor
** (other rows zero), read rowwise as B, rowwise as A, and as the
** columnwise copy; nvfp4_gemm_ref64, the oracle other tests trust, too. */
static void test_gemm_fp4_times_plain_nibble_order (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  static const uint8_t row[8] = {0x21, 0x43, 0x65, 0x07, 0xA9, 0xCB, 0xED, 0x8F};
  static const float want[16] = {0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4,
                                 -6, -0.0f};
  uint8_t data[16 * 8] = {0}, scale[128 * 4] = {0};
  uint16_t eye[16 * 16] = {0};
  float am[2] = {2688.0f, 2688.0f}, got[16 * 16];
  const float alpha = 2688.0f * (1.0f / 2688.0f);
  nvfp4_tensor *qr = NULL, *qc = NULL, *id = NULL, *y = NULL;
  int i, j, v;
  memcpy(data, row, sizeof row);
  scale[0] = 0x38;
  for (i = 0; i < 16; i++) eye[i * 16 + i] = 0x3F80;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(2, 16, 16, 0), data, scale, NULL, NULL,
                                              am, &qr), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shp(2, 16, 16, 0), NULL, NULL, data, scale,
                                              am, &qc), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(2, 16, 16, 0), NVFP4_BF16, eye, sizeof eye,
                                          &id), NVFP4_OK);
  for (v = 0; v < 3; v++) {
    /* v 0: out = q . I^T = q; v 1: out = I . q^T = q^T; v 2: out = the
    ** columnwise matrix [K, M] (its row 0 the bytes) . I^T */
    if (v == 0) assert_int_equal(nvfp4_gemm(ctx, id, NVFP4_ROWWISE, qr, NVFP4_ROWWISE, NULL,
                                            NVFP4_F32, &y), NVFP4_OK);
    else if (v == 1) assert_int_equal(nvfp4_gemm(ctx, qr, NVFP4_ROWWISE, id, NVFP4_ROWWISE, NULL,
                                                 NVFP4_F32, &y), NVFP4_OK);
    else assert_int_equal(nvfp4_gemm(ctx, id, NVFP4_ROWWISE, qc, NVFP4_COLUMNWISE, NULL,
                                     NVFP4_F32, &y), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(y, got, sizeof got), NVFP4_OK);
    for (i = 0; i < 16; i++)
      for (j = 0; j < 16; j++) {
        int r = v == 1 ? j : i, c = v == 1 ? i : j;
        float w = r == 0 ? want[c] * alpha : 0.0f;
        if (got[i * 16 + j] != w)
          fail_msg("case %d: out[%d][%d] = %g, expected %g (value %d of row %d; a swapped "
                   "decode gives [1, 0.5, 2, 1.5, ..])", v, i, j, (double)got[i * 16 + j],
                   (double)w, c, r);
      }
    nvfp4_tensor_destroy(y);
    y = NULL;
    /* the float64 oracle decodes alike: its factor amax / 2688 is 1 exactly */
    if (v == 0) assert_int_equal(nvfp4_gemm_ref64(ctx, id, NVFP4_ROWWISE, qr, NVFP4_ROWWISE, &y),
                                 NVFP4_OK);
    else if (v == 1) assert_int_equal(nvfp4_gemm_ref64(ctx, qr, NVFP4_ROWWISE, id, NVFP4_ROWWISE,
                                                       &y), NVFP4_OK);
    else assert_int_equal(nvfp4_gemm_ref64(ctx, id, NVFP4_ROWWISE, qc, NVFP4_COLUMNWISE, &y),
                          NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(y, got, sizeof got), NVFP4_OK);
    for (i = 0; i < 16; i++)
      for (j = 0; j < 16; j++) {
        int r = v == 1 ? j : i, c = v == 1 ? i : j;
        if (got[i * 16 + j] != (r == 0 ? want[c] : 0.0f))
          fail_msg("gemm_ref64 case %d: out[%d][%d] = %g, expected %g", v, i, j,
                   (double)got[i * 16 + j], (double)(r == 0 ? want[c] : 0.0f));
      }
    nvfp4_tensor_destroy(y);
    y = NULL;
  }
  nvfp4_tensor_destroy(qr); nvfp4_tensor_destroy(qc); nvfp4_tensor_destroy(id);
}


/* The quantized path end to end: the reference quantize, then
** GEMM equals the float64 product of the same dequantized operands. */
static void test_gemm_after_quantize_matches_ref64 (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  nvfp4_tensor *x = NULL, *w = NULL, *qx = NULL, *qw = NULL, *y = NULL, *r = NULL;
  nvfp4_qopts o;
  double err;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(3, 32, 2, 64), NVFP4_BF16, 1, &x), 0);
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 48, 64, 0), NVFP4_F32, 2, &w), 0);
  assert_int_equal(nvfp4_quantize(ctx, x, &o, &qx), 0);
  o.two_d = 1;
  assert_int_equal(nvfp4_quantize(ctx, w, &o, &qw), 0);
  assert_int_equal(nvfp4_gemm(ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, NULL, NVFP4_F32, &y), 0);
  assert_int_equal(nvfp4_gemm_ref64(ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, &r), 0);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(y), shp(3, 32, 2, 48)));
  assert_int_equal(nvfp4_rel_error(NULL, y, r, &err), 0);
  assert_true(err < 1e-6);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(r);
  /* wgrad-style: both columnwise */
  assert_int_equal(nvfp4_gemm(ctx, qx, NVFP4_COLUMNWISE, qx, NVFP4_COLUMNWISE, NULL, NVFP4_F32, &y), 0);
  assert_int_equal(nvfp4_gemm_ref64(ctx, qx, NVFP4_COLUMNWISE, qx, NVFP4_COLUMNWISE, &r), 0);
  assert_int_equal(nvfp4_rel_error(NULL, y, r, &err), 0);
  assert_true(err < 1e-6);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(r);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(w);
  nvfp4_tensor_destroy(qx); nvfp4_tensor_destroy(qw);
}


/* A copy of q whose scale padding (rows past the real ones, columns past
** the real blocks, both copies) holds v instead of 0x00. */
static nvfp4_tensor *with_padding (nvfp4_ctx *ctx, const nvfp4_tensor *q, uint8_t v) {
  nvfp4_shape s = nvfp4_tensor_shape(q);
  int64_t K = s.dim[s.ndim - 1], M = nvfp4_shape_numel(s) / K;
  uint8_t *buf[4] = {NULL, NULL, NULL, NULL};
  float amax[2] = {0, 0};
  nvfp4_tensor *out = NULL;
  int b, dir;
  for (dir = 0; dir < 2; dir++) {
    nvfp4_shape ss;
    int64_t r, c, rows = dir ? K : M, cols = dir ? M / 16 : K / 16;
    if (dir ? !nvfp4_tensor_has_columnwise(q) : !nvfp4_tensor_has_rowwise(q)) continue;
    for (b = 2 * dir; b < 2 * dir + 2; b++) {
      size_t n = (size_t)nvfp4_shape_numel(nvfp4_tensor_buffer_shape(q, (nvfp4_buffer)b));
      buf[b] = malloc(n + 1);
      assert_int_equal(nvfp4_tensor_buffer_read(q, (nvfp4_buffer)b, buf[b], n), NVFP4_OK);
    }
    ss = nvfp4_tensor_buffer_shape(q, (nvfp4_buffer)(2 * dir + 1));
    for (r = 0; r < ss.dim[0]; r++)
      for (c = 0; c < ss.dim[1]; c++)
        if (r >= rows || c >= cols) buf[2 * dir + 1][r * ss.dim[1] + c] = v;
    assert_int_equal(nvfp4_tensor_amax(q, dir, &amax[dir]), NVFP4_OK);
  }
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, s, buf[0], buf[1], buf[2], buf[3], amax, &out),
                   NVFP4_OK);
  for (b = 0; b < 4; b++) free(buf[b]);
  return out;
}


/* out = a(ua) . b(ub) for the two copies of b (padding 0x00 and 0x7F, a
** NaN scale) and of a: bit-identical, finite, and the float64 product of
** the real operands. */
static void expect_padding_unread (nvfp4_ctx *ctx, const nvfp4_tensor *a, nvfp4_usage ua,
                                   const nvfp4_tensor *b, nvfp4_usage ub, const char *what) {
  nvfp4_tensor *a0 = with_padding(ctx, a, 0x00), *a7 = with_padding(ctx, a, 0x7F);
  nvfp4_tensor *b0 = with_padding(ctx, b, 0x00), *b7 = with_padding(ctx, b, 0x7F);
  nvfp4_tensor *y0 = NULL, *y7 = NULL, *r = NULL;
  int64_t n, i;
  float *f0, *f7;
  double err = -1;
  assert_int_equal(nvfp4_gemm(ctx, a0, ua, b0, ub, NULL, NVFP4_F32, &y0), NVFP4_OK);
  assert_int_equal(nvfp4_gemm(ctx, a7, ua, b7, ub, NULL, NVFP4_F32, &y7), NVFP4_OK);
  n = nvfp4_shape_numel(nvfp4_tensor_shape(y0));
  f0 = malloc((size_t)n * 4 + 4);
  f7 = malloc((size_t)n * 4 + 4);
  assert_int_equal(nvfp4_tensor_to_host(y0, f0, (size_t)n * 4), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(y7, f7, (size_t)n * 4), NVFP4_OK);
  for (i = 0; i < n; i++) {
    if (!isfinite(f7[i])) fail_msg("%s: element %lld is %g with 0x7F padding", what, (long long)i, f7[i]);
    if (memcmp(&f0[i], &f7[i], 4) != 0)
      fail_msg("%s: element %lld is %.9g with 0x00 padding, %.9g with 0x7F", what, (long long)i,
               f0[i], f7[i]);
  }
  assert_int_equal(nvfp4_gemm_ref64(ctx, a7, ua, b7, ub, &r), NVFP4_OK);
  assert_int_equal(nvfp4_rel_error(NULL, y7, r, &err), NVFP4_OK);
  if (!(err < 1e-6)) fail_msg("%s: relative error %g against the float64 product", what, err);
  free(f0); free(f7);
  nvfp4_tensor_destroy(r); nvfp4_tensor_destroy(y0); nvfp4_tensor_destroy(y7);
  nvfp4_tensor_destroy(a0); nvfp4_tensor_destroy(a7);
  nvfp4_tensor_destroy(b0); nvfp4_tensor_destroy(b7);
}


/* BH-20 (and BH-17's consumer side): the GEMM never reads scale padding.
** M = 5, K = 512, N = 256 (the Linear layer refuses M % 16 != 0, as
** te.Linear, so its GEMMs are driven directly): fprop y = x W^T (x's rowwise
** scale [128, 32], rows 5-127 padding) and dgrad dx = dy W (dy's [128, 16])
** with the padding 0x00 or 0x7F give bit-identical outputs; wgrad dW = dy^T x
** needs columnwise copies (M % 16 == 0): at M = 48 each has 3 real scale
** columns of 4.  Dequantizing either copy gives the same values too. */
static void test_gemm_ignores_scale_padding (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  nvfp4_tensor *x = NULL, *w = NULL, *dy = NULL, *qx = NULL, *qw = NULL, *qdy = NULL;
  nvfp4_tensor *x48 = NULL, *dy48 = NULL, *qx48 = NULL, *qdy48 = NULL;
  nvfp4_tensor *p0, *p7, *d0 = NULL, *d7 = NULL;
  nvfp4_qopts row, both;
  float f0[5 * 512], f7[5 * 512];
  memset(&row, 0, sizeof row);
  row.rowwise = 1;
  both = row;
  both.columnwise = 1;
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 5, 512, 0), NVFP4_BF16, 20, &x), 0);
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 256, 512, 0), NVFP4_BF16, 21, &w), 0);
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 5, 256, 0), NVFP4_BF16, 22, &dy), 0);
  assert_int_equal(nvfp4_quantize(ctx, x, &row, &qx), 0);
  assert_int_equal(nvfp4_quantize(ctx, w, &both, &qw), 0);
  assert_int_equal(nvfp4_quantize(ctx, dy, &row, &qdy), 0);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_buffer_shape(qx, NVFP4_ROWWISE_SCALE), shp(2, 128, 32, 0)));
  expect_padding_unread(ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, "fprop M=5");
  expect_padding_unread(ctx, qw, NVFP4_COLUMNWISE, qdy, NVFP4_ROWWISE, "dgrad M=5");
  p0 = with_padding(ctx, qx, 0x00);
  p7 = with_padding(ctx, qx, 0x7F);
  assert_int_equal(nvfp4_dequantize(ctx, p0, NVFP4_F32, &d0), 0);
  assert_int_equal(nvfp4_dequantize(ctx, p7, NVFP4_F32, &d7), 0);
  assert_int_equal(nvfp4_tensor_to_host(d0, f0, sizeof f0), 0);
  assert_int_equal(nvfp4_tensor_to_host(d7, f7, sizeof f7), 0);
  assert_memory_equal(f0, f7, sizeof f0);
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 48, 512, 0), NVFP4_BF16, 23, &x48), 0);
  assert_int_equal(nvfp4_tensor_randn(ctx, shp(2, 48, 256, 0), NVFP4_BF16, 24, &dy48), 0);
  assert_int_equal(nvfp4_quantize(ctx, x48, &both, &qx48), 0);
  assert_int_equal(nvfp4_quantize(ctx, dy48, &both, &qdy48), 0);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_buffer_shape(qx48, NVFP4_COLUMNWISE_SCALE), shp(2, 512, 4, 0)));
  expect_padding_unread(ctx, qx48, NVFP4_COLUMNWISE, qdy48, NVFP4_COLUMNWISE, "wgrad M=48");
  expect_padding_unread(ctx, qw, NVFP4_ROWWISE, qx48, NVFP4_ROWWISE, "fprop M=48");
  nvfp4_tensor_destroy(p0); nvfp4_tensor_destroy(p7);
  nvfp4_tensor_destroy(d0); nvfp4_tensor_destroy(d7);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(w); nvfp4_tensor_destroy(dy);
  nvfp4_tensor_destroy(qx); nvfp4_tensor_destroy(qw); nvfp4_tensor_destroy(qdy);
  nvfp4_tensor_destroy(x48); nvfp4_tensor_destroy(dy48);
  nvfp4_tensor_destroy(qx48); nvfp4_tensor_destroy(qdy48);
}


/* The OpenBLAS core switch: OpenBLAS is linked, so a core name comes back;
** a second call changes nothing, and the environment is left as found. */
static void test_blas_select_core (void **state) {
  int had = getenv("OPENBLAS_CORETYPE") != NULL;
  const char *a = nvfp4_blas_select_core(), *b;
  assert_non_null(a);
  b = nvfp4_blas_select_core();
  assert_non_null(b);
  assert_string_equal(a, b);
  assert_int_equal(getenv("OPENBLAS_CORETYPE") != NULL, had);
}


/* alpha with an E4M3_MAX = 256 (4over6) operand, bit for bit (spec §3.3,
** §11): alpha = fl(fl(amax_A * amax_B) * fl(1/(E_A * E_B))).  A = [52.25,
** 0 ..] quantized with 4over6 (EMAX 256: scale 0x78, code 7, value 1536),
** B = [74, 0 ..] standard (scale 0x7E, code 7, value 2688); the one product
** 1536 * 2688 is exact, so out = fl(alpha * 4128768) = 0x4571A801
** (3866.5002), where the division fl(3866.5 / 4128768) gives 3866.5
** (0x4571A800) and fl(52.25/1536) * fl(74/2688) gives 0x4571A802.  A with
** itself: 2730.0625 (0x452AA100).  Values from an exact-rational model of
** the spec, not from the library. */
static void test_gemm_alpha_emax256_exact (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  uint16_t ha[16] = {0x4251}, hb[16] = {0x4294};
  nvfp4_tensor *xa = NULL, *xb = NULL, *qa = NULL, *qb = NULL, *y = NULL;
  nvfp4_qopts o;
  float out;
  uint32_t u;
  int v;
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(2, 1, 16, 0), NVFP4_BF16, ha, sizeof ha, &xa),
                   NVFP4_OK);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shp(2, 1, 16, 0), NVFP4_BF16, hb, sizeof hb, &xb),
                   NVFP4_OK);
  memset(&o, 0, sizeof o);
  o.four_over_six = 1;
  assert_int_equal(nvfp4_quantize(ctx, xa, &o, &qa), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, xb, NULL, &qb), NVFP4_OK);
  for (v = 0; v < 3; v++) {
    const uint32_t want = v < 2 ? 0x4571A801u : 0x452AA100u;
    assert_int_equal(nvfp4_gemm(ctx, v == 1 ? qb : qa, NVFP4_ROWWISE, v == 0 ? qb : qa,
                                NVFP4_ROWWISE, NULL, NVFP4_F32, &y), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_to_host(y, &out, sizeof out), NVFP4_OK);
    memcpy(&u, &out, sizeof u);
    if (u != want) fail_msg("case %d: out 0x%08X (%.9g), expected 0x%08X", v, u, (double)out, want);
    nvfp4_tensor_destroy(y);
    y = NULL;
  }
  nvfp4_tensor_destroy(qa); nvfp4_tensor_destroy(qb);
  nvfp4_tensor_destroy(xa); nvfp4_tensor_destroy(xb);
}



int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_blas_select_core),
    cmocka_unit_test(test_gemm_fp4_rowwise_matches_double),
    cmocka_unit_test(test_gemm_fp4_columnwise_wgrad_shape_and_values),
    cmocka_unit_test(test_gemm_rejects_wrong_width_columnwise_scale),
    cmocka_unit_test(test_gemm_missing_columnwise_any_m_is_eusage),
    cmocka_unit_test(test_gemm_plain_usages_bias_bf16),
    cmocka_unit_test(test_gemm_fp4_times_plain_nibble_order),
    cmocka_unit_test(test_gemm_after_quantize_matches_ref64),
    cmocka_unit_test(test_gemm_ignores_scale_padding),
    cmocka_unit_test(test_gemm_alpha_emax256_exact),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
