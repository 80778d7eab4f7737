/*
** transpose.cu -- swap_first_dims (spec/nvfp4-numerics.md §13): in
** [A, B, inner bytes] -> out [B, A, inner bytes], out[b][a] = in[a][b], a
** pure byte copy, bit-exact with cpu_swap_first_dims (lib/ref_backend.c).
**
** Three mappings by the size of the opaque trailing part:
**  - inner of 1, 2, 4, 8 or 16 bytes: a tiled 2-D transpose of [A, B]
**    elements; a CTA of 32x8 threads moves one 32x32 tile through shared
**    memory (coalesced reads of in-rows, coalesced writes of out-rows);
**    2-byte elements with A, B multiples of 8: 64x64 tiles moved as 16-byte
**    vectors (transpose16_vec); with A, B even: as 4-byte pairs;
**  - inner >= 64 bytes: one output row (b, a) of `inner` bytes at a time,
**    CTAs stride over rows and threads over the row's widest vectors
**    (16/8/4/2/1 bytes, whatever divides inner and both pointers);
**  - anything else: one thread per vector of the whole output.
*/
#include <stdint.h>
#include "config.h"
#include "cuda_int.h"


template <typename E>
__global__ void transpose_tiled (E *out, const E *in, int64_t A, int64_t B) {
  __shared__ E tile[32][33];
  int64_t tb = (int64_t)blockIdx.x * 32, ta = (int64_t)blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {          /* in rows a, cols b */
    int64_t a = ta + i, b = tb + threadIdx.x;
    if (a < A && b < B) tile[i][threadIdx.x] = in[a * B + b];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {          /* out rows b, cols a */
    int64_t b = tb + i, a = ta + threadIdx.x;
    if (a < A && b < B) out[b * A + a] = tile[threadIdx.x][i];
  }
}


/* 2-byte elements, A and B even: a 64x64 tile moved as 4-byte pairs, so
** every warp reads and writes 128 contiguous bytes per row. */
static __global__ void transpose_pairs16 (uint32_t *out, const uint32_t *in, int64_t A, int64_t B) {
  __shared__ uint16_t tile[64][66];
  int64_t tb = (int64_t)blockIdx.x * 64, ta = (int64_t)blockIdx.y * 64;
  for (int i = threadIdx.y; i < 64; i += 8) {          /* in row a, cols b, b+1 */
    int64_t a = ta + i, b = tb + 2 * threadIdx.x;
    if (a < A && b < B) {
      uint32_t w = in[(a * B + b) / 2];
      tile[i][2 * threadIdx.x] = (uint16_t)w;
      tile[i][2 * threadIdx.x + 1] = (uint16_t)(w >> 16);
    }
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 64; i += 8) {          /* out row b, cols a, a+1 */
    int64_t b = tb + i, a = ta + 2 * threadIdx.x;
    if (a < A && b < B)
      out[(b * A + a) / 2] = (uint32_t)tile[2 * threadIdx.x][i] |
                             ((uint32_t)tile[2 * threadIdx.x + 1][i] << 16);
  }
}


/* 2-byte elements, A and B multiples of 8, 16-byte aligned pointers: a
** 64x64 tile per CTA of 256 threads, moved as 16-byte vectors.  Shared
** memory holds the tile as 64 rows of 32 words (bf16 pairs), word column
** XOR 4*((row/8)%8), so that the 16-byte row stores and the column reads
** below are free of bank conflicts.  Thread t writes 8 elements (a0..a0+7,
** a0 = 8*(t%8)) of out rows b and b+1 (b = 2*(t/8)): it reads the 8 words
** [a0+r][b/2] and pairs their halves with byte permutes. */
static __global__ void __launch_bounds__(256)
transpose16_vec (uint4 *out, const uint4 *in, int64_t A, int64_t B) {
  __shared__ __align__(16) uint32_t sm[64 * 32];
  const int t = threadIdx.x;
  const int64_t tb = (int64_t)blockIdx.x * 64, ta = (int64_t)blockIdx.y * 64;
  {
    const int c = t & 7;
    uint4 v[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {          /* in rows ta+i, cols tb+8c..+7 */
      const int i = (t >> 3) + 32 * h;
      v[h] = make_uint4(0, 0, 0, 0);
      if (ta + i < A && tb + 8 * c < B) v[h] = in[((ta + i) * B + tb + 8 * c) / 8];
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int i = (t >> 3) + 32 * h;
      *(uint4 *)&sm[i * 32 + ((4 * c) ^ (((i >> 3) & 7) << 2))] = v[h];
    }
  }
  __syncthreads();
  {
    const int k8 = t & 7, a0 = 8 * k8, bp = t >> 3;
    const int64_t b = tb + 2 * bp;
    uint32_t w[8], lo[4], hi[4];
    if (ta + a0 >= A || b >= B) return;
#pragma unroll
    for (int r = 0; r < 8; r++) w[r] = sm[(a0 + r) * 32 + (bp ^ (k8 << 2))];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      lo[k] = __byte_perm(w[2 * k], w[2 * k + 1], 0x5410);   /* elements (a, b) */
      hi[k] = __byte_perm(w[2 * k], w[2 * k + 1], 0x7632);   /* elements (a, b+1) */
    }
    out[(b * A + ta + a0) / 8] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    out[((b + 1) * A + ta + a0) / 8] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
  }
}


template <typename V>
__global__ void swap_rows (char *out, const char *in, int64_t A, int64_t B, int64_t nv) {
  for (int64_t r = blockIdx.x; r < A * B; r += gridDim.x) {    /* r = b*A + a */
    int64_t b = r / A, a = r % A;
    const V *src = (const V *)in + (a * B + b) * nv;
    V *dst = (V *)out + r * nv;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) dst[i] = src[i];
  }
}


template <typename V>
__global__ void swap_elems (char *out, const char *in, int64_t A, int64_t B, int64_t nv) {
  int64_t total = A * B * nv;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
       o += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = o % nv, r = o / nv, b = r / A, a = r % A;
    ((V *)out)[o] = ((const V *)in)[(a * B + b) * nv + i];
  }
}


template <typename E>
static void launch_tiled (void *out, const void *in, int64_t A, int64_t B, cudaStream_t s) {
  dim3 grid((unsigned)((B + 31) / 32), (unsigned)((A + 31) / 32)), block(32, 8);
  transpose_tiled<E><<<grid, block, 0, s>>>((E *)out, (const E *)in, A, B);
}


static size_t widest (size_t inner, const void *a, const void *b) {
  size_t w = 16;
  while (w > 1 && (inner % w != 0 || ((uintptr_t)a | (uintptr_t)b) % w != 0)) w >>= 1;
  return w;
}


nvfp4_status nvfp4i_cuda_swap_first_dims (nvfp4_ctx *ctx, void *out, const void *in,
                                          int64_t A, int64_t B, size_t inner) {
  cudaStream_t s = nvfp4i_stream(ctx);
  size_t w;
  int64_t nv, g;
  if (A == 0 || B == 0 || inner == 0) return NVFP4_OK;
  w = widest(inner, out, in);
  if (inner == w && (B + 31) / 32 <= 0x7fffffff && (A + 31) / 32 <= 65535) {
    if (w == 2 && A % 8 == 0 && B % 8 == 0 && ((uintptr_t)out | (uintptr_t)in) % 16 == 0 &&
        (A + 63) / 64 <= 65535) {
      dim3 grid((unsigned)((B + 63) / 64), (unsigned)((A + 63) / 64));
      transpose16_vec<<<grid, 256, 0, s>>>((uint4 *)out, (const uint4 *)in, A, B);
      CU_LAUNCHED(ctx, "transpose16_vec");
      return NVFP4_OK;
    }
    if (w == 2 && A % 2 == 0 && B % 2 == 0 && ((uintptr_t)out | (uintptr_t)in) % 4 == 0 &&
        (A + 63) / 64 <= 65535) {
      dim3 grid((unsigned)((B + 63) / 64), (unsigned)((A + 63) / 64)), block(32, 8);
      transpose_pairs16<<<grid, block, 0, s>>>((uint32_t *)out, (const uint32_t *)in, A, B);
      CU_LAUNCHED(ctx, "transpose_pairs16");
      return NVFP4_OK;
    }
    switch (w) {
      case 1: launch_tiled<uint8_t>(out, in, A, B, s); break;
      case 2: launch_tiled<uint16_t>(out, in, A, B, s); break;
      case 4: launch_tiled<uint32_t>(out, in, A, B, s); break;
      case 8: launch_tiled<uint2>(out, in, A, B, s); break;
      default: launch_tiled<uint4>(out, in, A, B, s); break;
    }
    CU_LAUNCHED(ctx, "transpose_tiled");
    return NVFP4_OK;
  }
  nv = (int64_t)(inner / w);
  if (inner >= 64) {
    g = A * B < 132 * 64 ? A * B : 132 * 64;
    unsigned th = nv >= 256 ? 256 : (unsigned)((nv + 31) / 32 * 32);
    switch (w) {
      case 1: swap_rows<uint8_t><<<(unsigned)g, th, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      case 2: swap_rows<uint16_t><<<(unsigned)g, th, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      case 4: swap_rows<uint32_t><<<(unsigned)g, th, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      case 8: swap_rows<uint2><<<(unsigned)g, th, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      default: swap_rows<uint4><<<(unsigned)g, th, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
    }
  }
  else {
    int64_t total = A * B * nv;
    g = (total + 255) / 256;
    if (g > 132 * 32) g = 132 * 32;
    switch (w) {
      case 1: swap_elems<uint8_t><<<(unsigned)g, 256, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      case 2: swap_elems<uint16_t><<<(unsigned)g, 256, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      case 4: swap_elems<uint32_t><<<(unsigned)g, 256, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      case 8: swap_elems<uint2><<<(unsigned)g, 256, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
      default: swap_elems<uint4><<<(unsigned)g, 256, 0, s>>>((char *)out, (const char *)in, A, B, nv); break;
    }
  }
  CU_LAUNCHED(ctx, "swap_first_dims");
  return NVFP4_OK;
}


/* Load this file's module now: under CUDA's lazy loading its first launch
** would wait for the device to go idle (kernels/cuda_comm.cu,
** nvfp4i_cuda_load_modules). */
cudaError_t nvfp4i_cuda_load_transpose (void) {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, transpose_pairs16);
}
