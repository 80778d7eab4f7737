/*
** lnvfp4comm.c -- the `nvfp4` module's communicators: nvfp4.world(),
** comm:split(tp), the collectives (plain and NVFP4 all-gather with the
** columnwise rule by name, reduce-scatter, all-reduce, host-value
** reductions), async gather handles, and nvfp4.watchdog, the per-case
** timeout that ends the whole job (MPI_Abort) when a case hangs.
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nvfp4_mpi.h"
#include "lnvfp4.h"

#define WORLD_KEY  "nvfp4.world"    /* registry: the cached world comm */

/* c / h == NULL: closed; zombie: closed inside a binding call (nvfp4L_inbinding) */
typedef struct LComm { nvfp4_comm *c, *zombie; } LComm;
typedef struct LHandle { nvfp4_handle *h, *zombie; } LHandle;  /* uservalues: x, comm, result */


nvfp4_comm *nvfp4L_tocomm (lua_State *L, int arg) {
  LComm *p = (LComm *)luaL_checkudata(L, arg, NVFP4L_COMM);
  luaL_argcheck(L, p->c != NULL, arg, "communicator is closed");
  return p->c;
}


/* The open communicator at 1 for method `name`.  A closed one raises
** "calling 'name' on bad self (communicator is closed)" however the method
** was called (as tohandle below for handles). */
static nvfp4_comm *selfcomm (lua_State *L, const char *name) {
  LComm *p = (LComm *)luaL_checkudata(L, 1, NVFP4L_COMM);
  if (p->c == NULL) luaL_error(L, "calling '%s' on bad self (communicator is closed)", name);
  return p->c;
}


static LComm *newcomm (lua_State *L) {
  LComm *p;
  nvfp4L_notclosing(L, "a communicator");
  p = (LComm *)lua_newuserdatauv(L, sizeof(LComm), 0);
  p->c = p->zombie = NULL;
  luaL_setmetatable(L, NVFP4L_COMM);
  return p;
}


/* nvfp4.world() -> the communicator over MPI_COMM_WORLD (one per process). */
static int mod_world (lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, WORLD_KEY) == LUA_TNIL) {
    nvfp4_ctx *ctx = nvfp4L_getctx(L);
    LComm *p = newcomm(L);
    nvfp4L_checkstatus(L, nvfp4_comm_create_mpi(ctx, MPI_COMM_WORLD, &p->c));
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, WORLD_KEY);
  }
  return 1;
}


static int comm_free (lua_State *L) {
  LComm *p = (LComm *)luaL_checkudata(L, 1, NVFP4L_COMM);
  nvfp4_comm_destroy(p->c);
  nvfp4_comm_destroy(p->zombie);
  p->c = p->zombie = NULL;
  return 0;
}


/* c:close() and <close>: the world is shared by the whole process (the
** framework runs on it too), so closing it does nothing; it is freed when
** the state closes (__gc). */
static int comm_close (lua_State *L) {
  LComm *p = (LComm *)luaL_checkudata(L, 1, NVFP4L_COMM);
  int isworld;
  lua_getfield(L, LUA_REGISTRYINDEX, WORLD_KEY);
  isworld = lua_rawequal(L, 1, -1);
  lua_pop(L, 1);
  if (isworld) return 0;
  return nvfp4L_close(L, p, c, comm_free);
}


/* __gc: the collector's call frees (the registry keeps the world until
** lua_close); one from Lua code (debug.getmetatable(w).__gc(w)) is a close. */
static int comm_gc (lua_State *L) {
  return nvfp4L_finalizing(L) ? comm_free(L) : comm_close(L);
}


nvfp4_comm *nvfp4L_optcomm (lua_State *L, int arg, const char *key) {
  return (nvfp4_comm *)nvfp4L_optobject(L, arg, key, NVFP4L_COMM);
}


nvfp4_comm *nvfp4L_commof (lua_State *L, int idx) {
  LComm *p = (LComm *)luaL_testudata(L, idx, NVFP4L_COMM);
  return p != NULL ? p->c : NULL;
}


nvfp4_comm *nvfp4L_commheld (lua_State *L, int idx) {
  LComm *p = (LComm *)luaL_testudata(L, idx, NVFP4L_COMM);
  return p == NULL ? NULL : p->c != NULL ? p->c : p->zombie;
}


void nvfp4L_keepopt (lua_State *L, int opts, const char *key, int ud) {
  if (lua_type(L, opts) == LUA_TTABLE) lua_getfield(L, opts, key);
  else lua_pushnil(L);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, ud, 1);
}


nvfp4_comm *nvfp4L_keptcomm (lua_State *L, int ud) {
  nvfp4_comm *g;
  lua_getiuservalue(L, ud, 1);
  g = nvfp4L_commheld(L, -1);
  lua_pop(L, 1);
  return g;
}


static int comm_tostring (lua_State *L) {
  LComm *p = (LComm *)luaL_checkudata(L, 1, NVFP4L_COMM);
  if (p->c == NULL) lua_pushliteral(L, "nvfp4.comm (closed)");
  else lua_pushfstring(L, "nvfp4.comm rank %d of %d %s", nvfp4_comm_rank(p->c),
                       nvfp4_comm_size(p->c), nvfp4_comm_transport(p->c));
  return 1;
}


/* comm.rank (0-based, as MPI), comm.size, comm.transport; else methods. */
static int comm_index (lua_State *L) {
  LComm *p = (LComm *)luaL_checkudata(L, 1, NVFP4L_COMM);
  nvfp4_comm *c = p->c;
  const char *k;
  int field;
  if (lua_type(L, 2) != LUA_TSTRING) return 0;   /* c[1], c[{}]: nil, as for a tensor */
  k = lua_tostring(L, 2);
  field = strcmp(k, "rank") == 0 || strcmp(k, "size") == 0 || strcmp(k, "transport") == 0;
  /* a closed one: its fields raise, its methods are found (and raise,
  ** naming themselves, but close) */
  if (field && c == NULL) return luaL_error(L, "communicator is closed (reading '%s')", k);
  if (strcmp(k, "rank") == 0) lua_pushinteger(L, nvfp4_comm_rank(c));
  else if (strcmp(k, "size") == 0) lua_pushinteger(L, nvfp4_comm_size(c));
  else if (strcmp(k, "transport") == 0) lua_pushstring(L, nvfp4_comm_transport(c));
  else lua_gettable(L, lua_upvalueindex(1));    /* methods[k] */
  return 1;
}


/* c:isclosed() -> true once closed (the world never is). */
static int comm_isclosed (lua_State *L) {
  LComm *p = (LComm *)luaL_checkudata(L, 1, NVFP4L_COMM);
  lua_pushboolean(L, p->c == NULL);
  return 1;
}


/* c:split(tp): the range check is the library's, after the ranks agree (a
** rank refusing tp here would leave the others in the split).  A tp that
** is no integer, or one outside int, is refused on this rank only after
** the library has told the others (a split with tp 0, which every rank's
** agreement refuses), naming the value given. */
static int comm_split (lua_State *L) {
  nvfp4_comm *c = selfcomm(L, "split");
  int isint = 0;
  lua_Integer tp = lua_tointegerx(L, 2, &isint);
  LComm *p = newcomm(L);
  isint = isint && lua_type(L, 2) == LUA_TNUMBER;       /* "2" is no integer */
  if (!isint || tp < INT_MIN || tp > INT_MAX) {
    (void)nvfp4_comm_split(c, 0, &p->c);
    if (!isint) nvfp4L_checkint(L, 2);       /* raises: what was given instead */
    return luaL_error(L, "split: tp=%I must be >= 1 and divide the "
                      "communicator size %d", tp, nvfp4_comm_size(c));
  }
  nvfp4L_checkstatus(L, nvfp4_comm_split(c, (int)tp, &p->c));
  return 1;
}


static int comm_barrier (lua_State *L) {
  nvfp4L_checkstatus(L, nvfp4_comm_barrier(selfcomm(L, "barrier")));
  return 0;
}


/* self of a host-value collective named name, after the library's
** agreement: a rank in another collective on the comm (the library's or one
** of these) makes both raise "the ranks are in different calls on this
** comm" instead of meeting in an MPI call of the other's. */
static nvfp4_comm *agreed (lua_State *L, const char *name) {
  nvfp4_comm *c = selfcomm(L, name);
  nvfp4L_checkstatus(L, nvfp4_comm_agree(c, name, NVFP4_OK));
  return c;
}


/* The error of a collective's argument that rank r gave wrong, raised alike
** on every rank: rank r says what it gave (got, its own; ignored on the
** others) to all of them first (a broadcast every rank of c makes). */
static int collective_badarg (lua_State *L, nvfp4_comm *c, int r, const char *expected,
                              const char *got) {
  char said[128];
  memset(said, 0, sizeof said);
  if (nvfp4_comm_rank(c) == r) {
    const size_t n = strlen(got);
    if (n < sizeof said) memcpy(said, got, n);
    else snprintf(said, sizeof said, "%.*s...", (int)sizeof said - 4, got);
  }
  if (MPI_Bcast(said, (int)sizeof said, MPI_CHAR, r, nvfp4_comm_mpi(c)) != MPI_SUCCESS)
    return luaL_error(L, "MPI_Bcast failed");
  said[sizeof said - 1] = '\0';
  return luaL_argerror(L, 2, lua_pushfstring(L, "rank %d gave something else than %s (got %s)", r,
                                             expected, said));
}


/* comm:all_reduce_max(v) where v is a number or a list of numbers: all
** integers give an exact 64-bit integer reduction, otherwise doubles, where
** a NaN anywhere makes that element NaN everywhere (MPI_MAX alone drops or
** keeps it depending on the ranks' order).  Returns the same form.  One
** small round first, so that every rank takes the same path and a rank
** with a bad argument (a non-number, a list of another length) makes every
** rank raise the same error instead of leaving them in the reduction. */
static int comm_all_reduce_max (lua_State *L) {
  nvfp4_comm *c;
  lua_settop(L, 2);                       /* v missing: nil, below what is pushed */
  c = agreed(L, "all_reduce_max");
  MPI_Comm mc = nvfp4_comm_mpi(c);
  const int scalar = lua_type(L, 2) == LUA_TNUMBER, me = nvfp4_comm_rank(c), size = nvfp4_comm_size(c);
  int i, n;
  /* [0] n, [1] -n, [2] not all integers, [3] size - the lowest rank with a
  ** bad argument (0: none) */
  long long meta[4] = {0, 0, 0, 0};
  long long *iv;
  double *dv;
  const char *got = NULL;                 /* this rank's bad argument, said */
  int *lens = (int *)lua_newuserdatauv(L, sizeof(int) * (size_t)size, 0);
  if (!scalar && lua_type(L, 2) != LUA_TTABLE) got = nvfp4L_gotvalue(L, 2);
  n = got != NULL ? 0 : scalar ? 1 : (int)lua_rawlen(L, 2);
  iv = (long long *)lua_newuserdatauv(L, sizeof(long long) * (size_t)(n + 1), 0);
  dv = (double *)lua_newuserdatauv(L, sizeof(double) * 2 * (size_t)(n + 1), 0);
  for (i = 0; i < n; i++) {
    int isnum;
    double d;
    if (scalar) lua_pushvalue(L, 2); else lua_rawgeti(L, 2, i + 1);
    if (lua_type(L, -1) != LUA_TNUMBER) {                                /* "5" too */
      got = lua_pushfstring(L, "%s at index %d", nvfp4L_gotvalue(L, -1), i + 1);   /* kept */
      break;
    }
    isnum = lua_isinteger(L, -1);
    d = lua_tonumber(L, -1);
    if (!isnum) meta[2] = 1;
    iv[i] = (long long)lua_tointeger(L, -1);
    dv[i] = d != d ? -HUGE_VAL : d;      /* NaN: its flag below */
    dv[n + i] = d != d ? 1.0 : 0.0;
    lua_pop(L, 1);
  }
  meta[0] = n;
  meta[1] = -(long long)n;
  if (got != NULL) meta[3] = size - me;
  if (MPI_Allreduce(MPI_IN_PLACE, meta, 4, MPI_LONG_LONG, MPI_MAX, mc) != MPI_SUCCESS)
    return luaL_error(L, "all_reduce_max: MPI_Allreduce failed");
  if (meta[3]) {
    const int r = size - (int)meta[3];
    return collective_badarg(L, c, r, "a number or a list of numbers", got);
  }
  if (meta[0] != -meta[1]) {      /* every rank is here: name the first that differs */
    int r;                                       /* lens: allocated before the rounds */
    if (MPI_Allgather(&n, 1, MPI_INT, lens, 1, MPI_INT, mc) != MPI_SUCCESS)
      return luaL_error(L, "all_reduce_max: MPI_Allgather failed");
    for (r = 1; r < size - 1 && lens[r] == lens[0]; r++) {}
    return luaL_argerror(L, 2, lua_pushfstring(L, "the ranks' lists differ in length: rank %d "
                                               "has %d value%s, rank 0 has %d", r, lens[r],
                                               lens[r] == 1 ? "" : "s", lens[0]));
  }
  if (!meta[2]) {
    if (MPI_Allreduce(MPI_IN_PLACE, iv, n, MPI_LONG_LONG, MPI_MAX, mc) != MPI_SUCCESS)
      return luaL_error(L, "all_reduce_max: MPI_Allreduce failed");
  }
  else {                                    /* values, then NaN flags */
    if (MPI_Allreduce(MPI_IN_PLACE, dv, 2 * n, MPI_DOUBLE, MPI_MAX, mc) != MPI_SUCCESS)
      return luaL_error(L, "all_reduce_max: MPI_Allreduce failed");
  }
  if (!scalar) lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    if (!meta[2]) lua_pushinteger(L, (lua_Integer)iv[i]);
    else lua_pushnumber(L, dv[n + i] > 0.0 ? (lua_Number)NAN : (lua_Number)dv[i]);
    if (!scalar) lua_rawseti(L, -2, i + 1);
  }
  return 1;
}


/* comm:all_gather_int(v) -> {v of rank 0, v of rank 1, ..}, 64-bit exact.
** Each rank sends (not an integer?, v): a rank with a bad v makes every rank
** raise the same error, instead of leaving the others in the gather. */
static int comm_all_gather_int (lua_State *L) {
  nvfp4_comm *c;
  lua_settop(L, 2);                       /* v missing: nil, below what is pushed */
  c = agreed(L, "all_gather_int");
  int isint = 0, i, n = nvfp4_comm_size(c);
  long long mine[2];
  long long *out = (long long *)lua_newuserdatauv(L, 2 * sizeof(long long) * (size_t)n, 0);
  mine[1] = (long long)lua_tointegerx(L, 2, &isint);
  mine[0] = !isint || lua_type(L, 2) != LUA_TNUMBER;     /* "7" is no integer */
  if (MPI_Allgather(mine, 2, MPI_LONG_LONG, out, 2, MPI_LONG_LONG, nvfp4_comm_mpi(c)) != MPI_SUCCESS)
    return luaL_error(L, "all_gather_int: MPI_Allgather failed");
  for (i = 0; i < n; i++)
    if (out[2 * i])
      return collective_badarg(L, c, i, "an integer", i == nvfp4_comm_rank(c) ? nvfp4L_gotvalue(L, 2) : "");
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)out[2 * i + 1]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}


/* comm:all_gather_string(s) -> {s of rank 0, ..}: for reports (the
** framework gathers failure messages with it).  Straight MPI on host. */
static int comm_all_gather_string (lua_State *L) {
  nvfp4_comm *c;
  lua_settop(L, 2);                       /* v missing: nil, below what is pushed */
  c = agreed(L, "all_gather_string");
  size_t len = 0;
  const char *s = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &len) : NULL;
  int i, n = nvfp4_comm_size(c), total = 0, mine;
  int *lens = (int *)lua_newuserdatauv(L, sizeof(int) * 2 * (size_t)n, 0), *offs = lens + n;
  char *buf;
  /* the lengths first, a bad argument as -1 (not a string) or -2 (16 MiB or
  ** more): every rank then raises the same error (strict: no number coercion) */
  mine = s == NULL ? -1 : len >= (1u << 24) ? -2 : (int)len;
  if (MPI_Allgather(&mine, 1, MPI_INT, lens, 1, MPI_INT, nvfp4_comm_mpi(c)) != MPI_SUCCESS)
    return luaL_error(L, "all_gather_string: MPI_Allgather failed");
  for (i = 0; i < n; i++) {
    if (lens[i] == -1)
      return collective_badarg(L, c, i, "a string", i == nvfp4_comm_rank(c) ? nvfp4L_gotvalue(L, 2) : "");
    if (lens[i] == -2)
      return luaL_argerror(L, 2, lua_pushfstring(L, "rank %d's string is 16 MiB or longer", i));
    if (lens[i] > 0x7fffffff - total)
      return luaL_argerror(L, 2, "the strings add up to 2 GiB or more");
    offs[i] = total;
    total += lens[i];
  }
  buf = (char *)lua_newuserdatauv(L, (size_t)total + 1, 0);
  if (MPI_Allgatherv(s, mine, MPI_CHAR, buf, lens, offs, MPI_CHAR, nvfp4_comm_mpi(c)) != MPI_SUCCESS)
    return luaL_error(L, "all_gather_string: MPI_Allgatherv failed");
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushlstring(L, buf + offs[i], (size_t)lens[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}


/* comm:reduce_scatter(x) / comm:all_reduce(x): sums of plain tensors.  x
** that is no open tensor: the library is called with none first, so that
** the other ranks (in its agreement) get EPEER instead of waiting in the
** collective; then nvfp4L_totensor raises the argument's error here. */
typedef nvfp4_status (*sum_fn) (nvfp4_comm *, const nvfp4_tensor *, nvfp4_tensor **);

static int comm_sum (lua_State *L, const char *name, sum_fn f) {
  nvfp4_comm *c = selfcomm(L, name);
  nvfp4_tensor *x, *none = NULL;
  LTensor *p;
  if (nvfp4L_tensorof(L, 2) == NULL) (void)f(c, NULL, &none);
  x = nvfp4L_totensor(L, 2);
  p = nvfp4L_newtensor(L);
  nvfp4L_checkstatus(L, f(c, x, &p->t));
  return 1;
}


static int comm_reduce_scatter (lua_State *L) {
  return comm_sum(L, "reduce_scatter", nvfp4_reduce_scatter);
}


static int comm_all_reduce (lua_State *L) {
  return comm_sum(L, "all_reduce", nvfp4_all_reduce_sum);
}


static const char *const gather_opts[] = {
  "rule", "rowwise", "columnwise", "quantize", "async", NULL
};
/* the option 'rule' (nvfp4_cw_rule_parse maps a name to the enum; the first
** is the default) */
static const char *const rule_names[] = {"flat2d", "nd", NULL};


/* comm:all_gather(x [, dim] [, opts]) along dim 1 (the only one, TE's).
**   plain x, no opts.quantize: high-precision concatenation;
**   plain x, opts.quantize = {quantize options}: the NVFP4 gather of a
**     shard quantized with its amax reduced over comm;
**   fp4 x: the NVFP4 gather, usages opts.rowwise / opts.columnwise;
**   opts.rule = "flat2d" (default) | "nd" (TE 2.21's columnwise rule);
**   opts.async = true: returns an nvfp4.handle; h:wait() gives the tensor. */
/* What c:all_gather's arguments say (gather_parse). */
typedef struct gather_args {
  nvfp4_tensor *x;
  int fp4, async, hasq;
  nvfp4_gather_opts g;
  nvfp4_qopts q;
} gather_args;

/* c:all_gather's arguments, as in the call, into the gather_args at
** upvalue 1 (run under lua_pcall by comm_all_gather). */
static int gather_parse (lua_State *L) {
  gather_args *a = (gather_args *)lua_touserdata(L, lua_upvalueindex(1));
  int o = 3;
  nvfp4L_tocomm(L, 1);
  a->x = nvfp4L_totensor(L, 2);
  a->fp4 = nvfp4_tensor_dtype(a->x) == NVFP4_FP4;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    nvfp4L_checkdim(L, 3, nvfp4_tensor_shape(a->x).ndim);
    luaL_argcheck(L, lua_tointeger(L, 3) == 1, 3, "the gather runs along dim 1 only");
    o = 4;
  }
  lua_settop(L, o);
  nvfp4L_checkopts(L, o, gather_opts);
  a->async = nvfp4L_optbool(L, o, "async", 0);
  /* the message of every rule option and argument: "must be one of
  ** 'flat2d', 'nd'; got '2d'" (nvfp4.linear, nvfp4.cw_rule) */
  (void)nvfp4_cw_rule_parse(rule_names[nvfp4L_optname(L, o, "rule", rule_names, 0)], &a->g.rule);
  a->hasq = nvfp4L_getopt(L, o, "quantize") != LUA_TNIL;  /* the qopts table, at top */
  if (a->fp4) {
    if (a->hasq) nvfp4L_opterror(L, o, "quantize", "applies to a plain tensor, not an fp4 one");
    a->g.rowwise = nvfp4L_optbool(L, o, "rowwise", 0);
    a->g.columnwise = nvfp4L_optbool(L, o, "columnwise", 0);
  } else {
    if (nvfp4L_optbool(L, o, "rowwise", 0) || nvfp4L_optbool(L, o, "columnwise", 0))
      nvfp4L_opterror(L, o, "rowwise/columnwise", "apply to an fp4 tensor "
                      "(for a plain one, say quantize = {rowwise = .., columnwise = ..})");
    if (a->hasq) {
      a->q = nvfp4L_checkqopts_at(L, o, "quantize");
      /* the library reduces the amax over c itself: another comm there was
      ** silently replaced by it */
      if (a->q.amax_group != NULL)
        nvfp4L_opterror(L, o, "quantize.amax_group", "is not taken: the gather reduces the amax over "
                        "its own communicator (leave it out)");
      a->g.quant = &a->q;
    }
  }
  if (!a->fp4 && !a->hasq && a->async)
    nvfp4L_opterror(L, o, "async", "needs an NVFP4 gather (fp4 x or quantize = {..})");
  /* a rule on a plain gather would be silently ignored: the caller most
  ** likely forgot quantize = {..} and would test no NVFP4 gather at all */
  if (!a->fp4 && !a->hasq) {
    const int rule_given = nvfp4L_getopt(L, o, "rule") != LUA_TNIL;
    lua_pop(L, 1);
    if (rule_given)
      nvfp4L_opterror(L, o, "rule", "needs an NVFP4 gather (fp4 x or quantize = {..}); "
                      "a plain x is gathered as it is");
  }
  return 0;
}


/* c:all_gather(x [, 1] [, opts]).  Arguments refused here on one rank only
** would leave the others in the library's metadata round: the library is
** then called with no tensor (one failed round, which they see as EPEER)
** before the error is raised as usual. */
static int comm_all_gather (lua_State *L) {
  gather_args *a;
  nvfp4_comm *c;
  int n = lua_gettop(L), i;
  selfcomm(L, "all_gather");
  a = (gather_args *)lua_newuserdatauv(L, sizeof *a, 0);
  memset(a, 0, sizeof *a);
  lua_pushlightuserdata(L, a);
  lua_pushcclosure(L, gather_parse, 1);
  luaL_checkstack(L, n, "too many arguments to all_gather");   /* a C function gets 20 slots */
  for (i = 1; i <= n; i++) lua_pushvalue(L, i);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    if ((c = nvfp4L_commheld(L, 1)) != NULL) {     /* closed by the options' code: held */
      nvfp4_tensor *none = NULL;
      (void)nvfp4_all_gather_plain(c, NULL, &none);
    }
    return nvfp4L_reraise(L);
  }
  /* x and the comm again, as this call holds them: the options' code may
  ** have closed them (deferred to the call's end, see nvfp4L_inbinding) */
  c = nvfp4L_commheld(L, 1);
  if (nvfp4L_tensorheld(L, 2) == NULL) {
    nvfp4_tensor *none = NULL;
    (void)nvfp4_all_gather_plain(c, NULL, &none);   /* the peers learn of it */
  }
  a->x = nvfp4L_heldtensor(L, 2);
  if (!a->fp4 && !a->hasq) {
    LTensor *p = nvfp4L_newtensor(L);
    nvfp4L_checkstatus(L, nvfp4_all_gather_plain(c, a->x, &p->t));
  } else if (!a->async) {
    LTensor *p = nvfp4L_newtensor(L);
    nvfp4L_checkstatus(L, nvfp4_all_gather(c, a->x, &a->g, &p->t));
  } else {
    LHandle *h;
    nvfp4L_mempressure(L, "a gather handle");    /* the handle holds library memory */
    h = (LHandle *)lua_newuserdatauv(L, sizeof(LHandle), 3);
    h->h = h->zombie = NULL;
    luaL_setmetatable(L, NVFP4L_HANDLE);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, -2, 1);                 /* keep x alive while in flight */
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 2);                 /* and the comm */
    nvfp4L_checkstatus(L, nvfp4_all_gather_async(c, a->x, &a->g, &h->h));
  }
  return 1;
}


/* The open handle at 1 for method `name`.  A closed one raises "calling
** 'name' on bad self (handle is closed)" however the method was called:
** luaL_argcheck names it only when Lua knows the name, and a method called
** through pcall(h.wait, h) has none ("bad argument #1 to '?'"). */
static nvfp4_handle *tohandle (lua_State *L, const char *name) {
  LHandle *h = (LHandle *)luaL_checkudata(L, 1, NVFP4L_HANDLE);
  if (h->h == NULL) luaL_error(L, "calling '%s' on bad self (handle is closed)", name);
  return h->h;
}


/* h:wait() -> the gathered tensor; waiting again returns the same one. */
static int handle_wait (lua_State *L) {
  nvfp4_handle *h;
  nvfp4_tensor *borrowed = NULL;
  LTensor *p;
  luaL_checkudata(L, 1, NVFP4L_HANDLE);
  if (lua_getiuservalue(L, 1, 3) != LUA_TNIL) return 1;
  h = tohandle(L, "wait");
  nvfp4L_checkstatus(L, nvfp4_handle_wait(h, &borrowed));
  p = nvfp4L_newtensor(L);
  /* a finalizer that collection ran may have waited on this handle */
  if (lua_getiuservalue(L, 1, 3) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  nvfp4L_checkstatus(L, nvfp4_handle_take(h, &p->t));
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, 1, 3);
  return 1;
}


static int handle_finish_count (lua_State *L) {
  lua_pushinteger(L, nvfp4_handle_finish_count(tohandle(L, "finish_count")));
  return 1;
}


static int handle_free (lua_State *L) {
  LHandle *h = (LHandle *)luaL_checkudata(L, 1, NVFP4L_HANDLE);
  nvfp4_handle_destroy(h->h);
  nvfp4_handle_destroy(h->zombie);
  h->h = h->zombie = NULL;
  return 0;
}


/* h:close() and <close>: at once, unless a binding call below may hold it. */
static int handle_close (lua_State *L) {
  LHandle *h = (LHandle *)luaL_checkudata(L, 1, NVFP4L_HANDLE);
  return nvfp4L_close(L, h, h, handle_free);
}


/* __gc: the collector's call frees, one from Lua code is a close. */
static int handle_gc (lua_State *L) {
  return nvfp4L_finalizing(L) ? handle_free(L) : handle_close(L);
}


static int handle_tostring (lua_State *L) {
  LHandle *h = (LHandle *)luaL_checkudata(L, 1, NVFP4L_HANDLE);
  lua_pushstring(L, h->h == NULL ? "nvfp4.handle (closed)" : "nvfp4.handle");
  return 1;
}


/*
** {======================================================
** Watchdog: a thread that ends the job when a case runs past its time
** =======================================================
*/

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, armed;
  struct timespec deadline;
  double secs;
  double linger;                   /* seconds between the message and the job's end */
  char label[1024];
  char stdout_prefix[64];          /* "": none; else also a line on stdout */
  char note[8192];                 /* "": none; else a second line on stderr */
  /* nvfp4.watchdog_junit: a JUnit file to write when the job ends here,
  ** pre .. the line said (XML-escaped) .. post; NULL: none */
  char *junit_path, *junit_pre, *junit_post;
} wd = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {0, 0}, 0, 0, "", "", "",
        NULL, NULL, NULL};


/* the clock of wd.deadline and of the thread's waits (wd_start) */
static clockid_t wd_clock = CLOCK_REALTIME;


/* src into dst[n]; one that does not fit ends in " ..." (a replay command cut
** silently would run other cases when pasted) */
static void wd_copy (char *dst, size_t n, const char *src) {
  if ((size_t)snprintf(dst, n, "%s", src) >= n) memcpy(dst + n - 5, " ...", 5);
}


/* Case notes: a rank whose case ended (failed, skipped or passed) tells the
** others (nvfp4.watchdog_tell), and a rank that waits in the agreement of a
** collective over it during that case (nvfp4.watchdog_case; on_wait, the
** library's wait callback) ends the job half a second later, naming it,
** instead of waiting out the case's timeout.  The
** watchdog's thread receives the notes (MPI_THREAD_MULTIPLE; without it
** nothing is received and the timeout stays the only end), on a
** communicator of their own made at start-up (nvfp4L_notes_init).  A rank
** whose script has ended says so too (nvfp4L_notes_ended): a rank waiting
** in a collective over it, in a case or outside any (top-level code, after
** sc.run), ends the job the same way -- that rank joins no collective any
** more, and sits in MPI_Finalize.  All under wd.mu. */
#define NOTE_TAG 77
#define NOTE_CONFIRM 0.5           /* s the rank must still wait after the note */
#define NOTE_ENDED (-1LL)          /* kase of nvfp4L_notes_ended's note: the script ended there */
/* s the rank must still wait after an ended note that arrived during the
** wait (the peer may have left this very collective just before ending;
** generous, as a rank of an oversubscribed job can be off a core that long).
** A wait that begins with the note already there ends the job at once. */
#define NOTE_CONFIRM_ENDED 5.0
typedef struct fnote { long long kase; char text[1016]; } fnote;
static struct {
  MPI_Comm comm;                   /* MPI_COMM_NULL: notes off */
  int size, rank;
  long long kase;                  /* the case under way on this rank, 0: none */
  int waiting;                     /* in a collective over the ranks marked in member */
  unsigned serial;                 /* of that wait */
  unsigned char *member;           /* [size] */
  fnote *got;                      /* [size]: each rank's latest note */
  int noted;                       /* a note matched wait `noted_serial` at noted_at */
  unsigned noted_serial;
  struct timespec noted_at;
  int *in;                         /* [2 * size]: on_wait's rank translation */
  MPI_Group world;                 /* MPI_COMM_WORLD's group, for that translation */
  struct { fnote n; MPI_Request *rq; int nrq; } out[8];   /* notes sent, in flight; rq [size] */
  int nout;
  int settled;                     /* nvfp4L_watchdog_settle ran: no more waits watched */
} fn = {MPI_COMM_NULL, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, {0, 0}, NULL, MPI_GROUP_NULL,
        {{{0, ""}, NULL, 0}}, 0, 0};


static double ts_diff (const struct timespec *a, const struct timespec *b) {
  return (double)(a->tv_sec - b->tv_sec) + 1e-9 * (double)(a->tv_nsec - b->tv_nsec);
}


static void on_wait (nvfp4_comm *c, int entering, void *ud);


void nvfp4L_notes_init (void) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  MPI_Comm_size(MPI_COMM_WORLD, &fn.size);
  MPI_Comm_rank(MPI_COMM_WORLD, &fn.rank);
  fn.member = (unsigned char *)calloc((size_t)fn.size, 1);
  fn.got = (fnote *)calloc((size_t)fn.size, sizeof *fn.got);
  fn.in = (int *)calloc(2 * (size_t)fn.size, sizeof *fn.in);
  /* collective, on every rank alike: the verdict must be too */
  if (MPI_Comm_dup(MPI_COMM_WORLD, &fn.comm) != MPI_SUCCESS) fn.comm = MPI_COMM_NULL;
  if (MPI_Comm_group(MPI_COMM_WORLD, &fn.world) != MPI_SUCCESS) fn.world = MPI_GROUP_NULL;
  if (level != MPI_THREAD_MULTIPLE || fn.member == NULL || fn.got == NULL || fn.in == NULL ||
      fn.world == MPI_GROUP_NULL ||
      fn.size < 2 ||
      (getenv("NVFP4_CASE_NOTES") != NULL && strcmp(getenv("NVFP4_CASE_NOTES"), "0") == 0)) {
    if (fn.comm != MPI_COMM_NULL) MPI_Comm_free(&fn.comm);
    fn.comm = MPI_COMM_NULL;
    return;
  }
  nvfp4_set_wait_callback(on_wait, NULL);
}


/* The job ends here saying `said` (its line without "[rank r] "): the
** JUnit file registered by nvfp4.watchdog_junit gets it in place of the
** framework's provisional reason (written to path.wd.tmp, then renamed over
** path, as the framework writes its path.tmp: a name of its own, so that the
** framework writing the file at the same moment cannot interleave with it;
** the last rename wins, whole).  Quietly nothing when it cannot. */
static void wd_junit (const char *said) {
  size_t n;
  FILE *f;
  char *tmp;
  const char *c;
  if (wd.junit_path == NULL) return;
  n = strlen(wd.junit_path);
  tmp = (char *)malloc(n + sizeof ".wd.tmp");
  if (tmp == NULL) return;
  memcpy(tmp, wd.junit_path, n);
  memcpy(tmp + n, ".wd.tmp", sizeof ".wd.tmp");
  f = fopen(tmp, "w");
  if (f != NULL) {
    fputs(wd.junit_pre, f);
    for (c = said; *c != '\0'; c++) {     /* as the framework's xmlesc */
      unsigned char u = (unsigned char)*c;
      if (u >= 0x80) {
        /* UTF-8 passes whole; a sequence cut short (the note and the label
        ** are cut at a byte count) or invalid is '?', so the file stays
        ** well-formed */
        int n = u >= 0xC2 && u <= 0xDF ? 2 : u >= 0xE0 && u <= 0xEF ? 3 : u >= 0xF0 && u <= 0xF4 ? 4 : 0, k;
        for (k = 1; k < n; k++)
          if (((unsigned char)c[k] & 0xC0u) != 0x80u) break;
        if (n == 0 || k < n) fputc('?', f);
        else {
          fwrite(c, 1, (size_t)n, f);
          c += n - 1;
        }
      }
      else if (u == '&') fputs("&amp;", f);
      else if (u == '<') fputs("&lt;", f);
      else if (u == '>') fputs("&gt;", f);
      else if (u == '"') fputs("&quot;", f);
      else if (u == '\'') fputs("&apos;", f);
      else if (u < 32 && u != '\t' && u != '\n' && u != '\r') fputc('?', f);
      else fputc(u, f);
    }
    fputs(wd.junit_post, f);
    if (fclose(f) != 0 || rename(tmp, wd.junit_path) != 0) remove(tmp);
  }
  free(tmp);
}


/* Where this rank's script was when its watchdog fired while it ran Lua
** code (a loop that never reaches a collective): the watchdog's thread
** signals the main thread, whose handler sets a hook on the main Lua thread
** (as lua.c's SIGINT handler does, the one thing a handler may do to a
** state); the hook, at the next instruction, notes the innermost Lua
** function's line and holds the thread there (busy) while the job ends.  The
** watchdog, having said its "timed out" line, waits for it up to a fifth of a
** second (the waiting peers' deadlines are a grace of 0.5 s or more later,
** so the job ends before they speak): a rank inside a C call (a collective,
** a sleep), a coroutine (the hook is the main thread's) or a finalizer (Lua
** runs none there) says nothing more.  wd_L is set
** by the first nvfp4.watchdog call and cleared for good when the state
** starts to close (nvfp4L_watchdog_forget_state, from mark_closing, which
** runs before every lua_close, os.exit(code, true)'s included: the signal
** must not touch a freed state while exit() runs), both under wd.mu, as
** wd_fire runs. */
static int fn_polling (void);
static lua_State *wd_L;
static int wd_Lgone;                    /* forgotten: never taken again (a finalizer's nvfp4.watchdog) */
static pthread_t wd_Lthread;
static char wd_where[600];
static volatile sig_atomic_t wd_where_done;

static void wd_where_hook (lua_State *L, lua_Debug *ar) {
  lua_Debug d;
  int level;
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  for (level = 0; lua_getstack(L, level, &d); level++)
    if (lua_getinfo(L, "Sln", &d) && d.currentline > 0) {
      snprintf(wd_where, sizeof wd_where, "%s:%d%s%s%s", d.short_src, d.currentline,
               d.name ? " (in function '" : "", d.name ? d.name : "", d.name ? "')" : "");
      break;
    }
  __atomic_store_n(&wd_where_done, 1, __ATOMIC_RELEASE);
  /* the watchdog's thread ends the job.  Busy, as the script was: parked
  ** in pause() instead, Open MPI's mpirun said "ORTE_ERROR_LOG: Data unpack
  ** would read past end of buffer" after the abort in 10 of 20 runs of
  ** inject_hang's job against 3 of 20 without the hook (7 of 30 so) */
  for (;;) __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void wd_where_signal (int sig) {
  lua_State *L = __atomic_load_n(&wd_L, __ATOMIC_ACQUIRE);
  (void)sig;
  if (L != NULL)
    lua_sethook(L, wd_where_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

/* wd_where after asking the main thread for it, or "" (see above). */
static const char *wd_locate (void) {
  struct sigaction sa;
  int i;
  if (wd_L == NULL || fn_polling() || pthread_equal(pthread_self(), wd_Lthread)) return "";
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = wd_where_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR2, &sa, NULL) != 0 || pthread_kill(wd_Lthread, SIGUSR2) != 0) return "";
  for (i = 0; i < 20 && !__atomic_load_n(&wd_where_done, __ATOMIC_ACQUIRE); i++) {
    struct timespec ts = {0, 10000000L};
    nanosleep(&ts, NULL);
  }
  return __atomic_load_n(&wd_where_done, __ATOMIC_ACQUIRE) ? wd_where : "";
}


/* See lnvfp4.h.  Under ORTE, mpirun ends the job when a rank exits non-zero
** without MPI_Finalize (orte_abort_non_zero_exit, on unless the rank's
** environment, where mpirun passes its --mca settings, turns it off), and
** its own "mpirun detected that one or more processes exited with non-zero
** status" replaces MPI_Abort's banner, a help message each aborting rank
** sends to mpirun: with ranks aborting together (every rank waiting over a
** failed one, every rank's watchdog), Open MPI 4.1's mpirun said
** "ORTE_ERROR_LOG: Data unpack would read past end of buffer in
** show_help.c" in a quarter to a third of 4-rank inject_ended and
** inject_error runs (and once, in CI, hung until the test's limit; one rank
** leading the abort while the others waited did not lower that rate:
** 82b4518), and in none of 42 runs of the four injection modes with the
** exit.  The job ends about a second later than MPI_Abort ended it when a
** rank hangs (inject_hang at 4 ranks: 3.7 s against 2.5 s). */
void nvfp4L_end_job (int status) {
  const char *orte = getenv("OMPI_MCA_orte_hnp_uri");
  const char *nz = getenv("OMPI_MCA_orte_abort_non_zero_exit");
  int fin = 1;
  fflush(NULL);
  MPI_Finalized(&fin);
  if (!fin && (orte == NULL || orte[0] == '\0' || (nz != NULL && (strcmp(nz, "0") == 0 ||
                                                               strcmp(nz, "false") == 0))))
    MPI_Abort(MPI_COMM_WORLD, status);
  _exit(status);
}


static void wd_fire (void) {
  int rank = 0, level = MPI_THREAD_SINGLE, fin = 0;
  const char *where;
  MPI_Finalized(&fin);                  /* callable after MPI_Finalize, the others not */
  if (!fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "[rank %d] %s timed out after %g s\n", rank, wd.label, wd.secs);
  fflush(stderr);                       /* first: the rank to blame speaks first */
  where = wd_locate();
  if (where[0] != '\0') fprintf(stderr, "[rank %d] its script was running %s\n", rank, where);
  if (wd.note[0] != '\0') fprintf(stderr, "[rank %d] %s\n", rank, wd.note);
  fflush(stderr);
  if (wd.junit_path != NULL) {
    char said[sizeof wd.label + 64];
    snprintf(said, sizeof said, "%s timed out after %g s", wd.label, wd.secs);
    wd_junit(said);
  }
  if (wd.stdout_prefix[0] != '\0')      /* e.g. TAP's "Bail out!" */
    printf("%s [rank %d] %s timed out after %g s\n", wd.stdout_prefix, rank, wd.label, wd.secs);
  fflush(stdout);
  if (wd.linger > 0) {         /* let peers due soon print their own line first */
    struct timespec ts;
    ts.tv_sec = (time_t)wd.linger;
    ts.tv_nsec = (long)((wd.linger - (double)ts.tv_sec) * 1e9);
    /* wd.mu stays locked: should the collective complete meanwhile, the
    ** main thread stops at its next nvfp4.watchdog call (the framework
    ** re-arms right after every collective and at the end of every case),
    ** so a rank that said "timed out" cannot go on to finish with status 0 */
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
  }
  if (!fin) MPI_Query_thread(&level);
  if (level == MPI_THREAD_MULTIPLE) nvfp4L_end_job(124);
  _exit(124);   /* mpirun ends the job when a rank exits non-zero unfinalized */
}


/* A note from rank `from`, a member of the collective this rank waits in,
** about the case under way: the job ends (status 1, a case failed). */
static void fn_fire (int from) {
  int r = fn.rank;
  /* outside a case the label is the last case's, stale: none */
  const char *label = fn.kase > 0 ? wd.label : "";
  const char *sep = label[0] ? ": " : "";
  const char *tail = fn.got[from].kase == NOTE_ENDED ? ", while this rank waits in a collective over it" : "";
  fprintf(stderr, "[rank %d] %s%srank %d %s%s\n", r, label, sep, from, fn.got[from].text, tail);
  if (fn.kase > 0 && wd.note[0] != '\0') fprintf(stderr, "[rank %d] %s\n", r, wd.note);
  fflush(stderr);
  if (wd.junit_path != NULL) {          /* registered during sc.run: its provisional file */
    char said[sizeof wd.label + sizeof fn.got[from].text + 96];
    snprintf(said, sizeof said, "%s%srank %d %s%s", label, sep, from, fn.got[from].text, tail);
    wd_junit(said);
  }
  if (fn.kase > 0 && wd.stdout_prefix[0] != '\0')
    printf("%s [rank %d] %s%srank %d %s%s\n", wd.stdout_prefix, r, label, sep, from, fn.got[from].text,
           tail);
  fflush(stdout);
  nvfp4L_end_job(1);   /* every rank waiting over `from` ends it */
}


static int fn_polling (void) {
  return fn.comm != MPI_COMM_NULL && fn.waiting;
}


/* The notes that have arrived, each kept as its sender's latest (MPI's
** queue of unreceived messages stays short: every case start drains it). */
static void fn_drain (void) {
  int flag = 1;
  while (flag) {
    MPI_Message m;
    MPI_Status st;
    fnote n;
    if (MPI_Improbe(MPI_ANY_SOURCE, NOTE_TAG, fn.comm, &flag, &m, &st) != MPI_SUCCESS || !flag) break;
    memset(&n, 0, sizeof n);
    if (MPI_Mrecv(&n, (int)sizeof n, MPI_BYTE, &m, &st) != MPI_SUCCESS) break;
    n.text[sizeof n.text - 1] = '\0';
    if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < fn.size) fn.got[st.MPI_SOURCE] = n;
  }
}


/* The notes that have arrived, kept per sender; then a member's note
** about this case ends the job once this rank has waited NOTE_CONFIRM more
** in the same collective (a collective the failed rank had just left, and
** this one was leaving too, does not). */
static void fn_poll (const struct timespec *now) {
  int s;
  fn_drain();
  for (s = 0; s < fn.size; s++) {
    if (s == fn.rank || !fn.member[s]) continue;
    if (fn.got[s].kase != NOTE_ENDED && (fn.kase == 0 || fn.got[s].kase != fn.kase)) continue;
    if (!fn.noted || fn.noted_serial != fn.serial) {
      fn.noted = 1;
      fn.noted_serial = fn.serial;
      fn.noted_at = *now;
    }
    else if (ts_diff(now, &fn.noted_at) >= (fn.got[s].kase == NOTE_ENDED ? NOTE_CONFIRM_ENDED
                                                                         : NOTE_CONFIRM))
      fn_fire(s);
    return;
  }
}


static void *wd_main (void *arg) {
  pthread_mutex_lock(&wd.mu);
  for (;;) {
    struct timespec until, now;
    int timed = wd.armed;
    if (timed) until = wd.deadline;
    if (fn_polling()) {                /* every 20 ms while waiting in a collective */
      struct timespec p;
      clock_gettime(wd_clock, &p);
      p.tv_nsec += 20000000L;
      if (p.tv_nsec >= 1000000000L) { p.tv_sec++; p.tv_nsec -= 1000000000L; }
      if (!timed || ts_diff(&p, &until) < 0) until = p;
      timed = 1;
    }
    if (!timed) {
      pthread_cond_wait(&wd.cv, &wd.mu);
      continue;
    }
    if (pthread_cond_timedwait(&wd.cv, &wd.mu, &until) != ETIMEDOUT) continue;
    clock_gettime(wd_clock, &now);
    if (wd.armed && ts_diff(&now, &wd.deadline) >= 0) wd_fire();
    if (fn_polling()) fn_poll(&now);
  }
  return NULL;
}


/* The watchdog's thread, started once (under wd.mu): 0, or -1 when it
** cannot be. */
static int wd_start (void) {
  pthread_t t;
  pthread_condattr_t a;
  if (wd.started) return 0;
  /* the deadlines on the monotonic clock, which the wall clock's steps
  ** (NTP, a date set by hand) do not move: the condition variable waits on
  ** it (made again here, before its only waiter exists; every signal is
  ** under wd.mu); where that cannot be, the wall clock as before */
  if (pthread_condattr_init(&a) == 0) {
    if (pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0) {
      pthread_cond_destroy(&wd.cv);          /* made again in place (a copy may not be used) */
      if (pthread_cond_init(&wd.cv, &a) == 0) wd_clock = CLOCK_MONOTONIC;
      else if (pthread_cond_init(&wd.cv, NULL) != 0) {
        pthread_condattr_destroy(&a);
        return -1;                            /* no condition variable: no watchdog */
      }
    }
    pthread_condattr_destroy(&a);
  }
  if (pthread_create(&t, NULL, wd_main, NULL) != 0) return -1;
  pthread_detach(t);
  wd.started = 1;
  return 0;
}


/* nvfp4.watchdog_case(k): case k (an integer > 0, unique in the process) is
** under way on this rank, or none (nil, 0): notes about case k from the
** ranks of a collective whose agreement this rank waits in end the job
** (on_wait). */
static int mod_watchdog_case (lua_State *L) {
  lua_Integer k = lua_isnoneornil(L, 1) ? 0 : nvfp4L_checkint(L, 1);
  if (k < 0) luaL_argerror(L, 1, lua_pushfstring(L, "case number must be >= 0, got %I", k));
  pthread_mutex_lock(&wd.mu);
  fn.kase = (long long)k;
  fn.waiting = 0;
  if (fn.comm != MPI_COMM_NULL) {
    fn_drain();
    /* the thread that reads the notes, also where no deadline was armed */
    if (k > 0 && wd_start() != 0) {
      pthread_mutex_unlock(&wd.mu);
      return luaL_error(L, "watchdog_case: cannot start the watchdog's thread");
    }
  }
  pthread_mutex_unlock(&wd.mu);
  return 0;
}


/* nvfp4_set_wait_callback's callback: this rank enters (entering 1) or
** leaves the agreement of a collective over c, the one place where it
** waits for a peer that may never come.  During a case, the ranks of c are
** the ones whose notes count, and the watchdog's thread starts to poll.
** Main thread: MPI calls on other communicators than c are allowed. */
static void on_wait (nvfp4_comm *c, int entering, void *ud) {
  int n = 0, i;
  (void)ud;
  if (fn.comm == MPI_COMM_NULL || fn.settled) return;   /* settled: the main thread's own */
  if (!entering) {
    pthread_mutex_lock(&wd.mu);
    fn.waiting = 0;
    pthread_mutex_unlock(&wd.mu);
    return;
  }
  {
    MPI_Group g;
    n = nvfp4_comm_size(c);
    if (n > fn.size || MPI_Comm_group(nvfp4_comm_mpi(c), &g) != MPI_SUCCESS) n = 0;
    else {
      for (i = 0; i < n; i++) fn.in[i] = i;
      if (MPI_Group_translate_ranks(g, n, fn.in, fn.world, fn.in + fn.size) != MPI_SUCCESS) n = 0;
      MPI_Group_free(&g);
    }
  }
  pthread_mutex_lock(&wd.mu);
  fn.waiting = n > 0 && wd_start() == 0;   /* the thread that reads the notes, also outside cases */
  if (fn.waiting) {
    fn.serial++;
    memset(fn.member, 0, (size_t)fn.size);
    for (i = 0; i < n; i++)
      if (fn.in[fn.size + i] >= 0 && fn.in[fn.size + i] < fn.size) fn.member[fn.in[fn.size + i]] = 1;
    /* a member whose script had ended before this wait began is not in it */
    fn_drain();
    for (i = 0; i < fn.size; i++)
      if (i != fn.rank && fn.member[i] && fn.got[i].kase == NOTE_ENDED) fn_fire(i);
    pthread_cond_signal(&wd.cv);
  }
  pthread_mutex_unlock(&wd.mu);
}


/* Note (k, msg) to every other rank, sent without waiting (the sends of
** eight notes in flight at most; past that nothing is sent and the
** timeouts remain). */
static void note_send (long long k, const char *msg) {
  int i, r, slot = -1, len;
  if (fn.comm == MPI_COMM_NULL) return;
  /* notes still in flight from earlier cases: those done free their slot */
  for (i = 0; i < fn.nout; i++) {
    int done = 0;
    if (fn.out[i].nrq > 0) MPI_Testall(fn.out[i].nrq, fn.out[i].rq, &done, MPI_STATUSES_IGNORE);
    if (done) fn.out[i].nrq = 0;
    if (fn.out[i].nrq == 0 && slot < 0) slot = i;
  }
  if (slot < 0 && fn.nout < (int)(sizeof fn.out / sizeof fn.out[0])) {
    MPI_Request *rq = (MPI_Request *)calloc((size_t)fn.size, sizeof *rq);
    if (rq != NULL) {
      fn.out[fn.nout].rq = rq;
      slot = fn.nout++;
    }
  }
  if (slot < 0) return;            /* eight cases' notes unreceived: the timeout remains */
  memset(&fn.out[slot].n, 0, sizeof fn.out[slot].n);
  fn.out[slot].n.kase = k;
  snprintf(fn.out[slot].n.text, sizeof fn.out[slot].n.text, "%s", msg);
  len = (int)(offsetof(fnote, text) + strlen(fn.out[slot].n.text) + 1);
  for (r = 0; r < fn.size; r++) {
    if (r == fn.rank) continue;
    if (MPI_Isend(&fn.out[slot].n, len, MPI_BYTE, r, NOTE_TAG, fn.comm,
                  &fn.out[slot].rq[fn.out[slot].nrq]) == MPI_SUCCESS)
      fn.out[slot].nrq++;
  }
}


/* nvfp4.watchdog_tell(k, text): case k ended on this rank without it
** joining any more of the case's collectives: every other rank gets a
** note, and one waiting in a collective over this rank during case k says
** "rank r <text>" and ends the job (text cut to 1015 bytes).  Does nothing
** where notes are off (one rank, no MPI_THREAD_MULTIPLE). */
static int mod_watchdog_tell (lua_State *L) {
  lua_Integer k = nvfp4L_checkint(L, 1);
  const char *msg = luaL_checkstring(L, 2);
  if (k <= 0) luaL_argerror(L, 1, lua_pushfstring(L, "case number must be > 0, got %I", k));
  note_send((long long)k, msg);
  return 0;
}


void nvfp4L_notes_ended (int status) {
  char msg[96];
  snprintf(msg, sizeof msg, "ended its script (status %d) and joins no more collectives", status);
  note_send(NOTE_ENDED, msg);
}


void nvfp4L_watchdog_settle (void) {
  int i;
  /* held by a watchdog that fired: wait there for its end.  One armed and
  ** not yet due stays armed: it still ends a job whose peer hangs while
  ** this rank finalizes (wd_fire after MPI_Finalize: see there) */
  pthread_mutex_lock(&wd.mu);
  fn.kase = 0;                     /* no more notes taken */
  fn.waiting = 0;
  fn.settled = 1;
  if (fn.comm != MPI_COMM_NULL) {
    /* notes nobody will read: received (the ones here) or let go */
    fn_drain();
    for (i = 0; i < fn.nout; i++) {
      int k;
      for (k = 0; k < fn.out[i].nrq; k++)
        if (fn.out[i].rq[k] != MPI_REQUEST_NULL) MPI_Request_free(&fn.out[i].rq[k]);
      fn.out[i].nrq = 0;
    }
  }
  pthread_mutex_unlock(&wd.mu);
}


void nvfp4L_watchdog_forget_state (void) {
  pthread_mutex_lock(&wd.mu);      /* held by a watchdog that fired: wait for its end there */
  __atomic_store_n(&wd_L, NULL, __ATOMIC_RELEASE);
  wd_Lgone = 1;
  pthread_mutex_unlock(&wd.mu);
}


/* nvfp4.watchdog(seconds, label [, shown [, stdout_prefix [, note [,
** linger]]]]): arm (re-arm) the timer; when it runs out this process prints
** "[rank r] <label> timed out after S s" on stderr (S = shown, default
** seconds: a re-arm for the rest of a deadline can show the whole timeout),
** then "[rank r] <note>" when a note is given (the framework's replay
** command), the first line after stdout_prefix on stdout when one is given
** (TAP's "Bail out!"), and ends the whole job, linger seconds later (default
** 0: at once; the framework's ranks waiting in a collective linger until
** the ranks that left the case have said so).  nvfp4.watchdog(0) or
** nvfp4.watchdog() disarms. */
static int mod_watchdog (lua_State *L) {
  lua_Number s = luaL_optnumber(L, 1, 0);
  const char *label = luaL_optstring(L, 2, "nvfp4-lua");
  lua_Number shown = luaL_optnumber(L, 3, s);
  const char *prefix = luaL_optstring(L, 4, "");
  const char *note = luaL_optstring(L, 5, "");
  lua_Number linger = luaL_optnumber(L, 6, 0);
  if (!(s >= 0))
    luaL_argerror(L, 1, lua_pushfstring(L, "seconds must be a number >= 0, got %s", nvfp4L_gotvalue(L, 1)));
  if (!(linger >= 0 && linger <= 3600))
    luaL_argerror(L, 6, lua_pushfstring(L, "linger must be a number of seconds in [0, 3600], got %s",
                                        nvfp4L_gotvalue(L, 6)));
  /* past ~31 years the deadline would overflow time_t (the watchdog thread
  ** then spun for ever): no real deadline is that far */
  if (s > 1e9) s = 1e9;
  if (!(shown < 1e9)) shown = 1e9;
  pthread_mutex_lock(&wd.mu);
  if (wd_L == NULL && !wd_Lgone) {   /* the main Lua thread, for wd_locate */
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    wd_Lthread = pthread_self();
    __atomic_store_n(&wd_L, lua_tothread(L, -1), __ATOMIC_RELEASE);
    lua_pop(L, 1);
  }
  if (s > 0 && wd_start() != 0) {
    pthread_mutex_unlock(&wd.mu);
    return luaL_error(L, "watchdog: cannot start a thread");
  }
  wd.armed = s > 0;
  if (wd.armed) {
    clock_gettime(wd_clock, &wd.deadline);
    wd.deadline.tv_sec += (time_t)s;
    wd.deadline.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (wd.deadline.tv_nsec >= 1000000000L) {
      wd.deadline.tv_sec++;
      wd.deadline.tv_nsec -= 1000000000L;
    }
    wd.secs = shown;
    wd.linger = linger;
    wd_copy(wd.label, sizeof wd.label, label);
    snprintf(wd.stdout_prefix, sizeof wd.stdout_prefix, "%s", prefix);
    wd_copy(wd.note, sizeof wd.note, note);
  }
  pthread_cond_signal(&wd.cv);
  pthread_mutex_unlock(&wd.mu);
  return 0;
}

/* nvfp4.watchdog_junit(path, pre, post): should the watchdog end the job
** on this rank (a timeout, or a peer's note: see nvfp4.watchdog and
** nvfp4.watchdog_case), it first writes the JUnit file `path` as pre ..
** the line it says on stderr, without "[rank r] " and XML-escaped .. post
** (the framework's provisional file with its reason replaced: rank 0 knows
** then why the job ends).  nvfp4.watchdog_junit() forgets it (a nil path
** with pre or post given is refused).  The strings
** are copied; raises "not enough memory" when they cannot be. */
static int mod_watchdog_junit (lua_State *L) {
  char *s[3] = {NULL, NULL, NULL};
  int i, set = !lua_isnoneornil(L, 1);
  if (!set && !(lua_isnoneornil(L, 2) && lua_isnoneornil(L, 3)))   /* (nil, pre, post): a lost path */
    return luaL_argerror(L, 1, "string expected, got nil (only a call without pre and post forgets the file)");
  if (set) {
    for (i = 0; i < 3; i++) {
      size_t n;
      const char *v = luaL_checklstring(L, i + 1, &n);
      luaL_argcheck(L, strlen(v) == n, i + 1, "must not contain a zero byte");
    }
    for (i = 0; i < 3; i++) {
      const char *v = lua_tostring(L, i + 1);
      s[i] = (char *)malloc(strlen(v) + 1);
      if (s[i] != NULL) memcpy(s[i], v, strlen(v) + 1);
    }
    if (s[0] == NULL || s[1] == NULL || s[2] == NULL) {
      for (i = 0; i < 3; i++) free(s[i]);
      return luaL_error(L, "watchdog_junit: not enough memory");
    }
  }
  pthread_mutex_lock(&wd.mu);
  free(wd.junit_path);
  free(wd.junit_pre);
  free(wd.junit_post);
  wd.junit_path = s[0];
  wd.junit_pre = s[1];
  wd.junit_post = s[2];
  pthread_mutex_unlock(&wd.mu);
  return 0;
}

/* }====================================================== */


static const luaL_Reg comm_meth[] = {
  {"split", comm_split},
  {"barrier", comm_barrier},
  {"all_gather", comm_all_gather},
  {"reduce_scatter", comm_reduce_scatter},
  {"all_reduce", comm_all_reduce},
  {"all_reduce_max", comm_all_reduce_max},
  {"all_gather_int", comm_all_gather_int},
  {"all_gather_string", comm_all_gather_string},
  {"isclosed", comm_isclosed},
  {"close", comm_close},
  {NULL, NULL}
};


static const luaL_Reg handle_meth[] = {
  {"wait", handle_wait},
  {"finish_count", handle_finish_count},
  {"close", handle_close},
  {NULL, NULL}
};


void nvfp4L_open_comm (lua_State *L, int modidx) {
  luaL_newmetatable(L, NVFP4L_COMM);              /* comm metatable */
  nvfp4L_protectmeta(L, NVFP4L_COMM);
  luaL_newlib(L, comm_meth);
  nvfp4L_nameable(L, "nvfp4.comm");
  lua_pushcclosure(L, comm_index, 1);             /* __index sees methods */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, comm_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, comm_close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, comm_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newmetatable(L, NVFP4L_HANDLE);            /* handle metatable */
  nvfp4L_protectmeta(L, NVFP4L_HANDLE);
  luaL_newlib(L, handle_meth);
  nvfp4L_nameable(L, "nvfp4.handle");
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, handle_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, handle_close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, handle_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lua_pushcfunction(L, mod_world);
  lua_setfield(L, modidx, "world");
  lua_pushcfunction(L, mod_watchdog);
  lua_setfield(L, modidx, "watchdog");
  lua_pushcfunction(L, mod_watchdog_case);
  lua_setfield(L, modidx, "watchdog_case");
  lua_pushcfunction(L, mod_watchdog_tell);
  lua_setfield(L, modidx, "watchdog_tell");
  lua_pushcfunction(L, mod_watchdog_junit);
  lua_setfield(L, modidx, "watchdog_junit");
}
