/*
** lnvfp4.h -- internal header of the `nvfp4` Lua module, shared by the
** binding files (lnvfp4.c: tensors, shapes, quantize; lnvfp4comm.c:
** communicators, gathers, the watchdog; llinear.c: the Linear layer) and
** nvfp4-lua.c.  Not installed.
**
** Conventions for every binding (style.md §3.8):
**  - raise errors, never return nil, msg; library failures go through
**    nvfp4L_checkstatus, which quotes the context's message;
**  - option tables are strict: nvfp4L_checkopts rejects unknown keys
**    ("bad argument #2 to 'quantize' (unknown option 'colwise')"), the
**    nvfp4L_opt* getters check each value's type;
**  - dims are 1-based in Lua; nvfp4L_checkdim is the one place that
**    translates them;
**  - a new handle is pushed closed first (nvfp4L_newtensor) and filled by
**    the library call, so an error in between leaks nothing.
*/
#ifndef LNVFP4_H
#define LNVFP4_H

#include <lua.h>
#include <lauxlib.h>
#include "nvfp4.h"

#define NVFP4L_TENSOR   "nvfp4.tensor"     /* metatable names */
#define NVFP4L_COMM     "nvfp4.comm"
#define NVFP4L_HANDLE   "nvfp4.handle"
#define NVFP4L_SHAPE    "nvfp4.shape"      /* shared metatable of shape tables */
#define NVFP4L_CTX      "nvfp4.ctx"        /* registry: the process's context */
/* Registry fields set by nvfp4-lua before the script runs: */
#define NVFP4L_OPTIONS  "nvfp4.options"    /* table: the harness options */
#define NVFP4L_EXIT     "nvfp4.exit"       /* integer: the program's exit status */
#define NVFP4L_CLOSING  "nvfp4.closing"    /* true: lua_close runs (nothing can be made) */

/* t == NULL: closed.  zombie: a tensor closed while a binding call may hold
** it (see nvfp4L_inbinding), destroyed with the handle (__gc). */
typedef struct LTensor { nvfp4_tensor *t, *zombie; } LTensor;

/* Whether a C function of this module is running below the caller: on L's
** stack or on a thread that resumed L (directly or through others).  An
** object's close (t:close(), <close>) that runs inside such a call -- a
** __gc finalizer started by the call's allocation, an option table's
** metamethod, a debug hook, or a coroutine one of them resumed -- must not
** free what that call has taken from its arguments: the object is marked
** closed and freed when its handle is collected (the call's stack keeps the
** handle alive until it returns). */
int           nvfp4L_inbinding (lua_State *L);
/* Whether the running C function (an object's __gc) was called by the
** collector as a finalizer, not by Lua code (debug.getmetatable(t).__gc(t),
** which the binding takes for a close). */
int           nvfp4L_finalizing (lua_State *L);
/* An object's close (close method, __close) on its handle p, whose live
** pointer is p->field and whose free function (what the collector's __gc
** calls) is freef: nothing when already closed (a zombie waits for __gc),
** the object moved to p->zombie while a binding call below may hold it,
** else freef(L) frees it now.  Returns what a close returns. */
#define nvfp4L_close(L, p, field, freef) \
  ((p)->field == NULL ? 0 : nvfp4L_inbinding(L) \
   ? ((p)->zombie = (p)->field, (p)->field = NULL, 0) : (freef)(L))

/* The process's context (created when the module is opened, from
** --backend / $NVFP4_BACKEND).  Raises if the module is not open. */
nvfp4_ctx    *nvfp4L_getctx (lua_State *L);
/* Raise "<library message> (<status string>)" unless s is NVFP4_OK. */
void          nvfp4L_checkstatus (lua_State *L, nvfp4_status s);
/* The tensor at arg as a call that took it earlier holds it: closed since by
** Lua code the call ran (deferred, see nvfp4L_inbinding), its zombie; freed
** (closed where no binding call was seen) raises "tensor is closed". */
nvfp4_tensor *nvfp4L_heldtensor (lua_State *L, int arg);
/* The same without raising: NULL for a freed tensor or no tensor. */
nvfp4_tensor *nvfp4L_tensorheld (lua_State *L, int idx);
/* Before making an object that holds library memory (what: "a tensor", for
** the message): a full collection when that memory (nvfp4_ctx_memory) has
** doubled since the last one (the collector cannot see it); first
** nvfp4L_notclosing.  nvfp4L_newtensor calls it. */
void          nvfp4L_mempressure (lua_State *L, const char *what);
/* The metatable on top of the stack (an object type's, tname): getmetatable
** gives tname, and plain Lua code cannot reach or change the metatable (its
** __gc set to nil, or another object's __call set to it, lost or freed
** what a call held); the debug library still can. */
void          nvfp4L_protectmeta (lua_State *L, const char *tname);
/* Raises "cannot make <what> while the Lua state closes ..." while it does
** (NVFP4L_CLOSING: a finalizer that lua_close runs), where Lua would never
** finalize what is made. */
void          nvfp4L_notclosing (lua_State *L, const char *what);
/* 1 (after a full collection) when s is ENOMEM and the collector runs;
** else raises as nvfp4L_checkstatus, or 0 for OK.  For NVFP4L_LOCAL. */
int           nvfp4L_nomem_collect (lua_State *L, nvfp4_status s);
/* Check a call that involves no peer and loses nothing when it fails
** (its outputs NULL, its inputs as they were), called a second time after
** a collection when it ran out of memory.  call is evaluated twice. */
#define NVFP4L_LOCAL(L, call) \
  do { if (nvfp4L_nomem_collect((L), (call))) nvfp4L_checkstatus((L), (call)); } while (0)

/* Tensors.  totensor raises "nvfp4.tensor expected" or "tensor is closed";
** newtensor pushes a closed tensor handle to fill through &p->t. */
nvfp4_tensor *nvfp4L_totensor (lua_State *L, int arg);
LTensor      *nvfp4L_newtensor (lua_State *L);

/* Shapes: a Lua table {d1, d2, ..} with the shared shape metatable (__eq,
** __tostring "[4096, 1, 8192]").  checkshape accepts any sequence of
** non-negative integers (at most NVFP4_MAX_DIMS). */
void          nvfp4L_pushshape (lua_State *L, nvfp4_shape s);
nvfp4_shape   nvfp4L_checkshape (lua_State *L, int arg);
/* An integer at arg, a number only (no "2" coerced from a string). */
lua_Integer   nvfp4L_checkint (lua_State *L, int arg);
/* A 1-based dim at arg (1..ndim) -> 0-based. */
int           nvfp4L_checkdim (lua_State *L, int arg, int ndim);
/* The index of the string at arg in the NULL-terminated names (def when
** arg is none or nil and def is not NULL); otherwise raises "bad argument
** #arg to 'f' (<what> must be one of 'a', 'b'; got 'x')". */
int           nvfp4L_checkname (lua_State *L, int arg, const char *def,
                                const char *const names[], const char *what);
/* "fp32" | "bf16" | "u8" (FP4 only where allowed); checkfloat: "fp32" |
** "bf16", for what computes on values (a converted tensor, a random one, an
** output or params dtype), so that the message lists only what is taken. */
nvfp4_dtype   nvfp4L_checkdtype (lua_State *L, int arg, const char *def);
nvfp4_dtype   nvfp4L_checkfloat (lua_State *L, int arg, const char *def);
/* The index in names of option key's string in the table at arg (def when
** absent); raises "bad argument #arg to 'f' (option 'key' must be one of
** 'a', 'b'; got 'x')".  optfloat: the same for "fp32" | "bf16". */
int           nvfp4L_optname (lua_State *L, int arg, const char *key,
                              const char *const names[], int def);
nvfp4_dtype   nvfp4L_optfloat (lua_State *L, int arg, const char *key, nvfp4_dtype def);

/* Option tables.  arg may be none/nil (all defaults).  names is a
** NULL-terminated list of allowed keys. */
void          nvfp4L_checkopts (lua_State *L, int arg, const char *const names[]);
int           nvfp4L_optbool (lua_State *L, int arg, const char *key, int def);
lua_Integer   nvfp4L_optint (lua_State *L, int arg, const char *key, lua_Integer def);
lua_Number    nvfp4L_optnum (lua_State *L, int arg, const char *key, lua_Number def);
/* Pushes the option's value (nil if absent) and returns its type. */
int           nvfp4L_getopt (lua_State *L, int arg, const char *key);
/* What a check was given, for its message: a number shown (4.5, -4, nan),
** a string quoted ("'7' (a string)"), anything else by its type's name
** (the string pushed when one is made). */
const char   *nvfp4L_gotvalue (lua_State *L, int idx);
/* Raise "bad argument #arg to 'f' (option 'key' <msg>)". */
int           nvfp4L_opterror (lua_State *L, int arg, const char *key,
                               const char *msg);

/* Quantization options from a strict table (see the README for the keys).
** group: the stack index of the amax_group value the caller has read
** already (read once: an __index runs once for it, and the caller keeps
** it for its error path), or 0 to read it here.  Leaves the amax_group
** value pushed (nil when absent): an __index may have made it, which
** nothing else references, and the caller holds it while it uses
** o.amax_group (collected, it would be freed under the call). */
nvfp4_qopts   nvfp4L_checkqopts (lua_State *L, int arg, int group);

/* Communicators (lnvfp4comm.c). */
struct nvfp4_comm *nvfp4L_tocomm (lua_State *L, int arg);
/* The option value at the top of the stack as an open userdata of metatable
** tname whose first field is its pointer (LTensor, LComm); else an error
** naming argument arg, option key and what was found. */
void *nvfp4L_optobject (lua_State *L, int arg, const char *key, const char *tname);
/* The option value at the top of the stack as an open comm; else an error
** naming argument arg and option key. */
struct nvfp4_comm *nvfp4L_optcomm (lua_State *L, int arg, const char *key);
/* The option value at the top of the stack as an open tensor; else an error
** naming argument arg and option key. */
nvfp4_tensor *nvfp4L_opttensor (lua_State *L, int arg, const char *key);
/* The nested quantize options at the top of the stack (the value of option
** key of argument arg): a table of known keys, then nvfp4L_checkqopts. */
nvfp4_qopts   nvfp4L_checkqopts_at (lua_State *L, int arg, const char *key);
/* Raise the error at the top of the stack, caught from an argument check run
** under lua_pcall (a C function given the caller's arguments in their
** places), as the unprotected check would have raised it: a "bad argument
** #n to '?'" again through luaL_argerror from the caller's frame, which
** names the call as Lua does (a method call without its self, a call Lua
** has no name for through package.loaded), other errors with the caller's
** position. */
int nvfp4L_reraise (lua_State *L);
/* The method table on top of the stack as package.loaded[name], where Lua
** finds a name for a method called without one (pcall(t.reshape, t, x)). */
void nvfp4L_nameable (lua_State *L, const char *name);
/* Before the process ends: when nvfp4.watchdog has fired (it is lingering
** before it ends the job), wait there, so that a rank that said "timed out"
** does not end with status 0; one still armed stays armed. */
void nvfp4L_watchdog_settle (void);
/* The Lua state closes (lua_close, os.exit(code, true)'s included): the
** watchdog forgets it (lnvfp4comm.c wd_locate), waiting there when it has
** fired. */
void nvfp4L_watchdog_forget_state (void);
/* After MPI_Init, on every rank (collective): the failure notes' own
** communicator (nvfp4.watchdog_tell; lnvfp4comm.c). */
void nvfp4L_notes_init (void);
/* The script ended on this rank with `status`, before nvfp4L_watchdog_settle:
** a note to every other rank, so that one waiting (or coming to wait) in a
** collective over this rank ends the job, naming it, instead of waiting for
** ever while this one sits in MPI_Finalize (lnvfp4comm.c). */
void nvfp4L_notes_ended (int status);
/* Ends the whole job from this rank with exit status `status` (1..255), its
** peers included, wherever they wait; never returns.  stdio is flushed
** first.  Under Open MPI's ORTE mpirun (4.x: OMPI_MCA_orte_hnp_uri set)
** the rank exits (_exit) and mpirun, seeing a rank end non-zero without
** MPI_Finalize, ends the job with that status; elsewhere (another
** launcher, Open MPI 5, orte_abort_non_zero_exit turned off) MPI_Abort.
** After MPI_Finalize: _exit (lnvfp4comm.c says why not always MPI_Abort). */
void nvfp4L_end_job (int status);
/* The tensor at idx, or NULL when it is closed or not a tensor (no error). */
nvfp4_tensor *nvfp4L_tensorof (lua_State *L, int idx);
/* The comm at idx, or NULL when it is closed or not a comm (no error).
** commheld: the same as a call that took it earlier holds it (a comm
** closed since by Lua code the call ran is its zombie, see nvfp4L_heldtensor). */
struct nvfp4_comm *nvfp4L_commof (lua_State *L, int idx);
struct nvfp4_comm *nvfp4L_commheld (lua_State *L, int idx);
/* A collective's comm option read once, before the other options' checks:
** nvfp4L_keepopt pushes opts[key] (nil when opts is no table) and keeps it
** as the user value 1 of the userdata at ud; the call's error path, after
** the checks failed under lua_pcall, takes it back with nvfp4L_keptcomm
** (the comm as held, or NULL) to tell the peers, without a second read
** (an __index there would run on the failing rank alone). */
void nvfp4L_keepopt (lua_State *L, int opts, const char *key, int ud);
struct nvfp4_comm *nvfp4L_keptcomm (lua_State *L, int ud);

/* Module openers: each adds its functions to the module table at modidx
** and registers its metatables.  luaopen_nvfp4 calls them in this order. */
int           luaopen_nvfp4 (lua_State *L);
void          nvfp4L_open_comm (lua_State *L, int modidx);
void          nvfp4L_open_linear (lua_State *L, int modidx);   /* llinear.c */

#endif
