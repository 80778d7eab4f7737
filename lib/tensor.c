/*
** tensor.c -- tensors own their storage, in the memory of their context's
** backend.  Plain tensors (F32, BF16, U8) hold one buffer; NVFP4 tensors
** hold rowwise and/or columnwise data + scale_inv buffers and two amaxes.
*/
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nvfp4_int.h"


static const char *const dtype_name[] = {"fp32", "bf16", "u8", "fp4"};
static const size_t dtype_size[] = {4, 2, 1, 0};


const char *nvfp4_dtype_name (nvfp4_dtype dt) {
  return ((unsigned)dt <= NVFP4_FP4) ? dtype_name[dt] : "?";
}


const char *nvfp4i_dtype_desc (nvfp4_dtype dt, char buf[24]) {
  if ((unsigned)dt <= NVFP4_FP4) return nvfp4_dtype_name(dt);
  snprintf(buf, 24, "%d (not a dtype)", (int)dt);
  return buf;
}


size_t nvfp4_dtype_size (nvfp4_dtype dt) {
  return ((unsigned)dt <= NVFP4_FP4) ? dtype_size[dt] : 0;
}


static nvfp4_status buf_alloc (nvfp4_ctx *ctx, nvfp4i_buf *b, nvfp4_shape shape,
                               size_t elsize, int zero) {
  nvfp4_status (*alloc) (nvfp4_ctx *, size_t, void **) = ctx->ops->alloc;
  if (!zero && ctx->ops->alloc_uninit != NULL) alloc = ctx->ops->alloc_uninit;
  b->shape = shape;
  b->nbytes = (size_t)nvfp4_shape_numel(shape) * elsize;
  b->p = NULL;
  if (b->nbytes == 0) return NVFP4_OK;
  {
    const nvfp4_status st = nvfp4i_alloc_refused() ? NVFP4_ENOMEM : alloc(ctx, b->nbytes, &b->p);
    if (st != NVFP4_OK) {
      b->p = NULL;
      if (st != NVFP4_ENOMEM) return st;  /* the backend's error (ECUDA: a sticky fault), said there */
      return nvfp4i_fail(ctx, NVFP4_ENOMEM, "cannot allocate %zu bytes on %s",
                         b->nbytes, ctx->ops->name);
    }
  }
  ctx->mem += b->nbytes;
  return NVFP4_OK;
}


/* Zero-filled (the backend alloc contract). */
nvfp4_status nvfp4i_buf_alloc (nvfp4_ctx *ctx, nvfp4i_buf *b, nvfp4_shape shape,
                               size_t elsize) {
  return buf_alloc(ctx, b, shape, elsize, 1);
}


/* Contents unspecified: the caller writes every byte before reading any. */
nvfp4_status nvfp4i_buf_alloc_uninit (nvfp4_ctx *ctx, nvfp4i_buf *b,
                                      nvfp4_shape shape, size_t elsize) {
  return buf_alloc(ctx, b, shape, elsize, 0);
}


void nvfp4i_buf_free (nvfp4_ctx *ctx, nvfp4i_buf *b) {
  if (b->p != NULL) {
    ctx->ops->free(ctx, b->p);
    ctx->mem -= b->nbytes;
  }
  memset(b, 0, sizeof *b);
}


nvfp4_tensor *nvfp4i_tensor_new (nvfp4_ctx *ctx) {
  nvfp4_tensor *t = (nvfp4_tensor *)nvfp4i_calloc(1, sizeof *t);
  if (t != NULL) {
    t->ctx = ctx;
    nvfp4i_ctx_hold(ctx);
  }
  return t;
}


static nvfp4_status check_shape (nvfp4_ctx *ctx, nvfp4_shape s, const char *what) {
  char sb[128];
  int i;
  FAIL_IF(ctx, s.ndim < 0 || s.ndim > NVFP4_MAX_DIMS, NVFP4_EINVAL,
          "%s: ndim %d is outside 0..%d", what, s.ndim, NVFP4_MAX_DIMS);
  for (i = 0; i < s.ndim; i++)
    FAIL_IF(ctx, s.dim[i] < 0, NVFP4_EINVAL, "%s: shape %s: dim %d is negative",
            what, nvfp4_shape_format(s, sb, sizeof sb), i);
  FAIL_IF(ctx, nvfp4_shape_numel(s) > NVFP4_MAX_NUMEL, NVFP4_EINVAL,
          "%s: shape %s has more than 2^60 elements", what,
          nvfp4_shape_format(s, sb, sizeof sb));
  return NVFP4_OK;
}


nvfp4_status nvfp4i_check_tensor (nvfp4_ctx *ctx, const nvfp4_tensor *t,
                                  const char *what) {
  FAIL_IF(ctx, t == NULL, NVFP4_EINVAL, "%s: tensor is NULL", what);
  FAIL_IF(ctx, t->ctx != ctx, NVFP4_EUSAGE,
          "%s: tensor belongs to another context (%s backend)", what,
          t->ctx->ops->name);
  return NVFP4_OK;
}


nvfp4_status nvfp4i_gathered_shape (nvfp4_ctx *ctx, const char *what, nvfp4_shape x, int n,
                                    nvfp4_shape *g) {
  char sb[128];
  FAIL_IF(ctx, n > 0 && x.dim[0] > INT64_MAX / n, NVFP4_EINVAL,
          "%s: x %s: the gathered first dim (%lld x %d ranks) is past 2^63 - 1", what,
          nvfp4_shape_format(x, sb, sizeof sb), (long long)x.dim[0], n);
  *g = x;
  g->dim[0] *= n;
  return NVFP4_OK;
}


/* A plain tensor's shape and dtype, before anything is allocated; what:
** the call, the messages' prefix. */
nvfp4_status nvfp4i_check_plain (nvfp4_ctx *ctx, const char *what, nvfp4_shape shape,
                                 nvfp4_dtype dt) {
  CHECK(check_shape(ctx, shape, what));
  FAIL_IF(ctx, dt != NVFP4_F32 && dt != NVFP4_BF16 && dt != NVFP4_U8,
          NVFP4_EINVAL, "%s: dtype %s is not fp32, bf16 or u8%s", what, NVFP4I_DTYPE(dt),
          dt == NVFP4_FP4 ? " (an fp4 tensor comes from nvfp4_quantize or "
                            "nvfp4_tensor_fp4_from_host)" : "");
  return NVFP4_OK;
}


static nvfp4_status alloc_plain (nvfp4_ctx *ctx, const char *what, nvfp4_shape shape,
                                 nvfp4_dtype dt, int zero, nvfp4_tensor **out) {
  nvfp4_tensor *t;
  nvfp4_status st;
  *out = NULL;
  CHECK(nvfp4i_check_plain(ctx, what, shape, dt));
  t = nvfp4i_tensor_new(ctx);
  FAIL_IF(ctx, t == NULL, NVFP4_ENOMEM, "cannot allocate a tensor");
  t->dtype = dt;
  t->shape = shape;
  if ((st = buf_alloc(ctx, &t->data, shape, nvfp4_dtype_size(dt), zero)) != NVFP4_OK) {
    nvfp4_tensor_destroy(t);
    return st;
  }
  *out = t;
  return NVFP4_OK;
}


nvfp4_status nvfp4i_tensor_alloc_plain (nvfp4_ctx *ctx, nvfp4_shape shape,
                                        nvfp4_dtype dt, nvfp4_tensor **out) {
  return alloc_plain(ctx, "tensor", shape, dt, 1, out);
}


nvfp4_status nvfp4i_tensor_alloc_plain_uninit (nvfp4_ctx *ctx, nvfp4_shape shape,
                                               nvfp4_dtype dt, nvfp4_tensor **out) {
  return alloc_plain(ctx, "tensor", shape, dt, 0, out);
}


/* A scale buffer of shape s whose blocks' scales fill [rows, cols]: zeroed,
** unless zero is 0 (a cast's output) and s has no padding beyond them (M a
** multiple of 128 and K/16 of 4 rowwise, K of 128 and M/16 of 4
** columnwise), every byte of it then being written by the cast. */
static nvfp4_status scale_alloc (nvfp4_ctx *ctx, nvfp4i_buf *b, nvfp4_shape s,
                                 int64_t rows, int64_t cols, int zero) {
  const int padded = s.ndim != 2 || s.dim[0] != rows || s.dim[1] != cols;
  return (zero || padded ? nvfp4i_buf_alloc : nvfp4i_buf_alloc_uninit)(ctx, b, s, 1);
}


/* zero_data = 0 (a cast's outputs): the data buffers and scale buffers
** without padding are left unset, the cast writes every byte of them; scale
** padding is zeroed (spec §6). */
static nvfp4_status alloc_fp4 (nvfp4_ctx *ctx, nvfp4_shape shape, int row, int col,
                               int zero_data, nvfp4_tensor **out) {
  nvfp4_status (*data_alloc) (nvfp4_ctx *, nvfp4i_buf *, nvfp4_shape, size_t) =
    zero_data ? nvfp4i_buf_alloc : nvfp4i_buf_alloc_uninit;
  const int64_t M = nvfp4_shape_M(shape), K = nvfp4_shape_K(shape);
  nvfp4_tensor *t;
  nvfp4_status st = NVFP4_OK;
  *out = NULL;
  t = nvfp4i_tensor_new(ctx);
  FAIL_IF(ctx, t == NULL, NVFP4_ENOMEM, "cannot allocate a tensor");
  t->dtype = NVFP4_FP4;
  t->nominal = NVFP4_F32;            /* a quantize sets its source's */
  t->shape = shape;
  t->has_row = row != 0;
  t->has_col = col != 0;
  if (row) {
    CHECK_GOTO(data_alloc(ctx, &t->row_data, nvfp4_rowwise_data_shape(shape), 1), st, fail);
    CHECK_GOTO(scale_alloc(ctx, &t->row_scale, nvfp4_rowwise_scale_shape(shape), M,
                           K / NVFP4_BLOCK, zero_data), st, fail);
  }
  if (col) {
    CHECK_GOTO(data_alloc(ctx, &t->col_data, nvfp4_columnwise_data_shape(shape), 1), st, fail);
    CHECK_GOTO(scale_alloc(ctx, &t->col_scale, nvfp4_columnwise_scale_shape(shape), K,
                           M / NVFP4_BLOCK, zero_data), st, fail);
  }
  *out = t;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(t);
  return st;
}


nvfp4_status nvfp4i_tensor_alloc_fp4 (nvfp4_ctx *ctx, nvfp4_shape shape,
                                      int row, int col, nvfp4_tensor **out) {
  return alloc_fp4(ctx, shape, row, col, 1, out);
}


nvfp4_status nvfp4i_tensor_alloc_fp4_for_cast (nvfp4_ctx *ctx, nvfp4_shape shape,
                                               int row, int col, nvfp4_tensor **out) {
  return alloc_fp4(ctx, shape, row, col, 0, out);
}


nvfp4_status nvfp4_tensor_create (nvfp4_ctx *ctx, nvfp4_shape shape,
                                  nvfp4_dtype dt, nvfp4_tensor **out) {
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  CHECK_ARG(ctx, out, "tensor_create");
  return alloc_plain(ctx, "tensor_create", shape, dt, 1, out);
}


nvfp4_status nvfp4_tensor_from_host (nvfp4_ctx *ctx, nvfp4_shape shape,
                                     nvfp4_dtype dt, const void *host,
                                     size_t nbytes, nvfp4_tensor **out) {
  nvfp4_tensor *t;
  nvfp4_status st;
  size_t need;
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  CHECK_ARG(ctx, out, "tensor_from_host");
  /* the byte count before any allocation */
  CHECK(nvfp4i_check_plain(ctx, "tensor_from_host", shape, dt));
  need = (size_t)nvfp4_shape_numel(shape) * nvfp4_dtype_size(dt);
  FAIL_IF(ctx, nbytes > 0 && host == NULL, NVFP4_EINVAL,
          "tensor_from_host: host is NULL (%zu bytes to copy)", nbytes);
  FAIL_IF(ctx, nbytes != need, NVFP4_EINVAL, "tensor_from_host: %zu bytes given, "
          "shape needs %zu", nbytes, need);
  CHECK(alloc_plain(ctx, "tensor_from_host", shape, dt, 0, &t));   /* every byte is copied below */
  if (nbytes > 0 && (st = ctx->ops->from_host(ctx, t->data.p, host, nbytes)) != NVFP4_OK) {
    nvfp4_tensor_destroy(t);
    return st;
  }
  *out = t;
  return NVFP4_OK;
}


nvfp4_status nvfp4_tensor_to_host (const nvfp4_tensor *t, void *host,
                                   size_t nbytes) {
  if (t == NULL) return NVFP4_EINVAL;
  FAIL_IF(t->ctx, t->dtype == NVFP4_FP4, NVFP4_EINVAL,
          "tensor_to_host: an fp4 tensor has no plain elements (read a buffer "
          "or dequantize)");
  FAIL_IF(t->ctx, nbytes != t->data.nbytes, NVFP4_EINVAL,
          "tensor_to_host: %zu bytes asked, tensor holds %zu", nbytes, t->data.nbytes);
  FAIL_IF(t->ctx, nbytes > 0 && host == NULL, NVFP4_EINVAL,
          "tensor_to_host: host is NULL (%zu bytes to copy)", nbytes);
  if (nbytes == 0) return NVFP4_OK;
  return t->ctx->ops->to_host(t->ctx, host, t->data.p, nbytes);
}


static nvfp4_status copy_buf (nvfp4_ctx *ctx, nvfp4i_buf *dst, const nvfp4i_buf *src) {
  int64_t n = nvfp4_shape_numel(src->shape);     /* plain data: 2 or 4 bytes each */
  CHECK(nvfp4i_buf_alloc(ctx, dst, src->shape, n > 0 ? src->nbytes / (size_t)n : 1));
  dst->shape = src->shape;
  if (src->nbytes == 0) return NVFP4_OK;
  return ctx->ops->copy2d(ctx, dst->p, src->nbytes, src->p, src->nbytes, 1, src->nbytes);
}


nvfp4_status nvfp4_tensor_clone (const nvfp4_tensor *t, nvfp4_tensor **out) {
  nvfp4_ctx *ctx;
  nvfp4_tensor *c;
  nvfp4_status st = NVFP4_OK;
  NVFP4I_CLEAR(out);
  if (t == NULL) return NVFP4_EINVAL;
  CHECK_ARG(t->ctx, out, "tensor_clone");
  ctx = t->ctx;
  c = nvfp4i_tensor_new(ctx);
  FAIL_IF(ctx, c == NULL, NVFP4_ENOMEM, "cannot allocate a tensor");
  *c = *t;
  memset(&c->data, 0, sizeof c->data);
  memset(&c->row_data, 0, sizeof c->row_data);
  memset(&c->row_scale, 0, sizeof c->row_scale);
  memset(&c->col_data, 0, sizeof c->col_data);
  memset(&c->col_scale, 0, sizeof c->col_scale);
  memset(&c->amax_dev, 0, sizeof c->amax_dev);
  CHECK_GOTO(nvfp4i_amax_copy(c, t), st, fail);   /* one still in backend memory: copied there */
  if (t->dtype != NVFP4_FP4) {
    CHECK_GOTO(copy_buf(ctx, &c->data, &t->data), st, fail);
    c->data.nbytes = t->data.nbytes;
  }
  if (t->has_row) {
    CHECK_GOTO(copy_buf(ctx, &c->row_data, &t->row_data), st, fail);
    CHECK_GOTO(copy_buf(ctx, &c->row_scale, &t->row_scale), st, fail);
  }
  if (t->has_col) {
    CHECK_GOTO(copy_buf(ctx, &c->col_data, &t->col_data), st, fail);
    CHECK_GOTO(copy_buf(ctx, &c->col_scale, &t->col_scale), st, fail);
  }
  *out = c;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(c);
  return st;
}


nvfp4_status nvfp4_tensor_convert (const nvfp4_tensor *t, nvfp4_dtype dt, nvfp4_tensor **out) {
  nvfp4_ctx *ctx;
  nvfp4_tensor *c;
  nvfp4_status st;
  size_t n;
  NVFP4I_CLEAR(out);
  if (t == NULL) return NVFP4_EINVAL;
  CHECK_ARG(t->ctx, out, "tensor_convert");
  ctx = t->ctx;
  FAIL_IF(ctx, t->dtype != NVFP4_F32 && t->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "tensor_convert: the tensor is %s; only fp32 and bf16 tensors convert%s",
          nvfp4_dtype_name(t->dtype), t->dtype == NVFP4_FP4 ? " (an fp4 one dequantizes)" : "");
  FAIL_IF(ctx, dt != NVFP4_F32 && dt != NVFP4_BF16, NVFP4_EINVAL,
          "tensor_convert: target dtype %s is not fp32 or bf16", NVFP4I_DTYPE(dt));
  CHECK(nvfp4i_tensor_alloc_plain(ctx, t->shape, dt, &c));
  n = (size_t)nvfp4_shape_numel(t->shape);
  if (n > 0 && (st = ctx->ops->convert(ctx, c->data.p, dt, t->data.p, t->dtype, n)) != NVFP4_OK) {
    nvfp4_tensor_destroy(c);
    return st;
  }
  *out = c;
  return NVFP4_OK;
}


nvfp4_status nvfp4_tensor_reshape (const nvfp4_tensor *t, nvfp4_shape shape,
                                   nvfp4_tensor **out) {
  nvfp4_tensor *c;
  char a[128], b[128];
  NVFP4I_CLEAR(out);
  if (t == NULL) return NVFP4_EINVAL;
  CHECK_ARG(t->ctx, out, "tensor_reshape");
  CHECK(check_shape(t->ctx, shape, "tensor_reshape"));
  /* FP4: M too, which equal numel and K imply unless K = 0 (the copies'
  ** 2-D shapes and padded scales follow M) */
  FAIL_IF(t->ctx, nvfp4_shape_numel(shape) != nvfp4_shape_numel(t->shape) ||
          (t->dtype == NVFP4_FP4 && (nvfp4_shape_K(shape) != nvfp4_shape_K(t->shape) ||
                                     nvfp4_shape_M(shape) != nvfp4_shape_M(t->shape))),
          NVFP4_EINVAL, "tensor_reshape: %s cannot become %s (%s)",
          nvfp4_shape_format(t->shape, a, sizeof a),
          nvfp4_shape_format(shape, b, sizeof b),
          t->dtype == NVFP4_FP4 ? "fp4 keeps the last dim K and the product M of the others"
                                : "numel differs");
  CHECK(nvfp4_tensor_clone(t, &c));
  c->shape = shape;
  if (c->dtype != NVFP4_FP4) c->data.shape = shape;
  if (c->has_row) c->row_data.shape = nvfp4_rowwise_data_shape(shape);
  *out = c;
  return NVFP4_OK;
}


void nvfp4_tensor_destroy (nvfp4_tensor *t) {
  if (t == NULL) return;
  nvfp4i_buf_free(t->ctx, &t->data);
  nvfp4i_buf_free(t->ctx, &t->row_data);
  nvfp4i_buf_free(t->ctx, &t->row_scale);
  nvfp4i_buf_free(t->ctx, &t->col_data);
  nvfp4i_buf_free(t->ctx, &t->col_scale);
  nvfp4i_buf_free(t->ctx, &t->amax_dev);
  nvfp4i_ctx_release(t->ctx);         /* last: it may free a destroyed ctx */
  free(t);
}


nvfp4_shape nvfp4_tensor_shape (const nvfp4_tensor *t) {
  nvfp4_shape s;
  if (t != NULL) return t->shape;
  memset(&s, 0, sizeof s);
  return s;
}


nvfp4_dtype nvfp4_tensor_dtype (const nvfp4_tensor *t) {
  return t ? t->dtype : NVFP4_F32;
}


nvfp4_dtype nvfp4_tensor_nominal_dtype (const nvfp4_tensor *t) {
  return t == NULL ? NVFP4_F32 : t->dtype == NVFP4_FP4 ? t->nominal : t->dtype;
}


nvfp4_ctx *nvfp4_tensor_ctx (const nvfp4_tensor *t) {
  return t ? t->ctx : NULL;
}


int nvfp4_tensor_has_rowwise (const nvfp4_tensor *t) {
  return t != NULL && t->dtype == NVFP4_FP4 && t->has_row;
}


int nvfp4_tensor_has_columnwise (const nvfp4_tensor *t) {
  return t != NULL && t->dtype == NVFP4_FP4 && t->has_col;
}


static const nvfp4i_buf *pick_buf (const nvfp4_tensor *t, nvfp4_buffer b) {
  if (t == NULL || t->dtype != NVFP4_FP4) return NULL;
  switch (b) {
    case NVFP4_ROWWISE_DATA: return t->has_row ? &t->row_data : NULL;
    case NVFP4_ROWWISE_SCALE: return t->has_row ? &t->row_scale : NULL;
    case NVFP4_COLUMNWISE_DATA: return t->has_col ? &t->col_data : NULL;
    case NVFP4_COLUMNWISE_SCALE: return t->has_col ? &t->col_scale : NULL;
  }
  return NULL;
}


nvfp4_shape nvfp4_tensor_buffer_shape (const nvfp4_tensor *t, nvfp4_buffer b) {
  const nvfp4i_buf *p = pick_buf(t, b);
  nvfp4_shape s;
  if (p != NULL) return p->shape;
  memset(&s, 0, sizeof s);
  return s;
}


static const char *const buffer_name[] = {
  "rowwise data", "rowwise scale_inv", "columnwise data", "columnwise scale_inv"
};


nvfp4_status nvfp4_tensor_buffer_read (const nvfp4_tensor *t, nvfp4_buffer b,
                                       void *host, size_t nbytes) {
  const nvfp4i_buf *p;
  if (t == NULL) return NVFP4_EINVAL;
  FAIL_IF(t->ctx, (unsigned)b > NVFP4_COLUMNWISE_SCALE, NVFP4_EINVAL,
          "buffer_read: unknown buffer %d", (int)b);
  p = pick_buf(t, b);
  FAIL_IF(t->ctx, p == NULL, NVFP4_EUSAGE, "buffer_read: the tensor has no %s "
          "(%s tensor%s)", buffer_name[b], nvfp4_dtype_name(t->dtype),
          t->dtype == NVFP4_FP4 ? ", usage absent" : "");
  FAIL_IF(t->ctx, nbytes != p->nbytes, NVFP4_EINVAL,
          "buffer_read: %zu bytes asked, %s holds %zu", nbytes, buffer_name[b], p->nbytes);
  FAIL_IF(t->ctx, nbytes > 0 && host == NULL, NVFP4_EINVAL,
          "buffer_read: host is NULL (%zu bytes of %s to copy)", nbytes, buffer_name[b]);
  if (nbytes == 0) return NVFP4_OK;
  return t->ctx->ops->to_host(t->ctx, host, p->p, nbytes);
}


nvfp4_status nvfp4_tensor_amax (const nvfp4_tensor *t, int columnwise,
                                float *amax) {
  if (t == NULL) return NVFP4_EINVAL;
  CHECK_ARG(t->ctx, amax, "amax");
  FAIL_IF(t->ctx, columnwise != 0 && columnwise != 1, NVFP4_EINVAL,
          "amax: direction %d is not 0 (rowwise) or 1 (columnwise)", columnwise);
  FAIL_IF(t->ctx, t->dtype != NVFP4_FP4, NVFP4_EUSAGE,
          "amax: a tensor of dtype %s has no amax (fp4 only)", nvfp4_dtype_name(t->dtype));
  FAIL_IF(t->ctx, columnwise ? !t->has_col : !t->has_row, NVFP4_EUSAGE,
          "amax: the tensor has no %s copy", columnwise ? "columnwise" : "rowwise");
  CHECK(nvfp4i_amax_ready(t));
  *amax = t->amax[columnwise ? 1 : 0];
  return NVFP4_OK;
}


nvfp4_status nvfp4i_amax_values (const nvfp4_tensor *t, float amax[2]) {
  float a[2];
  if (!t->amax_pending) {
    amax[0] = t->amax[0];
    amax[1] = t->amax[1];
    return NVFP4_OK;
  }
  CHECK(t->ctx->ops->to_host(t->ctx, a, t->amax_dev.p, sizeof a));
  amax[0] = a[0];
  amax[1] = a[t->amax_dcol];
  return NVFP4_OK;
}


nvfp4_status nvfp4i_amax_copy (nvfp4_tensor *dst, const nvfp4_tensor *src) {
  dst->amax[0] = src->amax[0];
  dst->amax[1] = src->amax[1];
  dst->amax_comm = src->amax_comm;
  dst->amax_seq = src->amax_seq;
  if (!src->amax_pending) return NVFP4_OK;
  CHECK(copy_buf(dst->ctx, &dst->amax_dev, &src->amax_dev));
  dst->amax_dcol = src->amax_dcol;
  dst->amax_pending = 1;
  return NVFP4_OK;
}


nvfp4_status nvfp4i_amax_ready (const nvfp4_tensor *t) {
  nvfp4_tensor *m = (nvfp4_tensor *)t;      /* the host copy is a cache */
  if (!t->amax_pending) return NVFP4_OK;
  CHECK(nvfp4i_amax_values(t, m->amax));
  m->amax_pending = 0;
  return NVFP4_OK;
}


static nvfp4_status fill_buf (nvfp4_ctx *ctx, nvfp4i_buf *b, const uint8_t *src) {
  if (b->nbytes == 0) return NVFP4_OK;
  return ctx->ops->from_host(ctx, b->p, src, b->nbytes);
}


nvfp4_status nvfp4_tensor_fp4_from_host (nvfp4_ctx *ctx, nvfp4_shape shape,
                                         const uint8_t *row_data,
                                         const uint8_t *row_scale,
                                         const uint8_t *col_data,
                                         const uint8_t *col_scale,
                                         const float amax[2],
                                         nvfp4_tensor **out) {
  nvfp4_tensor *t;
  nvfp4_status st;
  int row, col;
  char msg[256];
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  CHECK_ARG(ctx, out, "tensor_fp4_from_host");
  row = row_data != NULL || row_scale != NULL;
  col = col_data != NULL || col_scale != NULL;
  FAIL_IF(ctx, !row && !col, NVFP4_EINVAL,
          "tensor_fp4_from_host: no buffer given (need rowwise and/or columnwise)");
  FAIL_IF(ctx, row && (row_data == NULL || row_scale == NULL), NVFP4_EINVAL,
          "tensor_fp4_from_host: rowwise usage: %s is NULL but %s is given (a usage needs "
          "both its data and its scale_inv)", row_data == NULL ? "row_data" : "row_scale",
          row_data == NULL ? "row_scale" : "row_data");
  FAIL_IF(ctx, col && (col_data == NULL || col_scale == NULL), NVFP4_EINVAL,
          "tensor_fp4_from_host: columnwise usage: %s is NULL but %s is given (a usage needs "
          "both its data and its scale_inv)", col_data == NULL ? "col_data" : "col_scale",
          col_data == NULL ? "col_scale" : "col_data");
  if (nvfp4_shape_check_quantizable(shape, row, col, msg, sizeof msg) != NVFP4_OK)
    return nvfp4i_fail(ctx, NVFP4_EINVAL, "tensor_fp4_from_host: %s", msg);
  /* the global scale divides by it: as quantize's given amax */
  FAIL_IF(ctx, amax != NULL && (!(amax[0] >= 0.0f) || !(amax[1] >= 0.0f)), NVFP4_EINVAL,
          "tensor_fp4_from_host: %s amax %g must be >= 0 and not NaN", !(amax[0] >= 0.0f) ?
          "rowwise" : "columnwise",
          isnan(!(amax[0] >= 0.0f) ? amax[0] : amax[1]) ? (double)NAN     /* "nan", never "-nan" */
                                                         : (double)(!(amax[0] >= 0.0f) ? amax[0] : amax[1]));
  CHECK(nvfp4i_tensor_alloc_fp4(ctx, shape, row, col, &t));
  if (amax != NULL) { t->amax[0] = amax[0]; t->amax[1] = amax[1]; }
  if (row) {
    CHECK_GOTO(fill_buf(ctx, &t->row_data, row_data), st, fail);
    CHECK_GOTO(fill_buf(ctx, &t->row_scale, row_scale), st, fail);
  }
  if (col) {
    CHECK_GOTO(fill_buf(ctx, &t->col_data, col_data), st, fail);
    CHECK_GOTO(fill_buf(ctx, &t->col_scale, col_scale), st, fail);
  }
  *out = t;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(t);
  return st;
}


nvfp4_status nvfp4_tensor_narrow (const nvfp4_tensor *t, int dim, int64_t start,
                                  int64_t length, nvfp4_tensor **out) {
  nvfp4_ctx *ctx;
  nvfp4_shape s;
  nvfp4_tensor *c;
  size_t outer = 1, inner;
  nvfp4_status st;
  char sb[128];
  int i;
  NVFP4I_CLEAR(out);
  if (t == NULL) return NVFP4_EINVAL;
  ctx = t->ctx;
  CHECK_ARG(ctx, out, "tensor_narrow");
  s = t->shape;
  FAIL_IF(ctx, t->dtype == NVFP4_FP4, NVFP4_EINVAL, "tensor_narrow: the tensor is fp4; "
          "narrow a plain tensor (before quantizing)");
  FAIL_IF(ctx, s.ndim == 0, NVFP4_EINVAL, "tensor_narrow: a 0-d tensor has no dim to narrow");
  FAIL_IF(ctx, dim < 0 || dim >= s.ndim, NVFP4_EINVAL, "tensor_narrow: dim %d is outside "
          "0..%d (shape %s)", dim, s.ndim - 1, nvfp4_shape_format(s, sb, sizeof sb));
  FAIL_IF(ctx, start < 0 || start > s.dim[dim], NVFP4_EINVAL, "tensor_narrow: start %lld "
          "is outside 0..%lld (dim %d has size %lld)", (long long)start,
          (long long)s.dim[dim], dim, (long long)s.dim[dim]);
  FAIL_IF(ctx, length < 0, NVFP4_EINVAL, "tensor_narrow: length %lld is negative",
          (long long)length);
  FAIL_IF(ctx, length > s.dim[dim] - start, NVFP4_EINVAL, "tensor_narrow: "
          "start %lld + length %lld runs past dim %d of size %lld", (long long)start,
          (long long)length, dim, (long long)s.dim[dim]);
  inner = nvfp4_dtype_size(t->dtype);
  for (i = 0; i < dim; i++) outer *= (size_t)s.dim[i];
  for (i = dim + 1; i < s.ndim; i++) inner *= (size_t)s.dim[i];
  s.dim[dim] = length;
  CHECK(nvfp4i_tensor_alloc_plain(ctx, s, t->dtype, &c));
  if (c->data.nbytes > 0 &&
      (st = ctx->ops->copy2d(ctx, c->data.p, (size_t)length * inner,
                             (const char *)t->data.p + (size_t)start * inner,
                             (size_t)t->shape.dim[dim] * inner, outer,
                             (size_t)length * inner)) != NVFP4_OK) {
    nvfp4_tensor_destroy(c);
    return st;
  }
  *out = c;
  return NVFP4_OK;
}


/* ---- nvfp4_tensor_equal ---- */

typedef struct eqv { int *equal; char *why; size_t len; } eqv;

/* A difference: *equal = 0 and the reason in why (cut to len). */
static nvfp4_status differ (eqv *e, const char *fmt, ...)
#ifdef __GNUC__
  __attribute__((format(printf, 2, 3)))
#endif
  ;
static nvfp4_status differ (eqv *e, const char *fmt, ...) {
  va_list ap;
  *e->equal = 0;
  if (e->why != NULL && e->len > 0) {
    va_start(ap, fmt);
    vsnprintf(e->why, e->len, fmt, ap);
    va_end(ap);
  }
  return NVFP4_OK;
}


/* Compare buffer b of a and b2 (-1: the plain elements) byte for byte;
** *same = 0 after a difference was reported. */
static nvfp4_status cmp_buf (const nvfp4_tensor *a, const nvfp4_tensor *b, int buf,
                             const char *what, eqv *e, int *same) {
  const nvfp4i_buf *pa = buf < 0 ? &a->data : pick_buf(a, (nvfp4_buffer)buf);
  const nvfp4i_buf *pb = buf < 0 ? &b->data : pick_buf(b, (nvfp4_buffer)buf);
  size_t n = pa->nbytes, i;
  unsigned char *ha, *hb;
  nvfp4_status st;
  char sa[200], sb[200];
  *same = 0;
  if (!nvfp4_shape_equal(pa->shape, pb->shape) || pa->nbytes != pb->nbytes)
    return differ(e, "%s: shapes differ: %s vs %s", what,
                  nvfp4_shape_format(pa->shape, sa, sizeof sa),
                  nvfp4_shape_format(pb->shape, sb, sizeof sb));
  *same = 1;
  if (n == 0) return NVFP4_OK;
  ha = (unsigned char *)nvfp4i_malloc(n);
  hb = (unsigned char *)nvfp4i_malloc(n);
  if (ha == NULL || hb == NULL) {
    free(ha); free(hb);
    return nvfp4i_fail(a->ctx, NVFP4_ENOMEM, "tensor_equal: cannot allocate 2 x %zu bytes "
                       "of host memory", n);
  }
  if ((st = a->ctx->ops->to_host(a->ctx, ha, pa->p, n)) == NVFP4_OK &&
      (st = b->ctx->ops->to_host(b->ctx, hb, pb->p, n)) == NVFP4_OK) {
    for (i = 0; i < n && ha[i] == hb[i]; i++) ;
    if (i < n) {
      *same = 0;
      differ(e, "%s: first difference at byte %zu (0-based) of %zu: 0x%02x vs 0x%02x",
             what, i, n, ha[i], hb[i]);
    }
  }
  free(ha);
  free(hb);
  return st;
}


static nvfp4_status equal_fp4 (const nvfp4_tensor *a, const nvfp4_tensor *b, eqv *e);


nvfp4_status nvfp4_tensor_equal (const nvfp4_tensor *a, const nvfp4_tensor *b,
                                 int *equal, char *why, size_t why_len) {
  eqv e;
  char sa[200], sb[200];
  int same;
  nvfp4_status st;
  if (equal != NULL) *equal = 0;          /* what a failure leaves: 0 and "" */
  if (why != NULL && why_len > 0) why[0] = '\0';
  if (a == NULL) return NVFP4_EINVAL;
  CHECK_ARG(a->ctx, b, "tensor_equal");
  CHECK_ARG(a->ctx, equal, "tensor_equal");
  CHECK(nvfp4i_check_tensor(a->ctx, b, "tensor_equal: b"));
  e.equal = equal; e.why = why; e.len = why_len;
  *equal = 1;
  if (a->dtype != b->dtype || !nvfp4_shape_equal(a->shape, b->shape))
    return differ(&e, "tensors differ: %s %s vs %s %s", nvfp4_dtype_name(a->dtype),
                  nvfp4_shape_format(a->shape, sa, sizeof sa), nvfp4_dtype_name(b->dtype),
                  nvfp4_shape_format(b->shape, sb, sizeof sb));
  st = a->dtype != NVFP4_FP4 ? cmp_buf(a, b, -1, "elements", &e, &same) : equal_fp4(a, b, &e);
  if (st != NVFP4_OK) {                   /* a failure leaves 0 and "" */
    *equal = 0;
    if (why != NULL && why_len > 0) why[0] = '\0';
  }
  return st;
}


/* What an NVFP4 tensor's bytes mean beyond the bytes: the E4M3 maximum its
** scales decode with (dequantize, the GEMM's alpha) and whether its
** columnwise copy is rotated (RHT, with or without the signs).  How it was
** rounded (SR), its block shape (2D) and 4over6's choice of scales are in
** the bytes already. */
static void meaning (const nvfp4_tensor *t, char *buf, size_t n) {
  int rht = t->rht && t->has_col;       /* a rowwise-only copy is never rotated */
  snprintf(buf, n, "%s, E4M3 maximum %d",
           rht ? (t->rht_no_signs ? "RHT without signs" : "RHT") : "no RHT",
           t->emax256 ? 256 : 448);
}


static nvfp4_status equal_fp4 (const nvfp4_tensor *a, const nvfp4_tensor *b, eqv *e) {
  static const char *const bufname[] = {
    "rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"
  };
  char ma[64], mb[64];
  int dir, k, same;
  meaning(a, ma, sizeof ma);
  meaning(b, mb, sizeof mb);
  if (strcmp(ma, mb) != 0) return differ(e, "decoded differently: %s vs %s", ma, mb);
  for (dir = 0; dir < 2; dir++) {
    int ha = dir ? a->has_col : a->has_row, hb = dir ? b->has_col : b->has_row;
    const char *dn = dir ? "columnwise" : "rowwise";
    if (ha != hb)
      return differ(e, "%s usage: %s vs %s", dn, ha ? "present" : "absent",
                    hb ? "present" : "absent");
    if (!ha) continue;
    for (k = 2 * dir; k < 2 * dir + 2; k++) {
      CHECK(cmp_buf(a, b, k, bufname[k], e, &same));
      if (!same) return NVFP4_OK;
    }
    CHECK(nvfp4i_amax_ready(a));
    CHECK(nvfp4i_amax_ready(b));
    if (memcmp(&a->amax[dir], &b->amax[dir], sizeof(float)) != 0)
      return differ(e, "%s amax: %f vs %f", dn, (double)a->amax[dir], (double)b->amax[dir]);
  }
  return NVFP4_OK;
}
