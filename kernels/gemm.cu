/*
** gemm.cu -- the CUDA backend's GEMM entry (design.md decision 6, spec §10,
** §11): Hopper has no FP4 tensor cores, so an FP4 operand is dequantized
** *exactly* to bf16 (code * E4M3 scale has at most 6 significant bits and
** lies in [2^-10, 2688]), without its per-tensor factor, which is folded
** into alpha (on the device, gemm_alpha_kernel, from an amax a quantize left
** there or the host's copy); then one cuBLAS bf16 GEMM with fp32
** accumulation.  A
** plain F32 operand that is not to be rounded to bf16 makes both operands
** fp32 (cuBLAS fp32 GEMM, no TF32).  With a bias, or fp32 output, cuBLAS
** writes fp32 and a small kernel adds the bias and rounds once, as
** nvfp4i_cpu_gemm does.
**
** Expand mapping: see fp4_expand (8 elements per unit, warp-contiguous
** loads and 16-byte stores).
*/
#include <stdint.h>
#include <stdio.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include "config.h"
#include "cuda_int.h"
#include "ref_codec.h"
#include "fp4_units.h"


static nvfp4_status blas_fail (nvfp4_ctx *ctx, cublasStatus_t s, const char *call) {
  return nvfp4i_fail(ctx, s == CUBLAS_STATUS_ALLOC_FAILED ? NVFP4_ENOMEM : NVFP4_ECUBLAS,
                     "%s failed: %s (%s)", call,
                     cublasGetStatusString(s), cublasGetStatusName(s));
}

#define BLAS_CHECK(ctx, call)  \
  do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) return blas_fail((ctx), s_, #call); } while (0)


/* FP4 [rows, cols] -> exact values (bf16 bits or fp32), no global factor,
** by units of 8 elements (kernels/fp4_units.h): 16 bytes of bf16 out per
** unit, contiguous across the warp.  BF16: a byte's two codes become a
** bf16x2 pair through a 256-entry table, multiplied by the block's scale
** (E4M3 is exact in bf16) with one packed bf16 multiply -- exact, since
** the product has at most 6 significant bits. */
template <bool BF16>
__global__ void __launch_bounds__(256)
fp4_expand (const uint8_t *data, const uint8_t *scale, int64_t rows, int64_t cols,
            int64_t sld, void *out) {
  __shared__ uint32_t lut[256];
  const int64_t units = rows * (cols / 8), KB = cols / 16;
  const bool small = rows * KB <= 0xffffffffll;
  const int lane = threadIdx.x & 31;
  {
    const unsigned t = threadIdx.x;
    lut[t] = (__float_as_uint(e2m1_val(t & 15u)) >> 16) |
             (__float_as_uint(e2m1_val(t >> 4)) & 0xffff0000u);
  }
  __syncthreads();
  for (int64_t base = FP4_UNITS_FIRST; base < units; base += FP4_UNITS_STEP) {
    uint32_t d[4];
    unsigned sb[4];
    fp4_load_units4(data, scale, KB, sld, units, small, base, d, sb);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int64_t u = base + lane + 32 * i;
      if (u >= units) continue;
      const float sf = nvfp4i_e4m3_value(sb[i]);
      if (BF16) {
        const uint32_t s16 = __float_as_uint(sf) >> 16, s32 = s16 | (s16 << 16);
        const __nv_bfloat162 s2 = *(const __nv_bfloat162 *)&s32;
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
          uint32_t l = lut[(d[i] >> (8 * k)) & 0xffu];
          __nv_bfloat162 p = __hmul2(*(const __nv_bfloat162 *)&l, s2);
          w[k] = *(const uint32_t *)&p;
        }
        ((uint4 *)out)[u] = make_uint4(w[0], w[1], w[2], w[3]);
      }
      else {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = __fmul_rn(e2m1_val((d[i] >> (4 * k)) & 0xfu), sf);
        ((float4 *)out)[2 * u] = make_float4(v[0], v[1], v[2], v[3]);
        ((float4 *)out)[2 * u + 1] = make_float4(v[4], v[5], v[6], v[7]);
      }
    }
  }
}


/* Plain operand elements -> bf16 (RNE) or fp32, same layout. */
template <bool BF16>
__global__ void plain_convert (const void *in, int in_bf16, int64_t n, void *out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = in_bf16 ? __uint_as_float((uint32_t)((const uint16_t *)in)[i] << 16)
                      : ((const float *)in)[i];
    if (BF16) ((uint16_t *)out)[i] = nvfp4i_f32_to_bf16(v);
    else ((float *)out)[i] = v;
  }
}


/* d[q][p] = c[q][p] + bias[p], rounded once to d's dtype. */
static __global__ void bias_round (const float *c, const void *bias, int bias_bf16, int64_t P,
                            int64_t n, void *d, int d_bf16) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = c[i];
    if (bias != NULL) {
      int64_t p = i % P;
      float bv = bias_bf16 ? __uint_as_float((uint32_t)((const uint16_t *)bias)[p] << 16)
                           : ((const float *)bias)[p];
      v = __fadd_rn(v, bv);
    }
    if (d_bf16) ((uint16_t *)d)[i] = nvfp4i_f32_to_bf16(v);
    else ((float *)d)[i] = v;
  }
}


/* The operand as a matrix of type bf16 (or fp32) in its stored layout;
** *tmp receives a stream-ordered allocation to free, or NULL. */
static nvfp4_status materialize (nvfp4_ctx *ctx, const nvfp4i_gemm_operand *op, int bf16,
                                 const void **p, void **tmp) {
  cudaStream_t s = nvfp4i_stream(ctx);
  int64_t n = op->rows * op->cols;
  size_t es = bf16 ? 2 : 4;
  *tmp = NULL;
  *p = op->data;
  if (op->dt == NVFP4_BF16 && bf16) return NVFP4_OK;
  if (op->dt == NVFP4_F32 && !bf16) return NVFP4_OK;
  if (n == 0) return NVFP4_OK;
  CU_CHECK(ctx, nvfp4i_cuda_malloc_async(tmp, (size_t)n * es, s));
  if (op->dt == NVFP4_FP4) {
    if (bf16) fp4_expand<true><<<nvfp4i_grid_for(n / 32, 256), 256, 0, s>>>(
      (const uint8_t *)op->data, op->scale, op->rows, op->cols, op->scale_ld, *tmp);
    else fp4_expand<false><<<nvfp4i_grid_for(n / 32, 256), 256, 0, s>>>(
      (const uint8_t *)op->data, op->scale, op->rows, op->cols, op->scale_ld, *tmp);
  }
  else if (bf16) plain_convert<true><<<nvfp4i_grid_for(n, 256), 256, 0, s>>>(op->data, op->dt == NVFP4_BF16, n, *tmp);
  else plain_convert<false><<<nvfp4i_grid_for(n, 256), 256, 0, s>>>(op->data, op->dt == NVFP4_BF16, n, *tmp);
  CU_LAUNCHED(ctx, "gemm operand expand");
  *p = *tmp;
  return NVFP4_OK;
}


void nvfp4i_cuda_gemm_fini (nvfp4_ctx *ctx) {
  nvfp4i_cuda *c = nvfp4i_cuda_of(ctx);
  if (c->blas != NULL) cublasDestroy((cublasHandle_t)c->blas);
  c->blas = NULL;
}


/* alpha (spec §11) from the operands' amaxes, each in device memory (da,
** db: a quantize computed it) or given (aa, ab), into s[0], and beta = 0
** into s[1].  nvfp4i_gemm_alpha is the host's formula: the same bits. */
static __global__ void gemm_alpha_kernel (const float *da, float aa, float ea, const float *db, float ab,
                                   float eb, float *s) {
  s[0] = nvfp4i_gemm_alpha(da != nullptr ? *da : aa, ea, db != nullptr ? *db : ab, eb);
  s[1] = 0.0f;
}


/* dev: alpha and beta are c->gemm_scalars (device pointer mode), else
** 1 and 0 from the host (two plain operands: no per-tensor factor). */
static nvfp4_status run_gemm (nvfp4_ctx *ctx, const nvfp4i_gemm_operand *a,
                              const nvfp4i_gemm_operand *b, int dev, int bf16,
                              const void *A, const void *B, void *D, cudaDataType_t dt) {
  nvfp4i_cuda *c = nvfp4i_cuda_of(ctx);
  const int64_t P = a->rows, Q = b->rows, R = a->cols;
  float alpha = 1.0f, beta = 0.0f;
  cudaDataType_t it = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  if (c->blas == NULL) {
    cublasHandle_t h;
    cublasStatus_t ms;
    BLAS_CHECK(ctx, cublasCreate(&h));
    /* fp32 accumulation and one rounding to the output (spec §11): a
    ** split-K GEMM with a bf16 output may otherwise reduce its partial sums
    ** in bf16 (cuBLAS's default math mode allows it) */
    ms = cublasSetMathMode(h, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (ms != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      return blas_fail(ctx, ms, "cublasSetMathMode");
    }
    c->blas = h;
  }
  BLAS_CHECK(ctx, cublasSetStream((cublasHandle_t)c->blas, c->stream));
  BLAS_CHECK(ctx, cublasSetPointerMode((cublasHandle_t)c->blas,
                                       dev ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
  /* column-major view: D^T [P, Q] = opA [P, R] . opB^T [R, Q] */
  cublasStatus_t bs = cublasGemmEx((cublasHandle_t)c->blas,
                               a->trans ? CUBLAS_OP_N : CUBLAS_OP_T,
                               b->trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                               (int)P, (int)Q, (int)R, dev ? c->gemm_scalars : &alpha,
                               A, it, a->trans ? (int)P : (int)R,
                               B, it, b->trans ? (int)Q : (int)R,
                               dev ? c->gemm_scalars + 1 : &beta, D, dt, (int)P, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    /* its workspace out of device memory: ENOMEM, as any allocation */
    const nvfp4_status st = bs == CUBLAS_STATUS_ALLOC_FAILED ? NVFP4_ENOMEM : NVFP4_ECUBLAS;
    return nvfp4i_fail(ctx, st, "cublasGemmEx (%s, P=%lld Q=%lld R=%lld) failed: %s (%s)",
                       bf16 ? "bf16" : "fp32", (long long)P, (long long)Q, (long long)R,
                       cublasGetStatusString(bs), cublasGetStatusName(bs));
  }
  return NVFP4_OK;
}


nvfp4_status nvfp4i_cuda_gemm (nvfp4_ctx *ctx, const nvfp4i_gemm_operand *a,
                               const nvfp4i_gemm_operand *b,
                               const nvfp4_tensor *bias, nvfp4_tensor *d) {
  cudaStream_t s = nvfp4i_stream(ctx);
  const int64_t P = a->rows, Q = b->rows, R = a->cols;
  int bf16 = !((a->dt == NVFP4_F32 && !a->round_bf16) || (b->dt == NVFP4_F32 && !b->round_bf16));
  /* cuBLAS writes bf16 only from bf16 inputs; fp32 inputs go through tc */
  int direct = bias == NULL && (d->dtype == NVFP4_F32 || bf16);
  const void *A, *B;
  void *ta = NULL, *tb = NULL, *tc = NULL;
  nvfp4_status st = NVFP4_OK;
  if (P == 0 || Q == 0) return NVFP4_OK;
  FAIL_IF(ctx, P > 0x7fffffff || Q > 0x7fffffff || R > 0x7fffffff, NVFP4_EINVAL,
          "gemm: dims %lld x %lld x %lld exceed cuBLAS's int", (long long)P,
          (long long)Q, (long long)R);
  if (!direct || R == 0) {
    const cudaError_t e = nvfp4i_cuda_malloc_async(&tc, (size_t)P * (size_t)Q * sizeof(float), s);
    if (e != cudaSuccess) {             /* ENOMEM when out of memory, else ECUDA */
      char what[96];
      snprintf(what, sizeof what, "gemm: cudaMallocAsync of a %lldx%lld fp32 result", (long long)Q,
               (long long)P);
      return nvfp4i_cuda_fail(ctx, e, what, __FILE__, __LINE__);
    }
  }
  if (R == 0) {
    if (cudaMemsetAsync(tc, 0, (size_t)P * (size_t)Q * sizeof(float), s) != cudaSuccess)
      st = nvfp4i_cuda_fail(ctx, cudaGetLastError(), "cudaMemsetAsync", __FILE__, __LINE__);
  }
  else {
    /* an FP4 operand: alpha is formed on the device, from an amax still
    ** there (no wait) or the host's copy, so that cuBLAS runs in one
    ** pointer mode (its choice of kernel, and so the bits, do not depend on
    ** whether the amax was read back before) */
    const int dev = a->dt == NVFP4_FP4 || b->dt == NVFP4_FP4;
    CHECK_GOTO(materialize(ctx, a, bf16, &A, &ta), st, done);
    CHECK_GOTO(materialize(ctx, b, bf16, &B, &tb), st, done);
    if (dev) {
      gemm_alpha_kernel<<<1, 1, 0, s>>>(a->damax, a->dt == NVFP4_FP4 ? a->amax : -1.0f, a->e6,
                                       b->damax, b->dt == NVFP4_FP4 ? b->amax : -1.0f, b->e6,
                                       nvfp4i_cuda_of(ctx)->gemm_scalars);
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) {
        st = nvfp4i_cuda_fail(ctx, e, "gemm_alpha_kernel launch", __FILE__, __LINE__);
        goto done;
      }
    }
    if (direct)
      CHECK_GOTO(run_gemm(ctx, a, b, dev, bf16, A, B, d->data.p,
                          d->dtype == NVFP4_BF16 ? CUDA_R_16BF : CUDA_R_32F), st, done);
    else
      CHECK_GOTO(run_gemm(ctx, a, b, dev, bf16, A, B, tc, CUDA_R_32F), st, done);
  }
  if (tc != NULL && st == NVFP4_OK) {
    bias_round<<<nvfp4i_grid_for(P * Q, 256), 256, 0, s>>>((const float *)tc, bias ? bias->data.p : NULL,
                                                           bias && bias->dtype == NVFP4_BF16, P, P * Q,
                                                           d->data.p, d->dtype == NVFP4_BF16);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) st = nvfp4i_cuda_fail(ctx, e, "bias_round launch", __FILE__, __LINE__);
  }
done:
  if (ta) cudaFreeAsync(ta, s);
  if (tb) cudaFreeAsync(tb, s);
  if (tc) cudaFreeAsync(tc, s);
  return st;
}


/* Load this file's module now: under CUDA's lazy loading its first launch
** would wait for the device to go idle (kernels/cuda_comm.cu,
** nvfp4i_cuda_load_modules). */
cudaError_t nvfp4i_cuda_load_gemm (void) {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, plain_convert<false>);
}
