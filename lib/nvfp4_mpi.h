/*
** nvfp4_mpi.h -- create communicators from MPI.  Kept apart from nvfp4.h so
** that nvfp4.h stays free of MPI types.
*/
#ifndef NVFP4_MPI_H
#define NVFP4_MPI_H

/* C++: Open MPI 4's mpi.h also pulls in MPI's C++ bindings (removed from the
** standard in MPI-3.0), whose symbols are in libmpi_cxx, which neither
** `pkg-config --libs ompi-c` nor nvfp4.pc links: a C++ program built with
** nvfp4.pc's flags failed to link (undefined MPI::Comm::Comm()).  nvfp4 uses
** the C API only, so they are skipped (MPICH_SKIP_MPICXX: MPICH's name for
** the switch); a program that wants them includes <mpi.h> before this header
** and links mpi_cxx itself. */
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
# define OMPI_SKIP_MPICXX 1
#endif
#if defined(__cplusplus) && !defined(MPICH_SKIP_MPICXX)
# define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include "nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator over mc (borrowed: the caller keeps mc and frees it after
** nvfp4_comm_destroy; *out is the caller's).  With the CUDA backend, NCCL is
** used when every rank has its own GPU, otherwise, and whenever NCCL's
** set-up fails on some rank or $NVFP4_TRANSPORT=mpi-staged, device buffers
** are staged through host memory on every rank (nvfp4_comm_transport says
** which); $NVFP4_TRANSPORT=nccl tries NCCL even where the GPUs look shared
** (ranks whose values differ take staging if one asks for it).  Sets
** MPI_ERRORS_RETURN on mc, so that MPI errors come back as statuses instead
** of aborting.  Collective over mc with CUDA, where the ranks agree first:
** a rank failing (NULL out, ENOMEM) keeps its error and its peers get EPEER
** naming it; MPI_COMM_NULL is refused at once (that rank is in no
** communicator to tell the others through).  With the CPU backend each
** rank answers for itself.  Errors: EINVAL (NULL out, MPI_COMM_NULL, MPI
** not initialized or already finalized (nothing is called on mc then); with
** CUDA a $NVFP4_NCCL_TIMEOUT that is no number of seconds > 0, at most 1e9,
** or a $NVFP4_TRANSPORT other than auto, nccl and mpi-staged),
** ENOMEM, EPEER, EMPI (CUDA; a failed call leaves mc's error handler as it
** was).  A NULL ctx is EINVAL at once and cannot tell its peers (with CUDA
** they wait in the agreement).  sp-linear-and-gather.md §0 (the TP group). */
nvfp4_status nvfp4_comm_create_mpi (nvfp4_ctx *ctx, MPI_Comm mc,
                                    nvfp4_comm **out);
/* The MPI communicator a comm runs over (owned by the comm for split ones);
** MPI_COMM_NULL for NULL. */
MPI_Comm     nvfp4_comm_mpi (const nvfp4_comm *c);
/* Collective over c: the agreement that every collective of the library
** starts with, for a caller's own collectives over nvfp4_comm_mpi(c) (the
** nvfp4-lua binding's host-value ones start with it).  what names the call
** (compared by 62 bits of a 64-bit hash of the whole name, so two names
** collide with a chance of about 2^-62; shown to 47 bytes; the library's own
** collectives use theirs, "comm_barrier", "all_gather", "all_gather_plain",
** "reduce_scatter", "all_reduce_sum", "split", "quantize", "linear_create",
** "rel_error", "comm_all_reduce_max_f32" and the like: a caller's call of
** the same name pairs with them); local is this rank's status so far
** (its message already in nvfp4_last_error).  Returns NVFP4_OK when every
** rank of c is in a call of that name and every local is NVFP4_OK.
** Otherwise, on every rank alike: EMISMATCH "<what>: the ranks are in
** different calls on this comm: rank r in X, rank 0 in Y" when the names
** differ (a library collective on c meets this one: every agreement starts
** with the same MPI call); else, where some local failed, local on a
** failing rank and EPEER "<what>: rank r failed (<status>)" on the others
** (r the lowest failing rank); EUSAGE where c's NCCL communicator was
** aborted (nvfp4.h's conventions) or c was destroyed while a layer holds
** it (nvfp4_comm_destroy).  A NULL what is EINVAL on that rank and
** EPEER on its peers (it still takes part); a NULL c is EINVAL at once (no
** communicator to take part in).  EMPI.  Allocates nothing.  No spec section. */
nvfp4_status nvfp4_comm_agree (nvfp4_comm *c, const char *what, nvfp4_status local);
/* Process-wide: fn(c, 1, ud) right before this rank waits for its peers
** in the agreement that every collective on c starts with (the library's
** and nvfp4_comm_agree: where a rank waits for a peer that never comes),
** fn(c, 0, ud) right after, on the calling thread.  fn may make MPI calls
** (not on c), must not call the library, and may end the process (nvfp4-lua
** ends the job there when a peer that left the case is a rank of c).
** NULL: none.  Set it before any collective runs (not thread-safe).  c is
** borrowed for the call (in nvfp4_comm_create_mpi and nvfp4_comm_split a
** temporary describing the communicator being made: its rank, size and
** nvfp4_comm_mpi only, not to be kept); ud is the caller's, passed through.  Returns
** nothing and cannot fail.  No spec section (the library's own
** agreement). */
typedef void (*nvfp4_wait_fn) (nvfp4_comm *c, int entering, void *ud);
void nvfp4_set_wait_callback (nvfp4_wait_fn fn, void *ud);

#ifdef __cplusplus
}
#endif
#endif
