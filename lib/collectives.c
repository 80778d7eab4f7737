/*
** collectives.c -- plain-tensor collectives along dim 0 (all-gather,
** reduce-scatter, all-reduce sum) and the cross-rank agreement helpers that
** every data collective calls first, so that a shape or dtype mismatch, or a
** rank that failed locally, gives the same clear error on every rank
** instead of a hang or corrupted data (design.md decision 8).
**
** Sums are deterministic and identical on every rank: in FP32, in rank
** order, starting from +0: ((0 + x_0) + x_1) + .. + x_(size-1); BF16 is
** rounded once (RNE) at the end.  A sum of -0.0 values therefore gives +0.0.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvfp4_mpi.h"
#include "comm_int.h"


/* ---- metadata agreement ------------------------------------------------ */

typedef struct meta {           /* fixed size: all-gathered as bytes */
  int32_t status, ndim, dtype, flags;
  int64_t dim[NVFP4_MAX_DIMS];
  int32_t post;                 /* status of local work before the round */
  int32_t has_amax;             /* amax below is compared */
  float amax[2];
  uint64_t amax_seq;            /* nonzero: instead of amax, the number of the
                                   reduction over the comm it came from */
} meta;


static void meta_make (meta *m, nvfp4_status st, nvfp4_shape s, nvfp4_dtype dt,
                       int flags) {
  int i;
  memset(m, 0, sizeof *m);
  m->status = (int32_t)st;
  m->ndim = (s.ndim < 0 || s.ndim > NVFP4_MAX_DIMS) ? 0 : s.ndim;
  for (i = 0; i < m->ndim; i++) m->dim[i] = s.dim[i];
  m->dtype = (int32_t)dt;
  m->flags = flags;
}


static int meta_same (const meta *a, const meta *b) {
  int i;
  if (a->ndim != b->ndim || a->dtype != b->dtype || a->flags != b->flags) return 0;
  for (i = 0; i < a->ndim; i++)
    if (a->dim[i] != b->dim[i]) return 0;
  return 1;
}


/* "[16, 2, 64] bf16 (rowwise+columnwise, rule nd)", "[16, 64] fp4 from bf16
** (rowwise)" (NVFP4I_META_FROM_BF16); a plain shard's gather
** with a columnwise copy (where the rule applies) names its rule either way
** ("rule flat2d"), so that a disagreement on it shows on both sides */
static char *meta_format (const meta *m, char *buf, size_t n) {
  static const char *const fname[] = {
    "rowwise", "columnwise", "has rowwise", "has columnwise", "rule nd",
    "rht", "sr", "2d", "4over6", "emax 256", "rht without signs", "4over6 mse"
  };
  nvfp4_shape s;
  size_t used;
  int i, first = 1;
  s = nvfp4_shape_make(m->ndim, m->dim);
  nvfp4_shape_format(s, buf, n);
  used = strlen(buf);
  used += (size_t)snprintf(buf + used, used < n ? n - used : 0, " %s%s",
                           nvfp4_dtype_name((nvfp4_dtype)m->dtype),
                           m->flags & NVFP4I_META_FROM_BF16 ? " from bf16" : "");
  for (i = 0; i < (int)(sizeof fname / sizeof fname[0]) && used < n; i++) {
    if (!(m->flags & (1 << i))) continue;
    used += (size_t)snprintf(buf + used, n - used, "%s%s",
                             first ? " (" : i < 2 ? "+" : ", ", fname[i]);
    first = 0;
  }
  if ((m->flags & NVFP4I_META_COL) && !(m->flags & NVFP4I_META_ND) && m->dtype != NVFP4_FP4 && used < n)
    used += (size_t)snprintf(buf + used, n - used, ", rule flat2d");
  if (!first && used < n) snprintf(buf + used, n - used, ")");
  return buf;
}


/* EMISMATCH naming the first rank whose amax pair differs bitwise from rank
** 0's, or OK. */
static nvfp4_status amax_verdict (nvfp4_comm *c, const char *what, const meta *all) {
  int r, d;
  for (r = 1; r < c->size; r++)
    for (d = 0; d < 2; d++)
      if (memcmp(&all[r].amax[d], &all[0].amax[d], sizeof(float)) != 0)
        return nvfp4i_fail(c->ctx, NVFP4_EMISMATCH, "%s: rank %d's %s amax %.9g "
                           "differs from rank 0's %.9g: NVFP4 shards must share one "
                           "global scale (quantize them with amax_group, i.e. amax "
                           "reduction over the group)", what, r,
                           d ? "columnwise" : "rowwise", (double)all[r].amax[d],
                           (double)all[0].amax[d]);
  return NVFP4_OK;
}


/* With tags (amax_seq): 0 when every rank sent the same one (the amaxes are
** equal by construction), 1 when the values must be compared in a second
** round (some rank sent another tag or a value), -1 when none sent a tag. */
static int tags (const meta *all, int size) {
  int r, n = 0;
  for (r = 0; r < size; r++) n += all[r].amax_seq != 0;
  if (n == 0) return -1;
  for (r = 1; r < size; r++)
    if (all[r].amax_seq != all[0].amax_seq) return 1;
  return n == size ? 0 : 1;
}


static nvfp4_status agree (nvfp4_comm *c, const char *what, int layer, nvfp4_status local,
                           const char *when);


/* Collective, where the ranks know their n bytes differ somewhere (every
** rank calls it): rank 0's bytes into b0, the lowest rank whose bytes
** differ from them into *r (0 when none does) and its bytes into br.  No
** allocation.  MPI_SUCCESS or MPI's error. */
static int first_differing (nvfp4_comm *c, const void *mine, int n, void *b0, void *br, int *r) {
  int rc;
  memcpy(b0, mine, (size_t)n);
  if ((rc = MPI_Bcast(b0, n, MPI_BYTE, 0, c->mpi)) != MPI_SUCCESS) return rc;
  *r = memcmp(mine, b0, (size_t)n) != 0 ? c->rank : c->size;
  if ((rc = MPI_Allreduce(MPI_IN_PLACE, r, 1, MPI_INT, MPI_MIN, c->mpi)) != MPI_SUCCESS) return rc;
  if (*r == c->size) *r = 0;
  memcpy(br, mine, (size_t)n);
  return MPI_Bcast(br, n, MPI_BYTE, *r, c->mpi);
}


/* Every rank's descriptor into *all: stackbuf (16 entries) or, for more
** ranks, a table on the heap (the caller frees it when it is not stackbuf).
** The round starts as every agreement does (agree: the same first MPI
** call, so ranks in different calls meet there and learn it, whichever two
** library collectives they are in), with this rank's failure (when: how
** its peers' message says it failed) and the table's allocation (a rank
** out of memory could not take part in the gather; agree allocates
** nothing). */
static nvfp4_status gather_metas (nvfp4_comm *c, const char *what, const meta *mine,
                                  meta *stackbuf, meta **all, const char *when) {
  nvfp4_status st = (nvfp4_status)mine->status;
  *all = stackbuf;
  if (c->size > 16) {
    *all = (meta *)nvfp4i_malloc(sizeof **all * (size_t)c->size);
    if (*all == NULL && st == NVFP4_OK)
      st = nvfp4i_fail(c->ctx, NVFP4_ENOMEM, "%s: cannot allocate the metadata table "
                       "for %d ranks", what, c->size);
  }
  if ((st = agree(c, what, 0, st, when)) != NVFP4_OK) return st;
  return nvfp4i_comm_all_gather_host(c, mine, sizeof *mine, *all);
}


nvfp4_status nvfp4i_comm_check_same (nvfp4_comm *c, const char *what,
                                     nvfp4_status local, nvfp4_shape shape,
                                     nvfp4_dtype dt, int flags) {
  return nvfp4i_comm_check_meta(c, what, local, shape, dt, flags, NULL, 0, NULL, NVFP4_OK);
}


nvfp4_status nvfp4i_comm_check_meta (nvfp4_comm *c, const char *what,
                                     nvfp4_status local, nvfp4_shape shape,
                                     nvfp4_dtype dt, int flags,
                                     const float *amax, uint64_t amax_seq,
                                     int *amax_round, nvfp4_status post) {
  meta mine, stackbuf[16], *all = stackbuf;
  char a[256], b[256];
  nvfp4_status st;
  int r, t = -1;
  local = nvfp4i_comm_usable(c, what, local);
  meta_make(&mine, local, shape, dt, flags);
  mine.post = (int32_t)post;
  if (amax != NULL) {
    mine.has_amax = 1;
    mine.amax[0] = amax[0];
    mine.amax[1] = amax[1];
  }
  else if (amax_seq != 0) {
    mine.has_amax = 1;
    mine.amax_seq = amax_seq;
  }
  if (amax_round != NULL) *amax_round = 0;
  /* a failure, or a rank in another call, ends it there on every rank */
  if ((st = gather_metas(c, what, &mine, stackbuf, &all, " before the collective")) != NVFP4_OK)
    goto done;
  for (r = 1; r < c->size; r++)
    if (!meta_same(&all[r], &all[0])) {
      st = nvfp4i_fail(c->ctx, NVFP4_EMISMATCH, "%s: ranks disagree: rank %d "
                       "has %s, rank 0 has %s", what, r,
                       meta_format(&all[r], a, sizeof a),
                       meta_format(&all[0], b, sizeof b));
      goto done;
    }
  /* The metadata agree, so has_amax does too where the callers derive it
  ** from the metadata (the NVFP4 gather: an FP4 input used as it is).
  ** Tags that differ leave the values to the caller's second round (every
  ** rank sees the same table, so all take it or none). */
  if (mine.has_amax) {
    t = tags(all, c->size);
    if (t < 0 && (st = amax_verdict(c, what, all)) != NVFP4_OK) goto done;
  }
  /* Last, as nvfp4i_comm_agree would after the round. */
  for (r = 0; r < c->size; r++)
    if (all[r].post != NVFP4_OK) break;
  if (r < c->size)
    st = post != NVFP4_OK ? post
         : nvfp4i_fail(c->ctx, NVFP4_EPEER, "%s: rank %d failed (%s)", what,
                       r, nvfp4_status_string((nvfp4_status)all[r].post));
  else if (t > 0 && amax_round != NULL) *amax_round = 1;
done:
  if (all != stackbuf) free(all);
  return st;
}


nvfp4_status nvfp4i_comm_check_amax (nvfp4_comm *c, const char *what,
                                     nvfp4_status local, const float amax[2]) {
  meta mine, stackbuf[16], *all = stackbuf;
  nvfp4_status st;
  meta_make(&mine, local, nvfp4_shape_make(0, NULL), NVFP4_FP4, 0);
  if (local == NVFP4_OK) {
    mine.amax[0] = amax[0];
    mine.amax[1] = amax[1];
  }
  if ((st = gather_metas(c, what, &mine, stackbuf, &all, " reading its amax")) == NVFP4_OK)
    st = amax_verdict(c, what, all);
  if (all != stackbuf) free(all);
  return st;
}


nvfp4_status nvfp4i_comm_usable (nvfp4_comm *c, const char *what, nvfp4_status local) {
  if (local == NVFP4_OK && c->closing && c->in_layer == 0)
    return nvfp4i_fail(c->ctx, NVFP4_EUSAGE, "%s: this comm was destroyed (nvfp4_comm_destroy): "
                       "only the layers made with it before may still use it", what);
  if (local != NVFP4_OK || !c->aborted) return local;
  return nvfp4i_fail(c->ctx, NVFP4_EUSAGE, "%s: this comm's NCCL communicator was aborted "
                     "(%s): destroy the comm and make a new one", what, c->aborted_why);
}


/* 64-bit FNV-1a of s, of which an agreement compares 62 bits: which call
** it is in. */
static uint64_t op_hash (const char *s) {
  uint64_t h = 14695981039346656037ull;
  for (; *s != '\0'; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}


/* nvfp4_set_wait_callback's: called around the agreement's first reduction */
static nvfp4_wait_fn wait_fn;
static void *wait_ud;

void nvfp4_set_wait_callback (nvfp4_wait_fn fn, void *ud) {
  wait_fn = fn;
  wait_ud = ud;
}


/* nvfp4i_comm_agree_layer (layer 0: nvfp4i_comm_agree); when: after "rank
** r failed" in the peers' message.  A failure comes first: a rank telling
** its peers of its bad argument may be in another call (the Lua binding's
** plain gather of nothing beside their NVFP4 gather). */
static nvfp4_status agree (nvfp4_comm *c, const char *what, int layer, nvfp4_status local,
                           const char *when) {
  /* two small reductions and no allocation (a rank out of memory must
  ** still take part): the lowest failing rank and the call's hash (its
  ** maximum and minimum: they differ when a rank is in another call), then
  ** the failing rank's status */
  const uint64_t hh = op_hash(what) + (uint64_t)(uint32_t)layer * 0x9E3779B97F4A7C15ull;
  const int h = (int)(hh & 0x7fffffffu), h2 = (int)((hh >> 32) & 0x7fffffffu);
  int v[5], r, rc;
  local = nvfp4i_comm_usable(c, what, local);
  v[0] = local != NVFP4_OK ? c->size - c->rank : 0;
  v[1] = h;
  v[2] = -h;
  v[3] = h2;
  v[4] = -h2;
  if (wait_fn != NULL) wait_fn(c, 1, wait_ud);
  rc = MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_INT, MPI_MAX, c->mpi);
  if (wait_fn != NULL) wait_fn(c, 0, wait_ud);
  if (rc != MPI_SUCCESS) return nvfp4i_fail(c->ctx, NVFP4_EMPI, "%s: MPI_Allreduce failed", what);
  if (v[0] == 0 && (v[1] != -v[2] || v[3] != -v[4])) {
    /* every rank is here (the same values): rank 0's call, the lowest rank
    ** in another, and that one's (told apart by the hash where the names
    ** shown, cut to 47 bytes, are the same) */
    struct { int hash[2]; char name[48]; } mine, n0, nr;
    memset(&mine, 0, sizeof mine);
    mine.hash[0] = h;
    mine.hash[1] = h2;
    if (layer > 0) snprintf(mine.name, sizeof mine.name, "%.24s of layer #%d", what, layer);
    else snprintf(mine.name, sizeof mine.name, "%.47s", what);
    if (first_differing(c, &mine, (int)sizeof mine, &n0, &nr, &r) != MPI_SUCCESS)
      return nvfp4i_fail(c->ctx, NVFP4_EMPI, "%s: MPI_Bcast failed", what);
    return nvfp4i_fail(c->ctx, NVFP4_EMISMATCH, "%s: the ranks are in different calls on this "
                       "comm: rank %d in %s, rank 0 in %s%s (every rank of a comm makes the same "
                       "collective calls in the same order)", what, r, nr.name, n0.name,
                       strcmp(nr.name, n0.name) == 0 ? " (names that differ past 47 bytes)" : "");
  }
  if (v[0] == 0) return NVFP4_OK;
  r = c->size - v[0];
  v[0] = c->rank == r ? (int)local : 0;         /* a sum: any status value arrives as it is */
  if (MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, c->mpi) != MPI_SUCCESS)
    return nvfp4i_fail(c->ctx, NVFP4_EMPI, "%s: MPI_Allreduce failed", what);
  if (local != NVFP4_OK) return local;
  return nvfp4i_fail(c->ctx, NVFP4_EPEER, "%s: rank %d failed%s (%s)", what, r, when,
                     nvfp4_status_string((nvfp4_status)v[0]));
}


nvfp4_status nvfp4i_comm_agree (nvfp4_comm *c, const char *what, nvfp4_status local) {
  return agree(c, what, 0, local, "");
}


nvfp4_status nvfp4i_comm_agree_layer (nvfp4_comm *c, const char *what, int layer,
                                      nvfp4_status local) {
  return agree(c, what, layer, local, "");
}


/* names[i] "field" or "field|name0|name1|..": value v of the field reads
** as name_v where one is listed, else as the number.  The field's part into
** f, the value's into b. */
static void field_value (const char *name, int64_t v, char f[64], char b[64]) {
  const char *bar = strchr(name, '|'), *p;
  int64_t k;
  snprintf(f, 64, "%.*s", bar ? (int)(bar - name) : 63, name);
  snprintf(b, 64, "%lld", (long long)v);
  for (p = bar, k = 0; p != NULL; p = strchr(p + 1, '|'), k++)
    if (k == v) {
      const char *e = strchr(p + 1, '|');
      snprintf(b, 64, "%.*s", e ? (int)(e - p - 1) : 63, p + 1);
      return;
    }
}


nvfp4_status nvfp4i_comm_same_i64 (nvfp4_comm *c, const char *what,
                                   const int64_t *v, const char *const *names,
                                   int n, const char *hint) {
  int64_t hi[32], lo[32], v0, vr;
  int i, r;
  char f[64], a[64], b[64];
  if (n < 0 || n > 32)
    return nvfp4i_fail(c->ctx, NVFP4_EINVAL, "%s: %d values to compare (at most 32)", what, n);
  memcpy(hi, v, sizeof *v * (size_t)n);
  memcpy(lo, v, sizeof *v * (size_t)n);
  if (MPI_Allreduce(MPI_IN_PLACE, hi, n, MPI_INT64_T, MPI_MAX, c->mpi) != MPI_SUCCESS ||
      MPI_Allreduce(MPI_IN_PLACE, lo, n, MPI_INT64_T, MPI_MIN, c->mpi) != MPI_SUCCESS)
    return nvfp4i_fail(c->ctx, NVFP4_EMPI, "%s: MPI_Allreduce failed", what);
  for (i = 0; i < n && hi[i] == lo[i]; i++) {}
  if (i == n) return NVFP4_OK;
  /* every rank sees the same hi and lo, so all come here: the lowest rank
  ** whose value differs from rank 0's, and both values */
  if (first_differing(c, &v[i], (int)sizeof v[i], &v0, &vr, &r) != MPI_SUCCESS)
    return nvfp4i_fail(c->ctx, NVFP4_EMPI, "%s: MPI_Bcast failed", what);
  field_value(names[i], vr, f, a);
  field_value(names[i], v0, f, b);
  return nvfp4i_fail(c->ctx, NVFP4_EMISMATCH, "%s: the ranks disagree on %s: rank %d has %s, "
                     "rank 0 has %s%s", what, f, r, a, b, hint ? hint : "");
}


/* ---- plain collectives ------------------------------------------------- */

/* Local argument check, no communication.  sum: F32/BF16 only. */
static nvfp4_status check_plain (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                 const char *what, int sum) {
  char nm[64];
  snprintf(nm, sizeof nm, "%s: x", what);
  CHECK(nvfp4i_check_tensor(ctx, x, nm));
  FAIL_IF(ctx, x->dtype == NVFP4_FP4, NVFP4_EINVAL, "%s: x is an fp4 tensor; an NVFP4 "
          "tensor goes through the NVFP4 all-gather (nvfp4_all_gather, Lua's comm:all_gather)%s",
          what, sum ? ", or dequantize it first" : "");
  FAIL_IF(ctx, sum && x->dtype == NVFP4_U8, NVFP4_EINVAL,
          "%s: u8 tensors cannot be summed (fp32 or bf16 only)", what);
  FAIL_IF(ctx, x->shape.ndim < 1, NVFP4_EINVAL,
          "%s: x is a scalar; collectives along the first dim need ndim >= 1", what);
  return NVFP4_OK;
}


static nvfp4_shape shape_of (const nvfp4_tensor *x) {
  nvfp4_shape s;
  if (x != NULL) return x->shape;
  memset(&s, 0, sizeof s);
  return s;
}


/* The plain collectives' start: *out cleared, x checked here
** (check_plain), then every rank told of every other's verdict and the
** shapes and dtypes compared (nvfp4i_comm_check_same): a rank whose
** arguments are bad fails with its own message, the others with
** NVFP4_EPEER naming it, and none waits in a collective. */
static nvfp4_status plain_begin (nvfp4_comm *c, const nvfp4_tensor *x, nvfp4_tensor **out,
                                 const char *what, int sum) {
  nvfp4_status st;
  NVFP4I_CLEAR(out);
  if (c == NULL) return NVFP4_EINVAL;
  st = out == NULL ? nvfp4i_fail(c->ctx, NVFP4_EINVAL, "%s: out is NULL", what)
                   : check_plain(c->ctx, x, what, sum);
  if (out != NULL) *out = NULL;
  return nvfp4i_comm_check_same(c, what, st, shape_of(x), x ? x->dtype : NVFP4_F32, 0);
}


nvfp4_status nvfp4_all_gather_plain (nvfp4_comm *c, const nvfp4_tensor *x,
                                     nvfp4_tensor **out) {
  nvfp4_ctx *ctx;
  nvfp4_tensor *t = NULL;
  nvfp4_shape g;
  nvfp4_status st;
  CHECK(plain_begin(c, x, out, "all_gather_plain", 0));
  ctx = c->ctx;
  CHECK(nvfp4i_gathered_shape(ctx, "all_gather_plain", x->shape, c->size, &g));  /* agreed shapes */
  st = nvfp4i_tensor_alloc_plain_uninit(ctx, g, x->dtype, &t);  /* the gather writes every byte */
  st = nvfp4i_comm_agree(c, "all_gather_plain", st);   /* a peer out of memory: free ours */
  if (st == NVFP4_OK)
    st = nvfp4i_comm_all_gather_bytes(c, "all_gather_plain", x->data.p, x->data.nbytes,
                                      t->data.p);
  if (st != NVFP4_OK) {
    nvfp4_tensor_destroy(t);
    return st;
  }
  *out = t;
  return NVFP4_OK;
}


/* acc (FP32, n elements, zeroed) += block r of src for r in rank order. */
static nvfp4_status sum_blocks (nvfp4_ctx *ctx, float *acc, const void *src,
                                nvfp4_dtype dt, size_t n, int size) {
  size_t blk = n * nvfp4_dtype_size(dt);
  int r;
  for (r = 0; r < size; r++)
    CHECK(ctx->ops->add_f32(ctx, acc, (const char *)src + (size_t)r * blk, dt, n));
  return NVFP4_OK;
}


/* Round the FP32 sums once into a BF16 tensor (RNE), by the backend's
** convert entry: the sums stay in the ctx's memory. */
static nvfp4_status store_bf16 (nvfp4_ctx *ctx, nvfp4_tensor *t, const float *acc,
                                size_t n) {
  return ctx->ops->convert(ctx, t->data.p, NVFP4_BF16, acc, NVFP4_F32, n);
}


/* The FP32 accumulator of a sum of n elements into dtype dt: BF16 sums
** round once from it, FP32 ones add in out itself (acc left empty).  Made
** with the call's other buffers, before its agreement, so that its ENOMEM
** reaches the peers (it came after the exchange, on that rank alone). */
static nvfp4_status acc_alloc (nvfp4_ctx *ctx, nvfp4_dtype dt, size_t n, nvfp4i_buf *acc) {
  memset(acc, 0, sizeof *acc);
  if (dt == NVFP4_F32 || n == 0) return NVFP4_OK;
  return nvfp4i_buf_alloc(ctx, acc, nvfp4_shape_make(1, (int64_t[]){(int64_t)n}), sizeof(float));
}


/* out (allocated, dtype dt, n elements) = sum over ranks of the size blocks
** in buf (ctx memory, size * n elements of dt); acc from acc_alloc. */
static nvfp4_status reduce_into (nvfp4_ctx *ctx, nvfp4_tensor *out, const nvfp4i_buf *acc,
                                 const void *buf, size_t n, int size) {
  if (n == 0) return NVFP4_OK;
  if (out->dtype == NVFP4_F32) {
    CHECK(ctx->ops->memset(ctx, out->data.p, 0, n * sizeof(float)));
    return sum_blocks(ctx, (float *)out->data.p, buf, NVFP4_F32, n, size);
  }
  CHECK(ctx->ops->memset(ctx, acc->p, 0, n * sizeof(float)));
  CHECK(sum_blocks(ctx, (float *)acc->p, buf, out->dtype, n, size));
  return store_bf16(ctx, out, (const float *)acc->p, n);
}


/* The body of reduce_scatter and all_reduce_sum: allocate, agree, exchange,
** sum in rank order into *out (shape o).  scatter 1 (reduce_scatter):
** recv_shape is x's shape, and block r of every rank comes to rank r by an
** all-to-all; scatter 0 (all_reduce_sum): recv_shape is the gathered shape,
** every rank's whole tensor, by an all-gather. */
static nvfp4_status exchange_sum (nvfp4_comm *c, const char *what, const nvfp4_tensor *x,
                                  int scatter, nvfp4_shape o, nvfp4_shape recv_shape,
                                  nvfp4_tensor **out) {
  nvfp4_ctx *ctx = c->ctx;
  nvfp4_tensor *t = NULL;
  nvfp4i_buf recv, acc;
  const size_t n = (size_t)nvfp4_shape_numel(o);
  nvfp4_status st;
  memset(&recv, 0, sizeof recv);
  memset(&acc, 0, sizeof acc);
  st = nvfp4i_tensor_alloc_plain(ctx, o, x->dtype, &t);
  if (st == NVFP4_OK) st = nvfp4i_buf_alloc(ctx, &recv, recv_shape, nvfp4_dtype_size(x->dtype));
  if (st == NVFP4_OK) st = acc_alloc(ctx, x->dtype, n, &acc);
  if ((st = nvfp4i_comm_agree(c, what, st)) != NVFP4_OK) goto fail;
  if (scatter)
    st = nvfp4i_comm_all_to_all_bytes(c, what, x->data.p, n * nvfp4_dtype_size(x->dtype), recv.p);
  else
    st = nvfp4i_comm_all_gather_bytes(c, what, x->data.p, x->data.nbytes, recv.p);
  if (st != NVFP4_OK) goto fail;
  CHECK_GOTO(reduce_into(ctx, t, &acc, recv.p, n, c->size), st, fail);
  nvfp4i_buf_free(ctx, &recv);
  nvfp4i_buf_free(ctx, &acc);
  *out = t;
  return NVFP4_OK;
fail:
  nvfp4i_buf_free(ctx, &recv);
  nvfp4i_buf_free(ctx, &acc);
  nvfp4_tensor_destroy(t);
  return st;
}


nvfp4_status nvfp4_reduce_scatter (nvfp4_comm *c, const nvfp4_tensor *x,
                                   nvfp4_tensor **out) {
  nvfp4_ctx *ctx;
  nvfp4_shape o;
  char sb[128];
  CHECK(plain_begin(c, x, out, "reduce_scatter", 1));
  ctx = c->ctx;
  /* Shapes agree, so this fails the same way on every rank. */
  FAIL_IF(ctx, x->shape.dim[0] % c->size != 0, NVFP4_EINVAL,
          "reduce_scatter: the first dim of %s is %lld, not a multiple of the "
          "communicator size %d", nvfp4_shape_format(x->shape, sb, sizeof sb),
          (long long)x->shape.dim[0], c->size);
  o = x->shape;
  o.dim[0] /= c->size;
  return exchange_sum(c, "reduce_scatter", x, 1, o, x->shape, out);
}


/* Every rank gathers all contributions (size x the tensor) and sums them in
** rank order, so all ranks hold bit-identical results.  Memory: size times
** the tensor; fine for the Linear layer's activations at test sizes. */
nvfp4_status nvfp4_all_reduce_sum (nvfp4_comm *c, const nvfp4_tensor *x,
                                   nvfp4_tensor **out) {
  nvfp4_shape g;
  CHECK(plain_begin(c, x, out, "all_reduce_sum", 1));
  CHECK(nvfp4i_gathered_shape(c->ctx, "all_reduce_sum", x->shape, c->size, &g));
  return exchange_sum(c, "all_reduce_sum", x, 0, x->shape, g, out);
}
