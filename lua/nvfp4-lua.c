/*
** nvfp4-lua.c -- a Lua 5.4 interpreter with MPI and the `nvfp4` module:
**   mpirun -np N nvfp4-lua [options] scenario.lua [args]
** lua.c's shape: everything runs in protected mode; an uncaught error is
** printed as "[rank r] file:line: message" plus a traceback and ends the
** whole job (nvfp4L_end_job: under Open MPI 4's mpirun an exit that mpirun
** turns into the job's end, else MPI_Abort), so no rank is left waiting in
** a collective.
** The Lua state is closed (tensors, comms, context) before MPI_Finalize.
*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <mpi.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "config.h"
#include "lnvfp4.h"

#ifndef NVFP4_LUADIR          /* where `make install` puts nvfp4/scenario.lua */
#define NVFP4_LUADIR "/usr/local/share/nvfp4/lua"
#endif
#ifndef NVFP4_SRCLUADIR       /* the source tree's lua/, for uninstalled runs */
#define NVFP4_SRCLUADIR NVFP4_LUADIR
#endif
#ifndef NVFP4_BUILDEXE        /* the build tree's nvfp4-lua (absolute path) */
#define NVFP4_BUILDEXE "/nonexistent"
#endif

static int rank = 0;
/* set before a usage error is raised (an option before the script): the
** job then ends with status 2, as the framework's usage errors do */
static int usage_error = 0;
#define USAGE_ERROR(...) (usage_error = 1, luaL_error(L, __VA_ARGS__))

static const char usage[] =
  "usage: nvfp4-lua [options] [script [args]]\n"
  "  -h, --help        this text\n"
  "  --version         library, Lua, MPI, CUDA and NCCL versions\n"
  "  --backend B       cpu | cuda (default: $NVFP4_BACKEND, else cuda if usable)\n"
  "  --seed N          the run seed (default: picked; sc.run prints it to replay a run)\n"
  "  -e STAT           execute string STAT before the script\n"
  "scenario framework (require \"nvfp4.scenario\"):\n"
  "  --list            list the cases and exit\n"
  "  --filter PATTERN  run only the cases whose name contains PATTERN (plain text;\n"
  "                    a Lua pattern when no name contains it as is); matching\n"
  "                    no case is a usage error (exit status 2)\n"
  "  --timeout S       per-case timeout in seconds (default 60; a rank waiting in a\n"
  "                    collective gets a grace of max(0.5, S/20) s more)\n"
  "  --tap             TAP version 13 on standard output\n"
  "  --junit FILE      write a JUnit XML report to FILE\n"
  "  -v, --verbose     a line per case and per assertion, also when not a terminal\n"
  "environment:\n"
  "  NVFP4_BACKEND     the default for --backend\n"
  "  NVFP4_LUA_PATH    the directory searched first for Lua modules (default:\n"
  "                    the framework's, nvfp4/scenario.lua's; --help names it)\n"
  "Without mpirun it runs as one rank.\n";
/* the directory setpath put first in package.path (--help names it) */
static char luadir[PATH_MAX];


static int msghandler (lua_State *L) {            /* lua.c */
  const char *msg = lua_tostring(L, 1);
  /* the framework's usage error (l_usage_error) reaching the top: one line,
  ** status 2 (a pcall in the script that caught it leaves no trace here) */
  lua_getfield(L, LUA_REGISTRYINDEX, "nvfp4.usage_msg");
  if (msg != NULL && lua_rawequal(L, 1, -1)) {
    usage_error = 1;
    lua_settop(L, 1);
    return 1;
  }
  lua_pop(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}


static int docall (lua_State *L, int narg) {
  int status, base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  status = lua_pcall(L, narg, 0, base);
  lua_remove(L, base);
  return status;
}


/* Options before the script go into the registry table NVFP4L_OPTIONS
** (name without dashes -> value string or true; -e into options.e[]).
** Returns the index of the script in argv (argc when none). */
static int collectargs (lua_State *L, int argc, char **argv) {
  static const char *const withval[] = {"backend", "seed", "timeout", "junit", "filter", NULL};
  static const char *const flags[] = {"help", "version", "list", "tap", "verbose", NULL};
  int i, k, ne = 0;
  lua_newtable(L);
  lua_newtable(L);                                /* options.e */
  for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
    const char *a = argv[i], *name = a + 2, *eq;
    if (strcmp(a, "--") == 0) { i++; break; }
    if (strcmp(a, "-e") == 0 || strcmp(a, "-v") == 0 || strcmp(a, "-h") == 0) {
      if (a[1] == 'v' || a[1] == 'h') { lua_pushboolean(L, 1); lua_setfield(L, -3, a[1] == 'v' ? "verbose" : "help"); continue; }
      if (++i >= argc) USAGE_ERROR("'-e' needs an argument\n%s", usage);
      lua_pushstring(L, argv[i]);
      lua_rawseti(L, -2, ++ne);
      continue;
    }
    if (a[1] != '-') USAGE_ERROR("unrecognized option '%s'\n%s", a, usage);
    eq = strchr(name, '=');
    lua_pushlstring(L, name, eq ? (size_t)(eq - name) : strlen(name));
    for (k = 0; flags[k] && strcmp(lua_tostring(L, -1), flags[k]) != 0; k++) ;
    if (flags[k] != NULL && eq == NULL) { lua_pushboolean(L, 1); lua_settable(L, -4); continue; }
    for (k = 0; withval[k] && strcmp(lua_tostring(L, -1), withval[k]) != 0; k++) ;
    if (withval[k] == NULL) USAGE_ERROR("unrecognized option '%s'\n%s", a, usage);
    if (eq == NULL && ++i >= argc) USAGE_ERROR("'%s' needs an argument\n%s", a, usage);
    lua_pushstring(L, eq ? eq + 1 : argv[i]);
    lua_settable(L, -4);
  }
  lua_setfield(L, -2, "e");
  lua_setfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS);
  return i;
}


/* The run seed: --seed, else one picked on rank 0 and broadcast. */
static void setseed (lua_State *L) {
  long long seed = 0;
  int isnum = 0;
  lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS);
  if (lua_getfield(L, -1, "seed") != LUA_TNIL) {
    /* decimal digits only, as sc.params' NAME=integer (1e3 and 0x10 would
    ** convert, and the replay line would then show another spelling) */
    const char *v = lua_tostring(L, -1);
    seed = (long long)lua_tointegerx(L, -1, &isnum);
    if (v == NULL || v[0] == '\0' || v[strspn(v, "0123456789")] != '\0' || !isnum || seed < 0)
      USAGE_ERROR("--seed: '%s' is not a non-negative decimal integer below 2^63", v ? v : "");
  } else if (rank == 0)
    seed = (long long)((unsigned long long)time(NULL) * 2654435761u ^ (unsigned)getpid()) & 0x7fffffffLL;
  MPI_Bcast(&seed, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  lua_pushinteger(L, (lua_Integer)seed);
  lua_setfield(L, -3, "seed");
  lua_pop(L, 2);
}


/* Whether this program is the file NVFP4_BUILDEXE (device and inode).  The
** running file is /proc/self/exe, read with readlink, which valgrind
** answers with the program it runs (a stat of it would see valgrind);
** without /proc (macOS, the BSDs) it is argv[0] when that is a path, as
** make check and mpirun run the build tree's program. */
static int is_buildexe (const char *argv0) {
  char exe[PATH_MAX];
  struct stat self, built;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = '\0';
  else if (argv0 != NULL && strchr(argv0, '/') != NULL) snprintf(exe, sizeof exe, "%s", argv0);
  else return 0;
  return stat(exe, &self) == 0 && stat(NVFP4_BUILDEXE, &built) == 0
         && self.st_dev == built.st_dev && self.st_ino == built.st_ino;
}


/* package.path: $NVFP4_LUA_PATH, else the source tree's lua/ when this
** program is the build tree's nvfp4-lua (make check then uses the file being
** edited), else the installed directory.  "The build tree's" means the same
** file as NVFP4_BUILDEXE, not a path under the build directory: an
** installed copy that lies under it (make install DESTDIR=$PWD/stage, or
** --prefix=$PWD/inst) must use the installed modules, and a build tree
** configured through a symbolic link must still find its own. */
static void setpath (lua_State *L, const char *argv0) {
  const char *dir = getenv("NVFP4_LUA_PATH");
  if (dir != NULL) snprintf(luadir, sizeof luadir, "%s", dir);
  else if (!is_buildexe(argv0)) snprintf(luadir, sizeof luadir, "%s", NVFP4_LUADIR);
  /* the source tree's as a plain path (a VPATH build's abs_top_srcdir is
  ** "<build>/..": error messages and tracebacks name the modules by it) */
  else if (realpath(NVFP4_SRCLUADIR, luadir) == NULL)
    snprintf(luadir, sizeof luadir, "%s", NVFP4_SRCLUADIR);
  dir = luadir;
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;", dir);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
}


/* Whether option name was given (for "e": whether any -e was). */
static int getflag (lua_State *L, const char *name) {
  int t, on;
  lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS);
  t = lua_getfield(L, -1, name);
  on = (t == LUA_TTABLE) ? lua_rawlen(L, -1) > 0 : t != LUA_TNIL;
  lua_pop(L, 2);
  return on;
}


static void createargtable (lua_State *L, char **argv, int argc, int script) {
  int i;
  lua_createtable(L, argc - script, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);               /* arg[0] = script, as lua.c */
  }
  lua_setglobal(L, "arg");
}


/* The script from standard input on every rank: under mpirun only rank 0
** gets stdin (the others would run an empty script and leave rank 0
** waiting in its first collective), so rank 0 reads it all and broadcasts
** it.  Pushes the chunk, or an error message (LUA_ERRSYNTAX / LUA_ERRFILE). */
static int loadstdin_all (lua_State *L) {
  long long len = 0;
  char *buf = NULL;
  if (rank == 0) {
    size_t cap = 0, got;
    char chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
      if ((size_t)len + got > cap) {
        char *nb;
        cap = 2 * ((size_t)len + got);
        if ((nb = (char *)realloc(buf, cap)) == NULL) { len = -1; break; }
        buf = nb;
      }
      memcpy(buf + len, chunk, got);
      len += (long long)got;
    }
    if (ferror(stdin)) len = -1;
  }
  MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  if (len < 0) {
    free(buf);
    lua_pushliteral(L, "cannot read the script from standard input (on rank 0)");
    return LUA_ERRFILE;
  }
  if (rank != 0 && (buf = (char *)malloc((size_t)len + 1)) == NULL) {
    /* the broadcast below must still happen on every rank: receive into a
    ** scratch buffer is not possible without memory, so end the job */
    fprintf(stderr, "[rank %d] nvfp4-lua: no memory for a %lld-byte script\n", rank, len);
    nvfp4L_end_job(1);
  }
  if (len > 0) MPI_Bcast(buf, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
  {
    /* as luaL_loadfile: a UTF-8 BOM, and a first line starting with '#' (a
    ** shebang), are skipped; the newline is kept, so line numbers stay */
    const char *p = buf != NULL ? buf : "";
    size_t n = (size_t)len;
    int st;
    if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) { p += 3; n -= 3; }
    if (n > 0 && p[0] == '#')
      while (n > 0 && p[0] != '\n') { p++; n--; }
    st = luaL_loadbufferx(L, p, n, "=stdin", NULL);
    free(buf);
    return st;
  }
}


/* registry["nvfp4.usage_error"](msg): raise msg as a usage error: where
** nothing catches it, the job ends as for an option before the script,
** status 2 and msg without a traceback.  The framework raises it for a
** script's bad NAME=value argument (sc.params), which every rank has alike. */
static int l_usage_error (lua_State *L) {
  luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, "nvfp4.usage_msg");   /* msghandler knows it */
  return lua_error(L);
}


/* The state closes: the finalizers lua_close runs from here on can make
** nothing (nvfp4L_notclosing).  The __close of a value pmain keeps below
** everything the script runs, so it comes after every <close> handler of
** the main thread that a lua_close inside os.exit(code, true) runs first
** (those may make objects: the collector finalizes them), and before its
** finalizers; and at pmain's end. */
static int mark_closing (lua_State *L) {
  nvfp4L_watchdog_forget_state();  /* os.exit(code, true) frees the state before exit() */
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, NVFP4L_CLOSING);
  return 0;
}


static int pmain (lua_State *L) {
  int argc = (int)lua_tointeger(L, 1), script, i;
  char **argv = (char **)lua_touserdata(L, 2);
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_nvfp4);
  lua_setfield(L, -2, "nvfp4");                   /* require "nvfp4" */
  lua_pop(L, 1);
  lua_pushcfunction(L, l_usage_error);
  lua_setfield(L, LUA_REGISTRYINDEX, "nvfp4.usage_error");
  setpath(L, argc > 0 ? argv[0] : NULL);
  script = collectargs(L, argc, argv);
  setseed(L);
  if (getflag(L, "help") || (script == argc && !getflag(L, "version") && !getflag(L, "e"))) {
    if (rank == 0) {
      fputs(usage, stdout);
      printf("Lua modules (require \"nvfp4.scenario\") are searched for first in %s%s\n", luadir,
             getenv("NVFP4_LUA_PATH") != NULL ? " ($NVFP4_LUA_PATH)" : "");
    }
    return 0;
  }
  if (getflag(L, "version")) {
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int n;
    MPI_Get_library_version(mpi, &n);
    if (rank == 0) printf("nvfp4-lua: %s; %s; %.*s\n", nvfp4_version_string(), LUA_RELEASE,
                          (int)strcspn(mpi, ",\n"), mpi);
    return 0;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS);
  {
    /* --backend, else a non-empty $NVFP4_BACKEND (its default): asked for by
    ** name, a backend that cannot start (no GPU, a build without CUDA) or a
    ** wrong name is that setting's error, said once before the script
    ** (status 2), not a traceback from the script's require; the module
    ** stays loaded */
    const int opt = lua_getfield(L, -1, "backend") == LUA_TSTRING;
    const char *env = getenv("NVFP4_BACKEND");
    const char *b = opt ? lua_tostring(L, -1) : env;
    const char *what = opt ? "--backend" : "NVFP4_BACKEND";
    if (b != NULL && (opt || *b != '\0')) {
      if (strcmp(b, "cpu") != 0 && strcmp(b, "cuda") != 0)
        USAGE_ERROR("%s: '%s' is not cpu or cuda", what, b);
      setenv("NVFP4_BACKEND", b, 1);                   /* the module's ctx reads it */
      lua_getglobal(L, "require");
      lua_pushliteral(L, "nvfp4");
      if (lua_pcall(L, 1, 0, 0) != LUA_OK)
        USAGE_ERROR("%s%s%s: %s", what, opt ? " " : "=", strcmp(b, "cpu") == 0 ? "cpu" : "cuda",
                    lua_tostring(L, -1));
    }
  }
  lua_settop(L, 2);
  lua_newtable(L);                                      /* 3, below the script */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, mark_closing);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, 3);
  lua_toclose(L, 3);
  createargtable(L, argv, argc, script < argc ? script : 0);
  lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_OPTIONS);
  lua_getfield(L, -1, "e");
  for (i = 1; i <= (int)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    if (luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=(command line)") != LUA_OK
        || docall(L, 0) != LUA_OK)
      return lua_error(L);
    lua_pop(L, 1);
  }
  if (script < argc) {
    int n = argc - script - 1, size = 1;
    const char *fname = strcmp(argv[script], "-") == 0 ? NULL : argv[script];  /* "-": stdin, as lua */
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (fname == NULL && size > 1) {
      if (loadstdin_all(L) != LUA_OK) return lua_error(L);
    }
    else if ((i = luaL_loadfile(L, fname)) != LUA_OK) {
      if (i == LUA_ERRFILE) usage_error = 1;      /* no such script: the command line's (status 2) */
      return lua_error(L);
    }
    for (i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);   /* ... */
    if (docall(L, n) != LUA_OK) return lua_error(L);
  }
  return 0;
}


/* Lua's warnings (warn(), and an error raised in a __gc finalizer, which
** Lua otherwise drops without a word) on standard error, "[rank r] Lua
** warning: ..."; on from the start, unlike lua.c's (a harness should not
** hide a finalizer's error); warn("@off") / warn("@on") as in Lua. */
static void warnf (void *ud, const char *msg, int tocont) {
  /* the pieces of one warning (Lua sends "error in ", "__gc", " (", msg,
  ** ")") are gathered and written in one call: written one by one, mpirun
  ** could put another rank's output between them, breaking the line */
  static int on = 1, cont = 0;
  static char line[4096];
  static size_t len = 0;
  size_t n;
  (void)ud;
  if (!cont && !tocont && msg[0] == '@') {     /* a control message */
    if (strcmp(msg, "@on") == 0) on = 1;
    else if (strcmp(msg, "@off") == 0) on = 0;
    return;
  }
  cont = tocont;
  if (!on) return;
  n = strlen(msg);
  if (len + n >= sizeof line) {               /* too long for one line: what there is so far */
    fprintf(stderr, "[rank %d] Lua warning: %.*s", rank, (int)len, line);
    fputs(msg, stderr);
    len = 0;
    if (!tocont) fputc('\n', stderr);
  }
  else {
    memcpy(line + len, msg, n);
    len += n;
    if (tocont) return;
    fprintf(stderr, "[rank %d] Lua warning: %.*s\n", rank, (int)len, line);
    len = 0;
  }
  fflush(stderr);
}


/* Whether every rank ended with a usage error (a mistake on the command
** line, which every rank has alike): a vote on a communicator of its own
** (vote, made at the start) that every rank whose script failed joins; a
** rank with a usage error waits up to two seconds for the others' votes,
** one with another error does not wait (it ends the job).  A rank that
** went on never votes: then the old way, nvfp4L_end_job.  All usage errors:
** every rank finalizes and exits with status 2 (no "MPI_ABORT was invoked"
** block).  The vote
** also compares the messages (a hash; MIN of h and of -h): 1, every rank
** said the same (rank 0 says it once, as the framework's option errors are
** said); 2, they differ (a script's sc.usage that names a rank's own
** state, an MPMD command line: every rank says its own, as [rank r]); 0,
** not every rank has a usage error, or the vote did not complete.  The
** vote's buffers and request are static: a rank that does not wait leaves
** its request to the abort, and a rank that gave up tests it once more
** (all_usage_late) before it aborts.  Alone (size 1): no vote. */
static int vote_in[3], vote_all[3];
static MPI_Request vote_rq = MPI_REQUEST_NULL;

static int vote_verdict (void) {
  if (vote_all[0] != 1) return 0;
  return vote_all[1] == -vote_all[2] ? 1 : 2;
}

static int all_usage (MPI_Comm vote, int size, int mine, const char *msg) {
  unsigned h = 2166136261u;                     /* FNV-1a */
  int done = 0, i;
  if (size == 1) return mine;
  for (; msg != NULL && *msg != '\0'; msg++) h = (h ^ (unsigned char)*msg) * 16777619u;
  h &= 0x3fffffffu;
  vote_in[0] = mine;
  vote_in[1] = mine ? (int)h : 0;
  vote_in[2] = mine ? -(int)h : 0;
  vote_all[0] = 0;
  if (vote == MPI_COMM_NULL ||
      MPI_Iallreduce(vote_in, vote_all, 3, MPI_INT, MPI_MIN, vote, &vote_rq) != MPI_SUCCESS || !mine)
    return 0;
  for (i = 0; i < 2000 && !done; i++) {
    struct timespec ts = {0, 1000000L};
    if (MPI_Test(&vote_rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
    if (!done) nanosleep(&ts, NULL);
  }
  return done ? vote_verdict() : 0;
}

/* The vote all_usage gave up on, tested once more (a peer that came late
** may have completed it since, and ends quietly on that verdict). */
static int all_usage_late (void) {
  int done = 0;
  if (vote_rq == MPI_REQUEST_NULL) return 0;
  if (MPI_Test(&vote_rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return 0;
  return vote_verdict();
}


int main (int argc, char **argv) {
  int provided, status = 0;
  MPI_Comm vote = MPI_COMM_NULL;
  lua_State *L;
  nvfp4_blas_select_core();        /* before any thread exists: it sets an env var */
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  /* the watchdog may abort */
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (MPI_Comm_dup(MPI_COMM_WORLD, &vote) != MPI_SUCCESS) vote = MPI_COMM_NULL;   /* all_usage */
  nvfp4L_notes_init();
  L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "[rank %d] nvfp4-lua: cannot create a Lua state\n", rank);
    nvfp4L_end_job(1);
  }
  lua_setwarnf(L, warnf, NULL);
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    int size = 1, verdict;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verdict = all_usage(vote, size, usage_error, lua_tostring(L, -1));
    if (!verdict && usage_error && rank != 0 && size > 1) {
      /* a usage error that not every rank voted for (yet): rank 0 (if it
      ** has one) says it and its nvfp4L_end_job ends the job, so the line is not
      ** printed once per rank; a rank whose error is its own (rank 0 went
      ** on) says it after this wait, unless the vote completed meanwhile */
      struct timespec ts = {0, 500000000L};
      nanosleep(&ts, NULL);
      verdict = all_usage_late();
    }
    if (verdict) {
      if (verdict == 2) fprintf(stderr, "[rank %d] %s\n", rank, lua_tostring(L, -1));
      else if (rank == 0) fprintf(stderr, "%s\n", lua_tostring(L, -1));
      fflush(stdout);
      fflush(stderr);
      status = 2;
    }
    else {
      fprintf(stderr, "[rank %d] %s\n", rank, lua_tostring(L, -1));
      fflush(stdout);
      fflush(stderr);
      status = usage_error ? 2 : 1;
      if (size > 1)
        nvfp4L_end_job(status);           /* peers may be waiting in a collective */
      /* alone: no peers to stop, end normally */
    }
  }
  else if (lua_getfield(L, LUA_REGISTRYINDEX, NVFP4L_EXIT) == LUA_TNUMBER)
    status = (int)lua_tointeger(L, -1);
  nvfp4L_notes_ended(status);       /* a peer waiting in a collective over this rank ends the job */
  nvfp4L_watchdog_settle();         /* a watchdog that fired ends the job, not this */
  /* the finalizers lua_close runs can make nothing: Lua would never
  ** finalize it (nvfp4L_notclosing); pmain's value marked it already,
  ** unless pmain ended before making it (--help, --version, a usage error) */
  (void)mark_closing(L);
  lua_close(L);                     /* __gc: tensors, comms, ctx; before MPI_Finalize */
  if (vote != MPI_COMM_NULL) MPI_Comm_free(&vote);   /* no vote pending: see all_usage */
  MPI_Finalize();
  return status;
}
