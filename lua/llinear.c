/*
** llinear.c -- Lua bindings of the GEMM and the Linear layer (lib/gemm.c,
** lib/linear.c).
**
**   nvfp4.gemm(a, "rowwise"|"columnwise", b, usage [, {bias =, dtype =}])
**   nvfp4.gemm_ref64(a, usage, b, usage)        -> fp32, float64 oracle
**   nvfp4.rel_error_group(group, x, ref)         -> number (sums over group)
**   nvfp4.linear{in_features =, out_features =, parallel = "row", ...}
**     l:forward(x) -> y;  l:backward(dy) -> dx, dw, db
**     l:weight(), l:bias(), l:set_weight(w), l:set_bias(b)
**     l:operand("fprop_input"|"weight"|"wgrad_input"|"grad_output")
**     l:config() -> table
*/
#include <string.h>
#include "lnvfp4.h"

#define LINEAR_T  "nvfp4.linear"

typedef struct LLinear {
  nvfp4_linear *l;              /* NULL: closed */
  nvfp4_linear *zombie;         /* closed inside a binding call (nvfp4L_inbinding) */
  nvfp4_linear_config cfg;      /* as created (l:config()) */
} LLinear;


static const char *const usage_names[] = {"rowwise", "columnwise", NULL};


/* The open layer at 1, for its method `name`; its group (uservalue 1), when
** it has one, must be open too (closed in Lua, it is done with). */
static nvfp4_linear *tolinear (lua_State *L, const char *name) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  int closed;
  /* named here: called as pcall(l.forward, l, x) Lua knows no name ('?') */
  if (p->l == NULL) luaL_error(L, "calling '%s' on bad self (linear layer is closed)", name);
  closed = lua_getiuservalue(L, 1, 1) != LUA_TNIL && nvfp4L_commof(L, -1) == NULL;
  lua_pop(L, 1);
  if (closed)
    luaL_error(L, "calling '%s' on bad self (its group (comm) was closed: close a layer "
               "before its group)", name);
  return p->l;
}


/* The layer at 1 as a call that checked it (tolinear) holds it: closed
** since by Lua code the call ran (deferred, nvfp4L_inbinding), its zombie. */
static nvfp4_linear *heldlinear (lua_State *L, const char *name) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  return p->l != NULL ? p->l : p->zombie != NULL ? p->zombie : tolinear(L, name);
}


/* Push a clone of a tensor the layer at 1 owns (what get returns: NULL
** gives nil), or raise.  get is called after the new handle is made, and
** again for the second call after a collection: either may run finalizers
** that replace or free the layer's tensors (l:set_weight, l:forward), so a
** pointer taken before would dangle. */
static int pushclone (lua_State *L, const nvfp4_tensor *(*get) (lua_State *L)) {
  LTensor *p = nvfp4L_newtensor(L);
  const nvfp4_tensor *t = get(L);
  if (t != NULL && nvfp4L_nomem_collect(L, nvfp4_tensor_clone(t, &p->t)) && (t = get(L)) != NULL)
    nvfp4L_checkstatus(L, nvfp4_tensor_clone(t, &p->t));
  if (t == NULL) lua_pushnil(L);
  return 1;
}


/* ---- GEMM ------------------------------------------------------------- */

static const char *const gemm_opts[] = {"bias", "dtype", NULL};

static int mod_gemm (lua_State *L) {
  nvfp4_tensor *a, *b, *bias = NULL;
  nvfp4_usage ua, ub;
  nvfp4_dtype dt;
  LTensor *p;
  nvfp4L_totensor(L, 1);                    /* the arguments' errors in their order */
  ua = (nvfp4_usage)nvfp4L_checkname(L, 2, NULL, usage_names, "usage");
  nvfp4L_totensor(L, 3);
  ub = (nvfp4_usage)nvfp4L_checkname(L, 4, NULL, usage_names, "usage");
  lua_settop(L, 5);
  nvfp4L_checkopts(L, 5, gemm_opts);
  /* the options' __index may run Lua code that closes a tensor (from a
  ** coroutine, which the close's stack walk cannot tie to this call): the
  ** pointers are taken after them; the bias stays on the stack (6) */
  dt = nvfp4L_optfloat(L, 5, "dtype", NVFP4_F32);
  if (nvfp4L_getopt(L, 5, "bias") != LUA_TNIL) bias = nvfp4L_opttensor(L, 5, "bias");
  a = nvfp4L_heldtensor(L, 1);
  b = nvfp4L_heldtensor(L, 3);
  p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_gemm(nvfp4L_getctx(L), a, ua, b, ub, bias, dt, &p->t));
  return 1;
}


static int mod_gemm_ref64 (lua_State *L) {
  nvfp4_tensor *a = nvfp4L_totensor(L, 1), *b = nvfp4L_totensor(L, 3);
  nvfp4_usage ua = (nvfp4_usage)nvfp4L_checkname(L, 2, NULL, usage_names, "usage");
  nvfp4_usage ub = (nvfp4_usage)nvfp4L_checkname(L, 4, NULL, usage_names, "usage");
  LTensor *p;
  luaL_argcheck(L, lua_isnone(L, 5), 5, "gemm_ref64 takes no options (no bias, fp32 out: add a "
                "bias to its result)");
  p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_gemm_ref64(nvfp4L_getctx(L), a, ua, b, ub, &p->t));
  return 1;
}


/* nvfp4.rel_error_group(group, x, ref): ||x - ref|| / ||ref|| over the
** concatenation of every rank's tensors (collective); group may be nil. */
static int mod_rel_error_group (lua_State *L) {
  nvfp4_comm *c = lua_isnil(L, 1) ? NULL : nvfp4L_tocomm(L, 1);
  nvfp4_tensor *x, *ref;
  nvfp4_status st;
  double e = 0;
  if (c != NULL && (nvfp4L_tensorof(L, 2) == NULL || nvfp4L_tensorof(L, 3) == NULL))
    (void)nvfp4_rel_error(c, NULL, NULL, &e);    /* the group's other ranks learn of it */
  x = nvfp4L_totensor(L, 2);
  ref = nvfp4L_totensor(L, 3);
  if ((st = nvfp4_rel_error(c, x, ref, &e)) != NVFP4_OK) {
    const char *m = nvfp4_last_error(nvfp4L_getctx(L));   /* named as Lua calls it */
    if (strncmp(m, "rel_error:", 10) == 0)
      return luaL_error(L, "rel_error_group:%s (%s)", m + 10, nvfp4_status_string(st));
    nvfp4L_checkstatus(L, st);
  }
  lua_pushnumber(L, e);
  return 1;
}


/* ---- the Linear layer -------------------------------------------------- */

static const char *const linear_opts[] = {
  "in_features", "out_features", "bias", "parallel", "sequence_parallel", "group",
  "params_dtype", "recipe", "input_rht", "weight_2d", "grad_rht", "grad_sr",
  "amax_reduction", "seed", "rule", "frozen_weight", "keep_operands", "init_seed",
  "four_over_six", NULL
};
static const char *const parallel_names[] = {"none", "column", "row", NULL};
static const char *const recipe_names[] = {"nvfp4", "bf16", "fp32", NULL};
static const char *const rule_names[] = {"flat2d", "nd", NULL};
/* TE's nvfp4_4over6 values: bit 0 weights, bit 1 activations */
static const char *const fo6_names[] = {"none", "weights", "activations", "all", NULL};


/* nvfp4.linear's options (the table at 1) into the config userdata at 2;
** the group value is left at 3 (nil when not given).  It is read first and
** once, and kept as the userdata's user value, where mod_linear's error
** path finds it without a second read (an __index there would run on the
** failing rank alone). */
static int linear_args (lua_State *L) {
  nvfp4_linear_config *cp = (nvfp4_linear_config *)lua_touserdata(L, 2), c;
  lua_settop(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  nvfp4L_keepopt(L, 1, "group", 2);                                     /* 3 */
  nvfp4L_checkopts(L, 1, linear_opts);
  memset(&c, 0, sizeof c);
  if (nvfp4L_getopt(L, 1, "in_features") == LUA_TNIL)
    nvfp4L_opterror(L, 1, "in_features", "is required");
  if (nvfp4L_getopt(L, 1, "out_features") == LUA_TNIL)
    nvfp4L_opterror(L, 1, "out_features", "is required");
  lua_pop(L, 2);
  c.in_features = nvfp4L_optint(L, 1, "in_features", 0);
  c.out_features = nvfp4L_optint(L, 1, "out_features", 0);
  c.bias = nvfp4L_optbool(L, 1, "bias", 0);
  c.parallel = (nvfp4_parallel)nvfp4L_optname(L, 1, "parallel", parallel_names, 0);
  c.sequence_parallel = nvfp4L_optbool(L, 1, "sequence_parallel", 0);
  c.recipe.kind = (nvfp4_recipe_kind)nvfp4L_optname(L, 1, "recipe", recipe_names, 0);
  c.recipe.no_input_rht = !nvfp4L_optbool(L, 1, "input_rht", 1);
  c.recipe.no_weight_2d = !nvfp4L_optbool(L, 1, "weight_2d", 1);
  c.recipe.no_grad_rht = !nvfp4L_optbool(L, 1, "grad_rht", 1);
  c.recipe.no_grad_sr = !nvfp4L_optbool(L, 1, "grad_sr", 1);
  c.recipe.no_amax_reduction = !nvfp4L_optbool(L, 1, "amax_reduction", 1);
  c.recipe.seed = (uint64_t)nvfp4L_optint(L, 1, "seed", 1);
  {
    int f = nvfp4L_optname(L, 1, "four_over_six", fo6_names, 0);
    c.recipe.four_over_six_weights = (f & 1) != 0;
    c.recipe.four_over_six_activations = (f & 2) != 0;
  }
  c.gather_rule = (nvfp4_cw_rule)nvfp4L_optname(L, 1, "rule", rule_names, 0);
  c.frozen_weight = nvfp4L_optbool(L, 1, "frozen_weight", 0);
  c.keep_operands = nvfp4L_optbool(L, 1, "keep_operands", 0);
  c.init_seed = (uint64_t)nvfp4L_optint(L, 1, "init_seed", 1);
  c.params_dtype = nvfp4L_optfloat(L, 1, "params_dtype", c.params_dtype);
  if (!lua_isnil(L, 3)) c.tp_group = nvfp4L_optcomm(L, 1, "group");   /* the value at 3, the top */
  *cp = c;
  return 1;                               /* the group, or nil */
}


/* nvfp4.linear{..}: every key optional except the two feature counts; the
** recipe switches default to TE's NVFP4 defaults (all on).  Collective
** over the group (the library's create agrees on the verdict and the
** config): when this rank's options are refused here, the library is
** called with a config it refuses first, so that the group's other ranks
** learn of it (EPEER) instead of waiting in the agreement. */
static int mod_linear (lua_State *L) {
  nvfp4_linear_config *c;
  LLinear *p;
  lua_settop(L, 1);
  c = (nvfp4_linear_config *)lua_newuserdatauv(L, sizeof *c, 1);     /* 2 */
  lua_pushcfunction(L, linear_args);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {                           /* 3: the error */
    nvfp4_comm *g = nvfp4L_keptcomm(L, 2);     /* the group linear_args read */
    if (g != NULL) {
      nvfp4_linear_config tell;
      nvfp4_linear *none = NULL;
      memset(&tell, 0, sizeof tell);
      tell.tp_group = g;                  /* in_features 0: refused, and told */
      (void)nvfp4_linear_create(nvfp4L_getctx(L), &tell, &none);
    }
    return nvfp4L_reraise(L);
  }
  nvfp4L_mempressure(L, "a linear layer");   /* the layer holds library memory too */
  p = (LLinear *)lua_newuserdatauv(L, sizeof(LLinear), 1);   /* 4, closed first */
  p->l = p->zombie = NULL;
  luaL_setmetatable(L, LINEAR_T);
  if (c->tp_group != NULL) {
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, -2, 1);          /* the layer keeps its group alive */
  }
  nvfp4L_checkstatus(L, nvfp4_linear_create(nvfp4L_getctx(L), c, &p->l));
  p->cfg = *c;
  return 1;
}


/* l:config() -> a table of the layer's settings as created (the option
** names of nvfp4.linear{..}, plus tp, the group's size). */
static int linear_config (lua_State *L) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  const nvfp4_linear_config *c = &p->cfg;
  const nvfp4_recipe *r = &c->recipe;
  tolinear(L, "config");                /* raises when closed */
  lua_createtable(L, 0, 22);
#define SETI(k, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, k))
#define SETB(k, v) (lua_pushboolean(L, (v) != 0), lua_setfield(L, -2, k))
#define SETS(k, v) (lua_pushstring(L, v), lua_setfield(L, -2, k))
  SETI("in_features", c->in_features);
  SETI("out_features", c->out_features);
  SETB("bias", c->bias);
  SETS("parallel", parallel_names[c->parallel]);
  SETB("sequence_parallel", c->sequence_parallel);
  SETI("tp", c->tp_group ? nvfp4_comm_size(c->tp_group) : 1);
  SETS("params_dtype", nvfp4_dtype_name(c->params_dtype));
  SETS("recipe", recipe_names[r->kind]);
  SETB("input_rht", !r->no_input_rht);
  SETB("weight_2d", !r->no_weight_2d);
  SETB("grad_rht", !r->no_grad_rht);
  SETB("grad_sr", !r->no_grad_sr);
  SETB("amax_reduction", !r->no_amax_reduction);
  SETS("four_over_six", fo6_names[(r->four_over_six_weights ? 1 : 0) |
                                  (r->four_over_six_activations ? 2 : 0)]);
  SETS("rule", rule_names[c->gather_rule]);
  SETB("frozen_weight", c->frozen_weight);
  SETB("keep_operands", c->keep_operands);
  SETI("seed", r->seed);
  SETI("init_seed", c->init_seed);
#undef SETI
#undef SETB
#undef SETS
  if (lua_getiuservalue(L, 1, 1) != LUA_TNIL) lua_setfield(L, -2, "group");
  else lua_pop(L, 1);
  return 1;
}


static int linear_free (lua_State *L) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  nvfp4_linear_destroy(p->l);   /* NULL-safe */
  nvfp4_linear_destroy(p->zombie);
  p->l = p->zombie = NULL;
  return 0;
}


/* l:close() and <close>: at once, unless a binding call below may hold it. */
static int linear_close (lua_State *L) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  return nvfp4L_close(L, p, l, linear_free);
}


/* __gc: the collector's call frees, one from Lua code is a close. */
static int linear_gc (lua_State *L) {
  return nvfp4L_finalizing(L) ? linear_free(L) : linear_close(L);
}


static int linear_tostring (lua_State *L) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  if (p->l == NULL) lua_pushliteral(L, "nvfp4.linear (closed)");
  else lua_pushfstring(L, "nvfp4.linear %p", (void *)p->l);
  return 1;
}


/* The layer's group (waiting in the agreement of its forward or backward)
** learns that this rank's call failed: the call with no tensor. */
static void tell_group (nvfp4_linear *l, int backward) {
  nvfp4_tensor *t1 = NULL, *t2 = NULL, *t3 = NULL;
  if (backward) (void)nvfp4_linear_backward(l, NULL, &t1, &t2, &t3);
  else (void)nvfp4_linear_forward(l, NULL, &t1);
}


/* A collective call's tensor argument that the binding refuses: on a layer
** with a group, the library is called with no tensor first, so that the
** group's other ranks (waiting in its agreement) learn of it; the error is
** then raised by nvfp4L_totensor, as before. */
static nvfp4_tensor *collective_tensor (lua_State *L, int arg, nvfp4_linear *l, int backward) {
  if (nvfp4L_tensorof(L, arg) == NULL) tell_group(l, backward);
  return nvfp4L_totensor(L, arg);
}


/* The layer at 1 for forward or backward: tolinear, whose refusal of a
** layer whose group was closed (on this rank) reaches the group first, as
** collective_tensor's does (the layer still holds the comm: the library
** keeps it for the layer). */
static nvfp4_linear *collective_linear (lua_State *L, const char *name, int backward) {
  LLinear *p = (LLinear *)luaL_checkudata(L, 1, LINEAR_T);
  if (p->l != NULL) {
    if (lua_getiuservalue(L, 1, 1) != LUA_TNIL && nvfp4L_commof(L, -1) == NULL)
      tell_group(p->l, backward);
    lua_pop(L, 1);
  }
  return tolinear(L, name);
}


static int linear_forward (lua_State *L) {
  nvfp4_linear *l = collective_linear(L, "forward", 0);
  nvfp4_tensor *x = collective_tensor(L, 2, l, 0);
  LTensor *y = nvfp4L_newtensor(L);
  nvfp4L_checkstatus(L, nvfp4_linear_forward(l, x, &y->t));
  return 1;
}


/* l:backward(dy) -> dx, dw (nil when frozen), db (nil without a bias). */
static int linear_backward (lua_State *L) {
  nvfp4_linear *l = collective_linear(L, "backward", 1);
  nvfp4_tensor *dy = collective_tensor(L, 2, l, 1);
  LTensor *dx = nvfp4L_newtensor(L), *dw = nvfp4L_newtensor(L), *db = nvfp4L_newtensor(L);
  nvfp4L_checkstatus(L, nvfp4_linear_backward(l, dy, &dx->t, &dw->t, &db->t));
  if (dw->t == NULL) { lua_pushnil(L); lua_replace(L, -3); }
  if (db->t == NULL) { lua_pushnil(L); lua_replace(L, -2); }
  return 3;
}


static const nvfp4_tensor *get_weight (lua_State *L) {
  return nvfp4_linear_weight(heldlinear(L, "weight"));
}

static int linear_weight (lua_State *L) {
  (void)tolinear(L, "weight");
  return pushclone(L, get_weight);
}


static const nvfp4_tensor *get_bias (lua_State *L) {
  return nvfp4_linear_bias(heldlinear(L, "bias"));
}

static int linear_bias (lua_State *L) {
  (void)tolinear(L, "bias");
  return pushclone(L, get_bias);
}


static int linear_set_weight (lua_State *L) {
  nvfp4L_checkstatus(L, nvfp4_linear_set_weight(tolinear(L, "set_weight"),
                                                nvfp4L_totensor(L, 2)));
  return 0;
}


static int linear_set_bias (lua_State *L) {
  nvfp4L_checkstatus(L, nvfp4_linear_set_bias(tolinear(L, "set_bias"),
                                              nvfp4L_totensor(L, 2)));
  return 0;
}


/* nvfp4_linear_operand's names, in its order */
static const char *const operand_names[] = {"fprop_input", "weight", "wgrad_input",
                                            "grad_output", NULL};

static const nvfp4_tensor *get_operand (lua_State *L) {
  nvfp4_linear *l = heldlinear(L, "operand");
  int which = nvfp4L_checkname(L, 2, NULL, operand_names, "operand");
  const nvfp4_tensor *t = NULL;
  nvfp4L_checkstatus(L, nvfp4_linear_operand_get(l, (nvfp4_linear_operand)which, &t));
  return t;
}

static int linear_operand (lua_State *L) {
  lua_settop(L, 2);
  (void)tolinear(L, "operand");
  (void)get_operand(L);     /* the arguments' errors before anything is made */
  return pushclone(L, get_operand);
}


/* l:gather_path(name): how the last pass gathered the operand over the TP
** group: "nvfp4", "fallback" (a shard not quantizable, gathered in high
** precision and quantized after), "plain" (a baseline recipe), or nil (not
** gathered).  nvfp4_linear_gather_path. */
static int linear_gather_path (lua_State *L) {
  static const char *const paths[] = {NULL, "nvfp4", "fallback", "plain"};
  nvfp4_linear *l = tolinear(L, "gather_path");
  int which = nvfp4L_checkname(L, 2, NULL, operand_names, "operand");
  nvfp4_gather_path p = NVFP4_GATHER_NONE;
  nvfp4L_checkstatus(L, nvfp4_linear_gather_path(l, (nvfp4_linear_operand)which, &p));
  if (p == NVFP4_GATHER_NONE) lua_pushnil(L);
  else lua_pushstring(L, paths[p]);
  return 1;
}


static const luaL_Reg linear_meth[] = {
  {"gather_path", linear_gather_path},
  {"forward", linear_forward},
  {"backward", linear_backward},
  {"weight", linear_weight},
  {"bias", linear_bias},
  {"set_weight", linear_set_weight},
  {"set_bias", linear_set_bias},
  {"operand", linear_operand},
  {"config", linear_config},
  {"close", linear_close},
  {NULL, NULL}
};


static const luaL_Reg linear_metameth[] = {
  {"__index", NULL},
  {"__gc", linear_gc},
  {"__close", linear_close},
  {"__tostring", linear_tostring},
  {NULL, NULL}
};


static const luaL_Reg mod_funcs[] = {
  {"gemm", mod_gemm},
  {"gemm_ref64", mod_gemm_ref64},
  {"rel_error_group", mod_rel_error_group},
  {"linear", mod_linear},
  {NULL, NULL}
};


void nvfp4L_open_linear (lua_State *L, int modidx) {
  luaL_newmetatable(L, LINEAR_T);
  luaL_setfuncs(L, linear_metameth, 0);
  nvfp4L_protectmeta(L, LINEAR_T);
  luaL_newlibtable(L, linear_meth);
  luaL_setfuncs(L, linear_meth, 0);
  nvfp4L_nameable(L, "nvfp4.linear");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushvalue(L, modidx);
  luaL_setfuncs(L, mod_funcs, 0);
  lua_pop(L, 1);
}
