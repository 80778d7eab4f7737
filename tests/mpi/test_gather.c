/*
** test_gather.c -- the NVFP4 all-gather at 2 and 4 ranks
** (spec/sp-linear-and-gather.md §5-§7, §11; cases/field-cases.md).
**
** The central property: with the amax reduced over the group,
** gather(quantize(shard)) is byte-identical to quantize(gather(shard)):
** rowwise and columnwise data, scales (zero padding included) and amaxes.
** Every rank builds the full tensor from a seed, takes its shard, and
** compares the gathered result with its own single-rank quantize of the
** full tensor.
*/
#include "mpicheck.h"
#include "nvfp4_int.h"          /* amax_pending: what the gather left unread */

static nvfp4_comm *world, *tp2;   /* tp2: groups of 2 consecutive ranks */

#define ROUNDUP(x, m) (((x) + (m) - 1) / (m) * (m))


static nvfp4_tensor *full_randn (nvfp4_shape s, nvfp4_dtype dt, uint64_t seed) {
  nvfp4_tensor *t = NULL;
  EXPECT_OK(nvfp4_tensor_randn(mc_ctx, s, dt, seed, &t));
  return t;
}


/* Part r of parts along dim d (host round trip; the test may touch bytes). */
static nvfp4_tensor *slice (const nvfp4_tensor *full, int d, int r, int parts) {
  nvfp4_shape s = nvfp4_tensor_shape(full), o = s;
  size_t es = nvfp4_dtype_size(nvfp4_tensor_dtype(full));
  size_t outer = 1, inner = es, i, n = (size_t)nvfp4_shape_numel(s) * es;
  int k;
  char *h = (char *)malloc(n + 1), *p;
  nvfp4_tensor *t = NULL;
  for (k = 0; k < d; k++) outer *= (size_t)s.dim[k];
  for (k = d + 1; k < s.ndim; k++) inner *= (size_t)s.dim[k];
  o.dim[d] = s.dim[d] / parts;
  p = (char *)malloc(n / (size_t)parts + 1);
  EXPECT_OK(nvfp4_tensor_to_host(full, h, n));
  for (i = 0; i < outer; i++)
    memcpy(p + i * (size_t)o.dim[d] * inner,
           h + (i * (size_t)s.dim[d] + (size_t)r * (size_t)o.dim[d]) * inner,
           (size_t)o.dim[d] * inner);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, o, nvfp4_tensor_dtype(full), p,
                                   n / (size_t)parts, &t));
  free(h);
  free(p);
  return t;
}


static uint8_t *rd (const nvfp4_tensor *t, nvfp4_buffer b, size_t *n) {
  size_t m = (size_t)nvfp4_shape_numel(nvfp4_tensor_buffer_shape(t, b));
  uint8_t *p = (uint8_t *)malloc(m + 1);
  EXPECT_OK(nvfp4_tensor_buffer_read(t, b, p, m));
  if (n) *n = m;
  return p;
}


static const char *const bname[] = {
  "rowwise data", "rowwise scale", "columnwise data", "columnwise scale"
};


/* Shapes, bytes and amaxes of every usage of ref, identical in got; only
** the buffers in mask (bit b: nvfp4_buffer b). */
static void expect_same_bufs (const nvfp4_tensor *got, const nvfp4_tensor *ref,
                              int mask, const char *what) {
  char msg[256];
  int b;
  if (got == NULL || ref == NULL) {
    EXPECT_MSG(0, "%s: missing tensor", what);
    return;
  }
  EXPECT_SHAPE(nvfp4_tensor_shape(got), nvfp4_tensor_shape(ref));
  EXPECT_EQ_I(nvfp4_tensor_has_rowwise(got), nvfp4_tensor_has_rowwise(ref));
  EXPECT_EQ_I(nvfp4_tensor_has_columnwise(got), nvfp4_tensor_has_columnwise(ref));
  for (b = 0; b < 4; b++) {
    nvfp4_shape gs = nvfp4_tensor_buffer_shape(got, (nvfp4_buffer)b);
    nvfp4_shape rs = nvfp4_tensor_buffer_shape(ref, (nvfp4_buffer)b);
    size_t n;
    uint8_t *x, *y;
    if (rs.ndim == 0 || !(mask & (1 << b))) continue;
    snprintf(msg, sizeof msg, "%s: %s", what, bname[b]);
    if (!nvfp4_shape_equal(gs, rs)) {
      EXPECT_SHAPE(gs, rs);
      continue;
    }
    x = rd(got, (nvfp4_buffer)b, &n);
    y = rd(ref, (nvfp4_buffer)b, NULL);
    EXPECT_BYTES(x, y, n, msg);
    free(x);
    free(y);
  }
  for (b = 0; b < 2; b++) {
    float ag = -1, ar = -2;
    if (b == 0 ? !nvfp4_tensor_has_rowwise(ref) : !nvfp4_tensor_has_columnwise(ref)) continue;
    EXPECT_OK(nvfp4_tensor_amax(got, b, &ag));
    EXPECT_OK(nvfp4_tensor_amax(ref, b, &ar));
    EXPECT_MSG(ag == ar, "%s: %s amax %g, expected %g", what, b ? "columnwise" : "rowwise",
               (double)ag, (double)ar);
  }
}


static void expect_same_fp4 (const nvfp4_tensor *got, const nvfp4_tensor *ref,
                             const char *what) {
  expect_same_bufs(got, ref, 0xF, what);
}


static nvfp4_tensor *quant (const nvfp4_tensor *x, const nvfp4_qopts *o) {
  nvfp4_tensor *q = NULL;
  EXPECT_OK(nvfp4_quantize(mc_ctx, x, o, &q));
  return q;
}


/* mode: RHT (1) or 4over6 (2; + 2D 4, + MSE 8). */
enum { M_RHT = 1, M_FO6 = 2, M_2D = 4, M_MSE = 8 };

static nvfp4_qopts qopts (int row, int col, int mode, nvfp4_comm *group) {
  nvfp4_qopts o;
  memset(&o, 0, sizeof o);
  o.rowwise = (unsigned)row;
  o.columnwise = (unsigned)col;
  o.rht = (mode & M_RHT) != 0;
  o.four_over_six = (mode & M_FO6) != 0;
  o.two_d = (mode & M_2D) != 0;
  o.four_over_six_mse = (mode & M_MSE) != 0;
  o.amax_group = group;
  return o;
}


static nvfp4_gather_opts gopts_plain (const nvfp4_qopts *q, nvfp4_cw_rule rule) {
  nvfp4_gather_opts g;
  memset(&g, 0, sizeof g);
  g.quant = q;
  g.rule = rule;
  return g;
}


static nvfp4_gather_opts gopts_fp4 (int row, int col) {
  nvfp4_gather_opts g;
  memset(&g, 0, sizeof g);
  g.rowwise = (unsigned)row;
  g.columnwise = (unsigned)col;
  return g;
}


/* What TE does with FP4 shards lacking a wanted usage: each dequantized to
** dt, gathered in high precision, quantized with o (NULL where a step
** failed, which EXPECT_OK reports). */
static nvfp4_tensor *requant_ref (const nvfp4_tensor *q, nvfp4_dtype dt, const nvfp4_qopts *o) {
  nvfp4_tensor *d = NULL, *all = NULL, *ref = NULL;
  EXPECT_OK(nvfp4_dequantize(mc_ctx, q, dt, &d));
  if (d != NULL) EXPECT_OK(nvfp4_all_gather_plain(world, d, &all));
  if (all != NULL) ref = quant(all, o);
  nvfp4_tensor_destroy(d);
  nvfp4_tensor_destroy(all);
  return ref;
}


/* Buffer `which` of a and b differs (two references a case must tell
** apart). */
static void expect_differ (const nvfp4_tensor *a, const nvfp4_tensor *b, nvfp4_buffer which,
                           const char *what) {
  size_t n;
  uint8_t *x = rd(a, which, &n), *y = rd(b, which, NULL);
  EXPECT_MSG(memcmp(x, y, n) != 0, "%s: the two references have the same bytes", what);
  free(x); free(y);
}


/* Both input paths for one global shape, against quantize(full). */
static void check_both_paths (nvfp4_comm *c, nvfp4_shape gshape, nvfp4_dtype dt,
                              int mode, uint64_t seed) {
  int P = nvfp4_comm_size(c), r = nvfp4_comm_rank(c);
  nvfp4_tensor *full = full_randn(gshape, dt, seed);
  nvfp4_tensor *shard = slice(full, 0, r, P);
  nvfp4_qopts o = qopts(1, 1, mode, NULL), og = qopts(1, 1, mode, c);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D), gq = gopts_fp4(1, 1);
  char mname[48];
  nvfp4_tensor *ref = quant(full, &o), *g = NULL, *qs, *g2 = NULL;
  char what[160], sb[64];
  nvfp4_shape_format(gshape, sb, sizeof sb);
  snprintf(mname, sizeof mname, "%s%s%s%s", mode & M_RHT ? " rht" : "",
           mode & M_FO6 ? " 4over6" : "", mode & M_2D ? " 2d" : "", mode & M_MSE ? " mse" : "");
  snprintf(what, sizeof what, "plain %s %s%s", sb, nvfp4_dtype_name(dt), mname);
  EXPECT_OK(nvfp4_all_gather(c, shard, &gp, &g));
  expect_same_fp4(g, ref, what);
  qs = quant(shard, &og);
  snprintf(what, sizeof what, "quantized %s %s%s", sb, nvfp4_dtype_name(dt), mname);
  EXPECT_OK(nvfp4_all_gather(c, qs, &gq, &g2));
  expect_same_fp4(g2, ref, what);
  {   /* gopts NULL: the defaults, for an fp4 shard its own usages (here both) */
    nvfp4_tensor *g3 = NULL;
    snprintf(what, sizeof what, "quantized %s %s%s, gopts NULL", sb, nvfp4_dtype_name(dt), mname);
    EXPECT_OK(nvfp4_all_gather(c, qs, NULL, &g3));
    expect_same_fp4(g3, ref, what);
    nvfp4_tensor_destroy(g3);
  }
  nvfp4_tensor_destroy(full);
  nvfp4_tensor_destroy(shard);
  nvfp4_tensor_destroy(ref);
  nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(qs);
  nvfp4_tensor_destroy(g2);
}


/* [S, B, H] with B in 1..5, S/TP = 48 (a multiple of 16, not of 128), plus
** 2-D and 4-D, fp32 and bf16 with RHT on the columnwise copy, and 4over6
** (1D; 2D with MSE). */
static void test_gather_equals_full_quantize (void) {
  int P = mc_size, b;
  for (b = 1; b <= 5; b++) {
    check_both_paths(world, SHAPE3(48 * P, b, 64), NVFP4_F32, 0, 10 + (uint64_t)b);
    check_both_paths(world, SHAPE3(48 * P, b, 64), NVFP4_BF16, 1, 20 + (uint64_t)b);
  }
  check_both_paths(world, SHAPE2(48 * P, 96), NVFP4_F32, 0, 31);
  check_both_paths(world, SHAPE2(48 * P, 96), NVFP4_BF16, 1, 32);
  check_both_paths(world, SHAPE4(16 * P, 3, 2, 32), NVFP4_F32, 0, 33);
  check_both_paths(world, SHAPE4(16 * P, 3, 2, 32), NVFP4_BF16, 1, 34);
  /* 4over6: per-block (per-tile) choices do not cross shards */
  check_both_paths(world, SHAPE3(48 * P, 3, 64), NVFP4_BF16, M_FO6, 35);
  check_both_paths(world, SHAPE2(48 * P, 96), NVFP4_F32, M_FO6 | M_2D | M_MSE, 36);
}


/* A quantize with amax_group leaves the reduced amax where the amax pass
** wrote it (on the CUDA backend over NCCL: the device, reduced there): the tensor, its clone,
** its dequantize (rowwise) and its GEMM (columnwise) taken before anyone reads the amax equal
** those of a quantize given the group's amax (read from quantize(full)),
** byte for byte; then the amaxes read back are the group's. */
static void test_amax_group_kept_until_read (void) {
  int P = mc_size, r = mc_rank, mode;
  for (mode = 0; mode <= M_RHT; mode += M_RHT) {
    nvfp4_tensor *full = full_randn(SHAPE3(48 * P, 2, 64), NVFP4_BF16, 40 + (uint64_t)mode);
    nvfp4_tensor *shard = slice(full, 0, r, P);
    nvfp4_qopts o = qopts(1, 1, mode, NULL), og = qopts(1, 1, mode, world), given = o;
    nvfp4_tensor *qf = quant(full, &o), *q = quant(shard, &og), *c = NULL, *ref;
    nvfp4_tensor *dq = NULL, *dr = NULL, *mq = NULL, *mr = NULL;
    const char *what = mode ? "amax_group rht" : "amax_group";
    int eq = -1;
    char why[160];
    EXPECT_OK(nvfp4_tensor_clone(q, &c));
    EXPECT_OK(nvfp4_dequantize(mc_ctx, q, NVFP4_F32, &dq));
    EXPECT_OK(nvfp4_gemm(mc_ctx, q, NVFP4_COLUMNWISE, q, NVFP4_COLUMNWISE, NULL, NVFP4_F32, &mq));
    given.has_amax = 1;
    EXPECT_OK(nvfp4_tensor_amax(qf, 0, &given.amax[0]));
    EXPECT_OK(nvfp4_tensor_amax(qf, 1, &given.amax[1]));
    EXPECT_MSG(given.amax[0] > 0.0f && (mode ? given.amax[1] != given.amax[0]
                                             : given.amax[1] == given.amax[0]),
               "%s: the full tensor's amaxes %g, %g", what, (double)given.amax[0],
               (double)given.amax[1]);
    ref = quant(shard, &given);
    EXPECT_OK(nvfp4_dequantize(mc_ctx, ref, NVFP4_F32, &dr));
    EXPECT_OK(nvfp4_gemm(mc_ctx, ref, NVFP4_COLUMNWISE, ref, NVFP4_COLUMNWISE, NULL, NVFP4_F32, &mr));
    EXPECT_OK(nvfp4_tensor_equal(dq, dr, &eq, why, sizeof why));
    EXPECT_MSG(eq == 1, "%s: dequantize: %s", what, why);
    EXPECT_OK(nvfp4_tensor_equal(mq, mr, &eq, why, sizeof why));
    EXPECT_MSG(eq == 1, "%s: gemm: %s", what, why);
    expect_same_fp4(c, ref, what);
    expect_same_fp4(q, ref, what);
    nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(shard); nvfp4_tensor_destroy(qf);
    nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(c); nvfp4_tensor_destroy(ref);
    nvfp4_tensor_destroy(dq); nvfp4_tensor_destroy(dr);
    nvfp4_tensor_destroy(mq); nvfp4_tensor_destroy(mr);
  }
}


/* Ranks of one amax_group may each give an amax or have it computed: one
** reduction either way (on NCCL every rank reduces a device buffer, a given
** amax copied there), whose result every rank's tensor carries. */
static void test_amax_group_mixed (void) {
  int k, mode;
  for (mode = 0; mode <= M_RHT; mode += M_RHT)
    for (k = 0; k < 2; k++) {     /* rank 0 gives the largest pair, then a tiny one */
      nvfp4_tensor *x = full_randn(SHAPE3(16, 2, 64), NVFP4_BF16, 60 + (uint64_t)mc_rank);
      nvfp4_qopts og = qopts(1, 1, mode, world), ref = qopts(1, 1, mode, NULL);
      nvfp4_tensor *q, *r;
      float a0 = -1, a1 = -1, lo[2], hi[2];
      const char *what = mode ? (k ? "mixed amax_group rht, tiny given" : "mixed amax_group rht")
                              : (k ? "mixed amax_group, tiny given" : "mixed amax_group");
      if (mc_rank == 0) {
        og.has_amax = 1;
        og.amax[0] = k ? 1e-3f : 64.0f;
        og.amax[1] = k ? 2e-3f : 96.0f;
      }
      q = quant(x, &og);
      EXPECT_OK(nvfp4_tensor_amax(q, 0, &a0));
      EXPECT_OK(nvfp4_tensor_amax(q, 1, &a1));
      /* without RHT a computed pair is (a, a): the MAX with a given (64, 96)
      ** is (64, 96) there too */
      if (k == 0) EXPECT_MSG(a0 == 64.0f && a1 == 96.0f, "%s: amaxes %g %g, given 64 96 on "
                             "rank 0", what, (double)a0, (double)a1);
      else EXPECT_MSG(a0 > 1.0f && a1 > 1.0f && (mode ? a0 != a1 : a0 == a1),
                      "%s: amaxes %g %g", what, (double)a0, (double)a1);
      lo[0] = hi[0] = a0;       /* the same pair on every rank */
      lo[1] = hi[1] = a1;
      MPI_Allreduce(MPI_IN_PLACE, lo, 2, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, hi, 2, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
      EXPECT_MSG(lo[0] == hi[0] && lo[1] == hi[1], "%s: ranks hold %g..%g, %g..%g", what,
                 (double)lo[0], (double)hi[0], (double)lo[1], (double)hi[1]);
      /* the bytes of a quantize given the group's pair */
      ref.has_amax = 1;
      ref.amax[0] = a0;
      ref.amax[1] = a1;
      r = quant(x, &ref);
      expect_same_fp4(q, r, what);
      nvfp4_tensor_destroy(q);
      nvfp4_tensor_destroy(r);
      nvfp4_tensor_destroy(x);
    }
}


/* Rank-tagged payloads (BH-23): rank r's shard is bf16 [16,1,64] filled
** with r+1; its scale rows land at r*M_local and rows [16r, 16r+16)
** dequantize to r+1 (nearest integer), exactly as quantize(full) does. */
static void test_rank_order (void) {
  int P = mc_size, r, i;
  int64_t ml = 16, K = 64;
  size_t n = (size_t)(ml * K), sc = 4, nl;
  uint16_t *h = (uint16_t *)malloc(n * 2 * (size_t)P);
  union { uint32_t u; float f; } v;
  nvfp4_tensor *x, *full, *g = NULL, *q, *ref, *dg = NULL, *dr = NULL;
  nvfp4_qopts o = qopts(1, 0, 0, NULL), og = qopts(1, 0, 0, world);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D);
  uint8_t *ls, *all, *gs;
  float *deq, *deqr;
  for (r = 0; r < P; r++)
    for (i = 0; i < (int)n; i++) { v.f = (float)(r + 1); h[(size_t)r * n + (size_t)i] = (uint16_t)(v.u >> 16); }
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE3(ml, 1, K), NVFP4_BF16, h + (size_t)mc_rank * n, n * 2, &x));
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE3(ml * P, 1, K), NVFP4_BF16, h, n * 2 * (size_t)P, &full));
  EXPECT_OK(nvfp4_all_gather(world, x, &gp, &g));
  ref = quant(full, &o);
  expect_same_fp4(g, ref, "rank-tagged");
  /* the local scale rows [0, M_l) of every rank, in rank order */
  q = quant(x, &og);
  ls = rd(q, NVFP4_ROWWISE_SCALE, &nl);
  all = (uint8_t *)malloc((size_t)ml * sc * (size_t)P);
  MPI_Allgather(ls, (int)((size_t)ml * sc), MPI_BYTE, all, (int)((size_t)ml * sc), MPI_BYTE, MPI_COMM_WORLD);
  gs = rd(g, NVFP4_ROWWISE_SCALE, NULL);
  EXPECT_BYTES(gs, all, (size_t)ml * sc * (size_t)P, "rowwise scale rows of rank r at r*M_local");
  for (i = (int)((size_t)ml * sc * (size_t)P); i < 128 * 4; i++) EXPECT_EQ_I(gs[i], 0);
  /* dequantize: rows of rank r give r+1 */
  EXPECT_OK(nvfp4_dequantize(mc_ctx, g, NVFP4_F32, &dg));
  EXPECT_OK(nvfp4_dequantize(mc_ctx, ref, NVFP4_F32, &dr));
  deq = (float *)malloc(n * (size_t)P * sizeof *deq);
  deqr = (float *)malloc(n * (size_t)P * sizeof *deqr);
  EXPECT_OK(nvfp4_tensor_to_host(dg, deq, n * (size_t)P * sizeof *deq));
  EXPECT_OK(nvfp4_tensor_to_host(dr, deqr, n * (size_t)P * sizeof *deqr));
  EXPECT_BYTES(deq, deqr, n * (size_t)P * sizeof *deq, "dequantized gather vs full");
  for (r = 0; r < P; r++)
    for (i = 0; i < (int)n; i++) {
      float d = deq[(size_t)r * n + (size_t)i];
      if (!(d > (float)r + 0.5f && d < (float)r + 1.5f)) {
        EXPECT_MSG(0, "row %lld (rank %d's block) dequantizes to %g, expected about %d",
                   (long long)((size_t)r * (size_t)ml + (size_t)i / (size_t)K), r, (double)d, r + 1);
        break;
      }
    }
  free(h); free(ls); free(all); free(gs); free(deq); free(deqr);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(dg);
  nvfp4_tensor_destroy(dr);
}


/* §7.2 full-size rows and BH-25 at full size: pure shape functions. */
static void test_shape_rules_full_size (void) {
  nvfp4_cw_bookkeeping a, b;
  nvfp4_shape l, g;
  a = nvfp4_cw_rule_apply(NVFP4_CW_ND, SHAPE3(2048, 1, 8192));       /* (4096,1,8192,2) */
  b = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, SHAPE3(2048, 1, 8192));
  EXPECT_EQ_I(a.scale_width, 0);
  EXPECT_SHAPE(a.in_shape_t, SHAPE3(8192, 2048, 0));
  EXPECT_EQ_I(b.scale_width, 128);
  EXPECT_SHAPE(b.in_shape_t, SHAPE2(8192, 1024));
  a = nvfp4_cw_rule_apply(NVFP4_CW_ND, SHAPE3(2048, 3, 8192));       /* (4096,3,8192,2) */
  b = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, SHAPE3(2048, 3, 8192));
  EXPECT_EQ_I(a.scale_width, 256);
  EXPECT_EQ_I(a.packed_cols, 2048);
  EXPECT_EQ_I(b.scale_width, 384);
  /* the gathered scale each rule produces, [8192, ru(TP*U, 4)] (§7.2): 512
  ** under ND, silently narrower than FLAT2D's (and quantize(full)'s) 768 */
  EXPECT_EQ_I(ROUNDUP(2 * a.scale_width, 4), 512);
  EXPECT_EQ_I(ROUNDUP(2 * b.scale_width, 4), 768);
  EXPECT_SHAPE(nvfp4_columnwise_scale_shape(SHAPE3(4096, 3, 8192)), SHAPE2(8192, 768));
  a = nvfp4_cw_rule_apply(NVFP4_CW_ND, SHAPE3(2048, 2, 8192));       /* (4096,2,8192,2) */
  b = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, SHAPE3(2048, 2, 8192));
  EXPECT_EQ_I(a.scale_width, 256);
  EXPECT_EQ_I(b.scale_width, 256);
  a = nvfp4_cw_rule_apply(NVFP4_CW_ND, SHAPE3(2048, 1, 8192));       /* (8192,1,8192,4) */
  EXPECT_EQ_I(a.scale_width, 0);
  /* BH-25: S=31936, B=1, H=3072, TP=4 -> M_l = 7984 (% 128 = 48) */
  l = SHAPE3(7984, 1, 3072);
  g = SHAPE3(31936, 1, 3072);
  EXPECT_SHAPE(nvfp4_rowwise_data_shape(l), SHAPE3(7984, 1, 1536));
  EXPECT_SHAPE(nvfp4_rowwise_scale_shape(l), SHAPE2(8064, 192));
  EXPECT_SHAPE(nvfp4_columnwise_data_shape(l), SHAPE2(3072, 3992));
  EXPECT_SHAPE(nvfp4_columnwise_scale_shape(l), SHAPE2(3072, 500));
  EXPECT_EQ_I(nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, l).scale_width, 499);
  EXPECT_SHAPE(nvfp4_rowwise_scale_shape(g), SHAPE2(32000, 192));
  EXPECT_SHAPE(nvfp4_columnwise_data_shape(g), SHAPE2(3072, 15968));
  EXPECT_SHAPE(nvfp4_columnwise_scale_shape(g), SHAPE2(3072, 1996));
}


/* §7 rows at test size, both rules, in TP-2 groups. */
static void test_shape_table_tp2 (void) {
  int gr = nvfp4_comm_rank(tp2);
  nvfp4_qopts o = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gf = gopts_plain(&o, NVFP4_CW_FLAT2D), gn = gopts_plain(&o, NVFP4_CW_ND);
  nvfp4_tensor *full, *x, *ref, *g = NULL, *t = NULL;
  nvfp4_handle *h = NULL;
  char msg1[512];

  /* (128,1,256,2): flat2d fine; nd fails in the scale swap on every rank */
  full = full_randn(SHAPE3(128, 1, 256), NVFP4_F32, 41);
  x = slice(full, 0, gr, 2);
  ref = quant(full, &o);
  EXPECT_OK(nvfp4_all_gather(tp2, x, &gf, &g));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_DATA), SHAPE3(128, 1, 128));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(128, 16));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(256, 64));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(256, 8));
  expect_same_fp4(g, ref, "(128,1,256,2) flat2d");
  nvfp4_tensor_destroy(g);
  g = NULL;
  EXPECT_ST(nvfp4_all_gather(tp2, x, &gn, &g), NVFP4_EINVAL);
  EXPECT(g == NULL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "Input is not allocated");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rule nd");
  strncpy(msg1, nvfp4_last_error(mc_ctx), sizeof msg1 - 1);
  msg1[sizeof msg1 - 1] = '\0';
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, msg1));
  /* async: the collectives succeed, the finish fails, once, every wait */
  EXPECT_OK(nvfp4_all_gather_async(tp2, x, &gn, &h));
  EXPECT_ST(nvfp4_handle_wait(h, &t), NVFP4_EINVAL);
  EXPECT(t == NULL);
  EXPECT_ST(nvfp4_handle_wait(h, &t), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "Input is not allocated");
  EXPECT_EQ_I(nvfp4_handle_finish_count(h), 1);
  t = (nvfp4_tensor *)0x1;                   /* take clears it too (it left it as it was) */
  EXPECT_ST(nvfp4_handle_take(h, &t), NVFP4_EINVAL);
  EXPECT(t == NULL);
  nvfp4_handle_destroy(h);
  /* and the group still works */
  EXPECT_OK(nvfp4_comm_barrier(tp2));
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(ref);

  /* (64,5,64,2): flat2d scale [128,20]; nd runs but gives [128,16] */
  full = full_randn(SHAPE3(64, 5, 64), NVFP4_F32, 42);
  x = slice(full, 0, gr, 2);
  ref = quant(full, &o);
  EXPECT_OK(nvfp4_all_gather(tp2, x, &gf, &g));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 20));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 160));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(384, 4));
  expect_same_fp4(g, ref, "(64,5,64,2) flat2d");
  nvfp4_tensor_destroy(g);
  g = NULL;
  EXPECT_OK(nvfp4_all_gather(tp2, x, &gn, &g));
  if (g != NULL) {
    nvfp4_shape cs = nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE);
    EXPECT_SHAPE(cs, SHAPE2(128, 16));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 160));
    if (nvfp4_shape_equal(cs, SHAPE2(128, 16))) {
      /* data right; scale = the first U=8 of each rank's 10 real columns */
      uint8_t *gd = rd(g, NVFP4_COLUMNWISE_DATA, NULL), *rdd = rd(ref, NVFP4_COLUMNWISE_DATA, NULL);
      uint8_t *gs = rd(g, NVFP4_COLUMNWISE_SCALE, NULL), *rs = rd(ref, NVFP4_COLUMNWISE_SCALE, NULL);
      int k, r, j, bad = 0;
      EXPECT_BYTES(gd, rdd, 64 * 160, "(64,5,64,2) nd columnwise data");
      for (k = 0; k < 128 && !bad; k++)
        for (r = 0; r < 2; r++)
          for (j = 0; j < 8; j++) {
            int want = k < 64 ? rs[k * 20 + r * 10 + j] : 0;
            if (gs[k * 16 + r * 8 + j] != want) {
              EXPECT_MSG(0, "nd scale [%d][%d] = 0x%02x, expected 0x%02x", k, r * 8 + j,
                         gs[k * 16 + r * 8 + j], want);
              bad = 1;
              break;
            }
          }
      free(gd); free(rdd); free(gs); free(rs);
    }
    expect_same_bufs(g, ref, 0x3, "(64,5,64,2) nd rowwise");
  }
  nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(ref);
}


/* World 4 split into two TP-2 groups: each gathers its own data. */
static void test_groups (void) {
  int grp = mc_rank / 2, gr;
  nvfp4_qopts o = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D);
  nvfp4_tensor *mine, *other, *x, *ref, *refo, *g = NULL;
  uint8_t *a, *b;
  size_t n;
  SKIP_IF(mc_size != 4, "needs 4 ranks for two TP-2 groups");
  gr = nvfp4_comm_rank(tp2);
  EXPECT_EQ_I(nvfp4_comm_size(tp2), 2);
  mine = full_randn(SHAPE3(96, 2, 64), NVFP4_F32, 500 + (uint64_t)grp);
  other = full_randn(SHAPE3(96, 2, 64), NVFP4_F32, 500 + (uint64_t)(1 - grp));
  x = slice(mine, 0, gr, 2);
  ref = quant(mine, &o);
  refo = quant(other, &o);
  EXPECT_OK(nvfp4_all_gather(tp2, x, &gp, &g));
  expect_same_fp4(g, ref, "own group");
  a = rd(g, NVFP4_ROWWISE_DATA, &n);
  b = rd(refo, NVFP4_ROWWISE_DATA, NULL);
  EXPECT(memcmp(a, b, n) != 0);
  free(a); free(b);
  nvfp4_tensor_destroy(mine); nvfp4_tensor_destroy(other); nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(refo); nvfp4_tensor_destroy(g);
}


/* High-precision fallback: BH-03 ([48,1,64] at TP=4, M_l=12) and M_l=8 at
** TP=2; the FP4 rowwise-only variant; and the global failure. */
static void test_fallback (void) {
  int P = mc_size;
  int64_t S = P == 4 ? 48 : 16;            /* M_l = 12 or 8 */
  nvfp4_qopts o = qopts(1, 1, 0, NULL), orht = qopts(1, 1, 1, NULL);
  nvfp4_qopts orow = qopts(1, 0, 0, world);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D), gr = gopts_plain(&orht, NVFP4_CW_FLAT2D);
  nvfp4_gather_opts gq = gopts_fp4(1, 1);
  nvfp4_tensor *full, *x, *ref, *g = NULL, *q, *ref2, *t = NULL;
  nvfp4_handle *h = NULL;
  char msg[512];

  full = full_randn(SHAPE3(S, 1, 64), NVFP4_BF16, 61);
  x = slice(full, 0, mc_rank, P);
  ref = quant(full, &o);
  EXPECT_OK(nvfp4_all_gather(world, x, &gp, &g));
  expect_same_fp4(g, ref, "fallback");
  if (P == 4) {                            /* BH-03's stated shapes */
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_DATA), SHAPE3(48, 1, 32));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(128, 4));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 24));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 4));
  }
  {   /* dequantizing the result gives bf16, the input's dtype, of its shape */
    nvfp4_tensor *d = NULL, *dr = NULL;
    size_t n = (size_t)S * 64 * 2;
    uint8_t *a = (uint8_t *)malloc(n), *b = (uint8_t *)malloc(n);
    EXPECT_OK(nvfp4_dequantize(mc_ctx, g, NVFP4_BF16, &d));
    EXPECT_OK(nvfp4_dequantize(mc_ctx, ref, NVFP4_BF16, &dr));
    if (d && dr) {
      EXPECT_EQ_I(nvfp4_tensor_dtype(d), NVFP4_BF16);
      EXPECT_SHAPE(nvfp4_tensor_shape(d), SHAPE3(S, 1, 64));
      EXPECT_OK(nvfp4_tensor_to_host(d, a, n));
      EXPECT_OK(nvfp4_tensor_to_host(dr, b, n));
      EXPECT_BYTES(a, b, n, "fallback dequantized to bf16 vs quantize(full)'s");
    }
    free(a); free(b);
    nvfp4_tensor_destroy(d); nvfp4_tensor_destroy(dr);
  }
  nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(ref);
  /* with RHT on the columnwise copy */
  ref = quant(full, &orht);
  EXPECT_OK(nvfp4_all_gather(world, x, &gr, &g));
  expect_same_fp4(g, ref, "fallback rht");
  nvfp4_tensor_destroy(g);
  /* async: synchronous inside, the handle still finishes once */
  EXPECT_OK(nvfp4_all_gather_async(world, x, &gr, &h));
  EXPECT_OK(nvfp4_handle_wait(h, &t));
  EXPECT_OK(nvfp4_handle_wait(h, &t));
  expect_same_fp4(t, ref, "fallback async");
  EXPECT_EQ_I(nvfp4_handle_finish_count(h), 1);
  nvfp4_handle_destroy(h);
  nvfp4_tensor_destroy(ref);
  /* options that differ per rank: a given amax (the group's MAX, as the
  ** shards' path reduces it) and the SR seed and offset (rank 0's): every
  ** rank holds the same bytes (each quantized with its own before) */
  {
    nvfp4_qopts oa = qopts(1, 1, 0, NULL), ea;
    nvfp4_gather_opts ga;
    oa.has_amax = 1;
    oa.amax[0] = oa.amax[1] = 10.0f + (float)mc_rank;
    oa.sr = 1;
    oa.sr_seed = 100 + (uint64_t)mc_rank;
    oa.sr_offset = 7 * (uint64_t)mc_rank;
    ea = oa;
    ea.amax[0] = ea.amax[1] = 10.0f + (float)(P - 1);
    ea.sr_seed = 100;
    ea.sr_offset = 0;
    ga = gopts_plain(&oa, NVFP4_CW_FLAT2D);
    ref = quant(full, &ea);
    EXPECT_OK(nvfp4_all_gather(world, x, &ga, &g));
    expect_same_fp4(g, ref, "fallback with a given amax and an SR seed per rank");
    nvfp4_tensor_destroy(g);
    nvfp4_tensor_destroy(ref);
  }

  /* variant: the shard was quantized rowwise-only; columnwise is wanted.
  ** As TE, it is dequantized to the dtype it stands for (bf16 here: it was
  ** dequantized to fp32, whose requantized bytes differ), gathered and
  ** quantized; the result stands for bf16 too */
  q = quant(x, &orow);
  EXPECT_EQ_I(nvfp4_tensor_nominal_dtype(q), NVFP4_BF16);
  EXPECT_OK(nvfp4_all_gather(world, q, &gq, &g));
  ref2 = requant_ref(q, NVFP4_BF16, &o);
  expect_same_fp4(g, ref2, "fallback from rowwise-only fp4 (dequantized to bf16)");
  EXPECT_EQ_I(nvfp4_tensor_nominal_dtype(g), NVFP4_BF16);
  nvfp4_tensor_destroy(g); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(ref2);
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);

  /* global M = 24 is not a multiple of 16 either: clear error everywhere */
  full = full_randn(SHAPE3(24, 1, 64), NVFP4_BF16, 62);
  x = slice(full, 0, mc_rank, P);
  g = NULL;
  EXPECT_ST(nvfp4_all_gather(world, x, &gp, &g), NVFP4_EINVAL);
  EXPECT(g == NULL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "not quantizable either");
  /* the rule named as the gather's (quantize itself takes M % 16 != 0 rowwise) */
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "the gather, as TE's, wants both multiples of 16 for any usage");
  strncpy(msg, nvfp4_last_error(mc_ctx), sizeof msg - 1);
  msg[sizeof msg - 1] = '\0';
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, msg));
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);
}


/* An FP4 shard lacking a wanted usage is dequantized and requantized with
** the group's amax (TE does the same): the result equals quantizing the
** gathered dequantized shards.  Columnwise-only in, rowwise wanted: EINVAL
** on every rank (nothing to dequantize from). */
static void test_requantize (void) {
  int P = mc_size;
  nvfp4_qopts o = qopts(1, 1, 0, NULL), orow = qopts(1, 0, 0, world), ocol = qopts(0, 1, 0, world);
  nvfp4_gather_opts gq = gopts_fp4(1, 1), gr = gopts_fp4(1, 0);
  nvfp4_tensor *full = full_randn(SHAPE3(48 * P, 2, 64), NVFP4_F32, 101);
  nvfp4_tensor *x = slice(full, 0, mc_rank, P), *q = quant(x, &orow), *qc = quant(x, &ocol);
  nvfp4_tensor *g = NULL, *ref = NULL;
  EXPECT_OK(nvfp4_all_gather(world, q, &gq, &g));
  ref = requant_ref(q, NVFP4_F32, &o);
  expect_same_fp4(g, ref, "requantized rowwise-only shard");
  EXPECT_EQ_I(nvfp4_tensor_nominal_dtype(g), NVFP4_F32);
  nvfp4_tensor_destroy(g);
  g = NULL;
  {   /* requantized with the RHT: dequantized to bf16 (the RHT takes bf16 only),
      ** the result still stands for the shards' fp32 */
    nvfp4_qopts orht = qopts(1, 1, M_RHT, NULL);
    nvfp4_gather_opts gh = gopts_fp4(1, 1);
    nvfp4_tensor *refh = NULL;
    gh.quant = &orht;
    EXPECT_OK(nvfp4_all_gather(world, q, &gh, &g));
    refh = requant_ref(q, NVFP4_BF16, &orht);
    expect_same_fp4(g, refh, "rowwise-only fp32 shard requantized with the RHT");
    EXPECT_EQ_I(nvfp4_tensor_nominal_dtype(g), NVFP4_F32);
    nvfp4_tensor_destroy(g);
    g = NULL;
    nvfp4_tensor_destroy(refh);
  }
  {   /* BH-03's main path: a quantizable bf16 shard (M_l = 96), rowwise-only,
      ** requantized without the RHT: dequantized to bf16, its nominal dtype,
      ** not fp32 (whose requantized bytes differ, checked so that the case
      ** can tell the two apart) */
    nvfp4_tensor *xb = NULL, *qb, *refb, *ref32;
    EXPECT_OK(nvfp4_tensor_convert(x, NVFP4_BF16, &xb));
    qb = quant(xb, &orow);
    EXPECT_OK(nvfp4_all_gather(world, qb, &gq, &g));
    refb = requant_ref(qb, NVFP4_BF16, &o);
    ref32 = requant_ref(qb, NVFP4_F32, &o);
    expect_same_fp4(g, refb, "quantizable rowwise-only bf16 shard requantized");
    EXPECT_EQ_I(nvfp4_tensor_nominal_dtype(g), NVFP4_BF16);
    expect_differ(refb, ref32, NVFP4_COLUMNWISE_DATA, "bf16 vs fp32 requantize");
    nvfp4_tensor_destroy(g);
    g = NULL;
    nvfp4_tensor_destroy(xb); nvfp4_tensor_destroy(qb);
    nvfp4_tensor_destroy(refb); nvfp4_tensor_destroy(ref32);
  }
  {   /* a 4over6 shard made with the MSE measure, rowwise-only, requantized
      ** with the options it was made with (gopts without quant): MSE again,
      ** as TE's quantizer, which keeps its error measure (here the bytes
      ** differ from MAE's, checked so that the case can tell them apart) */
    nvfp4_qopts omse = qopts(1, 1, M_FO6 | M_MSE, NULL), omae = qopts(1, 1, M_FO6, NULL);
    nvfp4_qopts orm = qopts(1, 0, M_FO6 | M_MSE, world);
    nvfp4_tensor *qm = quant(x, &orm), *refm, *refa;
    EXPECT_OK(nvfp4_all_gather(world, qm, &gq, &g));
    refm = requant_ref(qm, NVFP4_F32, &omse);
    refa = requant_ref(qm, NVFP4_F32, &omae);
    expect_same_fp4(g, refm, "4over6 MSE rowwise-only shard requantized");
    expect_differ(refm, refa, NVFP4_COLUMNWISE_SCALE, "MSE vs MAE requantize");
    nvfp4_tensor_destroy(g);
    g = NULL;
    nvfp4_tensor_destroy(qm); nvfp4_tensor_destroy(refm); nvfp4_tensor_destroy(refa);
  }
  if (P > 1) {    /* 4over6 shards gathered as they are, rank 1's made with MSE and
                  ** the others' with MAE: their scales were chosen by different
                  ** rules, refused on every rank (EMISMATCH naming it) */
    nvfp4_qopts ob = qopts(1, 1, mc_rank == 1 ? M_FO6 | M_MSE : M_FO6, world);
    nvfp4_tensor *qo = quant(x, &ob);
    EXPECT_ST(nvfp4_all_gather(world, qo, &gq, &g), NVFP4_EMISMATCH);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "4over6 mse");
    EXPECT(g == NULL);
    nvfp4_tensor_destroy(qo);
  }
  if (P > 1) {    /* shards that stand for different dtypes: refused on every rank */
    nvfp4_tensor *xb = NULL, *qb = NULL;
    EXPECT_OK(nvfp4_tensor_convert(x, NVFP4_BF16, &xb));
    qb = mc_rank == 0 ? quant(x, &orow) : quant(xb, &orow);
    EXPECT_ST(nvfp4_all_gather(world, qb, &gq, &g), NVFP4_EMISMATCH);
    EXPECT(g == NULL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 has [48, 2, 64] fp4 from bf16 (rowwise+columnwise, "
                  "has rowwise), rank 0 has [48, 2, 64] fp4 (rowwise+columnwise, has rowwise)");
    EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
    /* used as they are (no requantize) too: the gathered tensor would
    ** stand for one dtype on one rank and another elsewhere */
    EXPECT_ST(nvfp4_all_gather(world, qb, &gr, &g), NVFP4_EMISMATCH);
    EXPECT(g == NULL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 has [48, 2, 64] fp4 from bf16 (rowwise, has rowwise)");
    nvfp4_tensor_destroy(xb); nvfp4_tensor_destroy(qb);
  }
  EXPECT_ST(nvfp4_all_gather(world, qc, &gr, &g), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "only a columnwise copy");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(qc);
  nvfp4_tensor_destroy(ref);
}


/* Mismatched metadata: EMISMATCH on every rank with the same message,
** never a hang; a local argument error: EINVAL there, EPEER elsewhere. */
static void test_mismatch (void) {
  nvfp4_qopts o = qopts(1, 1, 0, NULL), oc = qopts(0, 1, 0, NULL);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D), gc = gopts_plain(&oc, NVFP4_CW_FLAT2D);
  nvfp4_gather_opts gn = gopts_plain(&o, NVFP4_CW_ND), gq = gopts_fp4(1, 1);
  nvfp4_qopts og = qopts(1, 1, 0, world);
  nvfp4_tensor *x, *y, *g = NULL, *q;
  nvfp4_status st;

  x = full_randn(SHAPE3(16, 2, 64), NVFP4_F32, 71);
  y = full_randn(SHAPE3(32, 2, 64), NVFP4_F32, 72);
  EXPECT_ST(nvfp4_all_gather(world, mc_rank == 1 ? y : x, &gp, &g), NVFP4_EMISMATCH);
  EXPECT(g == NULL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 has [32, 2, 64] fp32 (rowwise+columnwise, rule flat2d)");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 0 has [16, 2, 64] fp32");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  /* a NULL shard on the last rank: EINVAL naming the argument there, EPEER on the others */
  st = nvfp4_all_gather(world, mc_rank == mc_size - 1 ? NULL : x, &gp, &g);
  EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT(g == NULL);
  if (mc_rank == mc_size - 1) EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "all_gather: x: tensor is NULL");
  /* usages differ on the last rank */
  EXPECT_ST(nvfp4_all_gather(world, x, mc_rank == mc_size - 1 ? &gc : &gp, &g), NVFP4_EMISMATCH);
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  /* rule differs on rank 0: both sides name theirs */
  EXPECT_ST(nvfp4_all_gather(world, x, mc_rank == 0 ? &gn : &gp, &g), NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 0 has [16, 2, 64] fp32 (rowwise+columnwise, rule nd)");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "[16, 2, 64] fp32 (rowwise+columnwise, rule flat2d)");
  /* one rank gives an fp4 tensor, the others plain */
  q = quant(x, &o);
  EXPECT_ST(nvfp4_all_gather(world, mc_rank == 1 ? q : x, mc_rank == 1 ? &gq : &gp, &g),
            NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "fp4");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  nvfp4_tensor_destroy(q);
  /* fp4 shards gathered as they are but made differently: the RHT on rank 1
  ** only, then 2D blocks on the last rank only (one given amax everywhere,
  ** so only the making differs); the bytes would mix two encodings */
  {
    nvfp4_tensor *xb = full_randn(SHAPE3(16, 2, 64), NVFP4_BF16, 74), *qb;
    nvfp4_qopts oa = qopts(1, 1, mc_rank == 1 ? M_RHT : 0, NULL);
    oa.has_amax = 1;
    oa.amax[0] = oa.amax[1] = 8.0f;
    qb = quant(xb, &oa);
    EXPECT_ST(nvfp4_all_gather(world, qb, &gq, &g), NVFP4_EMISMATCH);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 has [16, 2, 64] fp4 from bf16 (rowwise+columnwise, has rowwise, "
                                            "has columnwise, rht)");
    EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
    {   /* ... but their rowwise copies alone, which the RHT does not touch, gather
        ** (refused over "rht" and "has columnwise" before), as quantize(full) rowwise */
      nvfp4_gather_opts gr1 = gopts_fp4(1, 0);
      nvfp4_qopts orow = qopts(1, 0, 0, NULL);
      nvfp4_tensor *fullb = NULL, *ref = NULL;
      orow.has_amax = 1;
      orow.amax[0] = orow.amax[1] = 8.0f;
      EXPECT_OK(nvfp4_all_gather_plain(world, xb, &fullb));     /* the shards' input, gathered */
      if (fullb != NULL) ref = quant(fullb, &orow);
      EXPECT_OK(nvfp4_all_gather(world, qb, &gr1, &g));
      expect_same_fp4(g, ref, "a rowwise gather of shards with the RHT on rank 1 only");
      if (g != NULL) {   /* the same tensor on every rank: gathered again, with a columnwise copy made */
        nvfp4_tensor *g2 = NULL;
        nvfp4_gather_opts gb = gopts_fp4(1, 1);
        EXPECT_OK(nvfp4_all_gather(world, g, &gb, &g2));
        nvfp4_tensor_destroy(g2);
      }
      nvfp4_tensor_destroy(g);
      g = NULL;
      nvfp4_tensor_destroy(ref);
      nvfp4_tensor_destroy(fullb);
    }
    nvfp4_tensor_destroy(qb);
    oa = qopts(1, 1, mc_rank == mc_size - 1 ? M_2D : 0, NULL);
    oa.has_amax = 1;
    oa.amax[0] = oa.amax[1] = 8.0f;
    qb = quant(xb, &oa);
    EXPECT_ST(nvfp4_all_gather(world, qb, &gq, &g), NVFP4_EMISMATCH);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "2d)");
    nvfp4_tensor_destroy(qb);
    nvfp4_tensor_destroy(xb);
  }
  /* quantize options bad on the last rank only (a negative given amax, a
  ** flag without its option): it fails with its reason, the others with
  ** EPEER, before any rank enters the amax reduction */
  {
    nvfp4_qopts ob = o;
    nvfp4_gather_opts gb = gopts_plain(&ob, NVFP4_CW_FLAT2D);
    if (mc_rank == mc_size - 1) { ob.has_amax = 1; ob.amax[0] = -1.0f; ob.amax[1] = 1.0f; }
    st = nvfp4_all_gather(world, x, &gb, &g);
    EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == mc_size - 1 ? "rowwise amax -1 must be >= 0"
                                                                   : "failed");
    /* a NULL output on the last rank: named as the call's own argument
    ** (the sync gather said "handle pointer", which only _async has) */
    st = nvfp4_all_gather(world, x, &gb, mc_rank == mc_size - 1 ? NULL : &g);
    EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == mc_size - 1 ? "all_gather: out is NULL" : "failed");
    {
      nvfp4_handle *hh = NULL;
      st = nvfp4_all_gather_async(world, x, &gb, mc_rank == mc_size - 1 ? NULL : &hh);
      EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == mc_size - 1 ? "all_gather: h is NULL" : "failed");
      EXPECT(hh == NULL);
    }
    ob = o;
    if (mc_rank == 0) ob.four_over_six_mse = 1;                 /* without four_over_six */
    st = nvfp4_all_gather(world, x, &gb, &g);
    EXPECT_EQ_I(st, mc_rank == 0 ? NVFP4_EINVAL : NVFP4_EPEER);
    /* the same with amax_group in a plain quantize */
    ob = qopts(1, 1, 0, world);
    if (mc_rank == mc_size - 1) ob.rht_no_signs = 1;             /* without rht */
    {
      nvfp4_tensor *qq = NULL;
      st = nvfp4_quantize(mc_ctx, x, &ob, &qq);
      EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
      EXPECT(qq == NULL);
      ob = qopts(1, 1, 0, world);                                 /* a NULL out on rank 0 */
      st = nvfp4_quantize(mc_ctx, x, &ob, mc_rank == 0 ? NULL : &qq);
      EXPECT_EQ_I(st, mc_rank == 0 ? NVFP4_EINVAL : NVFP4_EPEER);
      EXPECT(qq == NULL);
      /* a NULL context on the last rank (nothing to report in): its peers
      ** learn of it through the group */
      st = nvfp4_quantize(mc_rank == mc_size - 1 ? NULL : mc_ctx, x, &ob, &qq);
      EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
      if (mc_rank != mc_size - 1) EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "quantize: rank");
      EXPECT(qq == NULL);
    }
    /* options that differ but are each valid: the 4over6 error measure,
    ** the RHT's signs */
    ob = qopts(1, 1, M_FO6, NULL);
    if (mc_rank == 1) ob.four_over_six_mse = 1;
    EXPECT_ST(nvfp4_all_gather(world, x, &gb, &g), NVFP4_EMISMATCH);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "4over6 mse");
    {
      nvfp4_tensor *xb = full_randn(SHAPE3(16, 2, 64), NVFP4_BF16, 75);
      ob = qopts(1, 1, M_RHT, NULL);
      if (mc_rank == 1) ob.rht_no_signs = 1;
      EXPECT_ST(nvfp4_all_gather(world, xb, &gb, &g), NVFP4_EMISMATCH);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rht without signs");
      nvfp4_tensor_destroy(xb);
    }
  }
  /* a local argument error on rank 0 */
  st = nvfp4_all_gather(world, x, mc_rank == 0 ? NULL : &gp, &g);
  EXPECT_EQ_I(st, mc_rank == 0 ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 0 ? "a plain fp32 x needs gopts->quant (how to quantize it)"
                                                        : "rank 0 failed");
  /* a 1-D input is refused everywhere */
  {
    nvfp4_tensor *v = full_randn(mc_shape(1, (int64_t)64), NVFP4_F32, 73);
    EXPECT_ST(nvfp4_all_gather(world, v, &gp, &g), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "needs >= 2");
    nvfp4_tensor_destroy(v);
  }
  /* nothing is stuck: a good gather still works */
  q = quant(x, &og);
  EXPECT_OK(nvfp4_all_gather(world, q, &gq, &g));
  EXPECT_SHAPE(nvfp4_tensor_shape(g), SHAPE3(16 * mc_size, 2, 64));
  nvfp4_tensor_destroy(g); nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(y);
}


/* FP4 shards quantized without amax reduction carry different amaxes: the
** gathered tensor could hold only one, so the gather refuses them on every
** rank; shards given one amax explicitly gather fine. */
static void test_amax_disagree (void) {
  nvfp4_qopts lo = qopts(1, 1, 0, NULL), given = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gq = gopts_fp4(1, 1);
  nvfp4_tensor *x = full_randn(SHAPE3(16, 2, 64), NVFP4_F32, 90 + (uint64_t)mc_rank);
  nvfp4_tensor *q = quant(x, &lo), *g = NULL;
  float a0 = -1, a1 = -1;
  EXPECT_ST(nvfp4_all_gather(world, q, &gq, &g), NVFP4_EMISMATCH);
  EXPECT(g == NULL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "amax");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "must share one global scale");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  nvfp4_tensor_destroy(q);
  given.has_amax = 1;
  given.amax[0] = given.amax[1] = 8.0f;
  q = quant(x, &given);
  EXPECT_OK(nvfp4_all_gather(world, q, &gq, &g));
  EXPECT_OK(nvfp4_tensor_amax(g, 0, &a0));
  EXPECT_OK(nvfp4_tensor_amax(g, 1, &a1));
  EXPECT(a0 == 8.0f && a1 == 8.0f);
  nvfp4_tensor_destroy(g); nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(x);
}


/* Shards quantized with amax_group carry the number of their reduction
** over the group, and the gather over that group compares those instead of
** reading the amaxes back.  Shards of different reductions (a user's
** mix-up), of another group, or one with and one without a tag, have their
** values compared in a second round: refused where they differ, gathered
** where they agree. */
static void test_amax_tags (void) {
  const int last = mc_size - 1;
  nvfp4_comm *grp = NULL;     /* all ranks, on an MPI communicator of its own */
  nvfp4_qopts og, given = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gq = gopts_fp4(1, 1);
  nvfp4_tensor *x1 = full_randn(SHAPE3(16, 2, 64), NVFP4_F32, 95 + (uint64_t)mc_rank);
  nvfp4_tensor *x2 = full_randn(SHAPE3(16, 2, 64), NVFP4_F32, 195 + (uint64_t)mc_rank);
  nvfp4_tensor *q1, *q2, *q3, *g = NULL;
  float a1 = -1, a2 = -2, ag = -3;
  char want[96];
  EXPECT_OK(nvfp4_comm_split(world, mc_size, &grp));
  og = qopts(1, 1, 0, grp);
  q1 = quant(x1, &og);
  q2 = quant(x2, &og);
  EXPECT_OK(nvfp4_tensor_amax(q1, 0, &a1));
  EXPECT_OK(nvfp4_tensor_amax(q2, 0, &a2));
  EXPECT_MSG(a1 != a2, "the two reductions gave the same amax %g", (double)a1);
  /* the same reduction everywhere, one rank having read its amax, the
  ** others not: gathered, the group's amax */
  nvfp4_tensor_destroy(q1);
  q1 = quant(x1, &og);
  if (mc_rank == 0) EXPECT_OK(nvfp4_tensor_amax(q1, 0, &ag));
  EXPECT_OK(nvfp4_all_gather(grp, q1, &gq, &g));
  /* nothing was read back for it (on a device: no wait for the GPU), but
  ** on the staged transport, where the quantize reads the amax back for the
  ** group's reduction */
  if (strcmp(nvfp4_comm_transport(world), "mpi-staged") != 0)
    EXPECT(mc_rank == 0 || (q1->amax_pending && g != NULL && g->amax_pending));
  EXPECT_OK(nvfp4_tensor_amax(g, 1, &ag));
  EXPECT_MSG(ag == a1, "gathered amax %g, the group's %g", (double)ag, (double)a1);
  nvfp4_tensor_destroy(g);
  g = NULL;
  /* the last rank gathers the other reduction's tensor: refused everywhere,
  ** naming it */
  EXPECT_ST(nvfp4_all_gather(grp, mc_rank == last ? q2 : q1, &gq, &g), NVFP4_EMISMATCH);
  EXPECT(g == NULL);
  snprintf(want, sizeof want, "all_gather: rank %d's rowwise amax", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  /* the last rank's shard quantized with the group's amax given (no tag):
  ** the same values, gathered; another value, refused */
  given.has_amax = 1;
  given.amax[0] = given.amax[1] = a1;
  q3 = quant(x1, &given);
  EXPECT_OK(nvfp4_all_gather(grp, mc_rank == last ? q3 : q1, &gq, &g));
  EXPECT_OK(nvfp4_tensor_amax(g, 0, &ag));
  EXPECT(ag == a1);
  nvfp4_tensor_destroy(g);
  g = NULL;
  nvfp4_tensor_destroy(q3);
  given.amax[0] = given.amax[1] = 2.0f * a1;
  q3 = quant(x1, &given);
  EXPECT_ST(nvfp4_all_gather(grp, mc_rank == last ? q3 : q1, &gq, &g), NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "must share one global scale");
  /* reduced over all ranks, gathered over pairs: the values compared
  ** (equal: each pair holds the group's amax) */
  if (tp2 != NULL && mc_size % 2 == 0) {
    nvfp4_tensor *gp = NULL;
    EXPECT_OK(nvfp4_all_gather(tp2, q1, &gq, &gp));
    EXPECT_OK(nvfp4_tensor_amax(gp, 0, &ag));
    EXPECT(ag == a1);
    nvfp4_tensor_destroy(gp);
  }
  nvfp4_tensor_destroy(q1); nvfp4_tensor_destroy(q2); nvfp4_tensor_destroy(q3);
  /* Two comms over the one borrowed MPI_COMM_WORLD, their quantizes in
  ** opposite orders on odd and even ranks (MPI pairs them by order: x1's
  ** reduction on even ranks with x2's on odd ones): no tag may vouch for
  ** them, the gather compares the values and refuses.  (Over NCCL each comm
  ** has its own channel; that order would deadlock its streams there.) */
  if (strcmp(nvfp4_comm_transport(world), "mpi") == 0 && mc_size % 2 == 0) {
    nvfp4_comm *w2 = NULL;
    nvfp4_qopts o1 = qopts(1, 1, 0, world), o2 = qopts(1, 1, 0, NULL);
    EXPECT_OK(nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &w2));
    o2.amax_group = w2;
    if (mc_rank % 2 == 0) { q1 = quant(x1, &o1); q2 = quant(x2, &o2); }
    else { q2 = quant(x2, &o2); q1 = quant(x1, &o1); }
    EXPECT_ST(nvfp4_all_gather(world, q1, &gq, &g), NVFP4_EMISMATCH);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "must share one global scale");
    nvfp4_tensor_destroy(q1); nvfp4_tensor_destroy(q2);
    nvfp4_comm_destroy(w2);
  }
  nvfp4_tensor_destroy(x1); nvfp4_tensor_destroy(x2);
  nvfp4_comm_destroy(grp);
}


/* The async handle finishes exactly once, however often waited. */
/* A handle holds its context: destroyed before the handle, the context
** stays until the handle and its result are gone (a wait after take wrote
** its EUSAGE into the freed context: ASan and valgrind in CI). */
static void test_async_outlives_ctx (void) {
  nvfp4_ctx *ctx = NULL;
  nvfp4_comm *w = NULL;
  nvfp4_handle *h = NULL;
  nvfp4_tensor *x = NULL, *out = NULL;
  nvfp4_qopts o;
  nvfp4_gather_opts g;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  g = gopts_plain(&o, NVFP4_CW_FLAT2D);
  EXPECT_OK(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL));
  EXPECT_OK(nvfp4_comm_create_mpi(ctx, MPI_COMM_WORLD, &w));
  EXPECT_OK(nvfp4_tensor_randn(ctx, SHAPE2(32, 64), NVFP4_F32, 1 + (uint64_t)mc_rank, &x));
  EXPECT_OK(nvfp4_all_gather_async(w, x, &g, &h));
  nvfp4_tensor_destroy(x);
  nvfp4_comm_destroy(w);
  nvfp4_ctx_destroy(ctx);                  /* kept: the handle holds it */
  EXPECT_OK(nvfp4_handle_take(h, &out));
  if (out) EXPECT_SHAPE(nvfp4_tensor_shape(out), SHAPE2(32 * mc_size, 64));
  nvfp4_tensor_destroy(out);
  EXPECT_ST(nvfp4_handle_wait(h, NULL), NVFP4_EUSAGE);
  nvfp4_handle_destroy(h);                 /* the last: frees the context */
}


static void test_async_idempotent (void) {
  int P = mc_size;
  nvfp4_qopts o = qopts(1, 1, 0, NULL), orow = qopts(1, 0, 0, NULL);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D), grow = gopts_plain(&orow, NVFP4_CW_FLAT2D);
  nvfp4_tensor *full = full_randn(SHAPE3(32 * P, 3, 64), NVFP4_F32, 81);
  nvfp4_tensor *x = slice(full, 0, mc_rank, P), *ref = quant(full, &o), *ref_row = quant(full, &orow);
  nvfp4_tensor *a = NULL, *b = NULL, *c = NULL, *t = NULL;
  nvfp4_handle *h = NULL;
  EXPECT_OK(nvfp4_all_gather_async(world, x, &gp, &h));
  EXPECT_EQ_I(nvfp4_handle_finish_count(h), 0);
  EXPECT_OK(nvfp4_handle_wait(h, &a));
  EXPECT_OK(nvfp4_handle_wait(h, &b));
  EXPECT_OK(nvfp4_handle_wait(h, &c));
  EXPECT_EQ_I(nvfp4_handle_finish_count(h), 1);
  EXPECT(a != NULL && a == b && b == c);
  expect_same_fp4(a, ref, "async");
  EXPECT_OK(nvfp4_handle_take(h, &t));
  EXPECT(t == a);
  EXPECT_ST(nvfp4_handle_wait(h, &b), NVFP4_EUSAGE);
  EXPECT_EQ_I(nvfp4_handle_finish_count(h), 1);
  nvfp4_handle_destroy(h);
  expect_same_fp4(t, ref, "taken");        /* still valid after destroy */
  nvfp4_tensor_destroy(t);
  /* rowwise only */
  h = NULL;
  EXPECT_OK(nvfp4_all_gather_async(world, x, &grow, &h));
  EXPECT_OK(nvfp4_handle_wait(h, &a));
  EXPECT_OK(nvfp4_handle_wait(h, NULL));
  EXPECT_EQ_I(nvfp4_handle_finish_count(h), 1);
  expect_same_fp4(a, ref_row, "async rowwise");
  EXPECT(!nvfp4_tensor_has_columnwise(a));
  nvfp4_handle_destroy(h);
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(ref_row);
}


/* BH-01: columnwise gather for wgrad, TP=2, X=[32,2,64] bf16 -> shard
** [16,2,64]; a naive dim-0 gather of the columnwise data is interleaved. */
static void test_bh01 (void) {
  int gr = nvfp4_comm_rank(tp2), r, k;
  nvfp4_qopts o = qopts(0, 1, 0, NULL), og = qopts(0, 1, 0, tp2);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D);
  nvfp4_tensor *full = full_randn(SHAPE3(32, 2, 64), NVFP4_BF16, 91);
  nvfp4_tensor *x = slice(full, 0, gr, 2), *ref = quant(full, &o), *q = quant(x, &og);
  nvfp4_tensor *g = NULL, *cd = NULL, *naive = NULL;
  uint8_t *ld, *nv, *rf;
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 16));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 4));
  EXPECT_OK(nvfp4_all_gather(tp2, x, &gp, &g));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 32));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 4));
  expect_same_fp4(g, ref, "BH-01");
  /* naive: [2*64, 16], rank blocks stacked; the right answer swaps them */
  ld = rd(q, NVFP4_COLUMNWISE_DATA, NULL);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE2(64, 16), NVFP4_U8, ld, 64 * 16, &cd));
  EXPECT_OK(nvfp4_all_gather_plain(tp2, cd, &naive));
  EXPECT_SHAPE(nvfp4_tensor_shape(naive), SHAPE2(128, 16));
  nv = (uint8_t *)malloc(128 * 16);
  EXPECT_OK(nvfp4_tensor_to_host(naive, nv, 128 * 16));
  rf = rd(ref, NVFP4_COLUMNWISE_DATA, NULL);
  EXPECT(memcmp(nv, rf, 128 * 16 / 2) != 0 || memcmp(nv + 1024, rf + 1024, 1024) != 0);
  for (r = 0; r < 2; r++)
    for (k = 0; k < 64; k++)
      if (memcmp(nv + (r * 64 + k) * 16, rf + k * 32 + r * 16, 16) != 0) {
        EXPECT_MSG(0, "naive row %d is not rank %d's part of column %d", r * 64 + k, r, k);
        r = 2;
        break;
      }
  free(ld); free(nv); free(rf);
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(ref);
  nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(g); nvfp4_tensor_destroy(cd);
  nvfp4_tensor_destroy(naive);
}


/* BH-02: TP=2, X=[96,1,64], M_l = 48: scale padding is not gathered. */
static void test_bh02 (void) {
  int gr = nvfp4_comm_rank(tp2), k, j;
  nvfp4_qopts o = qopts(1, 1, 0, NULL), og = qopts(1, 1, 0, tp2);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D);
  nvfp4_tensor *full = full_randn(SHAPE3(96, 1, 64), NVFP4_F32, 92);
  nvfp4_tensor *x = slice(full, 0, gr, 2), *ref = quant(full, &o), *q = quant(x, &og), *g = NULL;
  uint8_t *lrs, *lcs, *rs2, *cs2, *grs, *gcs;
  MPI_Comm mc = nvfp4_comm_mpi(tp2);
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), SHAPE2(128, 4));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 4));
  EXPECT_OK(nvfp4_all_gather(tp2, x, &gp, &g));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_DATA), SHAPE3(96, 1, 32));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(128, 4));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 48));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 8));
  expect_same_fp4(g, ref, "BH-02");
  lrs = rd(q, NVFP4_ROWWISE_SCALE, NULL);
  lcs = rd(q, NVFP4_COLUMNWISE_SCALE, NULL);
  rs2 = (uint8_t *)malloc(2 * 512);
  cs2 = (uint8_t *)malloc(2 * 512);
  MPI_Allgather(lrs, 512, MPI_BYTE, rs2, 512, MPI_BYTE, mc);
  MPI_Allgather(lcs, 512, MPI_BYTE, cs2, 512, MPI_BYTE, mc);
  grs = rd(g, NVFP4_ROWWISE_SCALE, NULL);
  gcs = rd(g, NVFP4_COLUMNWISE_SCALE, NULL);
  EXPECT_BYTES(grs, rs2, 48 * 4, "rows 0-47 from rank 0");
  EXPECT_BYTES(grs + 48 * 4, rs2 + 512, 48 * 4, "rows 48-95 from rank 1");
  for (j = 96 * 4; j < 128 * 4; j++) EXPECT_EQ_I(grs[j], 0);
  for (k = 0; k < 128; k++)
    for (j = 0; j < 8; j++) {
      int want = k >= 64 || j >= 6 ? 0 : j < 3 ? cs2[k * 4 + j] : cs2[512 + k * 4 + j - 3];
      if (gcs[k * 8 + j] != want) {
        EXPECT_MSG(0, "gathered columnwise scale [%d][%d] = 0x%02x, expected 0x%02x",
                   k, j, gcs[k * 8 + j], want);
        k = 128;
        break;
      }
    }
  free(lrs); free(lcs); free(rs2); free(cs2); free(grs); free(gcs);
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(ref);
  nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(g);
}


/* BH-25 with its real row count M_l = 7984 (% 16 = 0, % 128 = 48) and H
** scaled down from 3072 to 64 so it runs in well under a second; at TP=4
** the row and column counts are the field case's own (32000, 15968, 1996). */
static void test_bh25 (void) {
  int P = mc_size;
  int64_t ml = 7984;
  nvfp4_qopts o = qopts(1, 1, 0, NULL), og = qopts(1, 1, 0, world);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D);
  nvfp4_tensor *full = full_randn(SHAPE3(ml * P, 1, 64), NVFP4_BF16, 93);
  nvfp4_tensor *x = slice(full, 0, mc_rank, P), *ref = quant(full, &o), *q = quant(x, &og), *g = NULL;
  uint8_t *ls, *all, *gs;
  size_t rowb = (size_t)ml * 4;
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA), SHAPE3(ml, 1, 32));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), SHAPE2(8064, 4));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 3992));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 500));
  EXPECT_OK(nvfp4_all_gather(world, x, &gp, &g));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_DATA), SHAPE3(ml * P, 1, 32));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(ROUNDUP(ml * P, 128), 4));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 3992 * P));
  EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, ROUNDUP(499 * P, 4)));
  if (P == 4) {
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(32000, 4));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 15968));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 1996));
  }
  expect_same_fp4(g, ref, "BH-25");
  ls = rd(q, NVFP4_ROWWISE_SCALE, NULL);
  all = (uint8_t *)malloc(rowb * (size_t)P);
  MPI_Allgather(ls, (int)rowb, MPI_BYTE, all, (int)rowb, MPI_BYTE, MPI_COMM_WORLD);
  gs = rd(g, NVFP4_ROWWISE_SCALE, NULL);
  EXPECT_BYTES(gs, all, rowb * (size_t)P, "rank r's scale rows at 7984*r");
  free(ls); free(all); free(gs);
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(ref);
  nvfp4_tensor_destroy(q); nvfp4_tensor_destroy(g);
}


/* BH-22: empty shards gather to empty buffers, under either rule. */
static void test_empty_shards (void) {
  nvfp4_qopts o = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gf = gopts_plain(&o, NVFP4_CW_FLAT2D), gn = gopts_plain(&o, NVFP4_CW_ND);
  nvfp4_tensor *x = NULL, *g = NULL;
  float amax = -1;
  int k;
  EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE3(0, 4, 64), NVFP4_BF16, &x));
  for (k = 0; k < 2; k++) {
    EXPECT_OK(nvfp4_all_gather(world, x, k ? &gn : &gf, &g));
    if (g == NULL) continue;
    EXPECT_SHAPE(nvfp4_tensor_shape(g), SHAPE3(0, 4, 64));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_DATA), SHAPE3(0, 4, 32));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_ROWWISE_SCALE), SHAPE2(0, 4));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(64, 0));
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_SCALE), SHAPE2(128, 0));
    EXPECT_OK(nvfp4_tensor_amax(g, 1, &amax));
    EXPECT(amax == 0.0f);
    {   /* and dequantizes to an empty tensor */
      nvfp4_tensor *d = NULL;
      EXPECT_OK(nvfp4_dequantize(mc_ctx, g, NVFP4_BF16, &d));
      if (d) EXPECT_SHAPE(nvfp4_tensor_shape(d), SHAPE3(0, 4, 64));
      nvfp4_tensor_destroy(d);
    }
    nvfp4_tensor_destroy(g);
    g = NULL;
  }
  nvfp4_tensor_destroy(x);
  /* a zero-width hidden dim (K = 0): equals quantize of the gathered
  ** tensor (it failed in the columnwise swap, "Input is not allocated") */
  EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE2(16, 0), NVFP4_BF16, &x));
  EXPECT_OK(nvfp4_all_gather(world, x, &gf, &g));
  if (g != NULL) {
    nvfp4_tensor *full = NULL, *q = NULL;
    EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE2(16 * mc_size, 0), NVFP4_BF16, &full));
    q = quant(full, &o);
    EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA), SHAPE2(0, 8 * mc_size));
    for (k = 0; k < 4; k++)
      EXPECT_SHAPE(nvfp4_tensor_buffer_shape(g, (nvfp4_buffer)k),
                   nvfp4_tensor_buffer_shape(q, (nvfp4_buffer)k));
    nvfp4_tensor_destroy(q);
    nvfp4_tensor_destroy(full);
    nvfp4_tensor_destroy(g);
  }
  nvfp4_tensor_destroy(x);
  /* an empty shard may have any dim 0, but the gathered one must fit int64:
  ** 2^62 on 2 ranks or more is refused on every rank, the gathers and the
  ** sum alike (it overflowed: [0, 0, 16] at 4 ranks, a negative dim 0 at 2) */
  g = NULL;
  EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE3(INT64_C(1) << 62, 0, 16), NVFP4_F32, &x));
  if (x != NULL && mc_size > 1) {
    char want[128];
    snprintf(want, sizeof want, "x [4611686018427387904, 0, 16]: the gathered first dim "
             "(4611686018427387904 x %d ranks) is past 2^63 - 1", mc_size);
    EXPECT_ST(nvfp4_all_gather(world, x, &gf, &g), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
    EXPECT(g == NULL);
    EXPECT_ST(nvfp4_all_gather_plain(world, x, &g), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
    EXPECT_ST(nvfp4_all_reduce_sum(world, x, &g), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "all_reduce_sum: x [4611686018427387904, 0, 16]");
    EXPECT(g == NULL);
  }
  nvfp4_tensor_destroy(x);
  /* 2^62 / size fits: gathered, empty */
  EXPECT_OK(nvfp4_tensor_create(mc_ctx, SHAPE3((INT64_C(1) << 62) / mc_size, 0, 16), NVFP4_F32, &x));
  EXPECT_OK(nvfp4_all_gather_plain(world, x, &g));
  if (g != NULL) EXPECT(nvfp4_tensor_shape(g).dim[0] == (INT64_C(1) << 62) / mc_size * mc_size);
  nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(x);
}


/* The ND rule is wrong iff the second-to-last logical dim is odd: 2-D is
** always right; 4-D [a, b, 1, K] gives U = 0 and fails like [S, 1, H]. */
static void test_nd_rule_other_ranks (void) {
  int P = mc_size;
  nvfp4_qopts o = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gn = gopts_plain(&o, NVFP4_CW_ND);
  nvfp4_tensor *full = full_randn(SHAPE2(48 * P, 96), NVFP4_F32, 95);
  nvfp4_tensor *x = slice(full, 0, mc_rank, P), *ref = quant(full, &o), *g = NULL;
  EXPECT_OK(nvfp4_all_gather(world, x, &gn, &g));
  expect_same_fp4(g, ref, "2-D under nd");
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(g);
  g = NULL;
  full = full_randn(SHAPE4(16 * P, 3, 1, 32), NVFP4_F32, 96);
  x = slice(full, 0, mc_rank, P);
  EXPECT_EQ_I(nvfp4_cw_rule_apply(NVFP4_CW_ND, nvfp4_tensor_shape(x)).scale_width, 0);
  EXPECT_ST(nvfp4_all_gather(world, x, &gn, &g), NVFP4_EINVAL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "Input is not allocated");
  nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);
  /* odd B = 3: the gathered columnwise scale is too narrow; its dequantize
  ** refuses it as the GEMM does (it read past the scale's end, silently
  ** wrong values), the rowwise copy still dequantizes */
  {
    char want[128];
    int64_t M = 16 * P * 3;
    nvfp4_tensor *d = NULL;
    full = full_randn(SHAPE3(16 * P, 3, 128), NVFP4_BF16, 97);
    x = slice(full, 0, mc_rank, P);
    g = NULL;
    EXPECT_OK(nvfp4_all_gather(world, x, &gn, &g));
    if (g != NULL) {
      snprintf(want, sizeof want, "dequantize_columnwise: invalid columnwise_scale_inv shape "
               "(expected (128,%lld), got (128,", (long long)((M / 16 + 3) / 4 * 4));
      EXPECT_ST(nvfp4_dequantize_columnwise(mc_ctx, g, NVFP4_F32, &d), NVFP4_EINVAL);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
      EXPECT(d == NULL);
      EXPECT_OK(nvfp4_dequantize(mc_ctx, g, NVFP4_F32, &d));
      nvfp4_tensor_destroy(d);
    }
    nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(g);
  }
}


/* A group of one rank: TE's gather_along_first_dim returns quantize(x) at
** world size 1 before _all_gather_nvfp4, so its N-D rule is never reached
** and [S, 1, H] under ND gives what FLAT2D gives (it failed with "Input is
** not allocated"). */
static void test_nd_rule_group_of_one (void) {
  nvfp4_comm *one = NULL;
  nvfp4_qopts o = qopts(1, 1, 0, NULL);
  nvfp4_gather_opts gn = gopts_plain(&o, NVFP4_CW_ND);
  nvfp4_tensor *x = full_randn(SHAPE3(32, 1, 64), NVFP4_F32, 97), *ref = quant(x, &o), *g = NULL;
  EXPECT_OK(nvfp4_comm_split(world, 1, &one));
  EXPECT_OK(nvfp4_all_gather(one, x, &gn, &g));
  expect_same_fp4(g, ref, "[32, 1, 64] under nd, group of one");
  nvfp4_comm_destroy(one);
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(g);
}


/* BH-28: we gather along dim 0 only.  Batch-first [B, S, H] sharded on S:
** with B = 1 the dim-0 gather has the full tensor's bytes; with B = 2 it
** does not (rank 1's rows land in batch slot 1): transpose first, which
** nvfp4.h prescribes: swap_first_dims of the shard ([S/2, B, H], sequence
** first), gathered, equals quantize of the whole tensor made sequence first,
** rowwise and columnwise; and the seq-first layout of the row, sharded on
** dim 0, equals quantize(full). */
static void test_bh28_dim0_only (void) {
  int gr = nvfp4_comm_rank(tp2), B;
  nvfp4_qopts o = qopts(1, 0, 0, NULL);
  nvfp4_gather_opts gp = gopts_plain(&o, NVFP4_CW_FLAT2D);
  for (B = 1; B <= 2; B++) {
    nvfp4_tensor *full = full_randn(SHAPE3(B, 32, 64), NVFP4_F32, 94);
    nvfp4_tensor *x = slice(full, 1, gr, 2), *ref = quant(full, &o), *g = NULL;
    uint8_t *a, *b;
    size_t n;
    EXPECT_OK(nvfp4_all_gather(tp2, x, &gp, &g));
    EXPECT_SHAPE(nvfp4_tensor_shape(g), SHAPE3(2 * B, 16, 64));
    a = rd(g, NVFP4_ROWWISE_DATA, &n);
    b = rd(ref, NVFP4_ROWWISE_DATA, NULL);
    if (B == 1) EXPECT_BYTES(a, b, n, "batch-first B=1");
    else EXPECT_MSG(memcmp(a, b, n) != 0, "batch-first B=2 gathered on dim 0 should not "
                    "equal the full tensor");
    free(a); free(b);
    {   /* the prescribed fix: transpose the shard first */
      nvfp4_qopts ob = qopts(1, 1, 0, NULL);
      nvfp4_gather_opts gb = gopts_plain(&ob, NVFP4_CW_FLAT2D);
      nvfp4_tensor *xt = NULL, *ft = NULL, *rt, *gt = NULL;
      EXPECT_OK(nvfp4_swap_first_dims(mc_ctx, x, &xt));
      EXPECT_OK(nvfp4_swap_first_dims(mc_ctx, full, &ft));
      rt = quant(ft, &ob);
      EXPECT_OK(nvfp4_all_gather(tp2, xt, &gb, &gt));
      if (gt) EXPECT_SHAPE(nvfp4_tensor_shape(gt), SHAPE3(32, B, 64));
      expect_same_fp4(gt, rt, B == 1 ? "batch-first B=1, swapped, gathered"
                                     : "batch-first B=2, swapped, gathered");
      nvfp4_tensor_destroy(xt); nvfp4_tensor_destroy(ft);
      nvfp4_tensor_destroy(rt); nvfp4_tensor_destroy(gt);
    }
    nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);
    nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(g);
  }
  {   /* seq-first [S=32, B=2, H=64] sharded on S: the dim-0 gather is right */
    nvfp4_qopts ob = qopts(1, 1, 0, NULL);
    nvfp4_gather_opts gb = gopts_plain(&ob, NVFP4_CW_FLAT2D);
    nvfp4_tensor *full = full_randn(SHAPE3(32, 2, 64), NVFP4_F32, 98);
    nvfp4_tensor *x = slice(full, 0, gr, 2), *ref = quant(full, &ob), *g = NULL;
    EXPECT_OK(nvfp4_all_gather(tp2, x, &gb, &g));
    expect_same_fp4(g, ref, "seq-first [32, 2, 64] sharded on S");
    nvfp4_tensor_destroy(full); nvfp4_tensor_destroy(x);
    nvfp4_tensor_destroy(ref); nvfp4_tensor_destroy(g);
  }
}


int main (int argc, char **argv) {
  mc_init(&argc, &argv);
  if (nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &world) != NVFP4_OK ||
      nvfp4_comm_split(world, 2, &tp2) != NVFP4_OK)
    MPI_Abort(MPI_COMM_WORLD, 99);
  /* BH-23: ordering with rank-tagged payloads before any numerics check */
  RUN(test_rank_order);
  RUN(test_gather_equals_full_quantize);
  RUN(test_amax_group_kept_until_read);
  RUN(test_amax_group_mixed);
  RUN(test_shape_rules_full_size);
  RUN(test_shape_table_tp2);
  RUN(test_groups);
  RUN(test_fallback);
  RUN(test_requantize);
  RUN(test_mismatch);
  RUN(test_amax_disagree);
  RUN(test_amax_tags);
  RUN(test_async_idempotent);
  RUN(test_bh01);
  RUN(test_bh02);
  RUN(test_bh25);
  RUN(test_nd_rule_other_ranks);
  RUN(test_nd_rule_group_of_one);
  RUN(test_empty_shards);
  RUN(test_bh28_dim0_only);
  RUN(test_async_outlives_ctx);
  nvfp4_comm_destroy(tp2);
  nvfp4_comm_destroy(world);
  return mc_finish();
}
