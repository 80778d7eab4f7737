/*
** shape.c -- every shape rule of the library, in one place (design.md §3).
** Rowwise and columnwise buffer shapes (spec/nvfp4-numerics.md §6), the
** quantizability rule, and the all-gather's columnwise bookkeeping as a
** named rule (spec/sp-linear-and-gather.md §5.1, §7.2).
*/
#include <stdio.h>
#include <string.h>
#include "nvfp4_int.h"


/* Saturating at INT64_MAX: shapes come from users, and a huge one must not
** overflow (undefined behaviour); the checks reject it with a message. */
static int64_t roundup (int64_t x, int64_t m) {
  return x > INT64_MAX - (m - 1) ? INT64_MAX : (x + m - 1) / m * m;
}


static int64_t mul_sat (int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}


/* A caller's struct may hold any ndim: the functions read at most
** NVFP4_MAX_DIMS dims (negative counts as 0), never past dim[]. */
static int rank (nvfp4_shape s) {
  return s.ndim < 0 ? 0 : s.ndim > NVFP4_MAX_DIMS ? NVFP4_MAX_DIMS : s.ndim;
}


static nvfp4_shape clamped (nvfp4_shape s) {
  s.ndim = rank(s);
  return s;
}


static nvfp4_shape shape2 (int64_t a, int64_t b) {
  nvfp4_shape s;
  memset(&s, 0, sizeof s);
  s.ndim = 2;
  s.dim[0] = a;
  s.dim[1] = b;
  return s;
}


nvfp4_shape nvfp4_shape_make (int ndim, const int64_t *dims) {
  nvfp4_shape s;
  int i;
  memset(&s, 0, sizeof s);
  if (ndim < 0) ndim = 0;
  if (ndim > NVFP4_MAX_DIMS) ndim = NVFP4_MAX_DIMS;
  if (dims == NULL) ndim = 0;
  s.ndim = ndim;
  for (i = 0; i < ndim; i++) s.dim[i] = dims[i];
  return s;
}


int nvfp4_shape_equal (nvfp4_shape a, nvfp4_shape b) {
  int i;
  if (a.ndim != b.ndim) return 0;
  for (i = 0; i < rank(a); i++)
    if (a.dim[i] != b.dim[i]) return 0;
  return 1;
}


int64_t nvfp4_shape_numel (nvfp4_shape s) {
  int64_t n = 1;
  int i;
  for (i = 0; i < rank(s); i++) n = mul_sat(n, s.dim[i]);
  return n;
}


/* M: product of the leading dims (1 for a 1-D shape: one row). */
int64_t nvfp4_shape_M (nvfp4_shape s) {
  int64_t m = 1;
  int i;
  for (i = 0; i < rank(s) - 1; i++) m = mul_sat(m, s.dim[i]);
  return m;
}


int64_t nvfp4_shape_K (nvfp4_shape s) {
  return rank(s) > 0 ? s.dim[rank(s) - 1] : 1;
}


char *nvfp4_shape_format (nvfp4_shape s, char *buf, size_t n) {
  size_t used = 0;
  int i;
  if (buf == NULL || n == 0) return buf;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, n, "[");
  for (i = 0; i < rank(s) && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "",
                             (long long)s.dim[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}


nvfp4_shape nvfp4_rowwise_data_shape (nvfp4_shape x) {
  nvfp4_shape s = clamped(x);
  if (s.ndim > 0) s.dim[s.ndim - 1] = nvfp4_shape_K(x) / 2;
  return s;
}


nvfp4_shape nvfp4_rowwise_scale_shape (nvfp4_shape x) {
  return shape2(roundup(nvfp4_shape_M(x), NVFP4_SCALE_ROWS),
                roundup(nvfp4_shape_K(x) / NVFP4_BLOCK, NVFP4_SCALE_COLS));
}


/* Flatten to 2-D [M, K] before transposing: the columnwise copy is [K, M/2]
** for any rank (TE's C++ rule; the N-D rotation is the 2.21 bug). */
nvfp4_shape nvfp4_columnwise_data_shape (nvfp4_shape x) {
  return shape2(nvfp4_shape_K(x), nvfp4_shape_M(x) / 2);
}


nvfp4_shape nvfp4_columnwise_scale_shape (nvfp4_shape x) {
  return shape2(roundup(nvfp4_shape_K(x), NVFP4_SCALE_ROWS),
                roundup(nvfp4_shape_M(x) / NVFP4_BLOCK, NVFP4_SCALE_COLS));
}


nvfp4_status nvfp4_shape_check_quantizable (nvfp4_shape x, int rowwise,
                                            int columnwise, char *msg,
                                            size_t n) {
  char sb[128];
  int i;
  char dummy[1];
  if (msg == NULL || n == 0) { msg = dummy; n = sizeof dummy; }
  if (x.ndim < 1 || x.ndim > NVFP4_MAX_DIMS) {   /* before its dims are read */
    snprintf(msg, n, "shape with ndim %d: ndim is outside 1..%d", x.ndim,
             NVFP4_MAX_DIMS);
    return NVFP4_EINVAL;
  }
  nvfp4_shape_format(x, sb, sizeof sb);
  for (i = 0; i < x.ndim; i++)
    if (x.dim[i] < 0) {
      snprintf(msg, n, "shape %s: dim %d is negative", sb, i);
      return NVFP4_EINVAL;
    }
  if (nvfp4_shape_numel(x) > NVFP4_MAX_NUMEL) {
    snprintf(msg, n, "shape %s: more than 2^60 elements", sb);
    return NVFP4_EINVAL;
  }
  if (nvfp4_shape_K(x) % NVFP4_BLOCK != 0) {
    snprintf(msg, n, "shape %s: last dim K=%lld is not a multiple of %d",
             sb, (long long)nvfp4_shape_K(x), NVFP4_BLOCK);
    return NVFP4_EINVAL;
  }
  if (columnwise && x.ndim < 2) {
    snprintf(msg, n, "shape %s: a columnwise copy needs at least 2 dims", sb);
    return NVFP4_EINVAL;
  }
  if (columnwise && nvfp4_shape_M(x) % NVFP4_BLOCK != 0) {
    snprintf(msg, n, "shape %s: M=%lld (product of leading dims) is not a "
             "multiple of %d, required for a columnwise copy", sb,
             (long long)nvfp4_shape_M(x), NVFP4_BLOCK);
    return NVFP4_EINVAL;
  }
  /* the scale buffers' padding: a row of K = 2^60 takes 128 * 2^56 bytes */
  if ((rowwise && nvfp4_shape_numel(nvfp4_rowwise_scale_shape(x)) > NVFP4_MAX_NUMEL) ||
      (columnwise && nvfp4_shape_numel(nvfp4_columnwise_scale_shape(x)) > NVFP4_MAX_NUMEL)) {
    snprintf(msg, n, "shape %s: its padded %s scale_inv would exceed 2^60 bytes", sb,
             rowwise && nvfp4_shape_numel(nvfp4_rowwise_scale_shape(x)) > NVFP4_MAX_NUMEL
             ? "rowwise" : "columnwise");
    return NVFP4_EINVAL;
  }
  if (msg != dummy) msg[0] = '\0';
  return NVFP4_OK;
}


/* TE's get_columnwise_shape at 2.21 rotated N-D: (d_last, d0, .., d(n-2)),
** then the packing halved the last of those.  FLAT2D flattens first. */
nvfp4_cw_bookkeeping nvfp4_cw_rule_apply (nvfp4_cw_rule rule, nvfp4_shape local) {
  nvfp4_cw_bookkeeping b;
  int i;
  memset(&b, 0, sizeof b);
  local = clamped(local);
  if (rule == NVFP4_CW_ND && local.ndim >= 2) {
    b.in_shape_t.ndim = local.ndim;
    b.in_shape_t.dim[0] = nvfp4_shape_K(local);
    for (i = 0; i < local.ndim - 1; i++) b.in_shape_t.dim[i + 1] = local.dim[i];
    b.in_shape_t.dim[local.ndim - 1] /= 2;
  }
  else
    b.in_shape_t = nvfp4_columnwise_data_shape(local);
  b.rows = b.in_shape_t.dim[0];
  b.packed_cols = 1;
  for (i = 1; i < b.in_shape_t.ndim; i++)     /* saturating, as numel */
    b.packed_cols = mul_sat(b.packed_cols, b.in_shape_t.dim[i]);
  b.scale_width = mul_sat(2, b.packed_cols) / NVFP4_BLOCK;
  return b;
}


const char *nvfp4_cw_rule_name (nvfp4_cw_rule rule) {
  return rule == NVFP4_CW_ND ? "nd" : "flat2d";
}


nvfp4_status nvfp4_cw_rule_parse (const char *name, nvfp4_cw_rule *out) {
  if (out == NULL) return NVFP4_EINVAL;
  if (name != NULL && strcmp(name, "flat2d") == 0) *out = NVFP4_CW_FLAT2D;
  else if (name != NULL && strcmp(name, "nd") == 0) *out = NVFP4_CW_ND;
  else return NVFP4_EINVAL;
  return NVFP4_OK;
}
