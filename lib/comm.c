/*
** comm.c -- communicators over MPI: creation, split into tensor-parallel
** groups of consecutive ranks, and the small host-value collectives used to
** agree on amaxes, metadata and verdicts.
*/
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "nvfp4_mpi.h"
#include "comm_int.h"


static nvfp4_status mpi_fail (nvfp4_ctx *ctx, int rc, const char *call) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return nvfp4i_fail(ctx, NVFP4_EMPI, "%s failed: %.*s", call, len, msg);
}

#define MPI_CHECK(ctx, call)  \
  do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return mpi_fail((ctx), rc_, #call); } while (0)


/* The last comm serial handed out (nvfp4_comm.serial); atomic, so that
** comms made on several threads never share one. */
static uint64_t comm_serials;


/* The injected failure of a device collective (nvfp4i_comm_fail_next):
** its mode, and how many device collectives go through before it. */
static int fault_mode, fault_skip;

void nvfp4i_comm_fail_next (int mode, int skip) {
  fault_skip = skip;
  fault_mode = mode;
}

int nvfp4i_comm_take_fault (void) {
  int m = fault_mode;
  if (m == 0 || m == 4) return 0;
  if (fault_skip > 0) {
    fault_skip--;
    return 0;
  }
  fault_mode = 0;
  return m;
}

int nvfp4i_comm_take_setup_fault (void) {
  if (fault_mode != 4) return 0;
  if (fault_skip > 0) {
    fault_skip--;
    return 0;
  }
  fault_mode = 0;
  return 1;
}


/* $NVFP4_NCCL_TIMEOUT into *t: seconds > 0; 600 (PyTorch's process groups'
** default) when unset or empty. */
static nvfp4_status nccl_timeout (nvfp4_ctx *ctx, const char *what, double *t) {
  const char *e = getenv("NVFP4_NCCL_TIMEOUT");
  char *end = NULL;
  double v;
  *t = 600.0;
  if (e == NULL || *e == '\0') return NVFP4_OK;
  v = strtod(e, &end);
  if (end == e || *end != '\0' || !(v > 0.0) || v > 1e9)
    return nvfp4i_fail(ctx, NVFP4_EINVAL, "%s: NVFP4_NCCL_TIMEOUT='%.40s': must be a number "
                       "of seconds > 0 (at most 1e9)", what, e);
  *t = v;
  return NVFP4_OK;
}


/* $NVFP4_TRANSPORT into *want (NVFP4I_WANT_*): unset, empty or "auto",
** "nccl", "mpi-staged". */
static nvfp4_status transport_wish (nvfp4_ctx *ctx, const char *what, int *want) {
  const char *e = getenv("NVFP4_TRANSPORT");
  *want = NVFP4I_WANT_AUTO;
  if (e == NULL || *e == '\0' || strcmp(e, "auto") == 0) return NVFP4_OK;
  if (strcmp(e, "nccl") == 0) *want = NVFP4I_WANT_NCCL;
  else if (strcmp(e, "mpi-staged") == 0) *want = NVFP4I_WANT_STAGED;
  else
    return nvfp4i_fail(ctx, NVFP4_EINVAL, "%s: NVFP4_TRANSPORT='%.40s': must be auto, nccl or "
                       "mpi-staged (or unset)", what, e);
  return NVFP4_OK;
}


/* A comm over mc.  `local`: the caller's verdict on its own arguments.
** With a CUDA context the transport's set-up (nvfp4i_cuda_comm_setup) is
** collective over mc, so the ranks first agree on `local` and on this
** allocation: a rank failing here keeps its error and the others get EPEER
** instead of waiting in the set-up's MPI calls.  parent (a split's comm,
** whose ranks all made the MPI_Comm_split of mc, which the new comm then
** owns): the agreement is over parent instead, on every backend, so that
** no rank of parent keeps a group when a rank failed to make its own.
** Otherwise, with the CPU backend, nothing here is collective and each rank
** answers for itself. */
static nvfp4_status comm_new (nvfp4_ctx *ctx, MPI_Comm mc, nvfp4_comm *parent, const char *what,
                              nvfp4_status local, nvfp4_comm **out) {
  nvfp4_comm *c = NULL, probe;
  const int collective = strcmp(ctx->ops->name, "cpu") != 0, owns = parent != NULL;
  memset(&probe, 0, sizeof probe);
  probe.ctx = ctx;
  probe.mpi = mc;
  if (mc != MPI_COMM_NULL) {            /* NULL: a split whose MPI_Comm_split failed here */
    MPI_Comm_rank(mc, &probe.rank);
    MPI_Comm_size(mc, &probe.size);
  }
  probe.notify = MPI_COMM_NULL;
  if (local == NVFP4_OK && collective) local = nccl_timeout(ctx, what, &probe.timeout_s);
  if (local == NVFP4_OK && collective) local = transport_wish(ctx, what, &probe.want);
  if (local == NVFP4_OK && (c = (nvfp4_comm *)nvfp4i_calloc(1, sizeof *c)) == NULL)
    local = nvfp4i_fail(ctx, NVFP4_ENOMEM, "%s: cannot allocate a communicator (%zu bytes)",
                        what, sizeof *c);
#ifdef HAVE_CUDA
  /* the failure-note block an NCCL comm's abort sends from (see
  ** nvfp4i_cuda_notes_bytes): had here, where a rank that cannot get it
  ** still tells the others, not at the abort */
  if (local == NVFP4_OK && collective && probe.size > 1) {
    const size_t nb = nvfp4i_cuda_notes_bytes(probe.size);
    if (nb > 0 && (probe.notes = nvfp4i_malloc(nb)) == NULL)
      local = nvfp4i_fail(ctx, NVFP4_ENOMEM, "%s: cannot allocate the communicator's failure-note "
                          "block (%zu bytes)", what, nb);
  }
#endif
  if (parent != NULL) local = nvfp4i_comm_agree(parent, what, local);
  else if (collective) {
    /* nvfp4i_comm_agree needs a comm's rank, size, MPI communicator and
    ** context only: probe has them even where c could not be had.  Its
    ** MPI errors come back as EMPI (MPI_ERRORS_RETURN for the round; the
    ** caller's handler is put back when the call fails) */
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(mc, &eh);
    MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    local = nvfp4i_comm_agree(&probe, what, local);
    if (local != NVFP4_OK) MPI_Comm_set_errhandler(mc, eh);
    MPI_Errhandler_free(&eh);
  }
  if (local != NVFP4_OK) {
    free(probe.notes);
    free(c);
    return local;
  }
  *c = probe;                          /* ctx, mpi, rank, size */
  c->serial = __atomic_add_fetch(&comm_serials, 1, __ATOMIC_RELAXED);
  nvfp4i_ctx_hold(ctx);
  c->owns_mpi = owns;
  /* Errors come back as codes, never as an abort inside the library. */
  MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
  c->transport = collective ? NVFP4I_MPI_STAGED : NVFP4I_MPI;
#ifdef HAVE_CUDA
  /* CUDA ctx: NCCL when every rank has its own GPU, else staged (collective) */
  if (c->transport == NVFP4I_MPI_STAGED) nvfp4i_cuda_comm_setup(c);
#endif
  *out = c;
  return NVFP4_OK;
}


nvfp4_status nvfp4_comm_create_mpi (nvfp4_ctx *ctx, MPI_Comm mc, nvfp4_comm **out) {
  NVFP4I_CLEAR(out);
  if (ctx == NULL) return NVFP4_EINVAL;
  /* no member of any communicator: nothing can tell the others */
  FAIL_IF(ctx, mc == MPI_COMM_NULL, NVFP4_EINVAL, "comm_create_mpi: mc is MPI_COMM_NULL "
          "(a comm is made over a communicator this rank belongs to)");
  {  /* outside MPI's lifetime every MPI call aborts the process (MPI 4.0 §11.2) */
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    FAIL_IF(ctx, !init || fin, NVFP4_EINVAL, "comm_create_mpi: MPI is %s (call it between "
            "MPI_Init and MPI_Finalize)", fin ? "finalized" : "not initialized");
  }
  return comm_new(ctx, mc, NULL, "comm_create_mpi",
                  out == NULL ? nvfp4i_fail(ctx, NVFP4_EINVAL, "comm_create_mpi: out is NULL")
                              : NVFP4_OK, out);
}


MPI_Comm nvfp4_comm_mpi (const nvfp4_comm *c) {
  return c ? c->mpi : MPI_COMM_NULL;
}


int nvfp4_comm_rank (const nvfp4_comm *c) { return c ? c->rank : -1; }
int nvfp4_comm_size (const nvfp4_comm *c) { return c ? c->size : 0; }
nvfp4_ctx *nvfp4_comm_ctx (const nvfp4_comm *c) { return c ? c->ctx : NULL; }


const char *nvfp4_comm_transport (const nvfp4_comm *c) {
  static const char *const name[] = {"mpi", "mpi-staged", "nccl"};
  return c ? name[c->transport] : "none";
}


static void comm_free (nvfp4_comm *c) {
#ifdef HAVE_CUDA
  nvfp4i_cuda_comm_fini(c);
#endif
  if (c->owns_mpi) {
    /* a layer destroyed after MPI_Finalize may free a comm destroyed
    ** before it: MPI_Comm_free then would abort the job */
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&c->mpi);
  }
  free(c->notes);                      /* NULL where a note is still in flight (fini) */
  nvfp4i_ctx_release(c->ctx);
  free(c);
}


void nvfp4i_comm_use (nvfp4_comm *c) {
  c->users++;
}


void nvfp4i_comm_unuse (nvfp4_comm *c) {
  if (--c->users == 0 && c->closing) comm_free(c);
}


void nvfp4_comm_destroy (nvfp4_comm *c) {
  if (c == NULL || c->closing) return;
  if (c->users > 0) c->closing = 1;
  else comm_free(c);
}


/* The ranks first tell each other their verdict, then one value they must
** give alike (a few small reductions): a rank whose arguments fail keeps its
** error and the others get NVFP4_EPEER naming it; different values are
** NVFP4_EMISMATCH on every rank.  split: tp (instead of waiting in
** MPI_Comm_split or splitting into groups of different sizes); the
** host-value collectives: n (a rank passing another count would leave the
** others inside MPI_Allreduce or truncate). */
static nvfp4_status agree_value (nvfp4_comm *c, const char *what, nvfp4_status local,
                                 const char *name, int64_t v, const char *hint) {
  CHECK(nvfp4i_comm_agree(c, what, local));
  return nvfp4i_comm_same_i64(c, what, &v, &name, 1, hint);
}


nvfp4_status nvfp4_comm_split (nvfp4_comm *c, int tp, nvfp4_comm **out) {
  MPI_Comm sub;
  nvfp4_status st = NVFP4_OK;
  NVFP4I_CLEAR(out);
  if (c == NULL) return NVFP4_EINVAL;
  if (out == NULL) st = nvfp4i_fail(c->ctx, NVFP4_EINVAL, "split: out is NULL");
  else if (tp < 1 || c->size % tp != 0)
    st = nvfp4i_fail(c->ctx, NVFP4_EINVAL,
                     "split: tp=%d must be >= 1 and divide the communicator size %d",
                     tp, c->size);
  CHECK(agree_value(c, "split", st, "tp", tp, NULL));
  /* a rank whose MPI_Comm_split fails (after its collective part, e.g.
  ** out of memory) still joins comm_new's agreement over c, which its
  ** peers are in: they get EPEER instead of waiting there */
  {
    const int rc = MPI_Comm_split(c->mpi, c->rank / tp, c->rank % tp, &sub);
    if (rc != MPI_SUCCESS) {
      st = mpi_fail(c->ctx, rc, "split: MPI_Comm_split");
      sub = MPI_COMM_NULL;
    }
  }
  /* The ranks of c agree on the new comms (comm_new, over c): a rank that
  ** cannot make its comm keeps its error and every other rank of c, in its
  ** group or not, gets EPEER naming it by its rank in c, with no comm made
  ** (else a failed group's ranks would leave c's next collective to the
  ** others, who went on).  comm_new then picks the new comm's transport
  ** (its own NCCL comm), collectively within the group. */
  if ((st = comm_new(c->ctx, sub, c, "split", st, out)) != NVFP4_OK && sub != MPI_COMM_NULL)
    MPI_Comm_free(&sub);
  return st;
}


/* The agreement's reduction is the barrier (no rank leaves it before every
** rank has entered), and it meets any other collective on c. */
nvfp4_status nvfp4_comm_barrier (nvfp4_comm *c) {
  if (c == NULL) return NVFP4_EINVAL;
  return nvfp4i_comm_agree(c, "comm_barrier", NVFP4_OK);
}


nvfp4_status nvfp4_comm_agree (nvfp4_comm *c, const char *what, nvfp4_status local) {
  if (c == NULL) return NVFP4_EINVAL;
  if (what == NULL) {
    local = nvfp4i_fail(c->ctx, NVFP4_EINVAL, "comm_agree: what is NULL");
    what = "comm_agree";
  }
  return nvfp4i_comm_agree(c, what, local);
}


#define SAME_N " (every rank passes the same count)"

static nvfp4_status host_args (nvfp4_comm *c, const char *what, const void *v, int n) {
  FAIL_IF(c->ctx, n < 0, NVFP4_EINVAL, "%s: n=%d is negative", what, n);
  FAIL_IF(c->ctx, v == NULL && n > 0, NVFP4_EINVAL, "%s: v is NULL (n=%d)", what, n);
  return NVFP4_OK;
}


nvfp4_status nvfp4i_comm_max_f32 (nvfp4_comm *c, float *v, int n) {
  /* MPI_MAX on floats propagates nothing special for NaN; amaxes ignore NaN
  ** upstream, so inputs here are finite or +Inf. */
  MPI_CHECK(c->ctx, MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_MAX, c->mpi));
  return NVFP4_OK;
}


nvfp4_status nvfp4i_comm_max_f32_buf (nvfp4_comm *c, float *buf, int n) {
  if (c->transport == NVFP4I_MPI) return nvfp4i_comm_max_f32(c, buf, n);
#ifdef HAVE_CUDA
  if (c->transport == NVFP4I_NCCL) return nvfp4i_cuda_all_reduce_max_f32(c, buf, n);
#endif
  (void)buf; (void)n;
  return nvfp4i_fail(c->ctx, NVFP4_EUSAGE, "all-reduce in place: not on the mpi-staged transport");
}


nvfp4_status nvfp4_comm_all_reduce_max_f32 (nvfp4_comm *c, float *v, int n) {
  static const char what[] = "comm_all_reduce_max_f32";
  if (c == NULL) return NVFP4_EINVAL;
  CHECK(agree_value(c, what, host_args(c, what, v, n), "n", n, SAME_N));
  return nvfp4i_comm_max_f32(c, v, n);
}


nvfp4_status nvfp4_comm_all_reduce_max_int (nvfp4_comm *c, int *v, int n) {
  static const char what[] = "comm_all_reduce_max_int";
  if (c == NULL) return NVFP4_EINVAL;
  CHECK(agree_value(c, what, host_args(c, what, v, n), "n", n, SAME_N));
  MPI_CHECK(c->ctx, MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, c->mpi));
  return NVFP4_OK;
}


nvfp4_status nvfp4_comm_all_gather_int (nvfp4_comm *c, int v, int *out) {
  static const char what[] = "comm_all_gather_int";
  if (c == NULL) return NVFP4_EINVAL;
  CHECK(nvfp4i_comm_agree(c, what, out == NULL ? nvfp4i_fail(c->ctx, NVFP4_EINVAL,
                                                             "%s: out is NULL", what)
                                               : NVFP4_OK));
  MPI_CHECK(c->ctx, MPI_Allgather(&v, 1, MPI_INT, out, 1, MPI_INT, c->mpi));
  return NVFP4_OK;
}


/* Host transport only here; the CUDA backend adds staged and NCCL paths
** (kernels/cuda_comm.cu) behind the same function. */
#ifdef HAVE_CUDA
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_all_gather_bytes (nvfp4_comm *c, const void *send,
                                                       size_t n, void *recv);
#endif

nvfp4_status nvfp4i_comm_group_start (nvfp4_comm *c) {
#ifdef HAVE_CUDA
  if (c->transport == NVFP4I_NCCL) return nvfp4i_cuda_comm_group(c, 1);
#endif
  return NVFP4_OK;
}


nvfp4_status nvfp4i_comm_group_end (nvfp4_comm *c) {
#ifdef HAVE_CUDA
  if (c->transport == NVFP4I_NCCL) return nvfp4i_cuda_comm_group(c, 0);
#endif
  return NVFP4_OK;
}


nvfp4_status nvfp4i_comm_all_gather_bytes (nvfp4_comm *c, const char *what,
                                           const void *send, size_t n, void *recv) {
  /* MPI, staged or not, counts in int (NCCL in size_t) */
  FAIL_IF(c->ctx, c->transport != NVFP4I_NCCL && n > (size_t)0x7fffffff, NVFP4_EINVAL,
          "%s: %zu bytes per rank exceed MPI's int count (2^31-1)", what, n);
  if (c->transport != NVFP4I_MPI) {
#ifdef HAVE_CUDA
    return nvfp4i_cuda_all_gather_bytes(c, send, n, recv);
#else
    return nvfp4i_fail(c->ctx, NVFP4_ENOTSUP, "%s: device transport without CUDA", what);
#endif
  }
  MPI_CHECK(c->ctx, MPI_Allgather(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, c->mpi));
  return NVFP4_OK;
}


nvfp4_status nvfp4i_comm_all_gather_host (nvfp4_comm *c, const void *send,
                                          size_t n, void *recv) {
  FAIL_IF(c->ctx, n > (size_t)0x7fffffff, NVFP4_EINVAL,
          "all_gather_host: %zu bytes per rank exceed MPI's int count", n);
  MPI_CHECK(c->ctx, MPI_Allgather(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, c->mpi));
  return NVFP4_OK;
}


nvfp4_status nvfp4i_comm_staged (nvfp4_comm *c, int alltoall, const void *send, size_t sn,
                                 void *recv, size_t rn) {
  const char *what = alltoall ? "all_to_all (staged)" : "all_gather (staged)";
  nvfp4_ctx *ctx = c->ctx;
  const int count = (int)(alltoall ? sn / (size_t)c->size : sn);
  char *hs = (char *)nvfp4i_malloc(sn > 0 ? sn : 1), *hr = (char *)nvfp4i_malloc(rn > 0 ? rn : 1);
  nvfp4_status st = NVFP4_OK;
  int rc, f = nvfp4i_comm_take_fault();
  if (hs == NULL || hr == NULL)
    st = nvfp4i_fail(ctx, NVFP4_ENOMEM, "%s: cannot allocate the %zu bytes of host memory "
                     "to stage the exchange", what, sn + rn);
  else if (f != 0 && f != 3)
    st = nvfp4i_fail(ctx, NVFP4_ECUDA, "%s: the device -> host copy failed: injected "
                     "(nvfp4i_comm_fail_next)", what);
  else if (sn > 0) st = ctx->ops->to_host(ctx, hs, send, sn);
  if ((st = nvfp4i_comm_agree(c, what, st)) != NVFP4_OK) goto done;
  rc = alltoall ? MPI_Alltoall(hs, count, MPI_BYTE, hr, count, MPI_BYTE, c->mpi)
                : MPI_Allgather(hs, count, MPI_BYTE, hr, count, MPI_BYTE, c->mpi);
  if (rc != MPI_SUCCESS) st = mpi_fail(ctx, rc, alltoall ? "MPI_Alltoall (staged)" : "MPI_Allgather (staged)");
  else if (f == 3)
    st = nvfp4i_fail(ctx, NVFP4_ECUDA, "%s: the host -> device copy failed: injected "
                     "(nvfp4i_comm_fail_next)", what);
  else if (rn > 0) st = ctx->ops->from_host(ctx, recv, hr, rn);
  st = nvfp4i_comm_agree(c, what, st);
done:
  free(hs);
  free(hr);
  return st;
}


nvfp4_status nvfp4i_comm_all_to_all_bytes (nvfp4_comm *c, const char *what, const void *send,
                                           size_t n, void *recv) {
  FAIL_IF(c->ctx, n > (size_t)0x7fffffff, NVFP4_EINVAL,
          "%s: %zu bytes per rank pair exceed MPI's int count (2^31-1)", what, n);
  /* device buffers: through host memory with the backend's own copies (an
  ** NCCL path, ncclSend/ncclRecv in a group, could be slotted in here) */
  if (c->transport != NVFP4I_MPI)
    return n == 0 ? NVFP4_OK : nvfp4i_comm_staged(c, 1, send, n * (size_t)c->size, recv,
                                                  n * (size_t)c->size);
  MPI_CHECK(c->ctx, MPI_Alltoall(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, c->mpi));
  return NVFP4_OK;
}
