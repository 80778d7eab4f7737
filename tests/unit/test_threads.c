/*
** test_threads.c -- the library's thread-safety promise (nvfp4.h's
** conventions, "threads"): separate contexts used from separate threads at
** the same time are independent (CPU contexts; CUDA ones on one GPU where
** there is one, else that test skips).  A fixed set of jobs (quantize with RNE,
** SR, RHT, 2D, 4over6 and a given amax; dequantize both copies; GEMMs on FP4
** and plain operands, the float64 oracle, relative error; clone, equal,
** convert, reshape, narrow, swap_first_dims; a TP-1 Linear forward and
** backward) is run once on one thread for the expected bytes, then by
** NTHREADS threads at once, each with its own context, many times, and every
** byte of every result is compared (and each job must leave nothing
** allocated on its context: nvfp4_ctx_memory 0, on CUDA too, where it does
** not count the workspaces).  Then failing calls on every thread at once:
** each context keeps its own reason, naming its own value, and each
** thread's nvfp4_ctx_create message is its own.
**
** cmocka's asserts are for the main thread only (they longjmp): the worker
** threads record the first difference in their own slot, and the main
** thread asserts after joining them.  `make check-tsan` builds this test and
** the library sources with -fsanitize=thread.
*/
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "nvfp4.h"

#define NTHREADS  4
#define NJOBS     6
#define ITERS     24      /* jobs per thread: each job 16 times over all threads */
#define MAXSEG    96


/* ---- a job's results: every output's bytes, in order, each with a label ---- */

typedef struct record {
  unsigned char *b;                 /* the bytes of every segment, back to back */
  size_t n, cap;
  int nseg;
  struct { const char *what; size_t off, len; } seg[MAXSEG];
  char fail[640];                   /* "" or the call that failed and why */
} record;

static int add (record *r, const char *what, const void *p, size_t len) {
  if (r->nseg == MAXSEG) {
    snprintf(r->fail, sizeof r->fail, "%s: more than %d segments", what, MAXSEG);
    return 0;
  }
  if (r->n + len > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    unsigned char *nb;
    while (cap < r->n + len) cap *= 2;
    if ((nb = realloc(r->b, cap)) == NULL) {
      snprintf(r->fail, sizeof r->fail, "%s: out of memory", what);
      return 0;
    }
    r->b = nb;
    r->cap = cap;
  }
  if (len > 0) memcpy(r->b + r->n, p, len);
  r->seg[r->nseg].what = what;
  r->seg[r->nseg].off = r->n;
  r->seg[r->nseg].len = len;
  r->nseg++;
  r->n += len;
  return 1;
}

static void record_free (record *r) {
  free(r->b);
  memset(r, 0, sizeof *r);
}

/* "" when a and b hold the same segments, byte for byte; else the first
** difference, in why. */
static void record_diff (const record *a, const record *b, char *why, size_t n) {
  int i;
  size_t j;
  why[0] = '\0';
  if (strcmp(a->fail, b->fail) != 0) {
    snprintf(why, n, "failure '%.250s' vs '%.250s'", a->fail, b->fail);
    return;
  }
  if (a->nseg != b->nseg) {
    snprintf(why, n, "%d segments vs %d", a->nseg, b->nseg);
    return;
  }
  for (i = 0; i < a->nseg; i++) {
    if (strcmp(a->seg[i].what, b->seg[i].what) != 0 || a->seg[i].len != b->seg[i].len) {
      snprintf(why, n, "segment %d: %s (%zu bytes) vs %s (%zu bytes)", i, a->seg[i].what,
               a->seg[i].len, b->seg[i].what, b->seg[i].len);
      return;
    }
    if (memcmp(a->b + a->seg[i].off, b->b + b->seg[i].off, a->seg[i].len) == 0) continue;
    for (j = 0; j < a->seg[i].len; j++)
      if (a->b[a->seg[i].off + j] != b->b[b->seg[i].off + j]) {
        snprintf(why, n, "%s: byte %zu of %zu: 0x%02x vs 0x%02x", a->seg[i].what, j,
                 a->seg[i].len, a->b[a->seg[i].off + j], b->b[b->seg[i].off + j]);
        return;
      }
  }
}


/* ---- the job ------------------------------------------------------------ */

static nvfp4_shape shp (int n, int64_t a, int64_t b, int64_t c) {
  int64_t d[3] = {a, b, c};
  return nvfp4_shape_make(n, d);
}

/* Stop the job at the first failed call, with its reason in r->fail. */
#define RUN(r, ctx, call)  \
  do { nvfp4_status s_ = (call); if (s_ != NVFP4_OK) { \
    snprintf((r)->fail, sizeof (r)->fail, "%s: %s (%s)", #call, nvfp4_status_string(s_), \
             nvfp4_last_error(ctx)); \
    goto done; } } while (0)

/* A plain tensor's elements into r. */
static int add_plain (record *r, nvfp4_ctx *ctx, const char *what, const nvfp4_tensor *t) {
  const size_t nb = (size_t)nvfp4_shape_numel(nvfp4_tensor_shape(t)) *
                    nvfp4_dtype_size(nvfp4_tensor_dtype(t));
  void *h = malloc(nb ? nb : 1);
  int ok = 0;
  if (h == NULL || nvfp4_tensor_to_host(t, h, nb) != NVFP4_OK)
    snprintf(r->fail, sizeof r->fail, "%s: to_host: %s", what,
             h ? nvfp4_last_error(ctx) : "out of memory");
  else
    ok = add(r, what, h, nb);
  free(h);
  return ok;
}

/* An FP4 tensor into r: each present usage's amax, data and scale. */
static int add_fp4 (record *r, nvfp4_ctx *ctx, const nvfp4_tensor *q) {
  static const char *const bname[4] = {"rowwise data", "rowwise scale", "columnwise data",
                                       "columnwise scale"};
  int b, ok = 1;
  for (b = 0; b < 4 && ok; b++) {
    const size_t nb = (size_t)nvfp4_shape_numel(nvfp4_tensor_buffer_shape(q, (nvfp4_buffer)b));
    unsigned char *h;
    float amax = 0.0f;
    if (!(b < 2 ? nvfp4_tensor_has_rowwise(q) : nvfp4_tensor_has_columnwise(q))) continue;
    if ((h = malloc(nb ? nb : 1)) == NULL ||
        nvfp4_tensor_buffer_read(q, (nvfp4_buffer)b, h, nb) != NVFP4_OK ||
        nvfp4_tensor_amax(q, b >= 2, &amax) != NVFP4_OK) {
      snprintf(r->fail, sizeof r->fail, "%s: %s", bname[b],
               h ? nvfp4_last_error(ctx) : "out of memory");
      ok = 0;
    }
    else
      ok = (b == 1 || b == 3 || add(r, b == 0 ? "rowwise amax" : "columnwise amax", &amax,
                                    sizeof amax)) && add(r, bname[b], h, nb);
    free(h);
  }
  return ok;
}

/* Job j on ctx, everything it makes into r (r->fail set when a call fails).
** Shapes and seeds depend on j only, so every thread's run of job j must give
** the bytes of the single-threaded one. */
static void run_job (nvfp4_ctx *ctx, int j, record *r) {
  const int64_t M = 32 + 16 * (j % 3), K = 48 + 16 * (j % 2), N = 32;
  const uint64_t s = 1000u + (uint64_t)j;
  nvfp4_tensor *x32 = NULL, *x16 = NULL, *w = NULL, *bias = NULL, *dy = NULL;
  nvfp4_tensor *q[6] = {NULL}, *qw = NULL, *t = NULL, *t2 = NULL, *c = NULL;
  nvfp4_tensor *g = NULL, *g64 = NULL, *y = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  nvfp4_linear *lin = NULL;
  nvfp4_qopts o[6];
  double err = 0.0;
  int i, eq = -1;
  char why[160];
  memset(o, 0, sizeof o);
  o[0].rowwise = o[0].columnwise = 1;                                        /* RNE */
  o[1].rowwise = o[1].columnwise = o[1].sr = 1;                              /* SR */
  o[1].sr_seed = s * 7u + 1u;
  o[1].sr_offset = (uint64_t)j;
  o[2].rowwise = o[2].columnwise = o[2].rht = 1;                             /* RHT, bf16 */
  o[3].rowwise = o[3].columnwise = o[3].two_d = 1;                           /* 2D */
  o[4].rowwise = o[4].columnwise = o[4].four_over_six = 1;                   /* 4over6 */
  o[4].four_over_six_mse = (unsigned)(j & 1);
  o[5].rowwise = o[5].has_amax = 1;                                          /* given amax */
  o[5].amax[0] = o[5].amax[1] = 3.0f + (float)j;

  RUN(r, ctx, nvfp4_tensor_randn(ctx, shp(2, M, K, 0), NVFP4_F32, s, &x32));
  RUN(r, ctx, nvfp4_tensor_convert(x32, NVFP4_BF16, &x16));
  if (!add_plain(r, ctx, "x bf16", x16)) goto done;
  for (i = 0; i < 6; i++) {
    RUN(r, ctx, nvfp4_quantize(ctx, i == 2 || i == 5 ? x16 : x32, &o[i], &q[i]));
    if (!add_fp4(r, ctx, q[i])) goto done;
    RUN(r, ctx, nvfp4_dequantize(ctx, q[i], NVFP4_F32, &t));
    if (!add_plain(r, ctx, "dequantize", t)) goto done;
    nvfp4_tensor_destroy(t);
    t = NULL;
    if (nvfp4_tensor_has_columnwise(q[i])) {
      RUN(r, ctx, nvfp4_dequantize_columnwise(ctx, q[i], NVFP4_BF16, &t));
      if (!add_plain(r, ctx, "dequantize_columnwise", t)) goto done;
      nvfp4_tensor_destroy(t);
      t = NULL;
    }
  }

  /* GEMMs: fprop on FP4 (2D weight) with a bias, plain fp32 to bf16, wgrad's
  ** columnwise RHT operands, the float64 oracle and the error against it */
  RUN(r, ctx, nvfp4_tensor_uniform(ctx, shp(2, N, K, 0), NVFP4_F32, s + 1u, -2.0, 2.0, &w));
  RUN(r, ctx, nvfp4_tensor_uniform(ctx, shp(1, N, 0, 0), NVFP4_F32, s + 2u, -1.0, 1.0, &bias));
  RUN(r, ctx, nvfp4_quantize(ctx, w, &o[3], &qw));
  RUN(r, ctx, nvfp4_gemm(ctx, qw, NVFP4_ROWWISE, q[0], NVFP4_ROWWISE, bias, NVFP4_F32, &g));
  if (!add_plain(r, ctx, "gemm fp4", g)) goto done;
  RUN(r, ctx, nvfp4_gemm_ref64(ctx, qw, NVFP4_ROWWISE, q[0], NVFP4_ROWWISE, &g64));
  if (!add_plain(r, ctx, "gemm_ref64", g64)) goto done;
  nvfp4_tensor_destroy(g);
  g = NULL;
  RUN(r, ctx, nvfp4_gemm(ctx, qw, NVFP4_ROWWISE, q[0], NVFP4_ROWWISE, NULL, NVFP4_F32, &g));
  RUN(r, ctx, nvfp4_rel_error(NULL, g, g64, &err));
  if (!add(r, "rel_error", &err, sizeof err)) goto done;
  nvfp4_tensor_destroy(g);
  g = NULL;
  RUN(r, ctx, nvfp4_gemm(ctx, w, NVFP4_ROWWISE, x32, NVFP4_ROWWISE, NULL, NVFP4_BF16, &g));
  if (!add_plain(r, ctx, "gemm plain", g)) goto done;
  nvfp4_tensor_destroy(g);
  g = NULL;
  RUN(r, ctx, nvfp4_gemm(ctx, q[2], NVFP4_COLUMNWISE, q[2], NVFP4_COLUMNWISE, NULL, NVFP4_F32, &g));
  if (!add_plain(r, ctx, "gemm columnwise rht", g)) goto done;
  nvfp4_tensor_destroy(g);
  g = NULL;
  /* one large enough for OpenBLAS to split it over its own threads */
  RUN(r, ctx, nvfp4_tensor_uniform(ctx, shp(2, 64, 128, 0), NVFP4_F32, s + 5u, -1.0, 1.0, &t));
  RUN(r, ctx, nvfp4_tensor_uniform(ctx, shp(2, 80, 128, 0), NVFP4_F32, s + 6u, -1.0, 1.0, &t2));
  RUN(r, ctx, nvfp4_gemm(ctx, t, NVFP4_ROWWISE, t2, NVFP4_ROWWISE, NULL, NVFP4_F32, &g));
  if (!add_plain(r, ctx, "gemm large", g)) goto done;
  nvfp4_tensor_destroy(t);
  nvfp4_tensor_destroy(t2);
  t = t2 = NULL;

  /* tensor operations */
  RUN(r, ctx, nvfp4_tensor_clone(q[1], &c));
  RUN(r, ctx, nvfp4_tensor_equal(c, q[1], &eq, why, sizeof why));
  if (!add(r, "equal clone", &eq, sizeof eq)) goto done;
  RUN(r, ctx, nvfp4_tensor_equal(q[0], q[1], &eq, why, sizeof why));
  if (!add(r, "equal rne sr", &eq, sizeof eq) || !add(r, "why", why, strlen(why))) goto done;
  RUN(r, ctx, nvfp4_tensor_reshape(x32, shp(3, 2, M / 2, K), &t));
  RUN(r, ctx, nvfp4_swap_first_dims(ctx, t, &t2));
  if (!add_plain(r, ctx, "swap_first_dims", t2)) goto done;
  nvfp4_tensor_destroy(t2);
  t2 = NULL;
  RUN(r, ctx, nvfp4_tensor_narrow(x16, 0, 3 + j, 5, &t2));
  if (!add_plain(r, ctx, "narrow", t2)) goto done;

  /* a Linear layer, TP 1: TE's recipe (RHT input and grad, 2D weight, SR
  ** grads from the recipe's seed), forward and backward */
  {
    nvfp4_linear_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.in_features = K;
    cfg.out_features = N;
    cfg.bias = 1;
    cfg.params_dtype = NVFP4_BF16;
    cfg.recipe.seed = s;
    cfg.init_seed = s + 3u;
    RUN(r, ctx, nvfp4_linear_create(ctx, &cfg, &lin));
    RUN(r, ctx, nvfp4_linear_forward(lin, x16, &y));
    if (!add_plain(r, ctx, "linear y", y)) goto done;
    RUN(r, ctx, nvfp4_tensor_randn(ctx, shp(2, M, N, 0), NVFP4_BF16, s + 4u, &dy));
    RUN(r, ctx, nvfp4_linear_backward(lin, dy, &dx, &dw, &db));
    if (!add_plain(r, ctx, "linear dx", dx) || !add_plain(r, ctx, "linear dw", dw) ||
        !add_plain(r, ctx, "linear db", db))
      goto done;
  }
done:
  for (i = 0; i < 6; i++) nvfp4_tensor_destroy(q[i]);
  nvfp4_tensor_destroy(x32);
  nvfp4_tensor_destroy(x16);
  nvfp4_tensor_destroy(w);
  nvfp4_tensor_destroy(bias);
  nvfp4_tensor_destroy(dy);
  nvfp4_tensor_destroy(qw);
  nvfp4_tensor_destroy(t);
  nvfp4_tensor_destroy(t2);
  nvfp4_tensor_destroy(c);
  nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(g64);
  nvfp4_tensor_destroy(y);
  nvfp4_tensor_destroy(dx);
  nvfp4_tensor_destroy(dw);
  nvfp4_tensor_destroy(db);
  nvfp4_linear_destroy(lin);
}


/* ---- every thread's jobs against the single-threaded bytes --------------- */

static record expected[NJOBS];       /* written before the threads start, then read only */
static pthread_barrier_t start;      /* the threads begin together */

typedef struct worker {
  int id;
  int runs, bad;                     /* jobs run, jobs whose bytes differed */
  char first[768];                   /* the first difference ("" none) */
  uintptr_t version;                 /* where the thread's nvfp4_version_string wrote */
} worker;

static char version_main[160];       /* the main thread's version line, copied */

/* fn on NTHREADS threads at once, worker i (zeroed, id i) for thread i,
** released together at the start barrier; returns when all have ended. */
static void run_threads (void *(*fn)(void *), worker *w) {
  pthread_t th[NTHREADS];
  int i;
  assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
  for (i = 0; i < NTHREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, fn, &w[i]), 0);
  }
  for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&start);
}

static nvfp4_backend backend;        /* the contexts' (set before the threads start) */

static void *work (void *arg) {
  worker *w = (worker *)arg;
  nvfp4_ctx *ctx = NULL;
  const char *why = NULL;
  int i;
  if (nvfp4_ctx_create(backend, &ctx, &why) != NVFP4_OK)
    snprintf(w->first, sizeof w->first, "thread %d: ctx_create: %s", w->id, why);
  pthread_barrier_wait(&start);
  for (i = 0; ctx != NULL && i < ITERS; i++) {
    const int j = (w->id + i) % NJOBS;   /* different jobs at once, and the same one too */
    record got;
    char diff[600];
    memset(&got, 0, sizeof got);
    run_job(ctx, j, &got);
    record_diff(&expected[j], &got, diff, sizeof diff);
    /* every tensor of the job freed: nothing left on the context (a CUDA
    ** context's workspaces, cuBLAS's and the quantize's scratch, are not
    ** counted: nvfp4_ctx_memory) */
    if (diff[0] == '\0' && nvfp4_ctx_memory(ctx) != 0)
      snprintf(diff, sizeof diff, "%zu bytes allocated on the context after the job, want 0",
               nvfp4_ctx_memory(ctx));
    if (diff[0] != '\0' && w->bad++ == 0)
      snprintf(w->first, sizeof w->first, "thread %d, iteration %d, job %d: %s", w->id, i, j, diff);
    w->runs++;
    record_free(&got);
  }
  nvfp4_ctx_destroy(ctx);
  return NULL;
}

/* The jobs on ctx's backend, once on this thread, then by NTHREADS threads
** at once, each with its own context of that backend; ctx is destroyed
** before the threads start. */
static void contexts_on_threads (nvfp4_ctx *ctx) {
  worker w[NTHREADS];
  int i, j;
  backend = strcmp(nvfp4_ctx_backend(ctx), "cuda") == 0 ? NVFP4_BACKEND_CUDA : NVFP4_BACKEND_CPU;
  for (j = 0; j < NJOBS; j++) {
    memset(&expected[j], 0, sizeof expected[j]);
    run_job(ctx, j, &expected[j]);
    if (expected[j].fail[0] != '\0') print_error("job %d: %s\n", j, expected[j].fail);
    assert_string_equal(expected[j].fail, "");
    assert_true(expected[j].nseg > 40);       /* every step recorded something */
    assert_int_equal(nvfp4_ctx_memory(ctx), 0);
  }
  /* the jobs differ from each other (different data in each thread) */
  for (j = 1; j < NJOBS; j++) {
    char diff[600];
    record_diff(&expected[0], &expected[j], diff, sizeof diff);
    assert_string_not_equal(diff, "");
  }
  nvfp4_ctx_destroy(ctx);
  run_threads(work, w);
  for (i = 0; i < NTHREADS; i++) {
    if (w[i].first[0] != '\0') print_error("%s (%d of %d jobs differ)\n", w[i].first, w[i].bad, w[i].runs);
    assert_string_equal(w[i].first, "");
    assert_int_equal(w[i].runs, ITERS);
  }
  for (j = 0; j < NJOBS; j++) record_free(&expected[j]);
}

static void test_contexts_on_threads (void **state) {
  nvfp4_ctx *ctx = NULL;
  (void)state;
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL), NVFP4_OK);
  contexts_on_threads(ctx);
}

/* The same with CUDA contexts on one GPU (each thread's context makes it
** current there); skipped where there is none or the build has no CUDA.
** Their bytes are compared with a CUDA context's single-threaded run: the
** GEMMs' (cuBLAS) are not OpenBLAS's. */
static void test_cuda_contexts_on_threads (void **state) {
  nvfp4_ctx *ctx = NULL;
  (void)state;
  if (nvfp4_ctx_create(NVFP4_BACKEND_CUDA, &ctx, NULL) != NVFP4_OK) {
    skip();
    return;
  }
  contexts_on_threads(ctx);
}


/* ---- failing calls on every thread at once -------------------------------- */

#define ERR_ITERS 4000

/* 1 when the call gave want_st and the message want; else 0, the first
** difference kept in w->first. */
static int expect (worker *w, int i, const char *step, nvfp4_status st, nvfp4_status want_st,
                   const char *got, const char *want) {
  if (got == NULL) got = "(NULL)";
  if (st == want_st && strcmp(got, want) == 0) return 1;
  if (w->bad++ == 0)
    snprintf(w->first, sizeof w->first, "thread %d, iteration %d, %s: %s '%s', want %s '%s'",
             w->id, i, step, nvfp4_status_string(st), got, nvfp4_status_string(want_st), want);
  return 0;
}

/* Thread w->id fails calls with its own values: K = 17 + id in a quantize,
** the range [id + 1, id + 0.5) in uniform, B's K = 32 + 16 id in a GEMM,
** backend 100 + id in nvfp4_ctx_create; a successful call in between must
** not clear the context's reason.  And each thread's version line stays
** whole while the others write theirs (each thread has its own buffer). */
static void *fail_work (void *arg) {
  worker *w = (worker *)arg;
  nvfp4_ctx *ctx = NULL;
  nvfp4_tensor *x = NULL, *a = NULL, *b = NULL, *t = NULL;
  const int64_t K = 17 + w->id, KB = 32 + 16 * w->id;
  const double lo = w->id + 1.0, hi = w->id + 0.5;
  char want_q[128], want_u[128], want_g[128], want_c[160];
  const char *why = NULL;
  int i;
  snprintf(want_q, sizeof want_q, "quantize: shape [4, %lld]: last dim K=%lld is not a multiple "
           "of 16", (long long)K, (long long)K);
  snprintf(want_u, sizeof want_u, "uniform: range [%g, %g) is empty or not finite", lo, hi);
  snprintf(want_g, sizeof want_g, "gemm: reduction dims differ: A rowwise reads [8, 16], B "
           "rowwise reads [8, %lld]", (long long)KB);
  snprintf(want_c, sizeof want_c, "backend %d is not NVFP4_BACKEND_AUTO (0), NVFP4_BACKEND_CPU (1) "
           "or NVFP4_BACKEND_CUDA (2)", 100 + w->id);
  if (nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, &why) != NVFP4_OK ||
      nvfp4_tensor_create(ctx, shp(2, 4, K, 0), NVFP4_F32, &x) != NVFP4_OK ||
      nvfp4_tensor_create(ctx, shp(2, 8, 16, 0), NVFP4_F32, &a) != NVFP4_OK ||
      nvfp4_tensor_create(ctx, shp(2, 8, KB, 0), NVFP4_F32, &b) != NVFP4_OK) {
    snprintf(w->first, sizeof w->first, "thread %d: set-up: %s", w->id,
             ctx ? nvfp4_last_error(ctx) : why);
    w->bad++;
  }
  pthread_barrier_wait(&start);
  for (i = 0; w->bad == 0 && i < ERR_ITERS; i++) {
    nvfp4_ctx *c = (nvfp4_ctx *)0x1;
    const char *cwhy = NULL;
    nvfp4_status st = nvfp4_ctx_create((nvfp4_backend)(100 + w->id), &c, &cwhy);
    expect(w, i, "ctx_create", st, NVFP4_EINVAL, cwhy, want_c);
    if (c != NULL && w->bad++ == 0)
      snprintf(w->first, sizeof w->first, "thread %d: ctx_create left *out set", w->id);
    st = nvfp4_quantize(ctx, x, NULL, &t);
    expect(w, i, "quantize", st, NVFP4_EINVAL, nvfp4_last_error(ctx), want_q);
    st = nvfp4_tensor_uniform(ctx, shp(2, 4, 16, 0), NVFP4_F32, 7, lo, hi, &t);
    expect(w, i, "uniform", st, NVFP4_EINVAL, nvfp4_last_error(ctx), want_u);
    st = nvfp4_tensor_create(ctx, shp(2, 1, 16, 0), NVFP4_F32, &t);
    nvfp4_tensor_destroy(t);
    t = NULL;
    expect(w, i, "uniform, after a successful create", st, NVFP4_OK, nvfp4_last_error(ctx),
           want_u);
    st = nvfp4_gemm(ctx, a, NVFP4_ROWWISE, b, NVFP4_ROWWISE, NULL, NVFP4_F32, &t);
    expect(w, i, "gemm", st, NVFP4_EINVAL, nvfp4_last_error(ctx), want_g);
    /* this thread's create message is still its own after the others' */
    expect(w, i, "ctx_create, after the other calls", NVFP4_EINVAL, NVFP4_EINVAL, cwhy, want_c);
    {
      const char *v = nvfp4_version_string();
      w->version = (uintptr_t)v;
      expect(w, i, "version_string", NVFP4_OK, NVFP4_OK, v, version_main);
    }
    w->runs++;
  }
  nvfp4_tensor_destroy(x);
  nvfp4_tensor_destroy(a);
  nvfp4_tensor_destroy(b);
  nvfp4_ctx_destroy(ctx);
  return NULL;
}

static void test_errors_on_threads (void **state) {
  worker w[NTHREADS];
  int i;
  (void)state;
  snprintf(version_main, sizeof version_main, "%s", nvfp4_version_string());
  assert_true(strncmp(version_main, "nvfp4 ", 6) == 0);
  run_threads(fail_work, w);
  for (i = 0; i < NTHREADS; i++) {
    if (w[i].first[0] != '\0') print_error("%s (%d wrong)\n", w[i].first, w[i].bad);
    assert_string_equal(w[i].first, "");
    assert_int_equal(w[i].runs, ERR_ITERS);
  }
  /* the buffers were the threads' own (the main thread's too) */
  for (i = 0; i < NTHREADS; i++) {
    int k;
    assert_true(w[i].version != (uintptr_t)nvfp4_version_string());
    for (k = 0; k < i; k++) assert_true(w[i].version != w[k].version);
  }
}


int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_contexts_on_threads),
    cmocka_unit_test(test_cuda_contexts_on_threads),
    cmocka_unit_test(test_errors_on_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
