/*
** quantize.c -- the public quantize, dequantize and swap_first_dims: every
** argument is validated here, once, then the backend table does the work
** (lib/ref_quantize.c on the CPU, kernels/ on CUDA).
*/
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nvfp4_int.h"
#include "comm_int.h"           /* nvfp4i_comm_agree */


/* The options as the backends see them: a usage is always set. */
static nvfp4_qopts normalize (const nvfp4_qopts *opts) {
  nvfp4_qopts o;
  if (opts != NULL) o = *opts;
  else memset(&o, 0, sizeof o);
  if (!o.rowwise && !o.columnwise) o.rowwise = 1;
  return o;
}


/* The options' own rules for an input of dtype dt (fp32 or bf16, checked by
** the callers; no shape rules): what the NVFP4 gather checks before its
** collectives, so that a rank with bad options fails there with its peers
** rather than in the cast after them. */
nvfp4_status nvfp4i_check_qopts_flags (nvfp4_ctx *ctx, nvfp4_dtype dt, const nvfp4_qopts *o) {
  int i;
  FAIL_IF(ctx, o->rht && dt != NVFP4_BF16, NVFP4_EINVAL,
          "quantize: RHT needs a bf16 input, got %s (spec §8)", nvfp4_dtype_name(dt));
  FAIL_IF(ctx, o->rht && !o->columnwise, NVFP4_EINVAL,
          "quantize: RHT applies to the columnwise copy only; ask for "
          "columnwise usage (spec §8)");
  FAIL_IF(ctx, o->rht_no_signs && !o->rht, NVFP4_EINVAL,
          "quantize: rht_no_signs is set without rht");
  FAIL_IF(ctx, o->two_d && (o->rht || o->sr), NVFP4_EINVAL,
          "quantize: 2D (16x16) blocks exclude %s (spec §7)",
          o->rht ? "RHT" : "stochastic rounding");
  FAIL_IF(ctx, o->four_over_six && (o->rht || o->sr), NVFP4_EINVAL,
          "quantize: 4over6 excludes %s (spec §9.1)",
          o->rht ? "RHT" : "stochastic rounding");
  FAIL_IF(ctx, (o->four_over_six_mse || o->four_over_six_emax448) && !o->four_over_six,
          NVFP4_EINVAL, "quantize: %s is set without four_over_six",
          o->four_over_six_mse ? "four_over_six_mse" : "four_over_six_emax448");
  if (o->has_amax)
    for (i = 0; i < 2; i++)
      FAIL_IF(ctx, !(o->amax[i] >= 0.0f), NVFP4_EINVAL,
              "quantize: given %s amax %g must be >= 0 and not NaN",
              i ? "columnwise" : "rowwise",
              isnan(o->amax[i]) ? (double)NAN : (double)o->amax[i]);  /* "nan", never "-nan" */
  FAIL_IF(ctx, o->amax_group != NULL && nvfp4_comm_ctx(o->amax_group) != ctx,
          NVFP4_EUSAGE, "quantize: amax_group belongs to another context");
  return NVFP4_OK;
}


static nvfp4_status check_qopts (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                 const nvfp4_qopts *o) {
  char msg[256];
  FAIL_IF(ctx, x->dtype != NVFP4_F32 && x->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "quantize: input dtype %s is not fp32 or bf16", nvfp4_dtype_name(x->dtype));
  if (nvfp4_shape_check_quantizable(x->shape, o->rowwise, o->columnwise, msg,
                                    sizeof msg) != NVFP4_OK)
    return nvfp4i_fail(ctx, NVFP4_EINVAL, "quantize: %s", msg);
  CHECK(nvfp4i_check_qopts_flags(ctx, x->dtype, o));
  FAIL_IF(ctx, o->four_over_six && o->two_d && nvfp4_shape_M(x->shape) % 16 != 0,
          NVFP4_EINVAL, "quantize: 2D 4over6 needs whole 16x16 tiles, M=%lld is "
          "not a multiple of 16", (long long)nvfp4_shape_M(x->shape));
  return NVFP4_OK;
}


/* q's two floats of backend memory for its amax, pending, columnwise at
** dcol; zeroed. */
static nvfp4_status amax_buf (nvfp4_ctx *ctx, nvfp4_tensor *q, int dcol) {
  const int64_t two = 2;
  CHECK(nvfp4i_buf_alloc(ctx, &q->amax_dev, nvfp4_shape_make(1, &two), sizeof(float)));
  q->amax_dcol = (unsigned)dcol;
  q->amax_pending = 1;
  return NVFP4_OK;
}


/* The amax pass of x into q's own backend memory (q->amax_dev, two floats:
** [rowwise, columnwise post-RHT]; without RHT one amax for both), enqueued
** only: q->amax_pending until a host read (nvfp4i_amax_ready).  pair: both
** floats filled (without RHT the one amax copied into the second) for a
** group's reduction, where a rank given a pair takes part with its two
** values (amax_given_into): every rank then reads the columnwise amax from
** the second float. */
static nvfp4_status amax_into (nvfp4_ctx *ctx, const nvfp4_tensor *x, const nvfp4_qopts *o,
                               int pair, nvfp4_tensor *q) {
  float *d;
  CHECK(amax_buf(ctx, q, o->rht || pair));
  d = (float *)q->amax_dev.p;
  CHECK(ctx->ops->amax_to(ctx, x, o->rht, o->rht_no_signs ? 0u : NVFP4_RHT_SIGNS, d));
  if (pair && !o->rht) CHECK(ctx->ops->copy2d(ctx, d + 1, sizeof *d, d, sizeof *d, 1, sizeof *d));
  return NVFP4_OK;
}


/* A given amax pair into q's backend memory as amax_into leaves one, for
** the group's reduction over NCCL. */
static nvfp4_status amax_given_into (nvfp4_ctx *ctx, const float amax[2], nvfp4_tensor *q) {
  CHECK(amax_buf(ctx, q, 1));
  return ctx->ops->from_host(ctx, q->amax_dev.p, amax, 2 * sizeof(float));
}


/* Order (spec §3.1): checks, amax (given, or the backend's pass), allocate;
** with amax_group the group's agreement on all that, then the MAX-all-reduce
** of both amaxes over it; cast.  Nothing is written to *out on failure.  A
** backend with amax_to (both have it) computes an amax not given into the
** new tensor's own backend memory, where the cast reads it: without a group
** and over NCCL the call enqueues and returns (the host copy is read when
** first asked for, nvfp4i_amax_ready).  Where the group's reduction runs:
**  - NCCL: on that buffer, on the device, on every rank of the group (a
**    given amax is copied there first, so that every rank takes the same
**    collective whether or not it was given one);
**  - MPI (the CPU backend, whose buffer is host memory): in place;
**  - staged (ranks sharing a GPU): the amax is read back before the
**    agreement, whose verdict then covers the amax pass's errors, and
**    reduced on the host. */
nvfp4_status nvfp4_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                             const nvfp4_qopts *opts, nvfp4_tensor **out) {
  nvfp4_qopts o;
  nvfp4_tensor *q = NULL;
  nvfp4_status st;
  float amax[2] = {0.0f, 0.0f};
  int dev, nccl;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) {
    /* the group's other ranks wait in its agreement: they get EPEER */
    if (opts != NULL && opts->amax_group != NULL)
      (void)nvfp4i_comm_agree(opts->amax_group, "quantize", NVFP4_EINVAL);
    return NVFP4_EINVAL;
  }
  o = normalize(opts);
  nccl = o.amax_group != NULL && o.amax_group->transport == NVFP4I_NCCL;
  dev = !o.has_amax && ctx->ops->amax_to != NULL &&
        (o.amax_group == NULL || o.amax_group->transport != NVFP4I_MPI_STAGED);
  /* with amax_group, the group's ranks agree on the checks, the allocation
  ** and the amax pass before the reduction: a rank that fails there keeps
  ** its error and the others get EPEER instead of waiting in the reduction */
  st = out == NULL ? nvfp4i_fail(ctx, NVFP4_EINVAL, "quantize: out is NULL") : NVFP4_OK;
  if (st == NVFP4_OK && (st = nvfp4i_check_tensor(ctx, x, "quantize: x")) == NVFP4_OK &&
      (st = check_qopts(ctx, x, &o)) == NVFP4_OK) {
    if (o.has_amax) { amax[0] = o.amax[0]; amax[1] = o.amax[1]; }
    else if (!dev)
      st = ctx->ops->amax(ctx, x, o.rht, o.rht_no_signs ? 0u : NVFP4_RHT_SIGNS, amax);
    if (st == NVFP4_OK)
      st = nvfp4i_tensor_alloc_fp4_for_cast(ctx, x->shape, o.rowwise, o.columnwise, &q);
    if (st == NVFP4_OK && dev) st = amax_into(ctx, x, &o, o.amax_group != NULL, q);
    else if (st == NVFP4_OK && nccl) st = amax_given_into(ctx, amax, q);
  }
  if (o.amax_group != NULL) {
    /* (a group of another context: its MPI communicator still carries the
    ** verdict; this rank keeps its own EUSAGE message) */
    st = nvfp4i_comm_agree(o.amax_group, "quantize", st);
    if (st == NVFP4_OK) {
      /* every rank counts it (they all passed the agreement); the tag
      ** (nvfp4_comm.serial) lets the NVFP4 gather of q skip comparing
      ** amaxes that are equal by construction, where the reduction runs on
      ** a channel of this comm alone (nvfp4i_comm_own_channel) */
      const uint64_t n = ++o.amax_group->nreduce;
      st = dev || nccl ? nvfp4i_comm_max_f32_buf(o.amax_group, (float *)q->amax_dev.p, 2)
                       : nvfp4i_comm_max_f32(o.amax_group, amax, 2);
      if (nvfp4i_comm_own_channel(o.amax_group)) {
        q->amax_comm = o.amax_group->serial;
        q->amax_seq = n;
      }
    }
  }
  if (st != NVFP4_OK) {
    nvfp4_tensor_destroy(q);
    return st;
  }
  q->amax[0] = amax[0];
  q->amax[1] = amax[1];
  q->rht = o.rht;
  q->rht_no_signs = o.rht_no_signs;
  q->sr = o.sr;
  q->two_d = o.two_d;
  q->four_over_six = o.four_over_six;
  q->fo6_mse = o.four_over_six && o.four_over_six_mse;
  q->nominal = x->dtype;
  q->emax256 = o.four_over_six && !o.four_over_six_emax448;   /* §3.3 */
  if ((st = ctx->ops->quantize(ctx, x, &o, q)) != NVFP4_OK) {
    nvfp4_tensor_destroy(q);
    return st;
  }
  *out = q;
  return NVFP4_OK;
}


/* nvfp4_dequantize (col 0) and nvfp4_dequantize_columnwise (col 1): the
** checks, then the backend's dequantize of q, or of a view of q that reads
** its columnwise copy as the rowwise copy of [K, M] (data [K, M/2], scale
** [ru(K,128), ru(M/16,4)]: the same layout) with the columnwise amax. */
static nvfp4_status dequant (nvfp4_ctx *ctx, const nvfp4_tensor *q, int col, nvfp4_dtype dt,
                             nvfp4_tensor **out) {
  const char *what = col ? "dequantize_columnwise" : "dequantize";
  nvfp4_tensor v, *y;
  char nm[32];
  nvfp4_status st;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  FAIL_IF(ctx, out == NULL, NVFP4_EINVAL, "%s: out is NULL", what);
  snprintf(nm, sizeof nm, "%s: q", what);
  CHECK(nvfp4i_check_tensor(ctx, q, nm));
  FAIL_IF(ctx, q->dtype != NVFP4_FP4, NVFP4_EINVAL,
          "%s: input has dtype %s, not fp4", what, nvfp4_dtype_name(q->dtype));
  FAIL_IF(ctx, !(col ? q->has_col : q->has_row), NVFP4_EUSAGE, "%s: the tensor has no %s copy%s",
          what, col ? "columnwise" : "rowwise",
          col ? "" : " (spec §10 dequantizes the rowwise copy; the columnwise one: "
                     "nvfp4_dequantize_columnwise, in Lua nvfp4.dequantize(q, dtype, 'columnwise'))");
  FAIL_IF(ctx, dt != NVFP4_F32 && dt != NVFP4_BF16, NVFP4_EINVAL,
          "%s: output dtype %s is not fp32 or bf16", what, NVFP4I_DTYPE(dt));
  /* the copy read must have its shapes (a columnwise scale that the `nd`
  ** rule gathered too narrow, odd B, was read past its end) */
  if (col)
    CHECK(nvfp4i_check_fp4_buffers(ctx, what, "columnwise", &q->col_data,
                                   nvfp4_columnwise_data_shape(q->shape), &q->col_scale,
                                   nvfp4_columnwise_scale_shape(q->shape)));
  else
    CHECK(nvfp4i_check_fp4_buffers(ctx, what, "rowwise", &q->row_data,
                                   nvfp4_rowwise_data_shape(q->shape), &q->row_scale,
                                   nvfp4_rowwise_scale_shape(q->shape)));
  v = *q;
  if (col) {
    int64_t d[2];
    CHECK(nvfp4i_amax_values(q, v.amax));
    v.amax[0] = v.amax[1];
    v.amax_pending = 0;
    v.has_row = 1;
    v.has_col = 0;
    v.row_data = q->col_data;
    v.row_scale = q->col_scale;
    d[0] = nvfp4_shape_K(q->shape);
    d[1] = nvfp4_shape_M(q->shape);
    v.shape = nvfp4_shape_make(2, d);
  }
  CHECK(nvfp4i_tensor_alloc_plain_uninit(ctx, v.shape, dt, &y));
  if (nvfp4_shape_numel(v.shape) > 0 &&
      (st = ctx->ops->dequantize(ctx, col ? &v : q, y)) != NVFP4_OK) {
    nvfp4_tensor_destroy(y);
    return st;
  }
  *out = y;
  return NVFP4_OK;
}


nvfp4_status nvfp4_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                               nvfp4_dtype dt, nvfp4_tensor **out) {
  return dequant(ctx, q, 0, dt, out);
}


nvfp4_status nvfp4_dequantize_columnwise (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                          nvfp4_dtype dt, nvfp4_tensor **out) {
  return dequant(ctx, q, 1, dt, out);
}


nvfp4_status nvfp4_swap_first_dims (nvfp4_ctx *ctx, const nvfp4_tensor *in,
                                    nvfp4_tensor **out) {
  nvfp4_tensor *y;
  nvfp4_shape s;
  nvfp4_status st;
  char sb[128];
  size_t inner;
  int i;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  FAIL_IF(ctx, out == NULL, NVFP4_EINVAL, "swap_first_dims: out is NULL");
  CHECK(nvfp4i_check_tensor(ctx, in, "swap_first_dims: in"));
  nvfp4_shape_format(in->shape, sb, sizeof sb);
  FAIL_IF(ctx, in->dtype == NVFP4_FP4, NVFP4_EINVAL,
          "swap_first_dims: input %s is fp4; swap its buffers (u8) instead", sb);
  /* TE checks the pointer before the rank (spec §13) */
  FAIL_IF(ctx, nvfp4_shape_numel(in->shape) == 0 || in->data.p == NULL,
          NVFP4_EINVAL, "Input is not allocated (swap_first_dims: input %s "
          "has no elements)", sb);
  FAIL_IF(ctx, in->shape.ndim < 2, NVFP4_EINVAL,
          "swap_first_dims: input %s has rank %d, needs at least 2", sb,
          in->shape.ndim);
  s = in->shape;
  s.dim[0] = in->shape.dim[1];
  s.dim[1] = in->shape.dim[0];
  inner = nvfp4_dtype_size(in->dtype);
  for (i = 2; i < s.ndim; i++) inner *= (size_t)s.dim[i];
  CHECK(nvfp4i_tensor_alloc_plain_uninit(ctx, s, in->dtype, &y));
  if ((st = ctx->ops->swap_first_dims(ctx, y->data.p, in->data.p, in->shape.dim[0],
                                      in->shape.dim[1], inner)) != NVFP4_OK) {
    nvfp4_tensor_destroy(y);
    return st;
  }
  *out = y;
  return NVFP4_OK;
}
