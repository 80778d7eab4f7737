/*
** gemm.c -- GEMM on NVFP4 (or plain) operands, TE's general_gemm in
** row-major terms (spec/nvfp4-numerics.md §11), and the CPU backend's GEMM.
**
** There are no FP4 tensor cores on a CPU (nor on Hopper), so an FP4 operand
** is dequantized *exactly* before an ordinary fp32 GEMM: code * scale, an
** E2M1 value times an E4M3 value, has at most 6 significant bits and lies in
** [2^-10, 2688], so it is exact in fp32 (and bf16; spec §10).  The two
** per-tensor factors amax/(6*EMAX) are not applied per element; they go into the
** GEMM's alpha, as cuBLAS does (design.md decision 6).  The result then
** differs from TE's block-scaled cuBLAS GEMM only in the order of the fp32
** accumulation.
**
** lib/ validates everything (usages, data and scale shapes, dtypes) before
** dispatch; the backend's gemm entry sees a plain description of two K-major
** matrices (nvfp4i_gemm_operand).
*/
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include "nvfp4_int.h"
#include "comm_int.h"
#include "linear_int.h"


/* E2M1 code -> value (bit 3 is the sign; spec §1). */
static const float e2m1_value[16] = {
  0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f
};


/* E4M3 ("fn": no infinities, S.1111.111 is NaN) byte -> value (spec §2). */
static float e4m3_value (uint8_t b) {
  int e = (b >> 3) & 0xF, m = b & 0x7;
  float v;
  if (e == 0xF && m == 0x7) return NAN;
  v = (e == 0) ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}


/* ---- validation: one operand ------------------------------------------ */

/* "(8192,768)": TE's way of printing a 2-D shape in the swizzle check. */
static const char *pair (nvfp4_shape s, char *buf, size_t n) {
  if (s.ndim == 2)
    snprintf(buf, n, "(%lld,%lld)", (long long)s.dim[0], (long long)s.dim[1]);
  else
    nvfp4_shape_format(s, buf, n);
  return buf;
}


nvfp4_status nvfp4i_check_fp4_buffers (nvfp4_ctx *ctx, const char *what,
                                       const char *dir, const nvfp4i_buf *data,
                                       nvfp4_shape want_data, const nvfp4i_buf *scale,
                                       nvfp4_shape want_scale) {
  char a[64], b[64];
  FAIL_IF(ctx, nvfp4_shape_numel(data->shape) != nvfp4_shape_numel(want_data) ||
          data->nbytes != (size_t)nvfp4_shape_numel(want_data),
          NVFP4_EINVAL, "%s: invalid %s_data shape (expected %s, got %s)",
          what, dir, pair(want_data, a, sizeof a), pair(data->shape, b, sizeof b));
  FAIL_IF(ctx, !nvfp4_shape_equal(scale->shape, want_scale) ||
          scale->nbytes != (size_t)nvfp4_shape_numel(want_scale),
          NVFP4_EINVAL, "%s: invalid %s_scale_inv shape (expected %s, got %s)",
          what, dir, pair(want_scale, a, sizeof a), pair(scale->shape, b, sizeof b));
  return NVFP4_OK;
}


/* Describe operand t read with usage u as a K-major matrix [rows, cols];
** what names the call and the operand ("gemm: operand A"), the prefix of
** every message; op->amax is the per-tensor amax of the buffer read (FP4),
** or -1 (plain), op->e6 its 6*EMAX.  host_amax = 0: an FP4 amax still in
** backend memory stays there (op->damax), for the backend to form alpha
** from. */
static nvfp4_status describe (nvfp4_ctx *ctx, const nvfp4_tensor *t, nvfp4_usage u,
                              const char *what, nvfp4i_gemm_operand *op, int host_amax) {
  nvfp4_shape s;
  int64_t M, K;
  CHECK(nvfp4i_check_tensor(ctx, t, what));
  s = t->shape;
  FAIL_IF(ctx, s.ndim < 1, NVFP4_EINVAL, "%s is a scalar (ndim 0); a GEMM operand needs "
          "ndim >= 1 (its last dim is K)", what);
  FAIL_IF(ctx, u != NVFP4_ROWWISE && u != NVFP4_COLUMNWISE, NVFP4_EINVAL,
          "%s: usage %d is not rowwise (0) or columnwise (1)", what, (int)u);
  M = nvfp4_shape_M(s);
  K = nvfp4_shape_K(s);
  memset(op, 0, sizeof *op);
  op->dt = t->dtype;
  op->amax = -1.0f;
  op->e6 = 6.0f * 448.0f;
  if (t->dtype == NVFP4_FP4) {
    op->e6 = 6.0f * nvfp4i_emax(t);       /* 2688, or 1536 for 4over6 (§3.3) */
    if (host_amax) CHECK(nvfp4i_amax_ready(t));
    /* the usage first: a rowwise-only copy may have any M (nvfp4.h), and
    ** read columnwise it is a missing usage (EUSAGE), not a shape error */
    FAIL_IF(ctx, u == NVFP4_ROWWISE ? !t->has_row : !t->has_col, NVFP4_EUSAGE,
            "%s has no %s data (usage missing)", what,
            u == NVFP4_ROWWISE ? "rowwise" : "columnwise");
    FAIL_IF(ctx, K % NVFP4_BLOCK != 0 || M % (u == NVFP4_COLUMNWISE ? NVFP4_BLOCK : 1) != 0,
            NVFP4_EINVAL, "%s: NVFP4 shape M=%lld, K=%lld is not a multiple "
            "of 16 along the reduction", what, (long long)M, (long long)K);
    if (u == NVFP4_ROWWISE) {
      CHECK(nvfp4i_check_fp4_buffers(ctx, what, "rowwise", &t->row_data,
                                     nvfp4_rowwise_data_shape(s), &t->row_scale,
                                     nvfp4_rowwise_scale_shape(s)));
      op->data = t->row_data.p;
      op->scale = (const uint8_t *)t->row_scale.p;
      op->scale_ld = t->row_scale.shape.dim[1];
      op->rows = M; op->cols = K;
      op->amax = t->amax[0];
      if (t->amax_pending) op->damax = (const float *)t->amax_dev.p;
    }
    else {
      CHECK(nvfp4i_check_fp4_buffers(ctx, what, "columnwise", &t->col_data,
                                     nvfp4_columnwise_data_shape(s), &t->col_scale,
                                     nvfp4_columnwise_scale_shape(s)));
      op->data = t->col_data.p;
      op->scale = (const uint8_t *)t->col_scale.p;
      op->scale_ld = t->col_scale.shape.dim[1];
      op->rows = K; op->cols = M;
      op->amax = t->amax[1];
      if (t->amax_pending) op->damax = (const float *)t->amax_dev.p + t->amax_dcol;
    }
    return NVFP4_OK;
  }
  FAIL_IF(ctx, t->dtype != NVFP4_F32 && t->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "%s has dtype %s (fp32, bf16 or fp4 expected)", what,
          nvfp4_dtype_name(t->dtype));
  op->data = t->data.p;
  op->trans = (u == NVFP4_COLUMNWISE);
  op->rows = op->trans ? K : M;
  op->cols = op->trans ? M : K;
  return NVFP4_OK;
}

/* Describe both operands (describe above) under the call's name and check
** that they read the same reduction dim. */
static nvfp4_status describe_pair (nvfp4_ctx *ctx, const char *what, const nvfp4_tensor *a,
                                   nvfp4_usage ua, const nvfp4_tensor *b, nvfp4_usage ub,
                                   nvfp4i_gemm_operand *oa, nvfp4i_gemm_operand *ob,
                                   int host_amax) {
  char name[48];
  snprintf(name, sizeof name, "%s: operand A", what);
  CHECK(describe(ctx, a, ua, name, oa, host_amax));
  snprintf(name, sizeof name, "%s: operand B", what);
  CHECK(describe(ctx, b, ub, name, ob, host_amax));
  FAIL_IF(ctx, oa->cols != ob->cols, NVFP4_EINVAL,
          "%s: reduction dims differ: A %s reads [%lld, %lld], B %s reads [%lld, %lld]", what,
          ua == NVFP4_ROWWISE ? "rowwise" : "columnwise", (long long)oa->rows,
          (long long)oa->cols, ub == NVFP4_ROWWISE ? "rowwise" : "columnwise",
          (long long)ob->rows, (long long)ob->cols);
  return NVFP4_OK;
}


/* TE's getGemmOutputShape: B read rowwise keeps its leading dims. */
static nvfp4_shape out_shape (const nvfp4_tensor *b, nvfp4_usage ub, int64_t P,
                              int64_t Q) {
  nvfp4_shape s = b->shape;
  if (ub == NVFP4_ROWWISE) {
    s.dim[s.ndim - 1] = P;
    return s;
  }
  memset(&s, 0, sizeof s);
  s.ndim = 2;
  s.dim[0] = Q;
  s.dim[1] = P;
  return s;
}


nvfp4_status nvfp4_gemm (nvfp4_ctx *ctx, const nvfp4_tensor *a, nvfp4_usage ua,
                         const nvfp4_tensor *b, nvfp4_usage ub,
                         const nvfp4_tensor *bias, nvfp4_dtype out_dt,
                         nvfp4_tensor **out) {
  return nvfp4i_gemm_ex(ctx, a, ua, b, ub, bias, out_dt, 0, out);
}


/* The BLAS (and cuBLAS) take int dimensions: P, Q and R must fit in one,
** or the product is silently wrong (OpenBLAS only prints a warning). */
static nvfp4_status check_blas_dims (nvfp4_ctx *ctx, const char *what, int64_t P, int64_t Q,
                                     int64_t R) {
  FAIL_IF(ctx, P > INT_MAX || Q > INT_MAX || R > INT_MAX, NVFP4_EINVAL,
          "%s: a dimension above 2^31-1 (%lld x %lld, reduction %lld): the BLAS takes int "
          "dimensions", what, (long long)Q, (long long)P, (long long)R);
  /* the output's size, before any allocation (a tensor's limit: 2^60) */
  FAIL_IF(ctx, P * Q > NVFP4_MAX_NUMEL, NVFP4_EINVAL,
          "%s: the output [%lld, %lld] has more than 2^60 elements", what, (long long)Q,
          (long long)P);
  return NVFP4_OK;
}


nvfp4_status nvfp4i_gemm_ex (nvfp4_ctx *ctx, const nvfp4_tensor *a, nvfp4_usage ua,
                             const nvfp4_tensor *b, nvfp4_usage ub,
                             const nvfp4_tensor *bias, nvfp4_dtype out_dt,
                             int round_bf16, nvfp4_tensor **out) {
  nvfp4i_gemm_operand oa, ob;
  nvfp4_tensor *d = NULL;
  nvfp4_status st;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  FAIL_IF(ctx, out == NULL, NVFP4_EINVAL, "gemm: out is NULL");
  CHECK(describe_pair(ctx, "gemm", a, ua, b, ub, &oa, &ob, 0));
  FAIL_IF(ctx, out_dt != NVFP4_F32 && out_dt != NVFP4_BF16, NVFP4_EINVAL,
          "gemm: output dtype %s is not fp32 or bf16", NVFP4I_DTYPE(out_dt));
  CHECK(check_blas_dims(ctx, "gemm", oa.rows, ob.rows, oa.cols));
  if (bias != NULL) {
    char sb[128];
    CHECK(nvfp4i_check_tensor(ctx, bias, "gemm: bias"));
    FAIL_IF(ctx, (bias->dtype != NVFP4_F32 && bias->dtype != NVFP4_BF16) ||
            bias->shape.ndim != 1 || bias->shape.dim[0] != oa.rows, NVFP4_EINVAL,
            "gemm: bias must be fp32/bf16 of shape [%lld] (got %s %s)",
            (long long)oa.rows, nvfp4_dtype_name(bias->dtype),
            nvfp4_shape_format(bias->shape, sb, sizeof sb));
  }
  oa.round_bf16 = round_bf16 && oa.dt == NVFP4_F32;
  ob.round_bf16 = round_bf16 && ob.dt == NVFP4_F32;
  FAIL_IF(ctx, ctx->ops->gemm == NULL, NVFP4_ENOTSUP,
          "gemm: the %s backend has no GEMM", ctx->ops->name);
  CHECK(nvfp4i_tensor_alloc_plain_uninit(ctx, out_shape(b, ub, oa.rows, ob.rows), out_dt, &d));
  CHECK_GOTO(ctx->ops->gemm(ctx, &oa, &ob, bias, d), st, fail);
  *out = d;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(d);
  return st;
}


/* ---- OpenBLAS core selection -------------------------------------------- */

/* OpenBLAS builds with DYNAMIC_ARCH pick their kernels from the CPU model at
** load time; before 0.3.25 an Intel model they do not know (Sapphire/Emerald
** Rapids, family 6 model 0x8F/0xCF, as on the CI machines) falls back to
** "Prescott", the SSE3 kernels, 5-7x slower than the AVX-512 ones
** (OpenMathLib/OpenBLAS#4267).  OPENBLAS_CORETYPE is OpenBLAS's own knob for
** this, but it is read before main().  nvfp4_blas_select_core (nvfp4.h) sets
** it and re-runs OpenBLAS's dynamic init; it touches the environment, so the
** program calls it once, early, before it starts threads (nvfp4-lua: before
** MPI_Init), never the library behind a caller's back.  Weak references: with
** another BLAS (or a build without DYNAMIC_ARCH) nothing happens. */
extern char *openblas_get_corename (void) __attribute__((weak));
extern void gotoblas_dynamic_init (void) __attribute__((weak));
extern void gotoblas_dynamic_quit (void) __attribute__((weak));

const char *nvfp4_blas_select_core (void) {
  const char *want = NULL, *core;
  if (openblas_get_corename == NULL || gotoblas_dynamic_init == NULL ||
      gotoblas_dynamic_quit == NULL)
    return NULL;
  core = openblas_get_corename();
  if (core == NULL || strcmp(core, "Prescott") != 0 || getenv("OPENBLAS_CORETYPE") != NULL)
    return core;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    want = __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
#endif
  if (want == NULL || setenv("OPENBLAS_CORETYPE", want, 0) != 0) return core;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  return openblas_get_corename();
}




/* ---- the CPU backend's GEMM -------------------------------------------- */

/* codes * E4M3 scale into fp32, exactly; dst [rows, cols] row-major. */
static void dequant_exact (const nvfp4i_gemm_operand *op, float *dst) {
  const uint8_t *data = (const uint8_t *)op->data;
  int64_t r, j, i, nblk = op->cols / NVFP4_BLOCK;
  for (r = 0; r < op->rows; r++) {
    const uint8_t *row = data + r * (op->cols / 2);
    const uint8_t *sc = op->scale + r * op->scale_ld;
    float *o = dst + r * op->cols;
    for (j = 0; j < nblk; j++) {
      float s = e4m3_value(sc[j]);
      const uint8_t *p = row + j * (NVFP4_BLOCK / 2);
      for (i = 0; i < NVFP4_BLOCK / 2; i++) {
        o[2 * i] = e2m1_value[p[i] & 0xF] * s;
        o[2 * i + 1] = e2m1_value[p[i] >> 4] * s;
      }
      o += NVFP4_BLOCK;
    }
  }
}


/* An fp32 view of an operand: borrowed when it already is fp32, else a new
** buffer (*owned) in the operand's storage order. */
static nvfp4_status as_f32 (const nvfp4i_gemm_operand *op, const float **p,
                            float **owned) {
  size_t n = (size_t)op->rows * (size_t)op->cols, i;
  float *f;
  *owned = NULL;
  if (op->dt == NVFP4_F32 && !op->round_bf16) {
    *p = (const float *)op->data;
    return NVFP4_OK;
  }
  f = (float *)nvfp4i_malloc((n ? n : 1) * sizeof *f);
  if (f == NULL) return NVFP4_ENOMEM;
  if (op->dt == NVFP4_FP4)
    dequant_exact(op, f);
  else if (op->dt == NVFP4_BF16)
    for (i = 0; i < n; i++) f[i] = nvfp4i_bf16_to_f32(((const uint16_t *)op->data)[i]);
  else
    for (i = 0; i < n; i++)
      f[i] = nvfp4i_bf16_to_f32(nvfp4i_f32_to_bf16(((const float *)op->data)[i]));
  *p = *owned = f;
  return NVFP4_OK;
}


static float bias_at (const nvfp4_tensor *bias, int64_t i) {
  if (bias->dtype == NVFP4_F32) return ((const float *)bias->data.p)[i];
  return nvfp4i_bf16_to_f32(((const uint16_t *)bias->data.p)[i]);
}


/* An operand's share of alpha on the host: its amax where it is (backend
** memory is the host's here), -1 for a plain operand. */
static float host_amax (const nvfp4i_gemm_operand *op) {
  if (op->dt != NVFP4_FP4) return -1.0f;
  return op->damax != NULL ? *op->damax : op->amax;
}


nvfp4_status nvfp4i_cpu_gemm (nvfp4_ctx *ctx, const nvfp4i_gemm_operand *a,
                              const nvfp4i_gemm_operand *b,
                              const nvfp4_tensor *bias, nvfp4_tensor *d) {
  const int64_t P = a->rows, Q = b->rows, R = a->cols;
  const float *A, *B;
  float *ownA = NULL, *ownB = NULL, *C = NULL;
  nvfp4_status st = NVFP4_ENOMEM;
  int64_t i, j;
  const float alpha = nvfp4i_gemm_alpha(host_amax(a), a->e6, host_amax(b), b->e6);
  if (P == 0 || Q == 0) return NVFP4_OK;
  if (d->dtype == NVFP4_F32) C = (float *)d->data.p;
  else if ((C = (float *)nvfp4i_malloc((size_t)P * (size_t)Q * sizeof *C)) == NULL) goto fail;
  if (R == 0)
    memset(C, 0, (size_t)P * (size_t)Q * sizeof *C);
  else {
    if (as_f32(a, &A, &ownA) != NVFP4_OK || as_f32(b, &B, &ownB) != NVFP4_OK) goto fail;
    /* C[Q, P] = alpha * opB[Q, R] . opA[P, R]^T; a transposed plain operand
    ** is stored [R, rows] and read through BLAS's transpose flag. */
    cblas_sgemm(CblasRowMajor, b->trans ? CblasTrans : CblasNoTrans,
                a->trans ? CblasNoTrans : CblasTrans, (int)Q, (int)P, (int)R, alpha,
                B, b->trans ? (int)Q : (int)R, A, a->trans ? (int)P : (int)R,
                0.0f, C, (int)P);
  }
  if (bias != NULL)
    for (j = 0; j < Q; j++)
      for (i = 0; i < P; i++) C[j * P + i] += bias_at(bias, i);
  if (d->dtype == NVFP4_BF16)
    for (i = 0; i < P * Q; i++) ((uint16_t *)d->data.p)[i] = nvfp4i_f32_to_bf16(C[i]);
  st = NVFP4_OK;
fail:
  if (d->dtype != NVFP4_F32) free(C);
  free(ownA);
  free(ownB);
  if (st != NVFP4_OK) nvfp4i_fail(ctx, st, "gemm: cannot allocate fp32 operands");
  return st;
}


/* ---- the float64 oracle ------------------------------------------------ */

/* The operand as a double matrix [rows, cols] on the host, dequantized as
** code * scale * (amax / (6*EMAX)) in double (e6 = 6*EMAX). */
static nvfp4_status host_f64 (nvfp4_ctx *ctx, const nvfp4_tensor *t, nvfp4_usage u,
                              const nvfp4i_gemm_operand *op, float amax, float e6,
                              double **out) {
  size_t n = (size_t)op->rows * (size_t)op->cols, i;
  int64_t r, c, r0, c0;
  float e4[256];
  double *m = (double *)nvfp4i_malloc((n ? n : 1) * sizeof *m);
  nvfp4_status st = NVFP4_ENOMEM;
  uint8_t *raw = NULL, *sc = NULL;
  *out = NULL;
  if (m == NULL) goto done;
  if (op->dt == NVFP4_FP4) {
    const nvfp4i_buf *db = u == NVFP4_ROWWISE ? &t->row_data : &t->col_data;
    const nvfp4i_buf *sb = u == NVFP4_ROWWISE ? &t->row_scale : &t->col_scale;
    double g = (double)amax / (double)e6;
    raw = (uint8_t *)nvfp4i_malloc(db->nbytes + 1);
    sc = (uint8_t *)nvfp4i_malloc(sb->nbytes + 1);
    if (raw == NULL || sc == NULL) goto done;
    CHECK_GOTO(nvfp4_tensor_buffer_read(t, u == NVFP4_ROWWISE ? NVFP4_ROWWISE_DATA
                                        : NVFP4_COLUMNWISE_DATA, raw, db->nbytes), st, done);
    CHECK_GOTO(nvfp4_tensor_buffer_read(t, u == NVFP4_ROWWISE ? NVFP4_ROWWISE_SCALE
                                        : NVFP4_COLUMNWISE_SCALE, sc, sb->nbytes), st, done);
    for (i = 0; i < 256; i++) e4[i] = e4m3_value((uint8_t)i);
    for (r = 0; r < op->rows; r++) {
      const uint8_t *row = raw + r * (op->cols / 2);
      double *o = m + r * op->cols;
      for (c = 0; c < op->cols; c += 2) {   /* q * scale * g, left to right */
        double s = (double)e4[sc[r * op->scale_ld + c / NVFP4_BLOCK]];
        o[c] = (double)e2m1_value[row[c / 2] & 0xF] * s * g;
        o[c + 1] = (double)e2m1_value[row[c / 2] >> 4] * s * g;
      }
    }
  }
  else {
    size_t es = nvfp4_dtype_size(t->dtype);
    raw = (uint8_t *)nvfp4i_malloc(n * es + 1);
    if (raw == NULL) goto done;
    CHECK_GOTO(nvfp4_tensor_to_host(t, raw, n * es), st, done);
    /* a transposed operand is stored [cols, rows]: element (r, c) at
    ** c*rows + r; 64x64 tiles keep both sides in cache */
    for (r0 = 0; r0 < op->rows; r0 += 64)
      for (c0 = 0; c0 < op->cols; c0 += 64)
        for (r = r0; r < op->rows && r < r0 + 64; r++)
          for (c = c0; c < op->cols && c < c0 + 64; c++) {
            size_t k = op->trans ? (size_t)(c * op->rows + r) : (size_t)(r * op->cols + c);
            m[r * op->cols + c] = t->dtype == NVFP4_F32 ? ((float *)raw)[k]
                                  : nvfp4i_bf16_to_f32(((uint16_t *)raw)[k]);
          }
  }
  st = NVFP4_OK;
done:
  free(raw); free(sc);
  if (st != NVFP4_OK) {
    free(m);
    if (st == NVFP4_ENOMEM) nvfp4i_fail(ctx, st, "gemm_ref64: out of host memory");
    return st;
  }
  *out = m;
  return NVFP4_OK;
}


nvfp4_status nvfp4_gemm_ref64 (nvfp4_ctx *ctx, const nvfp4_tensor *a,
                               nvfp4_usage ua, const nvfp4_tensor *b,
                               nvfp4_usage ub, nvfp4_tensor **out) {
  nvfp4i_gemm_operand oa, ob;
  float *cf = NULL;
  double *A = NULL, *B = NULL, *C = NULL;
  nvfp4_status st = NVFP4_ENOMEM;
  int64_t P, Q, R, i;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  FAIL_IF(ctx, out == NULL, NVFP4_EINVAL, "gemm_ref64: out is NULL");
  CHECK(describe_pair(ctx, "gemm_ref64", a, ua, b, ub, &oa, &ob, 1));
  P = oa.rows; Q = ob.rows; R = oa.cols;
  CHECK(check_blas_dims(ctx, "gemm_ref64", P, Q, R));
  CHECK_GOTO(host_f64(ctx, a, ua, &oa, oa.amax, oa.e6, &A), st, done);
  CHECK_GOTO(host_f64(ctx, b, ub, &ob, ob.amax, ob.e6, &B), st, done);
  st = NVFP4_ENOMEM;
  C = (double *)nvfp4i_calloc((size_t)(P * Q > 0 ? P * Q : 1), sizeof *C);
  cf = (float *)nvfp4i_malloc((size_t)(P * Q > 0 ? P * Q : 1) * sizeof *cf);
  if (C == NULL || cf == NULL) {
    nvfp4i_fail(ctx, st, "gemm_ref64: out of host memory");
    goto done;
  }
  if (P > 0 && Q > 0 && R > 0)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Q, (int)P, (int)R,
                1.0, B, (int)R, A, (int)R, 0.0, C, (int)P);
  for (i = 0; i < P * Q; i++) cf[i] = (float)C[i];
  st = nvfp4_tensor_from_host(ctx, out_shape(b, ub, P, Q), NVFP4_F32, cf,
                              (size_t)(P * Q) * sizeof *cf, out);
done:
  free(A); free(B); free(C); free(cf);
  return st;
}


/* ---- relative error ---------------------------------------------------- */

static nvfp4_status host_floats (const nvfp4_tensor *t, float **out) {
  size_t n = (size_t)nvfp4_shape_numel(t->shape), i;
  size_t es = nvfp4_dtype_size(t->dtype);
  void *raw = nvfp4i_malloc(n * es + 1);
  float *f = (float *)nvfp4i_malloc(n * sizeof *f + 1);
  nvfp4_status st = NVFP4_ENOMEM;
  *out = NULL;
  if (raw == NULL || f == NULL) goto done;
  if ((st = nvfp4_tensor_to_host(t, raw, n * es)) != NVFP4_OK) goto done;
  for (i = 0; i < n; i++)
    f[i] = t->dtype == NVFP4_F32 ? ((float *)raw)[i]
           : nvfp4i_bf16_to_f32(((uint16_t *)raw)[i]);
  *out = f;
  f = NULL;
done:
  free(raw);
  free(f);
  return st;
}


/* rel_error's local part: the arguments' checks and the two sums. */
static nvfp4_status rel_error_sums (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                    const nvfp4_tensor *ref, const double *err, double sums[2]) {
  float *fx = NULL, *fr = NULL;
  nvfp4_status st;
  int64_t n, i;
  CHECK_ARG(ctx, x, "rel_error");
  CHECK_ARG(ctx, ref, "rel_error");
  CHECK_ARG(ctx, err, "rel_error");
  FAIL_IF(ctx, x->ctx != ctx, NVFP4_EUSAGE, "rel_error: x belongs to another context than "
          "the group (its ctx %p, %s backend; the group's %p, %s)", (void *)x->ctx,
          x->ctx->ops->name, (void *)ctx, ctx->ops->name);
  FAIL_IF(ctx, ref->ctx != ctx, NVFP4_EUSAGE, "rel_error: ref belongs to another context "
          "than %s (its ctx %p, %s backend; %p, %s)", x->ctx == ctx ? "x" : "the group",
          (void *)ref->ctx, ref->ctx->ops->name, (void *)ctx, ctx->ops->name);
  FAIL_IF(ctx, x->dtype != NVFP4_F32 && x->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "rel_error: x has dtype %s (fp32 or bf16 expected)", nvfp4_dtype_name(x->dtype));
  FAIL_IF(ctx, ref->dtype != NVFP4_F32 && ref->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "rel_error: ref has dtype %s (fp32 or bf16 expected)",
          nvfp4_dtype_name(ref->dtype));
  n = nvfp4_shape_numel(x->shape);
  {  /* one [M, K] matrix, its leading dims split in any way ([S, 1, H] against
     ** a GEMM's [S, H]); a transposed reference is refused */
    char sx[160], sr[160];
    FAIL_IF(ctx, nvfp4_shape_M(x->shape) != nvfp4_shape_M(ref->shape) ||
            nvfp4_shape_K(x->shape) != nvfp4_shape_K(ref->shape), NVFP4_EINVAL,
            "rel_error: x %s and ref %s are different [M, K] matrices ([%lld, %lld] vs "
            "[%lld, %lld]; their leading dims may be split differently, M and K must agree)",
            nvfp4_shape_format(x->shape, sx, sizeof sx),
            nvfp4_shape_format(ref->shape, sr, sizeof sr),
            (long long)nvfp4_shape_M(x->shape), (long long)nvfp4_shape_K(x->shape),
            (long long)nvfp4_shape_M(ref->shape), (long long)nvfp4_shape_K(ref->shape));
  }
  CHECK_GOTO(host_floats(x, &fx), st, done);
  CHECK_GOTO(host_floats(ref, &fr), st, done);
  for (i = 0; i < n; i++) {
    double d = (double)fx[i] - (double)fr[i];
    sums[0] += d * d;
    sums[1] += (double)fr[i] * (double)fr[i];
  }
  st = NVFP4_OK;
done:
  if (st == NVFP4_ENOMEM) nvfp4i_fail(ctx, st, "rel_error: out of host memory");
  free(fx);
  free(fr);
  return st;
}


nvfp4_status nvfp4_rel_error (nvfp4_comm *c, const nvfp4_tensor *x,
                              const nvfp4_tensor *ref, double *err) {
  /* the group's context when there is a group (the failure's message is
  ** kept there, where its peers' EPEER is), else x's */
  nvfp4_ctx *ctx = c != NULL ? c->ctx : x != NULL ? x->ctx : NULL;
  double sums[2] = {0, 0};
  nvfp4_status st;
  if (ctx == NULL) return NVFP4_EINVAL;
  st = rel_error_sums(ctx, x, ref, err, sums);
  if (c != NULL && c->size > 1) {
    /* every rank's verdict first: a rank that failed here must not leave
    ** the others in the sum */
    CHECK(nvfp4i_comm_agree(c, "rel_error", st));
    FAIL_IF(ctx, MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, c->mpi) != MPI_SUCCESS,
            NVFP4_EMPI, "rel_error: MPI_Allreduce failed");
  }
  else if (st != NVFP4_OK) return st;
  *err = sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sqrt(sums[0]);
  return NVFP4_OK;
}
