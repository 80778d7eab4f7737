/*
** mpicheck.h -- a small harness for multi-rank C tests (nccl-tests style).
** Checks record a failure and carry on (no longjmp, unlike cmocka), so every
** rank reaches the same collectives and a failing check never leaves peers
** waiting.  After each test the failure counts are summed over the world and
** rank 0 prints one TAP line; the program exits 1 if any test failed.
*/
#ifndef MPICHECK_H
#define MPICHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "nvfp4.h"
#include "nvfp4_mpi.h"

static int mc_rank, mc_size, mc_fail, mc_total_fail, mc_ntests;
static nvfp4_ctx *mc_ctx;

static void mc_report (const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "[rank %d] %s:%d: ", mc_rank, file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  mc_fail++;
}

#define EXPECT(cond) \
  do { if (!(cond)) mc_report(__FILE__, __LINE__, "EXPECT(%s) failed", #cond); } while (0)
#define EXPECT_MSG(cond, ...) \
  do { if (!(cond)) mc_report(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define EXPECT_ST(call, want) \
  do { nvfp4_status s_ = (call); \
       if (s_ != (want)) mc_report(__FILE__, __LINE__, "%s returned %s, expected %s (last error: %s)", \
                                   #call, nvfp4_status_string(s_), nvfp4_status_string(want), \
                                   nvfp4_last_error(mc_ctx)); } while (0)
#define EXPECT_OK(call) EXPECT_ST(call, NVFP4_OK)
#define EXPECT_EQ_I(a, b) \
  do { long long a_ = (long long)(a), b_ = (long long)(b); \
       if (a_ != b_) mc_report(__FILE__, __LINE__, "%s = %lld, expected %s = %lld", #a, a_, #b, b_); } while (0)
#define EXPECT_SHAPE(got, want) \
  do { nvfp4_shape g_ = (got), w_ = (want); char gb_[128], wb_[128]; \
       if (!nvfp4_shape_equal(g_, w_)) mc_report(__FILE__, __LINE__, "%s is %s, expected %s", #got, \
         nvfp4_shape_format(g_, gb_, sizeof gb_), nvfp4_shape_format(w_, wb_, sizeof wb_)); } while (0)
#define EXPECT_SUBSTR(s, sub) \
  do { const char *s_ = (s); \
       if (s_ == NULL || strstr(s_, (sub)) == NULL) \
         mc_report(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", s_ ? s_ : "(null)", (sub)); } while (0)

/* Byte equality with the first differing index. */
static inline int mc_bytes_equal (const char *file, int line, const void *a, const void *b,
                           size_t n, const char *what) {
  const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
  size_t i;
  for (i = 0; i < n; i++)
    if (x[i] != y[i]) {
      mc_report(file, line, "%s: first difference at byte %zu of %zu: 0x%02x vs 0x%02x",
                what, i, n, x[i], y[i]);
      return 0;
    }
  return 1;
}
#define EXPECT_BYTES(a, b, n, what) mc_bytes_equal(__FILE__, __LINE__, (a), (b), (n), (what))

/* nvfp4_shape from a dim list: SHAPE(3, 16, 2, 64) */
static inline nvfp4_shape mc_shape (int n, ...) {
  int64_t d[NVFP4_MAX_DIMS];
  va_list ap;
  int i;
  va_start(ap, n);
  for (i = 0; i < n && i < NVFP4_MAX_DIMS; i++) d[i] = va_arg(ap, int64_t);
  va_end(ap);
  return nvfp4_shape_make(n, d);
}
#define SHAPE2(a, b) mc_shape(2, (int64_t)(a), (int64_t)(b))
#define SHAPE3(a, b, c) mc_shape(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))
#define SHAPE4(a, b, c, d) mc_shape(4, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d))

/* Whether a string is the same on every rank of comm (e.g. an error message). */
static inline int mc_same_everywhere (MPI_Comm comm, const char *s) {
  char mine[512], root[512];
  size_t n = strlen(s);
  int same, all;
  memset(mine, 0, sizeof mine);
  memcpy(mine, s, n < sizeof mine - 1 ? n : sizeof mine - 1);   /* first 511 bytes */
  memcpy(root, mine, sizeof root);
  MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, comm);
  same = memcmp(mine, root, sizeof mine) == 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, comm);
  return all;
}

typedef void (*mc_test_fn) (void);

static void mc_run (const char *name, mc_test_fn fn) {
  int fails;
  double t0 = MPI_Wtime();
  mc_fail = 0;
  fn();
  MPI_Allreduce(&mc_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  mc_ntests++;
  if (fails) mc_total_fail++;
  if (mc_rank == 0) {
    printf("%s %d - %s (np=%d, %.2f s)%s\n", fails ? "not ok" : "ok", mc_ntests, name,
           mc_size, MPI_Wtime() - t0, fails ? "" : "");
    fflush(stdout);
  }
}
#define RUN(fn) mc_run(#fn, fn)

/* Skip note (TAP); the test still counts as passed. */
#define SKIP_IF(cond, why) \
  do { if (cond) { if (mc_rank == 0) printf("# %s: skipped at np=%d: %s\n", __func__, mc_size, why); return; } } while (0)

static void mc_init (int *argc, char ***argv) {
  const char *why = "", *want = getenv("NVFP4_BACKEND");
  nvfp4_blas_select_core();      /* OpenBLAS's fast kernels; before MPI starts threads */
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &mc_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mc_size);
  /* the CPU backend; with $NVFP4_BACKEND set and not empty (cuda on the GPU
  ** machine, by hand; make check too when it is exported), that one, as
  ** nvfp4-lua takes it */
  if (nvfp4_ctx_create(want != NULL && *want != '\0' ? NVFP4_BACKEND_AUTO : NVFP4_BACKEND_CPU,
                       &mc_ctx, &why) != NVFP4_OK) {
    fprintf(stderr, "cannot create a context: %s\n", why);
    MPI_Abort(MPI_COMM_WORLD, 99);
  }
}

static int mc_finish (void) {
  if (mc_rank == 0) {
    printf("1..%d\n", mc_ntests);
    printf("%d passed, %d failed\n", mc_ntests - mc_total_fail, mc_total_fail);
  }
  nvfp4_ctx_destroy(mc_ctx);
  MPI_Finalize();
  return mc_total_fail ? 1 : 0;
}

#endif
