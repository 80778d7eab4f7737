/*
** gather.c -- the NVFP4 all-gather along dim 0, Transformer Engine's
** algorithm (spec/sp-linear-and-gather.md §5.1, §6, checklist §11):
**
**   rowwise     send scale rows [0, M_l) and all data; the gathered scale
**               [ru(M,128), ru(K/16,4)] has rank r's rows at r*M_l and zero
**               padding rows.
**   columnwise  bookkeeping by the named rule (nvfp4_cw_rule_apply on the
**               local logical shape of a high-precision input; the real
**               buffer shape for an already-quantized input, as TE); strip
**               the scale to [K, U] (contiguous), gather it as [TP*K, U] and
**               the data as [TP*K, M_l/2] (always the real buffer shape);
**               then de-interleave with swap_first_dims, scale first, then
**               data, and zero-pad the scale to [ru(K,128), ru(TP*U,4)].
**               Under the ND rule, [S,1,H] gives U = 0 and the scale swap
**               fails with "Input is not allocated" (after the four gathers,
**               so no rank is left inside a collective); odd B gives a
**               too-narrow scale, reported as produced (buffer_shape).
**               A group of one rank applies no rule (TE returns
**               quantize(x) at world size 1, before the rule).
**   amax        both amaxes copied from the local tensor (TE aliases them).
**
** Deliberate choices, documented for users:
**  - Gathering is along dim 0 only (the sequence-first [S, B, H] layout);
**    a batch-first [B, S, H] tensor sharded on S must be transposed first,
**    otherwise rank blocks land in batch slots (field case BH-28).
**  - A plain shard that is not quantizable locally (M_l % 16 or K % 16) is
**    gathered in high precision and the gathered tensor quantized (TE's
**    fallback); that needs the global M % 16 == 0 and K % 16 == 0.
**  - An FP4 input lacking a wanted usage is dequantized (rowwise copy) to
**    the dtype it stands for (nvfp4_tensor_nominal_dtype; BF16 when the
**    requantize uses RHT) and requantized with the group's amax (TE warns
**    and does the same).  FP4 shards must stand for one dtype on every
**    rank (EMISMATCH otherwise), which the gathered tensor stands for.  Unlike TE 2.21 (§5.1 D),
**    the columnwise bookkeeping then uses the requantized buffers' shapes.
**  - The four collectives form one NCCL group on that transport.  On the
**    CPU backend (and the staged transport) they run eagerly, blocking,
**    inside nvfp4_all_gather_async; the handle's wait only does the local
**    finish step (swap + pad), exactly once.
*/
#include <stdlib.h>
#include <string.h>
#include "comm_int.h"


struct nvfp4_handle {
  nvfp4_ctx *ctx;
  nvfp4_tensor *out;          /* owned until taken; columnwise set by finish */
  nvfp4_tensor *il_scale;     /* interleaved columnwise scale [size, K, U] u8 */
  nvfp4_tensor *il_data;      /* interleaved columnwise data [size, K, M_l/2] */
  /* the finish step's buffers, made with the others before the ranks agree
  ** (prepare), so that a rank out of memory fails there and its peers get
  ** EPEER: the columnwise scale [ru(K,128), ru(W,4)], its temporary [K, W]
  ** when W = size*U is not a multiple of 4, and the data [K, size*M_l/2] */
  nvfp4i_buf fin_scale, fin_tmp, fin_data;
  int size;
  int col;                    /* a columnwise copy waits for the finish step */
  nvfp4_cw_rule rule;
  int finished, finish_count, taken;
  nvfp4_status st;            /* the finish step's status, kept for later waits */
  char err[NVFP4I_ERRLEN];
};


typedef struct plan {
  int plain;                  /* x is F32/BF16 */
  int row, col;               /* usages wanted */
  int requant;                /* FP4 x lacks a wanted usage */
  nvfp4_qopts q;              /* how to quantize (plain x, or requantize) */
  int flags;                  /* for the cross-rank metadata check */
} plan;


static int64_t roundup (int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}


static nvfp4_shape shape3 (int64_t a, int64_t b, int64_t c) {
  int64_t d[3];
  d[0] = a; d[1] = b; d[2] = c;
  return nvfp4_shape_make(3, d);
}


static nvfp4_shape shape2 (int64_t a, int64_t b) {
  int64_t d[2];
  d[0] = a; d[1] = b;
  return nvfp4_shape_make(2, d);
}


/* TE's is_quantizable for a shard: M % 16 and K % 16, whatever the usages
** (nvfp4_int.h). */
int nvfp4i_shard_quantizable (nvfp4_shape s) {
  return nvfp4_shape_K(s) % NVFP4_BLOCK == 0 && nvfp4_shape_M(s) % NVFP4_BLOCK == 0;
}


/* The metadata flags of how NVFP4 bytes are made: the RHT and its sign
** mask, SR, 2D blocks (the ranks' shards must agree on them). */
static int made_flags (int rht, int rht_no_signs, int sr, int two_d) {
  return (rht ? NVFP4I_META_RHT : 0) | (rht && rht_no_signs ? NVFP4I_META_RHT_NOSIGNS : 0) |
         (sr ? NVFP4I_META_SR : 0) | (two_d ? NVFP4I_META_TWO_D : 0);
}


/* The dtype an FP4 shard lacking a wanted usage is dequantized to before
** it is requantized: the one it stands for (TE dequantizes to the tensor's
** dtype, field case BH-03), bf16 where the requantize uses the RHT (which
** takes bf16 only, spec §8). */
static nvfp4_dtype requant_dtype (const nvfp4_tensor *x, const nvfp4_qopts *q) {
  return q->rht ? NVFP4_BF16 : nvfp4_tensor_nominal_dtype(x);
}


/* Local argument checks, no communication; fills *p. */
static nvfp4_status make_plan (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                               const nvfp4_gather_opts *g, plan *p) {
  char sb[128];
  memset(p, 0, sizeof *p);
  CHECK(nvfp4i_check_tensor(ctx, x, "all_gather: x"));
  FAIL_IF(ctx, g->rule != NVFP4_CW_FLAT2D && g->rule != NVFP4_CW_ND, NVFP4_EINVAL,
          "all_gather: unknown columnwise rule %d (flat2d or nd)", (int)g->rule);
  FAIL_IF(ctx, x->shape.ndim < 2, NVFP4_EINVAL, "all_gather: x %s has %d dim(s); "
          "the NVFP4 gather needs >= 2 (the first dim is gathered, the last is K)",
          nvfp4_shape_format(x->shape, sb, sizeof sb), x->shape.ndim);
  if (x->dtype == NVFP4_F32 || x->dtype == NVFP4_BF16) {
    FAIL_IF(ctx, g->quant == NULL, NVFP4_EINVAL,
            "all_gather: a plain %s x needs gopts->quant (how to quantize it)",
            nvfp4_dtype_name(x->dtype));
    p->plain = 1;
    p->q = *g->quant;
    p->row = p->q.rowwise || !p->q.columnwise;
    p->col = p->q.columnwise;
  }
  else {
    FAIL_IF(ctx, x->dtype != NVFP4_FP4, NVFP4_EINVAL,
            "all_gather: x has dtype %s (fp32, bf16 or fp4)", nvfp4_dtype_name(x->dtype));
    p->row = g->rowwise;
    p->col = g->columnwise;
    if (!p->row && !p->col) { p->row = x->has_row; p->col = x->has_col; }
    p->requant = (p->row && !x->has_row) || (p->col && !x->has_col);
    FAIL_IF(ctx, p->requant && !x->has_row, NVFP4_EINVAL,
            "all_gather: the rowwise copy is wanted but x has only a columnwise "
            "copy; requantizing needs the rowwise copy to dequantize");
    if (g->quant != NULL) p->q = *g->quant;
    else {
      p->q.rht = x->rht && p->col;
      p->q.rht_no_signs = x->rht_no_signs;
      p->q.two_d = x->two_d;
      p->q.four_over_six = x->four_over_six;
      p->q.four_over_six_mse = x->four_over_six && x->fo6_mse;
      p->q.four_over_six_emax448 = x->four_over_six && !x->emax256;
    }
    /* the presence of the wanted usages only (whether this rank
    ** requantizes): a copy not gathered may differ per rank (a layer's
    ** keep_operands keeps the saved input's rowwise copy on that rank) */
    p->flags |= (p->row && x->has_row ? NVFP4I_META_HAVE_ROW : 0) |
                (p->col && x->has_col ? NVFP4I_META_HAVE_COL : 0) |
                (x->four_over_six ? NVFP4I_META_FO6 : 0) |
                (x->four_over_six && x->fo6_mse ? NVFP4I_META_FO6_MSE : 0) |
                (x->emax256 ? NVFP4I_META_EMAX256 : 0);
    /* shards used as they are must have been made alike: the gathered
    ** bytes are theirs (a shard with the RHT next to one without would
    ** decode silently wrong); the RHT only where the columnwise copy, the
    ** one it rotates, is gathered (a rowwise copy is never rotated) */
    if (!p->requant)
      p->flags |= made_flags(x->rht && p->col, x->rht_no_signs, x->sr, x->two_d);
    /* the shards stand for one dtype (TE's one tensor dtype): the gathered
    ** tensor stands for it, and shards to requantize are dequantized to it
    ** (requant_dtype) */
    if (nvfp4_tensor_nominal_dtype(x) == NVFP4_BF16) p->flags |= NVFP4I_META_FROM_BF16;
  }
  p->q.rowwise = (unsigned)p->row;
  p->q.columnwise = (unsigned)p->col;
  p->q.amax_group = NULL;
  p->flags |= (p->row ? NVFP4I_META_ROW : 0) | (p->col ? NVFP4I_META_COL : 0) |
              (g->rule == NVFP4_CW_ND ? NVFP4I_META_ND : 0);
  if (p->plain || p->requant) {
    /* the options' own rules here, before the collectives (a bad given
    ** amax on one rank failed in the cast, after the metadata round, and
    ** left the others in the amax reduction) */
    CHECK(nvfp4i_check_qopts_flags(ctx, p->plain ? x->dtype : requant_dtype(x, &p->q), &p->q));
    p->flags |= made_flags(p->q.rht, p->q.rht_no_signs, p->q.sr, p->q.two_d) |
                (p->q.four_over_six ? NVFP4I_META_FO6 : 0) |
                (p->q.four_over_six && p->q.four_over_six_mse ? NVFP4I_META_FO6_MSE : 0) |
                (p->q.four_over_six && !p->q.four_over_six_emax448 ? NVFP4I_META_EMAX256 : 0);
  }
  return NVFP4_OK;
}


/* High-precision fallback (§5.1 C): gather src, quantize the whole, which
** stands for `nominal` (the input's: src may be an FP4 shard's dequantize
** in bf16 for the RHT). */
static nvfp4_status gather_fallback (nvfp4_comm *c, const nvfp4_tensor *src,
                                     const plan *p, nvfp4_dtype nominal, nvfp4_handle *h) {
  nvfp4_ctx *ctx = c->ctx;
  nvfp4_tensor *full = NULL;
  nvfp4_qopts qo = p->q;
  nvfp4_status st;
  char a[128], b[128];
  CHECK(nvfp4_all_gather_plain(c, src, &full));
  if (!nvfp4i_shard_quantizable(full->shape)) {
    st = nvfp4i_fail(ctx, NVFP4_EINVAL, "all_gather: the local shard %s is not "
                     "quantizable (M=%lld, K=%lld: the gather, as TE's, wants both "
                     "multiples of %d for any usage, rowwise only too), so it was "
                     "gathered in high precision, but the gathered %s is not "
                     "quantizable either (M=%lld, K=%lld)",
                     nvfp4_shape_format(src->shape, a, sizeof a),
                     (long long)nvfp4_shape_M(src->shape),
                     (long long)nvfp4_shape_K(src->shape), NVFP4_BLOCK,
                     nvfp4_shape_format(full->shape, b, sizeof b),
                     (long long)nvfp4_shape_M(full->shape),
                     (long long)nvfp4_shape_K(full->shape));
    nvfp4_tensor_destroy(full);
    return st;
  }
  /* Every rank holds the same gathered tensor, and quantizes it with the
  ** same options: a given amax (which may differ per rank, as the shards'
  ** may) is MAX-reduced over c, as the shards' path reduces it, and SR takes
  ** rank 0's seed and offset.  Each rank's own gave each rank other bytes.
  ** Every rank is here (the shapes and the SR flag were agreed). */
  qo.amax_group = c;
  if (qo.sr) {
    uint64_t so[2];
    so[0] = qo.sr_seed;
    so[1] = qo.sr_offset;
    if (MPI_Bcast(so, 2, MPI_UINT64_T, 0, c->mpi) != MPI_SUCCESS) {
      nvfp4_tensor_destroy(full);
      return nvfp4i_fail(ctx, NVFP4_EMPI, "all_gather: MPI_Bcast of the SR seed failed");
    }
    qo.sr_seed = so[0];
    qo.sr_offset = so[1];
  }
  st = nvfp4_quantize(ctx, full, &qo, &h->out);
  nvfp4_tensor_destroy(full);
  /* The quantize's cast follows its amax reduction and is local: a rank
  ** failing there (its temporaries) would fail alone.  One more round makes
  ** it the gather's failure on every rank. */
  if ((st = nvfp4i_comm_agree(c, "all_gather", st)) != NVFP4_OK) {
    nvfp4_tensor_destroy(h->out);
    h->out = NULL;
    return st;
  }
  h->out->nominal = nominal;
  return NVFP4_OK;
}


/* What the collectives need, set up locally (prepare). */
typedef struct setup {
  nvfp4_tensor *out;          /* gathered output, rowwise buffers only */
  nvfp4_tensor *strip;        /* stripped columnwise scale, when one is needed */
  const void *cw_scale;       /* columnwise scale to send: [K, U] contiguous */
  size_t cw_scale_n;          /* K * U bytes */
} setup;


/* The four byte all-gathers (rowwise scale rows [0, M_l), rowwise data,
** stripped columnwise scale, columnwise data), all ranks in this order. */
static nvfp4_status issue_gathers (nvfp4_comm *c, const nvfp4_tensor *qx,
                                   const setup *s, nvfp4_handle *h, int row,
                                   int col) {
  if (row) {
    size_t live = (size_t)nvfp4_shape_M(qx->shape) * (size_t)qx->row_scale.shape.dim[1];
    CHECK(nvfp4i_comm_all_gather_bytes(c, "all_gather", qx->row_scale.p, live,
                                       s->out->row_scale.p));
    CHECK(nvfp4i_comm_all_gather_bytes(c, "all_gather", qx->row_data.p, qx->row_data.nbytes,
                                       s->out->row_data.p));
  }
  if (col) {
    CHECK(nvfp4i_comm_all_gather_bytes(c, "all_gather", s->cw_scale, s->cw_scale_n,
                                       h->il_scale->data.p));
    CHECK(nvfp4i_comm_all_gather_bytes(c, "all_gather", qx->col_data.p, qx->col_data.nbytes,
                                       h->il_data->data.p));
  }
  return NVFP4_OK;
}


/* Frees the finish step's buffers that it has not taken. */
static void fin_free (nvfp4_handle *h) {
  nvfp4i_buf_free(h->ctx, &h->fin_scale);
  nvfp4i_buf_free(h->ctx, &h->fin_tmp);
  nvfp4i_buf_free(h->ctx, &h->fin_data);
}


/* Local set-up for the quantized shard qx (x: the caller's input): the
** gathered output with its rowwise buffers (not zero-filled: the gathers
** write rows [0, TP*M_l) of both, and the scale's padding rows are zeroed
** here), the interleaved columnwise buffers (filled by the gathers), and
** the columnwise scale to send: qx's own buffer when the bookkeeping keeps
** its full width (its first K rows are then [K, U] contiguous), else a
** stripped copy.  No communication; on failure the caller frees *s and h's
** interleaved buffers. */
static nvfp4_status prepare (nvfp4_comm *c, const nvfp4_tensor *x,
                             const nvfp4_tensor *qx, const nvfp4_gather_opts *g,
                             const plan *p, nvfp4_handle *h, setup *s) {
  nvfp4_ctx *ctx = c->ctx;
  nvfp4_cw_bookkeeping bk;
  nvfp4_tensor *out;
  nvfp4_shape gs;
  int64_t K, U, half_ml;
  size_t got;
  char sb[128];
  gs = qx->shape;
  gs.dim[0] *= c->size;
  out = nvfp4i_tensor_new(ctx);
  FAIL_IF(ctx, out == NULL, NVFP4_ENOMEM, "cannot allocate a tensor");
  s->out = out;
  out->dtype = NVFP4_FP4;
  out->nominal = qx->nominal;          /* the shards stand for one dtype (make_plan) */
  out->shape = gs;
  /* the local amaxes (TE aliases them), still unread where they are */
  CHECK(nvfp4i_amax_copy(out, qx));
  if (p->row) {
    out->has_row = 1;
    CHECK(nvfp4i_buf_alloc_uninit(ctx, &out->row_data, nvfp4_rowwise_data_shape(gs), 1));
    CHECK(nvfp4i_buf_alloc_uninit(ctx, &out->row_scale, nvfp4_rowwise_scale_shape(gs), 1));
    got = (size_t)nvfp4_shape_M(qx->shape) * (size_t)c->size *
          (size_t)qx->row_scale.shape.dim[1];
    if (out->row_scale.nbytes > got)
      CHECK(ctx->ops->memset(ctx, (char *)out->row_scale.p + got, 0,
                             out->row_scale.nbytes - got));
  }
  if (!p->col) return NVFP4_OK;
  /* High precision in: the named rule on the logical shape (the bug lives
  ** here).  FP4 in: the real buffer, as TE.  A group of one: no rule, as
  ** TE's gather_along_first_dim quantizes and returns at world size 1,
  ** before _all_gather_nvfp4 computes one. */
  bk = nvfp4_cw_rule_apply(p->plain && c->size > 1 ? g->rule : NVFP4_CW_FLAT2D,
                           p->plain ? x->shape : qx->shape);
  K = qx->col_data.shape.dim[0];
  half_ml = qx->col_data.shape.dim[1];
  U = bk.scale_width;
  if (bk.rows != K || U < 0 || U > qx->col_scale.shape.dim[1])
    return nvfp4i_fail(ctx, NVFP4_EINVAL, "all_gather: columnwise bookkeeping "
                       "(rule %s) gives %lld x %lld scale entries, outside the "
                       "local columnwise scale %s", nvfp4_cw_rule_name(g->rule),
                       (long long)bk.rows, (long long)U,
                       nvfp4_shape_format(qx->col_scale.shape, sb, sizeof sb));
  CHECK(nvfp4i_tensor_alloc_plain_uninit(ctx, shape3(c->size, K, U), NVFP4_U8, &h->il_scale));
  CHECK(nvfp4i_tensor_alloc_plain_uninit(ctx, shape3(c->size, K, half_ml), NVFP4_U8, &h->il_data));
  if (K > 0 && half_ml > 0 && U > 0) {      /* gather_finish's, see nvfp4_handle */
    const int64_t W = (int64_t)c->size * U;
    CHECK(nvfp4i_buf_alloc_uninit(ctx, &h->fin_scale, shape2(roundup(K, NVFP4_SCALE_ROWS),
                                                             roundup(W, NVFP4_SCALE_COLS)), 1));
    if (roundup(W, NVFP4_SCALE_COLS) != W)
      CHECK(nvfp4i_buf_alloc_uninit(ctx, &h->fin_tmp, shape2(K, W), 1));
    CHECK(nvfp4i_buf_alloc_uninit(ctx, &h->fin_data, shape2(K, (int64_t)c->size * half_ml), 1));
  }
  s->cw_scale_n = (size_t)K * (size_t)U;
  if (U == qx->col_scale.shape.dim[1]) {
    s->cw_scale = qx->col_scale.p;          /* nothing to strip */
    return NVFP4_OK;
  }
  /* Strip both paddings: scale[0:K, 0:U] into contiguous memory. */
  CHECK(nvfp4i_tensor_alloc_plain_uninit(ctx, shape2(K, U), NVFP4_U8, &s->strip));
  s->cw_scale = s->strip->data.p;
  if (K * U > 0)
    CHECK(ctx->ops->copy2d(ctx, s->strip->data.p, (size_t)U, qx->col_scale.p,
                           (size_t)qx->col_scale.shape.dim[1], (size_t)K, (size_t)U));
  return NVFP4_OK;
}


/* The amaxes of the usages an FP4 input gathered as it is shares (0 for the
** other), read back if need be. */
static nvfp4_status direct_amax (const nvfp4_tensor *x, const plan *p, float amax[2]) {
  CHECK(nvfp4i_amax_ready(x));
  amax[0] = p->row ? x->amax[0] : 0.0f;
  amax[1] = p->col ? x->amax[1] : 0.0f;
  return NVFP4_OK;
}


/* Everything up to and including the four collectives.  Host rounds before
** them: one for an FP4 input used as it is (the metadata round carries its
** amaxes, or the tags of the reductions they came from, and the set-up
** status; a second one compares the values when the tags differ), three or
** four otherwise (metadata; the quantize's agreement, then its amax
** reduction, which over NCCL runs on the device instead; quantize + set-up
** status), plus one for a dequantize. */
static nvfp4_status gather_start (nvfp4_comm *c, const nvfp4_tensor *x,
                                  const nvfp4_gather_opts *g, nvfp4_status lst,
                                  nvfp4_handle *h) {
  nvfp4_ctx *ctx = c->ctx;
  nvfp4_tensor *xp = NULL, *q = NULL;
  const nvfp4_tensor *src, *qx;
  nvfp4_status st, gst, post = NVFP4_OK;
  nvfp4_qopts qo;
  setup s;
  plan p;
  float amax[2] = {0.0f, 0.0f};
  int direct, tagged, round2 = 0;
  memset(&p, 0, sizeof p);
  memset(&s, 0, sizeof s);
  if (lst == NVFP4_OK) lst = make_plan(ctx, x, g, &p);
  if (lst == NVFP4_OK) {
    nvfp4_shape gs;                   /* prepare's, checked here (before the rounds) */
    lst = nvfp4i_gathered_shape(ctx, "all_gather", x->shape, c->size, &gs);
  }
  /* An FP4 input used as it is: set up before the metadata round, so that
  ** the round also agrees on the set-up and (TE aliases the amaxes, see
  ** below) on the amaxes of the usages gathered. */
  direct = lst == NVFP4_OK && !p.plain && !p.requant;
  /* An input whose amax came from a reduction over c is not read back: the
  ** round compares the reductions' numbers instead (see nvfp4_comm.serial) */
  tagged = direct && x->amax_comm != 0 && x->amax_comm == c->serial;
  if (direct && !tagged && (lst = direct_amax(x, &p, amax)) != NVFP4_OK) direct = 0;
  if (direct) post = prepare(c, x, x, g, &p, h, &s);
  /* An FP4 tensor carries one amax per direction, so after the gather every
  ** shard is decoded with the local amax (TE aliases it).  Shards quantized
  ** without amax reduction would be decoded with another rank's global
  ** scale, silently: refuse them, with the same error on every rank. */
  st = nvfp4i_comm_check_meta(c, "all_gather", lst,
                              x ? x->shape : nvfp4_shape_make(0, NULL),
                              x ? x->dtype : NVFP4_F32, p.flags,
                              direct && !tagged ? amax : NULL,
                              direct && tagged ? x->amax_seq : 0, &round2, post);
  if (st == NVFP4_OK && round2)       /* tags that differ: compare the values */
    st = nvfp4i_comm_check_amax(c, "all_gather", tagged ? direct_amax(x, &p, amax) : NVFP4_OK,
                                amax);
  if (st != NVFP4_OK) goto done;
  h->rule = g->rule;
  if (direct) qx = x;
  else {
    src = x;
    if (p.requant) {
      st = nvfp4_dequantize(ctx, x, requant_dtype(x, &p.q), &xp);
      if ((st = nvfp4i_comm_agree(c, "all_gather", st)) != NVFP4_OK) goto done;
      src = xp;
    }
    if (!nvfp4i_shard_quantizable(src->shape)) {
      st = gather_fallback(c, src, &p, nvfp4_tensor_nominal_dtype(x), h);
      goto done;
    }
    qo = p.q;
    qo.amax_group = c;          /* one global scale for every shard */
    st = nvfp4_quantize(ctx, src, &qo, &q);
    if (st == NVFP4_OK) q->nominal = nvfp4_tensor_nominal_dtype(x);   /* src: bf16 for the RHT */
    if (st == NVFP4_OK) st = prepare(c, x, q, g, &p, h, &s);
    if ((st = nvfp4i_comm_agree(c, "all_gather", st)) != NVFP4_OK) goto done;
    qx = q;
  }

  /* The four collectives in TE's order, coalesced into one NCCL group on
  ** that transport. */
  CHECK_GOTO(nvfp4i_comm_group_start(c), st, done);
  st = issue_gathers(c, qx, &s, h, p.row, p.col);
  gst = nvfp4i_comm_group_end(c);
  if (st == NVFP4_OK) st = gst;
  if (st != NVFP4_OK) goto done;
  /* the RHT flag only with the copy it rotates: a rowwise-only result is
  ** the same tensor on every rank (the shards' flags may differ there) */
  s.out->rht = qx->rht && p.col;
  s.out->rht_no_signs = qx->rht_no_signs && p.col;
  s.out->sr = qx->sr;
  s.out->two_d = qx->two_d;
  s.out->four_over_six = qx->four_over_six;
  s.out->fo6_mse = qx->fo6_mse;
  s.out->emax256 = qx->emax256;
  h->out = s.out;
  h->col = p.col;
  s.out = NULL;
done:
  if (st != NVFP4_OK) {
    nvfp4_tensor_destroy(h->il_scale);
    nvfp4_tensor_destroy(h->il_data);
    h->il_scale = h->il_data = NULL;
    fin_free(h);
  }
  nvfp4_tensor_destroy(s.out);
  nvfp4_tensor_destroy(s.strip);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(xp);
  return st;
}


/* Move a plain u8 tensor's storage into buf with a new shape (same bytes). */
static void adopt (nvfp4_tensor *t, nvfp4i_buf *buf, nvfp4_shape shape) {
  *buf = t->data;
  buf->shape = shape;
  memset(&t->data, 0, sizeof t->data);
  nvfp4_tensor_destroy(t);
}


/* scale (allocated [ru(K,128), P], P = ru(W,4), not zero-filled) = the
** de-interleaved il [TP, K, U] (W = TP*U > 0) with zero padding.  P == W
** (the usual case): swapped straight into the padded buffer, whose first K
** rows are then contiguous, and only the padding rows zeroed; otherwise
** through tmp [K, W] (allocated) and a pitched copy into the zeroed buffer. */
static nvfp4_status swap_scale_padded (nvfp4_ctx *ctx, const nvfp4_tensor *il,
                                       nvfp4i_buf *scale, const nvfp4i_buf *tmp) {
  nvfp4_status st;
  int64_t TP = il->shape.dim[0], K = il->shape.dim[1], U = il->shape.dim[2];
  size_t W = (size_t)(TP * U), P = (size_t)scale->shape.dim[1];
  size_t live = (size_t)K * P;
  if (W == P) {
    CHECK(ctx->ops->swap_first_dims(ctx, scale->p, il->data.p, TP, K, (size_t)U));
    if (scale->nbytes > live)
      CHECK(ctx->ops->memset(ctx, (char *)scale->p + live, 0, scale->nbytes - live));
    return NVFP4_OK;
  }
  st = ctx->ops->swap_first_dims(ctx, tmp->p, il->data.p, TP, K, (size_t)U);
  if (st == NVFP4_OK) st = ctx->ops->memset(ctx, scale->p, 0, scale->nbytes);
  if (st == NVFP4_OK)
    st = ctx->ops->copy2d(ctx, scale->p, P, tmp->p, W, (size_t)K, W);
  return st;
}


/* De-interleave and re-pad the columnwise copy (§5.1 G, §6).  Local, into
** the buffers prepare made (no allocation here that could fail on one rank
** alone).  The swaps write their outputs entirely, so those are not
** zero-filled. */
static nvfp4_status gather_finish (nvfp4_handle *h) {
  nvfp4_ctx *ctx = h->ctx;
  nvfp4_tensor *out = h->out, *ss = NULL;
  nvfp4_shape is, id;
  int64_t K, W;
  nvfp4_status st;
  char sb[128], why[NVFP4I_ERRLEN];
  if (!h->col) return NVFP4_OK;
  is = h->il_scale->shape;                  /* [TP, K, U] */
  id = h->il_data->shape;                   /* [TP, K, M_l/2] */
  K = is.dim[1];
  W = is.dim[0] * is.dim[2];                /* TP * U */
  if (id.dim[2] == 0) {
    /* Empty shards (M_l = 0, field case BH-22): nothing to de-interleave;
    ** the result is data [K, 0] and scale [ru(K,128), 0].  (TE's swap
    ** would fail on the empty buffers; an empty gather is not an error.) */
    CHECK(nvfp4i_buf_alloc(ctx, &out->col_scale, shape2(roundup(K, NVFP4_SCALE_ROWS), 0), 1));
    adopt(h->il_data, &out->col_data, shape2(K, 0));
    h->il_data = NULL;
    out->has_col = 1;
    nvfp4_tensor_destroy(h->il_scale);
    h->il_scale = NULL;
    return NVFP4_OK;
  }
  if (K == 0) {
    /* A zero-width hidden dim: no bytes anywhere; the shapes quantize of
    ** the gathered tensor gives, data [0, TP*M_l/2] and scale [0, ru(W,4)]
    ** (swap_first_dims would refuse the empty buffers as not allocated). */
    CHECK(nvfp4i_buf_alloc(ctx, &out->col_scale, shape2(0, roundup(W, NVFP4_SCALE_COLS)), 1));
    adopt(h->il_data, &out->col_data, shape2(0, id.dim[0] * id.dim[2]));
    h->il_data = NULL;
    out->has_col = 1;
    nvfp4_tensor_destroy(h->il_scale);
    h->il_scale = NULL;
    return NVFP4_OK;
  }
  /* Scale first, then data, as TE.  An empty scale (U = 0 under the ND
  ** rule) is refused by swap_first_dims's own check, "Input is not
  ** allocated"; any other goes straight into the padded buffer. */
  if (nvfp4_shape_numel(is) == 0) {
    st = nvfp4_swap_first_dims(ctx, h->il_scale, &ss);
    nvfp4_tensor_destroy(ss);
    if (st == NVFP4_OK)                     /* cannot happen: it has no elements */
      st = nvfp4i_fail(ctx, NVFP4_EINVAL, "Input is not allocated");
  }
  else st = swap_scale_padded(ctx, h->il_scale, &h->fin_scale, &h->fin_tmp);
  if (st != NVFP4_OK) {
    strncpy(why, ctx->err, sizeof why - 1);
    why[sizeof why - 1] = '\0';
    return nvfp4i_fail(ctx, st, "all_gather: de-interleaving the gathered "
                       "columnwise scale %s (rule %s, unpadded width U=%lld): "
                       "swap_first_dims: %s",
                       nvfp4_shape_format(is, sb, sizeof sb),
                       nvfp4_cw_rule_name(h->rule), (long long)is.dim[2], why);
  }
  /* Data: [TP, K, M_l/2] -> [K, TP*M_l/2], every byte written by the swap. */
  st = ctx->ops->swap_first_dims(ctx, h->fin_data.p, h->il_data->data.p, id.dim[0],
                                 id.dim[1], (size_t)id.dim[2]);
  if (st != NVFP4_OK) return st;
  out->col_scale = h->fin_scale;
  out->col_data = h->fin_data;
  memset(&h->fin_scale, 0, sizeof h->fin_scale);
  memset(&h->fin_data, 0, sizeof h->fin_data);
  fin_free(h);                              /* the temporary */
  out->has_col = 1;
  nvfp4_tensor_destroy(h->il_scale);
  nvfp4_tensor_destroy(h->il_data);
  h->il_scale = h->il_data = NULL;
  return NVFP4_OK;
}


/* nvfp4_all_gather_async; outname: the caller's output pointer's name for
** its NULL error ("h", or nvfp4_all_gather's "out"). */
static nvfp4_status gather_async (nvfp4_comm *c, const nvfp4_tensor *x,
                                  const nvfp4_gather_opts *gopts, nvfp4_handle **hp,
                                  const char *outname) {
  static const nvfp4_gather_opts defaults;     /* gopts NULL: zero-initialised */
  nvfp4_handle *h;
  nvfp4_status st = NVFP4_OK, lst = NVFP4_OK;
  NVFP4I_CLEAR(hp);
  if (c == NULL) return NVFP4_EINVAL;
  if (gopts == NULL) gopts = &defaults;
  h = (nvfp4_handle *)nvfp4i_calloc(1, sizeof *h);
  /* A local problem still joins the metadata exchange, so peers fail too. */
  if (hp == NULL) lst = nvfp4i_fail(c->ctx, NVFP4_EINVAL, "all_gather: %s is NULL", outname);
  else if (h == NULL) lst = nvfp4i_fail(c->ctx, NVFP4_ENOMEM, "cannot allocate a gather handle");
  if (h != NULL) {
    h->ctx = c->ctx;
    nvfp4i_ctx_hold(h->ctx);            /* wait/take write its error */
    h->size = c->size;
    st = gather_start(c, x, gopts, lst, h);
  }
  else {
    nvfp4_handle tmp;
    memset(&tmp, 0, sizeof tmp);
    st = gather_start(c, x, gopts, lst, &tmp);
  }
  if (st != NVFP4_OK || hp == NULL) {
    nvfp4_handle_destroy(h);
    return st != NVFP4_OK ? st : NVFP4_EINVAL;
  }
  *hp = h;
  return NVFP4_OK;
}


nvfp4_status nvfp4_all_gather_async (nvfp4_comm *c, const nvfp4_tensor *x,
                                     const nvfp4_gather_opts *gopts, nvfp4_handle **hp) {
  return gather_async(c, x, gopts, hp, "h");
}


nvfp4_status nvfp4_handle_wait (nvfp4_handle *h, nvfp4_tensor **out) {
  NVFP4I_CLEAR(out);
  if (h == NULL) return NVFP4_EINVAL;
  if (!h->finished) {
    h->st = gather_finish(h);
    if (h->st != NVFP4_OK) {
      strncpy(h->err, h->ctx->err, sizeof h->err - 1);
      h->err[sizeof h->err - 1] = '\0';
    }
    h->finished = 1;
    h->finish_count++;
  }
  if (h->st != NVFP4_OK) return nvfp4i_fail(h->ctx, h->st, "%s", h->err);
  FAIL_IF(h->ctx, h->taken, NVFP4_EUSAGE,
          "handle_wait: the result was already taken (nvfp4_handle_take)");
  if (out != NULL) *out = h->out;
  return NVFP4_OK;
}


nvfp4_status nvfp4_handle_take (nvfp4_handle *h, nvfp4_tensor **out) {
  nvfp4_tensor *t;
  NVFP4I_CLEAR(out);
  if (h == NULL) return NVFP4_EINVAL;
  CHECK_ARG(h->ctx, out, "handle_take");
  CHECK(nvfp4_handle_wait(h, &t));
  h->out = NULL;
  h->taken = 1;
  *out = t;
  return NVFP4_OK;
}


int nvfp4_handle_finish_count (const nvfp4_handle *h) {
  return h ? h->finish_count : 0;
}


void nvfp4_handle_destroy (nvfp4_handle *h) {
  if (h == NULL) return;
  nvfp4_tensor_destroy(h->out);
  nvfp4_tensor_destroy(h->il_scale);
  nvfp4_tensor_destroy(h->il_data);
  if (h->ctx != NULL) fin_free(h);
  if (h->ctx != NULL) nvfp4i_ctx_release(h->ctx);   /* last: it may free a destroyed ctx */
  free(h);
}


nvfp4_status nvfp4_all_gather (nvfp4_comm *c, const nvfp4_tensor *x,
                               const nvfp4_gather_opts *gopts,
                               nvfp4_tensor **out) {
  nvfp4_handle *h = NULL;
  nvfp4_status st;
  NVFP4I_CLEAR(out);
  if (c == NULL) return NVFP4_EINVAL;
  CHECK(gather_async(c, x, gopts, out != NULL ? &h : NULL, "out"));
  st = nvfp4_handle_take(h, out);
  nvfp4_handle_destroy(h);
  return st;
}
