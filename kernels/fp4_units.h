/*
** fp4_units.h -- device helpers of the kernels that read rowwise NVFP4
** buffers (data [rows, cols/2] bytes, scales [rows, sld] bytes) in units of
** 8 elements: kernels/dequantize.cu (dequantize) and kernels/gemm.cu (the
** GEMM's exact expansion).  Included by .cu files only.
*/
#ifndef NVFP4_FP4_UNITS_H
#define NVFP4_FP4_UNITS_H

#include <stdint.h>

/* The value of E2M1 code c (bit 3 the sign; spec §2): 0, 0.5, 1, 1.5, 2, 3,
** 4, 6, and -0 for code 8. */
static __device__ __forceinline__ float e2m1_val (unsigned c) {
  unsigned m = c & 7u;
  uint32_t u = m >= 2u ? (((m >> 1) + 126u) << 23) | ((m & 1u) << 22)
             : (m ? 0x3f000000u : 0u);
  return __uint_as_float(u | ((c & 8u) << 28));
}


/* The grid-stride walk over units: unit u = elements 8u..8u+7 = data bytes
** 4u..4u+3 = half of block u/2 (row (u/2)/KB, block (u/2)%KB; row data is
** contiguous).  A warp takes 128 consecutive units per step, lane l the
** units base+l, +32, +64, +96, so that each of its four 4-byte loads (and
** the caller's per-unit stores) is contiguous across the warp and the four
** loads are in flight together.  Launch with blockDim a multiple of 32. */
#define FP4_UNITS_FIRST  (((int64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31)) * 4)
#define FP4_UNITS_STEP   ((int64_t)gridDim.x * blockDim.x * 4)

/* The codes (d) and scale bytes (sb) of this lane's four units of the step
** at `base`; units at or past `units` read as 0.  small: u/2 < 2^32, so the
** row/block division runs in 32 bits. */
static __device__ __forceinline__ void fp4_load_units4 (const uint8_t *data,
                                                        const uint8_t *scale, int64_t KB,
                                                        int64_t sld, int64_t units, bool small,
                                                        int64_t base, uint32_t d[4],
                                                        unsigned sb[4]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int64_t u = base + lane + 32 * i;
    d[i] = 0; sb[i] = 0;
    if (u < units) {
      int64_t r, j;
      if (small) { uint32_t b = (uint32_t)(u >> 1); r = b / (uint32_t)KB; j = b % (uint32_t)KB; }
      else { r = (u >> 1) / KB; j = (u >> 1) % KB; }
      d[i] = ((const uint32_t *)data)[u];
      sb[i] = scale[r * sld + j];
    }
  }
}

#endif
