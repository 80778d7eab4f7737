/*
** test_faults.c -- a device collective that fails on one rank after the
** ranks agreed (injected with nvfp4i_comm_fail_next, lib/comm_int.h): no
** peer is left waiting (kernels/cuda_comm.cu, "A failure after the
** agreement").
**  - NCCL: the failing rank aborts its communicator and tells its peers; a
**    peer's next wait on its stream aborts its own and returns EPEER naming
**    the failed call; the comm then refuses every collective (EUSAGE) and a
**    new one works.  A rank that never joins is found by
**    $NVFP4_NCCL_TIMEOUT.  The non-grouped all-gather, the NVFP4 gather's
**    NCCL group and the amax all-reduce of a quantize with amax_group.
**  - Staged (ranks sharing a GPU): the ranks agree before the MPI
**    all-gather; the comm stays usable.
**  - The set-up: $NVFP4_TRANSPORT checked and agreed; NCCL's set-up
**    failing (refused on a shared GPU, or rank 1 unable to call it) leaves
**    every rank on the staged path.
** They need a CUDA context (NVFP4_BACKEND=cuda on the GPU machine:
** `NVFP4_BACKEND=cuda mpirun -np 2 tests/mpi/test_faults`, on one GPU for
** the staged cases and on two for NCCL's); on the CPU backend (make check)
** only the staged all-to-all's agreement runs, through a host comm set to
** the staged transport.
*/
#include "mpicheck.h"
#include "comm_int.h"             /* nvfp4i_comm_fail_next */

#define ROWS 16
#define COLS 64

/* $NVFP4_TEST_TRACE set: each step on stderr, for a run that hangs. */
#define TRACE(what) \
  do { if (getenv("NVFP4_TEST_TRACE")) { fprintf(stderr, "[rank %d %.3f] %s:%d %s\n", mc_rank, \
                                         MPI_Wtime(), __func__, __LINE__, what); fflush(stderr); } } while (0)


static nvfp4_comm *new_comm (void) {
  nvfp4_comm *c = NULL;
  EXPECT_OK(nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &c));
  return c;
}


/* This rank's [ROWS, COLS] F32 shard: 1000 * rank + i. */
static nvfp4_tensor *shard (void) {
  float h[ROWS * COLS];
  nvfp4_tensor *t = NULL;
  int i;
  for (i = 0; i < ROWS * COLS; i++) h[i] = (float)(1000 * mc_rank + i);
  EXPECT_OK(nvfp4_tensor_from_host(mc_ctx, SHAPE2(ROWS, COLS), NVFP4_F32, h, sizeof h, &t));
  return t;
}


/* g = every rank's shard in rank order. */
static void check_gathered (const nvfp4_tensor *g) {
  size_t n = (size_t)mc_size * ROWS * COLS, i;
  float *h = (float *)calloc(n, sizeof *h);
  if (g == NULL || h == NULL) {
    EXPECT_MSG(0, "no gathered tensor");
    free(h);
    return;
  }
  EXPECT_SHAPE(nvfp4_tensor_shape(g), SHAPE2(mc_size * ROWS, COLS));
  EXPECT_OK(nvfp4_tensor_to_host(g, h, n * sizeof *h));
  for (i = 0; i < n; i++)
    if (h[i] != (float)(1000 * (i / (ROWS * COLS)) + i % (ROWS * COLS))) {
      EXPECT_MSG(0, "gathered element %zu is %g", i, (double)h[i]);
      break;
    }
  free(h);
}


/* The comm's transport when it is `want` (else a skip note and NULL: c
** destroyed). */
static nvfp4_comm *comm_on (const char *want, const char *test) {
  nvfp4_comm *c = new_comm();
  if (c != NULL && strcmp(nvfp4_comm_transport(c), want) == 0) return c;
  if (mc_rank == 0)
    printf("# %s: skipped at np=%d: the transport is %s, not %s\n", test, mc_size,
           nvfp4_comm_transport(c), want);
  nvfp4_comm_destroy(c);
  return NULL;
}


/* After the failure: the comm refuses collectives on every rank; a new comm
** works. */
static void check_dead_then_new (nvfp4_comm *c, const nvfp4_tensor *x) {
  nvfp4_tensor *g = NULL;
  TRACE("dead?");
  EXPECT_ST(nvfp4_all_gather_plain(c, x, &g), NVFP4_EUSAGE);
  TRACE("destroy");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "NCCL communicator was aborted");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "destroy the comm");
  EXPECT(g == NULL);
  nvfp4_comm_destroy(c);
  TRACE("new comm");
  c = new_comm();
  EXPECT_OK(nvfp4_all_gather_plain(c, x, &g));
  check_gathered(g);
  nvfp4_tensor_destroy(g);
  nvfp4_comm_destroy(c);
  TRACE("done");
}


/* A peer's wait on a stream stuck behind rank 1's failure: EPEER naming
** `call`, in well under the default timeout. */
static void expect_released (const char *call) {
  double t0 = MPI_Wtime();
  TRACE("sync");
  EXPECT_ST(nvfp4_ctx_sync(mc_ctx), NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 of");
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), call);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "injected");
  EXPECT_MSG(MPI_Wtime() - t0 < 30.0, "the wait took %.1f s", MPI_Wtime() - t0);
  EXPECT_OK(nvfp4_ctx_sync(mc_ctx));        /* drained: nothing left */
}


/* The all-gather outside a group fails on rank 1; the others queued theirs. */
static void test_nccl_plain_gather (void) {
  nvfp4_comm *c = comm_on("nccl", __func__);
  nvfp4_tensor *x = shard(), *g = NULL;
  nvfp4_status st;
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  TRACE("gather");
  st = nvfp4_all_gather_plain(c, x, &g);
  TRACE(nvfp4_status_string(st));
  if (mc_rank == 1) {
    EXPECT_EQ_I(st, NVFP4_ENCCL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "ncclAllGather failed: injected");
    EXPECT(g == NULL);
  }
  else {
    size_t n = (size_t)mc_size * ROWS * COLS;
    float *h = (float *)calloc(n, sizeof *h);
    EXPECT_EQ_I(st, NVFP4_OK);
    /* a readback of the output is the wait that finds out */
    EXPECT_ST(nvfp4_tensor_to_host(g, h, n * sizeof *h), NVFP4_EPEER);
    TRACE(nvfp4_last_error(mc_ctx));
    free(h);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 of");
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "ncclAllGather failed: injected");
    EXPECT_OK(nvfp4_ctx_sync(mc_ctx));
  }
  nvfp4_tensor_destroy(g);
  check_dead_then_new(c, x);
  nvfp4_tensor_destroy(x);
}


/* The NVFP4 gather's four all-gathers in one NCCL group: the first fails
** on rank 1 (after the amax all-reduce of its quantize, which NCCL runs for a
** given amax too), the group's end aborts.  The peers then launch the
** gather's own kernels for the first time in this process behind the stuck
** group: under CUDA's lazy loading that would wait for the device to go
** idle, unless the modules were loaded with the NCCL comm. */
static void test_nccl_group (void) {
  nvfp4_comm *c = comm_on("nccl", __func__);
  nvfp4_tensor *x = shard(), *g = NULL;
  nvfp4_qopts q;
  nvfp4_gather_opts go;
  nvfp4_status st;
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  memset(&q, 0, sizeof q);
  memset(&go, 0, sizeof go);
  q.rowwise = q.columnwise = 1;
  q.has_amax = 1;
  q.amax[0] = q.amax[1] = 4096.0f;            /* the same on every rank */
  go.quant = &q;
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 1);  /* after the amax all-reduce */
  TRACE("gather");
  st = nvfp4_all_gather(c, x, &go, &g);
  TRACE(nvfp4_status_string(st));
  if (mc_rank == 1) {
    EXPECT_EQ_I(st, NVFP4_ENCCL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "ncclAllGather failed: injected");
  }
  else {
    EXPECT_EQ_I(st, NVFP4_OK);
    expect_released("ncclAllGather failed: injected");
  }
  nvfp4_tensor_destroy(g);
  check_dead_then_new(c, x);
  nvfp4_tensor_destroy(x);
}


/* A quantize with amax_group: the amax all-reduce fails on rank 1 after the
** ranks agreed; the gather around it agrees on that, and the peers' streams,
** stuck in the all-reduce, are released by their next wait. */
static void test_nccl_amax_reduce (void) {
  nvfp4_comm *c = comm_on("nccl", __func__);
  nvfp4_tensor *x = shard(), *q = NULL;
  nvfp4_qopts o;
  nvfp4_status st;
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  memset(&o, 0, sizeof o);
  o.rowwise = 1;
  o.amax_group = c;
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  TRACE("quantize");
  st = nvfp4_quantize(mc_ctx, x, &o, &q);
  TRACE(nvfp4_status_string(st));
  if (mc_rank == 1) {
    EXPECT_EQ_I(st, NVFP4_ENCCL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "ncclAllReduce(amax, max) failed: injected");
    EXPECT(q == NULL);
  }
  else {
    EXPECT_EQ_I(st, NVFP4_OK);
    expect_released("ncclAllReduce(amax, max) failed: injected");
  }
  nvfp4_tensor_destroy(q);
  check_dead_then_new(c, x);
  nvfp4_tensor_destroy(x);
}


/* Rank 1 fails without a word (as a rank that never calls): the others'
** waits end after NVFP4_NCCL_TIMEOUT with EPEER; rank 1's comm was not
** aborted, so its next collective meets its peers' refusal as EPEER. */
static void test_nccl_timeout (void) {
  nvfp4_comm *c;
  nvfp4_tensor *x = shard(), *g = NULL;
  nvfp4_status st;
  double t0;
  setenv("NVFP4_NCCL_TIMEOUT", "2", 1);
  c = comm_on("nccl", __func__);
  unsetenv("NVFP4_NCCL_TIMEOUT");
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  if (mc_rank == 1) nvfp4i_comm_fail_next(2, 0);
  st = nvfp4_all_gather_plain(c, x, &g);
  if (mc_rank == 1) {
    EXPECT_EQ_I(st, NVFP4_ENCCL);
  }
  else {
    EXPECT_EQ_I(st, NVFP4_OK);
    t0 = MPI_Wtime();
    EXPECT_ST(nvfp4_ctx_sync(mc_ctx), NVFP4_EPEER);
    /* its own timeout, or the note of a peer whose came first (np > 2) */
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "(NVFP4_NCCL_TIMEOUT) with a collective queued");
    EXPECT_MSG(MPI_Wtime() - t0 > 1.5 && MPI_Wtime() - t0 < 30.0, "the wait took %.1f s",
               MPI_Wtime() - t0);
  }
  nvfp4_tensor_destroy(g);
  g = NULL;
  EXPECT_ST(nvfp4_all_gather_plain(c, x, &g), mc_rank == 1 ? NVFP4_EPEER : NVFP4_EUSAGE);
  nvfp4_comm_destroy(c);
  c = new_comm();
  EXPECT_OK(nvfp4_all_gather_plain(c, x, &g));
  check_gathered(g);
  nvfp4_tensor_destroy(g);
  nvfp4_comm_destroy(c);
  nvfp4_tensor_destroy(x);
}


/* Three NCCL comms on the context; the gather fails on rank 1 over A.
** Before anything waits on the stuck stream, the ranks make a new comm C:
** its set-up drains the stream (the note aborts A), C and B work, A refuses
** on every rank. */
static void test_nccl_two_comms (void) {
  nvfp4_comm *a = comm_on("nccl", __func__), *b = NULL, *c = NULL;
  nvfp4_tensor *x = shard(), *g = NULL;
  nvfp4_status st;
  if (a == NULL) { nvfp4_tensor_destroy(x); return; }
  b = new_comm();
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  st = nvfp4_all_gather_plain(a, x, &g);
  EXPECT_EQ_I(st, mc_rank == 1 ? NVFP4_ENCCL : NVFP4_OK);
  nvfp4_tensor_destroy(g);
  g = NULL;
  TRACE("new comm behind the stuck one");
  c = new_comm();
  EXPECT_MSG(c != NULL && strcmp(nvfp4_comm_transport(c), "nccl") == 0, "C is on %s",
             nvfp4_comm_transport(c));
  EXPECT_OK(nvfp4_all_gather_plain(c, x, &g));
  check_gathered(g);
  nvfp4_tensor_destroy(g);
  g = NULL;
  EXPECT_OK(nvfp4_all_gather_plain(b, x, &g));
  check_gathered(g);
  nvfp4_tensor_destroy(g);
  g = NULL;
  EXPECT_ST(nvfp4_all_gather_plain(a, x, &g), NVFP4_EUSAGE);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "NCCL communicator was aborted");
  nvfp4_comm_destroy(a);
  nvfp4_comm_destroy(c);
  nvfp4_comm_destroy(b);
  nvfp4_tensor_destroy(x);
}


/* A timeout that is not a positive number of seconds, on rank 1 only:
** EINVAL there naming it, EPEER on the others; nothing is made. */
static void test_bad_timeout (void) {
  nvfp4_comm *c = NULL;
  if (mc_rank == 1) setenv("NVFP4_NCCL_TIMEOUT", "10s", 1);
  if (mc_rank == 1) {
    EXPECT_ST(nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &c), NVFP4_EINVAL);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "NVFP4_NCCL_TIMEOUT='10s': must be a number of seconds > 0");
  }
  else {
    EXPECT_ST(nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &c), NVFP4_EPEER);
    EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), "rank 1 failed (invalid argument)");
  }
  EXPECT(c == NULL);
  unsetenv("NVFP4_NCCL_TIMEOUT");
  nvfp4_comm_destroy(c);
}


/* $NVFP4_TRANSPORT: a value other than auto, nccl and mpi-staged is refused
** on the rank that has it (EINVAL naming it; EPEER on the others, none
** waiting); where the ranks' values differ, staging wins. */
static void test_transport_env (void) {
  nvfp4_comm *c = NULL;
  nvfp4_tensor *x = shard(), *g = NULL;
  if (mc_rank == 1) setenv("NVFP4_TRANSPORT", "staged", 1);
  EXPECT_ST(nvfp4_comm_create_mpi(mc_ctx, MPI_COMM_WORLD, &c), mc_rank == 1 ? NVFP4_EINVAL : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 1 ? "NVFP4_TRANSPORT='staged': must be auto, nccl or "
                                                         "mpi-staged" : "rank 1 failed (invalid argument)");
  EXPECT(c == NULL);
  setenv("NVFP4_TRANSPORT", mc_rank == 1 ? "mpi-staged" : "nccl", 1);
  c = new_comm();
  if (c != NULL) {
    EXPECT_SUBSTR(nvfp4_comm_transport(c), "mpi-staged");
    EXPECT_OK(nvfp4_all_gather_plain(c, x, &g));
    check_gathered(g);
    nvfp4_tensor_destroy(g);
  }
  nvfp4_comm_destroy(c);
  unsetenv("NVFP4_TRANSPORT");
  nvfp4_tensor_destroy(x);
}


/* NCCL's set-up failing, on every rank or on one before NCCL is called,
** leaves every rank on the staged path, none waiting for another (a rank
** missing from ncclCommInitRank would leave its peers inside it).
** NVFP4_TRANSPORT=nccl makes the ranks try NCCL even on a shared GPU, where
** NCCL refuses them all; then rank 1's injected fault (mode 4) stops the
** set-up before any NCCL call, on shared GPUs and on distinct ones (where
** NCCL would work: the comm without the fault is "nccl" there). */
static void test_nccl_setup_fails (void) {
  nvfp4_comm *c = new_comm();
  nvfp4_tensor *x = shard(), *g = NULL;
  const double t0 = MPI_Wtime();
  int own, k;
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  own = strcmp(nvfp4_comm_transport(c), "nccl") == 0;     /* auto: one GPU per rank */
  nvfp4_comm_destroy(c);
  setenv("NVFP4_TRANSPORT", "nccl", 1);
  for (k = 0; k < 2; k++) {
    if (k == 1 && mc_rank == 1) nvfp4i_comm_fail_next(4, 0);
    TRACE(k ? "comm, rank 1's set-up failing" : "comm, NCCL forced");
    c = new_comm();
    if (c == NULL) continue;
    if (own && k == 0) EXPECT_SUBSTR(nvfp4_comm_transport(c), "nccl");
    else EXPECT_SUBSTR(nvfp4_comm_transport(c), "mpi-staged");
    EXPECT_OK(nvfp4_all_gather_plain(c, x, &g));
    check_gathered(g);
    nvfp4_tensor_destroy(g);
    g = NULL;
    nvfp4_comm_destroy(c);
  }
  nvfp4i_comm_fail_next(0, 0);       /* a build without NCCL never takes it */
  unsetenv("NVFP4_TRANSPORT");
  EXPECT_MSG(MPI_Wtime() - t0 < 120.0, "the set-ups took %.1f s", MPI_Wtime() - t0);
  nvfp4_tensor_destroy(x);
}


/* Staged: rank 1's device -> host copy fails; the ranks agree before the
** MPI all-gather, and the comm stays usable. */
static void test_staged (void) {
  nvfp4_comm *c = comm_on("mpi-staged", __func__);
  nvfp4_tensor *x = shard(), *g = NULL;
  nvfp4_gather_opts go;
  nvfp4_qopts q;
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  EXPECT_ST(nvfp4_all_gather_plain(c, x, &g), mc_rank == 1 ? NVFP4_ECUDA : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 1 ? "device -> host copy failed: injected"
                                                       : "rank 1 failed (CUDA error)");
  EXPECT(g == NULL);
  /* the NVFP4 gather: the first of its four */
  memset(&q, 0, sizeof q);
  memset(&go, 0, sizeof go);
  q.rowwise = q.columnwise = 1;
  q.has_amax = 1;
  q.amax[0] = q.amax[1] = 4096.0f;
  go.quant = &q;
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  EXPECT_ST(nvfp4_all_gather(c, x, &go, &g), mc_rank == 1 ? NVFP4_ECUDA : NVFP4_EPEER);
  EXPECT(g == NULL);
  /* the first of the four fails after its MPI call: all stop there */
  if (mc_rank == 1) nvfp4i_comm_fail_next(3, 0);
  EXPECT_ST(nvfp4_all_gather(c, x, &go, &g), mc_rank == 1 ? NVFP4_ECUDA : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 1 ? "all_gather (staged): the host -> device copy"
                                                       : "all_gather (staged): rank 1 failed (CUDA error)");
  EXPECT(g == NULL);
  /* the reduce-scatter's all-to-all */
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  EXPECT_ST(nvfp4_reduce_scatter(c, x, &g), mc_rank == 1 ? NVFP4_ECUDA : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 1 ? "all_to_all (staged): the device -> host copy"
                                                       : "all_to_all (staged): rank 1 failed (CUDA error)");
  EXPECT(g == NULL);
  EXPECT_OK(nvfp4_all_gather_plain(c, x, &g));
  check_gathered(g);
  nvfp4_tensor_destroy(g);
  nvfp4_comm_destroy(c);
  nvfp4_tensor_destroy(x);
}


/* With test names as arguments, those only (in this program's order). */
static int wanted (int argc, char **argv, const char *name) {
  int i;
  for (i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0) return 1;
  return argc < 2;
}
#define RUN_IF(fn) do { if (wanted(argc, argv, #fn)) RUN(fn); } while (0)


/* The staged all-to-all's agreement on the CPU backend too (so make check
** runs it): a host comm set to the staged transport takes the same path
** (lib/comm.c, all_to_all_staged), its "device" copy a memcpy.  Rank 1's
** copy fails: EPEER on the others, nobody left in MPI_Alltoall; the next
** reduce-scatter sums right. */
static void test_staged_host (void) {
  nvfp4_comm *c = new_comm();
  nvfp4_tensor *x = shard(), *g = NULL;
  float h[ROWS * COLS];
  int i, blk = ROWS / mc_size * COLS, bad = 0;
  if (c == NULL) { nvfp4_tensor_destroy(x); return; }
  c->transport = NVFP4I_MPI_STAGED;
  if (mc_rank == 1) nvfp4i_comm_fail_next(1, 0);
  EXPECT_ST(nvfp4_reduce_scatter(c, x, &g), mc_rank == 1 ? NVFP4_ECUDA : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 1 ? "all_to_all (staged): the device -> host copy"
                                                       : "all_to_all (staged): rank 1 failed (CUDA error)");
  EXPECT(g == NULL);
  /* its copy back fails after the MPI call: the same outcome everywhere */
  if (mc_rank == 1) nvfp4i_comm_fail_next(3, 0);
  EXPECT_ST(nvfp4_reduce_scatter(c, x, &g), mc_rank == 1 ? NVFP4_ECUDA : NVFP4_EPEER);
  EXPECT_SUBSTR(nvfp4_last_error(mc_ctx), mc_rank == 1 ? "all_to_all (staged): the host -> device copy"
                                                       : "all_to_all (staged): rank 1 failed (CUDA error)");
  EXPECT(g == NULL);
  EXPECT_OK(nvfp4_reduce_scatter(c, x, &g));
  EXPECT_OK(nvfp4_tensor_to_host(g, h, (size_t)blk * sizeof *h));
  for (i = 0; i < blk && !bad; i++) {
    /* sum over ranks q of 1000 q + (rank * blk + i) */
    float want = (float)(1000 * mc_size * (mc_size - 1) / 2 + mc_size * (mc_rank * blk + i));
    if (h[i] != want) {
      EXPECT_MSG(0, "reduce-scatter element %d is %g, expected %g", i, (double)h[i], (double)want);
      bad = 1;
    }
  }
  nvfp4_tensor_destroy(g);
  c->transport = NVFP4I_MPI;
  nvfp4_comm_destroy(c);
  nvfp4_tensor_destroy(x);
}


int main (int argc, char **argv) {
  int rc;
  mc_init(&argc, &argv);
  if (strcmp(nvfp4_ctx_backend(mc_ctx), "cuda") != 0) {
    /* nothing after the agreement can fail on the host transport: the
    ** staged all-to-all's agreement only (the rest needs a CUDA context) */
    if (mc_rank == 0) printf("# the device cases need a CUDA context (NVFP4_BACKEND=cuda)\n");
    RUN_IF(test_staged_host);
    return mc_finish();
  }
  RUN_IF(test_nccl_plain_gather);
  RUN_IF(test_nccl_group);
  RUN_IF(test_nccl_amax_reduce);
  RUN_IF(test_nccl_timeout);
  RUN_IF(test_nccl_two_comms);
  RUN_IF(test_bad_timeout);
  RUN_IF(test_transport_env);
  RUN_IF(test_nccl_setup_fails);
  RUN_IF(test_staged);
  rc = mc_finish();
  return rc;
}
