/*
** comm_int.h -- the communicator structure, shared by lib/comm.c,
** lib/collectives.c, lib/gather.c and the CUDA backend's transports.
*/
#ifndef NVFP4_COMM_INT_H
#define NVFP4_COMM_INT_H

#include <mpi.h>
#include "nvfp4_int.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvfp4i_transport {
  NVFP4I_MPI = 0,        /* host buffers straight through MPI */
  NVFP4I_MPI_STAGED,     /* device buffers copied through host memory */
  NVFP4I_NCCL            /* device buffers through NCCL */
} nvfp4i_transport;

struct nvfp4_comm {
  nvfp4_ctx *ctx;
  MPI_Comm mpi;          /* borrowed (world) or owned (split) */
  int owns_mpi;
  int rank, size;
  nvfp4i_transport transport;
  void *nccl;            /* ncclComm_t when transport == NVFP4I_NCCL */
  int users;             /* layers borrowing it (nvfp4i_comm_use) */
  int closing;           /* nvfp4_comm_destroy came while users > 0 */
  int in_layer;          /* a layer's step runs on it: it may use c when closing */
  /* This process's number for the comm (never reused), and the count of
  ** the amax reductions done over it (a quantize with amax_group; the
  ** same on every rank: each is collective): a tensor whose amax came from
  ** reduction n over this comm carries (serial, n), and shards that all
  ** carry the same n hold the same amax without comparing it.  Only where
  ** the reductions run on a channel of this comm alone
  ** (nvfp4i_comm_own_channel): two comms over one borrowed MPI communicator
  ** used in different orders on different ranks would pair one comm's
  ** reduction with the other's there, and their counts would lie. */
  uint64_t serial, nreduce;
  /* The Linear layers made over this comm so far (linear_create is
  ** collective, so the same on every rank): a layer's number, which its
  ** steps' agreements carry (nvfp4i_comm_agree_layer). */
  int layers;
  /* A device collective that failed on this rank after the ranks agreed
  ** (kernels/cuda_comm.cu, "A failure after the agreement"): */
  double timeout_s;      /* longest wait on the ctx's stream ($NVFP4_NCCL_TIMEOUT) */
  int want;              /* this rank's $NVFP4_TRANSPORT (NVFP4I_WANT_*), CUDA ctx */
  int aborted;           /* NCCL communicator aborted: every later collective on c fails */
  char aborted_why[256]; /* why, for those failures' messages */
  int in_group, group_failed;  /* an NCCL group is open; a call in it failed */
  MPI_Comm notify;       /* NCCL only: a dup of mpi for failure notes */
  uint64_t nccl_tag;     /* NCCL only: a hash of its unique id, the same on every rank (notes carry it) */
  void *last_op;         /* NCCL only: cudaEvent_t recorded after its last collective queued */
  void *first_op;        /* NCCL only: cudaEvent_t recorded before its oldest unfinished one */
  double stuck_since;    /* when a wait first saw that one started and unfinished (0: not) */
  void *notes;           /* CUDA ctx, size > 1: the block of this rank's failure note and its
                            MPI_Request per peer (nvfp4i_cuda_notes_bytes), had with the comm so
                            that an NCCL abort allocates nothing; comm_free frees it */
  int notes_sent;        /* NCCL only: the abort sent it (its requests may be in flight) */
  nvfp4_comm *nccl_next; /* the ctx's NCCL comms (nvfp4i_cuda.nccl_comms) */
};

/* The status a collective on c starts from: local, or EUSAGE when c's NCCL
** communicator was aborted (a device collective failed on some rank after
** the ranks had agreed: kernels/cuda_comm.cu). */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_usable (nvfp4_comm *c, const char *what,
                                             nvfp4_status local);

/* Testing only: after `skip` more, the next device collective of this
** process (an NCCL call, or the staged path's device -> host copy) fails as
** if the call had, after the ranks agreed.  mode 1: handled as a real
** failure (NCCL: the communicator is aborted and the peers are told); mode
** 2: silently, like a rank that never joins (NCCL: no abort, no notes);
** mode 3: a staged collective's copy back to the device fails, after its
** MPI call (NCCL: as mode 1); mode 4: not a collective but the next NCCL
** set-up of a comm (after `skip` more set-ups; kernels/cuda_comm.cu,
** nvfp4i_cuda_comm_setup) fails on this rank before NCCL is called, as a
** device unusable there would.  Mode 0 clears it.  Not thread-safe (a
** test's knob). */
NVFP4I_FUNC void nvfp4i_comm_fail_next (int mode, int skip);
/* The mode set by nvfp4i_comm_fail_next, cleared (the device transports'
** collectives; never mode 4, which stays armed for a set-up). */
NVFP4I_FUNC int nvfp4i_comm_take_fault (void);
/* 1 when mode 4 is armed and due (then cleared): an NCCL set-up's fault. */
NVFP4I_FUNC int nvfp4i_comm_take_setup_fault (void);

/* The transport asked for by $NVFP4_TRANSPORT (read when a comm of a CUDA
** context is made; nvfp4i_cuda_comm_setup takes the largest of the ranks'
** wishes, so staging wins): */
enum {
  NVFP4I_WANT_AUTO = 0,  /* unset, empty or "auto": NCCL where every rank has its own GPU */
  NVFP4I_WANT_NCCL,      /* "nccl": NCCL tried even where the GPUs look shared */
  NVFP4I_WANT_STAGED     /* "mpi-staged": never NCCL */
};

/* 1 when c's reductions pair up on a channel no other comm uses: its own
** NCCL communicator, or an MPI communicator it owns (a split's). */
static inline int nvfp4i_comm_own_channel (const nvfp4_comm *c) {
  return c->transport == NVFP4I_NCCL || c->owns_mpi;
}

/* A layer borrows c (use) and gives it back (unuse): a comm destroyed
** while borrowed is freed when the last borrower gives it back. */
NVFP4I_FUNC void nvfp4i_comm_use (nvfp4_comm *c);
NVFP4I_FUNC void nvfp4i_comm_unuse (nvfp4_comm *c);

/* Byte all-gather in rank order: recv holds size * n bytes.  Buffers are in
** the ctx's memory; the transport decides how they move.  what: the public
** call, for messages. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_all_gather_bytes (nvfp4_comm *c, const char *what,
                                                       const void *send,
                                                       size_t n, void *recv);

/* Coalesce the device collectives issued between start and end into one
** NCCL group (no-op on the MPI and staged transports).  Every collective
** of the group must be issued by every rank in the same order. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_group_start (nvfp4_comm *c);
NVFP4I_FUNC nvfp4_status nvfp4i_comm_group_end (nvfp4_comm *c);

#ifdef HAVE_CUDA
/* kernels/cuda_comm.cu: transport choice + NCCL setup (collective), NCCL
** teardown, NCCL group open/close, the float MAX all-reduce of a device
** buffer over NCCL (nvfp4i_comm_max_f32_buf). */
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_comm_setup (nvfp4_comm *c);
NVFP4I_FUNC void nvfp4i_cuda_comm_fini (nvfp4_comm *c);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_comm_group (nvfp4_comm *c, int start);
NVFP4I_FUNC nvfp4_status nvfp4i_cuda_all_reduce_max_f32 (nvfp4_comm *c, float *buf, int n);
/* The bytes of a comm's failure-note block (c->notes) for a comm of `size`
** ranks: 0 in a build without NCCL (no note is ever sent). */
NVFP4I_FUNC size_t nvfp4i_cuda_notes_bytes (int size);
#endif

/* A byte collective of device buffers staged through host memory (the
** staged transport's all-gather, kernels/cuda_comm.cu; the all-to-all of
** every device transport): send (sn bytes) to the host, MPI_Allgather of sn
** bytes per rank or (alltoall) MPI_Alltoall of sn / size per rank pair, the
** rn bytes received back to recv.  The ranks agree before the MPI call (a
** rank whose staging failed takes no part in it: its peers get EPEER instead
** of waiting there) and again after the copy back (a caller issuing
** several, the NVFP4 gather's four, stops after the same one on every
** rank).  ENOMEM, EMPI, the backend's copy errors, EPEER. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_staged (nvfp4_comm *c, int alltoall, const void *send,
                                              size_t sn, void *recv, size_t rn);

/* Host-memory byte all-gather in rank order (always MPI, whatever the
** transport): for small descriptors, statuses and metadata. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_all_gather_host (nvfp4_comm *c,
                                                      const void *send,
                                                      size_t n, void *recv);
/* Byte all-to-all: block r (n bytes at send + r*n) goes to rank r, and
** rank r's block for this rank lands at recv + r*n.  Buffers in the ctx's
** memory; a device transport stages through host memory for now.  what: the
** public call, for messages (EINVAL when n is past MPI's int count). */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_all_to_all_bytes (nvfp4_comm *c, const char *what,
                                                       const void *send,
                                                       size_t n, void *recv);

/* Flags of the metadata descriptor that collectives compare across ranks
** (lib/collectives.c).  ROW/COL: usages wanted; HAVE_*: usages present in
** an FP4 input; the rest: how it is (to be) quantized. */
enum {
  NVFP4I_META_ROW = 1, NVFP4I_META_COL = 2, NVFP4I_META_HAVE_ROW = 4,
  NVFP4I_META_HAVE_COL = 8, NVFP4I_META_ND = 16, NVFP4I_META_RHT = 32,
  NVFP4I_META_SR = 64, NVFP4I_META_TWO_D = 128, NVFP4I_META_FO6 = 256,
  NVFP4I_META_EMAX256 = 512, NVFP4I_META_RHT_NOSIGNS = 1024, NVFP4I_META_FO6_MSE = 2048,
  NVFP4I_META_FROM_BF16 = 4096    /* an FP4 shard stands for bf16 (nvfp4_tensor_nominal_dtype) */
};

/* Collective, before any data collective: every rank contributes its local
** status (an argument error found without communicating), shape, dtype and
** flags.  Returns OK when all ranks are OK and agree; otherwise the same
** outcome on every rank: EMISMATCH "<what>: ranks disagree: rank r has
** [..] dt (flags), rank 0 has [..] dt (flags)" naming the first rank that
** differs from rank 0; or, when some rank failed locally, that rank keeps
** its own status and message and the others get EPEER naming it. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_check_same (nvfp4_comm *c,
                                                 const char *what,
                                                 nvfp4_status local,
                                                 nvfp4_shape shape,
                                                 nvfp4_dtype dt, int flags);
/* nvfp4i_comm_check_same in the same single round, plus two things, checked
** in this order after the metadata: amax (a host pair, or NULL: not
** compared; every rank that passes one must pass one when the metadata
** agree): EMISMATCH "<what>: rank r's rowwise|columnwise amax A differs
** from rank 0's B: NVFP4 shards must share one global scale (..)" for the
** first rank whose pair differs bitwise from rank 0's; then post, a local
** status of work done before the round (allocation), as nvfp4i_comm_agree
** would give it after the round.  The rank whose local status failed keeps
** its own message; its peers' ctx messages are overwritten.
** Instead of a pair, a rank may pass amax_seq: its amaxes came from
** reduction number amax_seq over c (nvfp4_comm.serial; only where c has a
** channel of its own, nvfp4i_comm_own_channel), from which no other rank's
** with the same number can differ.  When every rank passes the same number nothing
** is compared; when they differ, or some pass values, *amax_round is set
** (on every rank alike, and only where the call returns OK): the caller
** then reads its pair and calls nvfp4i_comm_check_amax.  amax_round may be
** NULL where amax_seq is 0 on every rank. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_check_meta (nvfp4_comm *c,
                                                 const char *what,
                                                 nvfp4_status local,
                                                 nvfp4_shape shape,
                                                 nvfp4_dtype dt, int flags,
                                                 const float *amax,
                                                 uint64_t amax_seq, int *amax_round,
                                                 nvfp4_status post);
/* The second round of nvfp4i_comm_check_meta: every rank's amax pair (local:
** the status of reading it; on failure the pair is not read) compared
** bitwise with rank 0's, EMISMATCH as there; a rank that failed keeps its
** status, the others get EPEER naming it. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_check_amax (nvfp4_comm *c, const char *what,
                                                 nvfp4_status local, const float amax[2]);
/* Collective: agree on a local status after local work (allocation, local
** quantize).  Local failure: returned as is; a peer's: EPEER naming it. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_agree (nvfp4_comm *c, const char *what,
                                            nvfp4_status local);
/* The same for a step of a Linear layer: layer is the layer's number on c
** (nvfp4_comm.layers when it was made, 1 or more), so that ranks in the same
** step of two layers that share the group ("linear_forward" of layer #1
** and of layer #2) are in different calls: EMISMATCH naming both. */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_agree_layer (nvfp4_comm *c, const char *what,
                                                  int layer, nvfp4_status local);
/* MPI_MAX of n host floats in place, no agreement (the caller's ranks have
** agreed already: quantize with an amax group). */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_max_f32 (nvfp4_comm *c, float *v, int n);
/* The same on n floats in the ctx's memory, on the comm's transport: NCCL's
** all-reduce of a device buffer on the ctx's stream (enqueued only), or MPI
** in place on host memory (CPU ctx).  ENCCL, EMPI with the failing call;
** EUSAGE on the staged transport (its callers read back first, so that the
** read's errors are agreed before the collective). */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_max_f32_buf (nvfp4_comm *c, float *buf, int n);
/* Collective, after the ranks have agreed that their arguments pass: n
** (at most 32) values that every rank must give alike.  EMISMATCH on every
** rank "<what>: the ranks disagree on <field>: rank R has <value>, rank 0
** has <value><hint>" for the first i that differs, R the lowest rank whose
** value differs from rank 0's; names[i] is "field", or "field|name0|name1.."
** to print value k as name_k.  Two small reductions, no allocation (three
** more collectives when they differ). */
NVFP4I_FUNC nvfp4_status nvfp4i_comm_same_i64 (nvfp4_comm *c, const char *what,
                                               const int64_t *v, const char *const *names,
                                               int n, const char *hint);

#ifdef __cplusplus
}
#endif

#endif
