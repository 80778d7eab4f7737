/*
** cuda_bench.c -- bandwidth of the CUDA kernels as a ratio to a
** device-to-device copy of the same bytes measured in the same run
** (design.md "Performance model"), and the NVFP4 Linear layer's forward +
** backward time relative to bf16.  A benchmark, not a test: run by hand on
** the GPU machine.
**
**   bench/cuda_bench [quant|quant-small|linear|linear-lib|linear-parts|all] [iterations]
**   bench/cuda_bench quant-at M K [iterations]     (the quantize figures at [M, K])
**
** Bytes moved per element: quantize rowwise+columnwise 2 (bf16 in) +
** 2 * (0.5 + 1/16) out = 3.125; dequantize to bf16 0.5 + 1/16 + 2 =
** 2.5625; swap_first_dims 2 + 2; the copy moves 2 * its size.  Kernel-only
** figures call the backend entry on preallocated outputs (what the kernel
** moves); "api" figures time the public call, allocation included.  Each
** timed cast's bytes are compared with nvfp4_quantize's (same options, amax
** given), untimed; a difference ends the run (exit 1).
*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nvfp4.h"
#include "nvfp4_int.h"
#include "bench_args.h"

static nvfp4_ctx *ctx;
static int iters = 20;


static double now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


#define OK(call) do { nvfp4_status s_ = (call); if (s_ != NVFP4_OK) { \
  fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, \
          nvfp4_status_string(s_), nvfp4_last_error(ctx)); exit(1); } } while (0)


/* Seconds per D2D copy of n bytes (moves 2n).  It runs first, right after
** the input's host-side randn, seconds in which the GPU idled (SM clock
** down to ~345 MHz, .library KINDS.md): one warm-up copy (~65 us) could
** leave the timed ones on the way up, a slower bound that would flatter
** every ratio; so copy for at least 0.1 s before timing. */
static double copy_time (void *dst, const void *src, size_t n) {
  double t, t0 = now();
  int i;
  do {
    for (i = 0; i < 8; i++) OK(ctx->ops->copy2d(ctx, dst, n, src, n, 1, n));
    OK(nvfp4_ctx_sync(ctx));
  } while (now() - t0 < 0.1);
  t = now();
  for (i = 0; i < iters; i++) OK(ctx->ops->copy2d(ctx, dst, n, src, n, 1, n));
  OK(nvfp4_ctx_sync(ctx));
  return (now() - t) / iters;
}


static void report (const char *what, double bytes, double t, double bound_bw) {
  double bw = bytes / t;
  printf("%-52s %9.1f us %8.1f GB/s  %.3f of copy\n", what, t * 1e6, bw * 1e-9, bw / bound_bw);
}


/* Seconds per call of the backend's cast of x into q (one call first, not
** timed). */
static double time_cast (nvfp4_ctx *ctx, const nvfp4_tensor *x, const nvfp4_qopts *o,
                         nvfp4_tensor *q, int iters) {
  double t;
  int i;
  OK(ctx->ops->quantize(ctx, x, o, q));
  OK(nvfp4_ctx_sync(ctx));
  t = now();
  for (i = 0; i < iters; i++) OK(ctx->ops->quantize(ctx, x, o, q));
  OK(nvfp4_ctx_sync(ctx));
  return (now() - t) / iters;
}


/* The timed cast calls the backend entry on a tensor set up here: its bytes
** (all four buffers, padding included) must be those of the public
** nvfp4_quantize with the same options (which tests/unit/test_cuda_vs_ref
** holds to the CPU reference), else the figure timed something else. */
static void same_bytes (const nvfp4_tensor *q, const nvfp4_tensor *ref, const char *what) {
  int b;
  for (b = NVFP4_ROWWISE_DATA; b <= NVFP4_COLUMNWISE_SCALE; b++) {
    size_t n = (size_t)nvfp4_shape_numel(nvfp4_tensor_buffer_shape(ref, (nvfp4_buffer)b));
    unsigned char *h1 = (unsigned char *)malloc(n ? n : 1), *h2 = (unsigned char *)malloc(n ? n : 1);
    if (h1 == NULL || h2 == NULL) {
      fprintf(stderr, "cuda_bench: out of host memory to check %s (%zu bytes)\n", what, n);
      exit(1);
    }
    OK(nvfp4_tensor_buffer_read(q, (nvfp4_buffer)b, h1, n));
    OK(nvfp4_tensor_buffer_read(ref, (nvfp4_buffer)b, h2, n));
    if (memcmp(h1, h2, n) != 0) {
      fprintf(stderr, "cuda_bench: %s: the timed cast's buffer %d differs from nvfp4_quantize's\n",
              what, b);
      exit(1);
    }
    free(h1); free(h2);
  }
}


static void bench_quant (int64_t M, int64_t K) {
  nvfp4_shape s = nvfp4_shape_make(2, (int64_t[]){M, K});
  nvfp4_tensor *x, *q = NULL, *d = NULL, *y = NULL, *tmp = NULL, *ref = NULL;
  double n = (double)M * (double)K, tc, bw, t, t_rne = 0;
  char name[128];
  void *scratch;
  int i, mode;
  OK(nvfp4_tensor_randn(ctx, s, NVFP4_BF16, 1, &x));
  OK(ctx->ops->alloc(ctx, (size_t)(n * 2), &scratch));
  tc = copy_time(scratch, x->data.p, (size_t)(n * 2));
  bw = 2 * n * 2 / tc;
  printf("\n[%lld, %lld] bf16: D2D copy of %.0f MB: %.1f us, %.1f GB/s\n", (long long)M,
         (long long)K, n * 2 / 1e6, tc * 1e6, bw * 1e-9);
  for (mode = 0; mode < 4; mode++) {
    nvfp4_qopts o;
    float amax[2];
    static const char *const mname[] = {"RNE", "SR", "RHT (col)", "RHT + SR"};
    memset(&o, 0, sizeof o);
    o.rowwise = o.columnwise = 1;
    o.sr = mode == 1 || mode == 3;
    o.rht = mode >= 2;
    o.sr_seed = 7;
    OK(ctx->ops->amax(ctx, x, o.rht, NVFP4_RHT_SIGNS, amax));
    OK(nvfp4i_tensor_alloc_fp4(ctx, s, 1, 1, &q));
    q->amax[0] = amax[0]; q->amax[1] = amax[1];
    t = time_cast(ctx, x, &o, q, iters);
    if (mode == 0) t_rne = t;
    snprintf(name, sizeof name, "quantize row+col 1D %s (kernel)", mname[mode]);
    report(name, 3.125 * n, t, bw);
    if (mode > 0) printf("%-52s %.3f of RNE speed\n", "", t_rne / t);
    {
      nvfp4_qopts oa = o;
      oa.has_amax = 1; oa.amax[0] = amax[0]; oa.amax[1] = amax[1];
      OK(nvfp4_quantize(ctx, x, &oa, &ref));
      same_bytes(q, ref, name);
    }
    /* the same cast reading the amax where a quantize that computed it
    ** leaves it (device memory; its kernels form the global scale) */
    OK(nvfp4i_buf_alloc(ctx, &q->amax_dev, nvfp4_shape_make(1, (int64_t[]){2}), sizeof(float)));
    OK(ctx->ops->amax_to(ctx, x, o.rht, NVFP4_RHT_SIGNS, (float *)q->amax_dev.p));
    q->amax_pending = 1;
    q->amax_dcol = o.rht;
    t = time_cast(ctx, x, &o, q, iters);
    report("  the same, amax in device memory (kernel)", 3.125 * n, t, bw);
    q->amax_pending = 0;            /* the host copy above is the same */
    same_bytes(q, ref, "  the same, amax in device memory");
    nvfp4_tensor_destroy(ref);
    ref = NULL;
    if (mode == 0) {
      o.has_amax = 1; o.amax[0] = amax[0]; o.amax[1] = amax[1];
      /* the first call grows the memory pool (cudaMallocAsync maps new
      ** pages: ~20 us more at [8192, 8192]); the loop then gets the pool's
      ** freed buffers back, as a training step's quantizes do */
      t = now();
      OK(nvfp4_quantize(ctx, x, &o, &tmp));
      nvfp4_tensor_destroy(tmp);
      OK(nvfp4_ctx_sync(ctx));
      t = now() - t;
      printf("%-52s %9.1f us\n", "  api, first call (the pool maps its memory)", t * 1e6);
      t = now();
      for (i = 0; i < iters; i++) { OK(nvfp4_quantize(ctx, x, &o, &tmp)); nvfp4_tensor_destroy(tmp); }
      OK(nvfp4_ctx_sync(ctx));
      t = (now() - t) / iters;
      report("quantize row+col 1D RNE (api: outputs allocated per call)", 3.125 * n, t, bw);
      /* without the amax given: the amax pass, its result kept in device
      ** memory for the cast's kernels (no readback) */
      o.has_amax = 0;
      t = now();
      for (i = 0; i < iters; i++) { OK(nvfp4_quantize(ctx, x, &o, &tmp)); nvfp4_tensor_destroy(tmp); }
      OK(nvfp4_ctx_sync(ctx));
      t = (now() - t) / iters;
      report("quantize row+col 1D RNE (api, amax pass included)", 3.125 * n, t, bw);
      /* the api's own share: the four buffers (padded scales zeroed), no kernel */
      t = now();
      for (i = 0; i < iters; i++) {
        OK(nvfp4i_tensor_alloc_fp4_for_cast(ctx, s, 1, 1, &tmp));
        nvfp4_tensor_destroy(tmp);
      }
      OK(nvfp4_ctx_sync(ctx));
      t = (now() - t) / iters;
      printf("%-52s %9.1f us\n", "  of which allocating the outputs alone", t * 1e6);
      OK(ctx->ops->amax(ctx, x, 1, NVFP4_RHT_SIGNS, amax));    /* warm-up */
      t = now();
      for (i = 0; i < iters; i++) OK(ctx->ops->amax(ctx, x, 0, 0, amax));
      t = (now() - t) / iters;
      report("amax pass (incl. 8-byte readback)", 2 * n, t, bw);
      t = now();
      for (i = 0; i < iters; i++) OK(ctx->ops->amax(ctx, x, 1, NVFP4_RHT_SIGNS, amax));
      t = (now() - t) / iters;
      report("amax + RHT amax, one fused pass (reads x once)", 2 * n, t, bw);
      /* dequantize (kernel) */
      OK(nvfp4i_tensor_alloc_plain(ctx, s, NVFP4_BF16, &d));
      OK(ctx->ops->dequantize(ctx, q, d));
      OK(nvfp4_ctx_sync(ctx));
      t = now();
      for (i = 0; i < iters; i++) OK(ctx->ops->dequantize(ctx, q, d));
      OK(nvfp4_ctx_sync(ctx));
      t = (now() - t) / iters;
      report("dequantize rowwise -> bf16 (kernel)", 2.5625 * n, t, bw);
      /* swap_first_dims of the bf16 tensor: a full 2-D transpose */
      OK(nvfp4i_tensor_alloc_plain(ctx, s, NVFP4_BF16, &y));
      /* warm up both mappings (lazy module loading costs ~0.5 ms once) */
      OK(ctx->ops->swap_first_dims(ctx, y->data.p, x->data.p, M, K, 2));
      OK(ctx->ops->swap_first_dims(ctx, y->data.p, x->data.p, 8, K, (size_t)(2 * n / 8 / K)));
      OK(nvfp4_ctx_sync(ctx));
      t = now();
      for (i = 0; i < iters; i++)
        OK(ctx->ops->swap_first_dims(ctx, y->data.p, x->data.p, M, K, 2));
      OK(nvfp4_ctx_sync(ctx));
      t = (now() - t) / iters;
      report("swap_first_dims [M, K] bf16 (transpose)", 4 * n, t, bw);
      /* the gather's use: [W, K, C] bytes -> [K, W, C] */
      t = now();
      for (i = 0; i < iters; i++)
        OK(ctx->ops->swap_first_dims(ctx, y->data.p, x->data.p, 8, K, (size_t)(2 * n / 8 / K)));
      OK(nvfp4_ctx_sync(ctx));
      t = (now() - t) / iters;
      report("swap_first_dims [8, K, 2M/8 bytes] (gather use)", 4 * n, t, bw);
      nvfp4_tensor_destroy(d);
      nvfp4_tensor_destroy(y);
    }
    nvfp4_tensor_destroy(q);
  }
  ctx->ops->free(ctx, scratch);
  nvfp4_tensor_destroy(x);
}


/* TE's NVFP4 recipe: X row + RHT'd col; W 2D row + col; dY row + RHT'd col
** with SR. */
static void recipe (nvfp4_qopts *ox, nvfp4_qopts *ow, nvfp4_qopts *od) {
  memset(ox, 0, sizeof *ox);
  ox->rowwise = ox->columnwise = 1;
  *ow = *ox; *od = *ox;
  ox->rht = 1;
  ow->two_d = 1;
  od->rht = 1; od->sr = 1; od->sr_seed = 11;
}


/* Forward + backward of one Linear [K -> N] on T tokens as the NVFP4 recipe
** computes it (quantize X: row + RHT'd col; W: 2D row + col; dY: row +
** RHT'd col with SR; amax passes included; fprop, dgrad, wgrad on exact
** bf16 dequantizations) against the same three GEMMs in plain bf16.  With
** lib=1 also the library's nvfp4_linear (forward + backward). */
static void run_nvfp4 (nvfp4_tensor *x, nvfp4_tensor *w, nvfp4_tensor *dy) {
  nvfp4_qopts ox, ow, od;
  nvfp4_tensor *qx, *qw, *qd, *y, *dx, *dw;
  recipe(&ox, &ow, &od);
  OK(nvfp4_quantize(ctx, x, &ox, &qx));
  OK(nvfp4_quantize(ctx, w, &ow, &qw));
  OK(nvfp4_gemm(ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, NULL, NVFP4_BF16, &y));
  OK(nvfp4_quantize(ctx, dy, &od, &qd));
  OK(nvfp4_gemm(ctx, qw, NVFP4_COLUMNWISE, qd, NVFP4_ROWWISE, NULL, NVFP4_BF16, &dx));
  OK(nvfp4_gemm(ctx, qx, NVFP4_COLUMNWISE, qd, NVFP4_COLUMNWISE, NULL, NVFP4_BF16, &dw));
  nvfp4_tensor_destroy(qx); nvfp4_tensor_destroy(qw); nvfp4_tensor_destroy(qd);
  nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw);
}


static void run_bf16 (nvfp4_tensor *x, nvfp4_tensor *w, nvfp4_tensor *dy) {
  nvfp4_tensor *o1, *o2, *o3;
  OK(nvfp4_gemm(ctx, w, NVFP4_ROWWISE, x, NVFP4_ROWWISE, NULL, NVFP4_BF16, &o1));
  OK(nvfp4_gemm(ctx, w, NVFP4_COLUMNWISE, dy, NVFP4_ROWWISE, NULL, NVFP4_BF16, &o2));
  OK(nvfp4_gemm(ctx, x, NVFP4_COLUMNWISE, dy, NVFP4_COLUMNWISE, NULL, NVFP4_BF16, &o3));
  nvfp4_tensor_destroy(o1); nvfp4_tensor_destroy(o2); nvfp4_tensor_destroy(o3);
}


static double timed (void (*f) (nvfp4_tensor *, nvfp4_tensor *, nvfp4_tensor *),
                     nvfp4_tensor *x, nvfp4_tensor *w, nvfp4_tensor *dy, int it) {
  double t;
  int i;
  f(x, w, dy);
  OK(nvfp4_ctx_sync(ctx));
  t = now();
  for (i = 0; i < it; i++) f(x, w, dy);
  OK(nvfp4_ctx_sync(ctx));
  return (now() - t) / it;
}


/* A bf16 tensor of roughly normal values (sum of 4 uniforms, an LCG):
** nvfp4_tensor_randn's exact Box-Muller on the host is too slow for
** hundreds of millions of elements, and GEMM timing does not need it. */
static nvfp4_tensor *quick_rand (int64_t r, int64_t c, uint64_t seed) {
  size_t n = (size_t)(r * c), i;
  uint16_t *h = (uint16_t *)malloc(n * 2);
  nvfp4_tensor *t;
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
  for (i = 0; i < n; i++) {
    float f = 0;
    int j;
    for (j = 0; j < 4; j++) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      f += (float)(z >> 40) * (1.0f / 16777216.0f) - 0.5f;
    }
    f *= 1.7320508f;
    { union { float f; uint32_t u; } v; v.f = f; h[i] = (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16); }
  }
  OK(nvfp4_tensor_from_host(ctx, nvfp4_shape_make(2, (int64_t[]){r, c}), NVFP4_BF16, h, n * 2, &t));
  free(h);
  return t;
}


static void bench_linear (int64_t T, int64_t K, int64_t N, int lib) {
  nvfp4_tensor *x, *dy, *w;
  double t_q, t_b;
  int it = iters > 5 ? 5 : iters;
  x = quick_rand(T, K, 1);
  dy = quick_rand(T, N, 2);
  w = quick_rand(N, K, 3);
  t_q = timed(run_nvfp4, x, w, dy, it);
  t_b = timed(run_bf16, x, w, dy, it);
  printf("Linear T=%lld K=%lld N=%lld fwd+bwd: nvfp4 %.2f ms, bf16 GEMMs %.2f ms "
         "(%.0f TFLOP/s) -> %.3fx\n", (long long)T, (long long)K, (long long)N, t_q * 1e3,
         t_b * 1e3, 6.0 * T * K * N / t_b * 1e-12, t_q / t_b);
  if (lib) {
    nvfp4_linear_config cfg;
    nvfp4_linear *l;
    nvfp4_tensor *y, *dx, *dw;
    double t;
    memset(&cfg, 0, sizeof cfg);
    cfg.in_features = K; cfg.out_features = N; cfg.params_dtype = NVFP4_BF16;
    cfg.recipe.seed = 3;
    int i;
    OK(nvfp4_linear_create(ctx, &cfg, &l));
    OK(nvfp4_ctx_sync(ctx));
    t = now();
    OK(nvfp4_linear_forward(l, x, &y));
    OK(nvfp4_linear_backward(l, dy, &dx, &dw, NULL));
    OK(nvfp4_ctx_sync(ctx));
    printf("  library nvfp4_linear fwd+bwd (first call): %.2f ms\n", (now() - t) * 1e3);
    nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw);
    t = now();
    for (i = 0; i < it; i++) {
      OK(nvfp4_linear_forward(l, x, &y));
      OK(nvfp4_linear_backward(l, dy, &dx, &dw, NULL));
      nvfp4_tensor_destroy(y); nvfp4_tensor_destroy(dx); nvfp4_tensor_destroy(dw);
    }
    OK(nvfp4_ctx_sync(ctx));
    t = (now() - t) / it;
    printf("  library nvfp4_linear fwd+bwd: %.2f ms -> %.3fx of bf16\n", t * 1e3, t / t_b);
    nvfp4_linear_destroy(l);
  }
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy); nvfp4_tensor_destroy(w);
}


/* Where the NVFP4 Linear's time goes: each step of run_nvfp4 (public calls,
** allocation and amax readback included) and of run_bf16, synchronized and
** timed alone, averaged over the iterations. */
static void bench_linear_parts (int64_t T, int64_t K, int64_t N) {
  enum { QX, QW, QD, FP, DG, WG, BFP, BDG, BWG, NSTEP };
  static const char *const nm[NSTEP] = {
    "quantize X (row + RHT col)", "quantize W (2D row + col)", "quantize dY (row + RHT SR col)",
    "fprop GEMM (fp4)", "dgrad GEMM (fp4)", "wgrad GEMM (fp4)",
    "fprop GEMM (bf16)", "dgrad GEMM (bf16)", "wgrad GEMM (bf16)"
  };
  double acc[NSTEP] = {0}, t;
  nvfp4_tensor *x = quick_rand(T, K, 1), *dy = quick_rand(T, N, 2), *w = quick_rand(N, K, 3);
  nvfp4_qopts ox, ow, od;
  int it, s, n = iters > 5 ? 5 : iters;
  recipe(&ox, &ow, &od);
  for (it = 0; it <= n; it++) {      /* iteration 0 warms up */
    nvfp4_tensor *qx, *qw, *qd, *o[6];
    double d[NSTEP];
#define STEP(i, call) do { OK(nvfp4_ctx_sync(ctx)); t = now(); OK(call); \
                           OK(nvfp4_ctx_sync(ctx)); d[i] = now() - t; } while (0)
    STEP(QX, nvfp4_quantize(ctx, x, &ox, &qx));
    STEP(QW, nvfp4_quantize(ctx, w, &ow, &qw));
    STEP(QD, nvfp4_quantize(ctx, dy, &od, &qd));
    STEP(FP, nvfp4_gemm(ctx, qw, NVFP4_ROWWISE, qx, NVFP4_ROWWISE, NULL, NVFP4_BF16, &o[0]));
    STEP(DG, nvfp4_gemm(ctx, qw, NVFP4_COLUMNWISE, qd, NVFP4_ROWWISE, NULL, NVFP4_BF16, &o[1]));
    STEP(WG, nvfp4_gemm(ctx, qx, NVFP4_COLUMNWISE, qd, NVFP4_COLUMNWISE, NULL, NVFP4_BF16, &o[2]));
    STEP(BFP, nvfp4_gemm(ctx, w, NVFP4_ROWWISE, x, NVFP4_ROWWISE, NULL, NVFP4_BF16, &o[3]));
    STEP(BDG, nvfp4_gemm(ctx, w, NVFP4_COLUMNWISE, dy, NVFP4_ROWWISE, NULL, NVFP4_BF16, &o[4]));
    STEP(BWG, nvfp4_gemm(ctx, x, NVFP4_COLUMNWISE, dy, NVFP4_COLUMNWISE, NULL, NVFP4_BF16, &o[5]));
#undef STEP
    if (it > 0) for (s = 0; s < NSTEP; s++) acc[s] += d[s];
    nvfp4_tensor_destroy(qx); nvfp4_tensor_destroy(qw); nvfp4_tensor_destroy(qd);
    for (s = 0; s < 6; s++) nvfp4_tensor_destroy(o[s]);
  }
  printf("Linear T=%lld K=%lld N=%lld, per step (ms, synchronized):\n", (long long)T,
         (long long)K, (long long)N);
  for (s = 0; s < NSTEP; s++) printf("  %-34s %8.3f\n", nm[s], acc[s] / n * 1e3);
  printf("  nvfp4 total %.3f ms, bf16 total %.3f ms -> %.3fx\n",
         (acc[QX] + acc[QW] + acc[QD] + acc[FP] + acc[DG] + acc[WG]) / n * 1e3,
         (acc[BFP] + acc[BDG] + acc[BWG]) / n * 1e3,
         (acc[QX] + acc[QW] + acc[QD] + acc[FP] + acc[DG] + acc[WG]) /
         (acc[BFP] + acc[BDG] + acc[BWG]));
  nvfp4_tensor_destroy(x); nvfp4_tensor_destroy(dy); nvfp4_tensor_destroy(w);
}


int main (int argc, char **argv) {
  static const char *const modes[] = {
    "quant", "quant-small", "quant-at", "linear", "linear-lib", "linear-parts", "all", NULL
  };
  const char *why = "", *what = argc > 1 ? argv[1] : "all", *it_arg = NULL;
  const int at = !strcmp(what, "quant-at");
  int64_t M = 0, K = 0;
  int i;
  /* all checked before any GPU work: a bad argument costs nothing */
  for (i = 0; modes[i] != NULL && strcmp(what, modes[i]); i++) ;
  if (modes[i] == NULL || argc > (at ? 5 : 3)) {
    fprintf(stderr, "usage: cuda_bench [quant|quant-small|linear|linear-lib|linear-parts|all] [iterations]\n"
            "       cuda_bench quant-at M K [iterations]\n");
    return 2;
  }
  if (at) {
    if (argc < 4) {
      fprintf(stderr, "usage: cuda_bench quant-at M K [iterations]\n");
      return 2;
    }
    M = bench_positive(argv[2], LLONG_MAX);
    K = bench_positive(argv[3], LLONG_MAX);
    /* M too: the figures quantize rowwise + columnwise (and the columnwise
    ** copy is cast straight by the backend entry, past nvfp4_quantize's check) */
    if (M <= 0 || K <= 0 || K % 16 != 0 || M % 16 != 0) {
      fprintf(stderr, "cuda_bench quant-at: [M, K] = [%s, %s]: M and K must be positive multiples "
              "of 16 (the block size; M for the columnwise copy)\n", argv[2], argv[3]);
      return 2;
    }
    if (argc > 4) it_arg = argv[4];
  }
  else if (argc > 2) it_arg = argv[2];
  if (it_arg != NULL && (iters = (int)bench_positive(it_arg, 1000000)) == 0) {
    fprintf(stderr, "cuda_bench: iterations '%s' must be an integer in 1..1000000\n", it_arg);
    return 2;
  }
  if (nvfp4_ctx_create(NVFP4_BACKEND_CUDA, &ctx, &why) != NVFP4_OK) {
    printf("no CUDA backend: %s\n", why);
    return 77;
  }
  printf("%s\n", nvfp4_version_string());
  if (!strcmp(what, "quant") || !strcmp(what, "quant-small") || !strcmp(what, "all")) {
    bench_quant(8192, 8192);
    if (strcmp(what, "quant-small")) bench_quant(32768, 8192);
  }
  if (at) bench_quant(M, K);
  if (!strcmp(what, "linear-parts")) {
    printf("\nLlama 3 70B Linear layers, TP = 1, 8192 tokens, step by step:\n");
    bench_linear_parts(8192, 8192, 10240);
    bench_linear_parts(8192, 28672, 8192);
  }
  if ((!strncmp(what, "linear", 6) && strcmp(what, "linear-parts")) || !strcmp(what, "all")) {
    int lib = !strcmp(what, "linear-lib");
    printf("\nLlama 3 70B Linear layers, TP = 1, 8192 tokens:\n");
    bench_linear(8192, 8192, 10240, lib);   /* QKV */
    bench_linear(8192, 8192, 8192, lib);    /* attention out */
    bench_linear(8192, 8192, 28672, lib);   /* up / gate */
    bench_linear(8192, 28672, 8192, lib);   /* down */
  }
  nvfp4_ctx_destroy(ctx);
  return 0;
}
