/*
** cuda_comm.cu -- the device transports behind lib/comm.c's byte
** collectives and its float MAX all-reduce of a device buffer (the amax
** of a quantize with amax_group), for communicators of a CUDA context
** (design.md decision 7):
**  - "nccl" when every rank of the communicator has its own GPU (NCCL
**    refuses two ranks on one GPU): bootstrap as nccl-tests does, the
**    unique id made on rank 0 and broadcast with MPI, one ncclComm_t per
**    nvfp4_comm (so one per tensor-parallel group after a split);
**    collectives are queued on the context's stream;
**  - "mpi-staged" otherwise (ranks sharing a GPU, or no NCCL in the
**    build): device -> host copy, the MPI collective on host memory (Open
**    MPI here is not CUDA-aware), host -> device copy.
** The choice is made once per communicator from an MPI all-gather of the
** ranks' GPU PCI ids, so every rank makes the same one.  $NVFP4_TRANSPORT
** (read by lib/comm.c) = "mpi-staged" forces the staged path, "nccl" tries
** NCCL even where the GPUs look shared (NCCL then refuses, and the comm is
** staged); where the ranks' values differ, staging wins, then "nccl".
** When NCCL cannot be set up on some rank, every rank falls back to the
** staged path; a rank that cannot take part (its device, or the injected
** fault: nvfp4i_comm_fail_next mode 4) says so in an agreement before any
** NCCL call, since a rank missing from ncclCommInitRank leaves the others
** inside it.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "config.h"
#include "cuda_int.h"
#include "comm_int.h"
#ifdef HAVE_NCCL
#include <nccl.h>
#endif


#ifdef HAVE_NCCL
static nvfp4_status nccl_fail (nvfp4_ctx *ctx, ncclResult_t r, const char *call) {
  return nvfp4i_fail(ctx, NVFP4_ENCCL, "%s failed: %s (%s)", call,
                     ncclGetErrorString(r), ncclGetLastError(NULL));
}

#define NCCL_CHECK(ctx, call)  \
  do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) return nccl_fail((ctx), r_, #call); } while (0)


/* ---- A failure after the agreement ------------------------------------
** The ranks agree on their arguments before any NCCL call, but the call
** can still fail on one rank after its peers queued theirs (a sticky CUDA
** error, NCCL out of memory): the peers' kernels would wait for it forever,
** and so would every later wait on their streams.  So:
**  - the rank whose call failed aborts its NCCL communicator (its own
**    kernels of the call, if any, return) and sends every peer a note on
**    c->notify, a dup of c's MPI communicator made with the NCCL one;
**  - every wait on a context's stream (nvfp4i_cuda_wait: readbacks,
**    nvfp4_ctx_sync, large uploads, a comm's set-up and teardown) that lasts
**    more than a millisecond looks at each NCCL comm of the context once a
**    millisecond: a note, or an asynchronous error (ncclCommGetAsyncError),
**    aborts that comm, and so does a collective of it that stays started
**    and unfinished for its timeout ($NVFP4_NCCL_TIMEOUT, 600 s by default
**    as in PyTorch's process groups: a peer that never called; nccl_watch);
**    the kernels waiting on an aborted communicator return, and the wait
**    returns EPEER (a note, the timeout) or ENCCL (an asynchronous error)
**    once the stream has drained;
**  - an aborted comm fails every later collective with EUSAGE on the ranks
**    that know of it (nvfp4i_comm_usable), and their peers get EPEER in the
**    agreement.
** A peer must reach such a wait: a CUDA call that blocks on the stream
** first never returns.  So a readback to pageable memory waits first
** (cuda_to_host), and the kernel files' modules are loaded with a context's
** first NCCL comm: under CUDA's lazy loading (its default) a module's first
** launch waits for the whole device to go idle, and hung behind a stuck
** collective (seen on two H200s: a peer's first quantize after the failed
** all-reduce, in cuLaunchKernel).  Loading is per module, i.e. per kernel
** file: measured on an H200 (CUDA 13) with a kernel spinning on one
** stream, a module's first launch waited for it, while a kernel or
** template instance never launched before, in a module that
** cudaFuncGetAttributes had loaded, did not.  cuBLAS loads its own kernels lazily too:
** a GEMM variant used for the first time behind a stuck collective would
** hang the same way (CUDA_MODULE_LOADING=EAGER avoids it, at the cost of
** loading all of cuBLAS at start-up). */

#define NOTE_TAG 4242

typedef struct note {
  uint64_t tag;                /* the comm's nccl_tag: another comm's note is dropped */
  int32_t rank, status;
  char why[200];
} note;

static double now_s (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


extern "C" size_t nvfp4i_cuda_notes_bytes (int size) {
  return sizeof(note) + sizeof(MPI_Request) * (size_t)(size > 0 ? size : 0);
}


/* Abort c's NCCL communicator (once); with tell, send every peer a note
** (st, why) first, from the block the comm was made with (c->notes: the
** abort allocates nothing, so no peer is left to its timeout for want of
** memory here); the note and its requests stay there until the comm's
** teardown. */
static void nccl_abort (nvfp4_comm *c, int tell, nvfp4_status st, const char *why) {
  int fin = 0;
  if (c->nccl == NULL) return;
  MPI_Finalized(&fin);
  if (tell && !fin && c->notify != MPI_COMM_NULL && c->notes != NULL && !c->notes_sent) {
    char *blk = (char *)c->notes;
    note *n = (note *)blk;
    MPI_Request *rq = (MPI_Request *)(blk + sizeof(note));
    int r;
    memset(n, 0, sizeof *n);
    n->tag = c->nccl_tag;
    n->rank = c->rank;
    n->status = (int32_t)st;
    snprintf(n->why, sizeof n->why, "%s", why);
    for (r = 0; r < c->size; r++) {
      rq[r] = MPI_REQUEST_NULL;
      if (r != c->rank &&
          MPI_Isend(n, (int)sizeof *n, MPI_BYTE, r, NOTE_TAG, c->notify, &rq[r]) != MPI_SUCCESS)
        rq[r] = MPI_REQUEST_NULL;
    }
    c->notes_sent = 1;
  }
  ncclCommAbort((ncclComm_t)c->nccl);
  c->nccl = NULL;
  c->aborted = 1;
  snprintf(c->aborted_why, sizeof c->aborted_why, "%s", why);
}


/* Whether c's oldest unfinished collective has started: its "before" event
** (first_op) complete, its last one's "after" event (last_op) not.  A
** collective queued behind another comm's stuck one, or behind a long
** kernel, has not. */
static int nccl_running (const nvfp4_comm *c) {
  return c->first_op != NULL && c->last_op != NULL &&
         cudaEventQuery((cudaEvent_t)c->last_op) == cudaErrorNotReady &&
         cudaEventQuery((cudaEvent_t)c->first_op) == cudaSuccess;
}


/* Before a collective of c is queued: its "before" event, unless an earlier
** collective of c is still unfinished (that one's clock keeps running). */
static void nccl_before (nvfp4_comm *c) {
  if (c->first_op == NULL || c->last_op == NULL) return;
  if (cudaEventQuery((cudaEvent_t)c->last_op) == cudaErrorNotReady) return;
  cudaGetLastError();
  cudaEventRecord((cudaEvent_t)c->first_op, nvfp4i_stream(c->ctx));
  c->stuck_since = 0.0;                        /* a new oldest one: its clock starts when seen running */
}


/* One look at c, at time `now`, during a wait on its ctx's stream.  OK, or
** the status of the abort it made; report: write the ctx's message then (a
** wait keeps the message of its first failure).  The timeout counts from
** the first look that finds c's oldest unfinished collective started
** (nccl_running): a comm queued behind another's stuck collective is left
** alone, and so is one whose collectives wait behind a long kernel.  Work
** queued between two collectives of c while the first is unfinished counts
** toward it. */
static nvfp4_status nccl_watch (nvfp4_comm *c, double now, int report) {
  ncclResult_t ae = ncclSuccess;
  char why[256];
  nvfp4_status st;
  MPI_Status ms;
  int flag = 0, fin = 0;
  note n;
  if (c->nccl == NULL) return NVFP4_OK;
  MPI_Finalized(&fin);                       /* a comm freed after MPI_Finalize: no notes */
  if (!fin && c->notify != MPI_COMM_NULL &&
      MPI_Iprobe(MPI_ANY_SOURCE, NOTE_TAG, c->notify, &flag, &ms) == MPI_SUCCESS && flag) {
    memset(&n, 0, sizeof n);
    MPI_Recv(&n, (int)sizeof n, MPI_BYTE, ms.MPI_SOURCE, NOTE_TAG, c->notify, MPI_STATUS_IGNORE);
    /* another comm's note (a guard: notify is never freed, so no later dup
    ** reuses its context id) */
    if (n.tag != c->nccl_tag) return NVFP4_OK;
    n.why[sizeof n.why - 1] = '\0';
    snprintf(why, sizeof why, "rank %d of %d failed (%s): %s", ms.MPI_SOURCE, c->size,
             nvfp4_status_string((nvfp4_status)n.status), n.why);
    st = NVFP4_EPEER;
    nccl_abort(c, 0, st, why);               /* the peers have their own notes */
  }
  else if (ncclCommGetAsyncError((ncclComm_t)c->nccl, &ae) == ncclSuccess &&
           ae != ncclSuccess && ae != ncclInProgress) {
    snprintf(why, sizeof why, "rank %d of %d: NCCL asynchronous error: %s", c->rank, c->size,
             ncclGetErrorString(ae));
    st = NVFP4_ENCCL;
    nccl_abort(c, 1, st, why);
  }
  else if (!nccl_running(c)) {
    cudaGetLastError();
    c->stuck_since = 0.0;
    return NVFP4_OK;
  }
  else if (c->stuck_since == 0.0 || now - c->stuck_since <= c->timeout_s) {
    if (c->stuck_since == 0.0) c->stuck_since = now;
    return NVFP4_OK;
  }
  else {
    snprintf(why, sizeof why, "rank %d of %d waited %.3g s on its stream (NVFP4_NCCL_TIMEOUT) "
             "with a collective queued: a peer never joined it", c->rank, c->size, c->timeout_s);
    st = NVFP4_EPEER;
    nccl_abort(c, 1, st, why);
  }
  if (!report) return st;
  return nvfp4i_fail(c->ctx, st, "wait on the stream: the comm's NCCL communicator was "
                     "aborted (%s): destroy the comm and make a new one", why);
}


/* What comes before an NCCL collective on c: the refusal of an aborted
** comm, the injected fault taken (*fault, nvfp4i_comm_fail_next), and the
** "before" event where no group is open (the group's start records it). */
static nvfp4_status nccl_pre (nvfp4_comm *c, int *fault) {
  if (c->nccl == NULL) return nvfp4i_comm_usable(c, "NCCL collective", NVFP4_OK);
  *fault = nvfp4i_comm_take_fault();
  if (!c->in_group) nccl_before(c);
  return NVFP4_OK;
}


/* A device collective's NCCL result r on c (call: its name; injected: the
** failure came from nvfp4i_comm_fail_next).  Outside a group a failure
** aborts c and tells the peers; inside one, the group's end does. */
static nvfp4_status nccl_result (nvfp4_comm *c, ncclResult_t r, const char *call, int injected) {
  nvfp4_status st;
  if (r == ncclSuccess) {
    if (!c->in_group && c->last_op != NULL)
      cudaEventRecord((cudaEvent_t)c->last_op, nvfp4i_stream(c->ctx));
    return NVFP4_OK;
  }
  st = injected ? nvfp4i_fail(c->ctx, NVFP4_ENCCL, "%s failed: injected (nvfp4i_comm_fail_next)", call)
       : nccl_fail(c->ctx, r, call);
  if (injected == 2) return st;                /* a rank that never joins: silent */
  if (c->in_group) c->group_failed = 1;
  else nccl_abort(c, 1, st, c->ctx->err);
  return st;
}
#else
extern "C" size_t nvfp4i_cuda_notes_bytes (int size) {
  (void)size;
  return 0;                                    /* no NCCL, no notes */
}
#endif


nvfp4_status nvfp4i_cuda_wait (nvfp4_ctx *ctx) {
  nvfp4i_cuda *cu = nvfp4i_cuda_of(ctx);
#ifdef HAVE_NCCL
  if (cu->nccl_comms != NULL) {
    nvfp4_status st = NVFP4_OK;
    double next = now_s() + 1e-3;
    cudaError_t e;
    while ((e = cudaStreamQuery(cu->stream)) == cudaErrorNotReady) {
      double t = now_s();
      nvfp4_comm *c;
      if (t < next) continue;
      next = t + 1e-3;
      for (c = cu->nccl_comms; c != NULL; c = c->nccl_next) {
        nvfp4_status s1 = nccl_watch(c, t, st == NVFP4_OK);
        if (st == NVFP4_OK) st = s1;
      }
    }
    if (e != cudaSuccess) return nvfp4i_cuda_fail(ctx, e, "cudaStreamQuery(stream)", __FILE__, __LINE__);
    return st;
  }
#endif
  CU_CHECK(ctx, cudaStreamSynchronize(cu->stream));
  return NVFP4_OK;
}


/* Collective over c->mpi.  1 when the ranks' GPUs (host name + PCI bus
** id) are pairwise distinct; the same verdict on every rank (a rank that
** cannot take part, out of host memory or in an MPI failure, makes it 0
** everywhere, and takes the same MPI calls as the others). */
static int own_gpus (nvfp4_comm *c) {
  enum { ID = 96 };
  char mine[ID], *all;
  int i, j, distinct, ok;
  memset(mine, 0, sizeof mine);
  if (cudaDeviceGetPCIBusId(mine, 32, nvfp4i_cuda_of(c->ctx)->device) != cudaSuccess) {
    cudaGetLastError();
    snprintf(mine, 32, "dev%d", nvfp4i_cuda_of(c->ctx)->device);
  }
  gethostname(mine + 32, ID - 33);
  all = (char *)nvfp4i_malloc((size_t)ID * (size_t)c->size);
  ok = all != NULL;
  if (MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c->mpi) != MPI_SUCCESS) ok = 0;
  distinct = ok && MPI_Allgather(mine, ID, MPI_CHAR, all, ID, MPI_CHAR, c->mpi) == MPI_SUCCESS;
  for (i = 0; i < c->size && distinct; i++)
    for (j = i + 1; j < c->size && distinct; j++)
      if (memcmp(all + (size_t)i * ID, all + (size_t)j * ID, ID) == 0) distinct = 0;
  free(all);
  if (ok && MPI_Allreduce(MPI_IN_PLACE, &distinct, 1, MPI_INT, MPI_MIN, c->mpi) != MPI_SUCCESS)
    distinct = 0;
  return distinct;
}


#ifdef HAVE_NCCL
/* FNV-1a of an NCCL unique id: the same on every rank of the comm. */
static uint64_t id_hash (const ncclUniqueId *id) {
  const unsigned char *p = (const unsigned char *)id;
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < sizeof *id; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}


/* Collective over c->mpi, on a new NCCL communicator nc: NCCL connects its
** peers lazily, in the first collective (seconds, more on a busy machine),
** which would be charged to the first gather (a case's timeout in the
** harness: a 2 s case timed out in its first all-gather under make -j check
** on two GPUs).  One all-gather of a byte per rank does it here.  1 when it
** worked on every rank; else nc is aborted (on every rank: a rank whose
** all-gather was refused leaves the others' pending, which the abort
** cancels instead of their waiting on it). */
static int nccl_warm_up (nvfp4_comm *c, ncclComm_t nc) {
  cudaStream_t s = nvfp4i_stream(c->ctx);
  unsigned char *d = NULL;
  int ok, all_ok = 0;
  ok = cudaMalloc((void **)&d, (size_t)c->size) == cudaSuccess;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);
  if (all_ok) {
    ok = ncclAllGather(d + c->rank, d, 1, ncclUint8, nc, s) == ncclSuccess;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);       /* all queued? */
    if (all_ok) {
      ok = cudaStreamSynchronize(s) == cudaSuccess;
      MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);
    }
  }
  if (!all_ok) ncclCommAbort(nc);
  if (d != NULL) cudaFree(d);
  cudaGetLastError();
  return all_ok;
}
#endif


#ifdef HAVE_NCCL
/* Once per context: the kernel files' modules (nvfp4i_cuda_load_*; a
** failure here only leaves a module to its first launch). */
static void load_modules (nvfp4i_cuda *cu) {
  if (cu->modules_loaded) return;
  cu->modules_loaded = 1;
  if (nvfp4i_cuda_load_quantize() != cudaSuccess || nvfp4i_cuda_load_dequantize() != cudaSuccess ||
      nvfp4i_cuda_load_elementwise() != cudaSuccess || nvfp4i_cuda_load_gemm() != cudaSuccess ||
      nvfp4i_cuda_load_transpose() != cudaSuccess)
    cudaGetLastError();
}
#endif


/* Collective: pick the transport of a new communicator of a CUDA ctx and
** create its NCCL communicator if NCCL is picked.  Falls back to the
** staged path (on every rank) when NCCL cannot be set up. */
extern "C" nvfp4_status nvfp4i_cuda_comm_setup (nvfp4_comm *c) {
  int want = c->want;
  c->transport = NVFP4I_MPI_STAGED;
  c->nccl = NULL;
  c->notify = MPI_COMM_NULL;
  /* the ranks' $NVFP4_TRANSPORT made one (the largest: staging wins) */
  if (c->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MAX, c->mpi) != MPI_SUCCESS)
    want = NVFP4I_WANT_STAGED;
  if (want == NVFP4I_WANT_STAGED) return NVFP4_OK;
  /* The stream may be stuck behind a failure on another NCCL comm of the
  ** ctx, and NCCL's set-up and the warm-up below would wait for it: the
  ** wait that watches those comms drains it first (a failure it finds
  ** belongs to that comm, which refuses its collectives from now on).
  ** Without NCCL comms nothing can be stuck there. */
  if (nvfp4i_cuda_of(c->ctx)->nccl_comms != NULL) (void)nvfp4i_cuda_wait(c->ctx);
#ifdef HAVE_NCCL
  if (c->size > 1 && (want == NVFP4I_WANT_NCCL || own_gpus(c))) {
    ncclUniqueId id;
    ncclComm_t nc = NULL;
    int ok, all_ok = 0;
    /* every rank able to call ncclCommInitRank (its device current, no
    ** injected fault) and rank 0's unique id made, or none calls it: a
    ** rank failing before NCCL's bootstrap would leave the others waiting
    ** for it inside ncclCommInitRank, which no note can interrupt */
    ok = cudaSetDevice(nvfp4i_cuda_of(c->ctx)->device) == cudaSuccess;
    if (!ok) cudaGetLastError();
    if (nvfp4i_comm_take_setup_fault()) ok = 0;
    if (ok && c->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi) != MPI_SUCCESS || !all_ok)
      return NVFP4_OK;
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->mpi);
    ok = ncclCommInitRank(&nc, c->size, id, c->rank) == ncclSuccess;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi);
    if (!all_ok) {
      if (ok) ncclCommAbort(nc);     /* not Destroy: it would wait for the ranks that failed */
      return NVFP4_OK;
    }
    if (!nccl_warm_up(c, nc)) return NVFP4_OK;      /* nc aborted there */
    c->nccl = nc;
    c->transport = NVFP4I_NCCL;
    /* the failure notes' channel (without it a failure is found by the
    ** timeout alone) and the ctx's list its waits look at */
    if (MPI_Comm_dup(c->mpi, &c->notify) != MPI_SUCCESS) c->notify = MPI_COMM_NULL;
    c->nccl_tag = id_hash(&id);
    if (cudaEventCreateWithFlags((cudaEvent_t *)&c->last_op, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags((cudaEvent_t *)&c->first_op, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();                      /* no timeout then: notes and NCCL's errors only */
      if (c->last_op != NULL) cudaEventDestroy((cudaEvent_t)c->last_op);
      c->last_op = c->first_op = NULL;
    }
    c->nccl_next = nvfp4i_cuda_of(c->ctx)->nccl_comms;
    nvfp4i_cuda_of(c->ctx)->nccl_comms = c;
    load_modules(nvfp4i_cuda_of(c->ctx));
  }
#endif
  return NVFP4_OK;
}


/* Does not wait for the other ranks to free theirs.  ncclCommDestroy does
** (NCCL 2.28 on two H200s: a group closed on one rank only held that rank
** until the job's timeout), so a rank closing a group alone, or Lua's
** collector freeing one at another moment on each rank, would hang it.
** The context's stream is drained first, so no operation of this rank is
** pending when the communicator is aborted (PyTorch's process groups abort
** theirs at shutdown too).  NCCL documents neither call as local: on one
** node over NVLink the abort returned at once; across nodes, where the
** proxy thread may still be sending after the kernel ended, an abort could
** cancel a send a peer waits for (not run: one node here). */
extern "C" void nvfp4i_cuda_comm_fini (nvfp4_comm *c) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    nvfp4_comm **p = &nvfp4i_cuda_of(c->ctx)->nccl_comms;
    int fin = 0, r, done = 1;
    /* a stream stuck behind a peer's failure is released here as in any wait */
    if (c->nccl != NULL) nvfp4i_cuda_wait(c->ctx);
    if (c->nccl != NULL) ncclCommAbort((ncclComm_t)c->nccl);
    c->nccl = NULL;
    if (c->last_op != NULL) cudaEventDestroy((cudaEvent_t)c->last_op);
    if (c->first_op != NULL) cudaEventDestroy((cudaEvent_t)c->first_op);
    c->last_op = c->first_op = NULL;
    while (*p != NULL && *p != c) p = &(*p)->nccl_next;
    if (*p == c) *p = c->nccl_next;
    MPI_Finalized(&fin);
    if (!fin && c->notify != MPI_COMM_NULL) {
      MPI_Status ms;
      int flag = 1;
      note n;
      while (MPI_Iprobe(MPI_ANY_SOURCE, NOTE_TAG, c->notify, &flag, &ms) == MPI_SUCCESS && flag)
        MPI_Recv(&n, (int)sizeof n, MPI_BYTE, ms.MPI_SOURCE, NOTE_TAG, c->notify, MPI_STATUS_IGNORE);
      if (c->notes_sent) {
        /* a note not yet delivered is left to MPI, with its block (a few
        ** hundred bytes, once per aborted comm; else comm_free frees it) */
        MPI_Request *rq = (MPI_Request *)((char *)c->notes + sizeof(note));
        for (r = 0; r < c->size; r++) {
          if (rq[r] == MPI_REQUEST_NULL) continue;
          flag = 0;
          MPI_Test(&rq[r], &flag, MPI_STATUS_IGNORE);
          if (!flag) {
            MPI_Request_free(&rq[r]);
            done = 0;
          }
        }
        if (!done) c->notes = NULL;
      }
      /* Not freed: a peer may still send a note on it after this rank has
      ** destroyed the comm (its own timeout or NCCL error), and Open MPI
      ** hands a freed communicator's messages to the next one that reuses
      ** its context id, a user's among them.  MPI_Finalize frees it (one
      ** communicator per NCCL comm made). */
      c->notify = MPI_COMM_NULL;
    }
  }
#endif
  c->nccl = NULL;
}


/* Open (start != 0) or close an NCCL group; no-op for the staged path. */
extern "C" nvfp4_status nvfp4i_cuda_comm_group (nvfp4_comm *c, int start) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    ncclResult_t r;
    int failed = c->group_failed;
    if (start) {
      nccl_before(c);
      NCCL_CHECK(c->ctx, ncclGroupStart());
      c->in_group = 1;
      c->group_failed = 0;
      return NVFP4_OK;
    }
    r = ncclGroupEnd();
    c->in_group = 0;
    c->group_failed = 0;
    /* a call in the group failed: the caller has its status and message
    ** (NCCL returns that call's error again here) */
    if (failed) {
      nccl_abort(c, 1, NVFP4_ENCCL, c->ctx->err);
      return NVFP4_ENCCL;
    }
    return nccl_result(c, r, "ncclGroupEnd()", 0);
  }
#endif
  return NVFP4_OK;
}


/* n fits MPI's int: lib/comm.c checked it, naming the call */
static nvfp4_status staged_all_gather (nvfp4_comm *c, const void *send, size_t n,
                                       void *recv) {
  return nvfp4i_comm_staged(c, 0, send, n, recv, n * (size_t)c->size);
}


/* MAX all-reduce of n floats in place in a device buffer over NCCL, on the
** ctx's stream (lib/comm.c dispatch, NCCL transport only). */
extern "C" nvfp4_status nvfp4i_cuda_all_reduce_max_f32 (nvfp4_comm *c, float *buf, int n) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    int f;
    if (n == 0) return NVFP4_OK;
    CHECK(nccl_pre(c, &f));
    return nccl_result(c, f ? ncclInternalError
                            : ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, ncclMax,
                                            (ncclComm_t)c->nccl, nvfp4i_stream(c->ctx)),
                       "ncclAllReduce(amax, max)", f);
  }
#endif
  (void)buf; (void)n;
  return nvfp4i_fail(c->ctx, NVFP4_ENOTSUP, "all-reduce: not an NCCL communicator");
}


/* Byte all-gather in rank order of device buffers (lib/comm.c dispatch). */
extern "C" nvfp4_status nvfp4i_cuda_all_gather_bytes (nvfp4_comm *c, const void *send,
                                                      size_t n, void *recv) {
#ifdef HAVE_NCCL
  if (c->transport == NVFP4I_NCCL) {
    int f;
    if (n == 0) return NVFP4_OK;
    CHECK(nccl_pre(c, &f));
    return nccl_result(c, f ? ncclInternalError
                            : ncclAllGather(send, recv, n, ncclUint8, (ncclComm_t)c->nccl,
                                            nvfp4i_stream(c->ctx)),
                       "ncclAllGather", f);
  }
#endif
  return staged_all_gather(c, send, n, recv);
}
