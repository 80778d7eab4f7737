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
**   amax        both amaxes copied from the local tensor (TE aliases them).
**
** Deliberate choices, documented for users:
**  - Gathering is along dim 0 only (the sequence-first [S, B, H] layout);
**    a batch-first [B, S, H] tensor sharded on S must be transposed first,
**    otherwise rank blocks land in batch slots (field case BH-28).
**  - A plain shard that is not quantizable locally (M_l % 16 or K % 16) is
**    gathered in high precision and the gathered tensor quantized (TE's
**    fallback); that needs the global M % 16 == 0 and K % 16 == 0.
**  - An FP4 input lacking a wanted usage is dequantized (rowwise copy; BF16
**    when the requantize uses RHT, else FP32) and requantized with the
**    group's amax (TE warns and does the same).  Unlike TE 2.21 (§5.1 D),
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


/* TE's is_quantizable for a shard: M % 16 and K % 16, whatever the usages. */
static int shard_quantizable (nvfp4_shape s) {
  return nvfp4_shape_K(s) % NVFP4_BLOCK == 0 && nvfp4_shape_M(s) % NVFP4_BLOCK == 0;
}


/* Local argument checks, no communication; fills *p. */
static nvfp4_status make_plan (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                               const nvfp4_gather_opts *g, plan *p) {
  char sb[128];
  memset(p, 0, sizeof *p);
  CHECK(nvfp4i_check_tensor(ctx, x, "all_gather"));
  FAIL_IF(ctx, g == NULL, NVFP4_EINVAL, "all_gather: gopts is NULL");
  FAIL_IF(ctx, g->rule != NVFP4_CW_FLAT2D && g->rule != NVFP4_CW_ND, NVFP4_EINVAL,
          "all_gather: unknown columnwise rule %d (flat2d or nd)", (int)g->rule);
  FAIL_IF(ctx, x->shape.ndim < 2, NVFP4_EINVAL, "all_gather: x %s has %d dim(s); "
          "the NVFP4 gather needs >= 2 (dim 0 is gathered, the last is K)",
          nvfp4_shape_format(x->shape, sb, sizeof sb), x->shape.ndim);
  if (x->dtype == NVFP4_F32 || x->dtype == NVFP4_BF16) {
    FAIL_IF(ctx, g->quant == NULL, NVFP4_EINVAL,
            "all_gather: a plain %s x needs gopts->quant", nvfp4_dtype_name(x->dtype));
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
    }
    p->flags |= (x->has_row ? NVFP4I_META_HAVE_ROW : 0) |
                (x->has_col ? NVFP4I_META_HAVE_COL : 0);
  }
  p->q.rowwise = (unsigned)p->row;
  p->q.columnwise = (unsigned)p->col;
  p->q.amax_group = NULL;
  p->flags |= (p->row ? NVFP4I_META_ROW : 0) | (p->col ? NVFP4I_META_COL : 0) |
              (g->rule == NVFP4_CW_ND ? NVFP4I_META_ND : 0);
  if (p->plain || p->requant)
    p->flags |= (p->q.rht ? NVFP4I_META_RHT : 0) | (p->q.sr ? NVFP4I_META_SR : 0) |
                (p->q.two_d ? NVFP4I_META_TWO_D : 0);
  return NVFP4_OK;
}


/* High-precision fallback (§5.1 C): gather src, quantize the whole. */
static nvfp4_status gather_fallback (nvfp4_comm *c, const nvfp4_tensor *src,
                                     const plan *p, nvfp4_handle *h) {
  nvfp4_ctx *ctx = c->ctx;
  nvfp4_tensor *full = NULL;
  nvfp4_qopts qo = p->q;
  nvfp4_status st;
  char a[128], b[128];
  CHECK(nvfp4_all_gather_plain(c, src, &full));
  if (!shard_quantizable(full->shape)) {
    st = nvfp4i_fail(ctx, NVFP4_EINVAL, "all_gather: the local shard %s is not "
                     "quantizable (M=%lld, K=%lld: both must be multiples of %d), "
                     "so it was gathered in high precision, but the gathered %s "
                     "is not quantizable either (M=%lld, K=%lld)",
                     nvfp4_shape_format(src->shape, a, sizeof a),
                     (long long)nvfp4_shape_M(src->shape),
                     (long long)nvfp4_shape_K(src->shape), NVFP4_BLOCK,
                     nvfp4_shape_format(full->shape, b, sizeof b),
                     (long long)nvfp4_shape_M(full->shape),
                     (long long)nvfp4_shape_K(full->shape));
    nvfp4_tensor_destroy(full);
    return st;
  }
  /* Every rank holds the same gathered tensor: no amax reduction needed. */
  qo.amax_group = NULL;
  st = nvfp4_quantize(ctx, full, &qo, &h->out);
  nvfp4_tensor_destroy(full);
  return st;
}


/* The four byte all-gathers (rowwise scale rows [0, M_l), rowwise data,
** stripped columnwise scale, columnwise data), all ranks in this order. */
static nvfp4_status issue_gathers (nvfp4_comm *c, const nvfp4_tensor *qx,
                                   nvfp4_tensor *out, const nvfp4_tensor *strip,
                                   nvfp4_handle *h, int row, int col) {
  if (row) {
    size_t live = (size_t)nvfp4_shape_M(qx->shape) * (size_t)qx->row_scale.shape.dim[1];
    CHECK(nvfp4i_comm_all_gather_bytes(c, qx->row_scale.p, live, out->row_scale.p));
    CHECK(nvfp4i_comm_all_gather_bytes(c, qx->row_data.p, qx->row_data.nbytes,
                                       out->row_data.p));
  }
  if (col) {
    CHECK(nvfp4i_comm_all_gather_bytes(c, strip->data.p, strip->data.nbytes,
                                       h->il_scale->data.p));
    CHECK(nvfp4i_comm_all_gather_bytes(c, qx->col_data.p, qx->col_data.nbytes,
                                       h->il_data->data.p));
  }
  return NVFP4_OK;
}


/* An FP4 tensor carries one amax per direction, so after the gather every
** shard is decoded with the local amax (TE aliases it).  Shards quantized
** without amax reduction would be decoded with another rank's global scale,
** silently: refuse them, with the same error on every rank. */
static nvfp4_status check_same_amax (nvfp4_comm *c, const nvfp4_tensor *x,
                                     int row, int col) {
  float mine[2], stackbuf[2 * 16], *all = stackbuf;
  nvfp4_status st = NVFP4_OK;
  int r, d;
  mine[0] = row ? x->amax[0] : 0.0f;
  mine[1] = col ? x->amax[1] : 0.0f;
  if (c->size > 16) {
    all = (float *)malloc(sizeof mine * (size_t)c->size);
    FAIL_IF(c->ctx, all == NULL, NVFP4_ENOMEM, "all_gather: cannot allocate "
            "the amax table for %d ranks", c->size);
  }
  st = nvfp4i_comm_all_gather_host(c, mine, sizeof mine, all);
  for (r = 1; st == NVFP4_OK && r < c->size; r++)
    for (d = 0; d < 2; d++)
      if (memcmp(&all[2 * r + d], &all[d], sizeof(float)) != 0) {
        st = nvfp4i_fail(c->ctx, NVFP4_EMISMATCH, "all_gather: rank %d's %s amax "
                         "%.9g differs from rank 0's %.9g: NVFP4 shards must share "
                         "one global scale (quantize them with amax_group, i.e. "
                         "amax reduction over the group)", r,
                         d ? "columnwise" : "rowwise", (double)all[2 * r + d],
                         (double)all[d]);
        break;
      }
  if (all != stackbuf) free(all);
  return st;
}


/* Everything up to and including the four collectives. */
static nvfp4_status gather_start (nvfp4_comm *c, const nvfp4_tensor *x,
                                  const nvfp4_gather_opts *g, nvfp4_status lst,
                                  nvfp4_handle *h) {
  nvfp4_ctx *ctx = c->ctx;
  nvfp4_tensor *xp = NULL, *q = NULL, *strip = NULL, *out = NULL;
  const nvfp4_tensor *src, *qx;
  nvfp4_cw_bookkeeping bk;
  nvfp4_shape gs;
  nvfp4_status st, gst;
  nvfp4_qopts qo;
  plan p;
  int64_t K = 0, U = 0, half_ml = 0;
  char sb[128];
  memset(&p, 0, sizeof p);
  if (lst == NVFP4_OK) lst = make_plan(ctx, x, g, &p);
  CHECK(nvfp4i_comm_check_same(c, "all_gather", lst,
                               x ? x->shape : nvfp4_shape_make(0, NULL),
                               x ? x->dtype : NVFP4_F32, p.flags));
  h->rule = g->rule;
  src = x;
  if (p.requant) {
    st = nvfp4_dequantize(ctx, x, p.q.rht ? NVFP4_BF16 : NVFP4_F32, &xp);
    CHECK(nvfp4i_comm_agree(c, "all_gather", st));
    src = xp;
  }
  if (p.plain || p.requant) {
    if (!shard_quantizable(src->shape)) {
      st = gather_fallback(c, src, &p, h);
      nvfp4_tensor_destroy(xp);
      return st;
    }
    qo = p.q;
    qo.amax_group = c;          /* one global scale for every shard */
    st = nvfp4_quantize(ctx, src, &qo, &q);
    nvfp4_tensor_destroy(xp);
    CHECK(nvfp4i_comm_agree(c, "all_gather", st));
    qx = q;
  }
  else {
    CHECK(check_same_amax(c, x, p.row, p.col));
    qx = x;
  }

  gs = qx->shape;
  gs.dim[0] *= c->size;
  st = nvfp4i_tensor_alloc_fp4(ctx, gs, p.row, 0, &out);
  if (st == NVFP4_OK && p.col) {
    /* High precision in: the named rule on the logical shape (the bug
    ** lives here).  FP4 in: the real buffer, as TE. */
    bk = nvfp4_cw_rule_apply(p.plain ? g->rule : NVFP4_CW_FLAT2D,
                             p.plain ? x->shape : qx->shape);
    K = qx->col_data.shape.dim[0];
    half_ml = qx->col_data.shape.dim[1];
    U = bk.scale_width;
    if (bk.rows != K || U < 0 || U > qx->col_scale.shape.dim[1])
      st = nvfp4i_fail(ctx, NVFP4_EINVAL, "all_gather: columnwise bookkeeping "
                       "(rule %s) gives %lld x %lld scale entries, outside the "
                       "local columnwise scale %s", nvfp4_cw_rule_name(g->rule),
                       (long long)bk.rows, (long long)U,
                       nvfp4_shape_format(qx->col_scale.shape, sb, sizeof sb));
    if (st == NVFP4_OK) st = nvfp4i_tensor_alloc_plain(ctx, shape2(K, U), NVFP4_U8, &strip);
    if (st == NVFP4_OK)
      st = nvfp4i_tensor_alloc_plain(ctx, shape3(c->size, K, U), NVFP4_U8, &h->il_scale);
    if (st == NVFP4_OK)
      st = nvfp4i_tensor_alloc_plain(ctx, shape3(c->size, K, half_ml), NVFP4_U8, &h->il_data);
    /* Strip both paddings: scale[0:K, 0:U] into contiguous memory. */
    if (st == NVFP4_OK && K * U > 0)
      st = ctx->ops->copy2d(ctx, strip->data.p, (size_t)U, qx->col_scale.p,
                            (size_t)qx->col_scale.shape.dim[1], (size_t)K, (size_t)U);
  }
  if ((st = nvfp4i_comm_agree(c, "all_gather", st)) != NVFP4_OK) goto done;

  /* Zero the rowwise scale's padding rows, then the four collectives in
  ** TE's order, coalesced into one NCCL group on that transport. */
  if (p.row) {
    size_t got = (size_t)nvfp4_shape_M(qx->shape) * (size_t)c->size *
                 (size_t)qx->row_scale.shape.dim[1];
    if (out->row_scale.nbytes > got)
      CHECK_GOTO(ctx->ops->memset(ctx, (char *)out->row_scale.p + got, 0,
                                  out->row_scale.nbytes - got), st, done);
  }
  CHECK_GOTO(nvfp4i_comm_group_start(c), st, done);
  st = issue_gathers(c, qx, out, strip, h, p.row, p.col);
  gst = nvfp4i_comm_group_end(c);
  if (st == NVFP4_OK) st = gst;
  if (st != NVFP4_OK) goto done;
  out->amax[0] = qx->amax[0];
  out->amax[1] = qx->amax[1];
  out->rht = qx->rht;
  out->rht_no_signs = qx->rht_no_signs;
  out->sr = qx->sr;
  out->two_d = qx->two_d;
  h->out = out;
  h->col = p.col;
  out = NULL;
done:
  nvfp4_tensor_destroy(out);
  nvfp4_tensor_destroy(strip);
  nvfp4_tensor_destroy(q);
  return st;
}


/* Move a plain u8 tensor's storage into buf with a new shape (same bytes). */
static void adopt (nvfp4_tensor *t, nvfp4i_buf *buf, nvfp4_shape shape) {
  *buf = t->data;
  buf->shape = shape;
  memset(&t->data, 0, sizeof t->data);
  nvfp4_tensor_destroy(t);
}


/* De-interleave and re-pad the columnwise copy (§5.1 G, §6).  Local. */
static nvfp4_status gather_finish (nvfp4_handle *h) {
  nvfp4_ctx *ctx = h->ctx;
  nvfp4_tensor *out = h->out, *ss = NULL, *sd = NULL;
  nvfp4_shape is, id;
  int64_t K, W;
  nvfp4i_buf scale;
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
  /* Scale first, then data, as TE. */
  if ((st = nvfp4_swap_first_dims(ctx, h->il_scale, &ss)) != NVFP4_OK) {
    strncpy(why, ctx->err, sizeof why - 1);
    why[sizeof why - 1] = '\0';
    return nvfp4i_fail(ctx, st, "all_gather: de-interleaving the gathered "
                       "columnwise scale %s (rule %s, unpadded width U=%lld): "
                       "swap_first_dims: %s",
                       nvfp4_shape_format(is, sb, sizeof sb),
                       nvfp4_cw_rule_name(h->rule), (long long)is.dim[2], why);
  }
  if ((st = nvfp4_swap_first_dims(ctx, h->il_data, &sd)) != NVFP4_OK) {
    nvfp4_tensor_destroy(ss);
    return st;
  }
  /* Re-pad with zeros to [ru(K,128), ru(TP*U,4)]. */
  st = nvfp4i_buf_alloc(ctx, &scale, shape2(roundup(K, NVFP4_SCALE_ROWS),
                                            roundup(W, NVFP4_SCALE_COLS)), 1);
  if (st == NVFP4_OK && scale.nbytes > 0)
    st = ctx->ops->memset(ctx, scale.p, 0, scale.nbytes);
  if (st == NVFP4_OK && K * W > 0)
    st = ctx->ops->copy2d(ctx, scale.p, (size_t)scale.shape.dim[1], ss->data.p,
                          (size_t)W, (size_t)K, (size_t)W);
  nvfp4_tensor_destroy(ss);
  if (st != NVFP4_OK) {
    nvfp4i_buf_free(ctx, &scale);
    nvfp4_tensor_destroy(sd);
    return st;
  }
  out->col_scale = scale;
  adopt(sd, &out->col_data, shape2(K, id.dim[0] * id.dim[2]));
  out->has_col = 1;
  nvfp4_tensor_destroy(h->il_scale);
  nvfp4_tensor_destroy(h->il_data);
  h->il_scale = h->il_data = NULL;
  return NVFP4_OK;
}


nvfp4_status nvfp4_all_gather_async (nvfp4_comm *c, const nvfp4_tensor *x,
                                     const nvfp4_gather_opts *gopts,
                                     nvfp4_handle **hp) {
  nvfp4_handle *h;
  nvfp4_status st = NVFP4_OK, lst = NVFP4_OK;
  if (c == NULL) return NVFP4_EINVAL;
  if (hp != NULL) *hp = NULL;
  h = (nvfp4_handle *)calloc(1, sizeof *h);
  /* A local problem still joins the metadata exchange, so peers fail too. */
  if (hp == NULL) lst = nvfp4i_fail(c->ctx, NVFP4_EINVAL, "all_gather: handle pointer is NULL");
  else if (h == NULL) lst = nvfp4i_fail(c->ctx, NVFP4_ENOMEM, "cannot allocate a gather handle");
  if (h != NULL) {
    h->ctx = c->ctx;
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


nvfp4_status nvfp4_handle_wait (nvfp4_handle *h, nvfp4_tensor **out) {
  if (h == NULL) return NVFP4_EINVAL;
  if (out != NULL) *out = NULL;
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
  if (h == NULL || out == NULL) return NVFP4_EINVAL;
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
  free(h);
}


nvfp4_status nvfp4_all_gather (nvfp4_comm *c, const nvfp4_tensor *x,
                               const nvfp4_gather_opts *gopts,
                               nvfp4_tensor **out) {
  nvfp4_handle *h = NULL;
  nvfp4_status st;
  if (c == NULL) return NVFP4_EINVAL;
  if (out != NULL) *out = NULL;
  CHECK(nvfp4_all_gather_async(c, x, gopts, out != NULL ? &h : NULL));
  st = nvfp4_handle_take(h, out);
  nvfp4_handle_destroy(h);
  return st;
}
