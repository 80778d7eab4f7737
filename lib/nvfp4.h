/*
** nvfp4.h -- NVFP4 quantization (E2M1 values, one E4M3 scale per 16
** elements, one FP32 amax per tensor and direction) with a CPU reference
** backend, a CUDA backend, and collectives over MPI or NCCL.
**
** Conventions for every function below:
**  - it returns a status; NVFP4_OK is 0.  On failure the reason (what, which
**    value, which rule) is kept in the context: nvfp4_last_error(ctx).
**    A NULL context, or a NULL object that holds it (the tensor, comm,
**    handle or layer the call is on), gives a bare NVFP4_EINVAL: there is
**    nowhere to keep a reason.  A NULL **out argument (where the context
**    is known) gives NVFP4_EINVAL "<call>: <name> is NULL" ("quantize: out
**    is NULL", "linear_forward: y is NULL"), and a NULL input
**    tensor EINVAL naming it, whether or not the function lists them,
**    except where a function says an output may be NULL (nvfp4_handle_wait's
**    out, nvfp4_linear_backward's dw and db).
**    Nothing aborts and a failed call leaves
**    its inputs untouched and frees whatever it had allocated.  Besides
**    the errors each function lists: a tensor (or comm) of another context
**    gives NVFP4_EUSAGE, and on a CUDA context a failed CUDA, cuBLAS or
**    NCCL call gives NVFP4_ECUDA, ECUBLAS or ENCCL naming the call (ENOMEM,
**    naming it too, where CUDA or cuBLAS ran out of device memory; an
**    allocation refused for another reason, such as an earlier kernel's
**    fault, is ECUDA with CUDA's message).
**  - outputs are new objects returned through the last (**out) argument;
**    the caller owns them and frees them with the matching _destroy, which
**    accepts NULL.  Every output pointer a call is given is set to NULL
**    first, so after a failure (a NULL context included) it is NULL.
**    Inputs stay as they were: a call changes only the object it is on (a
**    layer's forward, backward and set_*, a gather handle's wait and take,
**    as each says) and, where it reads a tensor's amax from the device,
**    that tensor's cached host copy of it (so two threads must not read
**    one tensor's amax at once; see nvfp4_tensor_amax).
**  - functions that return a value rather than a status (accessors,
**    _destroy, names, the shape helpers) cannot fail and follow no spec
**    section unless they name one; each says what NULL (or a value outside
**    its enum) gives.
**  - shapes are row-major, dims 0-based; M = product of all leading dims,
**    K = last dim (spec/nvfp4-numerics.md "Notation").
**  - calls are queued on the context's stream and "return when enqueued"; on
**    the CPU backend that means done.  Data reaches the host only through the
**    *_read / *_to_host functions and nvfp4_tensor_amax, which synchronize,
**    and where a call needs a value on the host: a quantize with
**    amax_group on a staged transport (the reduction through the host; over
**    NCCL it stays on the device), and the first host use of an amax that a
**    quantize computed on the device (nvfp4_gemm_ref64,
**    nvfp4_dequantize_columnwise, the NVFP4 gather of
**    FP4 shards unless they all come from one quantize with amax_group
**    over that communicator (see nvfp4_all_gather), nvfp4_tensor_equal;
**    nvfp4_gemm forms its alpha from it on the device).  On CUDA,
**    nvfp4_tensor_from_host waits too when its source is page-locked or
**    managed memory (so the caller may reuse it on return).
**  - a collective's ranks agree on their arguments and set-up before moving
**    data, so a bad argument on one rank gives the others EPEER and none
**    waits.  They agree on the call too: ranks in different calls on one
**    comm (one skipped a collective, or called another) get EMISMATCH
**    "the ranks are in different calls on this comm: rank r in X, rank 0
**    in Y" (every agreement starts with the same MPI call, so any two of
**    the library's collectives meet there, nvfp4_comm_barrier included, and
**    so does a caller's own that starts with nvfp4_comm_agree, nvfp4_mpi.h).
**    A rank that passes no comm (NULL) or another one, or makes no call,
**    cannot tell its peers: they wait.  A device collective that fails on
**    one rank after that (an NCCL
**    call refused, a staged copy failed) is handled too: on the staged
**    transport the ranks agree again before the MPI call and after the
**    copy back; over NCCL the
**    failing rank aborts its communicator and tells its peers, and a peer's
**    next wait on its stream (a readback, an upload of more than 64 KiB,
**    nvfp4_ctx_sync, a comm's set-up or destroy) aborts its own and returns
**    EPEER naming the failed call (a comm's set-up and destroy return no
**    status of that wait: its reason is left in nvfp4_last_error): so every call that waits on a CUDA
**    context's stream may return EPEER or ENCCL when that context has NCCL
**    comms, besides the errors it lists.  A
**    peer that never joins is found $NVFP4_NCCL_TIMEOUT seconds (600 by
**    default) after such a wait first sees that comm's collective started
**    and unfinished: EPEER; an asynchronous NCCL error: ENCCL.  A rank that aborted a comm
**    refuses every later collective on it (they all agree first) with
**    EUSAGE ("destroy the comm and make a new
**    one"); a peer that has not noticed yet gets EPEER from the agreement.
**    These waits make MPI calls (MPI_Iprobe, MPI_Recv) from the calling
**    thread, so with MPI_THREAD_FUNNELED call the library from the thread
**    that initialized MPI.  kernels/cuda_comm.cu has the details and the one
**    gap: a cuBLAS GEMM variant launched for the first time behind a stuck
**    collective waits for the device under CUDA's lazy loading
**    (CUDA_MODULE_LOADING=EAGER closes it).
**  - threads: contexts are independent.  Threads may make calls at the same
**    time when each uses its own context and the objects made on it (tensors,
**    comms, gather handles, layers); tests/unit/test_threads.c runs four
**    contexts at once (CPU ones, and CUDA ones on one GPU where there is one)
**    and compares every byte with a single-threaded run.  One context and its
**    objects are for one thread at a time, reads included: every call on a
**    context may write its error message and its memory count, and a call may
**    write an object it takes as const (a tensor's cached host amax,
**    nvfp4_tensor_amax).  Functions without a context (nvfp4_status_string,
**    the shape, dtype and cw_rule helpers) may be called from any thread;
**    each thread has its own nvfp4_ctx_create errmsg and nvfp4_version_string
**    buffer.  Not while other threads call the library:
**    nvfp4_blas_select_core (it re-runs OpenBLAS's set-up and sets the
**    environment), nor a setenv of the caller's (the library reads the
**    environment: nvfp4_ctx_create, and on CUDA a comm's creation and the
**    quantize); nvfp4_set_wait_callback before any collective runs
**    (nvfp4_mpi.h).  The CPU GEMMs call OpenBLAS on the calling thread:
**    OpenBLAS 0.3.7 and later takes concurrent calls when built multithreaded
**    (Debian's pthread build is the one tested) or with USE_LOCKING=1, not
**    its single-threaded build without it.  MPI is called on the calling
**    thread by the collectives, a comm's creation and its destruction (a
**    split's MPI_Comm_free, also in the destroy of a layer whose TP group was
**    destroyed first), the waits above and nvfp4_linear_create in a parallel
**    mode without a TP group (MPI_Comm_size of MPI_COMM_WORLD): from several
**    threads at once these need MPI_THREAD_MULTIPLE.  CUDA contexts each have
**    their own stream and cuBLAS handle, and the kernels' first-use caches
**    (SM count, occupancy, PTX version) are atomics; a thread that uses a
**    CUDA context it did not create must make the context's GPU its current
**    device first (cudaSetDevice; see nvfp4_ctx_create).
*/
#ifndef NVFP4_H
#define NVFP4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus              /* kernels/ are compiled as C++ by nvcc */
extern "C" {
#endif

#define NVFP4_VERSION     "0.1.0"
#define NVFP4_MAX_DIMS    8
#define NVFP4_BLOCK       16      /* elements that share one E4M3 scale */
#define NVFP4_SCALE_ROWS  128     /* scale padding: rows to a multiple of 128 */
#define NVFP4_SCALE_COLS  4       /* ... and columns to a multiple of 4 */
#define NVFP4_RHT_SIGNS   0xD7E8u /* TE's fixed RHT sign mask (spec §8) */


/* ---- status ---------------------------------------------------------- */
typedef enum nvfp4_status {
  NVFP4_OK = 0,
  NVFP4_EINVAL,     /* bad argument: NULL, shape, dtype, block alignment */
  NVFP4_EUSAGE,     /* bad sequence: missing usage, closed or foreign tensor */
  NVFP4_ENOMEM,     /* host or device allocation failed */
  NVFP4_ENOTSUP,    /* the selected backend lacks this operation */
  NVFP4_EMISMATCH,  /* ranks disagree before a collective: shape/dtype/usage,
                       count, amax, or which call they are in */
  NVFP4_EPEER,      /* another rank of the collective failed */
  NVFP4_ECUDA, NVFP4_ECUBLAS, NVFP4_ENCCL, NVFP4_EMPI,
  NVFP4_NSTATUS     /* keep last */
} nvfp4_status;

/* Never NULL; "unknown status" outside the enum.  Like every name the
** library returns (nvfp4_ctx_backend, nvfp4_dtype_name, nvfp4_cw_rule_name,
** nvfp4_comm_transport), a static string: never freed or written. */
const char *nvfp4_status_string (nvfp4_status s);


/* ---- context: backend + stream + last error message ------------------ */
typedef struct nvfp4_ctx nvfp4_ctx;

typedef enum nvfp4_backend {
  NVFP4_BACKEND_AUTO = 0,   /* $NVFP4_BACKEND ("cpu"|"cuda"), else CUDA if
                               built in and a GPU is usable, else CPU */
  NVFP4_BACKEND_CPU,
  NVFP4_BACKEND_CUDA
} nvfp4_backend;

/* A context: one backend, one stream (CUDA), the last error.  *out is the
** caller's: nvfp4_ctx_destroy it after every tensor, comm, gather handle and
** layer made on it (destroyed before some of them, it stays alive for them
** and is freed with the last one; make nothing new on it).  Errors: EINVAL for a NULL
** out, a want outside the enum or an unknown $NVFP4_BACKEND (naming the
** value, or a $NVFP4_CUDA_DEVICE that is no device number), ENOTSUP when
** CUDA is asked for and not usable, ECUDA or ENOMEM when the backend's
** set-up fails (what it had set up is undone).  The reason is in *errmsg if
** errmsg != NULL ("cuda backend set-up failed: <the failing call and its
** message>"): a string the library owns, valid until this thread's next
** nvfp4_ctx_create.  CUDA: the context takes one GPU ($NVFP4_CUDA_DEVICE,
** else the local rank modulo the GPU count) and makes it the creating
** thread's current device; call the library where that device is current
** (one GPU per process: CUDA contexts on two GPUs in one process are not
** supported).  Device memory the library frees stays in that GPU's default
** memory pool for its next allocations (release threshold unlimited: given
** back at each synchronization, it cost a page mapping per allocation),
** so memory that others take with cudaMalloc (cuBLAS's workspace, NCCL's
** buffers) does not count it as free.  No spec section (the library's own
** object). */
nvfp4_status nvfp4_ctx_create  (nvfp4_backend want, nvfp4_ctx **out,
                                const char **errmsg);
void         nvfp4_ctx_destroy (nvfp4_ctx *ctx);         /* NULL: no-op */
const char  *nvfp4_ctx_backend (const nvfp4_ctx *ctx);   /* "cpu" | "cuda"; NULL: "none" */
/* The message of the last failed call on ctx ("" before any failure); a
** later successful call does not clear it, so read it when a call returns
** an error status.  Owned by ctx, valid until its next failure; NULL ctx:
** "no context". */
const char  *nvfp4_last_error  (const nvfp4_ctx *ctx);
/* Wait for the work queued on ctx (no spec section).  Errors: EINVAL
** (NULL), ECUDA (a queued kernel failed), EPEER / ENCCL when the wait
** found one of ctx's NCCL comms stuck behind a peer's failure and aborted
** it (see the conventions above). */
nvfp4_status nvfp4_ctx_sync    (nvfp4_ctx *ctx);
/* The bytes of tensor buffers now allocated on ctx, in its backend's memory
** (host for cpu, the device's for cuda): every live tensor's data, scales
** and device amax, a layer's weights and saved tensors, a gather handle's
** buffers.  Not counted: a call's own temporaries (the GEMM's dequantized
** operands, freed before it returns) and the backend's workspaces (cuBLAS's,
** the quantize's scratch, kept for the context's life).  A binding whose
** garbage collector cannot see this memory (Lua's) reads it to collect in
** time.  NULL: 0.  No spec section (the library's own accounting). */
size_t       nvfp4_ctx_memory  (const nvfp4_ctx *ctx);
/* Library, CUDA runtime and NCCL versions as one line ("nvfp4 0.1.0, ...")
** in a buffer of the library, the calling thread's own (never freed by the
** caller), rewritten by that thread's next call and valid until the thread
** ends.  NULL never. */
const char  *nvfp4_version_string (void);


/* ---- shapes (lib/shape.c: every shape rule lives there) --------------- */
/* A shape is a value.  The functions below read (and the shape-returning
** ones write) at most NVFP4_MAX_DIMS dims: a struct whose ndim is above 8 is
** read as its first 8 dims, one below 0 as ndim 0, never past dim[]; the
** checks (nvfp4_shape_check_quantizable, every tensor constructor) refuse
** such an ndim with EINVAL. */
typedef struct nvfp4_shape {
  int ndim;
  int64_t dim[NVFP4_MAX_DIMS];
} nvfp4_shape;

/* Build a shape from ndim dims (EINVAL through the return value is not
** possible here: dims are copied as given, ndim is clamped to 0..8; NULL
** dims give ndim 0). */
nvfp4_shape nvfp4_shape_make (int ndim, const int64_t *dims);
/* 1 when a and b have the same ndim (as stored, not clamped: ndim 9 and 8
** differ) and equal dims, else 0. */
int         nvfp4_shape_equal (nvfp4_shape a, nvfp4_shape b);
/* numel and M saturate at INT64_MAX; tensors and quantizable shapes are
** limited to NVFP4_MAX_NUMEL elements (EINVAL above: byte counts fit). */
#define NVFP4_MAX_NUMEL ((int64_t)1 << 60)
int64_t     nvfp4_shape_numel (nvfp4_shape s);           /* 1 for ndim 0 */
int64_t     nvfp4_shape_M (nvfp4_shape s);   /* product of leading dims; 1 for ndim 0, 1 */
int64_t     nvfp4_shape_K (nvfp4_shape s);   /* last dim; 1 for ndim 0 */
/* "[4096, 1, 8192]" into buf (n bytes, the caller's; cut to n - 1 characters
** when longer, always NUL-terminated when n > 0; NULL or n == 0: nothing
** written); returns buf. */
char       *nvfp4_shape_format (nvfp4_shape s, char *buf, size_t n);

/* Buffer shapes of an NVFP4 tensor of logical shape x (spec §6):
**   rowwise data      [d0, .., d(n-2), K/2]        uint8, 2 E2M1 per byte
**   rowwise scale     [ru(M,128), ru(K/16,4)]      uint8 (E4M3 bits)
**   columnwise data   [K, M/2]        always 2-D   uint8
**   columnwise scale  [ru(K,128), ru(M/16,4)]      uint8
** The columnwise functions flatten to 2-D first: for [S, 1, H] an N-D
** transpose would give a zero-width last dim (the TE 2.21 bug).
** They do not validate divisibility; see nvfp4_shape_check_quantizable. */
nvfp4_shape nvfp4_rowwise_data_shape     (nvfp4_shape x);
nvfp4_shape nvfp4_rowwise_scale_shape    (nvfp4_shape x);
nvfp4_shape nvfp4_columnwise_data_shape  (nvfp4_shape x);
nvfp4_shape nvfp4_columnwise_scale_shape (nvfp4_shape x);

/* Whether x can be quantized with the given usages (spec §6): ndim in
** 1..NVFP4_MAX_DIMS, dims >= 0, at most 2^60 elements, K % 16 == 0, for
** columnwise ndim >= 2 and M % 16 == 0 (a rowwise-only copy takes any M:
** the library's extension, where spec §6 gives TE's M % 16 == 0 for every
** usage; the gather and the Linear layer keep TE's rule), and each asked copy's padded
** scale_inv at most 2^60 bytes (a huge K or M, where the 128 x 4 padding
** overflows what a buffer can hold).  rowwise, columnwise: nonzero asks
** for that copy; neither checks only the rules common to both (ndim, dims,
** elements, K % 16: no scale size), where nvfp4_quantize reads neither as
** rowwise.  Returns NVFP4_OK or NVFP4_EINVAL with the rule in msg (n bytes,
** the caller's; NULL or n == 0: no message; "" on success).  No context. */
nvfp4_status nvfp4_shape_check_quantizable (nvfp4_shape x, int rowwise,
                                            int columnwise, char *msg,
                                            size_t n);

/* The columnwise bookkeeping of the all-gather (spec/sp-linear-and-gather.md
** §5.1 A, F2, §7.2), as a named rule applied to a high-precision local shard:
**   FLAT2D (default, correct): in_shape_t = [K, M/2]
**   ND     (TE 2.21):          in_shape_t = halve_last([K, d0, .., d(n-2)])
** Then C_t = product of in_shape_t[1:] (packed bytes per row) and the unpadded
** columnwise scale width U = 2*C_t/16.  Under ND, [S, 1, H] gives U = 0 and odd
** B gives a too-narrow U. */
typedef enum nvfp4_cw_rule { NVFP4_CW_FLAT2D = 0, NVFP4_CW_ND } nvfp4_cw_rule;

typedef struct nvfp4_cw_bookkeeping {
  nvfp4_shape in_shape_t;   /* the transposed packed shape the rule computes */
  int64_t rows;             /* R_t = in_shape_t[0] (= K) */
  int64_t packed_cols;      /* C_t */
  int64_t scale_width;      /* U, unpadded columnwise scale columns */
} nvfp4_cw_bookkeeping;

/* The bookkeeping of rule for a local shard (no validation: a shape that is
** not quantizable gives what the formulas give, C_t saturating at INT64_MAX
** as numel does (U then at INT64_MAX / 16); ND on ndim < 2, and a rule outside the enum,
** count as FLAT2D).  Pure function, no errors. */
nvfp4_cw_bookkeeping nvfp4_cw_rule_apply (nvfp4_cw_rule rule, nvfp4_shape local);
/* "flat2d" | "nd"; "flat2d" outside the enum, as nvfp4_cw_rule_apply counts it */
const char          *nvfp4_cw_rule_name  (nvfp4_cw_rule rule);
/* Parse "flat2d" / "nd" into *out (the caller's); EINVAL, bare (there is no
** context to keep a reason), on anything else, NULL name or NULL out.
** The names of spec/sp-linear-and-gather.md §7.2's two rules. */
nvfp4_status         nvfp4_cw_rule_parse (const char *name, nvfp4_cw_rule *out);


/* ---- tensors (lib/tensor.c) ------------------------------------------ */
typedef enum nvfp4_dtype {
  NVFP4_F32 = 0,    /* 4-byte IEEE float */
  NVFP4_BF16,       /* 2-byte bfloat16 bits (uint16_t) */
  NVFP4_U8,         /* raw bytes: packed E2M1 data or E4M3 scales */
  NVFP4_FP4         /* an NVFP4 tensor: the buffers below */
} nvfp4_dtype;

/* "fp32", "bf16", "u8", "fp4" ("?" outside the enum); an element's bytes
** (0 for FP4 and outside the enum). */
const char *nvfp4_dtype_name (nvfp4_dtype dt);
size_t      nvfp4_dtype_size (nvfp4_dtype dt);

typedef struct nvfp4_tensor nvfp4_tensor;

/* A plain (F32, BF16 or U8) tensor on ctx's device, zero-filled.  The tensor
** owns its storage.  Errors: EINVAL (negative dim, ndim outside 0..8, more
** than NVFP4_MAX_NUMEL elements, FP4 or a dtype outside the enum), ENOMEM.
** Storage: no spec section (nor for from_host, to_host, clone and reshape
** below). */
nvfp4_status nvfp4_tensor_create (nvfp4_ctx *ctx, nvfp4_shape shape,
                                  nvfp4_dtype dt, nvfp4_tensor **out);
/* The same, filled from host memory (host: the caller's, read once; the
** caller may reuse it as soon as the call returns, also when it is
** page-locked, whose copy the CUDA backend then waits for).
** Errors: EINVAL (nbytes not numel * dtype size, a NULL host with nbytes >
** 0, or as nvfp4_tensor_create), ENOMEM. */
nvfp4_status nvfp4_tensor_from_host (nvfp4_ctx *ctx, nvfp4_shape shape,
                                     nvfp4_dtype dt, const void *host,
                                     size_t nbytes, nvfp4_tensor **out);
/* Copy a plain tensor's elements to host memory (the caller's; synchronizes).
** Errors: EINVAL (NULL t, nbytes not numel * dtype size, a NULL host with
** nbytes > 0, an FP4 tensor), ECUDA (queued work failed), EPEER / ENCCL as
** nvfp4_ctx_sync's. */
nvfp4_status nvfp4_tensor_to_host (const nvfp4_tensor *t, void *host,
                                   size_t nbytes);
/* A new tensor with the same shape, dtype, buffers and amaxes (deep copy;
** an amax not yet read back is copied on the device, and stays unread).
** Errors: EINVAL (NULL out), ENOMEM, ECUDA (the device copy). */
nvfp4_status nvfp4_tensor_clone (const nvfp4_tensor *t, nvfp4_tensor **out);
/* A new plain tensor of t's shape with t's elements converted to dt: fp32 to
** bf16 rounds to nearest even (NaN stays NaN, quiet), bf16 to fp32 is exact,
** the same dtype copies (the bf16 rounding of spec §10's OType_rn and §8's
** RHT outputs).  On t's context (device work on CUDA).  Errors:
** EINVAL when t is not fp32 or bf16 or dt is not fp32 or bf16 (naming it),
** ENOMEM. */
nvfp4_status nvfp4_tensor_convert (const nvfp4_tensor *t, nvfp4_dtype dt,
                                   nvfp4_tensor **out);
/* A copy with a new logical shape of the same numel (tensors own their
** storage); for FP4 the rowwise data is reshaped, columnwise stays 2-D (its
** M is unchanged).  Errors: EINVAL (a bad shape; numel, or for FP4 K or M
** (the product of the leading dims), differs), ENOMEM. */
nvfp4_status nvfp4_tensor_reshape (const nvfp4_tensor *t, nvfp4_shape shape,
                                   nvfp4_tensor **out);
/* A new plain tensor holding elements start .. start + length - 1 of t
** along dim (0-based), the other dims whole: a rank's shard of a full
** tensor (dim 0, start r * S / TP, length S / TP for the sequence split of
** spec/sp-linear-and-gather.md §0).  t plain (F32, BF16, U8); a device copy,
** queued on the stream; length 0 gives an empty tensor.  Errors: EINVAL (an
** fp4 or 0-d t, dim outside 0..ndim-1, start outside 0..size, a negative
** length, start + length past the dim's end, NULL out; naming the value and
** the dim's size), ENOMEM. */
nvfp4_status nvfp4_tensor_narrow (const nvfp4_tensor *t, int dim, int64_t start,
                                  int64_t length, nvfp4_tensor **out);
/* Byte equality of a and b (one context): *equal = 1 when they match, else
** 0 with the first difference in why (when why is not NULL: at most
** why_len bytes, NUL-terminated, cut if longer; "" when equal), e.g.
** "tensors differ: bf16 [4, 8] vs bf16 [8, 4]", "elements: first difference
** at byte 10 (0-based) of 16: 0x40 vs 0x60", "columnwise usage: present vs
** absent", "rowwise_scale_inv: first difference at byte ...", "columnwise
** amax: 5.187500 vs 5.250000".  Plain tensors: dtype, shape and elements'
** bytes (so -0 differs from 0, and a NaN matches only the same bits); FP4:
** shape, what the bytes mean beyond themselves ("decoded differently: RHT,
** E4M3 maximum 448 vs no RHT, ..."; the E4M3 maximum of 4over6 and the RHT
** of the columnwise copy, not SR or 2D, which are in the bytes), usages,
** each present buffer's shape and bytes (spec §6's layouts, padding
** included) and the amax bits of each present usage (spec/nvfp4-numerics.md
** §6 for the buffers, §3 for the amax).  Synchronizes (reads
** the buffers to host, one at a time).  Lua's nvfp4.equal.  A failed call leaves
** *equal 0 and why "" (where given).  Errors: EINVAL (NULL a, b or equal),
** EUSAGE (b of another context), ENOMEM, ECUDA (queued work failed). */
nvfp4_status nvfp4_tensor_equal (const nvfp4_tensor *a, const nvfp4_tensor *b,
                                 int *equal, char *why, size_t why_len);
void         nvfp4_tensor_destroy (nvfp4_tensor *t);   /* NULL: no-op */

/* Accessors; for NULL: ndim 0, NVFP4_F32, NULL. */
nvfp4_shape  nvfp4_tensor_shape (const nvfp4_tensor *t);  /* logical shape */
nvfp4_dtype  nvfp4_tensor_dtype (const nvfp4_tensor *t);
/* The dtype an FP4 tensor stands for (TE's QuantizedTensor dtype, its
** "fake" dtype): the source's dtype in nvfp4_quantize (F32 or BF16), kept by
** nvfp4_tensor_clone and nvfp4_all_gather; F32 for
** nvfp4_tensor_fp4_from_host.  A gather that must requantize an FP4 shard
** (a wanted usage absent) dequantizes it to this dtype first, as TE does
** (field case BH-03; BF16 where the requantize uses the RHT, which takes
** bf16 only, spec §8).  A plain tensor's dtype for a plain tensor; NULL:
** NVFP4_F32. */
nvfp4_dtype  nvfp4_tensor_nominal_dtype (const nvfp4_tensor *t);
nvfp4_ctx   *nvfp4_tensor_ctx   (const nvfp4_tensor *t);

/* Random tensors, identical on every backend for one seed: Philox4x32-10
** keyed by seed, Box-Muller for normal (mean 0, std 1; its log/sin/cos may
** differ in the last bit between libm versions), uniform lo + (hi - lo) * u
** with u in [0, 1); values rounded once (RNE) to dt, so hi itself can occur
** (bf16 [1, 2): 2.0 in 1 of 256).  dt: F32 or BF16.  Errors: EINVAL
** (dtype, shape, lo >= hi, a bound not finite or beyond dt's largest
** finite value), ENOMEM.  Test data: no spec section (the Philox counter
** layout is the library's own, as for SR in spec §5.2). */
nvfp4_status nvfp4_tensor_randn   (nvfp4_ctx *ctx, nvfp4_shape shape,
                                   nvfp4_dtype dt, uint64_t seed,
                                   nvfp4_tensor **out);
nvfp4_status nvfp4_tensor_uniform (nvfp4_ctx *ctx, nvfp4_shape shape,
                                   nvfp4_dtype dt, uint64_t seed, double lo,
                                   double hi, nvfp4_tensor **out);

/* NVFP4 buffers.  A quantized tensor holds rowwise and/or columnwise copies;
** each has data, scale_inv (E4M3 bytes, zero padding) and an FP32 amax. */
typedef enum nvfp4_buffer {
  NVFP4_ROWWISE_DATA = 0, NVFP4_ROWWISE_SCALE,
  NVFP4_COLUMNWISE_DATA, NVFP4_COLUMNWISE_SCALE
} nvfp4_buffer;

/* 1 when t is FP4 and holds that copy, else 0 (NULL, plain). */
int          nvfp4_tensor_has_rowwise    (const nvfp4_tensor *t);
int          nvfp4_tensor_has_columnwise (const nvfp4_tensor *t);
/* Shape of one buffer; ndim 0 when the usage is absent, t is not FP4 (or
** NULL) or b is outside the enum. */
nvfp4_shape  nvfp4_tensor_buffer_shape (const nvfp4_tensor *t, nvfp4_buffer b);
/* Copy one buffer's bytes to host (the caller's; synchronizes); nbytes must
** equal the buffer's size (its shape's numel: uint8), laid out as spec §6
** says (padding included).  Errors: EUSAGE when the usage is absent or t is
** not FP4, EINVAL on size, a NULL host or an unknown b, ECUDA (queued work
** failed), EPEER / ENCCL as nvfp4_ctx_sync's. */
nvfp4_status nvfp4_tensor_buffer_read (const nvfp4_tensor *t, nvfp4_buffer b,
                                       void *host, size_t nbytes);
/* The FP32 amax of a direction (0 rowwise, 1 columnwise; with RHT the
** columnwise one is of the RHT'd copy, spec §8), the tensor's global scale
** is formed from (spec §3).  An amax a quantize computed on a device is
** read back here the first time (this waits for the work queued before).
** Errors: EUSAGE when that copy is absent or t is not FP4, EINVAL for a
** NULL amax or another direction, and the backend's (ECUDA; EPEER / ENCCL
** as nvfp4_ctx_sync's) on that read.  That first read stores the host copy
** in t (const as it is): not for two threads at once. */
nvfp4_status nvfp4_tensor_amax (const nvfp4_tensor *t, int columnwise,
                                float *amax);
/* Assemble an NVFP4 tensor from host bytes (tests, checkpoints), spec §6.
** A usage is given by both its data and its scale (or left out with both
** NULL); at least one usage.  Each given buffer must hold exactly the bytes
** of its shape (nvfp4_rowwise_data_shape etc.: rowwise data M*K/2, scale
** ru(M,128)*ru(K/16,4); columnwise data K*M/2, scale ru(K,128)*ru(M/16,4)),
** which are read as they are: the shape is checked against the rules, the
** buffers' lengths cannot be.  amax: [rowwise, columnwise] (NULL: 0, 0).
** The tensor counts as made with 1D blocks, RN, no RHT, E4M3 maximum 448.
** Errors: EINVAL (shape rule, usages, an amax below 0 or NaN), ENOMEM. */
nvfp4_status nvfp4_tensor_fp4_from_host (nvfp4_ctx *ctx, nvfp4_shape shape,
                                         const uint8_t *row_data,
                                         const uint8_t *row_scale,
                                         const uint8_t *col_data,
                                         const uint8_t *col_scale,
                                         const float amax[2],
                                         nvfp4_tensor **out);


/* ---- quantization (spec/nvfp4-numerics.md §3-§8, §10) ----------------- */
struct nvfp4_comm;

typedef struct nvfp4_qopts {        /* zero-initialised = defaults */
  unsigned rowwise : 1;             /* neither usage set: rowwise */
  unsigned columnwise : 1;
  unsigned rht : 1;                 /* RHT on the columnwise copy (bf16 only) */
  unsigned rht_no_signs : 1;        /* RHT sign mask 0 instead of 0xD7E8 */
  unsigned sr : 1;                  /* stochastic rounding (§5.2) */
  unsigned two_d : 1;               /* 16x16 blocks (weights, §7) */
  unsigned has_amax : 1;            /* use amax[] below, computed elsewhere */
  unsigned four_over_six : 1;       /* 4over6 (§9.1): each block (tile in 2D)
                                       keeps the better of its map-to-4 and
                                       map-to-6 scales; no RHT, no SR */
  unsigned four_over_six_mse : 1;   /* 4over6 error measure: squared error
                                       instead of absolute (MAE, default) */
  unsigned four_over_six_emax448 : 1;  /* 4over6 with E4M3 maximum 448 in the
                                       global scale, not 256 (TE's default
                                       for 4over6; §3.3) */
  uint64_t sr_seed;                 /* Philox key for SR; without sr both are
                                       ignored (0 is a seed like any other, so
                                       "set" cannot be told from "unset"; as
                                       TE ignores its RNG state without SR) */
  uint64_t sr_offset;               /* Philox offset (128-bit blocks) */
  float amax[2];                    /* [rowwise, columnwise] when has_amax: each >= 0
                                       and not NaN (EINVAL); +Inf as spec §3 takes it
                                       (S_enc = 1; a dequantize then multiplies by
                                       Inf: +-Inf, and NaN for zero codes) */
  struct nvfp4_comm *amax_group;    /* MAX-all-reduce both amaxes over this
                                       group before the cast (collective) */
} nvfp4_qopts;

/* Quantize a F32/BF16 tensor x of shape [d0, .., K].  opts NULL (or all
** zero) is the default: rowwise only, 1D blocks of 16, round to nearest even
** (sr selects stochastic rounding), amax computed from x (on a device it
** stays there, where the cast's kernels read it: the call enqueues and
** returns; with amax_group the group's MAX-reduction runs on it there too,
** over NCCL, and reads it back only on the staged transport: ranks sharing
** a GPU, or NVFP4_TRANSPORT=mpi-staged).  With amax_group a rank may give
** its amax (has_amax) where another computes it: the group's MAX of all
** pairs (a computed one is (a, a) without RHT) is every rank's.  Rowwise needs
** K % 16 == 0 (any M: the library's extension of spec §6, whose TE rule is
** M % 16 == 0 for every usage); columnwise needs M % 16 == 0 and K % 16 == 0; RHT needs BF16
** and columnwise; 2D excludes RHT and SR; 4over6 excludes RHT and SR (2D
** 4over6 needs M % 16 == 0).  Scale padding is written as
** 0x00.  The result remembers its E4M3 maximum (256 for 4over6 unless
** four_over_six_emax448), used by dequantize and the GEMM's alpha.
** x: ndim >= 1 (>= 2 for a columnwise copy); out: dtype NVFP4_FP4, x's
** logical shape.  Errors: EINVAL (shape rule, dtype, option conflict,
** naming the value), EUSAGE (amax_group of another context), ENOMEM, and
** the collective's errors when amax_group is set.  With amax_group the
** ranks agree on the checks, the output's allocation and the amax pass
** before the reduction (a rank failing there keeps its error, its peers get
** EPEER; a NULL ctx takes part too, a bare EINVAL); the cast after it is
** local, so a rank whose cast fails (ENOMEM for its temporaries, ECUDA)
** returns its error alone while its peers return their tensors.  The
** gather and the Linear layer, which quantize with a group, agree again
** after it (tests/mpi/test_allocfail.c). */
nvfp4_status nvfp4_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                             const nvfp4_qopts *opts, nvfp4_tensor **out);

/* Dequantize the rowwise copy of q to dt (F32 or BF16), shape of q (§10):
** out = OType_rn(value(code) * fl(fl(sf * amax) * fl(1/(6 * EMAX)))),
** EMAX = q's E4M3 maximum (448, or 256 for 4over6 without
** four_over_six_emax448: fl(1/2688), fl(1/1536)).
** Errors: EUSAGE when q has no rowwise copy, EINVAL on dtype, a plain q or
** rowwise buffers of other shapes than §6's, ENOMEM. */
nvfp4_status nvfp4_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                               nvfp4_dtype dt, nvfp4_tensor **out);
/* The columnwise copy of q (logical [.., K], M leading rows) dequantized
** to dt (F32 or BF16) as the matrix it holds, [K, M] (the transpose), by
** §10's arithmetic with the columnwise amax: the values a columnwise GEMM
** operand (dgrad's weight, wgrad's operands) stands for.  With the RHT they
** are the rotated values (H applied along M in blocks of 16, not undone).
** An extension of §10 (which dequantizes the rowwise copy only), for
** checking that copy's numerics.  Reads q's amax back first when a
** quantize left it on the device (waits for q's work).  *out is new, the
** caller's.  Errors: EUSAGE when q has no columnwise copy or is of another
** context, EINVAL on dtype, a plain q, or a columnwise copy whose buffers
** are not [K, M/2] and [ru(K,128), ru(M/16,4)] (the `nd` rule's gather with
** odd B: "invalid columnwise_scale_inv shape (expected (128,8), got
** (128,4))", as the GEMM says), ENOMEM. */
nvfp4_status nvfp4_dequantize_columnwise (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                          nvfp4_dtype dt, nvfp4_tensor **out);

/* swap_first_dims (spec §13): in [A, B, rest..] -> out [B, A, rest..], the
** trailing dims copied as opaque bytes; any plain dtype.  Fails with EINVAL
** "Input is not allocated" on an empty input (zero elements), as TE does
** (sp-linear-and-gather.md §6.1, the zero-size trap),
** and EINVAL when ndim < 2 or for an FP4 tensor; ENOMEM. */
nvfp4_status nvfp4_swap_first_dims (nvfp4_ctx *ctx, const nvfp4_tensor *in,
                                    nvfp4_tensor **out);


/* ---- communicators and collectives (lib/comm.c, lib/collectives.c,
**      lib/gather.c) ---------------------------------------------------- */
/* Create one with nvfp4_mpi.h.  A comm belongs to one ctx; it borrows the
** MPI communicator and owns what it creates (sub-communicators, NCCL). */
typedef struct nvfp4_comm nvfp4_comm;

/* Accessors; for NULL: -1, 0, NULL, "none". */
int          nvfp4_comm_rank (const nvfp4_comm *c);
int          nvfp4_comm_size (const nvfp4_comm *c);
nvfp4_ctx   *nvfp4_comm_ctx  (const nvfp4_comm *c);
/* How data moves: "mpi" (host buffers), "mpi-staged" (device buffers staged
** through host memory), "nccl". */
const char  *nvfp4_comm_transport (const nvfp4_comm *c);
/* Frees c (NULL: no-op).  Every rank of a comm from nvfp4_comm_split
** should call it (MPI_Comm_free is collective in MPI's terms), but a rank
** does not wait for the others to call it: an NCCL communicator is aborted
** (ncclCommAbort) once the ctx's stream has drained (its queued work,
** collectives on other comms included, completes first), because
** ncclCommDestroy waits for every rank of the communicator (NCCL 2.28: one
** rank destroying alone hung).  NCCL promises neither call to be local; on
** one node (two H200s over NVLink) the abort returned at once.  Across
** nodes, where NCCL's proxy thread may still be sending when the kernel
** has ended, not run here.  A stream stuck behind a peer's failure is
** drained first as in nvfp4_ctx_sync (so this may take up to
** $NVFP4_NCCL_TIMEOUT, and a failure found then is left in
** nvfp4_last_error).  Destroy it after the layers that
** use it: a comm destroyed while a layer still has it stays usable by that
** layer and is freed with the last such layer (any other call on it, a
** new layer over it included, gets EUSAGE "this comm was destroyed", its
** peers EPEER; a layer destroyed after MPI_Finalize frees the comm's memory
** and leaves its MPI communicator to MPI's teardown). */
void         nvfp4_comm_destroy (nvfp4_comm *c);
/* Collective: split into tensor-parallel groups of tp consecutive ranks
** (world 8, tp 2 -> {0,1},{2,3},..); *out is the caller's (destroy it,
** collectively; it holds its own MPI communicator and nothing of c, so c
** may be destroyed first).  The ranks agree first: EINVAL when tp < 1 or
** does not divide the size, or out is NULL (on that rank; its peers get
** EPEER), EMISMATCH when the ranks ask different tp (every rank), EMPI,
** ENOMEM (every other rank of c, in its group or not, gets EPEER naming
** it: the ranks of c agree on the new comms before any is made, on every
** backend), and on a CUDA context EINVAL naming a
** $NVFP4_NCCL_TIMEOUT that is no number of seconds > 0, at most 1e9, or a
** $NVFP4_TRANSPORT other than auto, nccl and mpi-staged (its peers get
** EPEER).  sp-linear-and-gather.md §0 (the TP group). */
nvfp4_status nvfp4_comm_split (nvfp4_comm *c, int tp, nvfp4_comm **out);
/* Collective: a barrier on c, made of the agreement (no rank returns before
** every rank has entered).  Errors: EINVAL (NULL), EMISMATCH on every rank
** when a rank is in another collective on c (conventions above), EUSAGE
** (aborted NCCL communicator; c destroyed while a layer holds it), EPEER
** (a peer's), EMPI.  No spec
** section (nor for the host-value collectives below: the agreements of
** sp-linear-and-gather.md §2.2's amax reduction are made of them). */
nvfp4_status nvfp4_comm_barrier (nvfp4_comm *c);
/* Host-value collectives, in place on n values (n >= 0, the same on every
** rank; the caller's array).  The ranks agree first: EINVAL (NULL v with
** n > 0, n < 0) on the rank whose arguments fail, its peers get EPEER;
** EMISMATCH on every rank when they pass different n; EMPI. */
nvfp4_status nvfp4_comm_all_reduce_max_f32 (nvfp4_comm *c, float *v, int n);
nvfp4_status nvfp4_comm_all_reduce_max_int (nvfp4_comm *c, int *v, int n);
/* Every rank's v into out[size] in rank order (the caller's array).
** Errors: EINVAL (NULL out, on that rank; its peers get EPEER), EMPI. */
nvfp4_status nvfp4_comm_all_gather_int (nvfp4_comm *c, int v, int *out);

/* Plain (F32/BF16/U8) tensors along dim 0 (ndim >= 1), collective over c;
** *out is new, owned by the caller, on c's ctx.
**   all_gather_plain  [d0, ..] -> [size*d0, ..], rank r's block at r*d0.
**   reduce_scatter    [d0, ..] -> [d0/size, ..], rank r gets block r of the
**                     sum; needs d0 % size == 0 (EINVAL on every rank).
**   all_reduce_sum    same shape, the sum on every rank (bit-identical).
** Sums (F32/BF16 only; U8: EINVAL) are deterministic: FP32, in rank order
** from +0 (((0 + x_0) + x_1) + ..), BF16 rounded once (RNE) at the end.
** Shapes/dtypes are checked across ranks first: a mismatch gives EMISMATCH
** on every rank with the same message ("rank 1 has [..] fp32, rank 0 has
** [..] fp32"); a rank whose own arguments are bad (NULL x) gets EINVAL and
** the others EPEER naming it.  No rank is left inside a collective.
** Errors besides: ENOMEM (its peers get EPEER: every buffer, a BF16 sum's
** fp32 accumulator included, is made before the ranks agree), EINVAL above 2^31-1 bytes in one
** MPI message (x per rank for the gather and all_reduce_sum on the mpi and
** mpi-staged transports; for reduce_scatter, an all-to-all, always, one
** output block: x's bytes / size), EMPI/ENCCL.  The
** high-precision gathers and reduce-scatters of sp-linear-and-gather.md §3-§4 and §5.1's fallback. */
nvfp4_status nvfp4_all_gather_plain (nvfp4_comm *c, const nvfp4_tensor *x,
                                     nvfp4_tensor **out);
nvfp4_status nvfp4_reduce_scatter (nvfp4_comm *c, const nvfp4_tensor *x,
                                   nvfp4_tensor **out);
nvfp4_status nvfp4_all_reduce_sum (nvfp4_comm *c, const nvfp4_tensor *x,
                                   nvfp4_tensor **out);

/* The NVFP4 all-gather along dim 0, TE's algorithm
** (spec/sp-linear-and-gather.md §5): x is either a plain F32/BF16 shard,
** quantized first with *quant (its amax MAX-reduced over c), or an FP4
** tensor.  Usages: those of *quant for plain x; for FP4 x the ones asked
** (neither: the ones present; a missing one is produced by dequantize +
** requantize, as TE does).  Output logical shape [size*d0, d1, ..].
** Columnwise bookkeeping follows gopts->rule; under ND a zero width fails
** in swap_first_dims with "Input is not allocated" (EINVAL, every rank).
** A group of one rank ignores the rule: TE's gather_along_first_dim
** quantizes and returns at world size 1, before the rule is reached.
** A plain shard that is not quantizable locally (M or K % 16 != 0) is
** gathered in high precision and quantized afterwards (= quantize(full),
** the same bytes on every rank: a given amax MAX-reduced over c as on the
** shards' path, SR with rank 0's sr_seed and sr_offset); the gathered tensor must then have M % 16 == 0 and K % 16 == 0 (EINVAL
** "not quantizable either" on every rank otherwise).
** Details (lib/gather.c): x needs ndim >= 2; only dim 0 is gathered (a
** batch-first [B, S, H] sharded on S must be transposed first: BH-28).  The
** rule applies to plain x only; an FP4 x is gathered from its real buffer
** shapes, as TE does.  The requantize dequantizes the rowwise copy to the
** dtype x stands for (nvfp4_tensor_nominal_dtype, as TE dequantizes to the
** tensor's dtype: field case BH-03; BF16 if RHT is used; a columnwise-only
** x cannot be requantized: EINVAL) with quant = gopts->quant or x's own
** flags, and its amax reduced over c.  FP4 shards must stand for one dtype
** (EMISMATCH on every rank otherwise), which the gathered tensor stands
** for.  The rowwise scale gets rank r's rows at r*M_l and zero padding
** rows; the columnwise scale is whatever the rule produced, zero-padded to
** [ru(K,128), ru(size*U,4)]: under ND with odd B it is too narrow, and
** nvfp4_tensor_buffer_shape reports that shape.  Both amaxes are the local
** tensor's (the group-reduced ones).  Metadata (shape, dtype, usages, rule,
** RHT/SR/2D, 4over6 with its error measure and E4M3 maximum) is checked
** across ranks first, as for the plain collectives;
** FP4 shards whose amaxes differ (quantized without amax_group) are refused
** with EMISMATCH on every rank, since the gathered tensor has one global
** scale per direction and TE would decode them silently with the wrong one
** (shards that all come from the same quantize with amax_group = c are
** known to agree where c's reductions run on a channel of its own, its
** NCCL communicator or the MPI one a split made: their amaxes are not read
** back or compared, and may stay on the device; the gathered tensor takes
** them there, unread);
** so are FP4 shards gathered as they are but made differently (RHT and its
** signs, SR, 2D, 4over6 and its error measure, E4M3 maximum).  With a
** requantize, every wanted usage is produced anew from the rowwise copy
** (the present one too; x's own 4over6 measure, MAE or MSE, without
** gopts->quant).  Errors: EINVAL, EUSAGE,
** EMISMATCH, EPEER, ENOMEM, EMPI/ENCCL, ECUDA (reading back the amax of an
** FP4 x that a quantize left on the device). */
typedef struct nvfp4_gather_opts {  /* zero-initialised (or gopts NULL) = defaults */
  const nvfp4_qopts *quant;         /* plain x: how to quantize (required) */
  unsigned rowwise : 1;             /* FP4 x: usages wanted */
  unsigned columnwise : 1;
  nvfp4_cw_rule rule;               /* NVFP4_CW_FLAT2D by default */
} nvfp4_gather_opts;

nvfp4_status nvfp4_all_gather (nvfp4_comm *c, const nvfp4_tensor *x,
                               const nvfp4_gather_opts *gopts,
                               nvfp4_tensor **out);

/* Asynchronous form.  nvfp4_handle_wait finishes the gather (de-interleave
** and re-pad of the columnwise copy) exactly once, however often it is
** called, and returns the result through *out as a borrowed pointer owned
** by the handle (out may be NULL); nvfp4_handle_take transfers ownership to
** the caller, after which wait fails with EUSAGE.  A failed finish (the ND
** zero-width swap) is returned again by every later wait.  On the CPU
** backend and the staged transport the collectives run eagerly (blocking)
** inside nvfp4_all_gather_async; wait does the local finish step only.
** Every buffer of the result, the finish step's de-interleaved columnwise
** copy included, is made at the start, before the ranks agree (so a rank
** out of memory fails there and its peers get EPEER): between start and
** wait the handle holds the gathered columnwise bytes twice (interleaved
** and de-interleaved).  *h is the caller's (nvfp4_handle_destroy, which may
** come before any wait); it keeps c's context alive, as a tensor does, but
** no reference to c or x: device work is queued in stream order, so either
** may be destroyed before the wait.
** nvfp4_handle_finish_count: how often the finish step ran (0 or 1; 0 for
** NULL).
** nvfp4_handle_destroy frees the result wait lent out (not one taken).
** Errors: those of nvfp4_all_gather; take: EINVAL for a NULL out (*out is
** NULL after any failure of wait or take).  The async_op form of
** sp-linear-and-gather.md §5.1 (its finish step). */
typedef struct nvfp4_handle nvfp4_handle;
nvfp4_status nvfp4_all_gather_async (nvfp4_comm *c, const nvfp4_tensor *x,
                                     const nvfp4_gather_opts *gopts,
                                     nvfp4_handle **h);
nvfp4_status nvfp4_handle_wait (nvfp4_handle *h, nvfp4_tensor **out);
nvfp4_status nvfp4_handle_take (nvfp4_handle *h, nvfp4_tensor **out);
int          nvfp4_handle_finish_count (const nvfp4_handle *h);
void         nvfp4_handle_destroy (nvfp4_handle *h);      /* NULL: no-op */


/* ---- GEMM and the Linear layer (lib/gemm.c, lib/linear.c) ------------ */
/* CPU GEMMs go to OpenBLAS.  Before 0.3.25, OpenBLAS does not know recent
** Intel CPUs and falls back to its SSE3 ("Prescott") kernels, 5-7x slower.
** This switches it to the AVX-512 (or AVX2) kernels the CPU has, by setting
** OPENBLAS_CORETYPE and re-running OpenBLAS's core selection; it does nothing
** when OPENBLAS_CORETYPE is set (the user's choice wins), when OpenBLAS chose
** another core, or with another BLAS.  It changes the process environment
** for a moment: call it once, early, before the program starts threads
** (nvfp4-lua calls it before MPI_Init).  Returns the core now in use (a
** static string), or NULL when the BLAS is not OpenBLAS or was built
** without DYNAMIC_ARCH.  Kernels differ only in summation order. */
const char  *nvfp4_blas_select_core (void);

/* Which buffer of an operand a GEMM reads.  For an FP4 tensor of logical
** shape [.., K] with M leading rows: ROWWISE is the matrix [M, K] (data
** [.., K/2], scale [ru(M,128), ru(K/16,4)]), COLUMNWISE the matrix [K, M]
** (data [K, M/2], scale [ru(K,128), ru(M/16,4)]).  A plain F32/BF16 tensor
** is read as [M, K] (ROWWISE) or its transpose [K, M] (COLUMNWISE). */
typedef enum nvfp4_usage { NVFP4_ROWWISE = 0, NVFP4_COLUMNWISE } nvfp4_usage;

/* out = opB . opA^T, TE's general_gemm(A, B) in row-major terms (spec/
** nvfp4-numerics.md §11): both selected matrices are K-major, opA [P, R],
** opB [Q, R], out [Q, P].  Linear uses fprop (W row, X row) -> X W^T,
** dgrad (W col, dY row) -> dY W, wgrad (X col, dY col) -> dY^T X.
** Output shape (TE's getGemmOutputShape): B's leading dims + [P] when B is
** read ROWWISE (N-D kept), else [Q, P].  FP4 operands are dequantized
** exactly (E2M1 x E4M3, spec §10) to fp32, multiplied with fp32
** accumulation (CPU: cblas_sgemm) and the per-tensor factors are folded into
** alpha: for two FP4 operands fl(fl(amax_A*amax_B)*fl(1/(E_A*E_B))), E =
** 6 * the operand's E4M3 maximum (2688, or 1536 for 4over6 without
** four_over_six_emax448; 1/7225344 for
** two 448 operands), for one fl(amax*fl(1/E)) (the amax of the buffer
** read).  bias (NULL: none): F32/BF16 [P], added once per output row before
** the single rounding to out_dt (F32 or BF16).  Every scale shape is checked
** against its data first: EINVAL "invalid columnwise_scale_inv shape
** (expected (8192,768), got (8192,512))", as TE's swizzle does.  Errors:
** EINVAL (dtype, a usage outside the enum, a 0-d operand, a bias that is
** not F32/BF16 [P], reduction dims differ, scale/data shapes, a dim above
** 2^31-1: the BLAS takes int dims, an output of more than 2^60 elements),
** EUSAGE (the usage is not present),
** ENOMEM; ECUBLAS and ECUDA on CUDA
** (there alpha is formed on the device, from an amax still there). */
nvfp4_status nvfp4_gemm (nvfp4_ctx *ctx, const nvfp4_tensor *a, nvfp4_usage ua,
                         const nvfp4_tensor *b, nvfp4_usage ub,
                         const nvfp4_tensor *bias, nvfp4_dtype out_dt,
                         nvfp4_tensor **out);

/* The oracle for nvfp4_gemm (spec §11): the same product in float64 on the
** host (cblas_dgemm) from the same operands, each dequantized in double
** (code * scale * amax / (6 * EMAX)) or read as given; no bias; out is F32
** of nvfp4_gemm's shape.  Slow but independent of the fp32 path.  Errors:
** those of nvfp4_gemm's checks (EINVAL, EUSAGE), ENOMEM, ECUDA (reading the
** operands, and an amax a quantize left on the device, back). */
nvfp4_status nvfp4_gemm_ref64 (nvfp4_ctx *ctx, const nvfp4_tensor *a,
                               nvfp4_usage ua, const nvfp4_tensor *b,
                               nvfp4_usage ub, nvfp4_tensor **out);

/* Relative Frobenius error ||x - ref|| / ||ref|| of two plain tensors of one
** [M, K] (their leading dims may be split differently: [S, 1, H] against a
** GEMM's [S, H]; a transposed ref is refused where M != K), sums in double; with
** c != NULL the two sums are added over c first (collective), so every rank
** gets the error of the concatenated tensors (a rank whose arguments fail
** keeps its error, the others get NVFP4_EPEER; none waits).  ||ref|| == 0
** gives ||x|| (the absolute error: 0 when both are zero).  x and ref: fp32
** or bf16 each (they may differ; FP4 and u8 are refused), of one context,
** c's when given (the reason of a failure is kept in c's context, else in
** x's).  *err (the caller's) is written on success only.  Errors: EINVAL
** (NULL, dtype, M or K differ), EUSAGE (another context), ENOMEM, ECUDA
** (reading x or ref back), EPEER, EMPI.  A test helper: no spec section. */
nvfp4_status nvfp4_rel_error (nvfp4_comm *c, const nvfp4_tensor *x,
                              const nvfp4_tensor *ref, double *err);

/* A tensor/sequence-parallel Linear layer, te.Linear's flow (spec/sp-
** linear-and-gather.md §1-§4): Y = X W^T + bias with W [N, K] split over the
** TP group by rows (COLUMN: W_r [N/TP, K]) or columns (ROW: W_r [N, K/TP]).
**   none:          X [.., K]        -> Y [.., N]
**   column, SP:    X_r [S/TP, .., K] -> gather X (NVFP4, rowwise) -> Y [S, .., N/TP]
**   column:        X [S, .., K]      -> Y [S, .., N/TP]
**   row, SP:       X_r [S, .., K/TP] -> partial Y, reduce-scatter -> [S/TP, .., N]
**   row:           X_r [S, .., K/TP] -> partial Y, all-reduce     -> [S, .., N]
** Backward keeps grad_output N-D as TE 2.21 does; row+SP gathers it
** (NVFP4, rowwise + columnwise) with cfg.gather_rule, so the `nd` rule
** reproduces the 2.21 crash for B = 1.  See lib/linear.c for each step. */
typedef enum nvfp4_parallel {
  NVFP4_PARALLEL_NONE = 0, NVFP4_PARALLEL_COLUMN, NVFP4_PARALLEL_ROW
} nvfp4_parallel;

typedef enum nvfp4_recipe_kind {
  NVFP4_RECIPE_NVFP4 = 0,   /* quantized GEMMs, TE's NVFP4BlockScaling */
  NVFP4_RECIPE_BF16,        /* baseline: operands rounded to bf16, no quantization */
  NVFP4_RECIPE_FP32         /* baseline: fp32 operands, no quantization */
} nvfp4_recipe_kind;

/* Zero-initialised = TE's defaults (spec §14): inputs 1D with RHT on the
** columnwise copy, weights 2D 16x16, gradients 1D with RHT and SR, amax
** MAX-reduced over the TP group for the SP-gathered operand (column: input,
** row: grad_output).  Each no_* flag switches one of those off (TE's
** NVTE_NVFP4_DISABLE_* switches).  RHT needs bf16 activations, and input
** and grad RHT must be switched together unless the weight is frozen (the
** transform cancels in wgrad only when both operands carry it).  Without
** the amax reduction, column+SP's forward fails with EMISMATCH (the NVFP4
** gather refuses shards quantized with different amaxes, which TE would
** decode silently with one rank's scale); row+SP's grad gather quantizes a
** plain tensor and always reduces its amax over the group. */
typedef struct nvfp4_recipe {
  nvfp4_recipe_kind kind;
  unsigned no_input_rht : 1;
  unsigned no_weight_2d : 1;
  unsigned no_grad_rht : 1;
  unsigned no_grad_sr : 1;
  unsigned no_amax_reduction : 1;
  /* 4over6 (spec §9.1; TE's nvfp4_4over6 = weights / activations / all;
  ** never gradients): the weight, and/or the forward input (which then
  ** needs no_input_rht) */
  unsigned four_over_six_weights : 1;
  unsigned four_over_six_activations : 1;
  /* SR: Philox key (plus the rank times 0x9E3779B97F4A7C15); each backward
  ** that succeeds moves the layer's own offset on, from 0.  Two layers with
  ** the same seed draw the same bits for the same grad_output (TE draws
  ** every quantize from one generator): give each layer its own seed. */
  uint64_t seed;
} nvfp4_recipe;

typedef struct nvfp4_linear_config {
  int64_t in_features;      /* K (global), multiple of 16 (x TP for ROW) */
  int64_t out_features;     /* N (global), multiple of 16 (x TP for COLUMN) */
  int bias;                 /* add a bias: COLUMN [N/TP] sharded, else [N] */
  nvfp4_parallel parallel;
  int sequence_parallel;    /* needs COLUMN or ROW */
  nvfp4_comm *tp_group;     /* the layer keeps a reference; NULL = TP 1 */
  nvfp4_dtype params_dtype; /* F32 (0) or BF16 */
  nvfp4_recipe recipe;
  nvfp4_cw_rule gather_rule;/* columnwise bookkeeping of the row+SP grad gather */
  int frozen_weight;        /* no wgrad: grad_output rowwise only, unless a
                               bias is in the GEMM (column, none), as TE
                               (sp-linear-and-gather.md §2.4) */
  int keep_operands;        /* keep the GEMM operands for nvfp4_linear_operand */
  uint64_t init_seed;       /* weights ~ N(0,1) from this seed (+ rank) */
} nvfp4_linear_config;

typedef struct nvfp4_linear nvfp4_linear;

/* Validates cfg (EINVAL naming the rule: features % 16, % TP, SP without a
** parallel mode, a parallel mode without a TP group in a job of several
** ranks, dtype, recipe kind, RHT pairing, 4over6 activations with the input
** RHT, gather rule, features not positive, a parallel mode outside the
** enum) and creates the local weight (params dtype, seeded
** normal) and a zero bias.  Collective over cfg->tp_group when TP > 1
** (every rank of the group calls it, passing the group): the ranks agree on
** the verdict (a rank whose config or memory fails keeps its error, its
** peers get EPEER), then on the config (EMISMATCH on every rank "the ranks
** disagree on <field>: rank R has <value>, rank 0 has <value>", R the
** lowest rank that differs from rank 0, enums and switches by name, for
** the first of in_features,
** out_features, bias, parallel, sequence_parallel, params_dtype, the
** recipe's kind and switches, gather_rule, frozen_weight that differs; the
** seeds and keep_operands are each rank's own).  The layer keeps a
** reference to cfg->tp_group: destroyed before the layer, the comm stays
** usable by it until the layer is destroyed (see nvfp4_comm_destroy; EUSAGE
** when it is of another context); *out is the caller's.  Errors also ENOMEM, EMPI,
** and EINVAL for a weight [out_features, in_features] above 2^60 elements.
** A NULL cfg is EINVAL at once and cannot tell the group: its peers wait.
** A NULL ctx is a bare EINVAL without a group (TP 1); with one of several
** ranks it is told like any failure: EINVAL "linear_create: ctx is NULL"
** kept in the group's context, EPEER on its peers.
** spec/sp-linear-and-gather.md §2-§4 (the recipe, row- and column-parallel
** te.Linear); the weight init is ours (the spec does not give TE's). */
nvfp4_status nvfp4_linear_create (nvfp4_ctx *ctx, const nvfp4_linear_config *cfg,
                                  nvfp4_linear **out);
void         nvfp4_linear_destroy (nvfp4_linear *l);    /* NULL: no-op */
/* Borrowed: the local weight [N_l, K_l] and bias [N_l] or [N] (NULL without
** a bias), params dtype; valid until the layer is destroyed or the next
** set_weight / set_bias, which replace them.  NULL for a NULL layer. */
const nvfp4_tensor *nvfp4_linear_weight (const nvfp4_linear *l);
const nvfp4_tensor *nvfp4_linear_bias   (const nvfp4_linear *l);
/* Copy in a local weight [N_l, K_l] / bias (F32 or BF16, converted to the
** params dtype; the caller keeps w, b).  The next forward quantizes the new
** weight; a backward of an earlier forward still uses that forward's
** quantized weight.  Errors: EINVAL on a shape mismatch or dtype, EUSAGE for
** a bias on a layer without one, ENOMEM.  The local shapes of
** sp-linear-and-gather.md §3 (weight split on K) and §4 (split on N). */
nvfp4_status nvfp4_linear_set_weight (nvfp4_linear *l, const nvfp4_tensor *w);
nvfp4_status nvfp4_linear_set_bias   (nvfp4_linear *l, const nvfp4_tensor *b);

/* Forward (collective over the TP group when TP > 1).  x: F32/BF16, ndim >=
** 2 for SP (dim 0 is the sequence), last dim K_l; y is new, in x's dtype.
** Saves what backward needs (quantized, as TE: input columnwise, weight).
** The TP group's ranks agree on the argument checks first (a rank whose
** arguments fail keeps its error and the layer as it was; its peers get
** EPEER) and, in a parallel mode, on x's shape and dtype, which every rank
** gives alike (EMISMATCH naming both shapes), then before every collective
** of the step and at its end, so a failure on one rank (memory, a device
** error) reaches every rank and none waits.  M (the product of x's leading
** dims) must be a multiple of 16 under the NVFP4 recipe, frozen_weight too (TE's
** quantizer requires it of a rowwise-only input as well; EINVAL naming M,
** after the shape agreement).  A forward failing
** after its argument checks drops what the previous one saved (a backward
** then gets EUSAGE).
** Errors: EINVAL (x's dtype: F32 or BF16, BF16 when the NVFP4 recipe's
** input or grad RHT is on; shape rules, naming the value), EPEER,
** EMISMATCH, plus those of quantize, the gathers and the GEMM.  te.Linear's forward:
** sp-linear-and-gather.md §3.1, §3.3, §4.1, §4.3; operand usages §2.4-§2.5. */
nvfp4_status nvfp4_linear_forward (nvfp4_linear *l, const nvfp4_tensor *x,
                                   nvfp4_tensor **y);
/* Backward of the last forward (EUSAGE if none).  dy: y's shape and dtype,
** kept N-D.  Returns new tensors: dx (x's shape and dtype), dw (the local
** weight's shape, params dtype; NULL when frozen_weight), db (bias shape,
** NULL without a bias; under row+SP summed over the group so it is the
** full gradient of the replicated bias; params dtype).  dw and db may be
** NULL pointers when not wanted.  The ranks agree as in forward.  A
** backward failing after its argument checks drops the operands the
** previous one kept (nvfp4_linear_operand_get then says why) and leaves the
** layer's SR offset as it was, so the next backward draws the random bits
** a layer that never failed would.
** Errors: EUSAGE (no forward), EINVAL (dy's shape or dtype, a NULL dx),
** EPEER, plus those of quantize, the gathers, the GEMMs and the reductions.
** te.Linear's backward: sp-linear-and-gather.md §3.2 (row+SP: the
** grad_output gather of the bug), §3.3, §4.2, §4.3. */
nvfp4_status nvfp4_linear_backward (nvfp4_linear *l, const nvfp4_tensor *dy,
                                    nvfp4_tensor **dx, nvfp4_tensor **dw,
                                    nvfp4_tensor **db);

/* The GEMM operands of the last forward/backward, kept when
** cfg.keep_operands is set (borrowed: every operand until the layer's next
** forward that passes its argument checks, a failing one included, or its
** destroy; GRAD_OUTPUT and column+SP's WGRAD_INPUT also until the next
** such backward; a pass refused by its argument checks keeps them; one
** passed to that forward or backward as its input is read, then freed):
** FPROP_INPUT (X as fprop read it, gathered under column+SP), WEIGHT (the
** quantized weight, both usages), WGRAD_INPUT (X columnwise as wgrad read
** it), GRAD_OUTPUT (dY quantized, gathered under row+SP).  Baseline recipes
** keep the plain tensors.  With frozen_weight, WGRAD_INPUT is X without a
** columnwise copy (no wgrad reads it), and under column+SP with TP > 1
** there is none (EUSAGE saying so).  Errors: EUSAGE when not kept or not
** yet computed, EINVAL for which out of range or a NULL t.
** sp-linear-and-gather.md §2.5. */
typedef enum nvfp4_linear_operand {
  NVFP4_LIN_FPROP_INPUT = 0, NVFP4_LIN_WEIGHT, NVFP4_LIN_WGRAD_INPUT,
  NVFP4_LIN_GRAD_OUTPUT, NVFP4_LIN_NOPERANDS
} nvfp4_linear_operand;

nvfp4_status nvfp4_linear_operand_get (nvfp4_linear *l, nvfp4_linear_operand which,
                                       const nvfp4_tensor **t);

/* How the last forward/backward gathered an operand over the TP group
** (spec/sp-linear-and-gather.md §4.1, §3.2, §4.2, §5.1), into *path:
** NVFP4_GATHER_NVFP4    the NVFP4 all-gather of quantized shards (the path
**                       of TE 2.21's columnwise-shape fault: row+SP's
**                       GRAD_OUTPUT, column+SP's FPROP_INPUT rowwise and
**                       WGRAD_INPUT columnwise);
** NVFP4_GATHER_FALLBACK row+SP's GRAD_OUTPUT shard was not quantizable
**                       (M or K % 16 != 0): gathered in high precision and
**                       quantized after, TE's fallback, where the
**                       columnwise rule plays no part (TE warns "Cannot
**                       quantize input tensor"; the library does not print);
** NVFP4_GATHER_PLAIN    a baseline recipe's high-precision gather;
** NVFP4_GATHER_NONE     not gathered: TP = 1, no SP, an operand its mode
**                       never gathers (WEIGHT; row+SP's inputs; column+SP's
**                       GRAD_OUTPUT), no pass yet, or the pass failed after
**                       its argument checks.
** A forward that passes its argument checks resets every operand's path
** (as it forgets the operands), such a backward GRAD_OUTPUT's and
** WGRAD_INPUT's; each is set when its pass returns OK.  A pass refused by
** its argument checks (EINVAL for a wrong shape or dtype, EUSAGE) changes
** nothing: the paths stay the last accepted pass's, as the operands do.
** Needs no keep_operands.  Errors: EINVAL for a NULL l or path or which out
** of range (*path NONE where path is not NULL). */
typedef enum nvfp4_gather_path {
  NVFP4_GATHER_NONE = 0, NVFP4_GATHER_NVFP4, NVFP4_GATHER_FALLBACK, NVFP4_GATHER_PLAIN
} nvfp4_gather_path;

nvfp4_status nvfp4_linear_gather_path (const nvfp4_linear *l, nvfp4_linear_operand which,
                                       nvfp4_gather_path *path);

#ifdef __cplusplus
}
#endif
#endif
