/*
** test_allocfail.c -- every allocation of the library fails in turn on one
** rank (nvfp4i_alloc_fail_after, lib/nvfp4_int.h: host allocations, tensor
** buffers, the CUDA backend's temporaries), through the collectives, the
** NVFP4 all-gather of the seed case and a row- and a column-parallel Linear
** with SP.  For allocation n = 1, 2, .. of a workload, until the workload
** runs through without reaching it:
**  - no rank waits for the failed one (a watchdog ends the job, naming the
**    workload and n, when a step takes more than WATCHDOG_S seconds);
**  - the rank whose allocation failed gets ENOMEM with a message about
**    memory; in a collective every peer gets EPEER naming that rank (the
**    conventions of lib/nvfp4.h); in a local step the peers succeed;
**  - nothing is lost: run again without the failure, on the same inputs and
**    the same layer, the workload gives the bytes of a run that never
**    failed (nvfp4_tensor_equal), so a failed Linear step keeps its weights
**    and SR offset;
**  - nothing leaks (the ASan build's make check runs this test too).
** The library may also absorb a failure (a fallback) if its results stay
** the same.  NVFP4_TEST_TRACE=1 prints each failed allocation's statuses.
*/
#include <signal.h>
#include <unistd.h>
#include "mpicheck.h"
#include "nvfp4_int.h"

#define NOUT 12
#define WATCHDOG_S 60

/* Each run of a workload has a context and a world comm of its own (made
** before the failure is armed), so that what a context makes once and keeps
** (the CUDA backend's quantize workspaces) is made under the failure too.
** The test's own bookkeeping goes over tc, a duplicate of MPI_COMM_WORLD
** that aborts on MPI errors, never over the comm the library uses. */
static nvfp4_ctx *ctx;
static nvfp4_comm *world;
static MPI_Comm tc;
static int trace;

/* What one workload needs across its steps: inputs and objects made
** before the failure is armed (setup), and what the steps make. */
typedef struct wl_state {
  nvfp4_tensor *in[4];
  nvfp4_linear *layer;
  nvfp4_comm *comm, *comm2;
  nvfp4_tensor *out[NOUT];
  double val[4];              /* host values the steps return */
} wl_state;

/* One run of a workload's steps. */
typedef struct sweep {
  const char *wl;
  int victim;           /* the rank whose allocation n fails */
  long n;               /* 0: none armed */
  int stopped;          /* a step failed on some rank: the later ones are skipped */
  int absorbed;         /* the failure fired and every step still succeeded */
} sweep;

typedef struct workload {
  const char *name;
  void (*setup) (wl_state *);
  void (*steps) (sweep *, wl_state *);
} workload;


/* ---- the watchdog -------------------------------------------------------- */

static char dog_msg[256];
static size_t dog_len;

static void dog_bark (int sig) {
  (void)sig;
  if (write(2, dog_msg, dog_len) < 0) _exit(3);
  _exit(3);
}

static void dog_arm (const sweep *s) {
  int n = snprintf(dog_msg, sizeof dog_msg, "[rank %d] test_allocfail: %s, allocation %ld of rank %d "
                   "failing: no progress for %d s (a rank waits for the failed one)\n",
                   mc_rank, s->wl, s->n, s->victim, WATCHDOG_S);
  dog_len = n > 0 ? (size_t)n < sizeof dog_msg ? (size_t)n : sizeof dog_msg - 1 : 0;
  signal(SIGALRM, dog_bark);
  alarm(WATCHDOG_S);
}


/* ---- a step -------------------------------------------------------------- */

#define LOCAL 0
#define COLL 1              /* the ranks agree on every failure: the peers get EPEER */
#define COLL_THEN_LOCAL 2   /* a collective part, then a local one (quantize's cast after its amax
                               reduction): a failure in the local part is the failed rank's alone */
#define COLL_HALF 3         /* a collective on the groups of half the ranks (steps_split): the
                               failed rank's group fails, naming its rank there; the others do not */

/* The size of steps_split's second groups: half the ranks, one at np 2. */
static int half (void) {
  return mc_size > 1 ? mc_size / 2 : 1;
}

/* After a call that every rank made (its status st): checks the statuses
** against the conventions, and stops the run on every rank when any rank
** failed.  coll: LOCAL, COLL or COLL_THEN_LOCAL (below).  Whether the armed failure fired
** in this step is the victim's to say (nvfp4i_alloc_fired). */
static void step_done (sweep *s, const char *what, int coll, nvfp4_status st) {
  int *all = malloc(sizeof *all * (size_t)mc_size), fired = 0, r, bad = 0;
  char msg[NVFP4I_ERRLEN];
  snprintf(msg, sizeof msg, "%s", st == NVFP4_OK ? "" : nvfp4_last_error(ctx));
  if (mc_rank == s->victim) fired = nvfp4i_alloc_fired();
  MPI_Allgather(&st, 1, MPI_INT, all, 1, MPI_INT, tc);
  MPI_Bcast(&fired, 1, MPI_INT, s->victim, tc);
  if (trace && fired && mc_rank == 0) {
    fprintf(stderr, "# %s, allocation %ld of rank %d: %s:", s->wl, s->n, s->victim, what);
    for (r = 0; r < mc_size; r++) fprintf(stderr, " %s", nvfp4_status_string((nvfp4_status)all[r]));
    fputc('\n', stderr);
  }
  if (!fired) {
    EXPECT_MSG(st == NVFP4_OK, "%s, allocation %ld of rank %d not reached: %s failed: %s (%s)", s->wl, s->n,
               s->victim, what, nvfp4_status_string(st), msg);
  } else if (all[s->victim] == NVFP4_OK) {
    /* absorbed by the library on the victim: the peers must not have failed either */
    EXPECT_MSG(st == NVFP4_OK, "%s, allocation %ld of rank %d: %s: the failed rank succeeded but this one "
               "got %s (%s)", s->wl, s->n, s->victim, what, nvfp4_status_string(st), msg);
  } else if (mc_rank == s->victim) {
    EXPECT_MSG(st == NVFP4_ENOMEM && (strstr(msg, "alloc") || strstr(msg, "memory")),
               "%s, allocation %ld failing: %s returned %s (%s), expected ENOMEM about memory", s->wl, s->n,
               what, nvfp4_status_string(st), msg);
  } else if (coll == COLL || (coll == COLL_THEN_LOCAL && st != NVFP4_OK) ||
             (coll == COLL_HALF && mc_rank / half() == s->victim / half())) {
    char rank[32];
    snprintf(rank, sizeof rank, "rank %d", coll == COLL_HALF ? s->victim % half() : s->victim);
    EXPECT_MSG(st == NVFP4_EPEER && strstr(msg, rank) != NULL,
               "%s, allocation %ld of rank %d failing: %s (a collective) returned %s on this rank (%s), "
               "expected EPEER naming %s", s->wl, s->n, s->victim, what, nvfp4_status_string(st), msg, rank);
  } else {
    EXPECT_MSG(st == NVFP4_OK, "%s, allocation %ld of rank %d failing: %s (local) returned %s on this rank "
               "(%s)", s->wl, s->n, s->victim, what, nvfp4_status_string(st), msg);
  }
  for (r = 0; r < mc_size; r++) bad |= all[r] != NVFP4_OK;
  if (bad) s->stopped = 1;
  else if (fired) s->absorbed = 1;
  free(all);
}

/* Runs `call` on every rank unless an earlier step failed somewhere. */
#define STEP(s, what, coll, call) \
  do { if (!(s)->stopped) step_done((s), (what), (coll), (call)); } while (0)


/* ---- the workloads ------------------------------------------------------- */

static nvfp4_tensor *randn (nvfp4_shape s, nvfp4_dtype dt, uint64_t seed) {
  nvfp4_tensor *t = NULL;
  nvfp4_status st = nvfp4_tensor_randn(ctx, s, dt, seed, &t);
  EXPECT_MSG(st == NVFP4_OK, "randn: %s (%s)", nvfp4_status_string(st), nvfp4_last_error(ctx));
  return t;
}

static void setup_small (wl_state *w) {
  w->in[0] = randn(SHAPE2(32, 64), NVFP4_BF16, 10 + (uint64_t)mc_rank);
  w->in[1] = randn(SHAPE3(16, 1, 64), NVFP4_BF16, 20 + (uint64_t)mc_rank);
  w->in[2] = randn(SHAPE2(16 * mc_size, 64), NVFP4_F32, 30 + (uint64_t)mc_rank);
  w->in[3] = randn(SHAPE3(8, 3, 32), NVFP4_BF16, 40 + (uint64_t)mc_rank);    /* M_l = 24: not quantizable */
}

/* quantize with the amax MAX-reduced over the group (RHT, SR). */
static void steps_quantize (sweep *s, wl_state *w) {
  nvfp4_qopts q;
  memset(&q, 0, sizeof q);
  q.rowwise = q.columnwise = q.rht = q.sr = 1;
  q.sr_seed = 5;
  q.amax_group = world;
  STEP(s, "quantize with amax_group", COLL_THEN_LOCAL, nvfp4_quantize(ctx, w->in[0], &q, &w->out[0]));
  STEP(s, "quantize (local)", LOCAL, nvfp4_quantize(ctx, w->in[1], NULL, &w->out[1]));
}

/* The seed case's gather: grad_output [S/TP, 1, H] quantized rowwise and
** columnwise with RHT, flattened to 2-D (the fix); then its async form, the
** gather of FP4 shards, and of shards that are not quantizable alone
** ([8, 3, 32]: M_l = 24, the high-precision fallback). */
static void steps_gather (sweep *s, wl_state *w) {
  nvfp4_qopts q;
  nvfp4_gather_opts g;
  nvfp4_handle *h = NULL;
  memset(&q, 0, sizeof q);
  memset(&g, 0, sizeof g);
  q.rowwise = q.columnwise = q.rht = 1;
  q.amax_group = world;
  g.quant = &q;
  g.rule = NVFP4_CW_FLAT2D;
  STEP(s, "all_gather of [S/TP, 1, H]", COLL, nvfp4_all_gather(world, w->in[1], &g, &w->out[0]));
  STEP(s, "all_gather_async", COLL, nvfp4_all_gather_async(world, w->in[1], &g, &h));
  STEP(s, "handle_take", LOCAL, nvfp4_handle_take(h, &w->out[1]));
  nvfp4_handle_destroy(h);
  STEP(s, "quantize with amax_group", COLL_THEN_LOCAL, nvfp4_quantize(ctx, w->in[1], &q, &w->out[2]));
  memset(&g, 0, sizeof g);
  g.rowwise = g.columnwise = 1;
  STEP(s, "all_gather of FP4 shards", COLL, nvfp4_all_gather(world, w->out[2], &g, &w->out[3]));
  /* shards that cannot be quantized alone: gathered in high precision, then quantized */
  memset(&g, 0, sizeof g);
  g.quant = &q;
  STEP(s, "all_gather of unquantizable shards", COLL, nvfp4_all_gather(world, w->in[3], &g, &w->out[4]));
}

static void steps_plain (sweep *s, wl_state *w) {
  float v[2] = {(float)mc_rank, 1.0f};
  double e = -1;
  STEP(s, "all_gather_plain", COLL, nvfp4_all_gather_plain(world, w->in[0], &w->out[0]));
  STEP(s, "reduce_scatter (bf16)", COLL, nvfp4_reduce_scatter(world, w->in[0], &w->out[1]));
  STEP(s, "all_reduce_sum (bf16)", COLL, nvfp4_all_reduce_sum(world, w->in[0], &w->out[2]));
  STEP(s, "reduce_scatter (fp32)", COLL, nvfp4_reduce_scatter(world, w->in[2], &w->out[3]));
  STEP(s, "all_reduce_sum (fp32)", COLL, nvfp4_all_reduce_sum(world, w->in[2], &w->out[4]));
  STEP(s, "all_reduce_max_f32", COLL, nvfp4_comm_all_reduce_max_f32(world, v, 2));
  STEP(s, "barrier", COLL, nvfp4_comm_barrier(world));
  STEP(s, "rel_error", COLL, nvfp4_rel_error(world, w->out[2], w->in[0], &e));
  w->val[0] = v[0];
  w->val[1] = v[1];
  w->val[2] = e;
}

/* The local operations (only the failed rank fails), then the relative
** error, a collective. */
static void steps_local (sweep *s, wl_state *w) {
  nvfp4_qopts q;
  int64_t d[3] = {2, 16, 64};
  int eq = 0;
  double e = 0;
  memset(&q, 0, sizeof q);
  q.rowwise = q.columnwise = q.rht = 1;
  STEP(s, "quantize", LOCAL, nvfp4_quantize(ctx, w->in[0], &q, &w->out[0]));
  STEP(s, "dequantize", LOCAL, nvfp4_dequantize(ctx, w->out[0], NVFP4_F32, &w->out[1]));
  STEP(s, "dequantize_columnwise", LOCAL,
       nvfp4_dequantize_columnwise(ctx, w->out[0], NVFP4_BF16, &w->out[2]));
  STEP(s, "swap_first_dims", LOCAL, nvfp4_swap_first_dims(ctx, w->in[1], &w->out[3]));
  STEP(s, "gemm (fprop-like)", LOCAL, nvfp4_gemm(ctx, w->out[0], NVFP4_ROWWISE, w->out[0], NVFP4_ROWWISE,
                                                 NULL, NVFP4_BF16, &w->out[4]));
  STEP(s, "gemm (wgrad-like, RHT)", LOCAL, nvfp4_gemm(ctx, w->out[0], NVFP4_COLUMNWISE, w->out[0],
                                                      NVFP4_COLUMNWISE, NULL, NVFP4_F32, &w->out[5]));
  STEP(s, "gemm_ref64", LOCAL, nvfp4_gemm_ref64(ctx, w->out[0], NVFP4_ROWWISE, w->out[0], NVFP4_ROWWISE,
                                                &w->out[6]));
  STEP(s, "convert", LOCAL, nvfp4_tensor_convert(w->in[2], NVFP4_BF16, &w->out[7]));
  STEP(s, "narrow", LOCAL, nvfp4_tensor_narrow(w->in[2], 0, 3, 5, &w->out[8]));
  STEP(s, "reshape (fp4)", LOCAL, nvfp4_tensor_reshape(w->out[0], nvfp4_shape_make(3, d), &w->out[9]));
  STEP(s, "clone (fp4)", LOCAL, nvfp4_tensor_clone(w->out[0], &w->out[10]));
  STEP(s, "tensor_equal", LOCAL, nvfp4_tensor_equal(w->out[10], w->out[0], &eq, NULL, 0));
  EXPECT(s->stopped || eq == 1);
  STEP(s, "rel_error", COLL, nvfp4_rel_error(world, w->out[1], w->in[0], &e));
  w->val[0] = e;
  w->val[1] = eq;
}

/* TP groups made by splits, used at once: one group of every rank, then
** groups of half the ranks (of one rank at np 2), where a rank failing in
** one group must fail the split in the others too. */
static void steps_split (sweep *s, wl_state *w) {
  if (w->comm == NULL) STEP(s, "comm_split", COLL, nvfp4_comm_split(world, mc_size, &w->comm));
  STEP(s, "all_gather_plain on the split", COLL, nvfp4_all_gather_plain(w->comm, w->in[0], &w->out[0]));
  if (w->comm2 == NULL) STEP(s, "comm_split into halves", COLL, nvfp4_comm_split(world, half(), &w->comm2));
  STEP(s, "all_gather_plain on a half", COLL_HALF, nvfp4_all_gather_plain(w->comm2, w->in[0], &w->out[1]));
}

static nvfp4_linear_config config (nvfp4_parallel p, int64_t K, int64_t N) {
  nvfp4_linear_config c;
  memset(&c, 0, sizeof c);
  c.in_features = K;
  c.out_features = N;
  c.bias = 1;
  c.parallel = p;
  c.sequence_parallel = 1;
  c.tp_group = world;
  c.recipe.seed = 7;
  c.init_seed = 100;
  return c;
}

/* 64 features, or 16 per rank past 4 ranks (a split dim's share must be a
** multiple of 16). */
static int64_t feat (void) {
  return mc_size > 4 ? 16 * (int64_t)mc_size : 64;
}

/* The seed case: row-parallel with SP, B = 1, NVFP4 recipe (RHT, SR, 2D
** weights, the grad's amax reduced): x [S, 1, K/TP], dy [S/TP, 1, N]. */
static void setup_row (wl_state *w) {
  const int64_t S = 16 * mc_size, H = feat();
  w->in[0] = randn(SHAPE3(S, 1, H / mc_size), NVFP4_BF16, 40 + (uint64_t)mc_rank);
  w->in[1] = randn(SHAPE3(S / mc_size, 1, H), NVFP4_BF16, 50 + (uint64_t)mc_rank);
}

/* Column-parallel with SP, B = 2: x [S/TP, 2, K], dy [S, 2, N/TP]. */
static void setup_col (wl_state *w) {
  const int64_t S = 16 * mc_size, H = feat();
  w->in[0] = randn(SHAPE3(S / mc_size, 2, H), NVFP4_BF16, 60 + (uint64_t)mc_rank);
  w->in[1] = randn(SHAPE3(S, 2, H / mc_size), NVFP4_BF16, 70 + (uint64_t)mc_rank);
}

/* Row-parallel with SP, B = 3 (odd): x [S, 3, K/TP], dy [S/TP, 3, N]. */
static void setup_row3 (wl_state *w) {
  const int64_t S = 16 * mc_size, H = feat();
  w->in[0] = randn(SHAPE3(S, 3, H / mc_size), NVFP4_BF16, 80 + (uint64_t)mc_rank);
  w->in[1] = randn(SHAPE3(S / mc_size, 3, H), NVFP4_BF16, 90 + (uint64_t)mc_rank);
}

/* A Linear layer's forward and backward with config c (the layer is made
** by the first run and kept by the run again after a failure). */
static void steps_layer (sweep *s, wl_state *w, const nvfp4_linear_config *c) {
  if (w->layer == NULL) STEP(s, "linear_create", COLL, nvfp4_linear_create(ctx, c, &w->layer));
  STEP(s, "linear_forward", COLL, nvfp4_linear_forward(w->layer, w->in[0], &w->out[0]));
  STEP(s, "linear_backward", COLL,
       nvfp4_linear_backward(w->layer, w->in[1], &w->out[1], &w->out[2], &w->out[3]));
}

/* Row+SP, B = 3: a frozen weight quantized with 4over6, the operands kept. */
static void steps_row_frozen (sweep *s, wl_state *w) {
  nvfp4_linear_config c = config(NVFP4_PARALLEL_ROW, feat(), feat());
  c.frozen_weight = 1;
  c.keep_operands = 1;
  c.recipe.four_over_six_weights = 1;
  steps_layer(s, w, &c);
}

/* Column+SP, B = 2, the BF16 baseline (no quantization). */
static void steps_col_bf16 (sweep *s, wl_state *w) {
  nvfp4_linear_config c = config(NVFP4_PARALLEL_COLUMN, feat(), feat());
  c.recipe.kind = NVFP4_RECIPE_BF16;
  steps_layer(s, w, &c);
}

static void steps_linear (sweep *s, wl_state *w, nvfp4_parallel p) {
  nvfp4_linear_config c = config(p, feat(), feat());
  if (w->layer == NULL) STEP(s, "linear_create", COLL, nvfp4_linear_create(ctx, &c, &w->layer));
  STEP(s, "linear_forward", COLL, nvfp4_linear_forward(w->layer, w->in[0], &w->out[0]));
  STEP(s, "linear_backward", COLL,
       nvfp4_linear_backward(w->layer, w->in[1], &w->out[1], &w->out[2], &w->out[3]));
}

static void steps_row (sweep *s, wl_state *w) { steps_linear(s, w, NVFP4_PARALLEL_ROW); }
static void steps_col (sweep *s, wl_state *w) { steps_linear(s, w, NVFP4_PARALLEL_COLUMN); }

static const workload workloads[] = {
  {"quantize", setup_small, steps_quantize},
  {"local operations", setup_small, steps_local},
  {"gather", setup_small, steps_gather},
  {"plain collectives", setup_small, steps_plain},
  {"comm_split", setup_small, steps_split},
  {"row-parallel Linear, SP, B = 1", setup_row, steps_row},
  {"column-parallel Linear, SP, B = 2", setup_col, steps_col},
  {"row-parallel Linear, SP, B = 3, frozen 4over6 weight, operands kept", setup_row3, steps_row_frozen},
  {"column-parallel Linear, SP, B = 2, BF16 baseline", setup_col, steps_col_bf16},
};


/* ---- the sweep ----------------------------------------------------------- */

static void drop_outputs (wl_state *w) {
  int i;
  for (i = 0; i < NOUT; i++) {
    nvfp4_tensor_destroy(w->out[i]);
    w->out[i] = NULL;
  }
}

static void teardown (wl_state *w) {
  int i;
  drop_outputs(w);
  for (i = 0; i < 4; i++) nvfp4_tensor_destroy(w->in[i]);
  nvfp4_linear_destroy(w->layer);
  nvfp4_comm_destroy(w->comm);
  nvfp4_comm_destroy(w->comm2);
  memset(w, 0, sizeof *w);
}

/* A tensor as host bytes: shape, dtype, then a plain tensor's elements, or
** an FP4 tensor's nominal dtype, each present buffer (shape, bytes) and
** amax bits: what nvfp4_tensor_equal compares, kept past its context. */
typedef struct blob {
  unsigned char *p;
  size_t n;
} blob;

static void blob_add (blob *b, const void *p, size_t n) {
  unsigned char *q = realloc(b->p, b->n + n + 1);
  if (q == NULL) {
    fprintf(stderr, "test_allocfail: out of host memory\n");
    MPI_Abort(MPI_COMM_WORLD, 99);
  }
  if (n > 0) memcpy(q + b->n, p, n);
  b->p = q;
  b->n += n;
}

/* ndim and the dims in use (the struct's other bytes are not the shape's) */
static void blob_add_shape (blob *b, nvfp4_shape sh) {
  int64_t d[NVFP4_MAX_DIMS + 1];
  int i;
  d[0] = sh.ndim;
  for (i = 0; i < sh.ndim && i < NVFP4_MAX_DIMS; i++) d[i + 1] = sh.dim[i];
  blob_add(b, d, sizeof d[0] * (size_t)(i + 1));
}

static blob blob_of (const nvfp4_tensor *t) {
  blob b = {NULL, 0};
  nvfp4_shape sh = nvfp4_tensor_shape(t);
  nvfp4_dtype dt = nvfp4_tensor_dtype(t);
  size_t n;
  void *h;
  int u;
  blob_add_shape(&b, sh);
  blob_add(&b, &dt, sizeof dt);
  if (dt != NVFP4_FP4) {
    n = (size_t)nvfp4_shape_numel(sh) * nvfp4_dtype_size(dt);
    h = calloc(1, n + 1);
    EXPECT(h != NULL && nvfp4_tensor_to_host(t, h, n) == NVFP4_OK);
    blob_add(&b, h, n);
    free(h);
    return b;
  }
  dt = nvfp4_tensor_nominal_dtype(t);
  blob_add(&b, &dt, sizeof dt);
  for (u = NVFP4_ROWWISE_DATA; u <= NVFP4_COLUMNWISE_SCALE; u++) {
    nvfp4_shape bs = nvfp4_tensor_buffer_shape(t, (nvfp4_buffer)u);
    blob_add_shape(&b, bs);
    if (bs.ndim == 0) continue;
    n = (size_t)nvfp4_shape_numel(bs);
    h = calloc(1, n + 1);
    EXPECT(h != NULL && nvfp4_tensor_buffer_read(t, (nvfp4_buffer)u, h, n) == NVFP4_OK);
    blob_add(&b, h, n);
    free(h);
  }
  for (u = 0; u < 2; u++) {
    float a = 0;
    if (u ? nvfp4_tensor_has_columnwise(t) : nvfp4_tensor_has_rowwise(t))
      EXPECT(nvfp4_tensor_amax(t, u, &a) == NVFP4_OK);
    blob_add(&b, &a, sizeof a);
  }
  return b;
}

/* A run's results: its outputs as host bytes and its host values. */
typedef struct results {
  blob out[NOUT];
  double val[4];
} results;

static void results_take (results *r, const wl_state *w) {
  int i;
  for (i = 0; i < NOUT; i++)
    if (w->out[i] != NULL) r->out[i] = blob_of(w->out[i]);
  memcpy(r->val, w->val, sizeof r->val);
}

static void results_free (results *r) {
  int i;
  for (i = 0; i < NOUT; i++) free(r->out[i].p);
  memset(r, 0, sizeof *r);
}

/* The outputs and host values equal the reference run's, byte for byte. */
static void same_results (const sweep *s, const results *got, const results *ref) {
  int i;
  for (i = 0; i < NOUT; i++)
    EXPECT_MSG(got->out[i].n == ref->out[i].n &&
               (ref->out[i].n == 0 || memcmp(got->out[i].p, ref->out[i].p, ref->out[i].n) == 0),
               "%s, after allocation %ld of rank %d failed, run again: output %d %s a run that never "
               "failed", s->wl, s->n, s->victim, i,
               got->out[i].n == 0 ? "is missing, unlike" : ref->out[i].n == 0 ? "is there, unlike"
                                                                            : "differs from");
  EXPECT_MSG(memcmp(got->val, ref->val, sizeof got->val) == 0, "%s, after allocation %ld of rank %d failed, "
             "run again: a host value differs from a run that never failed (%g %g %g against %g %g %g)",
             s->wl, s->n, s->victim, got->val[0], got->val[1], got->val[2], ref->val[0], ref->val[1],
             ref->val[2]);
}

/* After a failed run: every output a step made on this rank (one that
** returned OK here, whatever its peers or later steps did) equals the
** reference run's, so a rank told OK by a step whose peer failed did not
** get a result computed without that peer's part. */
static void made_results_same (const sweep *s, const results *got, const results *ref) {
  int i;
  for (i = 0; i < NOUT; i++)
    if (got->out[i].n != 0)
      EXPECT_MSG(got->out[i].n == ref->out[i].n && memcmp(got->out[i].p, ref->out[i].p, ref->out[i].n) == 0,
                 "%s, allocation %ld of rank %d failing: output %d, which a step returned OK on this rank, "
                 "differs from a run that never failed", s->wl, s->n, s->victim, i);
}

/* A context of the backend under test, and a world comm on it. */
static void ctx_open (void) {
  const char *why = "";
  const int cuda = strcmp(nvfp4_ctx_backend(mc_ctx), "cuda") == 0;
  if (nvfp4_ctx_create(cuda ? NVFP4_BACKEND_CUDA : NVFP4_BACKEND_CPU, &ctx, &why) != NVFP4_OK ||
      nvfp4_comm_create_mpi(ctx, MPI_COMM_WORLD, &world) != NVFP4_OK) {
    fprintf(stderr, "test_allocfail: cannot make a context and a comm: %s %s\n", why,
            ctx ? nvfp4_last_error(ctx) : "");
    MPI_Abort(MPI_COMM_WORLD, 99);
  }
}

static void ctx_close (void) {
  nvfp4_comm_destroy(world);
  nvfp4_ctx_destroy(ctx);
  world = NULL;
  ctx = NULL;
}

/* Whether a check has failed on any rank (so that every rank stops alike). */
static int any_fail (void) {
  int f = mc_fail, all = 0;
  MPI_Allreduce(&f, &all, 1, MPI_INT, MPI_MAX, tc);
  return all > 0;
}

static void sweep_start (sweep *s, const workload *wl, int victim, long n) {
  memset(s, 0, sizeof *s);
  s->wl = wl->name;
  s->victim = victim;
  s->n = n;
}

/* Allocation n = 1, 2, .. of wl fails on `victim` until a run does not
** reach it; returns how many allocations the workload made there. */
static long sweep_workload (const workload *wl, int victim, int *absorbed) {
  results ref, got;
  wl_state w;
  sweep s;
  long n;
  int fired = 0;
  memset(&w, 0, sizeof w);
  memset(&ref, 0, sizeof ref);
  sweep_start(&s, wl, victim, 0);
  ctx_open();
  wl->setup(&w);
  wl->steps(&s, &w);                                      /* the reference run */
  EXPECT_MSG(!s.stopped, "%s: failed without any failure injected", wl->name);
  results_take(&ref, &w);
  teardown(&w);
  ctx_close();
  for (n = 1; !any_fail(); n++) {
    sweep_start(&s, wl, victim, n);
    ctx_open();
    wl->setup(&w);
    dog_arm(&s);
    MPI_Barrier(tc);
    if (mc_rank == victim) nvfp4i_alloc_fail_after(n);
    wl->steps(&s, &w);
    fired = mc_rank == victim ? nvfp4i_alloc_fired() : 0;
    nvfp4i_alloc_fail_after(0);
    MPI_Bcast(&fired, 1, MPI_INT, victim, tc);
    if (s.stopped) {
      memset(&got, 0, sizeof got);
      results_take(&got, &w);
      made_results_same(&s, &got, &ref);
      results_free(&got);
      /* again without the failure, on what the failed run left */
      drop_outputs(&w);
      memset(w.val, 0, sizeof w.val);
      sweep_start(&s, wl, victim, n);
      wl->steps(&s, &w);
      EXPECT_MSG(!s.stopped, "%s: run again after allocation %ld of rank %d failed, it failed", wl->name,
                 n, victim);
    } else if (s.absorbed) {
      *absorbed += 1;
    }
    alarm(0);
    memset(&got, 0, sizeof got);
    results_take(&got, &w);
    same_results(&s, &got, &ref);
    results_free(&got);
    teardown(&w);
    ctx_close();
    if (!fired) break;                                    /* n - 1 allocations, each failed once */
  }
  results_free(&ref);
  return fired ? n : n - 1;
}

static void sweep_all (int victim) {
  size_t i;
  for (i = 0; i < sizeof workloads / sizeof *workloads && !any_fail(); i++) {
    int absorbed = 0;
    long n = sweep_workload(&workloads[i], victim, &absorbed);
    if (mc_rank == 0)
      printf("# %s: %ld allocations of rank %d failed in turn (%d absorbed by the library)\n",
             workloads[i].name, n, victim, absorbed);
    EXPECT_MSG(n > 0, "%s: no allocation on rank %d", workloads[i].name, victim);
  }
}

static void test_alloc_fails_on_last_rank (void) { sweep_all(mc_size - 1); }
static void test_alloc_fails_on_rank_0 (void) { sweep_all(0); }


int main (int argc, char **argv) {
  mc_init(&argc, &argv);
  trace = getenv("NVFP4_TEST_TRACE") != NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &tc);
  MPI_Comm_set_errhandler(tc, MPI_ERRORS_ARE_FATAL);
  RUN(test_alloc_fails_on_last_rank);
  RUN(test_alloc_fails_on_rank_0);
  MPI_Comm_free(&tc);
  return mc_finish();
}
