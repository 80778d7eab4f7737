/*
** dequantize.cu -- rowwise NVFP4 -> F32/BF16 (spec/nvfp4-numerics.md §10),
** bit-exact with nvfp4i_ref_dequantize (lib/ref_quantize.c), and the plain
** fp32 accumulation used by reduce-scatter / all-reduce (add_f32).
**
** Mapping: one thread per 16-element block b of the [M, K] tensor (block
** b = m*K/16 + kb): it reads 8 data bytes (row data is contiguous, so at
** 8*b) and scale byte [m][kb], and writes 16 outputs at 16*b.  Grid-stride.
**   out_i = OType_rn(fl(value(code_i) * fl(fl(sf32 * amax) * fl(1/2688))))
*/
#include <stdint.h>
#include <cuda_bf16.h>
#include "config.h"
#include "cuda_int.h"
#include "ref_codec.h"


static __device__ __forceinline__ float e2m1_val (unsigned c) {
  unsigned m = c & 7u;
  uint32_t u = m >= 2u ? (((m >> 1) + 126u) << 23) | ((m & 1u) << 22)
             : (m ? 0x3f000000u : 0u);
  return __uint_as_float(u | ((c & 8u) << 28));
}


static __device__ __forceinline__ uint32_t f32_to_bf16 (float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x0040u) & 0xffffu;
  return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;
}


/* fp32 multiply with x86 SSE's NaN results, so that NaN outputs (a NaN
** scale byte, or amax = Inf times a zero scale) have the reference's bits:
** a NaN operand is returned quieted, an invalid product is the default NaN
** 0xFFC00000.  (The GPU would return its canonical 0x7FFFFFFF.) */
static __device__ __forceinline__ float mul86 (float a, float b) {
  float r = __fmul_rn(a, b);
  if (r != r) {
    uint32_t ua = __float_as_uint(a), ub = __float_as_uint(b);
    if ((ua & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(ua | 0x400000u);
    if ((ub & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(ub | 0x400000u);
    return __uint_as_float(0xffc00000u);
  }
  return r;
}


/* nvfp4i_e4m3_value with the reference's NaN bits (0x7FC00000, sign of b). */
static __device__ __forceinline__ float e4m3_val (unsigned b) {
  unsigned E = (b >> 3) & 15u, M = b & 7u;
  uint32_t u;
  if (E == 15 && M == 7) u = 0x7fc00000u;
  else if (E == 0) u = __float_as_uint(__fmul_rn((float)M, 0.001953125f));
  else u = ((E - 7 + 127) << 23) | (M << 20);
  return __uint_as_float(u | ((b & 0x80u) << 24));
}


template <bool BF16>
__global__ void dequant_kernel (const uint8_t *data, const uint8_t *scale, int64_t KB,
                                int64_t sld, float amax, int64_t nblocks, int small, void *out) {
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < nblocks;
       b += (int64_t)gridDim.x * blockDim.x) {
    int64_t m, kb;
    if (small) { m = (uint32_t)b / (uint32_t)KB; kb = (uint32_t)b % (uint32_t)KB; }
    else { m = b / KB; kb = b % KB; }
    /* nvfp4i_dequant_scale: fl(fl(sf32 * amax) * fl(1/2688)) */
    float fs = mul86(mul86(e4m3_val(scale[m * sld + kb]), amax), 1.0f / 2688.0f);
    uint2 d = ((const uint2 *)data)[b];
    float v[16];
    if (fabsf(fs) < INFINITY) {
      /* finite factor (the usual case): no product is NaN, so the plain
      ** product is mul86's; values (m + 252) << 22 for codes m >= 2 */
#pragma unroll
      for (int i = 0; i < 16; i++) {
        unsigned c = ((i < 8 ? d.x : d.y) >> (4 * (i & 7))) & 0xfu, m = c & 7u;
        uint32_t u = m >= 2u ? (m + 252u) << 22 : (m ? 0x3f000000u : 0u);
        v[i] = __fmul_rn(__uint_as_float(u | ((c & 8u) << 28)), fs);
      }
    }
    else {
#pragma unroll
      for (int i = 0; i < 16; i++) {
        unsigned c = ((i < 8 ? d.x : d.y) >> (4 * (i & 7))) & 0xfu;
        v[i] = mul86(e2m1_val(c), fs);
      }
    }
    if (BF16 && fabsf(fs) < INFINITY) {
      /* finite factor: the products are not NaN, cvt.rn.bf16x2 is the RNE */
      uint4 *o = (uint4 *)((uint16_t *)out + b * 16);
      uint32_t w[8];
#pragma unroll
      for (int i = 0; i < 8; i++) {
        __nv_bfloat162 h2 = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        w[i] = *(uint32_t *)&h2;
      }
      o[0] = make_uint4(w[0], w[1], w[2], w[3]);
      o[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
    else if (BF16) {
      uint4 *o = (uint4 *)((uint16_t *)out + b * 16);
      uint32_t w[8];
#pragma unroll
      for (int i = 0; i < 8; i++) w[i] = f32_to_bf16(v[2 * i]) | (f32_to_bf16(v[2 * i + 1]) << 16);
      o[0] = make_uint4(w[0], w[1], w[2], w[3]);
      o[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
    else {
      float4 *o = (float4 *)((float *)out + b * 16);
#pragma unroll
      for (int i = 0; i < 4; i++) o[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
  }
}


static unsigned grid_for (int64_t work, int threads) {
  int64_t g = (work + threads - 1) / threads;
  if (g > 132 * 32) g = 132 * 32;
  return (unsigned)(g < 1 ? 1 : g);
}


nvfp4_status nvfp4i_cuda_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                     nvfp4_tensor *out) {
  int64_t M = nvfp4_shape_M(q->shape), K = nvfp4_shape_K(q->shape), KB = K / 16;
  int64_t nb = M * KB;
  cudaStream_t s = nvfp4i_stream(ctx);
  if (nb == 0) return NVFP4_OK;
  if (out->dtype == NVFP4_BF16)
    dequant_kernel<true><<<grid_for(nb, 256), 256, 0, s>>>(
      (const uint8_t *)q->row_data.p, (const uint8_t *)q->row_scale.p, KB,
      q->row_scale.shape.dim[1], q->amax[0], nb, nb < 0x7fffffff, out->data.p);
  else
    dequant_kernel<false><<<grid_for(nb, 256), 256, 0, s>>>(
      (const uint8_t *)q->row_data.p, (const uint8_t *)q->row_scale.p, KB,
      q->row_scale.shape.dim[1], q->amax[0], nb, nb < 0x7fffffff, out->data.p);
  CU_LAUNCHED(ctx, "dequant_kernel");
  return NVFP4_OK;
}


/* acc[i] += src[i] in fp32 (src F32 or BF16), as cpu_add_f32. */
template <bool BF16>
__global__ void add_kernel (float *acc, const void *src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = BF16 ? __uint_as_float((uint32_t)((const uint16_t *)src)[i] << 16)
                   : ((const float *)src)[i];
    acc[i] = __fadd_rn(acc[i], v);
  }
}


nvfp4_status nvfp4i_cuda_add_f32 (nvfp4_ctx *ctx, float *acc, const void *src,
                                  nvfp4_dtype dt, size_t n) {
  cudaStream_t s = nvfp4i_stream(ctx);
  if (n == 0) return NVFP4_OK;
  if (dt == NVFP4_BF16) add_kernel<true><<<grid_for((int64_t)n, 256), 256, 0, s>>>(acc, src, (int64_t)n);
  else add_kernel<false><<<grid_for((int64_t)n, 256), 256, 0, s>>>(acc, src, (int64_t)n);
  CU_LAUNCHED(ctx, "add_kernel");
  return NVFP4_OK;
}
