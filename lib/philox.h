/*
** philox.h -- Philox4x32-10 (Random123; TE's common/util/curanddx.hpp) and
** the stochastic-rounding byte mapping of libnvfp4, spec/nvfp4-numerics.md
** §5.2.  The round function and nvfp4i_sr_byte are static inline and
** marked __host__ __device__ under nvcc, so kernels/ use the very same
** formula as the CPU reference (design.md decision 2).
*/
#ifndef NVFP4_PHILOX_H
#define NVFP4_PHILOX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef NVFP4I_HD
#ifdef __CUDACC__
#define NVFP4I_HD __host__ __device__
#else
#define NVFP4I_HD
#endif
#endif

#define NVFP4I_PHILOX_M0  0xD2511F53u
#define NVFP4I_PHILOX_M1  0xCD9E8D57u
#define NVFP4I_PHILOX_W0  0x9E3779B9u
#define NVFP4I_PHILOX_W1  0xBB67AE85u

/* SR streams: the 128-bit counter's third word (spec "subsequence"). */
#define NVFP4I_SR_ROWWISE     0
#define NVFP4I_SR_COLUMNWISE  1

/* lo32(a*b), *hi = hi32(a*b).  On the GPU one mul.wide.u32 (the plain
** 64-bit product compiled to a 64-bit multiply of masked operands and an
** extra add per product). */
static inline NVFP4I_HD uint32_t nvfp4i_mulhilo32 (uint32_t a, uint32_t b, uint32_t *hi) {
#ifdef __CUDA_ARCH__
  uint64_t p;
  uint32_t lo, h;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(p) : "r"(a), "r"(b));
  asm("mov.b64 {%0, %1}, %2;" : "=r"(lo), "=r"(h) : "l"(p));
  *hi = h;
  return lo;
#else
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
#endif
}


/* One Philox4x32-10 evaluation: out = philox(ctr, key = {key lo32, key hi32}).
** Round: (c0,c1,c2,c3) -> (hi(M1*c2)^c1^k0, lo(M1*c2), hi(M0*c0)^c3^k1,
** lo(M0*c0)); the key is bumped by (W0, W1) between rounds, not after the
** last.  Pure; ctr and out may alias. */
static inline NVFP4I_HD void nvfp4i_philox4x32_10 (const uint32_t ctr[4],
                                                   uint64_t key,
                                                   uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  int i;
  for (i = 0; i < 10; i++) {
    uint32_t h0, h1;
    uint32_t l0 = nvfp4i_mulhilo32(NVFP4I_PHILOX_M0, c0, &h0);
    uint32_t l1 = nvfp4i_mulhilo32(NVFP4I_PHILOX_M1, c2, &h1);
    c0 = h1 ^ c1 ^ k0;
    c2 = h0 ^ c3 ^ k1;
    c1 = l1;
    c3 = l0;
    if (i < 9) { k0 += NVFP4I_PHILOX_W0; k1 += NVFP4I_PHILOX_W1; }
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}


/* The 16 random bytes of SR block `block` (= sr_offset + e/16) of a stream:
** bytes[j] = byte (j & 3) of word (j >> 2) of
** philox4x32_10(key = seed, counter = {block lo32, block hi32, stream, 0}),
** i.e. the first generate4() of TE's init(seed, subsequence = stream,
** offset = block).  bytes[j] serves element e = 16*(e/16) + j.
** nvfp4i_philox_block_words: the four words of that counter (the kernels
** take the bytes from them as they go; lib/random.c's streams too).  Spec
** §5.2; w is the caller's; no errors. */
static inline NVFP4I_HD void nvfp4i_philox_block_words (uint64_t seed, uint64_t block,
                                                        int stream, uint32_t w[4]) {
  uint32_t c[4];
  c[0] = (uint32_t)block;
  c[1] = (uint32_t)(block >> 32);
  c[2] = (uint32_t)stream;
  c[3] = 0;
  nvfp4i_philox4x32_10(c, seed, w);
}

static inline NVFP4I_HD void nvfp4i_sr_block_bytes (uint64_t seed, uint64_t block,
                                                    int stream, uint8_t bytes[16]) {
  uint32_t w[4];
  int j;
  nvfp4i_philox_block_words(seed, block, stream, w);
  for (j = 0; j < 16; j++)
    bytes[j] = (uint8_t)(w[j >> 2] >> (8 * (j & 3)));
}


/* The SR mapping of libnvfp4 (ours; TE's is kernel-specific, spec §17.1).
** For the buffer being quantized -- rowwise: the [M, K] matrix, stream 0;
** columnwise: the [K, M] transposed (and RHT'd) matrix, stream 1 -- the
** element at flat row-major index e (= r*cols + c of that 2-D buffer) uses
**   byte (e & 3) of 32-bit word ((e >> 2) & 3) of
**   philox4x32_10(key = seed, counter = {blk lo32, blk hi32, stream, 0}),
**   blk = offset + (e >> 4).
** One Philox call per 16-element quantization block.  Pure function. */
static inline NVFP4I_HD uint8_t nvfp4i_sr_byte (uint64_t seed, uint64_t offset,
                                                int stream, uint64_t e) {
  uint32_t c[4], w[4];
  uint64_t blk = offset + (e >> 4);
  c[0] = (uint32_t)blk;
  c[1] = (uint32_t)(blk >> 32);
  c[2] = (uint32_t)stream;
  c[3] = 0;
  nvfp4i_philox4x32_10(c, seed, w);
  return (uint8_t)(w[(e >> 2) & 3] >> (8 * (e & 3)));
}


/* TE's stateful form (spec §5.2): key = seed, 128-bit counter = 0, then
** subsequence added to the high 64 bits (c2, c3) and offset to the low 64
** bits (c0, c1); offset counts 128-bit blocks.  generate4 returns
** philox(counter), then increments the 128-bit counter by one. */
typedef struct nvfp4i_philox {
  uint64_t key;
  uint32_t ctr[4];
} nvfp4i_philox;

void nvfp4i_philox_init (nvfp4i_philox *p, uint64_t seed, uint64_t subsequence,
                         uint64_t offset);
void nvfp4i_philox_generate4 (nvfp4i_philox *p, uint32_t out[4]);

#ifdef __cplusplus
}
#endif
#endif
