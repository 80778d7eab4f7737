/*
** test_linear.c -- lib/linear.c on 2 and 4 ranks (TP = world size): the seed
** case's backward under both columnwise rules, output/dgrad/wgrad numerics
** against float64 references (of the unquantized computation and of the same
** dequantized operands), TP = 1 against TP = world, and the error paths.
*/
#include <math.h>
#include "mpicheck.h"
#include "nvfp4_int.h"

static nvfp4_comm *world;


/* ---- host helpers --------------------------------------------------------- */

static float *host (const nvfp4_tensor *t) {
  int64_t n = nvfp4_shape_numel(nvfp4_tensor_shape(t)), i;
  float *f = malloc((size_t)(n + 1) * sizeof *f);
  if (nvfp4_tensor_dtype(t) == NVFP4_F32)
    nvfp4_tensor_to_host(t, f, (size_t)n * sizeof *f);
  else {
    uint16_t *h = malloc((size_t)(n + 1) * 2);
    nvfp4_tensor_to_host(t, h, (size_t)n * 2);
    for (i = 0; i < n; i++) f[i] = nvfp4i_bf16_to_f32(h[i]);
    free(h);
  }
  return f;
}


static nvfp4_tensor *mk (nvfp4_shape s, nvfp4_dtype dt, const float *f) {
  int64_t n = nvfp4_shape_numel(s), i;
  nvfp4_tensor *t = NULL;
  if (dt == NVFP4_F32)
    nvfp4_tensor_from_host(mc_ctx, s, dt, f, (size_t)n * 4, &t);
  else {
    uint16_t *h = malloc((size_t)(n + 1) * 2);
    for (i = 0; i < n; i++) h[i] = nvfp4i_f32_to_bf16(f[i]);
    nvfp4_tensor_from_host(mc_ctx, s, dt, h, (size_t)n * 2, &t);
    free(h);
  }
  return t;
}


/* Piece r of `parts` equal pieces along dim d (dims before d: outer). */
static nvfp4_tensor *slice (const nvfp4_tensor *t, int d, int r, int parts) {
  nvfp4_shape s = nvfp4_tensor_shape(t), o = s;
  int64_t outer = 1, inner = 1, len, i, j;
  float *f = host(t), *g;
  nvfp4_tensor *res;
  for (i = 0; i < d; i++) outer *= s.dim[i];
  for (i = d + 1; i < s.ndim; i++) inner *= s.dim[i];
  len = s.dim[d] / parts;
  o.dim[d] = len;
  g = malloc((size_t)(outer * len * inner + 1) * sizeof *g);
  for (i = 0; i < outer; i++)
    for (j = 0; j < len * inner; j++)
      g[i * len * inner + j] = f[i * s.dim[d] * inner + r * len * inner + j];
  res = mk(o, nvfp4_tensor_dtype(t), g);
  free(f); free(g);
  return res;
}


/* `times` copies of t concatenated along dim d. */
static nvfp4_tensor *tile (const nvfp4_tensor *t, int d, int times) {
  nvfp4_shape s = nvfp4_tensor_shape(t), o = s;
  int64_t outer = 1, blk = 1, i, k;
  float *f = host(t), *g;
  nvfp4_tensor *res;
  for (i = 0; i < d; i++) outer *= s.dim[i];
  for (i = d; i < s.ndim; i++) blk *= s.dim[i];
  o.dim[d] *= times;
  g = malloc((size_t)(outer * blk * times + 1) * sizeof *g);
  for (i = 0; i < outer; i++)
    for (k = 0; k < times; k++) memcpy(g + (i * times + k) * blk, f + i * blk, (size_t)blk * 4);
  res = mk(o, nvfp4_tensor_dtype(t), f == NULL ? NULL : g);
  free(f); free(g);
  return res;
}


static nvfp4_tensor *randn (nvfp4_shape s, nvfp4_dtype dt, uint64_t seed) {
  nvfp4_tensor *t = NULL;
  nvfp4_tensor_randn(mc_ctx, s, dt, seed, &t);
  return t;
}


static double relerr (nvfp4_comm *c, const nvfp4_tensor *x, const nvfp4_tensor *ref) {
  double e = -1;
  EXPECT_OK(nvfp4_rel_error(c, x, ref, &e));
  return e;
}


/* The feature count of the small layers: 64, or 16 per rank past 4 ranks (a
** split dim's share must be a multiple of 16: 8 per rank at TP 8 is not). */
static int64_t feat (void) {
  return mc_size > 4 ? 16 * (int64_t)mc_size : 64;
}


static nvfp4_linear_config config (int64_t K, int64_t N, nvfp4_parallel p, int sp) {
  nvfp4_linear_config c;
  memset(&c, 0, sizeof c);
  c.in_features = K;
  c.out_features = N;
  c.parallel = p;
  c.sequence_parallel = sp;
  c.tp_group = world;
  c.recipe.seed = 7;
  c.init_seed = 100;
  return c;
}


/* ---- the seed case, small: row-parallel SP, [S/TP, 1, H] grad ------------- */

static void test_row_sp_b1_nd_fails_flat2d_completes (void) {
  const int64_t S = 32 * mc_size, B = 1, H = feat();
  nvfp4_linear_config c = config(H, H, NVFP4_PARALLEL_ROW, 1);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x, *y = NULL, *dy, *dx = NULL, *dw = NULL;
  const nvfp4_tensor *g = NULL;
  nvfp4_gather_path path;
  x = randn(SHAPE3(S, B, H / mc_size), NVFP4_BF16, 1 + mc_rank);
  dy = randn(SHAPE3(S / mc_size, B, H), NVFP4_BF16, 50 + mc_rank);
  c.gather_rule = NVFP4_CW_ND;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  EXPECT_SHAPE(nvfp4_tensor_shape(y), SHAPE3(S / mc_size, B, H));
  EXPECT_ST(nvfp4_linear_backward(l, dy, &dx, &dw, NULL), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "not allocated");
  EXPECT(dx == NULL && dw == NULL);
  path = NVFP4_GATHER_PLAIN;
  EXPECT_OK(nvfp4_linear_gather_path(l, NVFP4_LIN_GRAD_OUTPUT, &path));
  EXPECT_MSG(path == NVFP4_GATHER_NONE, "a failed backward's grad_output path is %d", (int)path);
  nvfp4_linear_destroy(l);
  nvfp4_tensor_destroy(y);
  l = NULL; y = NULL;

  c.gather_rule = NVFP4_CW_FLAT2D;
  c.keep_operands = 1;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, &dw, NULL));
  EXPECT(dx != NULL && dw != NULL);
  if (dx) EXPECT_SHAPE(nvfp4_tensor_shape(dx), SHAPE3(S, B, H / mc_size));
  if (dw) EXPECT_SHAPE(nvfp4_tensor_shape(dw), SHAPE2(H, H / mc_size));
  EXPECT_OK(nvfp4_linear_gather_path(l, NVFP4_LIN_GRAD_OUTPUT, &path));
  EXPECT_MSG(path == NVFP4_GATHER_NVFP4, "grad_output's path is %d, not the NVFP4 gather", (int)path);
  EXPECT_OK(nvfp4_linear_gather_path(l, NVFP4_LIN_FPROP_INPUT, &path));
  EXPECT_MSG(path == NVFP4_GATHER_NONE, "row+SP's input gathered (path %d)", (int)path);
  EXPECT_ST(nvfp4_linear_gather_path(l, NVFP4_LIN_NOPERANDS, &path), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "operand 4 is not one of 0..3");
  EXPECT_ST(nvfp4_linear_gather_path(l, NVFP4_LIN_GRAD_OUTPUT, NULL), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "path is NULL");
  EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_GRAD_OUTPUT, &g));
  if (g) {
    EXPECT_SHAPE(nvfp4_tensor_shape(g), SHAPE3(S, B, H));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(H, S * B / 2));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 4 * ((S * B / 16 + 3) / 4)));
  }
  nvfp4_linear_destroy(l);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dy);
  nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw);
}


/* Odd B under `nd`: the gather computes a too-narrow columnwise scale, and
** the wgrad GEMM's shape check refuses it (TE's swizzle message). */
static void test_row_sp_odd_b_nd_caught_by_shape_check (void) {
  const int64_t S = 16 * mc_size, B = 3, H = feat();
  nvfp4_linear_config c = config(H, H, NVFP4_PARALLEL_ROW, 1);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x, *y = NULL, *dy, *dx = NULL, *dw = NULL;
  x = randn(SHAPE3(S, B, H / mc_size), NVFP4_BF16, 3);
  dy = randn(SHAPE3(S / mc_size, B, H), NVFP4_BF16, 4 + mc_rank);
  const nvfp4_tensor *g = (const nvfp4_tensor *)0x1;
  c.gather_rule = NVFP4_CW_ND;
  c.keep_operands = 1;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  EXPECT_ST(nvfp4_linear_backward(l, dy, &dx, &dw, NULL), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "invalid columnwise_scale_inv shape");
  /* the message says which GEMM and which gather rule */
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx),
                "linear backward: wgrad (dW = dY^T X) GEMM on grad_output gathered with rule nd: gemm:");
  /* no gathered grad_output to look at, and the reason is the failed backward */
  EXPECT_ST(nvfp4_linear_operand_get(l, NVFP4_LIN_GRAD_OUTPUT, &g), NVFP4_EUSAGE);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "no grad_output: the last backward failed before keeping it");
  nvfp4_linear_destroy(l);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dy);
}


/* A backward that fails after its argument checks (TE 2.21's B = 1 crash
** under `nd`) leaves the layer's SR offset: the next forward + backward (B =
** 2, which `nd` gathers right) gives the dW of a layer that never failed,
** byte for byte (it drew the failed call's offset before). */
static void test_failed_backward_keeps_sr_offset (void) {
  const int64_t S = 32 * mc_size, H = feat();
  nvfp4_linear_config c = config(H, H, NVFP4_PARALLEL_ROW, 1);
  nvfp4_linear *l = NULL, *fresh = NULL;
  nvfp4_tensor *x1, *dy1, *x2, *dy2, *y = NULL, *dx = NULL, *dw = NULL, *dwf = NULL;
  int eq = 0;
  char why[256] = "";
  x1 = randn(SHAPE3(S, 1, H / mc_size), NVFP4_BF16, 21 + mc_rank);
  dy1 = randn(SHAPE3(S / mc_size, 1, H), NVFP4_BF16, 22 + mc_rank);
  x2 = randn(SHAPE3(S, 2, H / mc_size), NVFP4_BF16, 23 + mc_rank);
  dy2 = randn(SHAPE3(S / mc_size, 2, H), NVFP4_BF16, 24 + mc_rank);
  c.gather_rule = NVFP4_CW_ND;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &fresh));
  EXPECT_OK(nvfp4_linear_forward(l, x1, &y));
  nvfp4_tensor_destroy(y);
  y = NULL;
  EXPECT_ST(nvfp4_linear_backward(l, dy1, &dx, &dw, NULL), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "not allocated");
  EXPECT_OK(nvfp4_linear_forward(l, x2, &y));
  nvfp4_tensor_destroy(y);
  y = NULL;
  EXPECT_OK(nvfp4_linear_backward(l, dy2, &dx, &dw, NULL));
  nvfp4_tensor_destroy(dx);
  dx = NULL;
  EXPECT_OK(nvfp4_linear_forward(fresh, x2, &y));
  EXPECT_OK(nvfp4_linear_backward(fresh, dy2, &dx, &dwf, NULL));
  if (dw && dwf) {
    EXPECT_OK(nvfp4_tensor_equal(dw, dwf, &eq, why, sizeof why));
    EXPECT_MSG(eq, "dW after a failed backward differs from a fresh layer's (SR offset): %s", why);
  }
  else EXPECT(dw != NULL && dwf != NULL);
  nvfp4_linear_destroy(l);
  nvfp4_linear_destroy(fresh);
  nvfp4_tensor_destroy(x1); nvfp4_tensor_destroy(dy1); nvfp4_tensor_destroy(x2);
  nvfp4_tensor_destroy(dy2); nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dx);
  nvfp4_tensor_destroy(dw); nvfp4_tensor_destroy(dwf);
}


/* ---- numerics --------------------------------------------------------------- */

typedef struct errs { double y, dx, dw, db, yq, dxq, dwq; } errs;

/* Run one layer on Gaussian data and measure its three outputs against
** float64 references, computed per rank from the same local tensors. */
/* fo6: the recipe's 4over6 (bit 0 weights, bit 1 activations). */
static errs numerics_fo6 (nvfp4_parallel p, nvfp4_dtype act, int no_sr, int no_rht, int fo6) {
  const int tp = mc_size, row = p == NVFP4_PARALLEL_ROW;
  const int64_t S = 64 * tp, B = 2, K = 256, N = 192 % (16 * tp) == 0 ? 192 : 256;   /* N/TP % 16 == 0 */
  nvfp4_linear_config c = config(K, N, p, 1);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x, *dy, *y = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  nvfp4_tensor *t = NULL, *r = NULL, *yref = NULL, *dyfull = NULL, *xfull = NULL;
  const nvfp4_tensor *qx = NULL, *qw = NULL, *qdy = NULL, *qxw = NULL;
  const nvfp4_tensor *w;
  errs e;
  memset(&e, 0, sizeof e);
  c.bias = 1;
  c.keep_operands = 1;
  c.recipe.no_grad_sr = no_sr;
  c.recipe.no_input_rht = c.recipe.no_grad_rht = no_rht;
  c.recipe.four_over_six_weights = (fo6 & 1) != 0;
  c.recipe.four_over_six_activations = (fo6 & 2) != 0;
  if (fo6 & 2) c.recipe.no_input_rht = c.recipe.no_grad_rht = 1;   /* RHT on both wgrad operands or neither */
  x = randn(row ? SHAPE3(S, B, K / tp) : SHAPE3(S / tp, B, K), act, 11 + mc_rank);
  dy = randn(row ? SHAPE3(S / tp, B, N) : SHAPE3(S, B, N / tp), act, 31 + mc_rank);
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  w = nvfp4_linear_weight(l);
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, &dw, &db));
  if (y == NULL || dx == NULL || dw == NULL || db == NULL) goto done;
  EXPECT_SHAPE(nvfp4_tensor_shape(dx), nvfp4_tensor_shape(x));
  EXPECT_SHAPE(nvfp4_tensor_shape(dw), nvfp4_tensor_shape(w));
  nvfp4_linear_operand_get(l, NVFP4_LIN_FPROP_INPUT, &qx);
  nvfp4_linear_operand_get(l, NVFP4_LIN_WEIGHT, &qw);
  nvfp4_linear_operand_get(l, NVFP4_LIN_GRAD_OUTPUT, &qdy);
  nvfp4_linear_operand_get(l, NVFP4_LIN_WGRAD_INPUT, &qxw);
  if (row) {
    /* unquantized: Y = RS(X_r W_r^T); dX = AG(dY) W_r; dW = AG(dY)^T X_r */
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, w, NVFP4_ROWWISE, x, NVFP4_ROWWISE, &t));
    EXPECT_OK(nvfp4_reduce_scatter(world, t, &yref));
    EXPECT_OK(nvfp4_all_gather_plain(world, dy, &dyfull));
    nvfp4_tensor_destroy(t); t = NULL;
    /* bias is zero at creation, so Y has no bias term */
    e.y = relerr(world, y, yref);
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, w, NVFP4_COLUMNWISE, dyfull, NVFP4_ROWWISE, &r));
    e.dx = relerr(world, dx, r);
    nvfp4_tensor_destroy(r); r = NULL;
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, x, NVFP4_COLUMNWISE, dyfull, NVFP4_COLUMNWISE, &r));
    e.dw = relerr(world, dw, r);
    nvfp4_tensor_destroy(r); r = NULL;
    /* same dequantized operands */
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, &t));
    if (act == NVFP4_BF16) {     /* TE reduces the bf16 partials */
      nvfp4_tensor *tb = NULL;
      float *f = host(t);
      tb = mk(nvfp4_tensor_shape(t), NVFP4_BF16, f);
      free(f);
      nvfp4_tensor_destroy(t);
      t = tb;
    }
    EXPECT_OK(nvfp4_reduce_scatter(world, t, &r));
    e.yq = relerr(world, y, r);
    nvfp4_tensor_destroy(r); r = NULL;
  }
  else {
    /* column+SP: Y = AG(X) W_r^T; dX = RS(dY W_r); dW = dY^T AG(X) */
    EXPECT_OK(nvfp4_all_gather_plain(world, x, &xfull));
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, w, NVFP4_ROWWISE, xfull, NVFP4_ROWWISE, &yref));
    e.y = relerr(world, y, yref);
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, w, NVFP4_COLUMNWISE, dy, NVFP4_ROWWISE, &t));
    EXPECT_OK(nvfp4_reduce_scatter(world, t, &r));
    e.dx = relerr(world, dx, r);
    nvfp4_tensor_destroy(r); r = NULL;
    nvfp4_tensor_destroy(t); t = NULL;
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, xfull, NVFP4_COLUMNWISE, dy, NVFP4_COLUMNWISE, &r));
    e.dw = relerr(world, dw, r);
    nvfp4_tensor_destroy(r); r = NULL;
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, &r));
    e.yq = relerr(world, y, r);
    nvfp4_tensor_destroy(r); r = NULL;
  }
  nvfp4_tensor_destroy(t); t = NULL;
  /* dgrad / wgrad against the same operands (no reduction for row dgrad) */
  EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, qw, NVFP4_COLUMNWISE, qdy, NVFP4_ROWWISE, &t));
  if (row) e.dxq = relerr(world, dx, t);
  else {
    nvfp4_tensor *tb = t;
    if (act == NVFP4_BF16) { float *f = host(t); tb = mk(nvfp4_tensor_shape(t), act, f); free(f); }
    EXPECT_OK(nvfp4_reduce_scatter(world, tb, &r));
    if (tb != t) nvfp4_tensor_destroy(tb);
    e.dxq = relerr(world, dx, r);
    nvfp4_tensor_destroy(r); r = NULL;
  }
  nvfp4_tensor_destroy(t); t = NULL;
  EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, qxw, NVFP4_COLUMNWISE, qdy, NVFP4_COLUMNWISE, &t));
  e.dwq = relerr(world, dw, t);
  nvfp4_tensor_destroy(t); t = NULL;
  /* grad_bias: the column sums of the full dY (row+SP: all-reduced) */
  {
    nvfp4_tensor *src = row ? dyfull : dy, *ones;
    int64_t M = nvfp4_shape_M(nvfp4_tensor_shape(src)), i;
    float *o = malloc((size_t)M * 4);
    for (i = 0; i < M; i++) o[i] = 1;
    ones = mk(SHAPE2(1, M), NVFP4_F32, o);
    free(o);
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, src, NVFP4_COLUMNWISE, ones, NVFP4_ROWWISE, &t));
    e.db = relerr(NULL, db, t);
    nvfp4_tensor_destroy(ones);
  }
done:
  nvfp4_tensor_destroy(t); nvfp4_tensor_destroy(r); nvfp4_tensor_destroy(yref);
  nvfp4_tensor_destroy(dyfull); nvfp4_tensor_destroy(xfull);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy); nvfp4_tensor_destroy(y);
  nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw); nvfp4_tensor_destroy(db);
  nvfp4_linear_destroy(l);
  return e;
}


static errs numerics (nvfp4_parallel p, nvfp4_dtype act, int no_sr, int no_rht) {
  return numerics_fo6(p, act, no_sr, no_rht, 0);
}


static void print_errs (const char *what, errs e) {
  if (mc_rank == 0)
    printf("# %s: y %.4f dx %.4f dw %.4f db %.2g | same operands: y %.2g dx %.2g dw %.2g\n",
           what, e.y, e.dx, e.dw, e.db, e.yq, e.dxq, e.dwq);
}


static void test_numerics_default_recipe (void) {
  int p;
  for (p = NVFP4_PARALLEL_COLUMN; p <= NVFP4_PARALLEL_ROW; p++) {
    errs e = numerics((nvfp4_parallel)p, NVFP4_BF16, 0, 0);
    print_errs(p == NVFP4_PARALLEL_ROW ? "row+SP bf16 default" : "column+SP bf16 default", e);
    EXPECT_MSG(e.y < 0.18 && e.y > 0.05, "output error %g", e.y);
    EXPECT_MSG(e.dx < 0.22 && e.dx > 0.05, "dgrad error %g", e.dx);
    EXPECT_MSG(e.dw < 0.22 && e.dw > 0.05, "wgrad error %g", e.dw);
    EXPECT_MSG(e.yq < 1e-2 && e.dxq < 1e-2 && e.dwq < 1e-2 && e.db < 1e-2,
               "same-operand errors %g %g %g, bias %g", e.yq, e.dxq, e.dwq, e.db);
    e = numerics((nvfp4_parallel)p, NVFP4_BF16, 1, 0);
    print_errs("  SR off", e);
    EXPECT_MSG(e.y < 0.18 && e.dx < 0.18 && e.dw < 0.18, "SR off: %g %g %g", e.y, e.dx, e.dw);
  }
}


/* The recipe's 4over6 (weights, then weights and activations): the layer's
** GEMMs on 4over6 operands (E4M3 maximum 256 in alpha) equal the float64
** GEMM of the same dequantized operands, and the errors against the
** unquantized layer stay within the default recipe's bounds. */
static void test_numerics_four_over_six (void) {
  int p, f;
  for (p = NVFP4_PARALLEL_COLUMN; p <= NVFP4_PARALLEL_ROW; p++)
    for (f = 1; f <= 3; f += 2) {
      errs e = numerics_fo6((nvfp4_parallel)p, NVFP4_BF16, 0, 0, f);
      print_errs(f == 1 ? "  4over6 weights" : "  4over6 all", e);
      EXPECT_MSG(e.y < 0.18 && e.y > 0.02, "4over6 output error %g", e.y);
      EXPECT_MSG(e.dx < 0.22 && e.dw < 0.22, "4over6 dgrad/wgrad errors %g %g", e.dx, e.dw);
      EXPECT_MSG(e.yq < 1e-2 && e.dxq < 1e-2 && e.dwq < 1e-2,
                 "4over6 same-operand errors %g %g %g", e.yq, e.dxq, e.dwq);
    }
}


/* fp32 activations (RHT off: it needs bf16) and fp32 reductions. */
static void test_numerics_fp32_same_operands (void) {
  int p;
  for (p = NVFP4_PARALLEL_COLUMN; p <= NVFP4_PARALLEL_ROW; p++) {
    errs e = numerics((nvfp4_parallel)p, NVFP4_F32, 0, 1);
    print_errs(p == NVFP4_PARALLEL_ROW ? "row+SP fp32" : "column+SP fp32", e);
    EXPECT_MSG(e.yq < 1e-5 && e.dxq < 1e-5 && e.dwq < 1e-5 && e.db < 1e-5,
               "same-operand errors %g %g %g, bias %g", e.yq, e.dxq, e.dwq, e.db);
    EXPECT_MSG(e.y < 0.18 && e.dx < 0.22 && e.dw < 0.22, "errors %g %g %g", e.y, e.dx, e.dw);
  }
}


/* ---- field case BH-01 -------------------------------------------------------- */

/* BH-01 as a layer: column-parallel Linear, SP on, TP = 2 (groups of 2
** consecutive ranks), X = [S=32, B=2, H=64] bf16, out features 128, the
** default recipe (RHT on both wgrad operands).  backward re-gathers the
** saved input's columnwise copy for wgrad; that gathered operand must be
** byte-identical to quantizing the full X columnwise (data [64, 32], scale
** [128, 4]; TE's naive gather interleaved it), and the per-rank wgrad
** dW_r = dY_r^T X_full [64, 64] must match the float64 product of the same
** operands and stay within NVFP4 tolerance of the unquantized one. */
static void test_bh01_column_sp_wgrad (void) {
  const int64_t S = 32, B = 2, H = 64, N = 128;
  nvfp4_comm *tp2 = NULL;
  nvfp4_linear_config c;
  nvfp4_linear *l = NULL;
  nvfp4_tensor *xfull, *x, *dy, *y = NULL, *dx = NULL, *dw = NULL, *ref = NULL, *r = NULL;
  const nvfp4_tensor *qxw = NULL, *qdy = NULL;
  nvfp4_qopts o;
  double e;
  int gr;
  EXPECT_OK(nvfp4_comm_split(world, 2, &tp2));
  if (tp2 == NULL) return;
  gr = nvfp4_comm_rank(tp2);
  c = config(H, N, NVFP4_PARALLEL_COLUMN, 1);
  c.tp_group = tp2;
  c.keep_operands = 1;
  xfull = randn(SHAPE3(S, B, H), NVFP4_BF16, 91);
  x = slice(xfull, 0, gr, 2);                                   /* [16, 2, 64] */
  dy = randn(SHAPE3(S, B, N / 2), NVFP4_BF16, 92 + (uint64_t)mc_rank);
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  if (y) EXPECT_SHAPE(nvfp4_tensor_shape(y), SHAPE3(S, B, N / 2));
  EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, &dw, NULL));
  if (dx) EXPECT_SHAPE(nvfp4_tensor_shape(dx), SHAPE3(S / 2, B, H));
  if (dw) EXPECT_SHAPE(nvfp4_tensor_shape(dw), SHAPE2(N / 2, H));
  EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_WGRAD_INPUT, &qxw));
  EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_GRAD_OUTPUT, &qdy));
  memset(&o, 0, sizeof o);
  o.columnwise = o.rht = 1;
  EXPECT_OK(nvfp4_quantize(mc_ctx, xfull, &o, &ref));
  if (qxw && ref) {
    size_t n[2] = {64 * 32, 128 * 4};
    int b;
    float a = -1, ar = -2;
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(qxw, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 32));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(qxw, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 4));
    for (b = 0; b < 2; b++) {
      nvfp4_buffer buf = b ? NVFP4_COLUMNWISE_SCALE : NVFP4_COLUMNWISE_DATA;
      uint8_t *p = malloc(n[b]), *q = malloc(n[b]);
      EXPECT_OK(nvfp4_tensor_buffer_read(qxw, buf, p, n[b]));
      EXPECT_OK(nvfp4_tensor_buffer_read(ref, buf, q, n[b]));
      EXPECT_BYTES(p, q, n[b], b ? "BH-01 gathered wgrad input: columnwise scale"
                                 : "BH-01 gathered wgrad input: columnwise data");
      free(p); free(q);
    }
    EXPECT_OK(nvfp4_tensor_amax(qxw, 1, &a));
    EXPECT_OK(nvfp4_tensor_amax(ref, 1, &ar));
    EXPECT_MSG(a == ar, "BH-01 gathered wgrad input: columnwise amax %g, expected %g", a, ar);
  }
  if (dw && qxw && qdy) {
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, qxw, NVFP4_COLUMNWISE, qdy, NVFP4_COLUMNWISE, &r));
    e = relerr(tp2, dw, r);
    EXPECT_MSG(e < 1e-5, "BH-01 wgrad vs float64 of the same operands: %g", e);
    nvfp4_tensor_destroy(r);
    r = NULL;
    EXPECT_OK(nvfp4_gemm_ref64(mc_ctx, xfull, NVFP4_COLUMNWISE, dy, NVFP4_COLUMNWISE, &r));
    e = relerr(tp2, dw, r);
    if (mc_rank == 0) printf("# BH-01 wgrad vs float64 dY_r^T X_full: %.4f\n", e);
    EXPECT_MSG(e > 0.02 && e < 0.22, "BH-01 wgrad vs float64 dY_r^T X_full: %g", e);
  }
  nvfp4_linear_destroy(l);
  nvfp4_tensor_destroy(xfull); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw);
  nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(r);
  nvfp4_comm_destroy(tp2);
}


/* BH-22 through the layer: the SP shard [S=0, B=4, H=64] (column+SP: the
** input; row+SP: grad_output; its gathers have empty shards) runs forward
** and backward without error; outputs are empty with the usual shapes, and
** the weight and bias gradients, sums over no tokens, are exactly 0. */
static void test_bh22_empty_sp_shard (void) {
  const int tp = mc_size;
  int p;
  for (p = 0; p < 2; p++) {
    const int row = p == 1;
    nvfp4_linear_config c = config(row ? 64 * tp : 64, row ? 64 : 64 * tp,
                                   row ? NVFP4_PARALLEL_ROW : NVFP4_PARALLEL_COLUMN, 1);
    nvfp4_linear *l = NULL;
    nvfp4_tensor *x = NULL, *y = NULL, *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
    c.bias = 1;
    EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
    EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE3(0, 4, 64), NVFP4_BF16, &x));
    EXPECT_OK(nvfp4_linear_forward(l, x, &y));
    if (y) {
      EXPECT_SHAPE(nvfp4_tensor_shape(y), SHAPE3(0, 4, 64));
      EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE3(0, 4, 64), NVFP4_BF16, &dy));
      EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, &dw, &db));
    }
    if (dx) EXPECT_SHAPE(nvfp4_tensor_shape(dx), SHAPE3(0, 4, 64));
    if (dw && db) {
      float *w = host(dw), *b = host(db);
      int64_t i, nw = nvfp4_shape_numel(nvfp4_tensor_shape(dw)), nb = nvfp4_shape_numel(nvfp4_tensor_shape(db));
      EXPECT_SHAPE(nvfp4_tensor_shape(dw), SHAPE2(64, 64));
      for (i = 0; i < nw; i++) if (w[i] != 0.0f) { EXPECT_MSG(0, "%s dW[%lld] = %g, expected 0",
                                                            row ? "row" : "column", (long long)i, w[i]); break; }
      for (i = 0; i < nb; i++) if (b[i] != 0.0f) { EXPECT_MSG(0, "%s db[%lld] = %g, expected 0",
                                                            row ? "row" : "column", (long long)i, b[i]); break; }
      free(w); free(b);
    }
    else EXPECT_MSG(0, "%s: no dW or db", row ? "row" : "column");
    nvfp4_linear_destroy(l);
    nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dy);
    nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw); nvfp4_tensor_destroy(db);
  }
}


/* ---- TP = 1 against TP = world ---------------------------------------------- */

/* Tiled data (every shard a copy) gives each shard the global amax, before
** and after the RHT, so with SR off both runs quantize the same values and
** differ only in the order and rounding of the reductions. */
static void tp_equivalence (nvfp4_parallel p) {
  const int tp = mc_size, row = p == NVFP4_PARALLEL_ROW;
  const int64_t S = 32 * tp, B = 2, K = 64 * tp, N = 32 * tp;
  nvfp4_linear_config c1 = config(K, N, p, 1), c2 = config(K, N, p, 1);
  nvfp4_linear *l1 = NULL, *l2 = NULL;
  nvfp4_tensor *x0, *w0, *dy0, *X, *W, *DY, *xr, *wr, *dyr;
  nvfp4_tensor *y1 = NULL, *dx1 = NULL, *dw1 = NULL, *y2 = NULL, *dx2 = NULL, *dw2 = NULL;
  nvfp4_tensor *s1;
  double e;
  x0 = randn(row ? SHAPE3(S, B, K / tp) : SHAPE3(S, B, K), NVFP4_BF16, 5);
  w0 = randn(row ? SHAPE2(N, K / tp) : SHAPE2(N / tp, K), NVFP4_F32, 6);
  dy0 = randn(row ? SHAPE3(S, B, N) : SHAPE3(S, B, N / tp), NVFP4_BF16, 7);
  X = row ? tile(x0, 2, tp) : tile(x0, 0, 1);
  W = row ? tile(w0, 1, tp) : tile(w0, 0, tp);
  DY = row ? tile(dy0, 0, 1) : tile(dy0, 2, tp);
  xr = row ? slice(X, 2, mc_rank, tp) : slice(X, 0, mc_rank, tp);
  wr = row ? slice(W, 1, mc_rank, tp) : slice(W, 0, mc_rank, tp);
  dyr = row ? slice(DY, 0, mc_rank, tp) : slice(DY, 2, mc_rank, tp);
  c1.tp_group = NULL;
  c1.parallel = NVFP4_PARALLEL_NONE;
  c1.sequence_parallel = 0;
  c1.recipe.no_grad_sr = c2.recipe.no_grad_sr = 1;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c1, &l1));
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c2, &l2));
  EXPECT_OK(nvfp4_linear_set_weight(l1, W));
  EXPECT_OK(nvfp4_linear_set_weight(l2, wr));
  EXPECT_OK(nvfp4_linear_forward(l1, X, &y1));
  EXPECT_OK(nvfp4_linear_backward(l1, DY, &dx1, &dw1, NULL));
  EXPECT_OK(nvfp4_linear_forward(l2, xr, &y2));
  EXPECT_OK(nvfp4_linear_backward(l2, dyr, &dx2, &dw2, NULL));
  if (y1 && y2 && dx1 && dx2 && dw1 && dw2) {
    s1 = row ? slice(y1, 0, mc_rank, tp) : slice(y1, 2, mc_rank, tp);
    e = relerr(world, y2, s1);
    EXPECT_MSG(e < 1e-2, "output TP=1 vs TP=%d: %g", tp, e);
    nvfp4_tensor_destroy(s1);
    s1 = row ? slice(dx1, 2, mc_rank, tp) : slice(dx1, 0, mc_rank, tp);
    e = relerr(world, dx2, s1);
    EXPECT_MSG(e < 1e-2, "dgrad TP=1 vs TP=%d: %g", tp, e);
    nvfp4_tensor_destroy(s1);
    s1 = row ? slice(dw1, 1, mc_rank, tp) : slice(dw1, 0, mc_rank, tp);
    e = relerr(world, dw2, s1);
    EXPECT_MSG(e < 1e-5, "wgrad TP=1 vs TP=%d: %g (no reduction: fp32 params)", tp, e);
    nvfp4_tensor_destroy(s1);
  }
  nvfp4_linear_destroy(l1); nvfp4_linear_destroy(l2);
  nvfp4_tensor_destroy(x0); nvfp4_tensor_destroy(w0); nvfp4_tensor_destroy(dy0);
  nvfp4_tensor_destroy(X); nvfp4_tensor_destroy(W); nvfp4_tensor_destroy(DY);
  nvfp4_tensor_destroy(xr); nvfp4_tensor_destroy(wr); nvfp4_tensor_destroy(dyr);
  nvfp4_tensor_destroy(y1); nvfp4_tensor_destroy(dx1); nvfp4_tensor_destroy(dw1);
  nvfp4_tensor_destroy(y2); nvfp4_tensor_destroy(dx2); nvfp4_tensor_destroy(dw2);
}


static void test_tp1_equals_tp_world (void) {
  tp_equivalence(NVFP4_PARALLEL_ROW);
  tp_equivalence(NVFP4_PARALLEL_COLUMN);
}


/* ---- errors ------------------------------------------------------------------ */

static void test_config_and_usage_errors (void) {
  nvfp4_linear_config c = config(64, 48, NVFP4_PARALLEL_ROW, 1);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x = NULL, *dx = NULL, *y = NULL;
  c.in_features = 40;
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "in_features 40 is not a positive multiple of 16");
  /* a weight too large names the fields, not a tensor shard (3 * 2^61
  ** elements; 3 * 2^62 overflows int64) */
  c.in_features = (int64_t)1 << 57;
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear: the weight [out_features 48, in_features "
                "144115188075855872] has more than 2^60 elements");
  c.in_features = (int64_t)1 << 58;
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "in_features 288230376151711744] has more than 2^60");
  EXPECT(l == NULL);
  c.in_features = 16 * mc_size + 16;    /* K/TP not a multiple of 16 */
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "divisible by 16 * TP");
  c = config(64, 48, NVFP4_PARALLEL_NONE, 1);
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "sequence_parallel needs");
  c = config(64 * mc_size, 48, NVFP4_PARALLEL_ROW, 1);
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  /* a NULL tensor's error names its call, as every other of the layer's */
  EXPECT_ST(nvfp4_linear_forward(l, NULL, &y), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear_forward: input: tensor is NULL");
  EXPECT_ST(nvfp4_linear_set_weight(l, NULL), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear_set_weight: weight: tensor is NULL");
  x = randn(SHAPE3(32 * mc_size, 1, 64), NVFP4_BF16, 1);
  EXPECT_ST(nvfp4_linear_backward(l, x, &dx, NULL, NULL), NVFP4_EUSAGE);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "no forward");
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  EXPECT_ST(nvfp4_linear_backward(l, NULL, &dx, NULL, NULL), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear_backward: grad_output: tensor is NULL");
  nvfp4_tensor_destroy(y);
  y = NULL;
  nvfp4_tensor_destroy(x);
  x = randn(nvfp4_shape_make(1, (int64_t[]){64}), NVFP4_BF16, 1);   /* no sequence dim */
  EXPECT_ST(nvfp4_linear_forward(l, x, &y), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear: input [64] has 1 dim; sequence_parallel needs "
                "at least 2 (the sequence dim first, the features last)");
  nvfp4_tensor_destroy(x);
  {  /* a local layer takes a 1-D input, not a 0-d one */
    nvfp4_linear *ll = NULL;
    nvfp4_linear_config cl = config(64, 48, NVFP4_PARALLEL_NONE, 0);
    cl.tp_group = NULL;
    EXPECT_OK(nvfp4_linear_create(mc_ctx, &cl, &ll));
    x = randn(nvfp4_shape_make(0, NULL), NVFP4_BF16, 1);
    EXPECT_ST(nvfp4_linear_forward(ll, x, &y), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear: input [] has 0 dims; needs at least 1 "
                  "(the features)");
    nvfp4_tensor_destroy(x);
    nvfp4_linear_destroy(ll);
  }
  x = randn(SHAPE3(32 * mc_size, 1, 48), NVFP4_BF16, 1);      /* wrong K */
  EXPECT_ST(nvfp4_linear_forward(l, x, &y), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "last dim must be 64");
  nvfp4_tensor_destroy(x);
  x = randn(SHAPE3(32 * mc_size + 1, 1, 64), NVFP4_BF16, 1);  /* S % TP */
  if (mc_size > 1) {
    char want[160];
    EXPECT_ST(nvfp4_linear_forward(l, x, &y), NVFP4_EINVAL);
    snprintf(want, sizeof want, "its sequence dim (the first) has size %d, not divisible by TP %d",
             32 * mc_size + 1, mc_size);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  }
  nvfp4_tensor_destroy(x);
  x = randn(SHAPE3(32 * mc_size, 1, 64), NVFP4_F32, 1);       /* RHT on fp32 */
  EXPECT_ST(nvfp4_linear_forward(l, x, &y), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "needs bf16");
  EXPECT(y == NULL);
  nvfp4_tensor_destroy(x);
  nvfp4_linear_destroy(l);
  l = NULL;
  c.recipe.four_over_six_activations = 1;                      /* with input RHT on */
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);  /* a config rule: at create */
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "4over6 activations exclude the input's RHT");
  EXPECT(l == NULL);
  c.frozen_weight = 1;                                         /* no columnwise input: fine */
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  nvfp4_linear_destroy(l);
  l = NULL;
  /* a parallel layer without a group in a job of several ranks: TP = 1 on
  ** each rank, surely a forgotten group */
  c = config(64, 48, NVFP4_PARALLEL_COLUMN, 0);
  c.tp_group = NULL;
  if (mc_size > 1) {
    EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "parallel mode column without a TP group in a job of");
  }
  c.parallel = NVFP4_PARALLEL_NONE;                            /* a local layer: fine */
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  nvfp4_linear_destroy(l);
}


/* create is collective over the TP group: a config refused on one rank
** only (its peers used to create theirs and wait in the first forward), and
** configs that pass on every rank but differ (sequence parallelism: the
** ranks then called different collectives and hung; in_features: a layer
** of mixed K ran silently) are refused on every rank. */
static void test_create_agreement (void) {
  const int bad = mc_size - 1;
  nvfp4_linear_config c;
  nvfp4_linear *l = NULL;
  nvfp4_status st;
  if (mc_size < 2) return;
  c = config(64 * mc_size, 64, NVFP4_PARALLEL_ROW, 1);
  if (mc_rank == bad) c.recipe.no_grad_rht = 1;                /* the RHT pairing rule */
  st = nvfp4_linear_create(mc_ctx, &c, &l);
  EXPECT_EQ_I(st, mc_rank == bad ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == bad ? "input RHT is on but grad RHT is off"
                                                         : "linear_create: rank");
  EXPECT(l == NULL);
  /* a NULL out or ctx on one rank is such a failure too (its peers waited
  ** in the agreement) */
  c = config(64 * mc_size, 64, NVFP4_PARALLEL_ROW, 1);
  st = nvfp4_linear_create(mc_ctx, &c, mc_rank == bad ? NULL : &l);
  EXPECT_EQ_I(st, mc_rank == bad ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == bad ? "linear_create: out is NULL"
                                                         : "linear_create: rank");
  st = nvfp4_linear_create(mc_rank == bad ? NULL : mc_ctx, &c, &l);
  EXPECT_EQ_I(st, mc_rank == bad ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT(l == NULL);
  c = config(64 * mc_size, 64, NVFP4_PARALLEL_ROW, mc_rank != bad);
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EMISMATCH);
  {
    char want[128];
    snprintf(want, sizeof want, "linear_create: the ranks disagree on sequence_parallel: rank %d has off, "
             "rank 0 has on", bad);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  }
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  EXPECT(l == NULL);
  c = config(mc_rank == bad ? 32 * mc_size : 64 * mc_size, 64, NVFP4_PARALLEL_ROW, 0);
  EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l), NVFP4_EMISMATCH);
  {
    char want[128];
    snprintf(want, sizeof want, "the ranks disagree on in_features: rank %d has %d, rank 0 has %d",
             bad, 32 * mc_size, 64 * mc_size);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  }
  c = config(64 * mc_size, 64, NVFP4_PARALLEL_ROW, 0);
  c.recipe.seed = 7 + (uint64_t)mc_rank;                       /* each rank's own: fine */
  c.init_seed = 100 + (uint64_t)mc_rank;
  c.keep_operands = mc_rank == 0;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  nvfp4_linear_destroy(l);
  l = NULL;
  /* a group destroyed before the layer that has it: the layer still works
  ** (its MPI communicator was freed: the next collective crashed in
  ** MPI_Allreduce) and the group is freed with the layer */
  {
    nvfp4_comm *g = NULL;
    nvfp4_tensor *x = NULL, *y = NULL;
    EXPECT_OK(nvfp4_comm_split(world, mc_size, &g));
    c = config(64 * mc_size, 64, NVFP4_PARALLEL_ROW, 1);
    c.tp_group = g;
    EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
    nvfp4_comm_destroy(g);
    x = randn(SHAPE3(32 * mc_size, 1, 64), NVFP4_BF16, 1 + mc_rank);
    EXPECT_OK(nvfp4_linear_forward(l, x, &y));
    if (y) EXPECT_SHAPE(nvfp4_tensor_shape(y), SHAPE3(32, 1, 64));
    /* but only that layer: a collective, a split or a new layer on the
    ** destroyed group is refused on every rank (they ran) */
    {
      nvfp4_tensor *o = NULL;
      nvfp4_comm *s2 = NULL;
      nvfp4_linear *l2 = NULL;
      EXPECT_ST(nvfp4_all_gather_plain(g, x, &o), NVFP4_EUSAGE);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "all_gather_plain: this comm was destroyed");
      EXPECT(o == NULL);
      EXPECT_ST(nvfp4_comm_split(g, 1, &s2), NVFP4_EUSAGE);
      EXPECT(s2 == NULL);
      EXPECT_ST(nvfp4_comm_barrier(g), NVFP4_EUSAGE);
      EXPECT_ST(nvfp4_linear_create(mc_ctx, &c, &l2), NVFP4_EUSAGE);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "linear: tp_group was destroyed");
      EXPECT(l2 == NULL);
    }
    nvfp4_tensor_destroy(y);
    y = NULL;
    EXPECT_OK(nvfp4_linear_forward(l, x, &y));       /* the layer still can */
    nvfp4_tensor_destroy(x);
    nvfp4_tensor_destroy(y);
    nvfp4_linear_destroy(l);
  }
}


/* Arguments bad on one rank only: the group agrees on the verdict before
** the step's first collective, so that rank keeps its error and its peers
** get EPEER naming it (they waited in the input's amax reduction); the
** layer then works, and a backward still differentiates the last good
** forward. */
static void test_one_rank_bad_arguments (void) {
  const int64_t F = feat();
  nvfp4_linear_config c = config(F, F, NVFP4_PARALLEL_COLUMN, 1);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x, *xbad, *y = NULL, *y2 = NULL, *dy, *dybad, *dx = NULL;
  nvfp4_status st;
  const int bad = mc_size - 1;
  if (mc_size < 2) return;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  x = randn(SHAPE3(32, 1, F), NVFP4_BF16, 1 + mc_rank);
  xbad = randn(SHAPE3(32, 1, 48), NVFP4_BF16, 1 + mc_rank);         /* wrong K */
  st = nvfp4_linear_forward(l, mc_rank == bad ? xbad : x, &y);
  EXPECT_EQ_I(st, mc_rank == bad ? NVFP4_EINVAL : NVFP4_EPEER);
  if (mc_rank == bad) {
    char want[64];
    snprintf(want, sizeof want, "last dim must be %d", (int)F);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  }
  else EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "failed");
  EXPECT(y == NULL);
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  dy = randn(nvfp4_tensor_shape(y), NVFP4_BF16, 9 + mc_rank);
  dybad = randn(SHAPE3(32, 1, F / mc_size + 16), NVFP4_BF16, 9);    /* not y's shape */
  st = nvfp4_linear_backward(l, mc_rank == bad ? dybad : dy, &dx, NULL, NULL);
  EXPECT_EQ_I(st, mc_rank == bad ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == bad ? "does not match the output" : "failed");
  EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, NULL, NULL));
  EXPECT(dx != NULL);
  if (dx) EXPECT_SHAPE(nvfp4_tensor_shape(dx), SHAPE3(32, 1, F));
  nvfp4_linear_destroy(l);
  l = NULL;
  /* a row-parallel layer whose input on the last rank passes the argument
  ** checks but has another shape (M = 24): refused on every rank, naming
  ** both shapes (it used to fail later, in the output's all-reduce, with an
  ** intermediate tensor's shape); then M = 24 on every rank, which the
  ** layer's M check refuses after the shape agreement (the NVFP4 recipe
  ** needs M % 16 == 0): every rank gets that error, none waits in the
  ** all-reduce */
  {
    nvfp4_linear_config cr = config(F, F, NVFP4_PARALLEL_ROW, 0);
    nvfp4_tensor *xr = randn(SHAPE3(mc_rank == bad ? 24 : 32, 1, F / mc_size), NVFP4_BF16, 3);
    nvfp4_tensor *x24 = randn(SHAPE3(24, 1, F / mc_size), NVFP4_BF16, 3);
    nvfp4_tensor *yr = NULL;
    char want[128];
    cr.bias = 1;
    EXPECT_OK(nvfp4_linear_create(mc_ctx, &cr, &l));
    EXPECT_ST(nvfp4_linear_forward(l, xr, &yr), NVFP4_EMISMATCH);
    snprintf(want, sizeof want, "linear_forward: x: ranks disagree: rank %d has [24, 1, %d] bf16, "
             "rank 0 has [32, 1, %d] bf16", bad, (int)(F / mc_size), (int)(F / mc_size));
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
    EXPECT(yr == NULL);
    EXPECT_ST(nvfp4_linear_forward(l, x24, &yr), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "M=24 (the product of its leading dims)");
    EXPECT(yr == NULL);
    nvfp4_tensor_destroy(xr);
    nvfp4_tensor_destroy(x24);
    nvfp4_linear_destroy(l);
  }
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(xbad); nvfp4_tensor_destroy(y);
  nvfp4_tensor_destroy(y2); nvfp4_tensor_destroy(dy); nvfp4_tensor_destroy(dybad);
  nvfp4_tensor_destroy(dx);
}


/* Two layers over one group, and the last rank in the other's step (it
** skipped one): its steps' agreements carry the layer's number, so every
** rank gets EMISMATCH naming both layers.  The same step's name alone let
** a column layer's forward pair with a row layer's rounds: one rank
** returned OK, the ranks stayed a round apart and hung in a later call;
** two layers alike completed with each other's data. */
static void test_two_layers_one_group (void) {
  const int64_t F = feat();
  const int last = mc_size - 1;
  nvfp4_linear_config ca = config(F, F, NVFP4_PARALLEL_COLUMN, 0);
  nvfp4_linear_config cb = config(F, F, NVFP4_PARALLEL_ROW, 0);
  nvfp4_linear *a = NULL, *b = NULL, *a2 = NULL;
  nvfp4_tensor *x = randn(SHAPE3(32, 1, F), NVFP4_BF16, 1 + mc_rank);
  nvfp4_tensor *xr = randn(SHAPE3(32, 1, F / mc_size), NVFP4_BF16, 2 + mc_rank);
  nvfp4_tensor *y = NULL, *dy = NULL, *dx = NULL;
  nvfp4_status st;
  char want[192];
  if (mc_size < 2) return;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &ca, &a));
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &cb, &b));
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &ca, &a2));
  st = mc_rank == last ? nvfp4_linear_forward(b, xr, &y) : nvfp4_linear_forward(a, x, &y);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  EXPECT(y == NULL);
  /* the layers' numbers on a group count from its first layer: read them
  ** from the message's pattern (other tests' layers came before) */
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "the ranks are in different calls on this comm: rank ");
  snprintf(want, sizeof want, "rank %d in linear_forward of layer #", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  /* two layers alike: the same */
  st = nvfp4_linear_forward(mc_rank == last ? a2 : a, x, &y);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  EXPECT(y == NULL);
  /* the group still works, in step: forward and backward of each */
  EXPECT_OK(nvfp4_linear_forward(a, x, &y));
  if (y != NULL) {
    dy = randn(nvfp4_tensor_shape(y), NVFP4_BF16, 5 + mc_rank);
    EXPECT_OK(nvfp4_linear_backward(a, dy, &dx, NULL, NULL));
    nvfp4_tensor_destroy(dy); nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(y);
    y = dx = NULL;
  }
  EXPECT_OK(nvfp4_linear_forward(b, xr, &y));
  EXPECT_OK(nvfp4_all_reduce_sum(world, xr, &dx));
  nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(y);
  nvfp4_linear_destroy(a); nvfp4_linear_destroy(b); nvfp4_linear_destroy(a2);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(xr);
}


/* keep_operands is each rank's own (nvfp4.h): a column+SP layer keeping
** its operands on rank 0 only still runs backward, with the same results
** as with keep_operands nowhere.  The saved input then had a rowwise copy
** on rank 0 only, and the wgrad re-gather of its columnwise copy refused
** the difference (EMISMATCH over "has rowwise" on every rank). */
static void test_keep_operands_per_rank (void) {
  const int64_t F = feat();
  nvfp4_linear_config c = config(F, F, NVFP4_PARALLEL_COLUMN, 1);
  nvfp4_linear *l = NULL, *l0 = NULL;
  nvfp4_tensor *x = randn(SHAPE3(32, 1, F), NVFP4_BF16, 1 + mc_rank), *dy = NULL;
  nvfp4_tensor *y = NULL, *dx = NULL, *dw = NULL, *y0 = NULL, *dx0 = NULL, *dw0 = NULL;
  if (mc_size < 2) return;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l0));
  c.keep_operands = mc_rank == 0;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_forward(l0, x, &y0));
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  if (y != NULL && y0 != NULL) {
    dy = randn(nvfp4_tensor_shape(y), NVFP4_BF16, 9 + mc_rank);
    EXPECT_OK(nvfp4_linear_backward(l0, dy, &dx0, &dw0, NULL));
    EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, &dw, NULL));
    if (dx != NULL && dx0 != NULL && dw != NULL && dw0 != NULL) {
      EXPECT(relerr(world, dx, dx0) == 0.0);
      EXPECT(relerr(world, dw, dw0) == 0.0);
    }
  }
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw);
  nvfp4_tensor_destroy(y0); nvfp4_tensor_destroy(dx0); nvfp4_tensor_destroy(dw0);
  nvfp4_linear_destroy(l); nvfp4_linear_destroy(l0);
}


/* Equal tensors (bytes, shape, dtype), or a failure naming the first difference. */
static void expect_same (const char *what, const nvfp4_tensor *a, const nvfp4_tensor *b) {
  int eq = 0;
  char why[256] = "";
  if (a == NULL || b == NULL) {
    EXPECT_MSG(0, "%s: a result is missing", what);
    return;
  }
  EXPECT_OK(nvfp4_tensor_equal(a, b, &eq, why, sizeof why));
  EXPECT_MSG(eq, "%s: %s", what, why);
}


/* A baseline recipe keeps plain operands, and nvfp4_linear_operand_get lends
** them until the layer's next forward (GRAD_OUTPUT: its next backward).  One
** passed back in as that step's input is an input like any other: read, and
** freed (as lent) when the step is done.  Forward freed the last pass's
** operands before it read x, and backward its kept grad_output before it
** read dy: a use after free (ASan), or a result from freed memory. */
static void test_lent_operand_as_input (void) {
  nvfp4_linear_config c = config(64, 64, NVFP4_PARALLEL_NONE, 0);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x = randn(SHAPE2(32, 64), NVFP4_BF16, 21), *dy = NULL, *wc = NULL;
  nvfp4_tensor *y = NULL, *y2 = NULL, *dx = NULL, *dx2 = NULL, *dw = NULL, *dw2 = NULL;
  const nvfp4_tensor *t = NULL;
  c.tp_group = NULL;
  c.recipe.kind = NVFP4_RECIPE_BF16;
  c.keep_operands = 1;
  c.bias = 1;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  if (l == NULL) return;
  /* forward's input: the last forward's FPROP_INPUT (x's copy) */
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_FPROP_INPUT, &t));
  if (t != NULL) EXPECT_OK(nvfp4_linear_forward(l, t, &y2));
  expect_same("forward of the lent fprop input", y2, y);
  nvfp4_tensor_destroy(y2);
  y2 = NULL;
  /* ... and its WEIGHT ([64, 64], a valid input too) */
  EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_WEIGHT, &t));
  if (t != NULL) EXPECT_OK(nvfp4_tensor_clone(t, &wc));
  if (t != NULL) EXPECT_OK(nvfp4_linear_forward(l, t, &y2));
  nvfp4_tensor_destroy(y);
  y = NULL;
  EXPECT_OK(nvfp4_linear_forward(l, wc, &y));
  expect_same("forward of the lent weight", y2, y);
  /* backward's grad_output: the last backward's GRAD_OUTPUT (dy's copy) */
  nvfp4_tensor_destroy(y);
  y = NULL;
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  dy = randn(SHAPE2(32, 64), NVFP4_BF16, 22);
  EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, &dw, NULL));
  EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_GRAD_OUTPUT, &t));
  if (t != NULL) EXPECT_OK(nvfp4_linear_backward(l, t, &dx2, &dw2, NULL));
  expect_same("dgrad of the lent grad_output", dx2, dx);
  expect_same("wgrad of the lent grad_output", dw2, dw);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy); nvfp4_tensor_destroy(wc);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(y2);
  nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dx2);
  nvfp4_tensor_destroy(dw); nvfp4_tensor_destroy(dw2);
  nvfp4_linear_destroy(l);
}


/* te.Linear's NVFP4 quantizer refuses an input whose M is not a multiple
** of 16 for any usage (create_tensor's check), so a frozen weight, whose
** input is quantized rowwise only, does not make M = 24 acceptable (the
** layer ran it); the bf16 baseline recipe quantizes nothing and takes it. */
static void test_frozen_weight_input_m24_refused (void) {
  nvfp4_linear_config c = config(64, 64 * mc_size, NVFP4_PARALLEL_COLUMN, 0);
  nvfp4_linear *l = NULL;
  nvfp4_tensor *x = randn(SHAPE3(24, 1, 64), NVFP4_BF16, 5), *y = NULL;
  c.frozen_weight = 1;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_ST(nvfp4_linear_forward(l, x, &y), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "M=24");
  EXPECT(y == NULL);
  nvfp4_linear_destroy(l);
  l = NULL;
  nvfp4_tensor_destroy(y);
  y = NULL;
  c.recipe.kind = NVFP4_RECIPE_BF16;
  EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
  EXPECT_OK(nvfp4_linear_forward(l, x, &y));
  nvfp4_linear_destroy(l);
  nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(y);
}


/* TE drops grad_output's columnwise usage only when "not use_bias and not
** requires_wgrad" (spec §2.4): with a frozen weight it keeps it when the
** bias is inside _Linear (column, none), not for row (bias added after the
** reduction, outside _Linear).  The layer dropped it for every frozen one. */
static void test_frozen_weight_grad_output_usages (void) {
  static const nvfp4_parallel par[2] = {NVFP4_PARALLEL_COLUMN, NVFP4_PARALLEL_ROW};
  int i, b;
  for (i = 0; i < 2; i++)
    for (b = 0; b < 2; b++) {
      int row = par[i] == NVFP4_PARALLEL_ROW;
      nvfp4_linear_config c = config(row ? 64 * mc_size : 64, row ? 64 : 64 * mc_size, par[i], 0);
      nvfp4_linear *l = NULL;
      nvfp4_tensor *x = randn(SHAPE3(32, 1, 64), NVFP4_BF16, 11), *y = NULL, *dy = NULL,
                   *dx = NULL, *db = NULL;
      const nvfp4_tensor *g = NULL;
      c.frozen_weight = 1;
      c.keep_operands = 1;
      c.bias = b;
      EXPECT_OK(nvfp4_linear_create(mc_ctx, &c, &l));
      EXPECT_OK(nvfp4_linear_forward(l, x, &y));
      if (y) dy = randn(nvfp4_tensor_shape(y), NVFP4_BF16, 12 + (uint64_t)mc_rank);
      EXPECT_OK(nvfp4_linear_backward(l, dy, &dx, NULL, &db));
      EXPECT_OK(nvfp4_linear_operand_get(l, NVFP4_LIN_GRAD_OUTPUT, &g));
      if (g) {
        EXPECT_EQ_I(nvfp4_tensor_has_rowwise(g), 1);
        EXPECT_MSG(nvfp4_tensor_has_columnwise(g) == (b && !row),
                   "%s, bias %d, frozen weight: grad_output columnwise %d, expected %d",
                   row ? "row" : "column", b, nvfp4_tensor_has_columnwise(g), b && !row);
      }
      nvfp4_linear_destroy(l);
      nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dy);
      nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(db);
    }
}


int main (int argc, char **argv) {
  mc_init(&argc, &argv);
  if (nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &world) != NVFP4_OK) MPI_Abort(MPI_COMM_WORLD, 99);
  RUN(test_config_and_usage_errors);
  RUN(test_one_rank_bad_arguments);
  RUN(test_create_agreement);
  RUN(test_two_layers_one_group);
  RUN(test_keep_operands_per_rank);
  RUN(test_lent_operand_as_input);
  RUN(test_frozen_weight_input_m24_refused);
  RUN(test_frozen_weight_grad_output_usages);
  RUN(test_row_sp_b1_nd_fails_flat2d_completes);
  RUN(test_row_sp_odd_b_nd_caught_by_shape_check);
  RUN(test_failed_backward_keeps_sr_offset);
  RUN(test_numerics_default_recipe);
  RUN(test_numerics_four_over_six);
  RUN(test_numerics_fp32_same_operands);
  RUN(test_tp1_equals_tp_world);
  RUN(test_bh01_column_sp_wgrad);
  RUN(test_bh22_empty_sp_shard);
  nvfp4_comm_destroy(world);
  return mc_finish();
}
