/*
** quantize.cu -- the amax pass and the one-pass NVFP4 quantize (rowwise and
** columnwise copies; 1D or 2D blocks; RHT on the columnwise copy; RN or
** stochastic rounding), bit-exact with lib/ref_quantize.c
** (nvfp4i_ref_amax, nvfp4i_ref_quantize), spec/nvfp4-numerics.md §3-§8.
**
** 4over6 (spec §9.1) runs in this generic kernel only (see fo6_*).
**
** Quantize mapping: one CTA of 256 threads per 64x64 tile of x ([M, K]
** row-major, F32 or BF16); tiles are numbered row-major over [M/64, K/64].
**
**        k0 ............ k0+63                thread t loads row t/4, block t%4
**   m0   [b0 ][b1 ][b2 ][b3 ]   --rowwise-->  (16 elements, from registers)
**   ..   [    64 rows       ]                 -> row_data[m][8 bytes], scale
**   m0+63[                  ]   --columnwise-> thread t: column t/4, rows
**                                              16*(t%4)..+15 (from shared
**                                              memory) -> col_data[k][8 bytes]
**
** Every fp32 operation of the §4 sequence is an explicit round-to-nearest
** intrinsic and the file is built with -fmad=false: no contraction.  The
** per-block multiplier enc depends only on the scale byte, so each CTA
** tabulates it once (256 entries per direction) with the reference formula.
**
** The amax pass: a grid-stride max|x| (NaN ignored) into one float with an
** integer atomicMax (non-negative floats order as their bits), and for RHT a
** second kernel, one thread per columnwise block, for max|bf16(RHT(x^T))|
** (bf16 shapes of whole 64x128 tiles: one pass of qfast_kernel<AMAX_ONLY>
** for both amaxes).
**
** The fast path (bf16, whole 64x128 tiles, or 128x128 where M allows and
** there is no RHT; qfast_kernel below) has its own mapping, described
** there; its RHT runs on tensor cores (mma.sync bf16, fp32 accumulation) for
** the blocks where that is provably exact, the rest exactly as the
** reference (rht16) after the CTA's tiles.  On large tensors (RN) a CTA
** takes its tiles in units of 4 along K and writes their rowwise scale
** bytes as whole sectors; the columnwise ones take a detour through a
** tile-major scratch and a second kernel (scale_gather_kernel), which
** writes them as whole sectors.  The fast kernel, and the gather after
** it, are programmatic dependent launches where the build allows (pdl_ok).
*/
#include <float.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <atomic>
#include <type_traits>
#include <cuda_bf16.h>
#include "config.h"
#include "cuda_int.h"
#include "rht_wide.h"           /* the wide-integer RHT column, shared with the CPU */
#include "ref_codec.h"
#include "philox.h"

#define TILE 64
#define NTHREADS 256


/* ---- element codecs ----------------------------------------------------- */

/* fp32 -> E2M1 RNE satfinite, equal to nvfp4i_e2m1_encode for every input:
** nvfp4i_e2m1_rn_grid (lib/ref_codec.h) gives NVFP4I_RN_GRID_BASE + code
** for a magnitude 0 <= a < 6.5 from two rounding grids and one integer min.
** NaN -> 0x7, sign kept otherwise (-0 -> 0x8).
** e2m1_rn_fast: the rule without the NaN clamp, for inputs that are never
** NaN: |y| is first clamped to 6 (code 7; one min with the absolute value as
** its operand modifier). */
static __device__ __forceinline__ unsigned e2m1_rn_fast (float y) {
  return (nvfp4i_e2m1_rn_grid(fminf(fabsf(y), 6.0f)) - NVFP4I_RN_GRID_BASE) |
         ((__float_as_uint(y) >> 28) & 8u);
}


static __device__ __forceinline__ unsigned e2m1_rn (float y) {
  return e2m1_rn_fast(fminf(y, FLT_MAX));  /* NaN -> +FLT_MAX -> 0x7; +Inf likewise */
}


/* Same rule as nvfp4i_e2m1_encode_sr (spec §5.2), with multiplications by
** the exact reciprocal of the power-of-two step instead of divisions. */
static __device__ __forceinline__ unsigned e2m1_sr (float y, unsigned r) {
  uint32_t u = __float_as_uint(y);
  float a = __uint_as_float(u & 0x7fffffffu), step, inv, lo;
  unsigned c;
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7u;
  if (a >= 6.0f) return 7u | ((u >> 28) & 8u);
  step = a >= 4.0f ? 2.0f : a >= 2.0f ? 1.0f : 0.5f;
  inv = a >= 4.0f ? 0.5f : a >= 2.0f ? 1.0f : 2.0f;
  lo = __fmul_rn(floorf(__fmul_rn(a, inv)), step);
  if (__fmul_rn(__fsub_rn(a, lo), 256.0f) >= __fmul_rn((float)(256u - (r & 0xffu)), step))
    lo = __fadd_rn(lo, step);
  if (lo < 2.0f) c = (unsigned)__fmul_rn(lo, 2.0f);
  else if (lo < 4.0f) c = (unsigned)__fadd_rn(lo, 2.0f);
  else c = lo < 6.0f ? 6u : 7u;
  return c | ((u >> 28) & 8u);
}


/* E4M3 RNE satfinite by the hardware conversion (cvt.rn.satfinite.e4m3x2;
** spec §2: equal to nvfp4i_e4m3_encode); the pair's other byte is that of
** +0, so the result is the byte itself (no mask before it indexes). */
static __device__ __forceinline__ unsigned e4m3_rn (float s) {
  unsigned r;
  asm("{ .reg .b16 t, z; mov.b16 z, 0; cvt.rn.satfinite.e4m3x2.f32 t, %1, %2; mov.b32 %0, {t, z}; }"
      : "=r"(r) : "f"(0.0f), "f"(s));
  return r;
}


/* The per-block multiplier of scale byte sf: nvfp4i_scale_enc, spelled with
** the rounding intrinsics (the plain '/' gives the same value but other
** code, and more spills in the SR fast kernel). */
static __device__ float enc_of (unsigned sf, float s_dec) {
  float d = __fmul_rn(nvfp4i_e4m3_value(sf), s_dec);
  return fminf(__fdiv_rn(1.0f, d), FLT_MAX);
}


static __device__ __forceinline__ float absmax16 (const float *v) {
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; i++) a = fmaxf(a, fabsf(v[i]));   /* NaN ignored */
  return a;
}


/* ---- exact 16-point RHT (nvfp4i_rht16, lib/ref_codec.c; lib/rht_wide.h) ---- */

struct f16 { float v[16]; };

static __device__ __forceinline__ float add_rn (float a, float b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ float sub_rn (float a, float b) { return __fsub_rn(a, b); }
static __device__ __forceinline__ double add_rn (double a, double b) { return __dadd_rn(a, b); }
static __device__ __forceinline__ double sub_rn (double a, double b) { return __dsub_rn(a, b); }

/* The unnormalised 16-point Hadamard butterfly in place, stage h = 1, 2, 4,
** 8 pairing x[k] and x[k + h] (nvfp4i_rht16's order), in fp32 or fp64.
** Loops of constant trip count: the nested form was left partly rolled in
** the fast kernel, x in local memory. */
template <typename T>
static __device__ __forceinline__ void butterfly16 (T *x) {
#pragma unroll
  for (int s = 0; s < 4; s++)
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int k = ((i >> s) << (s + 1)) | (i & ((1 << s) - 1));
      const T a = x[k], b = x[k + (1 << s)];
      x[k] = add_rn(a, b);
      x[k + (1 << s)] = sub_rn(a, b);
    }
}

/* The biased exponents (at least 1) of the largest and the smallest nonzero
** |v[r]|; false when all 16 are zero (both exponents are then 1). */
static __device__ __forceinline__ bool exp_span16 (const float *v, int *emax, int *emin) {
  uint32_t umax = 0, uminm1 = 0xffffffffu;
#pragma unroll
  for (int r = 0; r < 16; r++) {
    const uint32_t u = __float_as_uint(v[r]) & 0x7fffffffu;
    umax = max(umax, u);
    uminm1 = min(uminm1, u - 1u);
  }
  *emax = max((int)(umax >> 23), 1);
  *emin = max((int)((uminm1 + 1u) >> 23), 1);
  return umax != 0;
}

static __device__ __noinline__ f16 rht_slow (f16 in, int emax, int emin) {
  const float *w = in.v;
  f16 res;
  float *out = res.v;
  int r;
  if (emax - emin > 41 && emax < 255) {   /* Inf or NaN: the fp64 butterfly (nvfp4i_rht16) */
    for (int c = 0; c < 16; c++)
      out[c] = __uint_as_float((uint32_t)nvfp4i_rht_wide(w, c) << 16);
    return res;
  }
  double x[16];
  for (r = 0; r < 16; r++) x[r] = w[r];
  butterfly16(x);
  for (r = 0; r < 16; r++)
    out[r] = x[r] == 0.0 ? 0.0f
           : __uint_as_float((uint32_t)nvfp4i_bf16_from_double_any(__dmul_rn(0.25, x[r])) << 16);
  return res;
}


/* In place: v (16 exact bf16 values) -> bf16(RHT(v)) as floats.  When the
** nonzero inputs span at most 12 binades and cannot overflow, every partial
** sum of the fp32 butterfly is exact (multiples of 2^(emin-134) below
** 2^(emax-122) <= 2^24 units), so it equals the reference's exact sum; the
** rare other blocks take the reference's own fp64 / wide-integer paths. */
static __device__ __forceinline__ void rht16 (float *v, unsigned mask) {
  int emax, emin;
#pragma unroll
  for (int r = 0; r < 16; r++)
    /* a sign flip of the bits, as the host's negation: a NaN keeps its
    ** payload (the wide path reads it); GPU arithmetic would canonicalize */
    if ((mask >> r) & 1u) v[r] = __uint_as_float(__float_as_uint(v[r]) ^ 0x80000000u);
  if (!exp_span16(v, &emax, &emin)) {
#pragma unroll
    for (int r = 0; r < 16; r++) v[r] = 0.0f;
    return;
  }
  if (emax - emin > 12 || emax > 250) {
    if (emax - emin <= 41 && emax <= 250) {
      /* the reference's fp64 butterfly (exact: at most 53 bits), then one
      ** rounding to bf16: round to odd into fp32 (cvt.rz plus a sticky lsb,
      ** 24 >= 8 + 2 bits) and RNE to bf16 equals RNE of the double; no
      ** overflow below 2^126.  An exactly zero sum gives +0. */
      double x[16];
#pragma unroll
      for (int r = 0; r < 16; r++) x[r] = (double)v[r];
      butterfly16(x);
#pragma unroll
      for (int r = 0; r < 16; r++) {
        double d = __dmul_rn(0.25, x[r]);
        float f = __double2float_rz(d);
        if ((double)f != d) f = __uint_as_float(__float_as_uint(f) | 1u);
        if (d == 0.0) f = 0.0f;
        v[r] = __uint_as_float((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(f)) << 16);
      }
      return;
    }
    f16 in, out;
#pragma unroll
    for (int r = 0; r < 16; r++) in.v[r] = v[r];
    out = rht_slow(in, emax, emin);
#pragma unroll
    for (int r = 0; r < 16; r++) v[r] = out.v[r];
    return;
  }
  butterfly16(v);
#pragma unroll
  for (int r = 0; r < 16; r++) {
    float y = __fmul_rn(0.25f, v[r]);
    v[r] = y == 0.0f ? 0.0f : __uint_as_float((uint32_t)nvfp4i_f32_to_bf16(y) << 16);
  }
}


/* ---- loads -------------------------------------------------------------- */

static __device__ __forceinline__ void load16 (const float *p, float *v) {
  const float4 *q = (const float4 *)p;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float4 f = q[i];
    v[4 * i] = f.x; v[4 * i + 1] = f.y; v[4 * i + 2] = f.z; v[4 * i + 3] = f.w;
  }
}


static __device__ __forceinline__ void load16 (const uint16_t *p, float *v) {
  const uint4 *q = (const uint4 *)p;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    uint4 w = q[i];
    uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      v[8 * i + 2 * j] = __uint_as_float(ws[j] << 16);
      v[8 * i + 2 * j + 1] = __uint_as_float(ws[j] & 0xffff0000u);
    }
  }
}


/* ---- one block of 16 --------------------------------------------------- */

/* Codes of v times enc, packed low nibble first, RN or SR with the 16
** bytes of SR block `blk` of `stream` (nvfp4i_sr_block_bytes). */
template <bool SR>
static __device__ __forceinline__ uint2 encode16 (const float *v, float enc,
                                                  uint64_t seed, uint64_t blk,
                                                  int stream) {
  uint32_t w[4] = {0, 0, 0, 0};
  if (SR) {
    nvfp4i_philox_block_words(seed, blk, stream, w);
  }
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    float y = __fmul_rn(v[i], enc);
    unsigned code = SR ? e2m1_sr(y, (w[i >> 2] >> (8 * (i & 3))) & 0xffu) : e2m1_rn(y);
    if (i < 8) lo += code << (4 * i);        /* disjoint nibbles: + is | */
    else hi += code << (4 * (i - 8));
  }
  return make_uint2(lo, hi);
}


struct qparams {
  const void *x;
  int64_t M, K;
  uint8_t *rdata, *rscale, *cdata, *cscale;
  int64_t rsld, csld;                   /* scale row lengths (padded) */
  float rm, rsdec, cm, csdec;           /* m = fl(S_enc*inv6), S_dec per direction */
  int row, col, two_d;
  unsigned mask;
  uint64_t seed, offset;
  struct slow_list *sl;                 /* RHT fast path: deferred blocks */
  int scg;                              /* the scale gather's kernels (scg_wanted) */
  uint8_t *sgs;                         /* its scratch (columnwise scales; NULL without them) */
  uint64_t slcap;
  int fo6, fo6_mse;                     /* 4over6 (generic kernel only) */
  float rsenc, csenc, ramax, camax, e6; /* its S_enc and amax per direction, 6*EMAX */
  /* The amaxes in device memory (a quantize that computed them, q's
  ** amax_pending; NULL: the fields above were formed on the host):
  ** rowwise damax[0], columnwise damax[dcol]; the kernels form the fields
  ** above from them before their first use (dev_gscale; qfast_kernel's
  ** DEV instances keep their own copies, see gconst). */
  const float *damax;
  int dcol;
  float emax;                           /* the E4M3 maximum (448 or 256) */
};


/* The per-tensor constants of both directions from the amaxes in device
** memory, by the operations the host uses (nvfp4i_gscale_make_e: IEEE
** division and products, nothing to contract), so that both give the same
** bits. */
static __device__ __forceinline__ void dev_gscales (const qparams &p, nvfp4i_gscale *gr,
                                                    nvfp4i_gscale *gc) {
  *gr = nvfp4i_gscale_make_e(p.damax[0], p.emax);
  *gc = nvfp4i_gscale_make_e(p.damax[p.dcol], p.emax);
}

/* p's fields formed from them (the generic and follow-up kernels). */
static __device__ __forceinline__ void dev_gscale (qparams &p) {
  const float ra = p.damax[0], ca = p.damax[p.dcol];
  nvfp4i_gscale gr, gc;
  dev_gscales(p, &gr, &gc);
  p.rm = gr.m; p.rsdec = gr.s_dec; p.rsenc = gr.s_enc; p.ramax = ra;
  p.cm = gc.m; p.csdec = gc.s_dec; p.csenc = gc.s_enc; p.camax = ca;
}


/* ---- 4over6 (spec §9.1; lib/ref_quantize.c, same operation order) ------ */

/* The candidate scale bytes of block (tile) amax a_b: [0] map-to-4,
** [1] map-to-6 (nvfp4i_fo6_targets, encoded as the kernels encode). */
static __device__ void fo6_candidates (float a_b, float s_enc, unsigned sf[2]) {
  float t[2];
  nvfp4i_fo6_targets(a_b, s_enc, t);
  sf[0] = e4m3_rn(t[0]);
  sf[1] = e4m3_rn(t[1]);
}


/* The error of 16 elements x encoded with multiplier enc and scale byte sf
** (nvfp4i_fo6_error on this kernel's RN codes). */
static __device__ float fo6_error (const float *x, float enc, unsigned sf, float amax, float e6,
                                   int mse) {
  uint8_t c[16];
  for (int i = 0; i < 16; i++) c[i] = (uint8_t)e2m1_rn(__fmul_rn(x[i], enc));
  return nvfp4i_fo6_error(x, c, sf, amax, e6, mse);
}


/* 1D 4over6: the chosen scale byte of block v (ties and NaN: map-to-6). */
static __device__ unsigned fo6_choose (const float *v, float a_b, float s_enc, const float *enc,
                                       float amax, float e6, int mse) {
  unsigned sf[2];
  fo6_candidates(a_b, s_enc, sf);
  return fo6_error(v, enc[sf[0]], sf[0], amax, e6, mse) <
         fo6_error(v, enc[sf[1]], sf[1], amax, e6, mse) ? sf[0] : sf[1];
}


static __device__ float tile_amax (const float (*bam)[4], int r0, int b) {
  float a = 0.0f;
  for (int r = r0; r < r0 + 16; r++) a = fmaxf(a, bam[r][b]);
  return a;
}


template <typename T, bool SR, bool RHT>
__global__ void __launch_bounds__(NTHREADS, 4)
quantize_kernel (qparams p) {
  __shared__ float tile[TILE][TILE + 1];
  __shared__ float renc[256], cenc[256];
  __shared__ float bam[TILE][4];
  const int t = threadIdx.x;
  const int64_t ntk = (p.K + TILE - 1) / TILE;
  const int64_t m0 = (int64_t)(blockIdx.x / ntk) * TILE, k0 = (int64_t)(blockIdx.x % ntk) * TILE;
  const int64_t KB = p.K / 16;
  float v[16];

  if (p.damax != nullptr) dev_gscale(p);
  if (p.row) renc[t] = enc_of((unsigned)t, p.rsdec);
  if (p.col) cenc[t] = enc_of((unsigned)t, p.csdec);

  /* load: thread t owns row m0 + t/4, block (k0/16) + t%4 */
  const int lr = t >> 2, lb = t & 3;
  const int64_t m = m0 + lr, kb = k0 / 16 + lb;
  const bool valid = m < p.M && kb < KB;
  if (valid) load16((const T *)p.x + m * p.K + kb * 16, v);
  else {
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = 0.0f;
  }
  const float a_b = absmax16(v);
  if (p.col || p.two_d) {
#pragma unroll
    for (int i = 0; i < 16; i++) tile[lr][lb * 16 + i] = v[i];
    bam[lr][lb] = a_b;
  }
  __syncthreads();

  /* 2D 4over6: every 16x16 tile's choice from its 16 row errors, summed in
  ** TE's shuffle-tree order (r + r+8, then +4, +2, +1), per copy with its
  ** own amax (fo6sf[0] rowwise, [1] columnwise; nvfp4i_ref_quantize); rows
  ** past M are never in a used tile (M % 16 == 0) */
  __shared__ float fo6e[2][TILE][4];
  __shared__ unsigned fo6sf[2][4][4];
  if (p.fo6 && p.two_d) {
    for (int d = 0; d < 2; d++) {
      if (d == 0 ? !p.row : !p.col) continue;          /* the same for the whole CTA */
      const float senc = d ? p.csenc : p.rsenc, am = d ? p.camax : p.ramax;
      const float *enct = d ? cenc : renc;
      unsigned sf[2];
      fo6_candidates(tile_amax(bam, lr & ~15, lb), senc, sf);
      for (int k = 0; k < 2; k++)
        fo6e[k][lr][lb] = fo6_error(v, enct[sf[k]], sf[k], am, p.e6, p.fo6_mse);
      __syncthreads();
      if (t < 16) {
        const int ti = t >> 2, b = t & 3;
        float e[2][16];
        for (int k = 0; k < 2; k++)
          for (int r = 0; r < 16; r++) e[k][r] = fo6e[k][16 * ti + r][b];
        fo6_candidates(tile_amax(bam, 16 * ti, b), senc, sf);
        fo6sf[d][ti][b] = nvfp4i_fo6_tree_sum(e[0]) < nvfp4i_fo6_tree_sum(e[1]) ? sf[0] : sf[1];
      }
      __syncthreads();
    }
  }

  if (p.row && valid) {
    float ab = p.two_d ? tile_amax(bam, lr & ~15, lb) : a_b;
    float s = fminf(__fmul_rn(ab, p.rm), FLT_MAX);
    unsigned sf = e4m3_rn(s);
    if (p.fo6)
      sf = p.two_d ? fo6sf[0][lr >> 4][lb]
                   : fo6_choose(v, a_b, p.rsenc, renc, p.ramax, p.e6, p.fo6_mse);
    uint2 d = encode16<SR>(v, renc[sf], p.seed, p.offset + (uint64_t)(m * KB + kb),
                           NVFP4I_SR_ROWWISE);
    *(uint2 *)(p.rdata + m * (p.K / 2) + kb * 8) = d;
    p.rscale[m * p.rsld + kb] = (uint8_t)sf;
  }

  if (p.col) {
    const int j = t & 3, c = t >> 2;
    const int64_t k = k0 + c, mb = m0 / 16 + j;
    if (k < p.K && m0 + 16 * j < p.M) {
#pragma unroll
      for (int r = 0; r < 16; r++) v[r] = tile[16 * j + r][c];
      if (RHT) rht16(v, p.mask);
      float ab = p.two_d ? tile_amax(bam, 16 * j, c / 16) : absmax16(v);
      float s = fminf(__fmul_rn(ab, p.cm), FLT_MAX);
      unsigned sf = e4m3_rn(s);
      if (p.fo6)
        sf = p.two_d ? fo6sf[1][j][c / 16]
                     : fo6_choose(v, ab, p.csenc, cenc, p.camax, p.e6, p.fo6_mse);
      uint2 d = encode16<SR>(v, cenc[sf], p.seed,
                             p.offset + (uint64_t)(k * (p.M / 16) + mb),
                             NVFP4I_SR_COLUMNWISE);
      *(uint2 *)(p.cdata + k * (p.M / 2) + mb * 8) = d;
      p.cscale[k * p.csld + mb] = (uint8_t)sf;
    }
  }
}


static __device__ __forceinline__ void block_max_to (float a, float *dst) {
  __shared__ float red[32];
  for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
  __syncthreads();
  if (threadIdx.x < 32) {
    a = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    if (threadIdx.x == 0 && a > 0.0f) atomicMax((unsigned *)dst, __float_as_uint(a));
  }
}


/* ---- fast path: BF16, M % 64 == 0, K % 128 == 0, 1D blocks ---------------
**
** Persistent CTAs of 256 threads walk FMT x 128 tiles (grouped order, see
** tile_walk): FMT = 128 rows where M % 128 == 0 and there is no RHT, else
** 64.  Per tile: FMT/16 coalesced 16-byte cp.async copies per thread into
** one of two shared stages (FMT x 256 bytes each, rows of 64 words, 16-byte
** chunks permuted within a row by row/16 (sh_word), so that the 16-byte row
** accesses and the column reads are free of bank conflicts; RHT: rows
** padded to 68 words for ldmatrix); the next tile's copies are
** issued before this tile is encoded.  RHT:
** first, warp w rotates the 4 column blocks x 16 columns 16w.. on tensor
** cores (rht_tc_warp: 4 ldmatrix.x4.trans, 8 mma.m16n8k16, 16 bf16x2
** stores into its own ybuf region), which its column path below reads.
** Rowwise: thread t owns block t%8 of rows t/8 + 32i, i < FMT/32 (a warp
** writes 4 rows x 64 contiguous bytes), no exchange between threads.
** Columnwise, NJ = FMT/16 m-blocks: lane = NJ*pair + j: the thread reads 16
** words (2 adjacent columns, rows 16j..16j+15) and writes 8 bytes per
** column; the NJ lanes j of a column write its 8*NJ contiguous bytes and NJ
** scale bytes (one L2 request each: with 128 rows the L2 gets a third fewer
** write requests, which bound the RN kernel); for 128 rows each thread
** also takes the pair 32 words further.  The enc tables are built once per
** CTA.  AMAX_ONLY: the same column path, RHT'd, reduced to max|.| (the RHT
** amax, into amax_dst[0]) and, before the RHT, the plain max|x| (into
** amax_dst[-1]): one read of x for both amaxes of an RHT quantize
** (nvfp4i_cuda_amax).  Fast paths: a block whose fl(amax*enc) < 6.5 (RN,
** codes8_fast) or < 8 (SR, codes8_sr) is encoded without the NaN and
** saturation handling, its amax from packed bf16 pairs and its signs from
** the input words; any other block takes the exact path (enc8), the same
** bytes either way.  RHT: the column blocks of a tile are rotated
** on tensor cores (rht_tc_warp); a block whose result there is not provably
** exact (rht_tc_exact: about 0.4% of randn blocks, and blocks with
** subnormal, huge, Inf or NaN inputs) is only recorded in the CTA's shared
** list, with its inputs, and redone exactly after the CTA's tiles
** (fix_list, out of line, so the tile loop keeps its registers); past DCAP
** blocks per CTA, in the context's deferred list for rht_fix_kernel,
** launched right after (its codes and scale, or its share of the amax).
**
** Element encode, RN (= nvfp4i_e2m1_encode, see e2m1_rn): y = fl(v*enc) is
** a GPU product, so a NaN y is the canonical positive NaN: fminf drops it,
** the clamp gives 7 and the sign bit is 0 -- no NaN guard needed.
** SR (= nvfp4i_e2m1_encode_sr): with u = r/256 the rule rounds up iff
** frac(|y|/step) + u >= 1, i.e. the value is step * floor(|y|/step + u), and
** as for RN the code is min(floor(2a + u), 2 + floor(a + u),
** 4 + floor(a/2 + u), 7) (each term is right in its binade and too large
** elsewhere); the fast path takes the code from the bits of a instead (see
** codes8_sr), the exact path as follows.  With a clamped to 6 (code 7 for
** a >= 6, NaN included: fminf(NaN, 6) = 6), fma_rd(a, 512, 2^23 + r) =
** 2^23 + floor(512a + r) exactly (below 2^24), so floor(2a + u) is that
** float's bits minus 0x4B000000, over 256; likewise 256a and 128a.  The
** minimum is taken on the bits as integers (the +2 and +4 become +512 and
** +1024 before the shift; the shift is monotone), and min(...) >> 8 =
** 0x4B0000 + code. */

#define FM 64
#define FK 128


/* The SR code of magnitude a >= 0 (or NaN) plus 0x4B0000; rb: 0x4B000000 |
** r as a float (2^23 + r, r the random byte). */
static __device__ __forceinline__ uint32_t e2m1_sr_bits (float a, float rb) {
  a = fminf(a, 6.0f);
  const uint32_t h0 = __float_as_uint(__fmaf_rd(a, 512.0f, rb));
  const uint32_t h1 = __float_as_uint(__fmaf_rd(a, 256.0f, rb));
  const uint32_t h2 = __float_as_uint(__fmaf_rd(a, 128.0f, rb));
  return min(min(h0, h1 + 512u), h2 + 1024u) >> 8;
}


/* rb of element e of a block from its SR words w (byte e -> word e/4). */
static __device__ __forceinline__ float sr_rb (const uint32_t *w, int e) {
  return __uint_as_float(__byte_perm(w[e >> 2], 0x4B000000u, 0x7540u + (e & 3)));
}


/* 8 codes of v[0..8) * enc packed low nibble first; SR bytes from words w
** (byte e of the block -> word e/4, byte e%4; e = e0 + i).  The winning
** grid value's bits, m_i = B + code_i (B = NVFP4I_RN_GRID_BASE for RN, see
** nvfp4i_e2m1_rn_grid; 0x4B0000 for SR, see e2m1_sr_bits), are packed as
** they are by multiply-adds (acc*16 + m_i): the B parts add up to
** B * 0x11111111 mod 2^32, removed by one add; the signs (bit 31
** of y, 0 for the GPU's canonical NaN) go in the same way at bit 3 of each
** nibble.  RN as e2m1_rn_fast, SR as nvfp4i_e2m1_encode_sr (see above). */
template <bool SR>
static __device__ __forceinline__ uint32_t enc8 (const float *v, float enc, const uint32_t *w,
                                                 int e0) {
  const uint32_t B = SR ? 0x4B0000u : NVFP4I_RN_GRID_BASE;
  uint32_t acc = 0, sg = 0;
#pragma unroll
  for (int i = 7; i >= 0; i--) {
    const float y = __fmul_rn(v[i], enc);
    const uint32_t m = SR ? e2m1_sr_bits(fabsf(y), sr_rb(w, e0 + i))
                          : nvfp4i_e2m1_rn_grid(fminf(fabsf(y), 6.0f));
    acc = acc * 16u + m;
    sg = sg * 16u + (__float_as_uint(y) >> 31);
  }
  return acc - B * 0x11111111u + sg * 8u;
}


/* n codes of v[0..n) * enc packed low nibble first (two words for 16). */
template <bool SR, int N>
static __device__ __forceinline__ void enc_n (const float *v, float enc,
                                              const uint32_t *w, uint32_t *out) {
#pragma unroll
  for (int h = 0; h < N / 8; h++) out[h] = enc8<SR>(v + 8 * h, enc, w, 8 * h);
}


/* The RN fast path of qfast_kernel, for blocks whose largest |y| =
** fl(amax_b * enc) is below 6.5 (so no NaN, no Inf, no saturation: every
** scaled magnitude a < 6.5, nvfp4i_e2m1_rn_grid's domain, where its code is
** already at most 7 without e2m1_rn_fast's clamp).  a = fl(|v| * enc) =
** |fl(v * enc)|; the signs come from the bf16 input words (enc > 0, so
** sign(y) = sign(v), -0 included), placed with byte permutes (prmt's
** sign-replicating selectors): se holds 0x00/0xFF bytes for elements 0, 2,
** 4, 6 of the 8, so for 1, 3, 5, 7; element 2k's sign is bit 8k+3 of the
** packed word, element 2k+1's bit 8k+7.  Blocks that fail the bound take
** the exact path (exact16, through enc8<false>); the result is the same bytes
** either way. */
static __device__ __forceinline__ uint32_t prmt (uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}


/* x itself, hidden from the optimizer: a value computed once stays in its
** register instead of being recomputed where it is used. */
static __device__ __forceinline__ uint32_t opaque (uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

static __device__ __forceinline__ size_t opaque64 (size_t x) {
  asm volatile("" : "+l"(x));
  return x;
}


/* max with NaN propagation (max.NaN.f32): a NaN anywhere makes the block
** fail the fast path's bound. */
static __device__ __forceinline__ float fmax_nan (float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}


#define FAST_RN_BOUND 6.5f

/* The 8 magnitude codes of |v[0..8)| * enc (a < 6.5), packed as enc8:
** sum g_i 16^i less the grids' base, summed as a tree (pairs, quads, the
** word: 7 multiply-adds three deep, where acc * 16 + g_i was seven deep;
** RHT +1% on the H200, kernels/PERFORMANCE.md). */
static __device__ __forceinline__ uint32_t codes8_fast (const float *v, float enc) {
  uint32_t g[8];
#pragma unroll
  for (int i = 0; i < 8; i++) g[i] = nvfp4i_e2m1_rn_grid(__fmul_rn(fabsf(v[i]), enc));
  const uint32_t p0 = g[1] * 16u + g[0], p1 = g[3] * 16u + g[2];
  const uint32_t p2 = g[5] * 16u + g[4], p3 = g[7] * 16u + g[6];
  const uint32_t acc = (p3 * 256u + p2) * 65536u + (p1 * 256u + p0);
  return acc - NVFP4I_RN_GRID_BASE * 0x11111111u;
}


/* The 8 SR magnitude codes of |v[0..8)| * enc, bytes from w[0..2), packed
** as enc8, for blocks whose fl(amax*enc) < 8 (FAST_SR_BOUND); the rule is
** nvfp4i_e2m1_sr_rz_sum / _term (lib/ref_codec.h, tested there).  With a =
** fl(|v|*enc) < 8, z = a*2^-126 rounded toward zero is a normal float for
** a >= 1 (exponent field 1, 2, 3 for the binades [1,2), [2,4), [4,8)) and
** a subnormal for a < 1 (bits floor(a*2^23)).  Either way the bits of z from
** 22 up are the E2M1 code of a rounded down (floor(2a), 2 + floor(a),
** 4 + floor(a/2)), and bits 0..21 are frac(a/step) * 2^22, exactly for a >= 1
** and rounded down for a < 1.  Adding r*2^14 (u = r/256 at the same scale)
** carries into bit 22 iff frac + u >= 1 -- with the truncation, iff the
** exact value's frac + u >= 1, since r*2^14 is an integer -- which is the
** rule of nvfp4i_e2m1_encode_sr; so (z + r*2^14) >> 22 is the code, or 8
** for a >= 6 rounded up, which becomes 7 in the packed word (a nibble 8 is
** the only one with bit 3 set).
** Packing: the kernel forms t = 4z + r*2^16 = 4 (z + r*2^14) (one multiply-
** add, r placed at byte 2 by the permute; z < 2^25, no overflow), whose
** bits 24..27 are the code; a pair's word (t_odd's code bits) * 16 + t_even
** holds both codes in its byte 3 (the lower bits are the even element's
** fraction), and three byte permutes gather the four pairs' bytes: 11
** instructions for 8 codes instead of 16 for acc*16 + (t >> 22). */
#define FAST_SR_BOUND 8.0f

static __device__ __forceinline__ uint32_t codes8_sr (const float *v, float enc,
                                                      const uint32_t *w) {
  uint32_t pw[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    uint32_t tt[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int i = 2 * k + h;
      const uint32_t z = __float_as_uint(__fmul_rz(__fmul_rn(fabsf(v[i]), enc), 0x1p-126f));
      /* the random byte placed at bits 16..23 */
      const uint32_t r16 = __byte_perm(w[i >> 2], 0u, 0x4044u + ((uint32_t)(i & 3) << 8));
      tt[h] = nvfp4i_e2m1_sr_rz_sum(z, r16);    /* code in bits 24..27 */
    }
    /* opaque: the compiler's shift-then-mask form costs one more */
    pw[k] = opaque(tt[1] & 0x0F000000u) * 16u + tt[0];
  }
  const uint32_t acc = prmt(prmt(pw[0], pw[1], 0x7373u), prmt(pw[2], pw[3], 0x7373u), 0x5410u);
  return acc - ((acc >> 3) & 0x11111111u);
}


/* Codes with the signs of se/so (see above). */
static __device__ __forceinline__ uint32_t with_signs (uint32_t codes, uint32_t se, uint32_t so) {
  return codes | (se & 0x08080808u) | (so & 0x80808080u);
}


static __device__ __forceinline__ void unpack8 (uint4 q, float *v) {
  uint32_t ws[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; j++) {
    v[2 * j] = __uint_as_float(ws[j] << 16);
    v[2 * j + 1] = __uint_as_float(ws[j] & 0xffff0000u);
  }
}


/* The deferred list of the RHT fast path: the columnwise blocks (index
** k * (M/16) + mb) failing rht_tc_exact past a CTA's own DCAP.  n counts
** every deferred block, also those past cap (then the follow-up scans all
** blocks); the follow-up kernel resets n and done for the next launch on
** the stream. */
struct slow_list {
  unsigned long long n;
  unsigned done, pad;
  uint64_t e[1];
};


static __device__ __forceinline__ void slow_defer (slow_list *sl, uint64_t cap, uint64_t g) {
  unsigned long long i = atomicAdd(&sl->n, 1ull);
  if (i < cap) sl->e[i] = g;
}


/* Tile t -> (m-tile, k-tile), grouped: panels of P m-tiles, walked column
** by column within a panel (tile_walk: a CTA's tiles t, t + grid, ...;
** with the scale gather the walk is over units of 4 k-tiles, a CTA taking
** a unit's tiles one after another).
** The ~528 tiles in flight at once then form a block of about P x 528/P
** tiles, so every output row -- rowwise rows of rdata and columnwise rows of
** cdata alike -- receives ~1 KB of contiguous bytes at a time, instead of
** the pieces per column that a plain row-major walk scatters over all K.
** P = QPANEL (32: 2048 rows) for tiles of 64 rows, QPANEL128 (8: 1024 rows)
** for 128 rows; measured on the H200 (RNE, [8192, 8192] / [32768, 8192]):
** 128 rows with P = 32 0.794 / 0.659, 16 0.793 / 0.677, 8 0.807 / 0.672,
** 64 0.773 / 0.634 of the copy. */
#ifndef QPANEL
#define QPANEL 32u              /* -DQPANEL=... overrides, for measuring */
#endif
#ifndef QPANEL128
#define QPANEL128 8u            /* likewise */
#endif

struct tile_walk {
  unsigned first, r;          /* the panel's first m-tile; tile - first * ntk */
};

template <uint32_t P>
static __device__ __forceinline__ tile_walk walk_start (unsigned tile, unsigned ntk) {
  tile_walk w;
  w.first = (tile / (P * ntk)) * P;
  w.r = tile - w.first * ntk;
  return w;
}

/* The tile's (m0, k0) for tiles of FMT rows; a full panel (all but perhaps
** the last) needs no division. */
template <uint32_t P, uint32_t FMT>
static __device__ __forceinline__ void walk_coords (tile_walk w, unsigned ntm,
                                                    uint32_t *m0, uint32_t *k0) {
  const unsigned gm = min(P, ntm - w.first);
  if (gm == P) {
    *m0 = (w.first + (w.r & (P - 1))) * FMT;
    *k0 = (w.r / P) * FK;
  }
  else {
    *m0 = (w.first + w.r % gm) * FMT;
    *k0 = (w.r / gm) * FK;
  }
}

/* tile += stride: every panel before the last is full (P * ntk tiles). */
template <uint32_t P>
static __device__ __forceinline__ void walk_advance (tile_walk *w, unsigned stride, unsigned ntk) {
  w->r += stride;
  while (w->r >= P * ntk) {
    w->r -= P * ntk;
    w->first += P;
  }
}


/* Asynchronous 16-byte copies global -> shared (cp.async.cg: through L2
** only), committed as one group per tile.  (An L2 evict-first policy
** operand made ptxas 13.0 emit an odd uniform register pair as the memory
** descriptor: an illegal instruction at run time.) */
static __device__ __forceinline__ void cp_async16 (uint32_t sdst, const void *gsrc) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(sdst), "l"(gsrc) : "memory");
}

static __device__ __forceinline__ void cp_commit (void) {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

/* Wait until at most N of this thread's committed groups are in flight. */
template <int N>
static __device__ __forceinline__ void cp_wait (void) {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}


/* The sign bits of the 8 bf16 elements of q placed into their nibbles'
** bit 3 (see with_signs): element 2k's sign is bit 15 of word k. */
static __device__ __forceinline__ uint32_t signs8 (uint4 q, uint32_t codes) {
  const uint32_t p1 = prmt(q.x, q.y, 0xFBD9u), p2 = prmt(q.z, q.w, 0xFBD9u);
  return with_signs(codes, prmt(p1, p2, 0x5410u), prmt(p1, p2, 0x7632u));
}


/* The same for the 8 elements of column cc (0: low halves, 1: high) held
** in the row words w8[0..8). */
static __device__ __forceinline__ uint32_t col_signs8 (const uint32_t *w8, int cc, uint32_t codes) {
  const uint32_t sel = cc ? 0x7632u : 0x5410u;
  const uint32_t pe1 = prmt(w8[0], w8[2], 0xFBD9u), pe2 = prmt(w8[4], w8[6], 0xFBD9u);
  const uint32_t po1 = prmt(w8[1], w8[3], 0xFBD9u), po2 = prmt(w8[5], w8[7], 0xFBD9u);
  return with_signs(codes, prmt(pe1, pe2, sel), prmt(po1, po2, sel));
}


/* Packed max|.| of bf16 pairs (max.NaN.xorsign.abs: the magnitude is the
** larger one, exact; the sign bit is garbage; a NaN gives NaN). */
static __device__ __forceinline__ uint32_t hmax_abs2 (uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/* The tensor-core RHT's exactness test (see rht_tc_warp) for one column's
** 16 inputs v, zeros allowed: the nonzero ones' biased exponents in [20,
** 250] and at most 12 apart; an all-zero column passes. */
static __device__ __forceinline__ bool rht_tc_exact (const float *v) {
  int emax, emin;
  if (!exp_span16(v, &emax, &emin)) return true;
  return emax <= 250 && emin >= 20 && emax - emin <= 12;
}

/* Packed min|.| of bf16 pairs (a NaN loses to the other operand; the sign
** bit is garbage). */
static __device__ __forceinline__ uint32_t hmin_abs2 (uint32_t a, uint32_t b) {
  uint32_t d;
  asm("min.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/* Packed max|.| (NaN propagating) of the 16 words w[0..16): both columns of
** a column pair at once. */
static __device__ __forceinline__ uint32_t hmax_abs16 (const uint32_t *w) {
  uint32_t m8[8];
#pragma unroll
  for (int r = 0; r < 8; r++) m8[r] = hmax_abs2(w[r], w[r + 8]);
#pragma unroll
  for (int r = 0; r < 4; r++) m8[r] = hmax_abs2(m8[r], m8[r + 4]);
  return hmax_abs2(hmax_abs2(m8[0], m8[2]), hmax_abs2(m8[1], m8[3])) & 0x7fff7fffu;
}

/* Bit cc set when column cc of the pair in words w (pre-RHT inputs) may take
** the tensor-core RHT (see rht_tc_warp): max|x| at most 0x7D7F (biased
** exponent 250, finite), min|x| at least 0x0A00 (exponent 20, no zero), and
** the exponents at most 12 apart; *xmax, *xmin: the packed max|x| and
** min|x| (NaN ignored).  A column without a zero passes exactly when
** rht_tc_exact does (that one ignores zeros). */
static __device__ __forceinline__ unsigned rht_tc_ok2 (const uint32_t *w, uint32_t *xmax,
                                                       uint32_t *xmin) {
  uint32_t m8[8];
#pragma unroll
  for (int r = 0; r < 8; r++) m8[r] = hmin_abs2(w[r], w[r + 8]);
#pragma unroll
  for (int r = 0; r < 4; r++) m8[r] = hmin_abs2(m8[r], m8[r + 4]);
  const uint32_t mn = hmin_abs2(hmin_abs2(m8[0], m8[2]), hmin_abs2(m8[1], m8[3]));
  const uint32_t mx = hmax_abs16(w);
  unsigned ok = 0;
#pragma unroll
  for (int cc = 0; cc < 2; cc++) {
    const uint32_t a = (mx >> (16 * cc)) & 0x7fffu, b = (mn >> (16 * cc)) & 0x7fffu;
    if (a <= 0x7D7Fu && b >= 0x0A00u && (a >> 7) - (b >> 7) <= 12u) ok |= 1u << cc;
  }
  *xmax = mx;
  *xmin = mn;
  return ok;
}

/* max|.| (NaN propagating) of the 16 bf16 of two chunks. */
static __device__ __forceinline__ float amax16_nan (uint4 q0, uint4 q1) {
  const uint32_t m = hmax_abs2(hmax_abs2(hmax_abs2(q0.x, q0.y), hmax_abs2(q0.z, q0.w)),
                               hmax_abs2(hmax_abs2(q1.x, q1.y), hmax_abs2(q1.z, q1.w)));
  return fmax_nan(fabsf(__uint_as_float(m << 16)), fabsf(__uint_as_float(m & 0xffff0000u)));
}


/* Global stores through a pointer the compiler cannot trace to a kernel
** parameter (opaque64): st.global, where plain C++ would give the generic
** st. */
static __device__ __forceinline__ void stg_u8 (uint8_t *p, uint32_t v) {
  asm("st.global.u8 [%0], %1;" :: "l"(p), "r"(v));
}

static __device__ __forceinline__ void stg_u32 (uint8_t *p, uint32_t v) {
  asm("st.global.u32 [%0], %1;" :: "l"(p), "r"(v));
}

/* ... with an L2 eviction policy (createpolicy) */
static __device__ __forceinline__ void stg_u8_pol (uint8_t *p, uint32_t v, uint64_t pol) {
  asm("st.global.L2::cache_hint.u8 [%0], %1, %2;" :: "l"(p), "r"(v), "l"(pol));
}

static __device__ __forceinline__ uint64_t l2_evict_last (void) {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

static __device__ __forceinline__ void stg_v2 (uint8_t *p, uint2 v) {
  asm("st.global.v2.u32 [%0], {%1, %2};" :: "l"(p), "r"(v.x), "r"(v.y));
}

static __device__ __forceinline__ void stg_v4 (uint8_t *p, uint4 v) {
  asm("st.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}


/* Scale gather (qfast_kernel<..., SCG>, then scale_gather_kernel): the
** rowwise scale bytes are written by the fast kernel itself (4 k-tiles per
** unit give every row 32 bytes), the columnwise ones of each 128x128 tile
** go first to a scratch buffer, tile-major (qparams.sgs: 1024 bytes per
** tile (m-tile mt, k-tile kt) at (mt * ntk + kt) * 1024, column c = 64 h +
** 2 pc + cc of the tile at 8 (64 h + 32 cc + pc) + m-block), where every
** warp's store fills whole 32-byte sectors.  A second kernel copies them to
** the scales' layout, whole sectors again: a group of 4 m-tiles 4 mg.. of
** one k-tile gives every column 32 bytes. */
static __device__ __forceinline__ uint2 ldg_cs_v2 (const uint8_t *p) {
  uint2 v;
  asm volatile("ld.global.cs.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

/* Thread t of 256: half t%2 of the sector of column slot t/2 of group
** (mg, kt) from the scratch to the scales. */
static __device__ __forceinline__ void sg_copy_col (const qparams &p, unsigned mg, unsigned kt,
                                                    unsigned ntk, int t) {
  const unsigned r = (unsigned)t >> 1, h2 = (unsigned)t & 1u;
  const unsigned c = 64 * (r >> 6) + 2 * (r & 31u) + (r >> 5 & 1u);
  const uint8_t *src = p.sgs + (size_t)((4 * mg + 2 * h2) * ntk + kt) * 1024 + r * 8;
  const uint2 a = ldg_cs_v2(src), b = ldg_cs_v2(src + (size_t)ntk * 1024);
  stg_v4(p.cscale + (size_t)(kt * 128 + c) * (size_t)p.csld + mg * 32 + 16 * h2,
         make_uint4(a.x, a.y, b.x, b.y));
}


/* Shared-memory loads from 32-bit shared addresses (kept in registers:
** the compiler otherwise rebuilds the shared window's base per tile). */
static __device__ __forceinline__ uint4 lds_v4 (uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
  return v;
}

static __device__ __forceinline__ uint32_t lds_u32 (uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
  return v;
}

static __device__ __forceinline__ void sts_v2 (uint32_t a, uint32_t x, uint32_t y) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(a), "r"(x), "r"(y) : "memory");
}


/* Shared-memory tile: FMT rows of 64 words (128 bf16) at a stride of ROW
** words, 16-byte chunk c of row r at word 4c XOR 8*(r/16 % 4) (64 rows) or
** 4 (c XOR (r/16 % 8) XOR c/8) (128 rows).  Bank conflicts: none for the
** rowwise LDS.128 (a quarter warp reads one row's 8 blocks, chunks distinct
** mod 8: for 64 rows chunks 2b or 2b+1 by the reader's swap, for 128 rows
** chunk 2b then 2b+1, which the c/8 term makes distinct mod 8; the XOR with
** r/16 keeps that) nor for the columnwise LDS.32 (a row of each of the NJ
** m-blocks, 32/NJ words each: the XOR spreads them).
** ROW = 64 except for the RHT (FROW_RHT = 68), whose ldmatrix reads 8
** consecutive rows of one chunk: the 4-word pad spreads them (the pad cost
** the RN kernel 8% at [32768, 8192], so it has none). */
#define FROW_RHT 68

template <uint32_t ROW, uint32_t FMT>
static __device__ __forceinline__ uint32_t sh_word (uint32_t r, uint32_t w) {
  return r * ROW + (w ^ (FMT == 64 ? (r >> 4 & 3u) << 3 : ((r >> 4 & 7u) ^ (w >> 5 & 1u)) << 2));
}


/* ---- the RHT on tensor cores (fast kernel, spec section 8) -----------------
** The columnwise blocks of a tile's 16 columns 16w.. (warp w) and 4 m-blocks
** j: Y_j = A * X_j, X_j the block's 16 rows x 16 columns (bf16), A[c][r] =
** s_r H[r][c] / 4 (bf16, exact), by mma.m16n8k16 (fp32 accumulation from
** +0).  Exact when a block's 16 inputs are normal with biased exponents in
** [20, 250] spanning at most 12 binades (rht_tc_ok2): the products (exact)
** and every partial sum are then multiples of 2^(emin-136) below
** 2^(emax-124), at most 24 bits (as in the fp32 butterfly of rht16), and no
** nonzero one is below 2^-116 (not subnormal).  Relied on: the tensor
** cores add such terms exactly (checked by tests/unit/test_cuda_vs_ref).
** Other blocks go to the deferred list (rht_fix_kernel).  The results
** are rounded once to bf16 (cvt.rn.bf16x2) and stored in the warp's own
** region of ybuf (YWARP words, 64-byte aligned), in the order the
** columnwise reads want them: slot p = 8j + q (m-block j, word q of the
** rows: columns 2q, 2q+1 of the 16) holds 16 words, row r at position
** 2(r % 8) + r / 8, its 16-byte chunks XOR-ed with s(p) = 2((q >> 1) & 1)
** ^ j.  So a lane stores its fragment's rows g, g + 8 with one 8-byte
** store per (m-block, n-block) and reads its 16 rows with four 16-byte
** loads, none with a bank conflict (8 STS.64 and 4 LDS.128 where one word
** per access took 16 STS and 16 LDS). */
#define DCAP 256
#define YWARP 512

/* bf16 A[c][r] (low half) and A[c][r+1] for sign mask 'mask'. */
static __device__ __forceinline__ uint32_t rht_a_pair (unsigned mask, int c, int r) {
  const uint32_t n0 = ((mask >> r) ^ (unsigned)__popc(r & c)) & 1u;
  const uint32_t n1 = ((mask >> (r + 1)) ^ (unsigned)__popc((r + 1) & c)) & 1u;
  return (n0 ? 0xBE80u : 0x3E80u) | ((n1 ? 0xBE80u : 0x3E80u) << 16);
}

/* This lane's A fragment (mma.m16n8k16 row-major A: groupID g = lane/4,
** t = lane%4). */
static __device__ __forceinline__ void rht_a_frag (unsigned mask, int lane, uint32_t *a) {
  const int g = lane >> 2, t = lane & 3;
  a[0] = rht_a_pair(mask, g, 2 * t);
  a[1] = rht_a_pair(mask, g + 8, 2 * t);
  a[2] = rht_a_pair(mask, g, 2 * t + 8);
  a[3] = rht_a_pair(mask, g + 8, 2 * t + 8);
}

/* Four 8x8 bf16 matrices from shared memory, transposed: lane i gives the
** address of row i%8 of matrix i/8; register q holds this lane's fragment of
** matrix q (rows 2t, 2t+1 of column g). */
static __device__ __forceinline__ void ldsm_x4_trans (uint32_t addr, uint32_t *r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

/* d = A * B (+0): B's fragment b0 (rows 2t, 2t+1, column g), b1 (rows +8). */
static __device__ __forceinline__ void mma_rht (const uint32_t *a, uint32_t b0, uint32_t b1,
                                                float *d) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

static __device__ __forceinline__ uint32_t bf16x2_rn (float lo, float hi) {
  __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
  return *(uint32_t *)&b;
}

/* The warp's RHT into its ybuf region: lm = the shared address of this
** lane's ldmatrix row in m-block 0 of the stage, without the XOR of the
** chunk (see sh_word); w = the warp; ys = the shared address where this
** lane's rows g, g + 8 of m-block 0, n-block 0 go (rht_ys), the others at
** ys ^ 16 jj (the chunk) + 512 jj + 256 nb.  D fragment: d[0], d[1] =
** output row g, columns 2t, 2t+1; d[2], d[3] = row g + 8. */
static __device__ __forceinline__ void rht_tc_warp (uint32_t lm, uint32_t w, const uint32_t *a,
                                                    uint32_t ys) {
  /* all loads, then all products, then the stores: the four blocks' latencies
  ** overlap (one block after another left the warp stalled ~4x as long) */
  uint32_t b[4][4];
  float d[4][2][4];
#pragma unroll
  for (int jj = 0; jj < 4; jj++)
    ldsm_x4_trans(lm + jj * (16 * FROW_RHT * 4) + 32u * (w ^ (uint32_t)jj), b[jj]);
#pragma unroll
  for (int jj = 0; jj < 4; jj++) {
    mma_rht(a, b[jj][0], b[jj][1], d[jj][0]);
    mma_rht(a, b[jj][2], b[jj][3], d[jj][1]);
  }
#pragma unroll
  for (int jj = 0; jj < 4; jj++)
#pragma unroll
    for (int nb = 0; nb < 2; nb++)
      sts_v2((ys ^ (16u * jj)) + 512u * jj + 256u * nb,
             bf16x2_rn(d[jj][nb][0], d[jj][nb][1]), bf16x2_rn(d[jj][nb][2], d[jj][nb][3]));
}

/* The ybuf addresses of lane `lane` in the warp's region at byte address yb
** (64-byte aligned): the fragment stores' base (rht_tc_warp) and, in
** *yr, the columnwise reads' (chunk c of slot 8j + q at *yr ^ 16c, rows
** 2c, 2c + 8, 2c + 1, 2c + 9). */
static __device__ __forceinline__ uint32_t rht_ys (uint32_t yb, int lane, uint32_t *yr) {
  const uint32_t g = (uint32_t)lane >> 2, t = (uint32_t)lane & 3u;   /* fragment: groupID, thread */
  const uint32_t q = g, j = t;                                         /* reader: pair, m-block */
  *yr = yb + 4u * ((8u * j + q) * 16u + 4u * ((2u * ((q >> 1) & 1u)) ^ j));
  return yb + 4u * (t * 16u + 4u * ((g >> 1) ^ (2u * (t >> 1))) + 2u * (g & 1u));
}


/* The 16 bf16 of columnwise block (k, mb) of x as floats. */
static __device__ __forceinline__ void load_col16 (const qparams &p, uint32_t k, uint32_t mb,
                                                   float *v) {
  const uint32_t K = (uint32_t)p.K;
  const uint16_t *x = (const uint16_t *)p.x + (size_t)16 * mb * K + k;
#pragma unroll
  for (int r = 0; r < 16; r++) v[r] = __uint_as_float((uint32_t)x[(size_t)r * K] << 16);
}


/* A deferred block (k, mb) with inputs v, exactly: rht16 (the reference's
** fp32 / fp64 / wide-integer paths), then the encode of the exact path
** (AMAX_ONLY: its max|.| into *cmax). */
template <bool SR, bool AMAX_ONLY>
static __device__ __forceinline__ void fix_block (const qparams &p, uint32_t k, uint32_t mb,
                                                  float *v, float *cmax, float cm, float csdec) {
  const uint32_t M = (uint32_t)p.M, MB = M / 16;
  rht16(v, p.mask);
  const float a = absmax16(v);
  if (AMAX_ONLY) *cmax = fmaxf(*cmax, a);
  else {
    unsigned sf = e4m3_rn(fminf(__fmul_rn(a, cm), FLT_MAX));
    uint32_t wr[4] = {0u, 0u, 0u, 0u}, out[2];
    if (SR) {
      uint64_t blk = p.offset + (uint64_t)k * MB + mb;
      nvfp4i_philox_block_words(p.seed, blk, NVFP4I_SR_COLUMNWISE, wr);
    }
    enc_n<SR, 16>(v, enc_of(sf, csdec), wr, out);
    *(uint2 *)(p.cdata + (size_t)k * (M / 2) + (size_t)mb * 8) = make_uint2(out[0], out[1]);
    p.cscale[(size_t)k * p.csld + mb] = (uint8_t)sf;
  }
}


/* The exact path of qfast_kernel's blocks (NaN, Inf, saturation: those
** failing the fast paths' bounds): the 16 bf16 in words b0, b1 (element 2i
** the low half of word i), the scale byte with the FLT_MAX clamp from
** mul = the direction's m of qparams (fl(S_enc * inv6)), the multiplier
** enc_of(sf, sdec) (the value of the kernel's tables), SR bytes 0..15 from
** the words w (as enc_n).  Out of
** line: inlined for each of a tile's 8 blocks it made the kernel's code so
** large that the fast path, spread between the copies, stalled on
** instruction fetch.  Returns the two code words and the scale byte. */
struct exact_out {
  uint32_t lo, hi, sf;
};

template <bool SR>
static __device__ __noinline__ exact_out exact16 (uint4 b0, uint4 b1, float mul, float sdec,
                                                  uint4 w) {
  float v[16], a = 0.0f;
  unpack8(b0, v);
  unpack8(b1, v + 8);
#pragma unroll
  for (int e = 0; e < 16; e++) a = fmaxf(a, fabsf(v[e]));
  const unsigned sf = e4m3_rn(fminf(__fmul_rn(a, mul), FLT_MAX));
  const uint32_t wr[4] = {w.x, w.y, w.z, w.w};
  uint32_t out[2];
  enc_n<SR, 16>(v, enc_of(sf, sdec), wr, out);
  return exact_out{out[0], out[1], sf};
}


/* The CTA's deferred blocks dl[0..n) by its threads (out of line: the tile
** loop keeps its registers), their inputs from dv (the 16 bf16 of entry i
** in dv[2i], dv[2i + 1], element r in half r % 2 of word r / 2: kept when
** the block was deferred: re-reading them from global memory, 16 strided
** loads per block, made the CTA's tail 9% of the kernel's ncu samples, now
** 3%); returns cmax with AMAX_ONLY's share.  p by value: a reference made
** the kernel copy its parameters to local memory and the tile loop read
** them from there. */
template <bool SR, bool AMAX_ONLY>
static __device__ __noinline__ float fix_list (const qparams p, const uint2 *dl, const uint4 *dv,
                                               unsigned n, float cmax, float cm, float csdec) {
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
    float v[16];
    unpack8(dv[2 * i], v);
    unpack8(dv[2 * i + 1], v + 8);
    fix_block<SR, AMAX_ONLY>(p, dl[i].x, dl[i].y, v, &cmax, cm, csdec);
  }
  return cmax;
}


/* QSTAGES shared stages: the next QSTAGES - 1 tiles' cp.async copies are in
** flight while this tile is encoded, one barrier per tile.  Two: three ran
** slower on the H200 (RNE 0.56 against 0.65 of the copy bound at
** [32768, 8192], RHT 0.44 against 0.47).  At least 2 CTAs per SM (up to
** 128 registers): at 4 CTAs (64 registers) the compiler recomputed every
** address per tile and the kernel ran at 0.50 of the copy bound instead of
** 0.62 ([32768, 8192] RNE); with the offsets kept (opaque), 3 CTAs per SM
** (80 registers) still ran at 0.57 against 0.64 for 2 (QFAST_MINB
** overrides, for measuring).  With the 128-row tiles three stages still
** lose: RNE 0.763 / 0.633 against 0.79-0.80 / 0.67 (2026-11-30). */
#ifndef QFAST_MINB
#define QFAST_MINB 2
#endif
#ifndef QFAST_MINB_RHT
#define QFAST_MINB_RHT QFAST_MINB  /* the RHT kernels' (measuring: 3 spills ~100 bytes) */
#endif
#ifndef QSTAGES
#define QSTAGES 2               /* 2 or 3 (-DQSTAGES=3 for measuring) */
#endif
/* QPAIR: the row blocks' and the columns' scales formed by pairs before
** their encodes (the tile loop; QPN).  Measured on the H200 against
** QPAIR=0 in one run: SR 0.623 / 0.665 of the copy against 0.608 / 0.649,
** RNE and RHT within noise, RHT + SR 2-3% slower (so it keeps single
** blocks). */
#ifndef QPAIR
#define QPAIR 1
#endif
#ifndef QSCG_EVICT_LAST
#define QSCG_EVICT_LAST 1       /* the scale gather's scratch kept in the L2 (see scg_st) */
#endif
/* QSCG_PDL: scale_gather_kernel launched as a programmatic dependent of
** the fast kernel (griddepcontrol.launch_dependents at the fast kernel's
** start lets it launch at once), its CTAs waiting in griddepcontrol.wait
** for the fast kernel's completion and its stores: the gap between the two
** launches is hidden (measured: kernels/PERFORMANCE.md, "The scale
** gather").  Only where the gather kernel was built for sm_90 or later (pdl_ok); 0: a plain
** launch after the fast kernel. */
#ifndef QSCG_PDL
#define QSCG_PDL 1
#endif
/* QPDL_FAST: the fast kernel itself a programmatic dependent launch of the
** work before it on the stream: its CTAs start as the previous kernel's
** retire, set up their tables and offsets, and wait in griddepcontrol.wait
** before their first global access (measured on the H200: RNE at [8192,
** 8192] 0.829-0.834 of the copy against 0.810-0.813, SR and RHT +1%).
** Only where pdl_ok; 0: a plain launch. */
#ifndef QPDL_FAST
#define QPDL_FAST 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QSCG_GRIDDEP QSCG_PDL   /* griddepcontrol exists (PTX ISA 7.8, sm_90) */
#define QFAST_GRIDDEP QPDL_FAST
#else
#define QSCG_GRIDDEP 0
#define QFAST_GRIDDEP 0
#endif
#ifndef QGRID_BALANCE
#define QGRID_BALANCE 1         /* see launch_fast_t */
#endif
static_assert(QSTAGES == 2 || QSTAGES == 3, "QSTAGES is 2 or 3");

/* -DEXP_MEMONLY (timing only, wrong bytes): the RN/SR fast kernels keep
** their copies, shared reads and global stores (same addresses, same
** order) but encode nothing; with -DEXP_NOROWST / -DEXP_NOCOLST also
** without the rowwise / columnwise stores.  Measured on the H200 with
** 64-row tiles on 2026-11-29 (ratio to the copy, [8192, 8192] / [32768,
** 8192]): 0.715 / 0.531, the same as
** the encoding kernel at [8192, 8192] -- the access pattern bounds RNE
** there as much as the instruction issue does; without the rowwise stores
** 1.07 / 0.96, without the columnwise ones 1.15 / 1.14, loads only 1.52 /
** 1.64.  Most of the pattern's cost is the scale bytes' 4- and 8-byte
** stores: without them 0.97 / 0.88.  Branches exp/scale-store-probes,
** exp/scale-stash and exp/col-super-tiles have the experiments
** (kernels/PERFORMANCE.md): gathering the stores in shared memory helps this build and
** slows the encoding kernel, whose added instructions cost more.  ncu
** (kernels/PERFORMANCE.md) later showed the cost is the L2's write requests, which the
** 128-row tiles cut by a third.  With those tiles (2026-11-30) -DEXP_MEMONLY
** runs at 0.845 / 0.670 and the encoding kernel at 0.79-0.81 / 0.65-0.68;
** the memory-only build without its scale stores 0.956 / 0.909, with them
** tile-major in whole sectors (a probe of the scale gather's scratch, wrong
** bytes) 0.927 / 0.870.  ncu at [32768, 8192]: the 8-byte pieces cost 4.2 M
** L2 write requests and 16 MB of DRAM reads that complete partly written
** sectors.  Hence the scale gather (scg_wanted). */

template <bool SR, bool RHT, bool AMAX_ONLY, uint32_t FMT, bool SCG, bool DEV>
__global__ void __launch_bounds__(256, RHT ? QFAST_MINB_RHT : QFAST_MINB)
qfast_kernel (qparams p, unsigned ntiles, unsigned ntk, float *amax_dst) {
  static_assert(RHT || !AMAX_ONLY, "the amax-only pass is the RHT one");
  static_assert(!(DEV && AMAX_ONLY), "the amax pass has no amax to read");
  static_assert(FMT == 64 || (FMT == 128 && !RHT), "tiles of 64 rows, or 128 without the RHT");
  static_assert(!SCG || (FMT == 128 && !RHT), "the scale gather is for 128-row tiles");
  /* NJ m-blocks per tile; a thread's NH column pairs and 2 NH row blocks;
  ** NI 16-byte copies per thread and tile */
  constexpr uint32_t NJ = FMT / 16, NH = FMT / 64, NI = FMT / 16;
  /* blocks whose scales are formed together (QPAIR; not for RHT + SR, where
  ** the pairs' registers spilled and it ran 2-3% slower) */
  constexpr int QPN = QPAIR && !(SR && RHT) ? 2 : 1;
  constexpr uint32_t frow = RHT ? FROW_RHT : 64, fstage = FMT * frow;
  constexpr uint32_t QP = FMT == 128 ? QPANEL128 : QPANEL;   /* the walk's panel */
  /* dynamic (three stages or the RHT's would pass the 48 KB of static
  ** shared memory): QSTAGES stages, then for the RHT the warps' ybuf regions
  ** (8 * YWARP words, from the first 64-byte boundary) */
  extern __shared__ __align__(16) uint32_t dsm[];
  uint32_t *const sh = dsm, *const ybuf = dsm + QSTAGES * fstage;
  __shared__ float renc[256], cenc[256];
  /* RHT: the CTA's deferred blocks {k, mb} and their inputs (dv, see
  ** fix_list), worked on after its tiles (a
  ** global atomic per block in the tile loop held the warp, and with it
  ** the CTA at the next barrier, for microseconds); past DCAP, the
  ** context's list for rht_fix_kernel */
  __shared__ uint2 dl[RHT ? DCAP : 1];
  __shared__ uint4 dv[RHT ? 2 * DCAP : 1];
  __shared__ unsigned dn;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const uint32_t K = (uint32_t)p.K;
  const int ch = t & 15, rr = t >> 4;
  /* columnwise: m-block j of column pair pc (words pc of the rows), and for
  ** 128 rows also of pair pc + 32 */
  const int j = lane % NJ, pc = warp * (32 / NJ) + lane / NJ;
  /* rowwise: thread t owns block rb of rows rrow + 32i; each quarter
  ** warp's 16-byte reads must cover the 32 banks once: for 64 rows it reads
  ** its two chunks high one first when rb >= 4 (swap), for 128 rows the
  ** layout does it (sh_word) */
  const uint32_t rb = t & 7, rrow = t >> 3, swap = FMT == 64 ? rb >> 2 : 0;
  const uint32_t c0 = 2 * rb + swap, c1 = 2 * rb + 1 - swap;
  const unsigned ntm = (unsigned)(p.M / FMT);
  const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(&sh[0]);
  float cmax = 0.0f, pmax = 0.0f;
  /* RD (the scale gather): the rowwise scales written directly, the tiles
  ** in units of 4 along K (a 128 x 512 unit, 32 scale bytes per row):
  ** tile = 4 u + s for the CTA's units u = blockIdx.x, blockIdx.x + grid,
  ** ...; the panel walk runs over the units (measured against both
  ** directions through the scratch: kernels/PERFORMANCE.md) */
  constexpr bool RD = SCG;
  const unsigned ntw = RD ? ntk / 4 : ntk;     /* the walk's row length */
  unsigned tile = RD ? 4 * blockIdx.x : blockIdx.x;
  /* the next tile of the CTA; true when it starts a new unit (the walk
  ** advances) */
  auto next_tile = [&] (unsigned *tt) -> bool {
    if (RD && (*tt & 3u) != 3u) {
      *tt += 1;
      return false;
    }
    *tt += RD ? 4 * gridDim.x - 3 : gridDim.x;
    return true;
  };

  if (RHT && t == 0) dn = 0;              /* read after the first barrier */
#if QSCG_GRIDDEP
  if (SCG) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  /* DEV (p.damax set): the per-tensor constants formed from the amax
  ** pass's result, once that pass is complete (this kernel may start while
  ** it runs).  The RN and SR kernels keep them in registers (they have
  ** registers to spare); the RHT kernels, at 128 registers, take them from
  ** dgs (m, S_dec rowwise, then columnwise; read after the first barrier)
  ** where they use them: in registers, or with p modified, they put p in
  ** local memory for the whole loop (RHT 6% slower at [8192, 8192]), and
  ** the RN kernels with shared reads ran 10% slower (H200) */
  __shared__ float dgs[DEV && RHT ? 4 : 1];
  float rm_r = p.rm, cm_r = p.cm, rsdec = p.rsdec, csdec = p.csdec;
  if constexpr (DEV) {
#if QFAST_GRIDDEP
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    nvfp4i_gscale gr, gc;
    dev_gscales(p, &gr, &gc);
    rm_r = gr.m; rsdec = gr.s_dec;
    cm_r = gc.m; csdec = gc.s_dec;
    if (RHT && t == 0) {
      dgs[0] = gr.m; dgs[1] = gr.s_dec;
      dgs[2] = gc.m; dgs[3] = gc.s_dec;
    }
  }
  /* the constants where the loop uses them: m, S_dec rowwise (i = 0, 1),
  ** columnwise (2, 3) */
  auto gconst = [&] (int i) -> float {
    if constexpr (DEV && RHT) return dgs[i];
    else return i == 0 ? rm_r : i == 1 ? rsdec : i == 2 ? cm_r : csdec;
  };
  if (!AMAX_ONLY) {
    if (p.row) renc[t] = enc_of((unsigned)t, rsdec);
    if (p.col) cenc[t] = enc_of((unsigned)t, csdec);
  }
  /* The thread's fixed offsets, computed once and kept (opaque: otherwise
  ** the compiler recomputes them for every tile, ~100 instructions):
  ** thread t copies chunk ch of rows 16i + rr, i < NI (byte offsets from
  ** the tile's corner, < 2^31, and shared addresses); its row blocks' chunks
  ** (rso), its column words (cso), its outputs' offsets from the tile's. */
  uint32_t goff[NI], soff[NI], rso[2 * NH][2];
#pragma unroll
  for (int ii = 0; ii < 2 * NH; ii++) {
    rso[ii][0] = opaque(sbase + 4 * sh_word<frow, FMT>(rrow + 32 * ii, 4 * c0));
    rso[ii][1] = opaque(sbase + 4 * sh_word<frow, FMT>(rrow + 32 * ii, 4 * c1));
  }
#pragma unroll
  for (int i = 0; i < NI; i++) {
    goff[i] = opaque(2 * ((uint32_t)(i * 16 + rr) * K + 8 * ch));
    soff[i] = opaque(sbase + 4 * sh_word<frow, FMT>(i * 16 + rr, 4 * ch));
  }
  uint32_t cso[NH];
#pragma unroll
  for (int h = 0; h < NH; h++) cso[h] = opaque(sbase + 4 * sh_word<frow, FMT>(16 * j, pc + 32 * h));
  /* the multipliers' tables (shared addresses) */
  const uint32_t rencs = opaque((uint32_t)__cvta_generic_to_shared(renc));
  const uint32_t cencs = opaque((uint32_t)__cvta_generic_to_shared(cenc));
  /* RHT: the A fragment, this lane's ldmatrix row (row 8(q&1) + lane%8 of
  ** each m-block, chunk 2 warp + q/2 of matrix q = lane/8; the XOR with the
  ** m-block is added per block) and its ybuf region */
  uint32_t rha[4] = {0u, 0u, 0u, 0u}, lm = 0;
  uint32_t ys = 0, yr = 0;
  if (RHT) {
    const uint32_t q = (uint32_t)lane >> 3;
    const uint32_t yb = (((uint32_t)__cvta_generic_to_shared(ybuf) + 63u) & ~63u) +
                        4u * YWARP * (uint32_t)warp;
    ys = opaque(rht_ys(yb, lane, &yr));
    yr = opaque(yr);
    rht_a_frag(p.mask, lane, rha);
    lm = opaque(sbase + 4 * ((8 * (q & 1) + (lane & 7)) * FROW_RHT) + 16 * (q >> 1));
  }
  /* the outputs' addresses: the thread's own parts here (64-bit pointers),
  ** the tile's parts as 32-bit offsets per tile (fast_ok: every output is
  ** below 4 GiB) */
  const uint32_t M = (uint32_t)p.M, rsld = (uint32_t)p.rsld, csld = (uint32_t)p.csld;
  uint8_t *const rdb = (uint8_t *)opaque64((size_t)(p.rdata + rrow * (K / 2) + rb * 8));
  uint8_t *const rsb = (uint8_t *)opaque64((size_t)(p.rscale + rrow * rsld + rb));
  uint8_t *const cdb = (uint8_t *)opaque64((size_t)(p.cdata + (size_t)(2 * pc) * (M / 2) + 8 * j));
  uint8_t *const csb = (uint8_t *)opaque64((size_t)(p.cscale + (size_t)(2 * pc) * csld + j));
  /* the strides from a thread's output of one block to the next it writes
  ** in the tile: 32 rows (rowwise data and scales), one column */
  const size_t rstep = (size_t)16 * K, sstep = (size_t)32 * rsld, cstep = M / 2;
  /* SCG: the thread's columnwise scale bytes' place in a tile's scratch
  ** (see sg_copy_col) */
  uint8_t *const sgk = SCG ? (uint8_t *)opaque64((size_t)(p.sgs + pc * 8 + j)) : nullptr;
  /* SR: the Philox counters (spec §5.2: offset + the block's index) less
  ** the tile's part: row block rb of row rrow, column block j of column
  ** 2pc; per tile m0*(K/16) + k0/16, k0*(M/16) + m0/16 are added */
  const uint64_t rctr = SR ? opaque64(p.offset + (uint64_t)rrow * (K / 16) + rb) : 0;
  const uint64_t cctr = SR ? opaque64(p.offset + (uint64_t)(2 * pc) * (uint64_t)(p.M / 16) + j) : 0;
  /* SCG: the scratch's stores, L2 evict-last: kept there for
  ** scale_gather_kernel, which reads them right after (measured on the H200
  ** against plain stores in one run: RNE 0.820-0.822 / 0.813-0.815 of the
  ** copy at [32768, 8192], 0.806 / 0.782 at [8192, 32768], and with the
  ** gather forced at [8192, 8192] 0.809 / 0.777; QSCG_EVICT_LAST=0 gives
  ** plain stores, for measuring).  See cp_async16 for a ptxas fault with a
  ** policy operand: here nvcc 13.0 gives both SCG kernels even descriptor
  ** pairs (UR8, UR32), and both ran in the cross test's forced-gather cases. */
#if QSCG_EVICT_LAST
  const uint64_t scg_pol = SCG ? l2_evict_last() : 0;
  auto scg_st = [&] (uint8_t *a, uint32_t v) { stg_u8_pol(a, v, scg_pol); };
#else
  auto scg_st = [&] (uint8_t *a, uint32_t v) { stg_u8(a, v); };
#endif
#define QFAST_LOAD(stage, tm0, tk0) do {                                           \
    const char *src_ = (const char *)p.x + 2 * ((size_t)(tm0) * K + (tk0));          \
    _Pragma("unroll")                                                              \
    for (int i_ = 0; i_ < NI; i_++)                                                \
      cp_async16(soff[i_] + (stage) * (4 * fstage), src_ + goff[i_]);              \
  } while (0)
  /* the copies run QSTAGES - 1 tiles ahead: walk and ltile follow the last
  ** tile whose copy was issued (or would be, past ntiles), cm/ck hold the
  ** corners of the tiles in the stages; one commit group per tile */
  tile_walk walk = walk_start<QP>(RD ? blockIdx.x : tile, ntw);
  unsigned ltile = tile;
  uint32_t cm[QSTAGES], ck[QSTAGES];
  /* the corner of tile ltile (RD: the unit's, plus its 128-column step) */
  auto coords = [&] (uint32_t *m0_, uint32_t *k0_) {
    walk_coords<QP, FMT>(walk, ntm, m0_, k0_);
    if (RD) *k0_ = *k0_ * 4 + (ltile & 3u) * FK;
  };
#pragma unroll
  for (int s_ = 0; s_ < QSTAGES; s_++) cm[s_] = ck[s_] = 0;
#if QFAST_GRIDDEP
  asm volatile("griddepcontrol.wait;" ::: "memory");     /* the work before: complete, its stores seen */
#endif
#pragma unroll
  for (int s_ = 0; s_ < QSTAGES - 1; s_++) {
    if (s_ > 0) {
      const bool nu = next_tile(&ltile);
      if (ltile < ntiles && nu) walk_advance<QP>(&walk, gridDim.x, ntw);
    }
    if (ltile < ntiles) {
      coords(&cm[s_], &ck[s_]);
      QFAST_LOAD(s_, cm[s_], ck[s_]);
    }
    cp_commit();
  }
  /* RD: the thread's rowwise scale bytes of the unit, byte s of word ii for
  ** its block rb of row rrow + 32 ii in the unit's tile s */
  [[maybe_unused]] uint32_t racc[RD ? 2 * NH : 1];
#pragma unroll
  for (int ii = 0; ii < (RD ? 2 * NH : 1); ii++) racc[ii] = 0;
  /* one tile on shared stage ST (a constant: the stages' addresses are
  ** immediate offsets); false once the CTA's tiles are done */
  auto step = [&] (auto stage) -> bool {
    constexpr unsigned st = decltype(stage)::value, ls = (st + QSTAGES - 1) % QSTAGES;
    if (tile >= ntiles) return false;
    const uint32_t m0 = cm[st], k0 = ck[st];
    cp_wait<QSTAGES - 2>();
    __syncthreads();          /* the tile is in; stage ls's reads (the previous tile) are done */
    /* RHT: the warp's columnwise blocks on tensor cores first, so that their
    ** latency hides behind the rowwise work (read after __syncwarp below);
    ** before the next tile's copies are issued, whose address registers the
    ** compiler otherwise reuses for the ldmatrix results (a wait on the
    ** copies' issue) */
    if (RHT && (AMAX_ONLY || p.col)) rht_tc_warp(lm + st * (4 * fstage), (uint32_t)warp, rha, ys);
    {
      const bool nu = next_tile(&ltile);
      if (ltile < ntiles) {
        if (nu) walk_advance<QP>(&walk, gridDim.x, ntw);
        coords(&cm[ls], &ck[ls]);
        QFAST_LOAD(ls, cm[ls], ck[ls]);
      }
    }
    cp_commit();
    /* SCG: the tile's scratch */
    [[maybe_unused]] const uint32_t sgt = SCG ? ((m0 >> 7) * ntk + (k0 >> 7)) * 1024 : 0;

    if (!AMAX_ONLY && p.row) {
      const uint32_t ro = m0 * (K / 2) + k0 / 2, rsco = m0 * rsld + k0 / 16;
      [[maybe_unused]] uint8_t *const rdt = rdb + ro, *const rst = rsb + rsco;    /* the tile's */
      /* the scale byte of the thread's row block ii (RD: kept for the unit's
      ** last tile) */
      [[maybe_unused]] const uint32_t us = (k0 >> 7) & 3u;    /* RD: the tile in its unit */
      auto rscale_st = [&] (int ii, uint32_t v) {
        if constexpr (RD) racc[ii] = us == 0 ? (v & 0xffu) : racc[ii] | (v & 0xffu) << (8 * us);
        else stg_u8(rst + ii * sstep, v);
      };
      /* the row blocks by pairs: first both blocks' loads, Philox words,
      ** amaxes and scales (two independent chains, whose latencies overlap),
      ** then each block's encode (QPAIR=0, measuring: one block after the
      ** other) */
#pragma unroll
      for (int ip = 0; ip < 2 * NH; ip += QPN) {
        uint4 qq[QPN][2];
        uint32_t ww[QPN][4];
        float aa[QPN], ee[QPN];
        unsigned ss[QPN];
#pragma unroll
        for (int k = 0; k < QPN; k++) {
          const int ii = ip + k;
          /* SR: the block's Philox counter (spec §5.2), fast and exact path */
          const uint64_t rblk = SR ? rctr + ((uint64_t)(m0 + 32 * ii) * (K / 16) + k0 / 16) : 0;
          qq[k][0] = lds_v4(rso[ii][0] + st * (4 * fstage));
          qq[k][1] = lds_v4(rso[ii][1] + st * (4 * fstage));
          /* SR: the block's Philox words first (the fast and the exact path
          ** take the same), independent of the amax chain below */
#pragma unroll
          for (int e = 0; e < 4; e++) ww[k][e] = 0u;
          if (SR) nvfp4i_philox_block_words(p.seed, rblk, NVFP4I_SR_ROWWISE, ww[k]);
          /* the fast paths (RN: see codes8_fast; SR: see codes8_sr, y's sign is
          ** v's (enc > 0), taken from the words): the amax (NaN propagating; a
          ** NaN-free block's amax is the same), its scale with no FLT_MAX clamp
          ** (a NaN block gets the NaN byte, whose enc fails the bound, and an
          ** Inf block fails it anyway) */
          aa[k] = amax16_nan(qq[k][0], qq[k][1]);
          ss[k] = e4m3_rn(__fmul_rn(aa[k], gconst(0)));
          ee[k] = __uint_as_float(lds_u32(rencs + 4 * ss[k]));
        }
#pragma unroll
        for (int k = 0; k < QPN; k++) {
          const int ii = ip + k;
          const uint4 q0 = qq[k][0], q1 = qq[k][1];
          const uint32_t *const w = ww[k];
          const float a = aa[k], enc = ee[k];
          unsigned sf = ss[k];
          float v[16];
          uint32_t o0, o1;
#ifdef EXP_MEMONLY
          if (!RHT) {               /* timing only (see EXP_MEMONLY above) */
#ifndef EXP_NOROWST
            stg_v2(rdt + ii * rstep, make_uint2(q0.x ^ q0.y ^ q0.z ^ q0.w, q1.x ^ q1.y ^ q1.z ^ q1.w));
            rscale_st(ii, q0.x ^ q1.w);
#else
            if ((q0.x ^ q1.w) == 0x12345678u) stg_u8(rsb + rsco, 1u);
#endif
            continue;
          }
#endif
          unpack8(q0, v);
          unpack8(q1, v + 8);
          if (__fmul_rn(a, enc) < (SR ? FAST_SR_BOUND : FAST_RN_BOUND)) {
            /* SR bytes 0..7 go with the low chunk, 8..15 with the high one */
            const uint32_t w0[2] = {swap ? w[2] : w[0], swap ? w[3] : w[1]};
            const uint32_t w1[2] = {swap ? w[0] : w[2], swap ? w[1] : w[3]};
            o0 = signs8(q0, SR ? codes8_sr(v, enc, w0) : codes8_fast(v, enc));
            o1 = signs8(q1, SR ? codes8_sr(v + 8, enc, w1) : codes8_fast(v + 8, enc));
          }
          else {
            /* the exact path, the SR bytes as above */
            const exact_out e = exact16<SR>(q0, q1, gconst(0), gconst(1),
                                            swap ? make_uint4(w[2], w[3], w[0], w[1])
                                                 : make_uint4(w[0], w[1], w[2], w[3]));
            o0 = e.lo;
            o1 = e.hi;
            sf = e.sf;
          }
          stg_v2(rdt + ii * rstep, swap ? make_uint2(o1, o0) : make_uint2(o0, o1));
          rscale_st(ii, sf);
        }
      }
      /* RD, the unit's last tile: its 32 scale bytes per row, byte 8 s + b
      ** from lane b of the row's 8 (byte s of its word); lane L of them
      ** stores bytes 4L..4L+3 (s = L/2 from lanes 4(L%2)..+3), so each
      ** warp store writes whole sectors */
      if constexpr (RD) {
        if (us == 3u) {
          const unsigned base = (unsigned)lane & ~7u, L = rb, sb = L >> 1;
          const uint32_t sel = sb | ((4u + sb) << 4);
          uint8_t *const ru = rsb - rb + (size_t)m0 * rsld + (k0 - 3 * FK) / 16 + 4 * L;
#pragma unroll
          for (int ii = 0; ii < 2 * NH; ii++) {
            uint32_t v[4];
#pragma unroll
            for (int i = 0; i < 4; i++) v[i] = __shfl_sync(0xffffffffu, racc[ii], base + 4 * (L & 1u) + i);
            stg_u32(ru + ii * sstep, prmt(prmt(v[0], v[1], sel), prmt(v[2], v[3], sel), 0x5410u));
          }
        }
      }
    }

    if (AMAX_ONLY || p.col) {
      /* for 128 rows the thread's second column pair is 64 columns further */
#pragma unroll
      for (uint32_t h = 0; h < NH; h++) {
        const uint32_t kh = k0 + 64 * h;
        uint32_t wd[16], yd[RHT ? 16 : 1];
        const uint32_t mb = m0 / 16 + j;
        /* column kh + 2pc's output row (the next column's is M/2 further) */
        [[maybe_unused]] const uint32_t co = kh * (M / 2) + m0 / 2, cso_t = kh * csld + m0 / 16;
        /* the tile's outputs of the thread's first column */
        [[maybe_unused]] uint8_t *const cdt = cdb + co, *const cst = csb + cso_t;
        /* the scale byte of column kh + 2 pc + cc (SCG: to the scratch) */
        [[maybe_unused]] auto cscale_st = [&] (int cc, uint32_t v) {
          if constexpr (SCG) scg_st(sgk + sgt + 512 * h + 256 * cc, v);
          else stg_u8(cst + cc * (size_t)csld, v);
        };
#pragma unroll
        for (int r = 0; r < 16; r++)      /* rows 16j.. */
          wd[r] = lds_u32(cso[h] + st * (4 * fstage) + r * (4 * frow));
#ifdef EXP_MEMONLY
        if (!RHT) {                 /* timing only */
          uint32_t x0 = 0, x1 = 0;
#pragma unroll
          for (int r = 0; r < 8; r++) { x0 ^= wd[r]; x1 ^= wd[r + 8]; }
#pragma unroll
          for (int cc = 0; cc < 2; cc++) {
#ifndef EXP_NOCOLST
            stg_v2(cdt + cc * cstep, make_uint2(x0 + cc, x1));
            cscale_st(cc, x0 >> (8 * cc));
#else
            if ((x0 ^ x1) == 0x12345678u + cc) stg_u8(csb + cso_t, 1u);
#endif
          }
          continue;
        }
#endif
        /* RHT: tc, the columns whose result from the tensor cores (above) is
        ** exact (the others deferred) */
        unsigned tc = 0;
        uint32_t xmax = 0, xmin = 0;
        if (RHT) {
          tc = rht_tc_ok2(wd, &xmax, &xmin);
          /* rarely: a column failing the quick test goes to the deferred
          ** list (its pre-RHT amax here), unless it has a zero: then the
          ** exact test, which ignores zeros, may pass it (without a zero it
          ** fails what the quick one fails; not running it shortened the path
          ** a warp takes on ~14% of randn tiles while the others wait at the
          ** next barrier).  None is worked on inline (one lane doing it holds
          ** its warp and the others at the next barrier). */
          if (tc != 3u) {
#pragma unroll
            for (int cc = 0; cc < 2; cc++) {
              if ((tc >> cc) & 1u) continue;
              const bool zero = ((xmin >> (16 * cc)) & 0x7fffu) == 0u;
              if (zero || AMAX_ONLY) {
                float v[16];
#pragma unroll
                for (int r = 0; r < 16; r++)
                  v[r] = __uint_as_float(cc ? wd[r] & 0xffff0000u : wd[r] << 16);
                if (zero && rht_tc_exact(v)) {
                  tc |= 1u << cc;
                  continue;
                }
                if (AMAX_ONLY) {             /* the plain amax, NaN ignored */
#pragma unroll
                  for (int r = 0; r < 16; r++) pmax = fmaxf(pmax, fabsf(v[r]));
                }
              }
              {
                const unsigned di = atomicAdd(&dn, 1u);
                if (di < DCAP) {
                  const uint32_t sel = cc ? 0x7632u : 0x5410u;
                  dl[di] = make_uint2(kh + 2 * pc + cc, mb);
                  dv[2 * di] = make_uint4(prmt(wd[0], wd[1], sel), prmt(wd[2], wd[3], sel),
                                          prmt(wd[4], wd[5], sel), prmt(wd[6], wd[7], sel));
                  dv[2 * di + 1] = make_uint4(prmt(wd[8], wd[9], sel), prmt(wd[10], wd[11], sel),
                                              prmt(wd[12], wd[13], sel), prmt(wd[14], wd[15], sel));
                }
                else slow_defer(p.sl, p.slcap, (uint64_t)(kh + 2 * pc + cc) * (M / 16) + mb);
              }
            }
          }
        }
        /* RHT: the tensor cores' results of the thread's blocks (rht_tc_warp),
        ** read after the exactness test and the deferrals, whose input words
        ** wd are then dead: fewer registers live at once (RHT + SR +2% on the
        ** H200, RHT within noise; kernels/PERFORMANCE.md) */
        if (RHT) {
          __syncwarp();
#pragma unroll
          for (uint32_t c = 0; c < 4; c++) {
            const uint4 y4 = lds_v4(yr ^ (16u * c));
            yd[2 * c] = y4.x; yd[2 * c + 8] = y4.y; yd[2 * c + 1] = y4.z; yd[2 * c + 9] = y4.w;
          }
        }
        /* the words of the values to encode: x, or RHT(x) in bf16 */
        const uint32_t *src = RHT ? yd : wd;
        /* both columns' max|.| (NaN propagating) at once, for the fast paths */
        const uint32_t wmax = hmax_abs16(src);
        /* both columns' scales and multipliers before either encode (QPN;
        ** see the rows) */
        unsigned csf[2] = {0u, 0u};
        float cen[2] = {0.0f, 0.0f};
        if (!AMAX_ONLY && QPN == 2) {
#pragma unroll
          for (int cc = 0; cc < 2; cc++) {
            csf[cc] = e4m3_rn(__fmul_rn(__uint_as_float(cc ? wmax & 0xffff0000u : wmax << 16),
                                        gconst(2)));
            cen[cc] = __uint_as_float(lds_u32(cencs + 4 * csf[cc]));
          }
        }
#pragma unroll
        for (int cc = 0; cc < 2; cc++) {       /* columns kh + 2pc (low halves), +1 */
          const float wm = __uint_as_float(cc ? wmax & 0xffff0000u : wmax << 16);
          if (RHT && !((tc >> cc) & 1u)) continue;   /* deferred */
          if constexpr (AMAX_ONLY) {         /* finite: both maxima from the words */
            pmax = fmaxf(pmax, __uint_as_float(cc ? xmax & 0xffff0000u : xmax << 16));
            cmax = fmaxf(cmax, wm);
          }
          else {
            float v[16];
            /* SR: the block's Philox counter (spec §5.2), fast and exact path */
            const uint64_t cblk = SR ? cctr + ((uint64_t)(kh + cc) * (M / 16) + m0 / 16) : 0;
            uint32_t wr[4] = {0u, 0u, 0u, 0u};
            if (SR) nvfp4i_philox_block_words(p.seed, cblk, NVFP4I_SR_COLUMNWISE, wr);
#pragma unroll
            for (int r = 0; r < 16; r++)
              v[r] = __uint_as_float(cc ? src[r] & 0xffff0000u : src[r] << 16);
            /* the fast paths as rowwise; the signs of column cc are bytes 1
            ** (cc = 0) or 3 (cc = 1) of the words */
            const unsigned sf = QPN == 2 ? csf[cc] : e4m3_rn(__fmul_rn(wm, gconst(2)));
            const float enc = QPN == 2 ? cen[cc] : __uint_as_float(lds_u32(cencs + 4 * sf));
            if (__fmul_rn(wm, enc) < (SR ? FAST_SR_BOUND : FAST_RN_BOUND)) {
              stg_v2(cdt + cc * cstep,
                     make_uint2(col_signs8(src, cc, SR ? codes8_sr(v, enc, wr) : codes8_fast(v, enc)),
                                col_signs8(src + 8, cc, SR ? codes8_sr(v + 8, enc, wr + 2)
                                                           : codes8_fast(v + 8, enc))));
              cscale_st(cc, sf);
              continue;
            }
            /* the exact path, the column's halves gathered into words */
            const uint32_t sel = cc ? 0x7632u : 0x5410u;
            const exact_out e = exact16<SR>(
                make_uint4(prmt(src[0], src[1], sel), prmt(src[2], src[3], sel),
                           prmt(src[4], src[5], sel), prmt(src[6], src[7], sel)),
                make_uint4(prmt(src[8], src[9], sel), prmt(src[10], src[11], sel),
                           prmt(src[12], src[13], sel), prmt(src[14], src[15], sel)),
                gconst(2), gconst(3), make_uint4(wr[0], wr[1], wr[2], wr[3]));
            stg_v2(cdt + cc * cstep, make_uint2(e.lo, e.hi));
            cscale_st(cc, e.sf);
          }
        }
      }
    }
    next_tile(&tile);
    return true;
  };
#if QSTAGES == 2
  while (step(std::integral_constant<unsigned, 0>()) && step(std::integral_constant<unsigned, 1>())) {
  }
#else
  while (step(std::integral_constant<unsigned, 0>()) && step(std::integral_constant<unsigned, 1>()) &&
         step(std::integral_constant<unsigned, 2>())) {
  }
#endif
#undef QFAST_LOAD
  if (RHT) {
    __syncthreads();
    const unsigned n = min(dn, (unsigned)DCAP);
    if ((unsigned)t < n)
      cmax = fix_list<SR, AMAX_ONLY>(p, dl, dv, n, cmax, gconst(2), gconst(3));
  }
  if (AMAX_ONLY) {
    block_max_to(cmax, amax_dst);
    __syncthreads();                     /* block_max_to's scratch is reused */
    block_max_to(pmax, amax_dst - 1);
  }
}


/* The scale gather's copy (see sg_copy_col): CTA g copies columnwise group
** (m-group g / ntk, k-tile g % ntk), (M/512)(K/128) CTAs; launched only
** for a columnwise copy. */
static __global__ void __launch_bounds__(256) scale_gather_kernel (qparams p, unsigned ntk) {
  const unsigned g = blockIdx.x;
#if QSCG_GRIDDEP
  asm volatile("griddepcontrol.wait;" ::: "memory");     /* the fast kernel complete, its stores seen */
#endif
  sg_copy_col(p, g / ntk, g % ntk, ntk, threadIdx.x);
}


/* Follow-up of the RHT fast path: the deferred columnwise blocks, exactly
** as rht16 (the reference's fp64 and wide-integer paths), then the same
** encode as qfast_kernel (AMAX_ONLY: their max|.| into *amax_dst).  When
** more than cap blocks were deferred, every block of x is scanned and those
** failing rht_tc_exact are redone (also those the CTAs' own lists did: the
** same bytes again).
** The last CTA resets the list for the next launch on the stream. */
template <bool SR, bool AMAX_ONLY>
__global__ void __launch_bounds__(128)
rht_fix_kernel (qparams p, float *amax_dst) {
  __shared__ unsigned long long sn;
  slow_list *sl = p.sl;
  const uint32_t M = (uint32_t)p.M, K = (uint32_t)p.K, MB = M / 16;
  float cmax = 0.0f;
  if (!AMAX_ONLY && p.damax != nullptr) dev_gscale(p);
  if (threadIdx.x == 0) sn = atomicAdd(&sl->n, 0ull);
  __syncthreads();
  const unsigned long long n = sn;
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&sl->done, 1u) == gridDim.x - 1) {
      atomicExch(&sl->n, 0ull);
      atomicExch(&sl->done, 0u);
    }
  }
  const bool scan = n > p.slcap;
  const uint64_t total = scan ? (uint64_t)MB * K : n;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
       i += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t k, mb;
    float v[16];
    if (scan) { mb = (uint32_t)(i / K); k = (uint32_t)(i % K); }
    else {
      uint64_t g = sl->e[i];
      k = (uint32_t)(g / MB); mb = (uint32_t)(g % MB);
    }
    load_col16(p, k, mb, v);
    if (scan && rht_tc_exact(v)) continue;
    fix_block<SR, AMAX_ONLY>(p, k, mb, v, &cmax, p.cm, p.csdec);
  }
  if (AMAX_ONLY) block_max_to(cmax, amax_dst);
}


/* The first-use caches below are atomics: contexts on several threads may
** fill them at once (each filler stores the same value; nvfp4.h's
** conventions, "threads").  The SM count is the current device's (cached
** for the first 64 devices, a later one asked each time); the occupancy,
** with the dynamic shared memory limit set on the device current at first
** use (cudaFuncSetAttribute is per device), and the PTX version are the
** process's: one GPU per process (nvfp4_ctx_create). */
#define QDEV_CACHED 64
static int sm_count (void) {
  static std::atomic<int> cached[QDEV_CACHED];
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 132;
  if (dev >= 0 && dev < QDEV_CACHED && (n = cached[dev].load(std::memory_order_relaxed)) > 0) return n;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
  if (dev >= 0 && dev < QDEV_CACHED) cached[dev].store(n, std::memory_order_relaxed);
  return n;
}


/* The fast path applies: bf16, whole 64x128 tiles, 1D, sizes in 32 bits,
** each output below 4 GiB (M*K/2 bytes of codes: qfast_kernel's 32-bit
** offsets). */
static bool fast_ok (const nvfp4_tensor *x, int64_t M, int64_t K, int two_d) {
  return x->dtype == NVFP4_BF16 && !two_d && M % FM == 0 && K % FK == 0 &&
         K < (1 << 24) && M < (1ll << 31) && (M / FM) * (K / FK) < (1ll << 31) &&
         (uint64_t)M * (uint64_t)K < (1ull << 33);
}


/* The stages and the RHT's ybuf: dynamic shared memory, past the 48 KB of
** static (see qfast_kernel). */
template <bool RHT, uint32_t FMT>
static constexpr size_t fast_dyn (void) {
  return (QSTAGES * FMT * (RHT ? FROW_RHT : 64) + (RHT ? 8 * YWARP + 16 : 0)) * sizeof(uint32_t);
}

/* The CTAs the fast kernel's instance keeps resident on the device (its
** dynamic shared memory limit set on first use, before the count is
** published: a thread that reads the count launches with the limit set). */
template <bool SR, bool RHT, bool AMAX_ONLY, uint32_t FMT, bool SCG, bool DEV>
static unsigned fast_resident (void) {
  static std::atomic<int> cached{0};
  int occ = cached.load(std::memory_order_acquire);
  if (occ == 0) {
    const size_t dyn = fast_dyn<RHT, FMT>();
    cudaFuncSetAttribute(qfast_kernel<SR, RHT, AMAX_ONLY, FMT, SCG, DEV>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn);
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, qfast_kernel<SR, RHT, AMAX_ONLY, FMT, SCG, DEV>,
                                                      256, dyn) != cudaSuccess || occ < 1)
      occ = 1;
    cached.store(occ, std::memory_order_release);
  }
  return (unsigned)(sm_count() * occ);
}

/* Test hook: NVFP4_CUDA_FAST_GRID=n caps the fast kernel's grid at n CTAs
** (small tensors then loop over several tiles per CTA). */
static unsigned fast_grid_cap (unsigned grid) {
  const char *env = getenv("NVFP4_CUDA_FAST_GRID");
  unsigned long n;
  if (env == NULL || *env == '\0') return grid;
  n = strtoul(env, NULL, 10);
  return n >= 1 && n < grid ? (unsigned)n : grid;
}

/* Whether this file's kernels may be programmatic dependent launches: their
** code (the binary's, or the PTX the driver compiled) has griddepcontrol.wait,
** i.e. it was built for sm_90 or later (QSCG_GRIDDEP, QFAST_GRIDDEP; every
** kernel here is built for the same targets); without the wait a kernel
** could read what the one before it has not yet stored.  Asked on first
** use, by each thread that gets there before an answer is stored (a
** failure to ask stays that thread's last CUDA error: CU_LAUNCHED). */
static bool pdl_ok (void) {
  static std::atomic<int> cached{-1};
  int ok = cached.load(std::memory_order_relaxed);
  if (ok < 0) {
    cudaFuncAttributes fa;
    ok = cudaFuncGetAttributes(&fa, scale_gather_kernel) == cudaSuccess && fa.ptxVersion >= 90;
    cached.store(ok, std::memory_order_relaxed);
  }
  return ok == 1;
}

/* kern<<<grid, 256, smem, s>>>(args...), as a programmatic dependent launch
** when pdl (and pdl_ok). */
template <typename... P, typename... A>
static void launch_256 (void (*kern)(P...), unsigned grid, size_t smem, cudaStream_t s, bool pdl,
                        A... args) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = pdl && pdl_ok() ? 1 : 0;
  (void)cudaLaunchKernelEx(&cfg, kern, args...);      /* an error: CU_LAUNCHED */
}

template <bool SR, bool RHT, bool AMAX_ONLY, uint32_t FMT, bool SCG, bool DEV>
static void launch_fast_t (const qparams &p, float *dst, cudaStream_t s) {
  const unsigned ntk = (unsigned)(p.K / FK), ntiles = (unsigned)(p.M / FMT) * ntk;
  /* the CTAs' work items: tiles, or with the scale gather units of 4 */
  const unsigned nw = SCG ? ntiles / 4 : ntiles;
  unsigned grid = fast_grid_cap(fast_resident<SR, RHT, AMAX_ONLY, FMT, SCG, DEV>());
  if (grid > nw) grid = nw;
  /* QGRID_BALANCE (RN only): the fewest CTAs that take the items in as
  ** many rounds (ceil(nw / grid)) as the resident ones would, so that every
  ** CTA has the same count or one less: [8192, 8192] has 1024 units for 264
  ** resident CTAs, 4 rounds either way.  Measured on the H200 against the
  ** resident count, same run: RNE 0.846-0.849 / 0.871-0.877 of the copy
  ** against 0.827-0.839 / 0.856-0.860; RHT lost (0.548-0.549 against
  ** 0.559-0.564 at [8192, 8192]) and SR did not gain, so they keep it. */
  if (QGRID_BALANCE && !SR && !RHT) {
    const unsigned rounds = (nw + grid - 1) / grid;
    grid = (nw + rounds - 1) / rounds;
  }
  launch_256(qfast_kernel<SR, RHT, AMAX_ONLY, FMT, SCG, DEV>, grid, fast_dyn<RHT, FMT>(), s, QPDL_FAST != 0,
             p, ntiles, ntk, dst);
}

/* Tiles of 128 rows where M allows it (without the RHT): a column's 8
** scale bytes and 64 code bytes per tile go to L2 in one request each
** instead of two, which the L2 needs (its write requests bound the RN
** kernel); QFMT=64 forces 64 rows, for measuring.  With p.scg set
** (scg_wanted), the scale gather (its scratch: scg_buffer_for). */
#ifndef QFMT
#define QFMT 128
#endif

template <bool SR, bool RHT, bool AMAX_ONLY, bool DEV = false>
static void launch_fast (const qparams &p, float *dst, cudaStream_t s) {
  if constexpr (!RHT) {
    if (QFMT == 128 && p.M % 128 == 0) {
      if (p.scg) {
        const unsigned ntk = (unsigned)(p.K / FK);
        launch_fast_t<SR, RHT, AMAX_ONLY, 128, true, DEV>(p, dst, s);
        /* the columnwise groups (the fast kernel wrote the rowwise scales) */
        if (p.col) launch_256(scale_gather_kernel, (unsigned)(p.M / 512) * ntk, 0, s, QSCG_PDL != 0, p, ntk);
      }
      else launch_fast_t<SR, RHT, AMAX_ONLY, QFMT, false, DEV>(p, dst, s);
      return;
    }
  }
  launch_fast_t<SR, RHT, AMAX_ONLY, 64, false, DEV>(p, dst, s);
}


/* A buffer the context owns (style.md: the ctx owns its workspace; freed
** by cuda_fini) for the quantize kernels, *buf of *cap bytes: allocated in
** stream order on first use, with its first zero_bytes zeroed, and replaced
** by a larger one when a launch needs more (the old one freed in stream
** order, after the work queued before that may still use it). */
static nvfp4_status ctx_buffer (nvfp4_ctx *ctx, void **buf, size_t *cap, size_t bytes,
                                size_t zero_bytes) {
  cudaStream_t s = nvfp4i_stream(ctx);
  if (*buf != NULL && *cap >= bytes) return NVFP4_OK;
  if (*buf != NULL) CU_CHECK(ctx, cudaFreeAsync(*buf, s));
  *buf = NULL;
  *cap = 0;
  CU_CHECK(ctx, nvfp4i_cuda_malloc_async(buf, bytes, s));
  *cap = bytes;
  if (zero_bytes > 0) CU_CHECK(ctx, cudaMemsetAsync(*buf, 0, zero_bytes, s));
  return NVFP4_OK;
}


/* The deferred list of the RHT fast path, the context's own, zeroed once
** (the follow-up kernel resets it after each launch). */
#define SLOW_CAP (1u << 18)

static nvfp4_status slow_list_for (nvfp4_ctx *ctx, qparams *p) {
  nvfp4i_cuda *c = nvfp4i_cuda_of(ctx);
  const char *env = getenv("NVFP4_CUDA_RHT_DEFER_CAP");
  /* test hook: a smaller cap forces the follow-up's scan of all blocks */
  p->slcap = SLOW_CAP;
  if (env != NULL && *env != '\0' && strtoull(env, NULL, 10) < SLOW_CAP)
    p->slcap = strtoull(env, NULL, 10);
  nvfp4_status st = ctx_buffer(ctx, &c->rht_defer, &c->rht_defer_bytes,
                               offsetof(slow_list, e) + (size_t)SLOW_CAP * sizeof(uint64_t),
                               offsetof(slow_list, e));
  p->sl = (slow_list *)c->rht_defer;
  return st;
}


/* The scale gather (qfast_kernel<..., SCG>, then scale_gather_kernel; see
** sg_copy_col) where the shape and the scale buffers allow it (M and K
** multiples of 512; scale rows and buffers aligned to 16 bytes), for RN
** (SR is bound by its instructions, and the second kernel only adds to
** it), on tensors of at least 2^SCG_MIN_LOG2 elements: the scale sectors
** that four CTAs write in 8-byte pieces cost L2 write requests and, where
** the outputs no longer stay in the L2, DRAM reads.  Measured on the H200
** (kernels/PERFORMANCE.md): RNE at [32768, 8192] 0.85-0.86 of the copy against 0.66
** without it; at [8192, 8192] it lost (0.76-0.78 against 0.80) until the
** scratch was kept in the L2 (scg_st), broke even after that, and wins
** (0.81-0.82 against 0.80-0.81) since the rowwise scales are written by
** the fast kernel (its RD) and the copy is a programmatic
** dependent launch (QSCG_PDL).  NVFP4_CUDA_SCALE_GATHER=1 / 0 forces it on
** (where the shape allows; SR too) / off (test hook and measuring). */
#ifndef SCG_MIN_LOG2
#define SCG_MIN_LOG2 26         /* [8192, 8192] and larger */
#endif

static bool scg_wanted (const qparams &p, bool sr) {
  const char *env = getenv("NVFP4_CUDA_SCALE_GATHER");
  if (QFMT != 128 || p.M % 512 != 0 || p.K % 512 != 0 || !(p.row || p.col)) return false;
  if (p.row && ((uintptr_t)p.rscale % 16 != 0 || p.rsld % 16 != 0)) return false;
  if (p.col && ((uintptr_t)p.cscale % 16 != 0 || p.csld % 16 != 0)) return false;
  if (env != NULL && *env != '\0') return *env != '0';
  return !sr && (uint64_t)p.M * (uint64_t)p.K >= (1ull << SCG_MIN_LOG2);
}

/* The context's scratch for the scale gather: 1024 bytes per 128x128 tile
** (its columnwise scale bytes; see sg_copy_col). */
static nvfp4_status scg_buffer_for (nvfp4_ctx *ctx, qparams *p) {
  nvfp4i_cuda *c = nvfp4i_cuda_of(ctx);
  nvfp4_status st = ctx_buffer(ctx, &c->scale_gather, &c->scale_gather_bytes,
                               1024 * (size_t)(p->M / 128) * (size_t)(p->K / 128), 0);
  p->sgs = (uint8_t *)c->scale_gather;
  return st;
}


/* The follow-up of a fast RHT launch (after it on the same stream).  Not
** launched, the deferred list keeps the count the fast kernel left, which
** the next RHT quantize would take for its own (entries of another shape):
** reset after the fast kernel instead. */
template <bool SR, bool AMAX_ONLY>
static nvfp4_status launch_fix (nvfp4_ctx *ctx, const qparams &p, float *dst, cudaStream_t s) {
  cudaError_t e;
  rht_fix_kernel<SR, AMAX_ONLY><<<(unsigned)sm_count() * 4, 128, 0, s>>>(p, dst);
  if ((e = cudaGetLastError()) == cudaSuccess) return NVFP4_OK;
  (void)cudaMemsetAsync(p.sl, 0, offsetof(slow_list, e), s);
  return nvfp4i_cuda_fail(ctx, e, "rht_fix_kernel launch", __FILE__, __LINE__);
}


template <typename T, bool SR>
static void launch_q (const qparams &p, bool rht, unsigned grid, cudaStream_t s) {
  if (rht) quantize_kernel<T, SR, true><<<grid, NTHREADS, 0, s>>>(p);
  else quantize_kernel<T, SR, false><<<grid, NTHREADS, 0, s>>>(p);
}


/* The fast kernel of a cast: SR and RHT chosen at run time, DEV (amaxes
** in device memory) at compile time. */
template <bool DEV>
static void launch_fast_rs (const qparams &p, bool sr, bool rht, cudaStream_t s) {
  if (sr) {
    if (rht) launch_fast<true, true, false, DEV>(p, NULL, s);
    else launch_fast<true, false, false, DEV>(p, NULL, s);
  }
  else {
    if (rht) launch_fast<false, true, false, DEV>(p, NULL, s);
    else launch_fast<false, false, false, DEV>(p, NULL, s);
  }
}


nvfp4_status nvfp4i_cuda_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                   const nvfp4_qopts *o, nvfp4_tensor *q) {
  qparams p;
  int64_t M = nvfp4_shape_M(x->shape), K = nvfp4_shape_K(x->shape), tiles;
  nvfp4i_gscale gr = nvfp4i_gscale_make_e(q->amax[0], nvfp4i_emax(q));
  nvfp4i_gscale gc = nvfp4i_gscale_make_e(q->amax[1], nvfp4i_emax(q));
  cudaStream_t s = nvfp4i_stream(ctx);
  if (M * K == 0) return NVFP4_OK;
  tiles = ((M + TILE - 1) / TILE) * ((K + TILE - 1) / TILE);
  FAIL_IF(ctx, tiles > 0x7fffffff, NVFP4_EINVAL,
          "quantize: %lld tiles of 64x64 exceed one CUDA grid", (long long)tiles);
  p.x = x->data.p;
  p.M = M; p.K = K;
  p.row = q->has_row; p.col = q->has_col; p.two_d = o->two_d;
  p.rdata = (uint8_t *)q->row_data.p; p.rscale = (uint8_t *)q->row_scale.p;
  p.cdata = (uint8_t *)q->col_data.p; p.cscale = (uint8_t *)q->col_scale.p;
  p.rsld = q->has_row ? q->row_scale.shape.dim[1] : 0;
  p.csld = q->has_col ? q->col_scale.shape.dim[1] : 0;
  p.rm = gr.m; p.rsdec = gr.s_dec;
  p.cm = gc.m; p.csdec = gc.s_dec;
  p.mask = o->rht_no_signs ? 0u : NVFP4_RHT_SIGNS;
  p.seed = o->sr_seed; p.offset = o->sr_offset;
  p.sl = NULL; p.slcap = 0;
  p.scg = 0;
  p.sgs = NULL;
  p.fo6 = o->four_over_six; p.fo6_mse = o->four_over_six_mse;
  p.rsenc = gr.s_enc; p.csenc = gc.s_enc;
  p.ramax = q->amax[0]; p.camax = q->amax[1];
  p.e6 = 6.0f * nvfp4i_emax(q);
  /* an amax the quantize computed here stays in device memory: the
  ** kernels form the constants above from it (DEV) */
  p.damax = q->amax_pending ? (const float *)q->amax_dev.p : nullptr;
  p.dcol = q->amax_dcol;
  p.emax = nvfp4i_emax(q);
  const bool dev = p.damax != nullptr;
  if (fast_ok(x, M, K, o->two_d) && !o->four_over_six) {
    if (o->rht && p.col) {
      nvfp4_status st = slow_list_for(ctx, &p);
      if (st != NVFP4_OK) return st;
    }
    /* the scratch only for a columnwise copy: a rowwise-only quantize
    ** takes the gather's kernel for its whole-sector rowwise scales (RD)
    ** and launches no copy */
    p.scg = !o->rht && scg_wanted(p, o->sr);
    if (p.scg && p.col) {
      nvfp4_status st = scg_buffer_for(ctx, &p);
      if (st != NVFP4_OK) return st;
    }
    if (dev) launch_fast_rs<true>(p, o->sr, o->rht, s);
    else launch_fast_rs<false>(p, o->sr, o->rht, s);
    if (o->rht && p.col) {
      CU_LAUNCHED(ctx, "qfast_kernel");
      CHECK((o->sr ? launch_fix<true, false>(ctx, p, NULL, s) : launch_fix<false, false>(ctx, p, NULL, s)));
    }
  }
  else if (x->dtype == NVFP4_BF16) {
    if (o->sr) launch_q<uint16_t, true>(p, o->rht, (unsigned)tiles, s);
    else launch_q<uint16_t, false>(p, o->rht, (unsigned)tiles, s);
  }
  else {   /* RHT needs bf16 (checked in lib/quantize.c) */
    if (o->sr) quantize_kernel<float, true, false><<<(unsigned)tiles, NTHREADS, 0, s>>>(p);
    else quantize_kernel<float, false, false><<<(unsigned)tiles, NTHREADS, 0, s>>>(p);
  }
  CU_LAUNCHED(ctx, "quantize_kernel");
  return NVFP4_OK;
}


/* ---- amax ---------------------------------------------------------------- */

/* n16 groups of 16 elements (the tensor's numel is a multiple of 16). */
template <typename T>
__global__ void amax_kernel (const T *x, int64_t n16, float *dst) {
  float a = 0.0f, v[16];
  for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < n16;
       g += (int64_t)gridDim.x * blockDim.x) {
    load16(x + g * 16, v);
    a = fmaxf(a, absmax16(v));
  }
  block_max_to(a, dst);
}


/* Any numel (rowwise-only tensors need not hold a multiple of 16). */
template <typename T>
__global__ void amax_tail_kernel (const T *x, int64_t from, int64_t n, float *dst) {
  float a = 0.0f;
  for (int64_t i = from + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float f = sizeof(T) == 4 ? ((const float *)x)[i]
            : __uint_as_float((uint32_t)((const uint16_t *)x)[i] << 16);
    a = fmaxf(a, fabsf(f));
  }
  block_max_to(a, dst);
}


/* One thread per columnwise block (column k, rows 16j..16j+15). */
static __global__ void amax_rht_kernel (const uint16_t *x, int64_t M, int64_t K,
                                 unsigned mask, float *dst) {
  float a = 0.0f, v[16];
  int64_t nb = (M / 16) * K;
  for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < nb;
       g += (int64_t)gridDim.x * blockDim.x) {
    int64_t j = g / K, k = g % K;
#pragma unroll
    for (int r = 0; r < 16; r++)
      v[r] = __uint_as_float((uint32_t)x[(16 * j + r) * K + k] << 16);
    rht16(v, mask);
    a = fmaxf(a, absmax16(v));
  }
  block_max_to(a, dst);
}


/* The amax kernels' grid cap: 16 CTAs per SM (half the default). */
#define AMAX_GRID_CAP (132 * 16)

/* The amax pass into dst (device, two floats, zeroed): dst[0] = max|x|,
** dst[1] the post-RHT amax when rht.  Enqueued only. */
static nvfp4_status amax_enqueue (nvfp4_ctx *ctx, const nvfp4_tensor *x, int rht,
                                  unsigned sign_mask, float *dst) {
  cudaStream_t s = nvfp4i_stream(ctx);
  int64_t M = nvfp4_shape_M(x->shape), K = nvfp4_shape_K(x->shape), n = M * K;
  int64_t n16 = n / 16;
  if (n == 0) return NVFP4_OK;
  if (x->dtype == NVFP4_BF16) {
    const uint16_t *p = (const uint16_t *)x->data.p;
    const bool fused = rht && fast_ok(x, M, K, 0);   /* qfast_kernel<.., AMAX_ONLY> does both */
    if (n16 > 0 && !fused)
      amax_kernel<uint16_t><<<nvfp4i_grid_for(n16, 256, AMAX_GRID_CAP), 256, 0, s>>>(p, n16, dst);
    if (n % 16) amax_tail_kernel<uint16_t><<<1, 256, 0, s>>>(p, n16 * 16, n, dst);
    if (fused) {
      qparams p;
      memset(&p, 0, sizeof p);
      nvfp4_status st;
      p.x = x->data.p; p.M = M; p.K = K; p.mask = sign_mask;
      st = slow_list_for(ctx, &p);
      if (st != NVFP4_OK) return st;
      launch_fast<false, true, true>(p, dst + 1, s);
      CU_LAUNCHED(ctx, "qfast_kernel");
      CHECK((launch_fix<false, true>(ctx, p, dst + 1, s)));
    }
    else if (rht && M % 16 == 0)
      amax_rht_kernel<<<nvfp4i_grid_for((M / 16) * K, 128, AMAX_GRID_CAP), 128, 0, s>>>(p, M, K, sign_mask,
                                                                                    dst + 1);
  }
  else {
    const float *p = (const float *)x->data.p;
    if (n16 > 0) amax_kernel<float><<<nvfp4i_grid_for(n16, 256, AMAX_GRID_CAP), 256, 0, s>>>(p, n16, dst);
    if (n % 16) amax_tail_kernel<float><<<1, 256, 0, s>>>(p, n16 * 16, n, dst);
  }
  CU_LAUNCHED(ctx, "amax_kernel");
  return NVFP4_OK;
}


nvfp4_status nvfp4i_cuda_amax (nvfp4_ctx *ctx, const nvfp4_tensor *x, int rht,
                               unsigned sign_mask, float amax[2]) {
  nvfp4i_cuda *c = nvfp4i_cuda_of(ctx);
  cudaStream_t s = c->stream;
  amax[0] = amax[1] = 0.0f;
  if (nvfp4_shape_numel(x->shape) == 0) return NVFP4_OK;
  CU_CHECK(ctx, cudaMemsetAsync(c->amax_dev, 0, 2 * sizeof(float), s));
  CHECK(amax_enqueue(ctx, x, rht, sign_mask, c->amax_dev));
  CU_CHECK(ctx, cudaMemcpyAsync(c->amax_host, c->amax_dev, 2 * sizeof(float),
                                cudaMemcpyDeviceToHost, s));
  CHECK(nvfp4i_cuda_wait(ctx));
  amax[0] = c->amax_host[0];
  amax[1] = rht ? c->amax_host[1] : amax[0];
  return NVFP4_OK;
}


/* The backend table's amax_to: the pass into the caller's zeroed dst,
** nothing read back (lib/quantize.c keeps it with the tensor). */
nvfp4_status nvfp4i_cuda_amax_to (nvfp4_ctx *ctx, const nvfp4_tensor *x, int rht,
                                  unsigned sign_mask, float *dst) {
  return amax_enqueue(ctx, x, rht, sign_mask, dst);
}


/* Load this file's module now: under CUDA's lazy loading its first launch
** would wait for the device to go idle (kernels/cuda_comm.cu,
** nvfp4i_cuda_load_modules). */
cudaError_t nvfp4i_cuda_load_quantize (void) {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, scale_gather_kernel);
}
