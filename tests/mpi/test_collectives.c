/*
** test_collectives.c -- plain-tensor collectives along dim 0 at 2 and 4
** ranks: all-gather rank order, reduce-scatter and all-reduce sums (FP32
** and BF16, summed in FP32 in rank order and rounded once), and the
** cross-rank metadata check (same error on every rank, no hang), with the
** NVFP4 gather's amax pair and set-up status.
*/
#include "mpicheck.h"
#include "comm_int.h"             /* nvfp4i_comm_check_meta */

static nvfp4_comm *world;

/* Host FP32 values of a plain tensor (F32 or BF16). */
static float *host_f32 (const nvfp4_tensor *t) {
  size_t n = (size_t)nvfp4_shape_numel(nvfp4_tensor_shape(t)), i;
  float *f = (float *)malloc(n * sizeof *f + 1);
  if (nvfp4_tensor_dtype(t) == NVFP4_F32) {
    EXPECT_OK(nvfp4_tensor_to_host(t, f, n * sizeof *f));
  }
  else {
    uint16_t *b = (uint16_t *)malloc(n * sizeof *b + 1);
    union { uint32_t u; float f; } v;
    EXPECT_OK(nvfp4_tensor_to_host(t, b, n * sizeof *b));
    for (i = 0; i < n; i++) { v.u = (uint32_t)b[i] << 16; f[i] = v.f; }
    free(b);
  }
  return f;
}


/* MPI_Comm_split interposed (PMPI): with split_fail_rank >= 0 the split
** is made and then fails on that rank of MPI_COMM_WORLD alone, as a local
** failure after its collective part would (out of memory inside MPI).
** Found by a reviewer: such a rank returned at once, and its peers waited
** for ever in the split's agreement over the parent. */
static int split_fail_rank = -1;

int MPI_Comm_split (MPI_Comm comm, int color, int key, MPI_Comm *out) {
  int rank = -1, rc = PMPI_Comm_split(comm, color, key, out);
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rc == MPI_SUCCESS && rank == split_fail_rank) {
    PMPI_Comm_free(out);
    return MPI_ERR_NO_MEM;
  }
  return rc;
}


static uint16_t to_bf16 (float f) {       /* RNE, finite inputs */
  union { uint32_t u; float f; } v;
  v.f = f;
  return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}


static void test_all_gather_rank_order (void) {
  nvfp4_shape s = SHAPE2(3, 5);
  float mine[15], got[15 * 8];
  uint8_t u8[6], gu8[6 * 8];
  nvfp4_tensor *x = NULL, *g = NULL;
  int r, i;
  for (i = 0; i < 15; i++) mine[i] = (float)(mc_rank * 1000 + i);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, s, NVFP4_F32, mine, sizeof mine, &x));
  EXPECT_OK(nvfp4_all_gather_plain(world, x, &g));
  EXPECT_SHAPE(nvfp4_tensor_shape(g), SHAPE2(3 * mc_size, 5));
  EXPECT_OK(nvfp4_tensor_to_host(g, got, sizeof(float) * 15 * (size_t)mc_size));
  for (r = 0; r < mc_size; r++)
    for (i = 0; i < 15; i++)
      EXPECT_MSG(got[r * 15 + i] == (float)(r * 1000 + i), "gathered[%d] = %g, "
                 "expected rank %d's element %d", r * 15 + i, got[r * 15 + i], r, i);
  nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(g);
  /* u8, 1-D */
  for (i = 0; i < 6; i++) u8[i] = (uint8_t)(mc_rank * 16 + i);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, mc_shape(1, (int64_t)6), NVFP4_U8, u8, 6, &x));
  EXPECT_OK(nvfp4_all_gather_plain(world, x, &g));
  EXPECT_SHAPE(nvfp4_tensor_shape(g), mc_shape(1, (int64_t)(6 * mc_size)));
  EXPECT_OK(nvfp4_tensor_to_host(g, gu8, 6 * (size_t)mc_size));
  for (r = 0; r < mc_size; r++)
    for (i = 0; i < 6; i++) EXPECT_EQ_I(gu8[r * 6 + i], r * 16 + i);
  nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(g);
}


/* Every rank's input is randn(shape, seed 100 + rank), so each rank can
** rebuild all inputs and the expected sums itself. */
static nvfp4_tensor *input_of (int r, nvfp4_shape s, nvfp4_dtype dt) {
  nvfp4_tensor *t = NULL;
  EXPECT_OK(nvfp4_tensor_randn(mc_ctx, s, dt, 100 + (uint64_t)r, &t));
  return t;
}


/* expected[i] over elements [off, off + n) of the full inputs. */
static float *expected_sum (nvfp4_shape s, nvfp4_dtype dt, size_t off, size_t n) {
  float *acc = (float *)calloc(n + 1, sizeof *acc);
  int r;
  size_t i;
  for (r = 0; r < mc_size; r++) {
    nvfp4_tensor *t = input_of(r, s, dt);
    float *v = host_f32(t);
    for (i = 0; i < n; i++) acc[i] += v[off + i];
    free(v);
    nvfp4_tensor_destroy(t);
  }
  return acc;
}


static void check_sum (const nvfp4_tensor *got, const float *acc, size_t n,
                       nvfp4_dtype dt, const char *what) {
  size_t i;
  if (dt == NVFP4_F32) {
    float *g = host_f32(got);
    EXPECT_BYTES(g, acc, n * sizeof *g, what);
    free(g);
  }
  else {
    uint16_t *g = (uint16_t *)malloc(n * 2 + 1), *w = (uint16_t *)malloc(n * 2 + 1);
    EXPECT_OK(nvfp4_tensor_to_host(got, g, n * 2));
    for (i = 0; i < n; i++) w[i] = to_bf16(acc[i]);
    EXPECT_BYTES(g, w, n * 2, what);
    free(g);
    free(w);
  }
}


static void test_reduce_scatter (void) {
  nvfp4_dtype dts[2] = {NVFP4_F32, NVFP4_BF16};
  int k;
  for (k = 0; k < 2; k++) {
    nvfp4_shape s = SHAPE3(2 * mc_size, 3, 40);
    size_t n = (size_t)(2 * 3 * 40);
    nvfp4_tensor *x = input_of(mc_rank, s, dts[k]), *y = NULL;
    float *acc = expected_sum(s, dts[k], (size_t)mc_rank * n, n);
    EXPECT_OK(nvfp4_reduce_scatter(world, x, &y));
    EXPECT_SHAPE(nvfp4_tensor_shape(y), SHAPE3(2, 3, 40));
    EXPECT(nvfp4_tensor_dtype(y) == dts[k]);
    if (y != NULL) check_sum(y, acc, n, dts[k], dts[k] == NVFP4_F32 ? "reduce_scatter fp32"
                                                                     : "reduce_scatter bf16");
    free(acc);
    nvfp4_tensor_destroy(x);
    nvfp4_tensor_destroy(y);
  }
}


static void test_all_reduce (void) {
  nvfp4_dtype dts[2] = {NVFP4_F32, NVFP4_BF16};
  int k;
  for (k = 0; k < 2; k++) {
    nvfp4_shape s = SHAPE2(7, 33);
    size_t n = 7 * 33;
    nvfp4_tensor *x = input_of(mc_rank, s, dts[k]), *y = NULL;
    float *acc = expected_sum(s, dts[k], 0, n);
    EXPECT_OK(nvfp4_all_reduce_sum(world, x, &y));
    EXPECT_SHAPE(nvfp4_tensor_shape(y), s);
    if (y != NULL) check_sum(y, acc, n, dts[k], "all_reduce_sum");
    free(acc);
    nvfp4_tensor_destroy(x);
    nvfp4_tensor_destroy(y);
  }
}


/* BF16 sums are rounded once: 1 + 2^-8 + 2^-8 + 2^-8 in bf16 steps would
** stay at 1 (each step ties to even); in FP32, then rounded, it becomes
** 1 + 2^-6. */
static void test_bf16_rounded_once (void) {
  uint16_t v[4], got[4];
  nvfp4_tensor *x = NULL, *y = NULL;
  int i;
  for (i = 0; i < 4; i++) v[i] = to_bf16(mc_rank == 0 ? 1.0f : 1.0f / 256.0f);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE2(1, 4), NVFP4_BF16, v, sizeof v, &x));
  EXPECT_OK(nvfp4_all_reduce_sum(world, x, &y));
  if (y != NULL) {
    EXPECT_OK(nvfp4_tensor_to_host(y, got, sizeof got));
    for (i = 0; i < 4; i++)
      EXPECT_EQ_I(got[i], to_bf16(1.0f + (float)(mc_size - 1) / 256.0f));
    /* With 2 ranks there is a single add, so rounding once changes nothing. */
    if (mc_size >= 3) EXPECT(got[0] != to_bf16(1.0f));
  }
  nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(y);
}


static void test_errors (void) {
  nvfp4_tensor *x = NULL, *y = NULL;
  nvfp4_status st;
  /* dim 0 not divisible by the size: EINVAL everywhere, naming the rule */
  x = input_of(mc_rank, SHAPE2(mc_size + 1, 16), NVFP4_F32);
  EXPECT_ST(nvfp4_reduce_scatter(world, x, &y), NVFP4_EINVAL);
  EXPECT(y == NULL);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "not a multiple of the communicator size");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  nvfp4_tensor_destroy(x);

  /* shape mismatch on rank 1: EMISMATCH on every rank, same message */
  x = input_of(mc_rank, SHAPE2(mc_rank == 1 ? 4 : 2, 16), NVFP4_F32);
  EXPECT_ST(nvfp4_all_gather_plain(world, x, &y), NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 has [4, 16] fp32, rank 0 has [2, 16] fp32");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  EXPECT_ST(nvfp4_reduce_scatter(world, x, &y), NVFP4_EMISMATCH);
  EXPECT_ST(nvfp4_all_reduce_sum(world, x, &y), NVFP4_EMISMATCH);
  nvfp4_tensor_destroy(x);

  /* dtype mismatch on the last rank */
  x = input_of(mc_rank, SHAPE2(2, 16), mc_rank == mc_size - 1 ? NVFP4_BF16 : NVFP4_F32);
  EXPECT_ST(nvfp4_all_reduce_sum(world, x, &y), NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "bf16");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  nvfp4_tensor_destroy(x);

  /* a local argument error on rank 0 only: it keeps its error, peers EPEER */
  x = input_of(mc_rank, SHAPE2(2, 16), NVFP4_F32);
  st = nvfp4_all_gather_plain(world, mc_rank == 0 ? NULL : x, &y);
  EXPECT_EQ_I(st, mc_rank == 0 ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 0 ? "all_gather_plain: x: tensor is NULL"
                                                       : "rank 0 failed");
  nvfp4_tensor_destroy(x);

  /* u8 cannot be summed */
  {
    uint8_t b[16] = {0};
    EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE2(1, 16), NVFP4_U8, b, 16, &x));
    EXPECT_ST(nvfp4_all_reduce_sum(world, x, &y), NVFP4_EINVAL);
    nvfp4_tensor_destroy(x);
  }
  /* NULL outputs and counts refused before any transfer (here on every
  ** rank), each with its reason */
  {
    EXPECT_ST(nvfp4_all_gather_plain(world, NULL, NULL), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "all_gather_plain: out is NULL");
    EXPECT_ST(nvfp4_comm_split(world, 1, NULL), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "split: out is NULL");
    EXPECT_ST(nvfp4_comm_all_reduce_max_f32(world, NULL, -1), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "comm_all_reduce_max_f32: n=-1 is negative");
    EXPECT_ST(nvfp4_comm_all_reduce_max_int(world, NULL, 2), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "comm_all_reduce_max_int: v is NULL (n=2)");
    EXPECT_ST(nvfp4_comm_all_gather_int(world, 1, NULL), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "comm_all_gather_int: out is NULL");
  }
  /* the host-value collectives with bad arguments on one rank only: that
  ** rank keeps its error, the others get EPEER naming it (they used to wait
  ** inside MPI_Allreduce); a different count on one rank: EMISMATCH on every
  ** rank (it used to truncate there and hang the others) */
  {
    const int last = mc_size - 1;
    float fv[3] = {(float)mc_rank, -1.0f, 2.0f};
    int iv[2] = {mc_rank, 5}, *all = (int *)calloc((size_t)mc_size, sizeof *all);
    st = nvfp4_comm_all_reduce_max_f32(world, mc_rank == last ? NULL : fv, 2);
    EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EINVAL : NVFP4_EPEER);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == last ? "comm_all_reduce_max_f32: v is NULL"
                                                            : "comm_all_reduce_max_f32: rank");
    EXPECT(fv[0] == (float)mc_rank);                   /* untouched */
    EXPECT_ST(nvfp4_comm_all_reduce_max_f32(world, fv, mc_rank == last ? 3 : 2), NVFP4_EMISMATCH);
    {
      char want[96];
      snprintf(want, sizeof want, "comm_all_reduce_max_f32: the ranks disagree on n: rank %d has 3, "
               "rank 0 has 2", last);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
    }
    EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
    st = nvfp4_comm_all_reduce_max_int(world, iv, mc_rank == last ? -1 : 2);
    EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EINVAL : NVFP4_EPEER);
    st = nvfp4_comm_all_gather_int(world, mc_rank, mc_rank == last ? NULL : all);
    EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EINVAL : NVFP4_EPEER);
    /* and with good arguments the values */
    EXPECT_OK(nvfp4_comm_all_reduce_max_f32(world, fv, 3));
    EXPECT(fv[0] == (float)last && fv[1] == -1.0f && fv[2] == 2.0f);
    EXPECT_OK(nvfp4_comm_all_reduce_max_int(world, iv, 2));
    EXPECT(iv[0] == last && iv[1] == 5);
    EXPECT_OK(nvfp4_comm_all_gather_int(world, 10 * mc_rank, all));
    EXPECT(all[last] == 10 * last && all[0] == 0);
    free(all);
  }
  /* comm_create_mpi with a NULL out on the last rank only: with the CPU
  ** backend nothing is collective (that rank EINVAL, the others a comm);
  ** with CUDA the transport's set-up is collective, so the others get
  ** EPEER naming it instead of waiting there (where a CUDA context can be
  ** had on every rank; mc_ctx is one with $NVFP4_BACKEND=cuda) */
  {
    const int last = mc_size - 1, cpu = strcmp(nvfp4_ctx_backend(mc_ctx), "cpu") == 0;
    nvfp4_comm *c2 = NULL;
    nvfp4_ctx *gctx = NULL;
    const char *why = "";
    int have = 0, all = 0;
    st = nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, mc_rank == last ? NULL : &c2);
    EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EINVAL : cpu ? NVFP4_OK : NVFP4_EPEER);
    if (mc_rank == last) EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "comm_create_mpi: out is NULL");
    EXPECT((c2 != NULL) == (cpu && mc_rank != last));
    nvfp4_comm_destroy(c2);
    c2 = NULL;
    have = nvfp4_ctx_create(NVFP4_BACKEND_CUDA, &gctx, &why) == NVFP4_OK;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) {
      st = nvfp4_comm_create_mpi(gctx, MPI_COMM_WORLD, mc_rank == last ? NULL : &c2);
      EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EINVAL : NVFP4_EPEER);
      EXPECT_SUBSTR(nvfp4_last_error(gctx), mc_rank == last ? "comm_create_mpi: out is NULL"
                                                             : "comm_create_mpi: rank");
      EXPECT(c2 == NULL);
      EXPECT_OK(nvfp4_comm_create_mpi(gctx, MPI_COMM_WORLD, &c2));     /* and then it works */
      EXPECT(c2 != NULL && nvfp4_comm_size(c2) == mc_size);
      nvfp4_comm_destroy(c2);
    }
    else if (mc_rank == 0)
      printf("# comm_create_mpi on CUDA not checked: no CUDA context on every rank\n");
    nvfp4_ctx_destroy(gctx);
  }
  /* split: a NULL out on the last rank only (the others get EPEER), then
  ** different tp per rank (EMISMATCH everywhere): nobody waits in
  ** MPI_Comm_split, and no groups of different sizes come out */
  {
    nvfp4_comm *sub = NULL;
    st = nvfp4_comm_split(world, 1, mc_rank == mc_size - 1 ? NULL : &sub);
    EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EINVAL : NVFP4_EPEER);
    EXPECT(sub == NULL);
    EXPECT_ST(nvfp4_comm_split(world, mc_rank == 1 ? mc_size : 1, &sub), NVFP4_EMISMATCH);
    {
      char want[96];
      snprintf(want, sizeof want, "split: the ranks disagree on tp: rank 1 has %d, rank 0 has 1", mc_size);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
    }
    EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
    EXPECT(sub == NULL);
    EXPECT_OK(nvfp4_comm_split(world, 1, &sub));
    EXPECT(nvfp4_comm_size(sub) == 1);
    nvfp4_comm_destroy(sub);
    sub = NULL;
  }
  /* split: MPI_Comm_split itself fails on the last rank (above): that rank
  ** gets EMPI, every other rank of world EPEER naming it, in its group or
  ** not, and no group is made; then world still works */
  {
    nvfp4_comm *sub = NULL;
    int tp;
    char want[64];
    snprintf(want, sizeof want, "rank %d failed (MPI error)", mc_size - 1);
    for (tp = 1; tp <= mc_size; tp *= 2) {
      if (mc_size % tp != 0) continue;
      split_fail_rank = mc_size - 1;
      st = nvfp4_comm_split(world, tp, &sub);
      split_fail_rank = -1;
      EXPECT_EQ_I(st, mc_rank == mc_size - 1 ? NVFP4_EMPI : NVFP4_EPEER);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == mc_size - 1 ? "MPI_Comm_split" : want);
      EXPECT(sub == NULL);
      nvfp4_comm_destroy(sub);
      sub = NULL;
    }
    EXPECT_OK(nvfp4_comm_split(world, mc_size, &sub));
    EXPECT(nvfp4_comm_size(sub) == mc_size);
    nvfp4_comm_destroy(sub);
  }
  /* rel_error over the world with a bad ref on rank 0 only: rank 0 keeps its
  ** error, the others get EPEER, none waits in the sum */
  {
    nvfp4_tensor *a = input_of(mc_rank, SHAPE2(2, 16), NVFP4_F32);
    nvfp4_tensor *b = input_of(mc_rank, SHAPE2(2, 16), NVFP4_F32);
    double e = -1.0;
    st = nvfp4_rel_error(world, a, mc_rank == 0 ? NULL : b, &e);
    EXPECT_EQ_I(st, mc_rank == 0 ? NVFP4_EINVAL : NVFP4_EPEER);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 0 ? "rel_error: ref is NULL" : "rank 0 failed");
    EXPECT_OK(nvfp4_rel_error(world, a, b, &e));
    EXPECT(e == 0.0);
    /* one [M, K] matrix: [2, 1, 16] against [2, 16] is the same one; [16, 2]
    ** (the transpose, same numel) is refused on every rank */
    {
      nvfp4_tensor *a3 = NULL, *bt = input_of(mc_rank, SHAPE2(16, 2), NVFP4_F32);
      int64_t d3[3] = {2, 1, 16};
      EXPECT_OK(nvfp4_tensor_reshape(a, nvfp4_shape_make(3, d3), &a3));
      EXPECT_OK(nvfp4_rel_error(world, a3, a, &e));
      EXPECT(e == 0.0);
      EXPECT_ST(nvfp4_rel_error(world, a, bt, &e), NVFP4_EINVAL);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rel_error: x [2, 16] and ref [16, 2] are different "
                    "[M, K] matrices ([2, 16] vs [16, 2];");
      nvfp4_tensor_destroy(a3);
      nvfp4_tensor_destroy(bt);
    }
    /* x of another context on the last rank: the message is in the group's
    ** context (where the peers' EPEER is), naming x (it went to x's
    ** context and named ref, the one of the group's) */
    {
      nvfp4_ctx *other = NULL;
      nvfp4_tensor *xo = NULL;
      const int last = mc_size - 1;
      EXPECT_OK(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &other, NULL));
      if (other != NULL)
        EXPECT_OK(nvfp4_tensor_from_host(other, SHAPE2(2, 16), NVFP4_F32, (float[32]){0},
                                         32 * sizeof(float), &xo));
      st = nvfp4_rel_error(world, mc_rank == last ? xo : a, b, &e);
      EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EUSAGE : NVFP4_EPEER);
      EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == last ? "rel_error: x belongs to another "
                    "context than the group" : "failed");
      nvfp4_tensor_destroy(xo);
      nvfp4_ctx_destroy(other);
    }
    nvfp4_tensor_destroy(a);
    nvfp4_tensor_destroy(b);
  }
  /* and the comm still works afterwards */
  EXPECT_OK(nvfp4_comm_barrier(world));
}


/* nvfp4i_comm_check_meta, the NVFP4 gather's one round before its
** collectives: metadata first, then the amax pair (bitwise), then the
** status of the local set-up; each verdict the same on every rank. */
static void test_check_meta (void) {
  float a[2] = {1.5f, 2.0f}, b[2];
  int last = mc_size - 1;
  char want[128];
  nvfp4_status st, post;
  EXPECT_OK(nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4,
                                   3, a, 0, NULL, NVFP4_OK));
  /* a set-up failure on the last rank: it keeps its status and message,
  ** its peers get EPEER naming it */
  post = mc_rank == last ? nvfp4i_fail(mc_ctx, NVFP4_ENOMEM, "t: set-up failed here")
                         : NVFP4_OK;
  st = nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3, a, 0, NULL, post);
  EXPECT_EQ_I(st, mc_rank == last ? NVFP4_ENOMEM : NVFP4_EPEER);
  snprintf(want, sizeof want, "t: rank %d failed (", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == last ? "t: set-up failed here" : want);
  /* rank 1's columnwise amax differs: EMISMATCH everywhere, before rank
  ** 0's set-up failure; -0.0 differs from +0.0 (bits are compared) */
  b[0] = a[0];
  b[1] = mc_rank == 1 ? 2.5f : a[1];
  st = nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3, b, 0, NULL,
                              mc_rank == 0 ? NVFP4_ENOMEM : NVFP4_OK);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "t: rank 1's columnwise amax 2.5 differs from "
                "rank 0's 2: NVFP4 shards must share one global scale");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  b[0] = mc_rank == last ? -0.0f : 0.0f;
  b[1] = a[1];
  EXPECT_ST(nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3,
                                   b, 0, NULL, NVFP4_OK), NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "t: rank %d's rowwise amax -0 differs", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  /* the metadata come first: a shape mismatch hides the amax mismatch */
  b[0] = mc_rank == 1 ? 9.0f : a[0];
  st = nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(mc_rank == 1 ? 4 : 2, 16),
                              NVFP4_FP4, 3, b, 0, NULL, NVFP4_OK);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "t: ranks disagree: rank 1 has [4, 16] fp4");
  EXPECT(mc_same_everywhere(MPI_COMM_WORLD, nvfp4_last_error(mc_ctx)));
  /* no amax: not compared */
  EXPECT_OK(nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4,
                                   3, NULL, 0, NULL, NVFP4_OK));
  /* tags (the number of the amax reduction over the comm) instead of
  ** values: the same everywhere, nothing to compare; different, or values
  ** on some rank, a second round on every rank */
  {
    int round2 = -1;
    EXPECT_OK(nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3,
                                     NULL, 7, &round2, NVFP4_OK));
    EXPECT_EQ_I(round2, 0);
    EXPECT_OK(nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3,
                                     NULL, mc_rank == last ? 8 : 7, &round2, NVFP4_OK));
    EXPECT_EQ_I(round2, 1);
    round2 = -1;
    EXPECT_OK(nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3,
                                     mc_rank == 0 ? a : NULL, mc_rank == 0 ? 0 : 7, &round2,
                                     NVFP4_OK));
    EXPECT_EQ_I(round2, 1);
    /* a set-up failure still wins over the tags: no second round */
    round2 = -1;
    st = nvfp4i_comm_check_meta(world, "t", NVFP4_OK, SHAPE2(2, 16), NVFP4_FP4, 3, NULL,
                                mc_rank == last ? 8 : 7, &round2,
                                mc_rank == last ? nvfp4i_fail(mc_ctx, NVFP4_ENOMEM, "t: here")
                                                : NVFP4_OK);
    EXPECT_EQ_I(st, mc_rank == last ? NVFP4_ENOMEM : NVFP4_EPEER);
    EXPECT_EQ_I(round2, 0);
  }
  /* the second round: values compared bitwise; a rank that could not read
  ** its pair keeps its status, the others get EPEER */
  EXPECT_OK(nvfp4i_comm_check_amax(world, "t", NVFP4_OK, a));
  b[0] = a[0];
  b[1] = 3.0f;
  st = nvfp4i_comm_check_amax(world, "t", NVFP4_OK, mc_rank == last ? b : a);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "t: rank %d's columnwise amax 3 differs from rank 0's 2: NVFP4 "
           "shards must share one global scale", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  st = nvfp4i_comm_check_amax(world, "t", mc_rank == last ? nvfp4i_fail(mc_ctx, NVFP4_ECUDA,
                                                                         "t: read back")
                                                           : NVFP4_OK, a);
  EXPECT_EQ_I(st, mc_rank == last ? NVFP4_ECUDA : NVFP4_EPEER);
  snprintf(want, sizeof want, "t: rank %d failed reading its amax (", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == last ? "t: read back" : want);
}


/* Ranks in different calls on one comm (a rank that skipped a collective, or
** called another) get EMISMATCH on every rank instead of pairing the calls:
** the max all-reduce of floats against the one of ints (same MPI reduction
** and count: rank 0 read the float's bits as an int), reduce-scatter against
** all-reduce (they waited in different MPI calls), the plain gather against
** the NVFP4 one (the message named two equal shapes); each then works. */
static void test_different_calls (void) {
  const int last = mc_size - 1;
  nvfp4_tensor *x = NULL, *y = NULL;
  nvfp4_gather_opts go;
  nvfp4_qopts q;
  float f = 2.5f;
  int i = 7;
  char want[192];
  nvfp4_status st;
  st = mc_rank == last ? nvfp4_comm_all_reduce_max_f32(world, &f, 1)
                       : nvfp4_comm_all_reduce_max_int(world, &i, 1);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "the ranks are in different calls on this comm: rank %d in "
           "comm_all_reduce_max_f32, rank 0 in comm_all_reduce_max_int", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  EXPECT(i == 7 && f == 2.5f);                             /* untouched */
  /* the barrier agrees too (it waited in MPI_Barrier while the others sat in
  ** their reduction), and so does a caller's own collective */
  st = mc_rank == last ? nvfp4_comm_barrier(world) : nvfp4_comm_all_reduce_max_int(world, &i, 1);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "rank %d in comm_barrier, rank 0 in comm_all_reduce_max_int", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  st = mc_rank == last ? nvfp4_comm_agree(world, "my_exchange", NVFP4_OK) : nvfp4_comm_barrier(world);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "rank %d in my_exchange, rank 0 in comm_barrier", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  /* a caller's own failure reaches its peers; a NULL name is one */
  st = nvfp4_comm_agree(world, mc_rank == last ? NULL : "my_exchange", NVFP4_OK);
  EXPECT_EQ_I(st, mc_rank == last ? NVFP4_EINVAL : NVFP4_EPEER);
  if (mc_rank == last) EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "comm_agree: what is NULL");
  else {
    snprintf(want, sizeof want, "my_exchange: rank %d failed (", last);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  }
  st = nvfp4_comm_agree(world, "my_exchange", mc_rank == 0 ? NVFP4_ENOMEM : NVFP4_OK);
  EXPECT_EQ_I(st, mc_rank == 0 ? NVFP4_ENOMEM : NVFP4_EPEER);
  if (mc_rank != 0) EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "my_exchange: rank 0 failed (out of memory)");
  /* a status outside the enum reaches the peers as it is (a negative one
  ** lost to the others' 0 in a MAX: "rank r failed (ok)") */
  st = nvfp4_comm_agree(world, "my_exchange", mc_rank == last ? (nvfp4_status)-3 : NVFP4_OK);
  EXPECT_EQ_I(st, mc_rank == last ? (nvfp4_status)-3 : NVFP4_EPEER);
  if (mc_rank != last) EXPECT(strstr(nvfp4_last_error(mc_ctx), "failed (ok)") == NULL);
  /* two names whose 31-bit FNV-1a hashes collide are still different calls */
  st = nvfp4_comm_agree(world, mc_rank == last ? "step_558220" : "step_188904", NVFP4_OK);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  EXPECT_EQ_I(nvfp4_comm_agree(NULL, "my_exchange", NVFP4_OK), NVFP4_EINVAL);
  EXPECT_OK(nvfp4_comm_barrier(world));
  EXPECT_OK(nvfp4_comm_agree(world, "my_exchange", NVFP4_OK));
  EXPECT_OK(nvfp4_tensor_randn(mc_ctx, SHAPE3(16, 1, 64), NVFP4_BF16, 3, &x));
  st = mc_rank == last ? nvfp4_reduce_scatter(world, x, &y) : nvfp4_all_reduce_sum(world, x, &y);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "the ranks are in different calls on this comm: rank %d in reduce_scatter, "
           "rank 0 in all_reduce_sum", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);     /* after each rank's own call's name */
  EXPECT(y == NULL);
  memset(&go, 0, sizeof go);
  memset(&q, 0, sizeof q);
  q.rowwise = q.columnwise = 1;
  go.quant = &q;
  st = mc_rank == last ? nvfp4_all_gather_plain(world, x, &y) : nvfp4_all_gather(world, x, &go, &y);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "rank %d in all_gather_plain, rank 0 in all_gather", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  EXPECT(y == NULL);
  /* a quantize with amax_group (its agreement) against a plain gather (a
  ** metadata round): every agreement starts with the same MPI call, so
  ** these meet too (they waited in two different MPI calls) */
  q.amax_group = world;
  st = mc_rank == last ? nvfp4_quantize(mc_ctx, x, &q, &y) : nvfp4_all_gather_plain(world, x, &y);
  EXPECT_EQ_I(st, NVFP4_EMISMATCH);
  snprintf(want, sizeof want, "rank %d in quantize, rank 0 in all_gather_plain", last);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), want);
  EXPECT(y == NULL);
  EXPECT_OK(nvfp4_all_reduce_sum(world, x, &y));          /* the comm still works */
  EXPECT_OK(nvfp4_comm_all_reduce_max_f32(world, &f, 1));
  nvfp4_tensor_destroy(y);
  nvfp4_tensor_destroy(x);
}


static void test_groups (void) {
  nvfp4_comm *g = NULL;
  float v[2], got[4];
  nvfp4_tensor *x = NULL, *y = NULL;
  SKIP_IF(mc_size % 2 != 0 || mc_size < 4, "needs a world of 4 to hold two TP-2 groups");
  EXPECT_OK(nvfp4_comm_split(world, 2, &g));
  v[0] = (float)mc_rank; v[1] = (float)(10 * mc_rank);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE2(1, 2), NVFP4_F32, v, sizeof v, &x));
  EXPECT_OK(nvfp4_all_reduce_sum(g, x, &y));
  if (y != NULL) {
    int base = mc_rank / 2 * 2;
    EXPECT_OK(nvfp4_tensor_to_host(y, got, 2 * sizeof(float)));
    EXPECT(got[0] == (float)(2 * base + 1));
    EXPECT(got[1] == (float)(10 * (2 * base + 1)));
  }
  nvfp4_tensor_destroy(y);
  nvfp4_tensor_destroy(x);
  nvfp4_comm_destroy(g);
}


/* nvfp4_comm_create_mpi outside MPI's lifetime: EINVAL naming the rule,
** where any MPI call would abort the process.  A CPU context of its own
** (nothing of MPI is touched by it); returns the reason, "" when it held. */
static const char *comm_outside_mpi (const char *state) {
  static char why[512];
  nvfp4_ctx *ctx = NULL;
  nvfp4_comm *c = (nvfp4_comm *)&why;        /* must come back NULL */
  char want[160];
  nvfp4_status st;
  why[0] = '\0';
  if (nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL) != NVFP4_OK) return "no CPU context";
  snprintf(want, sizeof want, "comm_create_mpi: MPI is %s (call it between MPI_Init and "
           "MPI_Finalize)", state);
  st = nvfp4_comm_create_mpi(ctx, MPI_COMM_WORLD, &c);
  if (st != NVFP4_EINVAL || c != NULL || strcmp(nvfp4_last_error(ctx), want) != 0)
    snprintf(why, sizeof why, "MPI %s: status %d, out %s, message '%s', expected EINVAL, NULL, "
             "'%s'", state, (int)st, c ? "set" : "NULL", nvfp4_last_error(ctx), want);
  nvfp4_ctx_destroy(ctx);
  return why;
}

static const char *before_init;

static void test_comm_outside_mpi (void) {
  EXPECT_MSG(before_init[0] == '\0', "%s", before_init);
}


int main (int argc, char **argv) {
  int rc;
  before_init = comm_outside_mpi("not initialized");
  mc_init(&argc, &argv);
  if (nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &world) != NVFP4_OK)
    MPI_Abort(MPI_COMM_WORLD, 99);
  RUN(test_all_gather_rank_order);
  RUN(test_reduce_scatter);
  RUN(test_all_reduce);
  RUN(test_bf16_rounded_once);
  RUN(test_errors);
  RUN(test_check_meta);
  RUN(test_different_calls);
  RUN(test_groups);
  RUN(test_comm_outside_mpi);
  nvfp4_comm_destroy(world);
  rc = mc_finish();
  {
    const char *after = comm_outside_mpi("finalized");
    if (after[0] != '\0') {
      fprintf(stderr, "rank %d: comm_create_mpi after MPI_Finalize: %s\n", mc_rank, after);
      rc = 1;
    }
  }
  return rc;
}
