/*
** dequantize.cu -- rowwise NVFP4 -> F32/BF16 (spec/nvfp4-numerics.md §10),
** bit-exact with nvfp4i_ref_dequantize (lib/ref_quantize.c), and the plain
** fp32 accumulation used by reduce-scatter / all-reduce (add_f32).
**
** Mapping: units of 8 elements (half a block; row data is contiguous, so
** unit u is data bytes 4u..4u+3 and block u/2 = m*K/16 + kb), four per
** thread, warp-contiguous (see dequant_kernel).  Grid-stride.
**   out_i = OType_rn(fl(value(code_i) * fl(fl(sf32 * amax) * fl(1/(6*EMAX)))))
*/
#include <stdint.h>
#include <cuda_bf16.h>
#include "config.h"
#include "cuda_int.h"
#include "ref_codec.h"
#include "fp4_units.h"


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


/* The 8 outputs of unit u (codes in d, block factor fs), stored at unit u. */
template <bool BF16>
static __device__ __forceinline__ void dequant_unit (uint32_t d, float fs, const uint2 *lut,
                                                     int64_t u, void *out) {
  float v[8];
  if (fabsf(fs) < INFINITY) {
    /* finite factor (the usual case): no product is NaN, so the plain
    ** product is mul86's; a byte's two values come from the table */
#pragma unroll
    for (int k = 0; k < 4; k++) {
      uint2 e = lut[(d >> (8 * k)) & 0xffu];
      v[2 * k] = __fmul_rn(__uint_as_float(e.x), fs);
      v[2 * k + 1] = __fmul_rn(__uint_as_float(e.y), fs);
    }
    if (BF16) {
      /* the products are not NaN: cvt.rn.bf16x2 is the RNE */
      uint32_t w[4];
#pragma unroll
      for (int k = 0; k < 4; k++) {
        __nv_bfloat162 h2 = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
        w[k] = *(uint32_t *)&h2;
      }
      ((uint4 *)out)[u] = make_uint4(w[0], w[1], w[2], w[3]);
      return;
    }
  }
  else {
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = mul86(e2m1_val((d >> (4 * k)) & 0xfu), fs);
    if (BF16) {
      uint32_t w[4];
#pragma unroll
      for (int k = 0; k < 4; k++) w[k] = (uint32_t)nvfp4i_f32_to_bf16(v[2 * k]) |
                                         ((uint32_t)nvfp4i_f32_to_bf16(v[2 * k + 1]) << 16);
      ((uint4 *)out)[u] = make_uint4(w[0], w[1], w[2], w[3]);
      return;
    }
  }
  ((float4 *)out)[2 * u] = make_float4(v[0], v[1], v[2], v[3]);
  ((float4 *)out)[2 * u + 1] = make_float4(v[4], v[5], v[6], v[7]);
}


/* By units of 8 elements (kernels/fp4_units.h), four per lane per step. */
template <bool BF16>
__global__ void __launch_bounds__(256)
dequant_kernel (const uint8_t *data, const uint8_t *scale, int64_t KB, int64_t sld,
                float amax, const float *damax, float finv, int64_t units, int small,
                void *out) {
  __shared__ uint2 lut[256];
  const int lane = threadIdx.x & 31;
  if (damax != nullptr) amax = *damax;      /* the quantize's, still in device memory */
  {
    const unsigned t = threadIdx.x;
    lut[t] = make_uint2(__float_as_uint(e2m1_val(t & 15u)), __float_as_uint(e2m1_val(t >> 4)));
  }
  __syncthreads();
  for (int64_t base = FP4_UNITS_FIRST; base < units; base += FP4_UNITS_STEP) {
    uint32_t d[4];
    unsigned sf[4];
    fp4_load_units4(data, scale, KB, sld, units, small != 0, base, d, sf);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int64_t u = base + lane + 32 * i;
      /* nvfp4i_dequant_scale_e: fl(fl(sf32 * amax) * fl(1/(6*EMAX))) */
      if (u < units)
        dequant_unit<BF16>(d[i], mul86(mul86(e4m3_val(sf[i]), amax), finv), lut, u, out);
    }
  }
}


nvfp4_status nvfp4i_cuda_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                     nvfp4_tensor *out) {
  int64_t M = nvfp4_shape_M(q->shape), K = nvfp4_shape_K(q->shape), KB = K / 16;
  int64_t nb = M * KB;
  cudaStream_t s = nvfp4i_stream(ctx);
  const float finv = 1.0f / (6.0f * nvfp4i_emax(q));     /* fl(1/2688) or fl(1/1536) */
  /* the rowwise amax: the host copy, or where the quantize left it */
  const float *damax = q->amax_pending ? (const float *)q->amax_dev.p : nullptr;
  if (nb == 0) return NVFP4_OK;
  /* units of 8 elements (K is a multiple of 16); each thread takes 4 */
  if (out->dtype == NVFP4_BF16)
    dequant_kernel<true><<<nvfp4i_grid_for((2 * nb + 3) / 4, 256), 256, 0, s>>>(
      (const uint8_t *)q->row_data.p, (const uint8_t *)q->row_scale.p, KB,
      q->row_scale.shape.dim[1], q->amax[0], damax, finv, 2 * nb, nb <= 0xffffffffll,
      out->data.p);
  else
    dequant_kernel<false><<<nvfp4i_grid_for((2 * nb + 3) / 4, 256), 256, 0, s>>>(
      (const uint8_t *)q->row_data.p, (const uint8_t *)q->row_scale.p, KB,
      q->row_scale.shape.dim[1], q->amax[0], damax, finv, 2 * nb, nb <= 0xffffffffll,
      out->data.p);
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
  if (dt == NVFP4_BF16) add_kernel<true><<<nvfp4i_grid_for((int64_t)n, 256), 256, 0, s>>>(acc, src, (int64_t)n);
  else add_kernel<false><<<nvfp4i_grid_for((int64_t)n, 256), 256, 0, s>>>(acc, src, (int64_t)n);
  CU_LAUNCHED(ctx, "add_kernel");
  return NVFP4_OK;
}


/* Load this file's module now: under CUDA's lazy loading its first launch
** would wait for the device to go idle (kernels/cuda_comm.cu,
** nvfp4i_cuda_load_modules). */
cudaError_t nvfp4i_cuda_load_dequantize (void) {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, add_kernel<false>);
}
