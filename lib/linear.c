/*
** linear.c -- a tensor/sequence-parallel Linear layer, te.Linear's flow under
** the NVFP4 recipe (spec/sp-linear-and-gather.md §1-§4; operand usages of
** spec/nvfp4-numerics.md §11).
**
**   forward   quantize X (column+SP: amax MAX-reduced over TP), gather it
**             rowwise (column+SP), quantize W (2D), Y = gemm(W row, X row);
**             row: reduce-scatter (SP) or all-reduce the partial Y, then bias.
**             Saved: X columnwise only (TE drops the rowwise copy), W.
**   backward  grad_output stays N-D, as TE 2.21 passes it (the bug's path).
**             row+SP: NVFP4 all-gather of dY (rowwise + columnwise, amax
**             reduced, the named columnwise rule); otherwise quantize locally.
**             dgrad = gemm(W col, dY row), column: reduce-scatter (SP) or
**             all-reduce; wgrad = gemm(X col, dY col) where column+SP first
**             re-gathers the saved X columnwise (asynchronously, finished
**             after dgrad as TE does).
** Baseline recipes (bf16, fp32) run the same flow with plain tensors and
** plain gathers.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvfp4_int.h"
#include "linear_int.h"
#include "comm_int.h"           /* nvfp4i_comm_agree */

#define MAXOWN 8

struct nvfp4_linear {
  nvfp4_ctx *ctx;
  nvfp4_linear_config cfg;
  int tp, rank;
  int uses_group;                   /* holds cfg.tp_group (nvfp4i_comm_use; not while created) */
  int number;                       /* its number on cfg.tp_group (TP > 1): its steps' agreements */
  int64_t K_l, N_l;                 /* local weight [N_l, K_l] */
  nvfp4_tensor *w, *b;              /* parameters (params dtype) */
  /* saved by forward for backward */
  int have_fwd;
  nvfp4_shape x_shape, y_shape;
  nvfp4_dtype act_dt;
  nvfp4_tensor *x_wgrad;            /* X for wgrad: FP4 columnwise, or plain */
  nvfp4_tensor *w_op;               /* W as the GEMMs read it */
  nvfp4_tensor *fwd[MAXOWN];        /* owned by the last forward */
  nvfp4_tensor *bwd[MAXOWN];        /* owned by the last backward */
  const nvfp4_tensor *kept[NVFP4_LIN_NOPERANDS];
  nvfp4_gather_path gathered[NVFP4_LIN_NOPERANDS];   /* nvfp4_linear_gather_path */
  int bwd_failed;                   /* the last backward returned an error */
  uint64_t sr_offset;               /* advanced by every backward that succeeds */
};


static int quantized (const nvfp4_linear *l) {
  return l->cfg.recipe.kind == NVFP4_RECIPE_NVFP4;
}


/* Keep t in one of the per-pass lists (freed at the next pass). */
static void own (nvfp4_tensor **list, nvfp4_tensor *t) {
  int i;
  for (i = 0; i < MAXOWN; i++)
    if (list[i] == NULL) { list[i] = t; return; }
}


/* t taken out of a per-pass list, when it is there (else NULL): the caller
** owns it.  A tensor the last pass kept, lent by nvfp4_linear_operand_get
** and passed back in as a step's input, is freed when that step is done
** with it, not by the step's forget_forward / free_list before it is read. */
static nvfp4_tensor *unown (nvfp4_tensor **list, const nvfp4_tensor *t) {
  int i;
  for (i = 0; i < MAXOWN; i++)
    if (t != NULL && list[i] == t) {
      list[i] = NULL;
      return (nvfp4_tensor *)t;
    }
  return NULL;
}


static void free_list (nvfp4_tensor **list) {
  int i;
  for (i = 0; i < MAXOWN; i++) {
    nvfp4_tensor_destroy(list[i]);
    list[i] = NULL;
  }
}


static void forget_forward (nvfp4_linear *l) {
  free_list(l->bwd);
  free_list(l->fwd);
  memset(l->kept, 0, sizeof l->kept);
  memset(l->gathered, 0, sizeof l->gathered);
  l->x_wgrad = l->w_op = NULL;
  l->have_fwd = 0;
}


/* A copy of a plain tensor in dtype dt (bf16 rounded once, RNE), made by
** the backend's convert entry: no element leaves the ctx's memory. */
static nvfp4_status convert (nvfp4_ctx *ctx, const nvfp4_tensor *src,
                             nvfp4_dtype dt, nvfp4_tensor **out) {
  nvfp4_tensor *t = NULL;
  nvfp4_status st;
  *out = NULL;
  CHECK(nvfp4i_tensor_alloc_plain(ctx, src->shape, dt, &t));
  CHECK_GOTO(ctx->ops->convert(ctx, t->data.p, dt, src->data.p, src->dtype,
                               (size_t)nvfp4_shape_numel(src->shape)), st, fail);
  *out = t;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(t);
  return st;
}


/* y[.., j] += bias[j] in place, one fp32 add rounded once to y's dtype
** (row-parallel bias is added after the reduction, outside the GEMM, as TE
** does), by the backend's bias_add entry. */
static nvfp4_status add_bias (nvfp4_ctx *ctx, nvfp4_tensor *y, const nvfp4_tensor *bias) {
  return ctx->ops->bias_add(ctx, y->data.p, y->dtype, bias->data.p, bias->dtype,
                            nvfp4_shape_M(y->shape), nvfp4_shape_K(y->shape));
}


/* ---- configuration ------------------------------------------------------ */

static nvfp4_status check_config (nvfp4_ctx *ctx, const nvfp4_linear_config *c, int tp) {
  const nvfp4_recipe *r = &c->recipe;
  FAIL_IF(ctx, c->tp_group != NULL && c->tp_group->closing, NVFP4_EUSAGE,
          "linear: tp_group was destroyed (nvfp4_comm_destroy): only the layers made with it "
          "before may still use it");
  FAIL_IF(ctx, c->in_features <= 0 || c->in_features % NVFP4_BLOCK != 0, NVFP4_EINVAL,
          "linear: in_features %lld is not a positive multiple of 16",
          (long long)c->in_features);
  FAIL_IF(ctx, c->out_features <= 0 || c->out_features % NVFP4_BLOCK != 0, NVFP4_EINVAL,
          "linear: out_features %lld is not a positive multiple of 16",
          (long long)c->out_features);
  {  /* the full weight [out_features, in_features], before any rank's shard */
    int64_t n;
    FAIL_IF(ctx, __builtin_mul_overflow(c->out_features, c->in_features, &n) ||
            n > NVFP4_MAX_NUMEL, NVFP4_EINVAL, "linear: the weight [out_features %lld, "
            "in_features %lld] has more than 2^60 elements", (long long)c->out_features,
            (long long)c->in_features);
  }
  FAIL_IF(ctx, c->parallel != NVFP4_PARALLEL_NONE && c->parallel != NVFP4_PARALLEL_COLUMN &&
          c->parallel != NVFP4_PARALLEL_ROW, NVFP4_EINVAL,
          "linear: parallel mode %d is not none, column or row", (int)c->parallel);
  FAIL_IF(ctx, c->sequence_parallel && c->parallel == NVFP4_PARALLEL_NONE, NVFP4_EINVAL,
          "linear: sequence_parallel needs parallel mode column or row");
  FAIL_IF(ctx, c->parallel == NVFP4_PARALLEL_COLUMN && c->out_features % (16 * tp) != 0,
          NVFP4_EINVAL, "linear: column parallel needs out_features %lld divisible by "
          "16 * TP = %d (each rank's N/TP must be a multiple of 16)",
          (long long)c->out_features, 16 * tp);
  FAIL_IF(ctx, c->parallel == NVFP4_PARALLEL_ROW && c->in_features % (16 * tp) != 0,
          NVFP4_EINVAL, "linear: row parallel needs in_features %lld divisible by "
          "16 * TP = %d (each rank's K/TP must be a multiple of 16)",
          (long long)c->in_features, 16 * tp);
  FAIL_IF(ctx, c->params_dtype != NVFP4_F32 && c->params_dtype != NVFP4_BF16, NVFP4_EINVAL,
          "linear: params dtype %s is not fp32 or bf16", NVFP4I_DTYPE(c->params_dtype));
  FAIL_IF(ctx, r->kind != NVFP4_RECIPE_NVFP4 && r->kind != NVFP4_RECIPE_BF16 &&
          r->kind != NVFP4_RECIPE_FP32, NVFP4_EINVAL,
          "linear: recipe kind %d is not nvfp4, bf16 or fp32", (int)r->kind);
  FAIL_IF(ctx, r->kind == NVFP4_RECIPE_NVFP4 && !c->frozen_weight &&
          r->no_input_rht != r->no_grad_rht, NVFP4_EINVAL,
          "linear: input RHT is %s but grad RHT is %s: wgrad (dY^T X) needs the RHT on both "
          "columnwise operands or on neither (it cancels only in pairs)",
          r->no_input_rht ? "off" : "on", r->no_grad_rht ? "off" : "on");
  FAIL_IF(ctx, r->kind == NVFP4_RECIPE_NVFP4 && r->four_over_six_activations &&
          !c->frozen_weight && !r->no_input_rht, NVFP4_EINVAL,
          "linear: 4over6 activations exclude the input's RHT (spec §9.1): switch the "
          "input's RHT off, and the grad's with it (recipe no_input_rht, no_grad_rht; Lua "
          "input_rht = false, grad_rht = false)");
  FAIL_IF(ctx, c->gather_rule != NVFP4_CW_FLAT2D && c->gather_rule != NVFP4_CW_ND,
          NVFP4_EINVAL, "linear: gather rule %d is not flat2d or nd", (int)c->gather_rule);
  FAIL_IF(ctx, c->tp_group != NULL && nvfp4_comm_ctx(c->tp_group) != ctx, NVFP4_EUSAGE,
          "linear: the TP group belongs to another context");
  if (c->tp_group == NULL && c->parallel != NVFP4_PARALLEL_NONE) {
    /* TP = 1 on each rank of a job of several: almost surely a forgotten
    ** group (the collectives the layer exists to test would not happen) */
    int init = 0, size = 1;
    if (MPI_Initialized(&init) == MPI_SUCCESS && init) MPI_Comm_size(MPI_COMM_WORLD, &size);
    FAIL_IF(ctx, size > 1, NVFP4_EINVAL, "linear: parallel mode %s without a TP group in a "
            "job of %d ranks (the layer would run as TP = 1 on each rank): pass the group "
            "(nvfp4_comm_split; Lua group = world:split(TP), or sc.group(TP) in a scenario)",
            c->parallel == NVFP4_PARALLEL_ROW ? "row" : "column", size);
  }
  return NVFP4_OK;
}


/* The TP group's ranks agree on create's local verdict (checks, memory),
** then on every field that shapes the layer's collectives and numerics:
** the seeds and keep_operands are each rank's own. */
static nvfp4_status config_agree (const nvfp4_linear_config *c, nvfp4_status local) {
  static const char *const name[] = {       /* "field|value 0|value 1|..": nvfp4i_comm_same_i64 */
    "in_features", "out_features", "bias|off|on", "parallel|none|column|row",
    "sequence_parallel|off|on", "params_dtype|fp32|bf16", "recipe kind|nvfp4|bf16|fp32",
    "no_input_rht|off|on", "no_weight_2d|off|on", "no_grad_rht|off|on", "no_grad_sr|off|on",
    "no_amax_reduction|off|on", "four_over_six_weights|off|on", "four_over_six_activations|off|on",
    "gather_rule|flat2d|nd", "frozen_weight|off|on"
  };
  const nvfp4_recipe *r = &c->recipe;
  const int64_t v[] = {
    c->in_features, c->out_features, c->bias != 0, c->parallel, c->sequence_parallel != 0,
    c->params_dtype, r->kind, r->no_input_rht, r->no_weight_2d, r->no_grad_rht,
    r->no_grad_sr, r->no_amax_reduction, r->four_over_six_weights,
    r->four_over_six_activations, c->gather_rule, c->frozen_weight != 0
  };
  CHECK(nvfp4i_comm_agree(c->tp_group, "linear_create", local));
  return nvfp4i_comm_same_i64(c->tp_group, "linear_create", v, name,
                              (int)(sizeof v / sizeof v[0]),
                              ": every rank of the TP group creates the layer alike");
}


/* The layer and its parameters (the local weight, a zero bias), on one
** rank; *out NULL on failure. */
static nvfp4_status layer_new (nvfp4_ctx *ctx, const nvfp4_linear_config *cfg, int tp,
                               nvfp4_linear **out) {
  nvfp4_linear *l;
  nvfp4_status st;
  int64_t d[2];
  l = (nvfp4_linear *)nvfp4i_calloc(1, sizeof *l);
  FAIL_IF(ctx, l == NULL, NVFP4_ENOMEM, "linear_create: out of memory");
  l->ctx = ctx;
  l->cfg = *cfg;
  l->tp = tp;
  l->rank = cfg->tp_group ? nvfp4_comm_rank(cfg->tp_group) : 0;
  l->K_l = cfg->in_features / (cfg->parallel == NVFP4_PARALLEL_ROW ? tp : 1);
  l->N_l = cfg->out_features / (cfg->parallel == NVFP4_PARALLEL_COLUMN ? tp : 1);
  d[0] = l->N_l;
  d[1] = l->K_l;
  CHECK_GOTO(nvfp4_tensor_randn(ctx, nvfp4_shape_make(2, d), cfg->params_dtype,
                                cfg->init_seed + (uint64_t)l->rank, &l->w), st, fail);
  if (cfg->bias)
    CHECK_GOTO(nvfp4_tensor_create(ctx, nvfp4_shape_make(1, d), cfg->params_dtype, &l->b),
               st, fail);
  *out = l;
  return NVFP4_OK;
fail:
  nvfp4_linear_destroy(l);
  return st;
}


nvfp4_status nvfp4_linear_create (nvfp4_ctx *ctx, const nvfp4_linear_config *cfg,
                                  nvfp4_linear **out) {
  nvfp4_linear *l = NULL;
  nvfp4_status st;
  int tp;
  NVFP4I_CLEAR(out);
  if (cfg == NULL)                                   /* no group to tell */
    return ctx ? nvfp4i_fail(ctx, NVFP4_EINVAL, "linear_create: cfg is NULL") : NVFP4_EINVAL;
  tp = cfg->tp_group ? nvfp4_comm_size(cfg->tp_group) : 1;
  if (ctx == NULL || out == NULL) {
    /* with a group, a failure like any other: the peers must learn of it */
    if (tp <= 1 && ctx == NULL) return NVFP4_EINVAL;
    st = nvfp4i_fail(ctx ? ctx : nvfp4_comm_ctx(cfg->tp_group), NVFP4_EINVAL,
                     "linear_create: %s is NULL", ctx == NULL ? "ctx" : "out");
  }
  else st = check_config(ctx, cfg, tp);
  if (st == NVFP4_OK) st = layer_new(ctx, cfg, tp, &l);
  if (tp > 1) {
    const int number = ++cfg->tp_group->layers;   /* every rank counts every create, failed or not */
    st = config_agree(cfg, st);
    if (l != NULL) l->number = number;
  }
  if (st != NVFP4_OK) {
    nvfp4_linear_destroy(l);
    return st;
  }
  if (cfg->tp_group != NULL) {
    nvfp4i_comm_use(cfg->tp_group);
    l->uses_group = 1;
  }
  *out = l;
  return NVFP4_OK;
}


void nvfp4_linear_destroy (nvfp4_linear *l) {
  if (l == NULL) return;
  forget_forward(l);
  nvfp4_tensor_destroy(l->w);
  nvfp4_tensor_destroy(l->b);
  /* last: the group may be freed here (destroyed while the layer had it) */
  if (l->uses_group) nvfp4i_comm_unuse(l->cfg.tp_group);
  free(l);
}


const nvfp4_tensor *nvfp4_linear_weight (const nvfp4_linear *l) {
  return l ? l->w : NULL;
}


const nvfp4_tensor *nvfp4_linear_bias (const nvfp4_linear *l) {
  return l ? l->b : NULL;
}


static nvfp4_status set_param (nvfp4_linear *l, nvfp4_tensor **slot,
                               const nvfp4_tensor *src, const char *what) {
  nvfp4_tensor *t = NULL;
  char a[64], b[64], nm[64];
  snprintf(nm, sizeof nm, "linear_set_%s: %s", what, what);
  CHECK(nvfp4i_check_tensor(l->ctx, src, nm));
  FAIL_IF(l->ctx, !nvfp4_shape_equal(src->shape, (*slot)->shape), NVFP4_EINVAL,
          "linear: %s shape %s does not match the local %s shape %s", what,
          nvfp4_shape_format(src->shape, a, sizeof a), what,
          nvfp4_shape_format((*slot)->shape, b, sizeof b));
  FAIL_IF(l->ctx, src->dtype != NVFP4_F32 && src->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "linear: %s dtype %s is not fp32 or bf16", what, nvfp4_dtype_name(src->dtype));
  CHECK(convert(l->ctx, src, l->cfg.params_dtype, &t));
  nvfp4_tensor_destroy(*slot);
  *slot = t;
  return NVFP4_OK;
}


nvfp4_status nvfp4_linear_set_weight (nvfp4_linear *l, const nvfp4_tensor *w) {
  if (l == NULL) return NVFP4_EINVAL;
  return set_param(l, &l->w, w, "weight");
}


nvfp4_status nvfp4_linear_set_bias (nvfp4_linear *l, const nvfp4_tensor *b) {
  if (l == NULL) return NVFP4_EINVAL;
  FAIL_IF(l->ctx, l->b == NULL, NVFP4_EUSAGE, "linear: this layer has no bias");
  return set_param(l, &l->b, b, "bias");
}


nvfp4_status nvfp4_linear_operand_get (nvfp4_linear *l, nvfp4_linear_operand which,
                                       const nvfp4_tensor **t) {
  static const char *const names[] = {"fprop input", "weight", "wgrad input",
                                      "grad_output"};
  NVFP4I_CLEAR(t);
  if (l == NULL) return NVFP4_EINVAL;
  CHECK_ARG(l->ctx, t, "linear_operand_get");
  FAIL_IF(l->ctx, (unsigned)which >= NVFP4_LIN_NOPERANDS, NVFP4_EINVAL,
          "linear: operand %d is not one of 0..%d", (int)which, NVFP4_LIN_NOPERANDS - 1);
  FAIL_IF(l->ctx, !l->cfg.keep_operands, NVFP4_EUSAGE,
          "linear: operands are kept only with keep_operands set");
  FAIL_IF(l->ctx, which == NVFP4_LIN_WGRAD_INPUT && l->cfg.frozen_weight &&
          l->cfg.parallel == NVFP4_PARALLEL_COLUMN && l->cfg.sequence_parallel && l->tp > 1,
          NVFP4_EUSAGE, "linear: no wgrad input: the weight is frozen, so column+SP never "
          "gathers X for a wgrad");
  FAIL_IF(l->ctx, l->kept[which] == NULL && l->bwd_failed &&
          (which == NVFP4_LIN_GRAD_OUTPUT || which == NVFP4_LIN_WGRAD_INPUT), NVFP4_EUSAGE,
          "linear: no %s: the last backward failed before keeping it", names[which]);
  FAIL_IF(l->ctx, l->kept[which] == NULL, NVFP4_EUSAGE,
          "linear: no %s yet (run forward/backward first)", names[which]);
  *t = l->kept[which];
  return NVFP4_OK;
}


nvfp4_status nvfp4_linear_gather_path (const nvfp4_linear *l, nvfp4_linear_operand which,
                                       nvfp4_gather_path *path) {
  if (path != NULL) *path = NVFP4_GATHER_NONE;
  if (l == NULL) return NVFP4_EINVAL;
  CHECK_ARG(l->ctx, path, "linear_gather_path");
  FAIL_IF(l->ctx, (unsigned)which >= NVFP4_LIN_NOPERANDS, NVFP4_EINVAL,
          "linear: operand %d is not one of 0..%d", (int)which, NVFP4_LIN_NOPERANDS - 1);
  *path = l->gathered[which];
  return NVFP4_OK;
}


/* A backward GEMM's error st, its message prefixed with the GEMM and, where
** grad_output was gathered along the sequence (row + SP over TP > 1), the
** gather's rule (an odd B under "nd" gets this far with a too-narrow
** columnwise scale). */
static nvfp4_status gemm_context (nvfp4_linear *l, nvfp4_status st, const char *gemm) {
  char why[NVFP4I_ERRLEN];
  snprintf(why, sizeof why, "%s", nvfp4_last_error(l->ctx));
  if (l->cfg.parallel == NVFP4_PARALLEL_ROW && l->cfg.sequence_parallel && l->tp > 1)
    return nvfp4i_fail(l->ctx, st, "linear backward: %s GEMM on grad_output gathered with rule %s: %s",
                       gemm, nvfp4_cw_rule_name(l->cfg.gather_rule), why);
  return nvfp4i_fail(l->ctx, st, "linear backward: %s GEMM: %s", gemm, why);
}


/* ---- forward ------------------------------------------------------------ */

static nvfp4_status check_activation (nvfp4_linear *l, const nvfp4_tensor *x,
                                      const char *what, int64_t last) {
  nvfp4_ctx *ctx = l->ctx;
  char sb[128];
  char nm[64];
  snprintf(nm, sizeof nm, "linear_forward: %s", what);
  CHECK(nvfp4i_check_tensor(ctx, x, nm));
  FAIL_IF(ctx, x->dtype != NVFP4_F32 && x->dtype != NVFP4_BF16, NVFP4_EINVAL,
          "linear: %s dtype %s is not fp32 or bf16", what, nvfp4_dtype_name(x->dtype));
  FAIL_IF(ctx, x->shape.ndim < (l->cfg.sequence_parallel ? 2 : 1), NVFP4_EINVAL,
          "linear: %s %s has %d dim%s; %s (%s)", what,
          nvfp4_shape_format(x->shape, sb, sizeof sb), x->shape.ndim,
          x->shape.ndim == 1 ? "" : "s",
          l->cfg.sequence_parallel ? "sequence_parallel needs at least 2" : "needs at least 1",
          l->cfg.sequence_parallel ? "the sequence dim first, the features last" : "the features");
  FAIL_IF(ctx, nvfp4_shape_K(x->shape) != last, NVFP4_EINVAL,
          "linear: %s %s: last dim must be %lld (the local %s features)", what,
          nvfp4_shape_format(x->shape, sb, sizeof sb), (long long)last,
          strcmp(what, "input") == 0 ? "in" : "out");
  return NVFP4_OK;
}


/* Quantize (NVFP4) or copy (baseline) an activation or weight. */
static nvfp4_status prepare (nvfp4_linear *l, const nvfp4_tensor *x,
                             const nvfp4_qopts *q, nvfp4_tensor **out) {
  if (quantized(l)) return nvfp4_quantize(l->ctx, x, q, out);
  return nvfp4_tensor_clone(x, out);
}


/* Drop the rowwise copy of a saved FP4 input (TE keeps columnwise only,
** spec/sp-linear-and-gather.md §2.4). */
static void drop_rowwise (nvfp4_tensor *t) {
  if (t == NULL || t->dtype != NVFP4_FP4) return;
  nvfp4i_buf_free(t->ctx, &t->row_data);
  nvfp4i_buf_free(t->ctx, &t->row_scale);
  t->has_row = 0;
}


/* A layer's step with arguments checked locally: with TP > 1 the group's
** ranks agree on the verdict before the step's first collective, so a rank
** whose arguments fail keeps its error and its peers get NVFP4_EPEER
** naming it, instead of waiting in that collective. */
static nvfp4_status agree_args (nvfp4_linear *l, const char *what, nvfp4_status local) {
  if (l->tp > 1) return nvfp4i_comm_agree_layer(l->cfg.tp_group, what, l->number, local);
  return local;
}


/* Before each collective of a step (TP > 1): the ranks' statuses of the
** local work since the last one (quantizing, a GEMM), so that a failure on
** one rank (a shard whose M is not a multiple of 16, memory, a device
** error) reaches its peers as EPEER instead of leaving them inside the
** collective; every rank then takes the fail path.  Uses st, dist, l. */
#define AGREE_OR_FAIL(what) do {                                  \
    if (dist) st = agree_args(l, (what), st);                     \
    if (st != NVFP4_OK) goto fail;                                \
  } while (0)


/* linear_forward's argument checks (local). */
static nvfp4_status forward_args (nvfp4_linear *l, const nvfp4_tensor *x, nvfp4_tensor **y) {
  const nvfp4_linear_config *c = &l->cfg;
  nvfp4_ctx *ctx = l->ctx;
  char sb[128];
  FAIL_IF(ctx, y == NULL, NVFP4_EINVAL, "linear_forward: y is NULL");
  *y = NULL;
  CHECK(check_activation(l, x, "input", l->K_l));
  FAIL_IF(ctx, c->parallel == NVFP4_PARALLEL_ROW && c->sequence_parallel &&
          x->shape.dim[0] % l->tp != 0, NVFP4_EINVAL,
          "linear: row parallel SP input %s: its sequence dim (the first) has size %lld, "
          "not divisible by TP %d "
          "(the output is reduce-scattered along it)",
          nvfp4_shape_format(x->shape, sb, sizeof sb), (long long)x->shape.dim[0], l->tp);
  FAIL_IF(ctx, quantized(l) && x->dtype != NVFP4_BF16 &&
          (!c->recipe.no_input_rht || !c->recipe.no_grad_rht), NVFP4_EINVAL,
          "linear: the NVFP4 recipe's RHT needs bf16 activations, input is %s "
          "(switch input and grad RHT off, or pass bf16)", nvfp4_dtype_name(x->dtype));
  return NVFP4_OK;
}


/* TE's NVFP4 create_tensor checks M % 16 for any usage, so a frozen weight
** (its input quantized rowwise only) does not lift the rule.  Local; after
** the shape agreement, so that a rank whose x differs is named first. */
static nvfp4_status check_input_m (nvfp4_linear *l, const nvfp4_tensor *x) {
  char sb[128];
  FAIL_IF(l->ctx, quantized(l) && nvfp4_shape_M(x->shape) % NVFP4_BLOCK != 0, NVFP4_EINVAL,
          "linear: input %s: M=%lld (the product of its leading dims%s) is not a multiple "
          "of %d, which te.Linear's NVFP4 quantizer requires of every input, rowwise-only "
          "(frozen weight) too", nvfp4_shape_format(x->shape, sb, sizeof sb),
          (long long)nvfp4_shape_M(x->shape), x->shape.ndim == 1 ? ": a 1-D input is one row" : "",
          NVFP4_BLOCK);
  return NVFP4_OK;
}


/* A step of l marks its group as in use by a layer (a group destroyed
** while the layer holds it stays usable by the layer alone): the group to
** unmark after the step, or NULL. */
static nvfp4_comm *step_begin (nvfp4_linear *l) {
  nvfp4_comm *g = l != NULL && l->uses_group ? l->cfg.tp_group : NULL;
  if (g != NULL) g->in_layer++;
  return g;
}

static nvfp4_status step_end (nvfp4_comm *g, nvfp4_status st) {
  if (g != NULL) g->in_layer--;
  return st;
}


static nvfp4_status forward (nvfp4_linear *l, const nvfp4_tensor *x, nvfp4_tensor **y);
static nvfp4_status backward (nvfp4_linear *l, const nvfp4_tensor *dy, nvfp4_tensor **dx,
                              nvfp4_tensor **dw, nvfp4_tensor **db);


nvfp4_status nvfp4_linear_forward (nvfp4_linear *l, const nvfp4_tensor *x,
                                   nvfp4_tensor **y) {
  nvfp4_comm *g = step_begin(l);
  return step_end(g, forward(l, x, y));
}


nvfp4_status nvfp4_linear_backward (nvfp4_linear *l, const nvfp4_tensor *dy,
                                    nvfp4_tensor **dx, nvfp4_tensor **dw,
                                    nvfp4_tensor **db) {
  nvfp4_comm *g = step_begin(l);
  return step_end(g, backward(l, dy, dx, dw, db));
}


static nvfp4_status forward (nvfp4_linear *l, const nvfp4_tensor *x, nvfp4_tensor **y) {
  const nvfp4_linear_config *c;
  nvfp4_ctx *ctx;
  nvfp4_tensor *qx = NULL, *gx = NULL, *out = NULL, *red = NULL, *lent;
  nvfp4_qopts qi, qw;
  nvfp4_status st;
  int col, row, sp, dist, keep, same;
  NVFP4I_CLEAR(y);
  if (l == NULL) return NVFP4_EINVAL;
  ctx = l->ctx;
  c = &l->cfg;
  CHECK(agree_args(l, "linear_forward", forward_args(l, x, y)));
  /* every mode with a TP group gives every rank an input of one shape (row:
  ** [.., K/TP], column: [.., K], SP: dim 0 S/TP): one that differs on some
  ** rank is refused here on every rank, naming the shapes, instead of in the
  ** first collective with an intermediate tensor's */
  same = l->tp > 1 && c->parallel != NVFP4_PARALLEL_NONE;
  if (same)
    CHECK(nvfp4i_comm_check_same(c->tp_group, "linear_forward: x", NVFP4_OK, x->shape,
                                 x->dtype, 0));
  /* where the shapes were compared, every rank reaches the same verdict on
  ** M: no second agreement round (only a local layer's ranks need one) */
  CHECK(same ? check_input_m(l, x) : agree_args(l, "linear_forward", check_input_m(l, x)));
  col = c->parallel == NVFP4_PARALLEL_COLUMN;
  row = c->parallel == NVFP4_PARALLEL_ROW;
  sp = c->sequence_parallel;
  dist = l->tp > 1;
  keep = c->keep_operands;
  /* x may be an operand the last pass lent (a baseline recipe's are plain) */
  if ((lent = unown(l->fwd, x)) == NULL) lent = unown(l->bwd, x);
  forget_forward(l);

  memset(&qi, 0, sizeof qi);
  qi.rowwise = 1;
  qi.columnwise = !c->frozen_weight;
  qi.rht = qi.columnwise && !c->recipe.no_input_rht;
  qi.four_over_six = c->recipe.four_over_six_activations;
  if (col && sp && dist && !c->recipe.no_amax_reduction) qi.amax_group = c->tp_group;
  memset(&qw, 0, sizeof qw);
  qw.rowwise = qw.columnwise = 1;
  qw.two_d = !c->recipe.no_weight_2d;
  qw.four_over_six = c->recipe.four_over_six_weights;

  /* Every collective comes right after AGREE_OR_FAIL, and every other step
  ** only records its status in st (no rank leaves early): the only jumps
  ** to fail are the agreed ones, so all ranks take them together; a last
  ** round gives every rank the same verdict.  Quantize with amax_group
  ** agrees on its own. */
  if ((st = prepare(l, x, &qi, &qx)) == NVFP4_OK &&
      (st = prepare(l, l->w, &qw, &l->w_op)) == NVFP4_OK)
    own(l->fwd, l->w_op);
  if (col && sp && dist) {            /* §4.1: gather the quantized input, rowwise */
    AGREE_OR_FAIL("linear_forward");
    if (quantized(l)) {
      nvfp4_gather_opts g;
      memset(&g, 0, sizeof g);
      g.rowwise = 1;
      g.rule = c->gather_rule;
      st = nvfp4_all_gather(c->tp_group, qx, &g, &gx);
    }
    else st = nvfp4_all_gather_plain(c->tp_group, qx, &gx);
  }
  if (st == NVFP4_OK)
    st = nvfp4i_gemm_ex(ctx, l->w_op, NVFP4_ROWWISE, gx ? gx : qx, NVFP4_ROWWISE,
                        row ? NULL : l->b, x->dtype, c->recipe.kind == NVFP4_RECIPE_BF16, &out);
  if (row && dist) {                   /* §3.1 step 5 / §3.3 */
    AGREE_OR_FAIL("linear_forward");
    if (sp) st = nvfp4_reduce_scatter(c->tp_group, out, &red);
    else st = nvfp4_all_reduce_sum(c->tp_group, out, &red);
    if (st == NVFP4_OK) {
      nvfp4_tensor_destroy(out);
      out = red;
      red = NULL;
    }
  }
  if (st == NVFP4_OK && row && l->b != NULL) st = add_bias(ctx, out, l->b);
  AGREE_OR_FAIL("linear_forward");    /* the last round (alone: st) */

  /* what backward needs */
  if (keep) {
    l->kept[NVFP4_LIN_FPROP_INPUT] = gx ? gx : qx;
    l->kept[NVFP4_LIN_WEIGHT] = l->w_op;
    if (!(col && sp && dist)) l->kept[NVFP4_LIN_WGRAD_INPUT] = qx;
  }
  if (gx != NULL) {
    if (keep) own(l->fwd, gx);
    else nvfp4_tensor_destroy(gx);     /* TE frees the gathered input at once */
    gx = NULL;
  }
  if (!keep) drop_rowwise(qx);
  if (c->frozen_weight && !keep) nvfp4_tensor_destroy(qx);
  else {
    own(l->fwd, qx);
    l->x_wgrad = c->frozen_weight ? NULL : qx;
  }
  qx = NULL;
  if (col && sp && dist)
    l->gathered[NVFP4_LIN_FPROP_INPUT] = quantized(l) ? NVFP4_GATHER_NVFP4 : NVFP4_GATHER_PLAIN;
  l->x_shape = x->shape;
  l->y_shape = out->shape;
  l->act_dt = x->dtype;
  l->have_fwd = 1;
  nvfp4_tensor_destroy(lent);          /* x is not read after this */
  *y = out;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(qx);
  nvfp4_tensor_destroy(gx);
  nvfp4_tensor_destroy(out);
  nvfp4_tensor_destroy(red);
  forget_forward(l);
  nvfp4_tensor_destroy(lent);
  return st;
}


/* ---- backward ----------------------------------------------------------- */

/* Column sums of dy ([.., N_l] -> [N_l]) in params dtype, by the backend's
** col_sum entry (on the CPU the GEMM with a row of ones it always was); st:
** the step's status so far (not OK: nothing computed, but a row+SP sum's
** agreement still takes place, so every rank takes part in it). */
static nvfp4_status bias_grad (nvfp4_linear *l, const nvfp4_tensor *dy, nvfp4_status st,
                               nvfp4_tensor **db) {
  nvfp4_ctx *ctx = l->ctx;
  nvfp4_tensor *s = NULL, *red = NULL;
  *db = NULL;
  if (st == NVFP4_OK) st = nvfp4i_tensor_alloc_plain(ctx, l->b->shape, l->cfg.params_dtype, &s);
  if (st == NVFP4_OK)
    st = ctx->ops->col_sum(ctx, s->data.p, s->dtype, dy->data.p, dy->dtype,
                           nvfp4_shape_M(dy->shape), nvfp4_shape_K(dy->shape));
  if (l->cfg.parallel == NVFP4_PARALLEL_ROW && l->cfg.sequence_parallel && l->tp > 1) {
    /* the sum is collective: the ranks agree on the local part first */
    CHECK_GOTO(agree_args(l, "linear_backward", st), st, fail);
    CHECK_GOTO(nvfp4_all_reduce_sum(l->cfg.tp_group, s, &red), st, fail);
    nvfp4_tensor_destroy(s);
    s = red;
  }
  if (st != NVFP4_OK) goto fail;
  *db = s;
  return NVFP4_OK;
fail:
  nvfp4_tensor_destroy(s);
  return st;
}


/* linear_backward's argument checks (local). */
static nvfp4_status backward_args (nvfp4_linear *l, const nvfp4_tensor *dy, nvfp4_tensor **dx,
                                   nvfp4_tensor **dw, nvfp4_tensor **db) {
  nvfp4_ctx *ctx = l->ctx;
  char a[128], b[128];
  FAIL_IF(ctx, dx == NULL, NVFP4_EINVAL, "linear_backward: dx is NULL");
  *dx = NULL;
  if (dw) *dw = NULL;
  if (db) *db = NULL;
  FAIL_IF(ctx, !l->have_fwd, NVFP4_EUSAGE, "linear_backward: no forward to differentiate");
  CHECK(nvfp4i_check_tensor(ctx, dy, "linear_backward: grad_output"));
  FAIL_IF(ctx, !nvfp4_shape_equal(dy->shape, l->y_shape) || dy->dtype != l->act_dt,
          NVFP4_EINVAL, "linear: grad_output %s %s does not match the output %s %s%s",
          nvfp4_dtype_name(dy->dtype), nvfp4_shape_format(dy->shape, a, sizeof a),
          nvfp4_dtype_name(l->act_dt), nvfp4_shape_format(l->y_shape, b, sizeof b),
          /* row + SP: the output is this rank's shard (reduce-scattered along dim 0) */
          !nvfp4_shape_equal(dy->shape, l->y_shape) &&
          l->cfg.parallel == NVFP4_PARALLEL_ROW && l->cfg.sequence_parallel && l->tp > 1
          ? " (row parallel with sequence_parallel: this rank's shard of grad_output, its first dim split over "
            "the TP group, as its output)" : "");
  return NVFP4_OK;
}


static nvfp4_status backward (nvfp4_linear *l, const nvfp4_tensor *dy, nvfp4_tensor **dx,
                              nvfp4_tensor **dw, nvfp4_tensor **db) {
  const nvfp4_linear_config *c;
  nvfp4_ctx *ctx;
  nvfp4_tensor *gdy = NULL, *dxf = NULL, *dxo = NULL, *xw = NULL, *dwo = NULL,
               *dbo = NULL, *lent;
  nvfp4_handle *h = NULL;
  nvfp4_qopts qg;
  nvfp4_status st;
  int col, row, sp, dist, bf;
  NVFP4I_CLEAR(dx);
  NVFP4I_CLEAR(dw);
  NVFP4I_CLEAR(db);
  if (l == NULL) return NVFP4_EINVAL;
  ctx = l->ctx;
  c = &l->cfg;
  CHECK(agree_args(l, "linear_backward", backward_args(l, dy, dx, dw, db)));
  col = c->parallel == NVFP4_PARALLEL_COLUMN;
  row = c->parallel == NVFP4_PARALLEL_ROW;
  sp = c->sequence_parallel;
  dist = l->tp > 1;
  bf = c->recipe.kind == NVFP4_RECIPE_BF16;
  lent = unown(l->bwd, dy);            /* dy may be the grad_output the last backward lent */
  free_list(l->bwd);
  l->kept[NVFP4_LIN_GRAD_OUTPUT] = NULL;
  if (col && sp && dist) l->kept[NVFP4_LIN_WGRAD_INPUT] = NULL;
  l->gathered[NVFP4_LIN_GRAD_OUTPUT] = l->gathered[NVFP4_LIN_WGRAD_INPUT] = NVFP4_GATHER_NONE;
  l->bwd_failed = 1;                     /* until it returns OK */

  /* grad_output quantizer (§2.1, §2.2, §2.4): rowwise for dgrad, columnwise
  ** for wgrad; RHT and SR; amax reduced over TP for row+SP.  TE drops the
  ** columnwise usage only when "not use_bias and not requires_wgrad", and
  ** use_bias is false inside _Linear for row (bias added after the
  ** reduction): with a frozen weight, a column or local layer's bias keeps
  ** it (no GEMM reads it). */
  memset(&qg, 0, sizeof qg);
  qg.rowwise = 1;
  qg.columnwise = !c->frozen_weight || (l->b != NULL && !row);
  qg.rht = qg.columnwise && !c->recipe.no_grad_rht;
  qg.sr = !c->recipe.no_grad_sr;
  qg.sr_seed = c->recipe.seed + (uint64_t)l->rank * 0x9E3779B97F4A7C15ull;
  qg.sr_offset = l->sr_offset;         /* advanced when the backward succeeds */
  /* no amax_group: row+SP's gather of dY (below) MAX-reduces the amax over
  ** its group whatever the options say, as TE's does, so amax_reduction
  ** plays no part there (README); the other paths quantize dY locally */

  /* As in forward: each collective right after AGREE_OR_FAIL, every other
  ** step only records st, one last round; the only jumps to fail are the
  ** agreed ones. */
  if (row && sp && dist) {             /* §3.2: gather dY, kept N-D (2.21) */
    if (quantized(l)) {
      nvfp4_gather_opts g;
      memset(&g, 0, sizeof g);
      g.quant = &qg;
      g.rule = c->gather_rule;
      st = nvfp4_all_gather(c->tp_group, dy, &g, &gdy);   /* agrees on its arguments itself */
    }
    else st = nvfp4_all_gather_plain(c->tp_group, dy, &gdy);
  }
  else st = prepare(l, dy, &qg, &gdy);  /* local */

  /* §4.2 step 2: start re-gathering the saved input (columnwise) */
  if (!c->frozen_weight && col && sp && dist) {
    AGREE_OR_FAIL("linear_backward");
    if (quantized(l)) {
      nvfp4_gather_opts g;
      memset(&g, 0, sizeof g);
      g.columnwise = 1;
      g.rule = c->gather_rule;
      st = nvfp4_all_gather_async(c->tp_group, l->x_wgrad, &g, &h);
    }
    else st = nvfp4_all_gather_plain(c->tp_group, l->x_wgrad, &xw);
  }

  /* dgrad: dY . W, then the column-parallel reduction */
  if (st == NVFP4_OK &&
      (st = nvfp4i_gemm_ex(ctx, l->w_op, NVFP4_COLUMNWISE, gdy, NVFP4_ROWWISE, NULL,
                           l->act_dt, bf, &dxf)) != NVFP4_OK)
    st = gemm_context(l, st, "dgrad (dX = dY W)");
  if (col && dist) {
    AGREE_OR_FAIL("linear_backward");
    if (sp) st = nvfp4_reduce_scatter(c->tp_group, dxf, &dxo);
    else st = nvfp4_all_reduce_sum(c->tp_group, dxf, &dxo);
    nvfp4_tensor_destroy(dxf);
    dxf = NULL;
  }
  else {
    dxo = dxf;
    dxf = NULL;
  }
  if (st == NVFP4_OK && !nvfp4_shape_equal(dxo->shape, l->x_shape)) {   /* view to inp_shape */
    nvfp4_tensor *r = NULL;
    if ((st = nvfp4_tensor_reshape(dxo, l->x_shape, &r)) == NVFP4_OK) {
      nvfp4_tensor_destroy(dxo);
      dxo = r;
    }
  }

  /* wgrad: dY^T . X, both columnwise (local: the handle's finish too) */
  if (st == NVFP4_OK && !c->frozen_weight) {
    if (h != NULL && (st = nvfp4_handle_wait(h, &xw)) == NVFP4_OK &&
        (st = nvfp4_handle_take(h, &xw)) == NVFP4_OK) {
      nvfp4_handle_destroy(h);
      h = NULL;
    }
    if (st == NVFP4_OK &&
        (st = nvfp4i_gemm_ex(ctx, xw ? xw : l->x_wgrad, NVFP4_COLUMNWISE, gdy,
                             NVFP4_COLUMNWISE, NULL, c->params_dtype, bf, &dwo)) != NVFP4_OK)
      st = gemm_context(l, st, "wgrad (dW = dY^T X)");
  }
  /* the bias gradient when asked for, and always under row+SP (its sum is
  ** a collective: every rank takes part, also one that passed db = NULL;
  ** bias_grad agrees before it) */
  if (l->b != NULL && (db != NULL || (row && sp && dist))) {
    st = bias_grad(l, dy, st, &dbo);
    if (db == NULL) {
      nvfp4_tensor_destroy(dbo);
      dbo = NULL;
    }
  }
  AGREE_OR_FAIL("linear_backward");   /* the last round */

  if (c->keep_operands) {
    l->kept[NVFP4_LIN_GRAD_OUTPUT] = gdy;
    own(l->bwd, gdy);
    gdy = NULL;
    if (xw != NULL) {
      l->kept[NVFP4_LIN_WGRAD_INPUT] = xw;
      own(l->bwd, xw);
      xw = NULL;
    }
  }
  nvfp4_tensor_destroy(gdy);
  nvfp4_tensor_destroy(xw);
  *dx = dxo;
  if (dw) *dw = dwo; else nvfp4_tensor_destroy(dwo);
  if (db) *db = dbo;
  l->bwd_failed = 0;
  if (row && sp && dist)
    l->gathered[NVFP4_LIN_GRAD_OUTPUT] = !quantized(l) ? NVFP4_GATHER_PLAIN
                                         : nvfp4i_shard_quantizable(dy->shape) ? NVFP4_GATHER_NVFP4
                                                                               : NVFP4_GATHER_FALLBACK;
  if (col && sp && dist && !c->frozen_weight)
    l->gathered[NVFP4_LIN_WGRAD_INPUT] = quantized(l) ? NVFP4_GATHER_NVFP4 : NVFP4_GATHER_PLAIN;
  /* a failed backward leaves the offset: a retry draws the bits a layer
  ** that never failed would */
  l->sr_offset += (uint64_t)nvfp4_shape_numel(dy->shape) + 1;
  nvfp4_tensor_destroy(lent);          /* dy is not read after this */
  return NVFP4_OK;
fail:
  nvfp4_handle_destroy(h);
  nvfp4_tensor_destroy(gdy);
  nvfp4_tensor_destroy(dxf);
  nvfp4_tensor_destroy(dxo);
  nvfp4_tensor_destroy(xw);
  nvfp4_tensor_destroy(dwo);
  nvfp4_tensor_destroy(dbo);
  nvfp4_tensor_destroy(lent);
  return st;
}
