/*
** ref_quantize.c -- the CPU reference numerics: amax (incl. post-RHT),
** quantize (rowwise / columnwise, 1D / 2D blocks, RHT, RN / SR) and rowwise
** dequantize, bit-exact with spec/nvfp4-numerics.md §3-§10 (the operation
** order of §4 matters).  The CUDA backend must match these bit for bit.
**
** Layouts (spec §6): x is [M, K] row-major (M = product of leading dims).
**   rowwise:    data [M, K/2], scale [ru(M,128), ru(K/16,4)], entry [m][j]
**               for block x[m][16j..16j+15];
**   columnwise: the [K, M] matrix X^T (RHT'd when o->rht), data [K, M/2],
**               scale [ru(K,128), ru(M/16,4)], entry [k][j] for block
**               X[16j..16j+15][k].
** Even element in the low nibble.  Scale padding is written as 0x00 (TE
** leaves it uninitialized: our deliberate difference, design.md 2).
**
** Stochastic rounding (ours, spec §17.1 leaves the hardware mapping open):
** in the 2-D buffer being quantized (rowwise [M, K]: stream 0; columnwise
** [K, M] after RHT: stream 1) the element at flat index e = r*cols + c uses
** the random byte nvfp4i_sr_byte(sr_seed, sr_offset, stream, e) of
** lib/philox.h: byte (e & 3) of word ((e >> 2) & 3) of
** philox4x32_10(key = sr_seed, counter = {blk lo32, blk hi32, stream, 0}),
** blk = sr_offset + (e >> 4); then "round up iff frac + r/256 >= 1"
** (nvfp4i_e2m1_encode_sr).  kernels/ use the same inline functions.
**
** 4over6 (spec §9.1): every block (1D) or 16x16 tile (2D) is encoded with
** both candidate scales, map-to-4 (fl(base*1.5)) and map-to-6 (base), base
** = fl(fl(a_b/6) * S_enc) with S_enc for E4M3 maximum 256 (or 448); it keeps
** map-to-4 iff its error -- the fp32 running sum over the block of
** |fl(fl(fl(fl(q*sf)*amax) / (6*EMAX)) - x)| (MAE) or its square (MSE) --
** is smaller.  A 2D tile sums its 16 row errors in TE's shuffle-tree order
** (r + r+8, then +4, +2, +1) and both copies use the tile's choice.
**
** Decisions: amaxes (tensor and block) ignore NaN, as the kernel's max does;
** a NaN element encodes to +6 (0x7), -0.0 to 0x8 (kernel, spec §1).
*/
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "ref_quantize.h"
#include "ref_codec.h"
#include "philox.h"


/* Row r of x (F32 or BF16) as K floats (exact). */
static void load_row (const nvfp4_tensor *x, int64_t r, int64_t K, float *dst) {
  int64_t k = 0;
  if (x->dtype == NVFP4_F32)
    memcpy(dst, (const float *)x->data.p + r * K, (size_t)K * sizeof(float));
  else {
    const uint16_t *s = (const uint16_t *)x->data.p + r * K;
#ifdef __SSE2__
    for (; k + 8 <= K; k += 8) {          /* bf16 bits << 16, 8 at a time */
      __m128i h = _mm_loadu_si128((const __m128i *)(s + k)), z = _mm_setzero_si128();
      _mm_storeu_si128((__m128i *)(dst + k), _mm_unpacklo_epi16(z, h));
      _mm_storeu_si128((__m128i *)(dst + k + 4), _mm_unpackhi_epi16(z, h));
    }
#endif
    for (; k < K; k++) dst[k] = nvfp4i_bf16_to_f32(s[k]);
  }
}


/* max |v_i| over n values, NaN ignored, starting from 0.  Max is
** order-free, so four lanes (maxps(t, a) = t > a ? t : a) give the same
** value as the scalar loop. */
static float absmax (const float *v, int64_t n) {
  float a = 0.0f;
  int64_t i = 0;
#ifdef __SSE2__
  if (n >= 4) {
    const __m128 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    __m128 va = _mm_setzero_ps();
    float l[4];
    int64_t n4 = n - n % 4;
    for (; i < n4; i += 4) va = _mm_max_ps(_mm_and_ps(_mm_loadu_ps(v + i), absm), va);
    _mm_storeu_ps(l, va);
    for (int j = 0; j < 4; j++) a = l[j] > a ? l[j] : a;
  }
#endif
  for (; i < n; i++) {
    float t = fabsf(v[i]);
    a = t > a ? t : a;                    /* NaN compares false: ignored */
  }
  return a;
}


/* The 16-row stripe j of x transposed: tile[k*16 + r] = x[16j + r][k],
** RHT'd (and rounded to bf16) per k when mask >= 0.  Read as 16 row
** streams, the tile written in order. */
static void load_stripe (const nvfp4_tensor *x, int64_t j, int64_t K, float *row,
                         float *tile, long mask) {
  int64_t r, k;
  (void)row;
  if (x->dtype == NVFP4_F32) {
    const float *s = (const float *)x->data.p + 16 * j * K;
    for (k = 0; k < K; k++)
      for (r = 0; r < 16; r++) tile[k * 16 + r] = s[r * K + k];
  }
  else {
    const uint16_t *s = (const uint16_t *)x->data.p + 16 * j * K;
    for (k = 0; k < K; k++)
      for (r = 0; r < 16; r++) tile[k * 16 + r] = nvfp4i_bf16_to_f32(s[r * K + k]);
  }
  if (mask >= 0)
    for (k = 0; k < K; k++) {
      uint16_t h[16];
      nvfp4i_rht16(tile + k * 16, (unsigned)mask, h);
      for (r = 0; r < 16; r++) tile[k * 16 + r] = nvfp4i_bf16_to_f32(h[r]);
    }
}


nvfp4_status nvfp4i_ref_amax (nvfp4_ctx *ctx, const nvfp4_tensor *x, int rht,
                              unsigned sign_mask, float amax[2]) {
  int64_t M = nvfp4_shape_M(x->shape), K = nvfp4_shape_K(x->shape), r;
  float *row, *tile = NULL, a = 0.0f;
  amax[0] = amax[1] = 0.0f;
  if (M * K == 0) return NVFP4_OK;
  row = (float *)nvfp4i_malloc((size_t)K * sizeof(float));
  FAIL_IF(ctx, row == NULL, NVFP4_ENOMEM, "amax: cannot allocate %lld floats",
          (long long)K);
  for (r = 0; r < M; r++) {
    float t;
    load_row(x, r, K, row);
    t = absmax(row, K);
    if (t > a) a = t;
  }
  amax[0] = amax[1] = a;
  if (rht) {                              /* max |bf16(RHT(x^T))| (§8) */
    tile = (float *)nvfp4i_malloc((size_t)K * 16 * sizeof(float));
    if (tile == NULL) {
      free(row);
      return nvfp4i_fail(ctx, NVFP4_ENOMEM, "amax: cannot allocate a %lldx16 tile",
                         (long long)K);
    }
    a = 0.0f;
    for (r = 0; r < M / 16; r++) {
      float t;
      load_stripe(x, r, K, row, tile, (long)sign_mask);
      t = absmax(tile, K * 16);
      if (t > a) a = t;
    }
    amax[1] = a;
  }
  free(tile);
  free(row);
  return NVFP4_OK;
}


#ifdef __SSE2__
/* Four lanes of nvfp4i_e2m1_encode(v * enc) as int32 codes: the same
** product (mulps rounds as mulss), the same seven threshold compares
** (each true compare is -1, subtracted), the sign bit and the NaN rule. */
static inline __m128i e2m1_encode4 (__m128 v, __m128 enc) {
  const __m128i absm = _mm_set1_epi32(0x7fffffff);
  __m128 y = _mm_mul_ps(v, enc);
  __m128i u = _mm_castps_si128(y), au = _mm_and_si128(u, absm);
  __m128 a = _mm_castsi128_ps(au);
  __m128i c = _mm_setzero_si128();
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpgt_ps(a, _mm_set1_ps(0.25f))));
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpge_ps(a, _mm_set1_ps(0.75f))));
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpgt_ps(a, _mm_set1_ps(1.25f))));
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpge_ps(a, _mm_set1_ps(1.75f))));
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpgt_ps(a, _mm_set1_ps(2.5f))));
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpge_ps(a, _mm_set1_ps(3.5f))));
  c = _mm_sub_epi32(c, _mm_castps_si128(_mm_cmpgt_ps(a, _mm_set1_ps(5.0f))));
  c = _mm_or_si128(c, _mm_and_si128(_mm_srli_epi32(u, 28), _mm_set1_epi32(8)));
  {                                       /* NaN (|bits| > 0x7f800000) -> 7 */
    __m128i nan = _mm_cmpgt_epi32(au, _mm_set1_epi32(0x7f800000));
    return _mm_or_si128(_mm_andnot_si128(nan, c), _mm_and_si128(nan, _mm_set1_epi32(7)));
  }
}


#endif


/* Pack 16 codes, even element in the low nibble. */
static void pack16 (const uint8_t *c, uint8_t *out) {
  int i;
  for (i = 0; i < 8; i++) out[i] = (uint8_t)(c[2 * i] | (c[2 * i + 1] << 4));
}


/* Quantize one 16-element block v (spec §4): a_b given (2D) or < 0 to
** compute it; writes 8 packed bytes and returns the scale byte.  rb: the 16
** SR bytes or NULL for RN. */
static uint8_t quantize_block (const float *v, float a_b, nvfp4i_gscale g,
                               const uint8_t *rb, uint8_t *out) {
  float enc;
  uint8_t sf, c[16];
  int i;
  if (a_b < 0.0f) a_b = absmax(v, 16);
  sf = nvfp4i_block_scale(a_b, g, &enc);
#ifdef __SSE2__
  if (rb == NULL) {
    __m128 e = _mm_set1_ps(enc);
    __m128i c0 = e2m1_encode4(_mm_loadu_ps(v), e), c1 = e2m1_encode4(_mm_loadu_ps(v + 4), e);
    __m128i c2 = e2m1_encode4(_mm_loadu_ps(v + 8), e), c3 = e2m1_encode4(_mm_loadu_ps(v + 12), e);
    /* codes 0..15 -> 16 bytes; then each 16-bit pair (lo even, hi odd)
    ** -> lo | hi << 4 */
    __m128i b = _mm_packus_epi16(_mm_packs_epi32(c0, c1), _mm_packs_epi32(c2, c3));
    __m128i p = _mm_or_si128(_mm_and_si128(b, _mm_set1_epi16(0x000f)),
                             _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi16(0x00f0)));
    _mm_storel_epi64((__m128i *)out, _mm_packus_epi16(p, p));
    return sf;
  }
#endif
  if (rb == NULL)
    for (i = 0; i < 16; i++) c[i] = nvfp4i_e2m1_encode(v[i] * enc);
  else
    for (i = 0; i < 16; i++) c[i] = nvfp4i_e2m1_encode_sr(v[i] * enc, rb[i]);
  pack16(c, out);
  return sf;
}


/* The RN codes of v[0..16) for the given scale byte (spec §4 steps 5-6). */
static void codes_for_scale (const float *v, uint8_t sf, nvfp4i_gscale g, uint8_t *c) {
  float enc = nvfp4i_scale_enc(sf, g.s_dec);
  int i;
  for (i = 0; i < 16; i++) c[i] = nvfp4i_e2m1_encode(v[i] * enc);
}


/* 4over6 parameters of one direction. */
typedef struct fo6 {
  nvfp4i_gscale g;      /* for EMAX */
  float amax, e6;       /* the tensor amax, 6*EMAX (1536 or 2688) */
  int mse;
} fo6;


/* The two candidate scale bytes of block (tile) amax a_b: [0] map-to-4,
** [1] map-to-6. */
static void fo6_candidates (float a_b, const fo6 *f, uint8_t sf[2]) {
  float t[2];
  nvfp4i_fo6_targets(a_b, f->g.s_enc, t);
  sf[0] = nvfp4i_e4m3_encode(t[0]);
  sf[1] = nvfp4i_e4m3_encode(t[1]);
}


/* 1D 4over6: writes the 8 packed bytes of block v, returns its scale. */
static uint8_t quantize_block_fo6 (const float *v, const fo6 *f, uint8_t *out) {
  uint8_t sf[2], c[2][16];
  float err[2];
  int k;
  fo6_candidates(absmax(v, 16), f, sf);
  for (k = 0; k < 2; k++) {
    codes_for_scale(v, sf[k], f->g, c[k]);
    err[k] = nvfp4i_fo6_error(v, c[k], sf[k], f->amax, f->e6, f->mse);
  }
  k = err[0] < err[1] ? 0 : 1;            /* ties (and NaN) -> map-to-6 */
  pack16(c[k], out);
  return sf[k];
}


/* 2D 4over6: the scale byte of every 16x16 tile, tsf[(m/16) * KB + b],
** from the tile amaxes tam (M % 16 == 0). */
static void fo6_tile_scales (const nvfp4_tensor *x, int64_t M, int64_t K, const float *tam,
                             const fo6 *f, float *rows16, uint8_t *tsf) {
  int64_t KB = K / 16, t, b;
  int r, k;
  for (t = 0; t < M / 16; t++) {
    for (r = 0; r < 16; r++) load_row(x, 16 * t + r, K, rows16 + (size_t)r * K);
    for (b = 0; b < KB; b++) {
      uint8_t sf[2], c[16];
      float err[2], e[16];
      fo6_candidates(tam[t * KB + b], f, sf);
      for (k = 0; k < 2; k++) {
        for (r = 0; r < 16; r++) {
          const float *v = rows16 + (size_t)r * K + 16 * b;
          codes_for_scale(v, sf[k], f->g, c);
          e[r] = nvfp4i_fo6_error(v, c, sf[k], f->amax, f->e6, f->mse);
        }
        err[k] = nvfp4i_fo6_tree_sum(e);
      }
      tsf[t * KB + b] = err[0] < err[1] ? sf[0] : sf[1];
    }
  }
}


/* 16x16 tile amaxes for 2D mode: tam[(m/16) * KB + k/16] (a partial last
** tile row when M % 16 != 0, rowwise only). */
static void tile_amax (const nvfp4_tensor *x, int64_t M, int64_t K, float *row,
                       float *tam) {
  int64_t KB = K / 16, m, b;
  memset(tam, 0, (size_t)((M + 15) / 16 * KB) * sizeof(float));
  for (m = 0; m < M; m++) {
    load_row(x, m, K, row);
    for (b = 0; b < KB; b++) {
      float t = absmax(row + 16 * b, 16);
      float *d = &tam[(m / 16) * KB + b];
      if (t > *d) *d = t;
    }
  }
}


/* The 4over6 parameters of direction dir (0 rowwise, 1 columnwise). */
static fo6 fo6_make (const nvfp4_qopts *o, const nvfp4_tensor *q, int dir) {
  fo6 f;
  f.g = nvfp4i_gscale_make_e(q->amax[dir], nvfp4i_emax(q));
  f.amax = q->amax[dir];
  f.e6 = 6.0f * nvfp4i_emax(q);
  f.mse = o->four_over_six_mse;
  return f;
}


/* One block of a 4over6 tensor: the tile's scale (2D, tsf) or its own
** choice (1D). */
static uint8_t fo6_block (const float *v, const fo6 *f, const uint8_t *tsf, int64_t tile,
                          uint8_t *out) {
  uint8_t c[16];
  if (tsf == NULL) return quantize_block_fo6(v, f, out);
  codes_for_scale(v, tsf[tile], f->g, c);
  pack16(c, out);
  return tsf[tile];
}


static void quantize_rowwise (const nvfp4_tensor *x, const nvfp4_qopts *o,
                              nvfp4_tensor *q, float *row, const float *tam,
                              const uint8_t *tsf) {
  int64_t M = nvfp4_shape_M(x->shape), K = nvfp4_shape_K(x->shape), KB = K / 16;
  int64_t scols = q->row_scale.shape.dim[1], m, b;
  fo6 f = fo6_make(o, q, 0);
  nvfp4i_gscale g = f.g;
  uint8_t *data = (uint8_t *)q->row_data.p, *scale = (uint8_t *)q->row_scale.p;
  uint8_t rb[16];
  memset(scale, 0, q->row_scale.nbytes);
  for (m = 0; m < M; m++) {
    load_row(x, m, K, row);
    for (b = 0; b < KB; b++) {
      float a_b = tam ? tam[(m / 16) * KB + b] : -1.0f;
      if (o->four_over_six) {
        scale[m * scols + b] = fo6_block(row + 16 * b, &f, tsf, (m / 16) * KB + b,
                                         data + m * (K / 2) + 8 * b);
        continue;
      }
      if (o->sr)   /* e = m*K + 16b: SR block m*KB + b */
        nvfp4i_sr_block_bytes(o->sr_seed, o->sr_offset + (uint64_t)(m * KB + b),
                              NVFP4I_SR_ROWWISE, rb);
      scale[m * scols + b] = quantize_block(row + 16 * b, a_b, g, o->sr ? rb : NULL,
                                            data + m * (K / 2) + 8 * b);
    }
  }
}


static void quantize_columnwise (const nvfp4_tensor *x, const nvfp4_qopts *o,
                                 nvfp4_tensor *q, float *row, float *tile,
                                 const float *tam, const uint8_t *tsf) {
  int64_t M = nvfp4_shape_M(x->shape), K = nvfp4_shape_K(x->shape);
  int64_t MB = M / 16, KB = K / 16, scols = q->col_scale.shape.dim[1], j, k;
  long mask = o->rht ? (long)(o->rht_no_signs ? 0u : NVFP4_RHT_SIGNS) : -1;
  fo6 f = fo6_make(o, q, 1);
  nvfp4i_gscale g = f.g;
  uint8_t *data = (uint8_t *)q->col_data.p, *scale = (uint8_t *)q->col_scale.p;
  uint8_t rb[16];
  memset(scale, 0, q->col_scale.nbytes);
  for (j = 0; j < MB; j++) {
    load_stripe(x, j, K, row, tile, mask);
    for (k = 0; k < K; k++) {
      float a_b = tam ? tam[j * KB + k / 16] : -1.0f;
      if (o->four_over_six) {
        scale[k * scols + j] = fo6_block(tile + 16 * k, &f, tsf, j * KB + k / 16,
                                         data + k * (M / 2) + 8 * j);
        continue;
      }
      if (o->sr)   /* e = k*M + 16j: SR block k*MB + j */
        nvfp4i_sr_block_bytes(o->sr_seed, o->sr_offset + (uint64_t)(k * MB + j),
                              NVFP4I_SR_COLUMNWISE, rb);
      scale[k * scols + j] = quantize_block(tile + 16 * k, a_b, g, o->sr ? rb : NULL,
                                            data + k * (M / 2) + 8 * j);
    }
  }
}


static nvfp4_status ref_quantize_with (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                       const nvfp4_qopts *o, nvfp4_tensor *q) {
  int64_t M = nvfp4_shape_M(x->shape), K = nvfp4_shape_K(x->shape);
  float *row = NULL, *tile = NULL, *tam = NULL, *rows16 = NULL;
  uint8_t *tsf = NULL, *tsf_col = NULL;
  const int fo6_2d = o->two_d && o->four_over_six;
  const size_t ntiles = (size_t)(M / 16 * (K / 16));
  nvfp4_status st = NVFP4_OK;
  if (q->has_row && q->row_scale.nbytes) memset(q->row_scale.p, 0, q->row_scale.nbytes);
  if (q->has_col && q->col_scale.nbytes) memset(q->col_scale.p, 0, q->col_scale.nbytes);
  if (M * K == 0) return NVFP4_OK;
  row = (float *)nvfp4i_malloc((size_t)K * sizeof(float));
  if (q->has_col) tile = (float *)nvfp4i_malloc((size_t)K * 16 * sizeof(float));
  if (o->two_d) tam = (float *)nvfp4i_malloc((size_t)((M + 15) / 16 * (K / 16)) * sizeof(float));
  if (fo6_2d) {
    rows16 = (float *)nvfp4i_malloc((size_t)K * 16 * sizeof(float));
    tsf = (uint8_t *)nvfp4i_malloc(2 * ntiles + 1);   /* rowwise, then columnwise */
  }
  if (row == NULL || (q->has_col && tile == NULL) || (o->two_d && tam == NULL) ||
      (fo6_2d && (rows16 == NULL || tsf == NULL))) {
    st = nvfp4i_fail(ctx, NVFP4_ENOMEM, "quantize: cannot allocate work space "
                     "for K=%lld", (long long)K);
    goto done;
  }
  if (tam) tile_amax(x, M, K, row, tam);
  if (fo6_2d) {
    /* each copy chooses its tiles' scales with its own amax, as the plain
    ** 2D blocks do; with equal amaxes (always, unless a pair is given) the
    ** choice is the same and is made once */
    fo6 fr = fo6_make(o, q, 0), fc = fo6_make(o, q, 1);
    tsf_col = tsf + ntiles;
    if (q->has_row) fo6_tile_scales(x, M, K, tam, &fr, rows16, tsf);
    if (q->has_col) {
      if (q->has_row && nvfp4i_f32_bits(fr.amax) == nvfp4i_f32_bits(fc.amax)) tsf_col = tsf;
      else fo6_tile_scales(x, M, K, tam, &fc, rows16, tsf_col);
    }
  }
  if (q->has_row) quantize_rowwise(x, o, q, row, tam, tsf);
  if (q->has_col) quantize_columnwise(x, o, q, row, tile, tam, tsf_col);
done:
  free(tsf);
  free(rows16);
  free(tam);
  free(tile);
  free(row);
  return st;
}


/* q's amaxes as the cast reads them: one still in q's buffer (the
** quantize computed it, lib/quantize.c) is read from there and q keeps it
** unread, as on the CUDA backend, so that the CPU tests run that path. */
nvfp4_status nvfp4i_ref_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                  const nvfp4_qopts *o, nvfp4_tensor *q) {
  nvfp4_tensor v = *q;
  CHECK(nvfp4i_amax_values(q, v.amax));
  return ref_quantize_with(ctx, x, o, &v);
}


nvfp4_status nvfp4i_ref_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                    nvfp4_tensor *out) {
  int64_t M = nvfp4_shape_M(q->shape), K = nvfp4_shape_K(q->shape), KB = K / 16;
  int64_t scols = q->row_scale.shape.dim[1], m, b, i;
  const uint8_t *data = (const uint8_t *)q->row_data.p;
  const uint8_t *scale = (const uint8_t *)q->row_scale.p;
  float amax[2];
  CHECK(nvfp4i_amax_values(q, amax));   /* as the cast (above) */
  for (m = 0; m < M; m++)
    for (b = 0; b < KB; b++) {
      float fs = nvfp4i_dequant_scale_e(scale[m * scols + b], amax[0], nvfp4i_emax(q));
      const uint8_t *d = data + m * (K / 2) + 8 * b;
      int64_t base = m * K + 16 * b;
      for (i = 0; i < 16; i++) {
        float v = nvfp4i_e2m1_value((d[i / 2] >> (4 * (i & 1))) & 0xfu) * fs;
        if (out->dtype == NVFP4_F32) ((float *)out->data.p)[base + i] = v;
        else ((uint16_t *)out->data.p)[base + i] = nvfp4i_f32_to_bf16(v);
      }
    }
  return NVFP4_OK;
}
