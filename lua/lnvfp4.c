/*
** lnvfp4.c -- the `nvfp4` Lua module: the context, shapes, tensors,
** quantize / dequantize / swap_first_dims, byte equality and relative error.
** Communicators, gathers and the watchdog are in lnvfp4comm.c, the Linear
** layer in llinear.c; the helpers all of them share are in lnvfp4.h.
** A strict binding (style.md §3.8): errors are raised, option tables reject
** unknown keys, dims are 1-based.
*/
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lnvfp4.h"


/*
** {======================================================
** Helpers shared by the binding files (lnvfp4.h)
** =======================================================
*/

/* lua_gc's -1 inside a finalizer (collect), and a finalizer's call named
** "__gc" (nvfp4L_finalizing): Lua 5.4.4 */
#if defined(LUA_VERSION_RELEASE_NUM) && LUA_VERSION_RELEASE_NUM < 50404
#error "nvfp4-lua needs Lua 5.4.4 or later"
#endif

/* The registry's context userdata: the context, and the least library
** memory (nvfp4_ctx_memory) seen since the binding's last collection. */
typedef struct LCtx {
  nvfp4_ctx *ctx;
  size_t low;
} LCtx;

static LCtx *getlctx (lua_State *L) {
  LCtx *p;
  lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_CTX);  /* ctx userdata */
  p = (LCtx *)lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (p == NULL || p->ctx == NULL)
    luaL_error(L, "nvfp4: no context (the module is not open)");
  return p;
}


nvfp4_ctx *nvfp4L_getctx (lua_State *L) {
  return getlctx(L)->ctx;
}


/* Lua's collector counts a tensor as its small handle, not as the library
** memory behind it (host or device): a loop making large tensors would
** keep its dead ones until the Lua heap grew, which it hardly does, and run
** the host or the GPU out of memory.  So, as Lua's own pause does for its
** heap (LUAI_GCPAUSE 200: a cycle when the heap has doubled), a full
** collection runs before an object is made once the library memory passes
** twice the least it was since the last such collection (seen as objects
** are made: the script's own collections and closes lower it too) and
** NVFP4L_GC_MIN, unless the collector is stopped (collectgarbage "stop",
** or a finalizer running: lua_gc then answers -1 and must not be called). */
#define NVFP4L_GC_MIN ((size_t)64 << 20)

/* A full collection, when the collector runs; 1 if it did. */
static int collect (lua_State *L, LCtx *p) {
  if (lua_gc(L, LUA_GCISRUNNING) != 1 || lua_gc(L, LUA_GCCOLLECT) != 0) return 0;
  p->low = nvfp4_ctx_memory(p->ctx);
  return 1;
}

void nvfp4L_protectmeta (lua_State *L, const char *tname) {
  lua_pushstring(L, tname);
  lua_setfield(L, -2, "__metatable");
}


void nvfp4L_notclosing (lua_State *L, const char *what) {
  const int closing = lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_CLOSING) == LUA_TBOOLEAN;
  lua_pop(L, 1);
  if (closing)
    luaL_error(L, "cannot make %s while the Lua state closes (in a finalizer that its end runs): "
               "it would never be freed", what);
}

void nvfp4L_mempressure (lua_State *L, const char *what) {
  LCtx *p = getlctx(L);
  size_t now;
  nvfp4L_notclosing(L, what);
  now = nvfp4_ctx_memory(p->ctx);
  if (now < p->low) p->low = now;
  if (now > NVFP4L_GC_MIN && now / 2 > p->low) collect(L, p);
}


/* ENOMEM from a call that loses nothing and involves no peer: collect the
** garbage (the dead tensors' memory, which the collector may not have
** reached) and say so, for the caller to call again; any other error is
** raised as nvfp4L_checkstatus does; OK: 0. */
int nvfp4L_nomem_collect (lua_State *L, nvfp4_status s) {
  if (s == NVFP4_ENOMEM && collect(L, getlctx(L))) return 1;
  nvfp4L_checkstatus(L, s);
  return 0;
}


void nvfp4L_checkstatus (lua_State *L, nvfp4_status s) {
  if (s != NVFP4_OK)
    luaL_error(L, "%s (%s)", nvfp4_last_error(nvfp4L_getctx(L)),
               nvfp4_status_string(s));
}


nvfp4_tensor *nvfp4L_tensorof (lua_State *L, int idx) {
  LTensor *p = (LTensor *)luaL_testudata(L, idx, NVFP4L_TENSOR);
  return p != NULL ? p->t : NULL;
}


/* The key under which the running C function is in the tensors' method
** table (NULL: it is none of them), whatever name the call gave it:
** pcall(t.shape, t) gives none, t.shape(t) a field's, t[m](t) '?'.  The key
** lives as long as the table (the registry's metatable). */
static const char *self_method (lua_State *L) {
  lua_Debug ar;
  const char *name = NULL;
  if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "f", &ar)) return NULL;  /* pushes the function */
  if (luaL_getmetatable(L, NVFP4L_TENSOR) == LUA_TTABLE &&
      lua_getfield(L, -1, "__index") == LUA_TTABLE) {
    lua_pushnil(L);
    while (name == NULL && lua_next(L, -2) != 0) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, -5)) name = lua_tostring(L, -2);
      lua_pop(L, 1);
    }
  }
  return name;                /* (what it pushed goes with the error its caller raises) */
}


nvfp4_tensor *nvfp4L_totensor (lua_State *L, int arg) {
  LTensor *p = (LTensor *)luaL_checkudata(L, arg, NVFP4L_TENSOR);
  if (p->t == NULL) {
    /* a method names itself however it was called, as handles and layers do */
    const char *m = arg == 1 ? self_method(L) : NULL;
    if (m != NULL) luaL_error(L, "calling '%s' on bad self (tensor is closed)", m);
    luaL_argerror(L, arg, "tensor is closed");
  }
  return p->t;
}


nvfp4_tensor *nvfp4L_tensorheld (lua_State *L, int idx) {
  LTensor *p = (LTensor *)luaL_testudata(L, idx, NVFP4L_TENSOR);
  return p == NULL ? NULL : p->t != NULL ? p->t : p->zombie;
}


nvfp4_tensor *nvfp4L_heldtensor (lua_State *L, int arg) {
  nvfp4_tensor *t;
  luaL_checkudata(L, arg, NVFP4L_TENSOR);
  if ((t = nvfp4L_tensorheld(L, arg)) == NULL) luaL_argerror(L, arg, "tensor is closed");
  return t;
}


LTensor *nvfp4L_newtensor (lua_State *L) {
  LTensor *p;
  nvfp4L_mempressure(L, "a tensor");
  p = (LTensor *)lua_newuserdatauv(L, sizeof(LTensor), 0);
  p->t = p->zombie = NULL;
  luaL_setmetatable(L, NVFP4L_TENSOR);
  return p;
}


void nvfp4L_pushshape (lua_State *L, nvfp4_shape s) {
  int i;
  lua_createtable(L, s.ndim, 0);
  for (i = 0; i < s.ndim; i++) {
    lua_pushinteger(L, (lua_Integer)s.dim[i]);
    lua_rawseti(L, -2, i + 1);
  }
  luaL_setmetatable(L, NVFP4L_SHAPE);
}


const char *nvfp4L_gotvalue (lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER)
    return lua_tonumber(L, idx) != lua_tonumber(L, idx) ? "nan" : luaL_tolstring(L, idx, NULL);
  if (lua_type(L, idx) == LUA_TSTRING)
    return lua_pushfstring(L, "'%s' (a string)", lua_tostring(L, idx));
  return luaL_typename(L, idx);
}


nvfp4_shape nvfp4L_checkshape (lua_State *L, int arg) {
  nvfp4_shape s;
  lua_Integer n, i;
  memset(&s, 0, sizeof s);
  luaL_checktype(L, arg, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, arg);
  if (n > NVFP4_MAX_DIMS)
    luaL_argerror(L, arg, lua_pushfstring(L, "shape has %I dims, more than %d", n, NVFP4_MAX_DIMS));
  for (i = 1; i <= n; i++) {
    int isint;
    lua_Integer d;
    lua_rawgeti(L, arg, i);
    d = lua_tointegerx(L, -1, &isint);
    if (!isint || d < 0 || lua_type(L, -1) != LUA_TNUMBER)     /* "16" too: a dim is a number */
      luaL_argerror(L, arg, lua_pushfstring(L, "shape dim %d must be a non-negative integer, got %s",
                                            (int)i, nvfp4L_gotvalue(L, -1)));
    s.dim[i - 1] = (int64_t)d;
    lua_pop(L, 1);
  }
  s.ndim = (int)n;
  return s;
}


/* luaL_checkinteger without Lua's string coercion: "2" is refused here as
** it is in a shape or an option table ({"2"}, {seed = "2"}), "number
** expected, got string". */
lua_Integer nvfp4L_checkint (lua_State *L, int arg) {
  if (lua_type(L, arg) != LUA_TNUMBER) luaL_typeerror(L, arg, "number");
  return luaL_checkinteger(L, arg);
}


int nvfp4L_checkdim (lua_State *L, int arg, int ndim) {
  lua_Integer d = nvfp4L_checkint(L, arg);
  if (d < 1 || d > ndim)
    luaL_argerror(L, arg, lua_pushfstring(L, "dim %I is outside 1..%d", d, ndim));
  return (int)d - 1;   /* the one place where Lua dims become C dims */
}


/* The index of the value at idx in names, or -1 after pushing "<what>
** must be one of 'a', 'b'; got 'x'" (or "got <type>"; what may be NULL).
** Nothing is pushed before idx is read: idx may be above the top (none). */
static int findname (lua_State *L, int idx, const char *def, const char *const names[],
                     const char *what) {
  const char *s = NULL, *tn;
  int i;
  idx = lua_absindex(L, idx);
  tn = luaL_typename(L, idx);
  if (def != NULL && lua_isnoneornil(L, idx)) s = def;
  else if (lua_type(L, idx) == LUA_TSTRING) s = lua_tostring(L, idx);
  for (i = 0; s != NULL && names[i] != NULL; i++)
    if (strcmp(s, names[i]) == 0) return i;
  lua_pushfstring(L, "%s%smust be one of", what ? what : "", what ? " " : "");
  for (i = 0; names[i] != NULL; i++)
    lua_pushfstring(L, "%s%s '%s'", lua_tostring(L, -1), i > 0 ? "," : "", names[i]);
  if (s != NULL) lua_pushfstring(L, "%s; got '%s'", lua_tostring(L, -1), s);
  else lua_pushfstring(L, "%s; got %s", lua_tostring(L, -1), tn);
  return -1;
}

int nvfp4L_checkname (lua_State *L, int arg, const char *def, const char *const names[],
                      const char *what) {
  const int i = findname(L, arg, def, names, what);
  return i >= 0 ? i : luaL_argerror(L, arg, lua_tostring(L, -1));
}


static const char *const dtype_names[] = {"fp32", "bf16", "u8", NULL};
/* the dtypes of values (computing ones: no u8), in nvfp4_dtype's order */
static const char *const float_names[] = {"fp32", "bf16", NULL};

nvfp4_dtype nvfp4L_checkdtype (lua_State *L, int arg, const char *def) {
  return (nvfp4_dtype)nvfp4L_checkname(L, arg, def, dtype_names, "dtype");
}

nvfp4_dtype nvfp4L_checkfloat (lua_State *L, int arg, const char *def) {
  return (nvfp4_dtype)nvfp4L_checkname(L, arg, def, float_names, "dtype");
}

int nvfp4L_optname (lua_State *L, int arg, const char *key, const char *const names[], int def) {
  int i;
  if (nvfp4L_getopt(L, arg, key) == LUA_TNIL) { lua_pop(L, 1); return def; }
  i = findname(L, -1, NULL, names, NULL);
  if (i < 0) return nvfp4L_opterror(L, arg, key, lua_tostring(L, -1));
  lua_pop(L, 1);
  return i;
}

nvfp4_dtype nvfp4L_optfloat (lua_State *L, int arg, const char *key, nvfp4_dtype def) {
  return (nvfp4_dtype)nvfp4L_optname(L, arg, key, float_names, (int)def);
}


/* The first key of the table at idx that is not a string or not one of
** names, left on the stack (0 pushed: none). */
static int unknown_key (lua_State *L, int idx, const char *const names[]) {
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    int i, ok = 0;
    lua_pop(L, 1);  /* value; key stays for lua_next */
    if (lua_type(L, -1) == LUA_TSTRING)
      for (i = 0; names[i] != NULL && !ok; i++) ok = strcmp(lua_tostring(L, -1), names[i]) == 0;
    if (!ok) return 1;
  }
  return 0;
}


void nvfp4L_checkopts (lua_State *L, int arg, const char *const names[]) {
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  if (!unknown_key(L, arg, names)) return;
  if (lua_type(L, -1) == LUA_TSTRING)
    luaL_argerror(L, arg, lua_pushfstring(L, "unknown option '%s'", lua_tostring(L, -1)));
  luaL_argerror(L, arg, lua_pushfstring(L, "option keys must be strings, got %s",
                                        luaL_typename(L, -1)));
}


int nvfp4L_opterror (lua_State *L, int arg, const char *key, const char *msg) {
  return luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' %s", key, msg));
}


int nvfp4L_getopt (lua_State *L, int arg, const char *key) {
  if (lua_isnoneornil(L, arg)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, arg, key);
}


int nvfp4L_optbool (lua_State *L, int arg, const char *key, int def) {
  int t = nvfp4L_getopt(L, arg, key), v = def;
  if (t == LUA_TBOOLEAN) v = lua_toboolean(L, -1);
  else if (t != LUA_TNIL)
    nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "must be a boolean, got %s",
                                                  luaL_typename(L, -1)));
  lua_pop(L, 1);
  return v;
}


lua_Integer nvfp4L_optint (lua_State *L, int arg, const char *key, lua_Integer def) {
  int t = nvfp4L_getopt(L, arg, key), isint = 0;
  lua_Integer v = def;
  if (t != LUA_TNIL) {
    v = lua_tointegerx(L, -1, &isint);
    if (t != LUA_TNUMBER || !isint)
      nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "must be an integer, got %s", nvfp4L_gotvalue(L, -1)));
  }
  lua_pop(L, 1);
  return v;
}


lua_Number nvfp4L_optnum (lua_State *L, int arg, const char *key, lua_Number def) {
  int t = nvfp4L_getopt(L, arg, key);
  lua_Number v = def;
  if (t == LUA_TNUMBER) v = lua_tonumber(L, -1);
  else if (t != LUA_TNIL)
    nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "must be a number, got %s",
                                                  luaL_typename(L, -1)));
  lua_pop(L, 1);
  return v;
}


/* The run seed (--seed, or the one nvfp4-lua picked), default for seeds. */
static lua_Integer runseed (lua_State *L) {
  lua_Integer s = 0;
  if (lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS) == LUA_TTABLE) {
    lua_getfield(L, -1, "seed");
    s = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return s;
}


static const char *const qopt_names[] = {
  "rowwise", "columnwise", "rht", "rht_signs", "sr", "seed", "offset",
  "two_d", "amax", "amax_group", "four_over_six", "four_over_six_error", "emax", NULL
};

void *nvfp4L_optobject (lua_State *L, int arg, const char *key, const char *tname) {
  void **p = (void **)luaL_testudata(L, -1, tname);   /* LTensor, LComm: {pointer} */
  if (p == NULL) nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "must be an %s, got %s", tname,
                                                              luaL_typename(L, -1)));
  if (*p == NULL) nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "is a closed %s", tname));
  return *p;
}


nvfp4_tensor *nvfp4L_opttensor (lua_State *L, int arg, const char *key) {
  return (nvfp4_tensor *)nvfp4L_optobject(L, arg, key, NVFP4L_TENSOR);
}


/* The error m of an argument check run in a function of its own (under
** lua_pcall, where Lua has no name for it): "bad argument #n to '?'
** (inner)".  Pushes inner and returns n; 0 (nothing pushed) for any other
** error. */
static int unnamed_argerror (lua_State *L, const char *m) {
  char *end;
  long n;
  size_t len = m != NULL ? strlen(m) : 0;
  if (len == 0 || strncmp(m, "bad argument #", 14) != 0 || (n = strtol(m + 14, &end, 10)) <= 0 ||
      n > INT_MAX || strncmp(end, " to '?' (", 9) != 0 || m[len - 1] != ')')
    return 0;
  lua_pushlstring(L, end + 9, (size_t)(m + len - 1 - (end + 9)));
  return (int)n;
}


/* nvfp4L_checkqopts_at's checks: (table, qopts userdata). */
static int qopts_nested (lua_State *L) {
  nvfp4_qopts *o = (nvfp4_qopts *)lua_touserdata(L, 2);
  *o = nvfp4L_checkqopts(L, 1, 0);
  return 0;
}


nvfp4_qopts nvfp4L_checkqopts_at (lua_State *L, int arg, const char *key) {
  int top = lua_gettop(L);
  if (lua_type(L, top) != LUA_TTABLE)
    nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "must be a table of quantize options, got %s",
                                                 luaL_typename(L, top)));
  if (unknown_key(L, top, qopt_names))
    nvfp4L_opterror(L, arg, key, lua_pushfstring(L, "has an unknown option '%s'",
                                                 luaL_tolstring(L, -1, NULL)));
  {
    /* the checks in a function of their own, where the table is argument
    ** 1: an option's error there ("bad argument #1 to '?' (option 'rowwise'
    ** ...)") is raised again on argument arg as option key.rowwise */
    nvfp4_qopts *o = (nvfp4_qopts *)lua_newuserdatauv(L, sizeof *o, 0), r;
    lua_pushcfunction(L, qopts_nested);
    lua_pushvalue(L, top);
    lua_pushvalue(L, -3);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
      if (unnamed_argerror(L, lua_tostring(L, -1)) == 1) {
        const char *inner = lua_tostring(L, -1);
        if (strncmp(inner, "option '", 8) == 0)
          luaL_argerror(L, arg, lua_pushfstring(L, "option '%s.%s", key, inner + 8));
        lua_pop(L, 1);
      }
      lua_error(L);               /* any other error as it was raised */
    }
    r = *o;
    lua_pop(L, 1);
    return r;
  }
}


nvfp4_qopts nvfp4L_checkqopts (lua_State *L, int arg, int group) {
  nvfp4_qopts o;
  int t;
  memset(&o, 0, sizeof o);
  nvfp4L_checkopts(L, arg, qopt_names);
  o.rowwise = nvfp4L_optbool(L, arg, "rowwise", 0);
  o.columnwise = nvfp4L_optbool(L, arg, "columnwise", 0);
  o.rht = nvfp4L_optbool(L, arg, "rht", 0);
  o.rht_no_signs = !nvfp4L_optbool(L, arg, "rht_signs", 1);
  o.sr = nvfp4L_optbool(L, arg, "sr", 0);
  o.two_d = nvfp4L_optbool(L, arg, "two_d", 0);
  o.sr_seed = (uint64_t)nvfp4L_optint(L, arg, "seed", runseed(L));
  o.sr_offset = (uint64_t)nvfp4L_optint(L, arg, "offset", 0);
  if (!o.sr) {          /* seed and offset are SR's (spec §5.2) */
    static const char *const srk[] = {"seed", "offset"};
    for (t = 0; t < 2; t++) {
      const int given = nvfp4L_getopt(L, arg, srk[t]) != LUA_TNIL;
      lua_pop(L, 1);
      if (given) nvfp4L_opterror(L, arg, srk[t], "needs sr = true");
    }
  }
  if (o.rht_no_signs && !o.rht)
    nvfp4L_opterror(L, arg, "rht_signs", "needs rht = true");
  /* 4over6 (spec §9.1): error "mae" (default) or "mse"; emax 256 (default)
  ** or 448 */
  o.four_over_six = nvfp4L_optbool(L, arg, "four_over_six", 0);
  t = nvfp4L_getopt(L, arg, "four_over_six_error");
  if (t != LUA_TNIL) {
    const char *e = lua_tostring(L, -1);
    if (t != LUA_TSTRING || (strcmp(e, "mae") != 0 && strcmp(e, "mse") != 0))
      nvfp4L_opterror(L, arg, "four_over_six_error", "must be \"mae\" or \"mse\"");
    if (!o.four_over_six)
      nvfp4L_opterror(L, arg, "four_over_six_error", "needs four_over_six = true");
    o.four_over_six_mse = strcmp(e, "mse") == 0;
  }
  lua_pop(L, 1);
  if (nvfp4L_getopt(L, arg, "emax") != LUA_TNIL) {
    lua_Integer e = nvfp4L_optint(L, arg, "emax", 256);
    if (e != 256 && e != 448) nvfp4L_opterror(L, arg, "emax", "must be 256 or 448");
    if (!o.four_over_six) nvfp4L_opterror(L, arg, "emax", "needs four_over_six = true");
    o.four_over_six_emax448 = e == 448;
  }
  lua_pop(L, 1);
  t = nvfp4L_getopt(L, arg, "amax");
  if (t == LUA_TNUMBER) {
    o.has_amax = 1;
    o.amax[0] = o.amax[1] = (float)lua_tonumber(L, -1);
  } else if (t == LUA_TTABLE && lua_rawlen(L, -1) == 2) {
    o.has_amax = 1;
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    if (lua_type(L, -2) != LUA_TNUMBER || lua_type(L, -1) != LUA_TNUMBER)   /* {"1", "2"} too, as "1" */
      nvfp4L_opterror(L, arg, "amax", "must be a number or {rowwise, columnwise}");
    o.amax[0] = (float)lua_tonumber(L, -2);
    o.amax[1] = (float)lua_tonumber(L, -1);
    lua_pop(L, 2);
  } else if (t != LUA_TNIL)
    nvfp4L_opterror(L, arg, "amax", "must be a number or {rowwise, columnwise}");
  lua_pop(L, 1);
  if (group != 0) lua_pushvalue(L, group);
  else nvfp4L_getopt(L, arg, "amax_group");
  if (!lua_isnil(L, -1)) o.amax_group = nvfp4L_optcomm(L, arg, "amax_group");
  return o;   /* the amax_group value stays pushed (see lnvfp4.h) */
}

/* }====================================================== */


/*
** {======================================================
** Shapes
** =======================================================
*/

static int shape_tostring (lua_State *L) {
  luaL_Buffer b;
  lua_Integer i, n;
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, 1);
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '[');
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    luaL_addvalue(&b);                /* tostring of an integer is itself */
    if (i < n) luaL_addstring(&b, ", ");
  }
  luaL_addchar(&b, ']');
  luaL_pushresult(&b);
  return 1;
}


static int shape_eq (lua_State *L) {
  lua_Integer i, n = (lua_Integer)lua_rawlen(L, 1);
  int eq = lua_istable(L, 2) && (lua_Integer)lua_rawlen(L, 2) == n;
  for (i = 1; eq && i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lua_rawgeti(L, 2, i);
    eq = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  lua_pushboolean(L, eq);
  return 1;
}


static int mod_shape (lua_State *L) {
  nvfp4L_pushshape(L, nvfp4L_checkshape(L, 1));
  return 1;
}


/* nvfp4.buffer_shapes(shape) -> {rowwise_data=, rowwise_scale_inv=, ..}:
** the shape rules of spec §6 for a tensor of that logical shape, for the
** copies quantize would make: a shape it refuses even rowwise (K % 16)
** raises its error; without the columnwise rules (ndim >= 2, M % 16) the
** columnwise fields are absent (the formulas gave shapes of no tensor). */
static int mod_buffer_shapes (lua_State *L) {
  nvfp4_shape s = nvfp4L_checkshape(L, 1);
  char msg[512];
  if (nvfp4_shape_check_quantizable(s, 1, 0, msg, sizeof msg) != NVFP4_OK)
    return luaL_error(L, "buffer_shapes: %s (%s)", msg, nvfp4_status_string(NVFP4_EINVAL));
  lua_createtable(L, 0, 4);
  nvfp4L_pushshape(L, nvfp4_rowwise_data_shape(s));
  lua_setfield(L, -2, "rowwise_data");
  nvfp4L_pushshape(L, nvfp4_rowwise_scale_shape(s));
  lua_setfield(L, -2, "rowwise_scale_inv");
  if (nvfp4_shape_check_quantizable(s, 0, 1, NULL, 0) == NVFP4_OK) {
    nvfp4L_pushshape(L, nvfp4_columnwise_data_shape(s));
    lua_setfield(L, -2, "columnwise_data");
    nvfp4L_pushshape(L, nvfp4_columnwise_scale_shape(s));
    lua_setfield(L, -2, "columnwise_scale_inv");
  }
  return 1;
}


static const char *const rule_names[] = {"flat2d", "nd", NULL};

/* nvfp4.cw_rule(name, local_shape) -> {in_shape_t=, rows=, packed_cols=,
** scale_width=}: the gather's columnwise bookkeeping under a rule. */
static int mod_cw_rule (lua_State *L) {
  nvfp4_cw_rule r = (nvfp4_cw_rule)nvfp4L_checkname(L, 1, NULL, rule_names, "rule");
  nvfp4_cw_bookkeeping b = nvfp4_cw_rule_apply(r, nvfp4L_checkshape(L, 2));
  lua_createtable(L, 0, 4);
  nvfp4L_pushshape(L, b.in_shape_t);
  lua_setfield(L, -2, "in_shape_t");
  lua_pushinteger(L, (lua_Integer)b.rows);
  lua_setfield(L, -2, "rows");
  lua_pushinteger(L, (lua_Integer)b.packed_cols);
  lua_setfield(L, -2, "packed_cols");
  lua_pushinteger(L, (lua_Integer)b.scale_width);
  lua_setfield(L, -2, "scale_width");
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** Tensors: creation from Lua values
** =======================================================
*/

static uint16_t f32_to_bf16 (float f) {   /* RNE; NaN stays quiet NaN */
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}


static float bf16_to_f32 (uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}


/* Store v as element i of a host buffer of dtype dt. */
static void setelem (lua_State *L, void *buf, nvfp4_dtype dt, size_t i,
                     lua_Number v, int arg) {
  switch (dt) {
    case NVFP4_F32: ((float *)buf)[i] = (float)v; break;
    case NVFP4_BF16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
    default:
      if (!(v >= 0 && v <= 255 && v == floor(v))) {
        if (v == floor(v) && fabs(v) < 0x1p62)  /* an integer out of range: print it as one */
          luaL_argerror(L, arg, lua_pushfstring(L, "u8 value %I is not in 0..255", (lua_Integer)v));
        luaL_argerror(L, arg, lua_pushfstring(L, "u8 value %f is not an integer in 0..255", v));
      }
      ((uint8_t *)buf)[i] = (uint8_t)v;
  }
}


static lua_Number getelem (const void *buf, nvfp4_dtype dt, size_t i) {
  switch (dt) {
    case NVFP4_F32: return ((const float *)buf)[i];
    case NVFP4_BF16: return bf16_to_f32(((const uint16_t *)buf)[i]);
    default: return ((const uint8_t *)buf)[i];
  }
}


/* Push a new tensor from a host buffer (freed by the caller). */
static void pushfromhost (lua_State *L, nvfp4_shape s, nvfp4_dtype dt,
                          const void *host) {
  LTensor *p = nvfp4L_newtensor(L);
  size_t n = (size_t)nvfp4_shape_numel(s) * nvfp4_dtype_size(dt);
  NVFP4L_LOCAL(L, nvfp4_tensor_from_host(nvfp4L_getctx(L), s, dt, host, n, &p->t));
}


/* scratch's allocation, called protected: *(size_t *)arg 1 bytes. */
static int newscratch (lua_State *L) {
  lua_newuserdatauv(L, *(const size_t *)lua_touserdata(L, 1), 0);
  return 1;
}

/* A host scratch buffer owned by the Lua stack (freed by the GC even when
** an error is raised before we are done with it).  Allocated by Lua, whose
** failed allocation collects the garbage and tries again; a size the host
** still cannot give raises an error naming the calling function and the
** bytes, where Lua's own would say only "not enough memory". */
static void *scratch (lua_State *L, size_t n) {
  int st;
  if (n == 0) n = 1;
  lua_pushcfunction(L, newscratch);
  lua_pushlightuserdata(L, &n);
  st = lua_pcall(L, 1, 1, 0);
  if (st == LUA_ERRMEM) {
    lua_Debug ar;   /* the name as the call site gives it; none (pcall(nvfp4.ones, ..)): no prefix */
    int named = lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name != NULL;
    lua_pop(L, 1);
    luaL_error(L, "%s%scannot allocate %I bytes of host memory (out of memory)", named ? ar.name : "",
               named ? ": " : "", (lua_Integer)n);
  }
  else if (st != LUA_OK) lua_error(L);   /* none expected (a finalizer's error is a warning): as it is */
  return lua_touserdata(L, -1);
}


/* Walk the nesting of t (at idx) to find its shape: the lengths of the
** first elements, level by level. */
static nvfp4_shape nestedshape (lua_State *L, int idx) {
  nvfp4_shape s;
  int depth = 0;
  memset(&s, 0, sizeof s);
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    luaL_argcheck(L, depth < NVFP4_MAX_DIMS, 1, "table nested deeper than 8 dims");
    s.dim[depth++] = (int64_t)lua_rawlen(L, -1);
    if (lua_rawlen(L, -1) == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  s.ndim = depth;
  return s;
}


/* Copy the nested table at idx (level 'level' of shape s) into buf. */
static void flatten (lua_State *L, int idx, nvfp4_shape s, int level,
                     void *buf, nvfp4_dtype dt, size_t *pos) {
  int64_t i;
  if ((int64_t)lua_rawlen(L, idx) != s.dim[level] || !lua_istable(L, idx))
    luaL_argerror(L, 1, lua_pushfstring(L, "ragged table: a row at depth %d has "
                  "length %d, expected %d", level + 1, (int)lua_rawlen(L, idx),
                  (int)s.dim[level]));
  for (i = 1; i <= s.dim[level]; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    if (level + 1 < s.ndim) {
      luaL_argcheck(L, lua_istable(L, -1), 1, "ragged table: number where a row was expected");
      flatten(L, lua_gettop(L), s, level + 1, buf, dt, pos);
    } else {
      if (lua_type(L, -1) != LUA_TNUMBER)     /* "1" too: an element is a number, as a dim is */
        luaL_argerror(L, 1, lua_pushfstring(L, "element %d is a %s, not a number",
                      (int)(*pos + 1), luaL_typename(L, -1)));
      setelem(L, buf, dt, (*pos)++, lua_tonumber(L, -1), 1);
    }
    lua_pop(L, 1);
  }
}


/* nvfp4.tensor(nested_table [, dtype]) */
static int mod_tensor (lua_State *L) {
  nvfp4_shape s;
  nvfp4_dtype dt;
  void *buf;
  size_t pos = 0;
  luaL_checktype(L, 1, LUA_TTABLE);
  dt = nvfp4L_checkdtype(L, 2, "fp32");
  lua_settop(L, 2);
  s = nestedshape(L, 1);
  buf = scratch(L, (size_t)nvfp4_shape_numel(s) * nvfp4_dtype_size(dt));
  flatten(L, 1, s, 0, buf, dt, &pos);   /* with no elements too: {{}, {1, 2}} is ragged */
  pushfromhost(L, s, dt, buf);
  return 1;
}


/* nvfp4.from_bytes(shape, dtype, bytes): a plain tensor from its raw bytes
** (a string of numel * dtype size bytes, little-endian elements as t:bytes()
** gives them), e.g. bf16 bit patterns that no Lua number rounds to. */
static int mod_from_bytes (lua_State *L) {
  nvfp4_shape s = nvfp4L_checkshape(L, 1);
  nvfp4_dtype dt = nvfp4L_checkdtype(L, 2, NULL);
  size_t n, need;
  const char *b = luaL_checklstring(L, 3, &n);
  luaL_argcheck(L, nvfp4_shape_numel(s) <= NVFP4_MAX_NUMEL, 1, "shape has more than 2^60 elements");
  need = (size_t)nvfp4_shape_numel(s) * nvfp4_dtype_size(dt);
  if (n != need) {
    char sb[128];
    return luaL_argerror(L, 3, lua_pushfstring(L, "%I bytes given, %s %s needs %I",
                                               (lua_Integer)n, nvfp4_shape_format(s, sb, sizeof sb),
                                               nvfp4_dtype_name(dt), (lua_Integer)need));
  }
  pushfromhost(L, s, dt, b);
  return 1;
}


/* Shape from a table or an integer (a 1-D length). */
static nvfp4_shape checkshapeorlen (lua_State *L, int arg) {
  nvfp4_shape s;
  if (lua_type(L, arg) == LUA_TNUMBER) {
    int64_t n = (int64_t)luaL_checkinteger(L, arg);
    if (n < 0) luaL_argerror(L, arg, lua_pushfstring(L, "length must be >= 0, got %I", (lua_Integer)n));
    s = nvfp4_shape_make(1, &n);
  } else
    s = nvfp4L_checkshape(L, arg);
  luaL_argcheck(L, nvfp4_shape_numel(s) <= NVFP4_MAX_NUMEL, arg, "shape has more than 2^60 elements");
  return s;
}


/* fill(shape, dtype, kind): 0 zeros, 1 ones, 2 arange (0, 1, 2, ..) */
static int fill (lua_State *L, int kind) {
  nvfp4_shape s = checkshapeorlen(L, 1);
  nvfp4_dtype dt = nvfp4L_checkdtype(L, 2, "fp32");
  size_t i, n = (size_t)nvfp4_shape_numel(s);
  void *buf;
  if (kind == 0) {
    LTensor *p = nvfp4L_newtensor(L);
    NVFP4L_LOCAL(L, nvfp4_tensor_create(nvfp4L_getctx(L), s, dt, &p->t));
    return 1;
  }
  buf = scratch(L, n * nvfp4_dtype_size(dt));
  for (i = 0; i < n; i++)
    setelem(L, buf, dt, i, kind == 1 ? 1.0 : (lua_Number)(dt == NVFP4_U8 ? i % 256 : i), 1);
  pushfromhost(L, s, dt, buf);
  return 1;
}

static int mod_zeros (lua_State *L) { return fill(L, 0); }
static int mod_ones (lua_State *L) { return fill(L, 1); }
static int mod_arange (lua_State *L) { return fill(L, 2); }


static const char *const rand_opts[] = {"seed", "lo", "hi", NULL};

/* nvfp4.randn(shape, dtype [, {seed=}]) / nvfp4.uniform(.., {seed=, lo=, hi=}) */
static int randtensor (lua_State *L, int uniform) {
  nvfp4_shape s = checkshapeorlen(L, 1);
  nvfp4_dtype dt = nvfp4L_checkfloat(L, 2, "fp32");
  uint64_t seed;
  LTensor *p;
  nvfp4L_checkopts(L, 3, rand_opts);
  seed = (uint64_t)nvfp4L_optint(L, 3, "seed", runseed(L));
  if (!uniform) {
    if (nvfp4L_getopt(L, 3, "lo") != LUA_TNIL || nvfp4L_getopt(L, 3, "hi") != LUA_TNIL)
      nvfp4L_opterror(L, 3, "lo/hi", "only apply to uniform");
    lua_pop(L, 2);
    p = nvfp4L_newtensor(L);
    NVFP4L_LOCAL(L, nvfp4_tensor_randn(nvfp4L_getctx(L), s, dt, seed, &p->t));
  } else {
    lua_Number lo = nvfp4L_optnum(L, 3, "lo", 0.0), hi = nvfp4L_optnum(L, 3, "hi", 1.0);
    if (!(lo < hi)) nvfp4L_opterror(L, 3, "lo", "must be less than hi");
    p = nvfp4L_newtensor(L);
    NVFP4L_LOCAL(L, nvfp4_tensor_uniform(nvfp4L_getctx(L), s, dt, seed, lo, hi, &p->t));
  }
  return 1;
}

static int mod_randn (lua_State *L) { return randtensor(L, 0); }
static int mod_uniform (lua_State *L) { return randtensor(L, 1); }

/* }====================================================== */


/*
** {======================================================
** Tensor methods
** =======================================================
*/

static int tensor_free (lua_State *L) {
  LTensor *p = (LTensor *)luaL_checkudata(L, 1, NVFP4L_TENSOR);
  nvfp4_tensor_destroy(p->t);  /* NULL-safe */
  nvfp4_tensor_destroy(p->zombie);
  p->t = p->zombie = NULL;
  return 0;
}


/* t:close() and <close>: at once, unless a binding call below may hold it. */
static int tensor_close (lua_State *L) {
  LTensor *p = (LTensor *)luaL_checkudata(L, 1, NVFP4L_TENSOR);
  return nvfp4L_close(L, p, t, tensor_free);
}


/* __gc: the collector's call frees; one from Lua code (debug.getmetatable(t)
** .__gc(t)) is a close, which a binding call below may hold off
** (nvfp4L_finalizing). */
static int tensor_gc (lua_State *L) {
  return nvfp4L_finalizing(L) ? tensor_free(L) : tensor_close(L);
}


static int tensor_tostring (lua_State *L) {
  LTensor *p = (LTensor *)luaL_checkudata(L, 1, NVFP4L_TENSOR);
  char sb[160];
  if (p->t == NULL)
    lua_pushliteral(L, "nvfp4.tensor (closed)");
  else
    lua_pushfstring(L, "nvfp4.tensor %s %s %s", nvfp4_dtype_name(nvfp4_tensor_dtype(p->t)),
                    nvfp4_shape_format(nvfp4_tensor_shape(p->t), sb, sizeof sb),
                    nvfp4_ctx_backend(nvfp4_tensor_ctx(p->t)));
  return 1;
}


static int tensor_shape (lua_State *L) {
  nvfp4L_pushshape(L, nvfp4_tensor_shape(nvfp4L_totensor(L, 1)));
  return 1;
}


static int tensor_dtype (lua_State *L) {
  lua_pushstring(L, nvfp4_dtype_name(nvfp4_tensor_dtype(nvfp4L_totensor(L, 1))));
  return 1;
}


/* t:nominal_dtype(): nvfp4_tensor_nominal_dtype, the dtype an fp4 tensor
** stands for ("bf16" or "fp32"; a plain tensor's own dtype). */
static int tensor_nominal_dtype (lua_State *L) {
  lua_pushstring(L, nvfp4_dtype_name(nvfp4_tensor_nominal_dtype(nvfp4L_totensor(L, 1))));
  return 1;
}


static int tensor_ndim (lua_State *L) {
  lua_pushinteger(L, nvfp4_tensor_shape(nvfp4L_totensor(L, 1)).ndim);
  return 1;
}


static int tensor_numel (lua_State *L) {
  lua_pushinteger(L, (lua_Integer)nvfp4_shape_numel(nvfp4_tensor_shape(nvfp4L_totensor(L, 1))));
  return 1;
}


static int tensor_isclosed (lua_State *L) {
  LTensor *p = (LTensor *)luaL_checkudata(L, 1, NVFP4L_TENSOR);
  lua_pushboolean(L, p->t == NULL);
  return 1;
}


/* Argument arg (t) must be a plain tensor. */
static void checkplain (lua_State *L, int arg, nvfp4_tensor *t) {
  luaL_argcheck(L, nvfp4_tensor_dtype(t) != NVFP4_FP4, arg,
                "needs a plain tensor (fp4: dequantize it or use bytes(name))");
}


/* A plain tensor's elements on the host, in a scratch userdata. */
static void *tohost (lua_State *L, int arg, nvfp4_tensor *t, size_t *nbytes) {
  void *buf;
  checkplain(L, arg, t);
  *nbytes = (size_t)nvfp4_shape_numel(nvfp4_tensor_shape(t)) *
            nvfp4_dtype_size(nvfp4_tensor_dtype(t));
  buf = scratch(L, *nbytes);
  nvfp4L_checkstatus(L, nvfp4_tensor_to_host(t, buf, *nbytes));
  return buf;
}


/* t:get(i, j, ..) -> number: one element, 1-based indices. */
static int tensor_get (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_shape s = nvfp4_tensor_shape(t);
  size_t n, off = 0;
  int i;
  const void *buf;
  if (lua_gettop(L) - 1 != s.ndim)
    return luaL_error(L, "get: a %d-D tensor needs %d indices, got %d",
                      s.ndim, s.ndim, lua_gettop(L) - 1);
  for (i = 0; i < s.ndim; i++) {
    lua_Integer k = nvfp4L_checkint(L, i + 2);
    if (k < 1 || k > s.dim[i])
      luaL_argerror(L, i + 2, lua_pushfstring(L, "index %I is outside 1..%I", k,
                                              (lua_Integer)s.dim[i]));
    off = off * (size_t)s.dim[i] + (size_t)(k - 1);
  }
  buf = tohost(L, 1, t, &n);
  lua_pushnumber(L, getelem(buf, nvfp4_tensor_dtype(t), off));
  return 1;
}


static void pushlist (lua_State *L, const void *buf, nvfp4_dtype dt,
                      nvfp4_shape s, int level, size_t *pos) {
  int64_t i;
  lua_createtable(L, (int)s.dim[level], 0);
  for (i = 0; i < s.dim[level]; i++) {
    if (level + 1 < s.ndim) pushlist(L, buf, dt, s, level + 1, pos);
    else lua_pushnumber(L, getelem(buf, dt, (*pos)++));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}


/* t:tolist() -> nested tables of numbers (a number for a 0-D tensor). */
static int tensor_tolist (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_shape s = nvfp4_tensor_shape(t);
  size_t n, pos = 0;
  const void *buf = tohost(L, 1, t, &n);
  if (s.ndim == 0) lua_pushnumber(L, getelem(buf, nvfp4_tensor_dtype(t), 0));
  else pushlist(L, buf, nvfp4_tensor_dtype(t), s, 0, &pos);
  return 1;
}


static int tensor_clone (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  LTensor *p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_tensor_clone(t, &p->t));
  return 1;
}


/* t:convert(dtype) -> a new fp32 or bf16 tensor (nvfp4_tensor_convert). */
static int tensor_convert (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_dtype dt = nvfp4L_checkfloat(L, 2, NULL);
  LTensor *p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_tensor_convert(t, dt, &p->t));
  return 1;
}


static int tensor_reshape (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_shape s = nvfp4L_checkshape(L, 2);
  LTensor *p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_tensor_reshape(t, s, &p->t));
  return 1;
}


/* t:narrow(dim, start, length): a copy of elements start..start+length-1
** along a 1-based dim (plain tensors; e.g. a rank's shard of a full tensor):
** nvfp4_tensor_narrow, with its bounds checked here in Lua's terms. */
static int tensor_narrow (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_shape s = nvfp4_tensor_shape(t);
  int d;
  checkplain(L, 1, t);
  luaL_argcheck(L, s.ndim > 0, 1, "a 0-d tensor has no dim to narrow");
  d = nvfp4L_checkdim(L, 2, s.ndim);
  lua_Integer start = nvfp4L_checkint(L, 3), len = nvfp4L_checkint(L, 4);
  LTensor *p;
  if (start < 1 || start > s.dim[d] + 1)
    luaL_argerror(L, 3, lua_pushfstring(L, "start %I is outside 1..%I (dim %d has size %I)",
                                        start, (lua_Integer)s.dim[d] + 1, d + 1,
                                        (lua_Integer)s.dim[d]));
  if (len < 0)
    luaL_argerror(L, 4, lua_pushfstring(L, "length %I is negative", len));
  if (len > s.dim[d] - (start - 1))     /* (no overflow: start - 1 <= dim) */
    luaL_argerror(L, 4, lua_pushfstring(L, "start %I + length %I runs past dim %d of size %I",
                                        start, len, d + 1, (lua_Integer)s.dim[d]));
  p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_tensor_narrow(t, d, (int64_t)(start - 1), (int64_t)len, &p->t));
  return 1;
}


static const char *const buffer_names[] = {
  "rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", NULL
};

static int checkfp4 (lua_State *L, int arg, nvfp4_tensor *t) {
  if (nvfp4_tensor_dtype(t) != NVFP4_FP4)
    luaL_argerror(L, arg, lua_pushfstring(L, "needs an fp4 tensor, got %s",
                  nvfp4_dtype_name(nvfp4_tensor_dtype(t))));
  return 1;
}


/* t:buffer_shape(name) -> shape, or nil when that usage is absent. */
static int tensor_buffer_shape (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_buffer b = (nvfp4_buffer)nvfp4L_checkname(L, 2, NULL, buffer_names, "buffer");
  int has;
  checkfp4(L, 1, t);
  has = (b <= NVFP4_ROWWISE_SCALE) ? nvfp4_tensor_has_rowwise(t) : nvfp4_tensor_has_columnwise(t);
  if (!has) lua_pushnil(L);
  else nvfp4L_pushshape(L, nvfp4_tensor_buffer_shape(t, b));
  return 1;
}


/* The shortcuts t:rowwise_data_shape() etc.: upvalue 1 is the buffer name. */
static int tensor_buffer_shape_of (lua_State *L) {
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  return tensor_buffer_shape(L);
}


/* t:bytes([name]) -> string: a plain tensor's elements, or one NVFP4
** buffer (padding included). */
static int tensor_bytes (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  nvfp4_buffer b;
  size_t n;
  void *buf;
  if (nvfp4_tensor_dtype(t) != NVFP4_FP4) {
    luaL_argcheck(L, lua_isnoneornil(L, 2), 2, "a plain tensor has one buffer: no name");
    buf = tohost(L, 1, t, &n);
    lua_pushlstring(L, (const char *)buf, n);
    return 1;
  }
  b = (nvfp4_buffer)nvfp4L_checkname(L, 2, NULL, buffer_names, "buffer");
  n = (size_t)nvfp4_shape_numel(nvfp4_tensor_buffer_shape(t, b));
  buf = scratch(L, n);
  nvfp4L_checkstatus(L, nvfp4_tensor_buffer_read(t, b, buf, n));
  lua_pushlstring(L, (const char *)buf, n);
  return 1;
}


static const char *const dir_names[] = {"rowwise", "columnwise", NULL};

/* t:amax([dir]) -> number: the FP32 amax of "rowwise" (default) or
** "columnwise". */
static int tensor_amax (lua_State *L) {
  nvfp4_tensor *t = nvfp4L_totensor(L, 1);
  int col;
  float a = 0;
  checkfp4(L, 1, t);
  if (lua_isnoneornil(L, 2)) col = nvfp4_tensor_has_rowwise(t) ? 0 : 1;
  else col = nvfp4L_checkname(L, 2, NULL, dir_names, "direction");
  nvfp4L_checkstatus(L, nvfp4_tensor_amax(t, col, &a));
  lua_pushnumber(L, a);
  return 1;
}


static int tensor_has_rowwise (lua_State *L) {
  lua_pushboolean(L, nvfp4_tensor_has_rowwise(nvfp4L_totensor(L, 1)));
  return 1;
}


static int tensor_has_columnwise (lua_State *L) {
  lua_pushboolean(L, nvfp4_tensor_has_columnwise(nvfp4L_totensor(L, 1)));
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** Numerics and comparison
** =======================================================
*/

int nvfp4L_reraise (lua_State *L) {
  if (lua_type(L, -1) == LUA_TSTRING) {
    /* the check ran in a function of its own: raise it again from the
    ** caller's own frame, which Lua names as it names any call (a method
    ** call without its self, a call without a name through package.loaded:
    ** 'nvfp4.comm.all_gather') */
    const int n = unnamed_argerror(L, lua_tostring(L, -1));
    if (n > 0) return luaL_argerror(L, n, lua_tostring(L, -1));
    luaL_where(L, 1);
    lua_pushvalue(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}


/* quantize's arguments (x, opts) into the qopts userdata at 3; returns
** the amax_group comm (or nil), for the caller to hold.  The amax_group
** value is read first and once, and kept as the userdata's user value,
** where the caller's error path finds it without a second read (an
** __index there would run on the failing rank alone). */
static int quantize_args (lua_State *L) {
  nvfp4_qopts *o = (nvfp4_qopts *)lua_touserdata(L, 3);
  lua_settop(L, 3);
  nvfp4L_keepopt(L, 2, "amax_group", 3);                 /* 4 */
  nvfp4L_totensor(L, 1);
  *o = nvfp4L_checkqopts(L, 2, 4);
  return 1;                    /* the amax_group value checkqopts left */
}


/* An amax_group's peers, waiting in the quantize's agreement, learn that
** this rank's call failed (a call with no tensor, refused there too). */
static void quantize_tell (lua_State *L, nvfp4_comm *g) {
  nvfp4_qopts tell;
  nvfp4_tensor *none = NULL;
  memset(&tell, 0, sizeof tell);
  tell.amax_group = g;
  (void)nvfp4_quantize(nvfp4L_getctx(L), NULL, &tell, &none);
}


/* nvfp4.quantize(x [, opts]).  With an amax_group, the group's other ranks
** wait in the library's agreement: when this rank's arguments are refused
** here, the library is called with no tensor first, so that they learn of
** it (EPEER) instead of waiting, and then the error is raised as usual. */
static int mod_quantize (lua_State *L) {
  nvfp4_qopts *o;
  nvfp4_tensor *x;
  LTensor *q;
  lua_settop(L, 2);
  o = (nvfp4_qopts *)lua_newuserdatauv(L, sizeof *o, 1);
  lua_pushcfunction(L, quantize_args);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK) {   /* 4: the amax_group comm, held for the call */
    nvfp4_comm *g = nvfp4L_keptcomm(L, 3);     /* the amax_group quantize_args read */
    if (g != NULL) quantize_tell(L, g);
    return nvfp4L_reraise(L);
  }
  q = nvfp4L_newtensor(L);
  /* x as this call holds it: a close by Lua code that the options or the
  ** collection above ran leaves it to the call (nvfp4L_inbinding) */
  if ((x = nvfp4L_tensorheld(L, 1)) == NULL) {
    if (o->amax_group != NULL) quantize_tell(L, o->amax_group);
    nvfp4L_heldtensor(L, 1);     /* raises */
  }
  if (o->amax_group == NULL)     /* with one, its peers may have gone on: no second call */
    NVFP4L_LOCAL(L, nvfp4_quantize(nvfp4L_getctx(L), x, o, &q->t));
  else
    nvfp4L_checkstatus(L, nvfp4_quantize(nvfp4L_getctx(L), x, o, &q->t));
  return 1;
}


/* nvfp4.dequantize(q [, dtype] [, usage]) and q:dequantize(..): two
** functions (the compiler would fold one that only called the other), so
** that an error names the one called, pcall(q.dequantize, q) included */
static int dequantize (lua_State *L, int method) {
  static const char *const usages[] = {"rowwise", "columnwise", NULL};
  LTensor *p = (LTensor *)luaL_checkudata(L, 1, NVFP4L_TENSOR);
  nvfp4_tensor *q = p->t;
  nvfp4_dtype dt;
  int col;
  if (q == NULL) {
    if (method) return luaL_error(L, "calling 'dequantize' on bad self (tensor is closed)");
    return luaL_argerror(L, 1, "tensor is closed");
  }
  /* a usage in the dtype's place (dequantize(q, "columnwise")): the names
  ** do not overlap, so it is taken for the usage, the dtype left out */
  if (lua_type(L, 2) == LUA_TSTRING && lua_isnoneornil(L, 3) &&
      (strcmp(lua_tostring(L, 2), "rowwise") == 0 || strcmp(lua_tostring(L, 2), "columnwise") == 0)) {
    lua_pushnil(L);
    lua_insert(L, 2);
  }
  /* no dtype: the one q stands for (its nominal dtype), as TE's
  ** QuantizedTensor.dequantize() without one */
  dt = lua_isnoneornil(L, 2) ? nvfp4_tensor_nominal_dtype(q)
       : nvfp4L_checkfloat(L, 2, "fp32");
  col = nvfp4L_checkname(L, 3, "rowwise", usages, "usage");
  p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, col ? nvfp4_dequantize_columnwise(nvfp4L_getctx(L), q, dt, &p->t)
                      : nvfp4_dequantize(nvfp4L_getctx(L), q, dt, &p->t));
  return 1;
}

static int mod_dequantize (lua_State *L) {
  return dequantize(L, 0);
}

static int tensor_dequantize (lua_State *L) {
  return dequantize(L, 1);
}


static int mod_swap_first_dims (lua_State *L) {
  nvfp4_tensor *x = nvfp4L_totensor(L, 1);
  LTensor *p = nvfp4L_newtensor(L);
  NVFP4L_LOCAL(L, nvfp4_swap_first_dims(nvfp4L_getctx(L), x, &p->t));
  return 1;
}


/* nvfp4.equal(a, b) -> true | false, msg: nvfp4_tensor_equal (its comment
** in lib/nvfp4.h says what is compared). */
static int mod_equal (lua_State *L) {
  nvfp4_tensor *a = nvfp4L_totensor(L, 1), *b = nvfp4L_totensor(L, 2);
  char why[512];
  int eq = 0;
  nvfp4L_checkstatus(L, nvfp4_tensor_equal(a, b, &eq, why, sizeof why));
  lua_pushboolean(L, eq);
  if (eq) return 1;
  lua_pushstring(L, why);
  return 2;
}


/* nvfp4.rel_error(a, b) -> ||a - b||_2 / ||b||_2 (||a - b||_2 when b is 0),
** computed in double on the host; plain tensors of one shape. */
static int mod_rel_error (lua_State *L) {
  nvfp4_tensor *a = nvfp4L_totensor(L, 1), *b = nvfp4L_totensor(L, 2);
  nvfp4_shape s = nvfp4_tensor_shape(a);
  size_t na, nb, i, n = (size_t)nvfp4_shape_numel(s);
  const void *pa, *pb;
  double num = 0, den = 0;
  char sa[160], sb[160];
  if (!nvfp4_shape_equal(s, nvfp4_tensor_shape(b)))
    return luaL_error(L, "rel_error: shapes differ: %s vs %s",
                      nvfp4_shape_format(s, sa, sizeof sa),
                      nvfp4_shape_format(nvfp4_tensor_shape(b), sb, sizeof sb));
  pa = tohost(L, 1, a, &na);
  pb = tohost(L, 2, b, &nb);
  for (i = 0; i < n; i++) {
    double x = getelem(pa, nvfp4_tensor_dtype(a), i), y = getelem(pb, nvfp4_tensor_dtype(b), i);
    num += (x - y) * (x - y);
    den += y * y;
  }
  lua_pushnumber(L, den > 0 ? sqrt(num / den) : sqrt(num));
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** The module
** =======================================================
*/

static int mod_version (lua_State *L) {
  lua_pushstring(L, nvfp4_version_string());
  return 1;
}


static int mod_backend (lua_State *L) {
  lua_pushstring(L, nvfp4_ctx_backend(nvfp4L_getctx(L)));
  return 1;
}


/* nvfp4.exit_status(n): the status nvfp4-lua exits with after a normal end
** (the scenario framework sets 1 when a case failed). */
static int mod_exit_status (lua_State *L) {
  lua_Integer n = nvfp4L_checkint(L, 1);
  if (n < 0 || n > 255) luaL_argerror(L, 1, lua_pushfstring(L, "exit status must be in 0..255, got %I", n));
  lua_pushinteger(L, n);
  lua_setfield(L, LUA_REGISTRYINDEX, NVFP4L_EXIT);
  return 0;
}


/* nvfp4.isatty([fd]) -> whether fd (default 1, stdout) is a terminal. */
static int mod_isatty (lua_State *L) {
  lua_Integer fd = lua_isnoneornil(L, 1) ? 1 : nvfp4L_checkint(L, 1);
  lua_pushboolean(L, fd >= 0 && fd <= INT_MAX && isatty((int)fd));   /* 2^32 + 1 is not fd 1 */
  return 1;
}


/* nvfp4.clock() -> seconds (float) of a monotonic wall clock, for
** timings and deadlines (os.clock is CPU time, os.time whole seconds). */
static int mod_clock (lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}


/* nvfp4.memory(): the bytes of library memory the process's tensors and
** layers hold now (nvfp4_ctx_memory: host for cpu, the device's for cuda). */
static int mod_memory (lua_State *L) {
  luaL_argcheck(L, lua_gettop(L) == 0, 1, "nvfp4.memory takes no arguments");
  lua_pushinteger(L, (lua_Integer)nvfp4_ctx_memory(nvfp4L_getctx(L)));
  return 1;
}


/* nvfp4.sync(): waits for the work queued on the process's context (the
** CUDA backend's calls return when enqueued, and a quantize that computes
** its amax keeps it on the device); for timings.  Raises the context's
** error if queued work failed. */
static int mod_sync (lua_State *L) {
  luaL_argcheck(L, lua_gettop(L) == 0, 1, "nvfp4.sync takes no arguments");
  nvfp4L_checkstatus(L, nvfp4_ctx_sync(nvfp4L_getctx(L)));
  return 0;
}


static int ctx_gc (lua_State *L) {
  LCtx *p = (LCtx *)luaL_checkudata(L, 1, NVFP4L_CTX ".meta");
  nvfp4_ctx_destroy(p->ctx);
  p->ctx = NULL;
  return 0;
}


/* Create the process's context once (kept in the registry; it is collected
** last because it is created before any tensor). */
static void openctx (lua_State *L) {
  LCtx *p;
  const char *why = "";
  nvfp4_status st;
  if (lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_CTX) != LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  p = (LCtx *)lua_newuserdatauv(L, sizeof *p, 0);
  p->ctx = NULL;
  p->low = 0;
  luaL_newmetatable(L, NVFP4L_CTX ".meta");   /* not NVFP4L_CTX: that key holds p */
  lua_pushcfunction(L, ctx_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  st = nvfp4_ctx_create(NVFP4_BACKEND_AUTO, &p->ctx, &why);
  if (st != NVFP4_OK)
    luaL_error(L, "nvfp4: cannot create a context: %s (%s)", why, nvfp4_status_string(st));
  lua_setfield(L, LUA_REGISTRYINDEX, NVFP4L_CTX);
}


static const luaL_Reg mod_funcs[] = {
  {"shape", mod_shape},
  {"buffer_shapes", mod_buffer_shapes},
  {"cw_rule", mod_cw_rule},
  {"tensor", mod_tensor},
  {"from_bytes", mod_from_bytes},
  {"zeros", mod_zeros},
  {"ones", mod_ones},
  {"arange", mod_arange},
  {"randn", mod_randn},
  {"uniform", mod_uniform},
  {"quantize", mod_quantize},
  {"dequantize", mod_dequantize},
  {"swap_first_dims", mod_swap_first_dims},
  {"equal", mod_equal},
  {"rel_error", mod_rel_error},
  {"version", mod_version},
  {"backend", mod_backend},
  {"exit_status", mod_exit_status},
  {"isatty", mod_isatty},
  {"clock", mod_clock},
  {"sync", mod_sync},
  {"memory", mod_memory},
  {NULL, NULL}
};


static const luaL_Reg tensor_meth[] = {
  {"shape", tensor_shape},
  {"dtype", tensor_dtype},
  {"nominal_dtype", tensor_nominal_dtype},
  {"ndim", tensor_ndim},
  {"numel", tensor_numel},
  {"get", tensor_get},
  {"tolist", tensor_tolist},
  {"clone", tensor_clone},
  {"convert", tensor_convert},
  {"dequantize", tensor_dequantize},
  {"reshape", tensor_reshape},
  {"narrow", tensor_narrow},
  {"bytes", tensor_bytes},
  {"amax", tensor_amax},
  {"buffer_shape", tensor_buffer_shape},
  {"has_rowwise", tensor_has_rowwise},
  {"has_columnwise", tensor_has_columnwise},
  {"isclosed", tensor_isclosed},
  {"close", tensor_close},
  {NULL, NULL}
};


static const luaL_Reg tensor_metameth[] = {
  {"__index", NULL},  /* placeholder: the method table */
  {"__gc", tensor_gc},
  {"__close", tensor_close},
  {"__tostring", tensor_tostring},
  {NULL, NULL}
};


/* The method table on top of the stack becomes package.loaded[name]
** ("nvfp4.tensor", ...): where Lua's luaL_argerror and tracebacks look for
** a function's name when the call gives none, so that pcall(t.reshape, t, 5)
** says "bad argument #2 to 'nvfp4.tensor.reshape' (...)", not "to '?'". */
void nvfp4L_nameable (lua_State *L, const char *name) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}


static void createmeta (lua_State *L) {
  int i;
  static const char *const shortcut[][2] = {
    {"rowwise_data_shape", "rowwise_data"}, {"rowwise_scale_shape", "rowwise_scale_inv"},
    {"columnwise_data_shape", "columnwise_data"}, {"columnwise_shape", "columnwise_data"},
    {"columnwise_scale_shape", "columnwise_scale_inv"}
  };
  luaL_newmetatable(L, NVFP4L_TENSOR);              /* metatable for tensors */
  luaL_setfuncs(L, tensor_metameth, 0);
  nvfp4L_protectmeta(L, NVFP4L_TENSOR);
  luaL_newlibtable(L, tensor_meth);                 /* method table */
  luaL_setfuncs(L, tensor_meth, 0);
  for (i = 0; i < (int)(sizeof shortcut / sizeof shortcut[0]); i++) {
    lua_pushstring(L, shortcut[i][1]);
    lua_pushcclosure(L, tensor_buffer_shape_of, 1);
    lua_setfield(L, -2, shortcut[i][0]);
  }
  nvfp4L_nameable(L, "nvfp4.tensor");
  lua_setfield(L, -2, "__index");                   /* metatable.__index = methods */
  lua_pop(L, 1);
  luaL_newmetatable(L, NVFP4L_SHAPE);               /* shared by shape tables */
  lua_pushcfunction(L, shape_eq);
  lua_setfield(L, -2, "__eq");
  lua_pushcfunction(L, shape_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}


/* The registry's set of the module's C functions (keys: light C functions),
** for nvfp4L_inbinding: those of the tables at idx and in package.loaded
** under the method tables' names. */
#define NVFP4L_CFUNCS "nvfp4.cfuncs"

static void addcfuncs (lua_State *L, int set, int tbl) {
  lua_pushnil(L);
  while (lua_next(L, tbl) != 0) {
    lua_CFunction f = lua_tocfunction(L, -1);
    if (f != NULL) {
      lua_pushcfunction(L, f);
      lua_pushboolean(L, 1);
      lua_rawset(L, set);
    }
    lua_pop(L, 1);
  }
}


static void markcfuncs (lua_State *L, int mod) {
  static const char *const tables[] = {"nvfp4.tensor", "nvfp4.comm", "nvfp4.handle",
                                       "nvfp4.linear"};
  int set, i;
  lua_newtable(L);
  set = lua_gettop(L);
  addcfuncs(L, set, mod);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  for (i = 0; i < (int)(sizeof tables / sizeof tables[0]); i++) {
    if (lua_getfield(L, -1, tables[i]) == LUA_TTABLE) addcfuncs(L, set, lua_gettop(L));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, NVFP4L_CFUNCS);
}


/* coroutine.resume's function and that of coroutine.wrap's closures (the
** same C functions in every state of the process), for nvfp4L_inbinding;
** NULL where the coroutine library was not open when the module was */
static lua_CFunction co_resume, co_wrapped;

static void markcoroutines (lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "coroutine") == LUA_TTABLE) {
    lua_getfield(L, -1, "resume");
    co_resume = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "wrap") == LUA_TFUNCTION) {
      lua_getfield(L, -2, "running");               /* any function: the closure is never called */
      if (lua_pcall(L, 1, 1, 0) == LUA_OK) co_wrapped = lua_tocfunction(L, -1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}


/* Whether a frame of thread T (from level `from`) runs one of the module's
** C functions (the set at index set of L). */
static int walkthread (lua_State *L, lua_State *T, int from, int set) {
  lua_Debug ar;
  int level, found = 0;
  for (level = from; !found && lua_getstack(T, level, &ar); level++) {
    lua_CFunction f;
    if (!lua_checkstack(T, 1)) return 1;            /* cannot tell: as if one were */
    lua_getinfo(T, "f", &ar);                        /* pushes the frame's function onto T */
    f = lua_tocfunction(T, -1);
    lua_pop(T, 1);
    if (f != NULL) {
      lua_pushcfunction(L, f);
      found = lua_rawget(L, set) != LUA_TNIL;
      lua_pop(L, 1);
    }
  }
  return found;
}


/* The coroutine that T (a thread in 'normal' status: it resumed another)
** resumed, from its top frame: coroutine.resume's first argument, or a
** coroutine.wrap closure's thread (its upvalue); NULL when T resumed it
** some other way (coroutine.close running __close methods, C code). */
static lua_State *resumedby (lua_State *T) {
  lua_Debug ar;
  lua_State *co = NULL;
  lua_CFunction f;
  if (!lua_getstack(T, 0, &ar) || !lua_checkstack(T, 2)) return NULL;
  lua_getinfo(T, "f", &ar);
  f = lua_tocfunction(T, -1);
  if (f != NULL && f == co_resume) {
    if (lua_getlocal(T, &ar, 1) != NULL) {
      co = lua_tothread(T, -1);
      lua_pop(T, 1);
    }
  }
  else if (f != NULL && f == co_wrapped && lua_getupvalue(T, -1, 1) != NULL) {
    co = lua_tothread(T, -1);
    lua_pop(T, 1);
  }
  lua_pop(T, 1);
  return co;
}


/* Every binding call in progress is on a thread of the chain from the main
** thread to L, each resuming the next (a suspended coroutine is in none: a
** binding call does not yield), so the walk follows that chain: a close
** from a coroutine that an option's __index, a debug hook or a finalizer
** resumed during a binding call is tied to that call.  A link it cannot
** follow counts as a call (the close deferred: safe, freed with its
** handle). */
#define NVFP4L_MAXHOPS 1000    /* past Lua's C-call limit (200): no chain is longer */

int nvfp4L_inbinding (lua_State *L) {
  lua_State *T;
  int set, hops, found = 0;
  if (lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_CFUNCS) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  set = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  T = lua_tothread(L, -1);
  lua_pop(L, 1);
  /* level 0 of L is the close itself (or __gc called as one) */
  for (hops = 0; T != NULL && hops <= NVFP4L_MAXHOPS; hops++) {
    if (walkthread(L, T, T == L ? 1 : 0, set)) {
      found = 1;
      break;
    }
    if (T == L) break;
    T = resumedby(T);
  }
  if (T == NULL || hops > NVFP4L_MAXHOPS) found = 1;
  lua_pop(L, 1);
  return found;
}


/* The collector calls a finalizer with its object alone, and Lua 5.4.4
** names that call "__gc" (a "metamethod"), or "hook" when the collection
** ran inside a debug hook (its frame's flag is tested first); a call from
** Lua code gets the name of its call site, and a __gc reached as another
** object's __call (a finalizer that is a table or userdata) gets two
** arguments. */
int nvfp4L_finalizing (lua_State *L) {
  lua_Debug ar;
  if (lua_gettop(L) != 1 || !lua_getstack(L, 0, &ar) || !lua_getinfo(L, "n", &ar) ||
      ar.namewhat == NULL)
    return 0;
  return strcmp(ar.namewhat, "hook") == 0 ||
         (strcmp(ar.namewhat, "metamethod") == 0 && ar.name != NULL && strcmp(ar.name, "__gc") == 0);
}


int luaopen_nvfp4 (lua_State *L) {
  int mod;
  openctx(L);
  createmeta(L);
  luaL_newlib(L, mod_funcs);                        /* the module table */
  mod = lua_gettop(L);
  if (lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  lua_getfield(L, -1, "seed");
  lua_setfield(L, mod, "seed");                     /* nvfp4.seed: the run seed */
  lua_setfield(L, mod, "options");                  /* nvfp4.options */
  lua_pushliteral(L, NVFP4_VERSION);
  lua_setfield(L, mod, "_VERSION");
  nvfp4L_open_comm(L, mod);
  nvfp4L_open_linear(L, mod);
  lua_settop(L, mod);
  markcfuncs(L, mod);
  markcoroutines(L);
  return 1;
}

/* }====================================================== */
