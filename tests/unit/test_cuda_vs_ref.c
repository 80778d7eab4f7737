/*
** test_cuda_vs_ref.c -- the CUDA backend against the CPU reference, byte for
** byte (design.md decision 1): quantize with every option (rowwise and/or
** columnwise, 1D/2D, RHT with and without signs, RN/SR, 4over6, given amax) on
** random and adversarial tensors (ties, zeros, -0, tiny blocks, huge
** values, Inf, NaN, subnormals) of many shapes (empty ones too: field case
** BH-22), the amax pass (and the RHT amax repeated 100 times: BH-27), dequantize
** to fp32 and bf16, the GEMM's exact FP4 expansion (through a GEMM with an
** identity), and swap_first_dims on TE's shapes.  Exits 77 (SKIP)
** where no CUDA device is usable, so CI without a GPU stays green.
*/
#include <math.h>
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "nvfp4.h"
#include "nvfp4_int.h"     /* the backend entries convert, bias_add, col_sum */
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>   /* page-locked host memory (pinned_from_host_case) */
#endif

static nvfp4_ctx *cpu, *gpu;
static int failures, checks;
static uint64_t rng = 0x9E3779B97F4A7C15ull;


static uint64_t next (void) {          /* splitmix64 */
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}


static double unif (void) { return (double)(next() >> 11) * 0x1p-53; }


static float randn (void) {
  double u = unif(), v = unif();
  if (u < 1e-300) u = 1e-300;
  return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}


static uint16_t to_bf16 (float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}


enum { F_RANDN, F_TIES, F_ZEROS, F_TINY_BLOCKS, F_HUGE, F_NAN_NEGZERO, F_SUBNORMAL,
       F_WIDE, F_SPAN, NFILL, F_SPREAD = NFILL, F_SPREAD_SPARSE, F_SPREAD_INF, NFILL_ALL };
static const char *const fill_name[NFILL_ALL] = {
  "randn", "ties", "zeros", "tiny-blocks", "huge", "nan/-0/inf", "subnormal", "wide-range",
  "span bounds", "spread 2^+-100", "sparse spread", "spread with Inf/NaN"
};


static float fill_value (int kind, int64_t i, int64_t K) {
  static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 4.0f};
  float x = randn();
  switch (kind) {
    case F_TIES: {
      float t = ties[next() % 10] * ldexpf(1.0f, (int)(next() % 5) - 2);
      return (next() & 1) ? -t : t;
    }
    case F_ZEROS: return (next() & 3) == 0 ? -0.0f : 0.0f;
    case F_TINY_BLOCKS: return ((i / 16) % 3 == 1) ? x * 1e-7f : x;
    case F_HUGE: {
      uint64_t r = next() % 16;
      if (r == 0) return (next() & 1) ? 3.0e38f : -3.3e38f;
      if (r == 1) return 1e30f * x;
      return x;
    }
    case F_NAN_NEGZERO: {
      uint64_t r = next() % 12;
      if (r == 0) return (next() & 1) ? NAN : -NAN;
      if (r == 1) return -0.0f;
      if (r == 2 && (i / K) % 5 == 3) return (next() & 1) ? INFINITY : -INFINITY;
      return x;
    }
    case F_SUBNORMAL: return x * 1e-39f;
    case F_WIDE: return x * ldexpf(1.0f, (int)(next() % 120) - 60);
    /* columnwise blocks (16 rows of a column) at the bounds of the fast
    ** kernel's tensor-core RHT: exponents spanning 11..14 binades from a
    ** base of 2^-108 or 2^-107 (biased 19, 20), 2^0 or 2^110 (up to biased
    ** 251); some blocks with one +-0 */
    case F_SPAN: {
      static const int base[4] = {-108, -107, 0, 110};
      int64_t r = i / K, b = (r / 16) * 7 + i % K;
      int span = 11 + (int)(b % 4), e0 = base[(b / 4) % 4], e;
      if (b % 11 == 5 && r % 16 == 7) return (next() & 1) ? -0.0f : 0.0f;
      e = r % 16 == 0 ? e0 + span : r % 16 == 1 ? e0 : e0 + (int)(next() % (uint64_t)(span + 1));
      x = ldexpf(1.0f + (float)(next() % 128) / 128.0f, e);
      return (next() & 1) ? -x : x;
    }
    /* rows alternate 2^-100 and 2^100 scales: every 16-row column block
    ** spans > 41 binades, so every RHT block leaves the fp32 butterfly
    ** (wide-integer path); every third column 2^-20 and 1 (fp64 path) */
    case F_SPREAD: {
      int64_t r = i / K;
      if ((i % K) % 3 == 0) return x * ldexpf(1.0f, (r & 1) ? 0 : -20);
      return x * ldexpf(1.0f, (r & 1) ? 100 : -100);
    }
    /* a few columns only: a short deferred list among exact blocks */
    case F_SPREAD_SPARSE:
      return (i % K) % 97 == 5 && (i / K) % 16 == 3 ? x * 0x1p-30f : x;
    /* F_SPREAD with an Inf (some columns, both signs in some blocks) or a
    ** NaN in blocks that span > 41 binades: all 16 RHT outputs are Inf or
    ** NaN (nvfp4i_rht16), not the wide path's finite reading of them */
    case F_SPREAD_INF: {
      int64_t r = i / K, c = i % K;
      if (c % 5 == 1 && r % 16 == 6) return INFINITY;
      if (c % 10 == 1 && r % 16 == 11) return -INFINITY;
      if (c % 7 == 3 && r % 16 == 2) return NAN;
      return x * ldexpf(1.0f, (r & 1) ? 100 : -100);
    }
  }
  return x;
}


static int same (const char *what, const void *a, const void *b, size_t n, const char *ctx_s) {
  const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
  size_t i;
  checks++;
  for (i = 0; i < n; i++)
    if (x[i] != y[i]) {
      failures++;
      if (failures <= 20)
        printf("FAIL %s: %s differs at byte %zu of %zu: cpu %02x cuda %02x\n", ctx_s, what,
               i, n, x[i], y[i]);
      return 0;
    }
  return 1;
}


#define OK(call) do { nvfp4_status s_ = (call); if (s_ != NVFP4_OK) { \
  printf("FAIL %s:%d: %s -> %s: %s / %s\n", __FILE__, __LINE__, #call, nvfp4_status_string(s_), \
         nvfp4_last_error(cpu), nvfp4_last_error(gpu)); failures++; goto done; } } while (0)


static void compare_q (const nvfp4_tensor *qc, const nvfp4_tensor *qg, const char *desc) {
  int b;
  for (b = 0; b < 4; b++) {
    nvfp4_shape s = nvfp4_tensor_buffer_shape(qc, (nvfp4_buffer)b);
    size_t n;
    uint8_t *hc, *hg;
    static const char *const names[] = {"rowwise data", "rowwise scale", "columnwise data",
                                        "columnwise scale"};
    if (s.ndim == 0) continue;
    n = (size_t)nvfp4_shape_numel(s);
    hc = (uint8_t *)malloc(n + 1);
    hg = (uint8_t *)malloc(n + 1);
    if (nvfp4_tensor_buffer_read(qc, (nvfp4_buffer)b, hc, n) != NVFP4_OK ||
        nvfp4_tensor_buffer_read(qg, (nvfp4_buffer)b, hg, n) != NVFP4_OK) {
      printf("FAIL %s: cannot read %s: %s\n", desc, names[b], nvfp4_last_error(gpu));
      failures++;
    }
    else same(names[b], hc, hg, n, desc);
    free(hc);
    free(hg);
  }
  for (b = 0; b < 2; b++) {
    float ac, ag;
    if ((b ? nvfp4_tensor_has_columnwise(qc) : nvfp4_tensor_has_rowwise(qc)) &&
        nvfp4_tensor_amax(qc, b, &ac) == NVFP4_OK && nvfp4_tensor_amax(qg, b, &ag) == NVFP4_OK)
      if (!same(b ? "columnwise amax" : "rowwise amax", &ac, &ag, 4, desc))
        printf("     amax cpu %a cuda %a\n", (double)ac, (double)ag);
  }
}


static void compare_dequant (const nvfp4_tensor *qc, const nvfp4_tensor *qg,
                             nvfp4_dtype dt, int col, const char *desc) {
  nvfp4_tensor *dc = NULL, *dg = NULL;
  size_t n = (size_t)nvfp4_shape_numel(nvfp4_tensor_shape(qc)) * nvfp4_dtype_size(dt);
  void *hc = malloc(n + 1), *hg = malloc(n + 1);
  if (col) {
    OK(nvfp4_dequantize_columnwise(cpu, qc, dt, &dc));
    OK(nvfp4_dequantize_columnwise(gpu, qg, dt, &dg));
  }
  else {
    OK(nvfp4_dequantize(cpu, qc, dt, &dc));
    OK(nvfp4_dequantize(gpu, qg, dt, &dg));
  }
  OK(nvfp4_tensor_to_host(dc, hc, n));
  OK(nvfp4_tensor_to_host(dg, hg, n));
  same(col ? (dt == NVFP4_F32 ? "dequantized columnwise fp32" : "dequantized columnwise bf16")
           : (dt == NVFP4_F32 ? "dequantized fp32" : "dequantized bf16"), hc, hg, n, desc);
done:
  nvfp4_tensor_destroy(dc);
  nvfp4_tensor_destroy(dg);
  free(hc);
  free(hg);
}


/* The GEMM's exact expansion of an FP4 operand (kernels/gemm.cu
** fp4_expand) seen through a GEMM with a plain bf16 identity: every output
** is alpha times one dequantized element, so the CPU (OpenBLAS) and CUDA
** (cuBLAS) results must agree value for value (+0 = -0: the sign of a zero
** sum is the BLAS's business; and any non-finite equals any non-finite:
** where alpha * value overflows, OpenBLAS, which may scale by alpha before
** summing, gets Inf * 0 = NaN where cuBLAS gets Inf).
** usage ROWWISE: q [M, K] against I_K; COLUMNWISE: q^T [K, M] against I_M. */
static void expand_case (const nvfp4_tensor *qc, const nvfp4_tensor *qg, nvfp4_usage u,
                         const char *desc) {
  nvfp4_shape s = nvfp4_tensor_shape(qc);
  int64_t M = nvfp4_shape_M(s), K = nvfp4_shape_K(s), n = u == NVFP4_ROWWISE ? K : M, i;
  int64_t d2[2] = {n, n};
  size_t nout = (size_t)(M * K);
  uint16_t *eye = (uint16_t *)calloc((size_t)(n * n) + 1, 2);
  float *rc = (float *)malloc(nout * 4 + 4), *rg = (float *)malloc(nout * 4 + 4);
  nvfp4_tensor *ic = NULL, *ig = NULL, *yc = NULL, *yg = NULL;
  for (i = 0; i < n; i++) eye[i * n + i] = 0x3f80;
  OK(nvfp4_tensor_from_host(cpu, nvfp4_shape_make(2, d2), NVFP4_BF16, eye, (size_t)(n * n) * 2, &ic));
  OK(nvfp4_tensor_from_host(gpu, nvfp4_shape_make(2, d2), NVFP4_BF16, eye, (size_t)(n * n) * 2, &ig));
  OK(nvfp4_gemm(cpu, qc, u, ic, NVFP4_ROWWISE, NULL, NVFP4_F32, &yc));
  OK(nvfp4_gemm(gpu, qg, u, ig, NVFP4_ROWWISE, NULL, NVFP4_F32, &yg));
  OK(nvfp4_tensor_to_host(yc, rc, nout * 4));
  OK(nvfp4_tensor_to_host(yg, rg, nout * 4));
  checks++;
  for (i = 0; i < (int64_t)nout; i++)
    if (!(rc[i] == rg[i] || (!isfinite(rc[i]) && !isfinite(rg[i])))) {
      failures++;
      printf("FAIL %s: gemm with identity (%s expand) differs at element %lld: cpu %a cuda %a\n",
             desc, u == NVFP4_ROWWISE ? "rowwise" : "columnwise", (long long)i,
             (double)rc[i], (double)rg[i]);
      break;
    }
done:
  nvfp4_tensor_destroy(ic); nvfp4_tensor_destroy(ig);
  nvfp4_tensor_destroy(yc); nvfp4_tensor_destroy(yg);
  free(eye); free(rc); free(rg);
}


typedef struct opt { const char *name; nvfp4_qopts o; } opt;


static void one_case (nvfp4_shape s, nvfp4_dtype dt, int fill, const opt *op) {
  int64_t n = nvfp4_shape_numel(s), K = nvfp4_shape_K(s), M = nvfp4_shape_M(s), i;
  size_t es = nvfp4_dtype_size(dt);
  void *h = malloc((size_t)n * es + 1);
  nvfp4_tensor *xc = NULL, *xg = NULL, *qc = NULL, *qg = NULL;
  char desc[256], sb[96];
  nvfp4_qopts o = op->o;
  if ((o.rht && dt != NVFP4_BF16) || ((o.columnwise || (o.two_d && o.four_over_six)) &&
                                       M % 16 != 0)) { free(h); return; }
  for (i = 0; i < n; i++) {
    float v = fill_value(fill, i, K);
    if (dt == NVFP4_F32) ((float *)h)[i] = v;
    else ((uint16_t *)h)[i] = to_bf16(v);
  }
  snprintf(desc, sizeof desc, "%s %s %s %s", nvfp4_shape_format(s, sb, sizeof sb),
           nvfp4_dtype_name(dt), fill_name[fill], op->name);
  OK(nvfp4_tensor_from_host(cpu, s, dt, h, (size_t)n * es, &xc));
  OK(nvfp4_tensor_from_host(gpu, s, dt, h, (size_t)n * es, &xg));
  OK(nvfp4_quantize(cpu, xc, &o, &qc));
  OK(nvfp4_quantize(gpu, xg, &o, &qg));
  /* dequantized and multiplied first: without a given amax, before
  ** anything reads the amax back, the kernels (and the GEMM's alpha) take
  ** it from where the quantize left it */
  if (nvfp4_tensor_has_rowwise(qc) && n > 0) {
    compare_dequant(qc, qg, NVFP4_F32, 0, desc);
    compare_dequant(qc, qg, NVFP4_BF16, 0, desc);
  }
  if (nvfp4_tensor_has_columnwise(qc) && n > 0) compare_dequant(qc, qg, NVFP4_BF16, 1, desc);
  if (n > 0 && n <= 256 * 512 && K % 16 == 0 && !o.has_amax) {
    if (nvfp4_tensor_has_rowwise(qc)) expand_case(qc, qg, NVFP4_ROWWISE, desc);
    if (nvfp4_tensor_has_columnwise(qc)) expand_case(qc, qg, NVFP4_COLUMNWISE, desc);
  }
  compare_q(qc, qg, desc);
done:
  nvfp4_tensor_destroy(xc);
  nvfp4_tensor_destroy(xg);
  nvfp4_tensor_destroy(qc);
  nvfp4_tensor_destroy(qg);
  free(h);
}


/* A GEMM of two FP4 operands whose amaxes are still on the device (alpha
** formed there, kernels/gemm.cu) gives the bits of the same GEMM after the
** amaxes are read back (alpha formed on the host): dgrad-like rowwise x
** rowwise, and wgrad-like columnwise x columnwise with the RHT. */
static void gemm_device_alpha_case (void) {
  int64_t da[2] = {256, 512}, db[2] = {128, 512}, dc[2] = {256, 384}, n, i;
  nvfp4_tensor *xa = NULL, *xb = NULL, *qa = NULL, *qb = NULL, *y1 = NULL, *y2 = NULL;
  float *h1 = NULL, *h2 = NULL;
  float am;
  nvfp4_qopts o;
  int rht;
  for (rht = 0; rht < 2; rht++) {
    const int64_t *d2 = rht ? dc : db;
    memset(&o, 0, sizeof o);
    o.rowwise = o.columnwise = 1;
    o.rht = (unsigned)rht;
    OK(nvfp4_tensor_randn(gpu, nvfp4_shape_make(2, da), NVFP4_BF16, 11, &xa));
    OK(nvfp4_tensor_randn(gpu, nvfp4_shape_make(2, d2), NVFP4_BF16, 12, &xb));
    OK(nvfp4_quantize(gpu, xa, &o, &qa));
    OK(nvfp4_quantize(gpu, xb, &o, &qb));
    {
      const nvfp4_usage u = rht ? NVFP4_COLUMNWISE : NVFP4_ROWWISE;
      OK(nvfp4_gemm(gpu, qa, u, qb, u, NULL, NVFP4_F32, &y1));
      OK(nvfp4_tensor_amax(qa, rht, &am));
      OK(nvfp4_tensor_amax(qb, rht, &am));
      OK(nvfp4_gemm(gpu, qa, u, qb, u, NULL, NVFP4_F32, &y2));
    }
    n = nvfp4_shape_numel(nvfp4_tensor_shape(y1));
    h1 = (float *)malloc((size_t)n * 4);
    h2 = (float *)malloc((size_t)n * 4);
    OK(nvfp4_tensor_to_host(y1, h1, (size_t)n * 4));
    OK(nvfp4_tensor_to_host(y2, h2, (size_t)n * 4));
    for (i = 0; i < n && h1[i] == 0.0f; i++) ;
    checks++;
    if (i == n) {
      failures++;
      printf("FAIL gemm, amaxes on the device (%s): every output is 0\n", rht ? "wgrad, RHT" : "dgrad");
    }
    else same(rht ? "gemm wgrad RHT, alpha on the device vs the host" :
              "gemm dgrad, alpha on the device vs the host", h1, h2, (size_t)n * 4, "gemm_device_alpha_case");
  done:
    nvfp4_tensor_destroy(xa); nvfp4_tensor_destroy(xb);
    nvfp4_tensor_destroy(qa); nvfp4_tensor_destroy(qb);
    nvfp4_tensor_destroy(y1); nvfp4_tensor_destroy(y2);
    xa = xb = qa = qb = y1 = y2 = NULL;
    free(h1); free(h2);
    h1 = h2 = NULL;
  }
}


/* nvfp4_tensor_from_host returns with the caller's bytes taken, also from
** page-locked memory (cudaMallocHost), whose copy is asynchronous: the
** buffer overwritten at once must not reach the tensor.  The copy is queued
** behind an fp32 GEMM of [8192, 8192] (tens of ms), so that it cannot be
** done by then, however fast the host link. */
static void pinned_from_host_case (void) {
#ifdef HAVE_CUDA
  const int64_t n = (int64_t)1 << 26;                /* 256 MiB of fp32 */
  int64_t d[1] = {n}, dg[2] = {8192, 8192}, i, bad = 0;
  nvfp4_tensor *t = NULL, *g = NULL, *busy = NULL;
  uint32_t *pin = NULL, *back = NULL;
  if (cudaMallocHost((void **)&pin, (size_t)n * 4) != cudaSuccess) {
    cudaGetLastError();
    printf("skipped: from_host from page-locked memory (no 256 MiB of it)\n");
    return;
  }
  memset(pin, 0x11, (size_t)n * 4);
  OK(nvfp4_tensor_randn(gpu, nvfp4_shape_make(2, dg), NVFP4_F32, 31, &g));
  OK(nvfp4_ctx_sync(gpu));
  OK(nvfp4_gemm(gpu, g, NVFP4_ROWWISE, g, NVFP4_ROWWISE, NULL, NVFP4_F32, &busy));   /* queued */
  OK(nvfp4_tensor_from_host(gpu, nvfp4_shape_make(1, d), NVFP4_F32, pin, (size_t)n * 4, &t));
  memset(pin, 0xFF, (size_t)n * 4);                  /* at once, as a caller may */
  back = (uint32_t *)malloc((size_t)n * 4);
  if (back == NULL) { printf("skipped: from_host from page-locked memory (host memory)\n"); goto done; }
  OK(nvfp4_tensor_to_host(t, back, (size_t)n * 4));
  for (i = 0; i < n; i++) bad += back[i] != 0x11111111u;
  checks++;
  if (bad) {
    failures++;
    printf("FAIL from_host from page-locked memory: %lld of %lld words are not the bytes given\n",
           (long long)bad, (long long)n);
  }
done:
  nvfp4_tensor_destroy(t); nvfp4_tensor_destroy(g); nvfp4_tensor_destroy(busy);
  free(back);
  cudaFreeHost(pin);
#endif
}


/* A GEMM's output comes from the memory pool uninitialized, beta is 0 in
** device memory: no NaN that the pool's earlier tensor left may reach it
** (cuBLAS does not read C when beta is 0), with an fp32 and a bf16 output,
** and the outputs hold the CPU reference's GEMM within rounding. */
static void gemm_dirty_pool_case (void) {
  const int64_t big = (int64_t)1 << 28;              /* 1 GiB of fp32 NaNs */
  int64_t db[1] = {big}, dx[2] = {2048, 2048}, n = dx[0] * dx[0], i, nans;
  nvfp4_tensor *junk = NULL, *xg = NULL, *qg = NULL, *yg = NULL;
  float *h = (float *)malloc((size_t)big * 4), *y = NULL;
  nvfp4_qopts o;
  int out;
  if (h == NULL) { printf("skipped: the GEMM on a dirty pool (host memory)\n"); return; }
  for (i = 0; i < big; i++) h[i] = NAN;
  memset(&o, 0, sizeof o);
  o.rowwise = 1;
  y = (float *)malloc((size_t)n * 4);
  for (out = 0; out < 2 && y != NULL; out++) {
    const nvfp4_dtype odt = out ? NVFP4_BF16 : NVFP4_F32;
    OK(nvfp4_tensor_from_host(gpu, nvfp4_shape_make(1, db), NVFP4_F32, h, (size_t)big * 4, &junk));
    OK(nvfp4_tensor_randn(gpu, nvfp4_shape_make(2, dx), NVFP4_BF16, 21, &xg));
    OK(nvfp4_quantize(gpu, xg, &o, &qg));
    nvfp4_tensor_destroy(junk);                      /* its NaNs go back to the pool */
    junk = NULL;
    OK(nvfp4_gemm(gpu, qg, NVFP4_ROWWISE, qg, NVFP4_ROWWISE, NULL, odt, &yg));
    if (odt == NVFP4_BF16) {
      nvfp4_tensor *yf = NULL;
      OK(nvfp4_tensor_convert(yg, NVFP4_F32, &yf));
      nvfp4_tensor_destroy(yg);
      yg = yf;
    }
    OK(nvfp4_tensor_to_host(yg, y, (size_t)n * 4));
    for (i = 0, nans = 0; i < n; i++) nans += y[i] != y[i];
    checks++;
    if (nans || !(y[0] > 0.0f)) {                   /* x.x^T: a positive diagonal */
      failures++;
      printf("FAIL gemm (%s out) after a pool of NaNs: %lld NaNs of %lld, y[0] %g\n",
             nvfp4_dtype_name(odt), (long long)nans, (long long)n, (double)y[0]);
    }
  done:
    nvfp4_tensor_destroy(junk); nvfp4_tensor_destroy(xg);
    nvfp4_tensor_destroy(qg); nvfp4_tensor_destroy(yg);
    junk = xg = qg = yg = NULL;
  }
  free(y);
  free(h);
}


/* Field case BH-27's GPU half: the RHT amax raced without a fence in TE
** and came out non-deterministic.  X bf16 [1024, 4096] (randn), quantized
** with the RHT 100 times on the GPU: every post-RHT columnwise amax (and
** rowwise amax) has the CPU reference's bits, and the first run's buffers
** are the reference's bytes. */
static void rht_amax_repeat_case (void) {
  int64_t d[2] = {1024, 4096}, n = d[0] * d[1], i;
  nvfp4_shape s = nvfp4_shape_make(2, d);
  uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
  nvfp4_tensor *xc = NULL, *xg = NULL, *qc = NULL, *qg = NULL;
  nvfp4_qopts o;
  float ac[2] = {0, 0}, ag[2];
  int r, b;
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = o.rht = 1;
  for (i = 0; i < n; i++) h[i] = to_bf16(fill_value(F_RANDN, i, d[1]));
  OK(nvfp4_tensor_from_host(cpu, s, NVFP4_BF16, h, (size_t)n * 2, &xc));
  OK(nvfp4_tensor_from_host(gpu, s, NVFP4_BF16, h, (size_t)n * 2, &xg));
  OK(nvfp4_quantize(cpu, xc, &o, &qc));
  for (b = 0; b < 2; b++) OK(nvfp4_tensor_amax(qc, b, &ac[b]));
  for (r = 0; r < 100; r++) {
    OK(nvfp4_quantize(gpu, xg, &o, &qg));
    if (r == 0) compare_q(qc, qg, "BH-27 [1024, 4096] bf16 rht, run 0");
    for (b = 0; b < 2; b++) {
      OK(nvfp4_tensor_amax(qg, b, &ag[b]));
      checks++;
      if (memcmp(&ac[b], &ag[b], 4) != 0) {
        failures++;
        printf("FAIL BH-27 [1024, 4096] bf16 rht: run %d: %s amax cuda %a, cpu %a\n", r,
               b ? "columnwise" : "rowwise", (double)ag[b], (double)ac[b]);
        r = 100;
      }
    }
    nvfp4_tensor_destroy(qg);
    qg = NULL;
  }
done:
  nvfp4_tensor_destroy(xc); nvfp4_tensor_destroy(xg);
  nvfp4_tensor_destroy(qc); nvfp4_tensor_destroy(qg);
  free(h);
}


static void swap_case (int ndim, const int64_t *dims, nvfp4_dtype dt) {
  nvfp4_shape s = nvfp4_shape_make(ndim, dims);
  size_t n = (size_t)nvfp4_shape_numel(s) * nvfp4_dtype_size(dt), i;
  uint8_t *h = (uint8_t *)malloc(n), *hc = (uint8_t *)malloc(n), *hg = (uint8_t *)malloc(n);
  nvfp4_tensor *xc = NULL, *xg = NULL, *yc = NULL, *yg = NULL;
  char desc[160], sb[96];
  for (i = 0; i < n; i++) h[i] = (uint8_t)next();
  snprintf(desc, sizeof desc, "swap_first_dims %s %s", nvfp4_shape_format(s, sb, sizeof sb),
           nvfp4_dtype_name(dt));
  OK(nvfp4_tensor_from_host(cpu, s, dt, h, n, &xc));
  OK(nvfp4_tensor_from_host(gpu, s, dt, h, n, &xg));
  OK(nvfp4_swap_first_dims(cpu, xc, &yc));
  OK(nvfp4_swap_first_dims(gpu, xg, &yg));
  OK(nvfp4_tensor_to_host(yc, hc, n));
  OK(nvfp4_tensor_to_host(yg, hg, n));
  same("output", hc, hg, n, desc);
done:
  nvfp4_tensor_destroy(xc); nvfp4_tensor_destroy(xg);
  nvfp4_tensor_destroy(yc); nvfp4_tensor_destroy(yg);
  free(h); free(hc); free(hg);
}



/* nvfp4_tensor_narrow (the backend's copy2d) gives the CPU's bytes, and
** nvfp4_tensor_equal the CPU's verdict and first difference: a narrowed
** copy against a second one, and the input against itself with one byte
** changed. */
static void narrow_case (int ndim, const int64_t *dims, nvfp4_dtype dt, int dim, int64_t start,
                         int64_t len) {
  nvfp4_shape s = nvfp4_shape_make(ndim, dims);
  size_t n = (size_t)nvfp4_shape_numel(s) * nvfp4_dtype_size(dt), m, i;
  uint8_t *h = (uint8_t *)malloc(n + 1), *hc = (uint8_t *)malloc(n + 1),
          *hg = (uint8_t *)malloc(n + 1);
  nvfp4_tensor *xc = NULL, *xg = NULL, *yc = NULL, *yg = NULL, *zg = NULL, *wc = NULL,
               *wg = NULL;
  char desc[160], sb[96], whyc[200], whyg[200];
  int eqc = -1, eqg = -1;
  for (i = 0; i < n; i++) h[i] = (uint8_t)next();
  snprintf(desc, sizeof desc, "narrow %s %s dim %d start %lld length %lld",
           nvfp4_shape_format(s, sb, sizeof sb), nvfp4_dtype_name(dt), dim, (long long)start,
           (long long)len);
  OK(nvfp4_tensor_from_host(cpu, s, dt, h, n, &xc));
  OK(nvfp4_tensor_from_host(gpu, s, dt, h, n, &xg));
  OK(nvfp4_tensor_narrow(xc, dim, start, len, &yc));
  OK(nvfp4_tensor_narrow(xg, dim, start, len, &yg));
  m = (size_t)nvfp4_shape_numel(nvfp4_tensor_shape(yc)) * nvfp4_dtype_size(dt);
  OK(nvfp4_tensor_to_host(yc, hc, m));
  OK(nvfp4_tensor_to_host(yg, hg, m));
  same("output", hc, hg, m, desc);
  OK(nvfp4_tensor_narrow(xg, dim, start, len, &zg));
  OK(nvfp4_tensor_equal(yg, zg, &eqg, whyg, sizeof whyg));
  checks++;
  if (eqg != 1) { failures++; printf("FAIL %s: equal copies differ on cuda: %s\n", desc, whyg); }
  if (n > 0) {
    h[n / 3] ^= 0x10;
    OK(nvfp4_tensor_from_host(cpu, s, dt, h, n, &wc));
    OK(nvfp4_tensor_from_host(gpu, s, dt, h, n, &wg));
    OK(nvfp4_tensor_equal(xc, wc, &eqc, whyc, sizeof whyc));
    OK(nvfp4_tensor_equal(xg, wg, &eqg, whyg, sizeof whyg));
    checks++;
    if (eqc != 0 || eqg != 0 || strcmp(whyc, whyg) != 0) {
      failures++;
      printf("FAIL %s: equal: cpu %d '%s', cuda %d '%s'\n", desc, eqc, whyc, eqg, whyg);
    }
  }
done:
  nvfp4_tensor_destroy(xc); nvfp4_tensor_destroy(xg); nvfp4_tensor_destroy(yc);
  nvfp4_tensor_destroy(yg); nvfp4_tensor_destroy(zg); nvfp4_tensor_destroy(wc);
  nvfp4_tensor_destroy(wg);
  free(h); free(hc); free(hg);
}

/* cuda_copy2d past cudaMemcpy2DAsync's pitch limit (2^31 - 1 bytes on the
** H200): a u8 [3, 2^31 + 40] (6 GiB) narrowed along dim 1 goes row by row
** with a pitch above the limit, along dim 0 and through a clone as one
** contiguous copy of 4 and 6 GiB; each against the host's bytes.  Only the
** GPU side (the CPU's copy is memcpy); skipped, and said so, where the host
** or the device has not the 6 GiB. */
static void narrow_wide_pitch_case (void) {
  const int64_t W = ((int64_t)1 << 31) + 40, dims[2] = {3, W};
  nvfp4_shape s = nvfp4_shape_make(2, dims);
  size_t n = (size_t)(3 * W), i;
  uint64_t *h = (uint64_t *)malloc(n + 8);
  uint8_t *hb = (uint8_t *)h, *back = NULL, small[3 * 32];
  nvfp4_tensor *xg = NULL, *yg = NULL, *zg = NULL, *cg = NULL;
  int eq = -1, r;
  char why[200];
  nvfp4_status st;
  if (h == NULL) { printf("skipped: narrow with a 2 GiB pitch (no 6 GiB of host memory)\n"); return; }
  for (i = 0; i < (n + 7) / 8; i++) h[i] = next();
  st = nvfp4_tensor_from_host(gpu, s, NVFP4_U8, hb, n, &xg);
  if (st == NVFP4_ENOMEM) {
    printf("skipped: narrow with a 2 GiB pitch (no 6 GiB on the device)\n");
    free(h);
    return;
  }
  OK(st);
  OK(nvfp4_tensor_narrow(xg, 1, W - 40, 32, &yg));             /* row by row */
  OK(nvfp4_tensor_to_host(yg, small, sizeof small));
  for (r = 0; r < 3; r++)
    same("narrow dim 1, pitch 2^31 + 40", hb + (size_t)r * (size_t)W + (size_t)(W - 40),
         small + 32 * r, 32, "u8 [3, 2^31 + 40]");
  OK(nvfp4_tensor_narrow(xg, 0, 1, 2, &zg));                   /* one 4 GiB copy */
  back = (uint8_t *)malloc(n);
  if (back == NULL) { printf("skipped: the 4 and 6 GiB copies' check (host memory)\n"); goto done; }
  OK(nvfp4_tensor_to_host(zg, back, 2 * (size_t)W));
  same("narrow dim 0, rows 1..2", hb + (size_t)W, back, 2 * (size_t)W, "u8 [3, 2^31 + 40]");
  OK(nvfp4_tensor_clone(xg, &cg));                             /* one 6 GiB copy */
  OK(nvfp4_tensor_to_host(cg, back, n));
  same("clone", hb, back, n, "u8 [3, 2^31 + 40]");
  OK(nvfp4_tensor_equal(xg, cg, &eq, why, sizeof why));
  checks++;
  if (eq != 1) { failures++; printf("FAIL clone of u8 [3, 2^31 + 40]: not equal: %s\n", why); }
done:
  nvfp4_tensor_destroy(xg); nvfp4_tensor_destroy(yg); nvfp4_tensor_destroy(zg);
  nvfp4_tensor_destroy(cg);
  free(h); free(back);
}


/* $NVFP4_CUDA_DEVICE that is no device number: the CUDA context is
** refused (EINVAL) with the backend's own reason, not a generic one (the
** refusal comes before cuda_init creates its stream and buffers: what this
** checks of the undo is the state it had allocated), and a context made
** after the refusals works. */
static void bad_device_case (void) {
  static const char *const bad[] = {"abc", "-1", "99999", "1x"};
  const char *old = getenv("NVFP4_CUDA_DEVICE"), *why = "";
  char keep[64] = "";
  nvfp4_ctx *c = NULL;
  size_t i;
  if (old != NULL) snprintf(keep, sizeof keep, "%s", old);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[96];
    nvfp4_status st;
    setenv("NVFP4_CUDA_DEVICE", bad[i], 1);
    st = nvfp4_ctx_create(NVFP4_BACKEND_CUDA, &c, &why);
    snprintf(want, sizeof want, "cuda backend set-up failed: NVFP4_CUDA_DEVICE='%s' is not a device "
             "number in 0..", bad[i]);
    checks++;
    if (st != NVFP4_EINVAL || c != NULL || strncmp(why, want, strlen(want)) != 0) {
      failures++;
      printf("FAIL NVFP4_CUDA_DEVICE=%s: %s, out %p, '%s' (wanted EINVAL, NULL, '%s...')\n", bad[i],
             nvfp4_status_string(st), (void *)c, why, want);
    }
    nvfp4_ctx_destroy(c);
    c = NULL;
  }
  if (old != NULL) setenv("NVFP4_CUDA_DEVICE", keep, 1);
  else unsetenv("NVFP4_CUDA_DEVICE");
  checks++;
  if (nvfp4_ctx_create(NVFP4_BACKEND_CUDA, &c, &why) != NVFP4_OK) {
    failures++;
    printf("FAIL: the CUDA context after the refused ones: %s\n", why);
  }
  nvfp4_ctx_destroy(c);
}


static double from_bf16 (uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}


/* Like same() for n plain elements of dt, but any NaN equals any NaN: a
** NaN's sign and payload after an add are not specified (x86 and CUDA
** differ, and C compilers commute the operands). */
static void same_values (const char *what, const void *a, const void *b, size_t n,
                         nvfp4_dtype dt, const char *ctx_s) {
  size_t i;
  checks++;
  for (i = 0; i < n; i++) {
    uint32_t x, y;
    int nx, ny;
    if (dt == NVFP4_F32) {
      memcpy(&x, (const char *)a + 4 * i, 4);
      memcpy(&y, (const char *)b + 4 * i, 4);
      nx = (x & 0x7fffffffu) > 0x7f800000u;
      ny = (y & 0x7fffffffu) > 0x7f800000u;
    }
    else {
      x = ((const uint16_t *)a)[i];
      y = ((const uint16_t *)b)[i];
      nx = (x & 0x7fffu) > 0x7f80u;
      ny = (y & 0x7fffu) > 0x7f80u;
    }
    if (x != y && !(nx && ny)) {
      failures++;
      if (failures <= 20)
        printf("FAIL %s: %s differs at element %zu of %zu: cpu %08x cuda %08x\n", ctx_s,
               what, i, n, (unsigned)x, (unsigned)y);
      return;
    }
  }
}


/* The element-wise entries of the Linear layer (kernels/elementwise.cu):
** convert bit for bit against the CPU's, bias_add too but for NaN
** payloads; col_sum (another
** summation order) against a double sum within fp32 accumulation error,
** and bit for bit run to run on the GPU.  x [rows, cols], bias [cols]. */
static void elementwise_case (int64_t rows, int64_t cols, nvfp4_dtype xdt, nvfp4_dtype odt,
                              int fill) {
  int64_t d2[2] = {rows, cols}, n = rows * cols, i, r, c;
  nvfp4_shape s = nvfp4_shape_make(2, d2), sb1 = nvfp4_shape_make(1, &cols);
  size_t xes = nvfp4_dtype_size(xdt), oes = nvfp4_dtype_size(odt);
  void *h = malloc((size_t)n * xes + 1), *hb = malloc((size_t)cols * oes + 1);
  void *rc = malloc((size_t)n * 4 + 1), *rg = malloc((size_t)n * 4 + 1);
  float *g2 = (float *)malloc((size_t)cols * 4 + 1);
  nvfp4_tensor *xc = NULL, *xg = NULL, *bc = NULL, *bg = NULL, *oc = NULL, *og = NULL,
               *sg = NULL, *sg2 = NULL;
  char desc[160];
  for (i = 0; i < n; i++) {
    float v = fill_value(fill, i, cols);
    if (xdt == NVFP4_F32) ((float *)h)[i] = v; else ((uint16_t *)h)[i] = to_bf16(v);
  }
  for (i = 0; i < cols; i++) {
    float v = fill == F_RANDN ? randn() : fill_value(fill, i, cols);
    if (odt == NVFP4_F32) ((float *)hb)[i] = v; else ((uint16_t *)hb)[i] = to_bf16(v);
  }
  snprintf(desc, sizeof desc, "elementwise [%lld, %lld] %s -> %s %s", (long long)rows,
           (long long)cols, nvfp4_dtype_name(xdt), nvfp4_dtype_name(odt), fill_name[fill]);
  OK(nvfp4_tensor_from_host(cpu, s, xdt, h, (size_t)n * xes, &xc));
  OK(nvfp4_tensor_from_host(gpu, s, xdt, h, (size_t)n * xes, &xg));
  OK(nvfp4_tensor_from_host(cpu, sb1, odt, hb, (size_t)cols * oes, &bc));
  OK(nvfp4_tensor_from_host(gpu, sb1, odt, hb, (size_t)cols * oes, &bg));
  /* convert x to odt */
  OK(nvfp4_tensor_create(cpu, s, odt, &oc));
  OK(nvfp4_tensor_create(gpu, s, odt, &og));
  OK(cpu->ops->convert(cpu, oc->data.p, odt, xc->data.p, xdt, (size_t)n));
  OK(gpu->ops->convert(gpu, og->data.p, odt, xg->data.p, xdt, (size_t)n));
  OK(nvfp4_tensor_to_host(oc, rc, (size_t)n * oes));
  OK(nvfp4_tensor_to_host(og, rg, (size_t)n * oes));
  { char d[200]; snprintf(d, sizeof d, "%s convert", desc); same("converted", rc, rg, (size_t)n * oes, d); }
  /* the same through the public nvfp4_tensor_convert (allocates its result
  ** on the tensor's backend) */
  {
    nvfp4_tensor *pc = NULL, *pg = NULL;
    char d[200];
    OK(nvfp4_tensor_convert(xc, odt, &pc));
    OK(nvfp4_tensor_convert(xg, odt, &pg));
    OK(nvfp4_tensor_to_host(pc, rc, (size_t)n * oes));
    OK(nvfp4_tensor_to_host(pg, rg, (size_t)n * oes));
    snprintf(d, sizeof d, "%s nvfp4_tensor_convert", desc);
    same("converted", rc, rg, (size_t)n * oes, d);
    nvfp4_tensor_destroy(pc);
    nvfp4_tensor_destroy(pg);
  }
  /* x += bias (bias in odt), in place */
  OK(cpu->ops->bias_add(cpu, xc->data.p, xdt, bc->data.p, odt, rows, cols));
  OK(gpu->ops->bias_add(gpu, xg->data.p, xdt, bg->data.p, odt, rows, cols));
  OK(nvfp4_tensor_to_host(xc, rc, (size_t)n * xes));
  OK(nvfp4_tensor_to_host(xg, rg, (size_t)n * xes));
  { char d[200]; snprintf(d, sizeof d, "%s bias_add", desc); same_values("y + bias", rc, rg, (size_t)n, xdt, d); }
  /* column sums of the original x (finite fills only) */
  if (fill == F_RANDN) {
    OK(nvfp4_tensor_from_host(gpu, s, xdt, h, (size_t)n * xes, &sg));
    OK(nvfp4_tensor_create(gpu, sb1, odt, &sg2));
    OK(gpu->ops->col_sum(gpu, sg2->data.p, odt, sg->data.p, xdt, rows, cols));
    OK(nvfp4_tensor_to_host(sg2, rg, (size_t)cols * oes));
    OK(gpu->ops->col_sum(gpu, sg2->data.p, odt, sg->data.p, xdt, rows, cols));
    OK(nvfp4_tensor_to_host(sg2, g2, (size_t)cols * oes));
    { char d[200]; snprintf(d, sizeof d, "%s col_sum run to run", desc);
      same("col_sum", rg, g2, (size_t)cols * oes, d); }
    checks++;
    for (c = 0; c < cols; c++) {
      double ref = 0, mag = 0, got, tol;
      for (r = 0; r < rows; r++) {
        size_t k = (size_t)(r * cols + c);
        double v = xdt == NVFP4_F32 ? ((float *)h)[k] : from_bf16(((uint16_t *)h)[k]);
        ref += v;
        mag += fabs(v);
      }
      got = odt == NVFP4_F32 ? ((float *)rg)[c] : from_bf16(((uint16_t *)rg)[c]);
      tol = (double)rows * 0x1p-24 * mag + (odt == NVFP4_BF16 ? 0x1p-8 * fabs(ref) : 0) + 1e-30;
      if (fabs(got - ref) > tol) {
        failures++;
        printf("FAIL %s col_sum: column %lld: cuda %.9g, exact %.9g (tol %.3g)\n", desc,
               (long long)c, got, ref, tol);
        break;
      }
    }
  }
done:
  nvfp4_tensor_destroy(xc); nvfp4_tensor_destroy(xg);
  nvfp4_tensor_destroy(bc); nvfp4_tensor_destroy(bg);
  nvfp4_tensor_destroy(oc); nvfp4_tensor_destroy(og);
  nvfp4_tensor_destroy(sg); nvfp4_tensor_destroy(sg2);
  free(h); free(hb); free(rc); free(rg); free(g2);
}


int main (void) {
  const char *why = "";
  static const int64_t shapes[][4] = {
    {2, 16, 16}, {2, 16, 32}, {2, 32, 16}, {2, 64, 64}, {2, 128, 128}, {2, 96, 80},
    {2, 200, 48}, {2, 256, 272}, {3, 8, 16, 64}, {3, 4, 1, 160}, {3, 48, 1, 256},
    {2, 1, 16}, {2, 3, 48}, {2, 37, 112}, {2, 1040, 96},
    /* empty (field case BH-22: no kernel may fault on a zero dim): [0, 64]
    ** and the SP shard [0, 4, 64] */
    {2, 0, 64}, {3, 0, 4, 64},
    /* whole 64x128 tiles: the bf16 fast path of kernels/quantize.cu */
    {2, 192, 384}, {3, 2, 64, 256}
  };
  static const int64_t sw1[] = {4, 64, 1280}, sw2[] = {48, 8, 128, 16}, sw3[] = {229, 173},
                       sw4[] = {113, 71, 1, 1, 1, 29, 1, 1}, sw5[] = {2, 3, 5, 7},
                       sw6[] = {64, 48, 40},
                       /* 2-byte elements, dims multiples of 8 with partial
                       ** 64x64 tiles: transpose16_vec */
                       sw7[] = {136, 200}, sw8[] = {72, 1032}, sw9[] = {256, 64, 1},
                       sw10[] = {40, 24, 2};
  opt opts[24];
  int nopt = 0, si, f, oi, d;
  nvfp4_status st = nvfp4_ctx_create(NVFP4_BACKEND_CUDA, &gpu, &why);
  if (st == NVFP4_ENOTSUP) {       /* no CUDA in this build, or no driver or device */
    printf("SKIP: no usable CUDA backend (%s: %s)\n", nvfp4_status_string(st), why);
    return 77;
  }
  if (st != NVFP4_OK) {            /* a GPU that is there and failed: not a skip */
    printf("FAIL: cannot create the CUDA context: %s: %s\n", nvfp4_status_string(st), why);
    return 1;
  }
  if (nvfp4_ctx_create(NVFP4_BACKEND_CPU, &cpu, &why) != NVFP4_OK) {
    printf("FAIL: cannot create the CPU context: %s\n", why);
    return 1;
  }
  memset(opts, 0, sizeof opts);
#define ADD(nm, ...) do { opts[nopt].name = nm; { nvfp4_qopts o_ = {__VA_ARGS__}; opts[nopt].o = o_; } nopt++; } while (0)
  ADD("rowwise", .rowwise = 1);
  ADD("row+col", .rowwise = 1, .columnwise = 1);
  ADD("columnwise", .columnwise = 1);
  ADD("row+col 2d", .rowwise = 1, .columnwise = 1, .two_d = 1);
  ADD("rowwise 2d", .rowwise = 1, .two_d = 1);
  ADD("row+col rht", .rowwise = 1, .columnwise = 1, .rht = 1);
  ADD("col rht no-signs", .columnwise = 1, .rht = 1, .rht_no_signs = 1);
  ADD("row+col sr", .rowwise = 1, .columnwise = 1, .sr = 1, .sr_seed = 0x0123456789ABCDEFull,
      .sr_offset = 7);
  ADD("row+col rht sr", .rowwise = 1, .columnwise = 1, .rht = 1, .sr = 1, .sr_seed = 42,
      .sr_offset = 1ull << 33);
  ADD("row+col given amax 1.0", .rowwise = 1, .columnwise = 1, .has_amax = 1,
      .amax = {1.0f, 1.0f});
  ADD("row+col given amax 0", .rowwise = 1, .columnwise = 1, .has_amax = 1,
      .amax = {0.0f, 0.0f});
  ADD("rowwise sr given amax inf", .rowwise = 1, .sr = 1, .sr_seed = 5, .has_amax = 1,
      .amax = {INFINITY, INFINITY});
  /* below the data's amax: scaled magnitudes in [6.5, 8) on the SR fast
  ** path (codes8_sr's 8 -> 7) and from 8 up on the exact path */
  ADD("row+col sr given amax 3.5", .rowwise = 1, .columnwise = 1, .sr = 1, .sr_seed = 77,
      .has_amax = 1, .amax = {3.5f, 3.5f});
  ADD("row+col 4over6", .rowwise = 1, .columnwise = 1, .four_over_six = 1);
  ADD("row+col 4over6 mse emax448", .rowwise = 1, .columnwise = 1, .four_over_six = 1,
      .four_over_six_mse = 1, .four_over_six_emax448 = 1);
  ADD("row+col 2d 4over6", .rowwise = 1, .columnwise = 1, .two_d = 1, .four_over_six = 1);
  ADD("col 2d 4over6 mse", .columnwise = 1, .two_d = 1, .four_over_six = 1,
      .four_over_six_mse = 1);
  /* each copy's 2D 4over6 choice with its own amax */
  ADD("row+col 2d 4over6 amax pair", .rowwise = 1, .columnwise = 1, .two_d = 1, .four_over_six = 1,
      .has_amax = 1, .amax = {3.0f, 40.0f});
  for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
    nvfp4_shape s = nvfp4_shape_make((int)shapes[si][0], &shapes[si][1]);
    for (f = 0; f < NFILL; f++)
      for (oi = 0; oi < nopt; oi++)
        for (d = 0; d < 2; d++)
          one_case(s, d ? NVFP4_F32 : NVFP4_BF16, f, &opts[oi]);
  }
  {   /* larger tensors, many tiles; the second has more 64x128 tiles than
      ** the fast path's persistent grid, so CTAs loop; in the third (40 x 8
      ** tiles: a full panel of 32 m-tiles, then a partial one of 8) a CTA's
      ** second tile lies in the next, partial panel (tile_walk) */
    int64_t big[] = {1024, 2048}, big2[] = {2048, 4096}, big3[] = {2560, 1024};
    for (oi = 0; oi < nopt; oi++) one_case(nvfp4_shape_make(2, big), NVFP4_BF16, F_RANDN, &opts[oi]);
    for (oi = 0; oi < nopt; oi++) one_case(nvfp4_shape_make(2, big2), NVFP4_BF16, F_WIDE, &opts[oi]);
    for (oi = 0; oi < nopt; oi++) one_case(nvfp4_shape_make(2, big3), NVFP4_BF16, F_TIES, &opts[oi]);
  }
  {   /* RHT blocks outside the tensor-core RHT's exact range on fast-path
      ** shapes: the CTAs' lists of kernels/quantize.cu, the context's list
      ** past them (F_SPREAD: 512 per CTA) and its follow-up kernel (amax and
      ** cast); then with the list capped at 16 entries (test hook), so the
      ** follow-up scans every block instead */
    int64_t sh1[] = {256, 384}, sh2[] = {1024, 512};
    int cap;
    for (cap = 0; cap < 2; cap++) {
      if (cap) setenv("NVFP4_CUDA_RHT_DEFER_CAP", "16", 1);
      for (oi = 0; oi < nopt; oi++) {
        if (!opts[oi].o.rht) continue;
        one_case(nvfp4_shape_make(2, sh1), NVFP4_BF16, F_SPREAD, &opts[oi]);
        one_case(nvfp4_shape_make(2, sh2), NVFP4_BF16, F_SPREAD_SPARSE, &opts[oi]);
        one_case(nvfp4_shape_make(2, sh1), NVFP4_BF16, F_WIDE, &opts[oi]);
        one_case(nvfp4_shape_make(2, sh1), NVFP4_BF16, F_SPREAD_INF, &opts[oi]);
      }
      unsetenv("NVFP4_CUDA_RHT_DEFER_CAP");
    }
  }
  {   /* the scale gather (kernels/quantize.cu, scale_gather_kernel),
      ** forced on (test hook; on its own it is taken for tensors of 2^26
      ** elements and more): [512, 512] is one rowwise group per m-tile and
      ** one columnwise group per k-tile, the larger shapes have several
      ** and grow the context's scratch; then with the grid capped at 3 CTAs,
      ** so that CTAs take many tiles (and, with the gather off, many
      ** 128-row tiles) */
    int64_t u1[] = {512, 512}, u2[] = {1024, 1536}, u3[] = {2048, 1024};
    int cap, on;
    for (on = 1; on >= 0; on--)
      for (cap = 0; cap < 2; cap++) {
        if (on == 0 && cap == 0) continue;          /* the cases above */
        setenv("NVFP4_CUDA_SCALE_GATHER", on ? "1" : "0", 1);
        if (cap) setenv("NVFP4_CUDA_FAST_GRID", "3", 1);
        for (oi = 0; oi < nopt; oi++) {
          if (opts[oi].o.two_d || opts[oi].o.four_over_six || opts[oi].o.rht) continue;
          one_case(nvfp4_shape_make(2, u1), NVFP4_BF16, F_NAN_NEGZERO, &opts[oi]);
          one_case(nvfp4_shape_make(2, u2), NVFP4_BF16, F_RANDN, &opts[oi]);
          one_case(nvfp4_shape_make(2, u3), NVFP4_BF16, F_WIDE, &opts[oi]);
        }
        unsetenv("NVFP4_CUDA_SCALE_GATHER");
        unsetenv("NVFP4_CUDA_FAST_GRID");
      }
  }
  rht_amax_repeat_case();
  gemm_device_alpha_case();
  pinned_from_host_case();
  gemm_dirty_pool_case();
  for (d = 0; d < 3; d++) {
    nvfp4_dtype dt = d == 0 ? NVFP4_F32 : d == 1 ? NVFP4_BF16 : NVFP4_U8;
    swap_case(3, sw1, dt); swap_case(4, sw2, dt); swap_case(2, sw3, dt);
    swap_case(8, sw4, dt); swap_case(4, sw5, dt); swap_case(3, sw6, dt);
    swap_case(2, sw7, dt); swap_case(2, sw8, dt); swap_case(3, sw9, dt);
  }
  swap_case(3, sw10, NVFP4_U8);     /* 2-byte inner of u8 */
  {   /* narrow and equal: a rank's shard of [S, B, H] along each dim, odd sizes, empty */
    static const int64_t n1[] = {512, 1, 768}, n2[] = {37, 5, 3, 29};
    narrow_case(3, n1, NVFP4_BF16, 0, 256, 256);
    narrow_case(3, n1, NVFP4_F32, 2, 384, 384);
    narrow_case(3, n1, NVFP4_BF16, 1, 0, 1);
    narrow_case(4, n2, NVFP4_BF16, 1, 2, 3);
    narrow_case(4, n2, NVFP4_U8, 3, 7, 11);
    narrow_case(4, n2, NVFP4_F32, 0, 36, 1);
    narrow_case(4, n2, NVFP4_F32, 2, 3, 0);
  }
  narrow_wide_pitch_case();
  bad_device_case();
  {   /* convert, bias_add, col_sum (kernels/elementwise.cu) */
    static const int64_t es[][2] = {{1, 16}, {3, 48}, {37, 300}, {700, 96}, {1024, 1536}};
    static const int efill[] = {F_RANDN, F_TIES, F_NAN_NEGZERO, F_SUBNORMAL, F_WIDE};
    int e, ff, a, b;
    for (e = 0; e < (int)(sizeof es / sizeof es[0]); e++)
      for (ff = 0; ff < 5; ff++)
        for (a = 0; a < 2; a++)
          for (b = 0; b < 2; b++)
            elementwise_case(es[e][0], es[e][1], a ? NVFP4_F32 : NVFP4_BF16,
                             b ? NVFP4_F32 : NVFP4_BF16, efill[ff]);
    elementwise_case(70000, 16, NVFP4_BF16, NVFP4_F32, F_RANDN);   /* many chunks */
  }
  printf("%d comparisons, %d failures\n", checks, failures);
  nvfp4_ctx_destroy(cpu);
  nvfp4_ctx_destroy(gpu);
  return failures ? 1 : 0;
}
