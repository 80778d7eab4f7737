/*
** nvfp4_int.h -- internal structures of libnvfp4: the context, the tensor,
** the backend table, and the three error macros.  Not installed.
*/
#ifndef NVFP4_INT_H
#define NVFP4_INT_H

#include <stdarg.h>
#include "nvfp4.h"
#include "philox.h"              /* NVFP4I_HD */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(__CUDACC__)
#define NVFP4I_FUNC  __attribute__((visibility("hidden")))
#else
#define NVFP4I_FUNC
#endif

#define NVFP4I_ERRLEN 512

typedef struct nvfp4_backend_ops nvfp4_backend_ops;
typedef struct nvfp4i_gemm_operand nvfp4i_gemm_operand;   /* lib/gemm.c */

struct nvfp4_ctx {
  const nvfp4_backend_ops *ops;
  void *impl;                       /* backend state (CUDA: stream, cuBLAS) */
  char err[NVFP4I_ERRLEN];          /* why the last call failed */
  int64_t live;                     /* tensors and comms made on it, not yet destroyed */
  int closing;                      /* nvfp4_ctx_destroy came while live > 0 */
  size_t mem;                       /* bytes of its buffers (nvfp4i_buf) now allocated */
};

/* The library's host allocations: malloc / calloc, except that the one
** nvfp4i_alloc_fail_after armed returns NULL (lib/status.c).  Every host
** allocation of lib/ and kernels/ and every tensor buffer (nvfp4i_buf_alloc,
** on any backend) asks nvfp4i_alloc_refused first, so a test can make each
** of them fail in turn on one rank (tests/mpi/test_allocfail.c). */
NVFP4I_FUNC void *nvfp4i_malloc (size_t n);
NVFP4I_FUNC void *nvfp4i_calloc (size_t n, size_t size);
/* 1 when the armed failure is this allocation (it then disarms). */
NVFP4I_FUNC int nvfp4i_alloc_refused (void);
/* Testing only: the n-th allocation from now (n >= 1) fails as if out of
** memory; n <= 0 disarms.  nvfp4i_alloc_fired: whether it has failed since
** it was armed.  Not thread-safe (a test's knob, as nvfp4i_comm_fail_next). */
NVFP4I_FUNC void nvfp4i_alloc_fail_after (long n);
NVFP4I_FUNC int nvfp4i_alloc_fired (void);

/* A tensor or comm made on ctx (hold) and destroyed (release): a context
** destroyed while some are alive is freed with the last of them, so that
** destroying them afterwards still finds their backend (nvfp4_ctx_destroy). */
NVFP4I_FUNC void nvfp4i_ctx_hold (nvfp4_ctx *ctx);
NVFP4I_FUNC void nvfp4i_ctx_release (nvfp4_ctx *ctx);

/* One buffer of a tensor, in the ctx's memory (host for cpu, device for cuda). */
typedef struct nvfp4i_buf {
  void *p;                          /* NULL when nbytes == 0 or absent */
  nvfp4_shape shape;
  size_t nbytes;
} nvfp4i_buf;

struct nvfp4_tensor {
  nvfp4_ctx *ctx;
  nvfp4_dtype dtype;
  nvfp4_shape shape;                /* logical shape */
  nvfp4i_buf data;                  /* plain tensors: the elements */
  /* NVFP4 tensors (dtype FP4): */
  unsigned has_row : 1, has_col : 1;
  unsigned rht : 1, rht_no_signs : 1, sr : 1, two_d : 1;  /* how it was made */
  unsigned four_over_six : 1, emax256 : 1;  /* 4over6; E4M3 maximum 256, not 448 */
  unsigned fo6_mse : 1;             /* 4over6 chose by squared error (MSE), not MAE */
  /* the dtype the FP4 tensor stands for (TE's QuantizedTensor dtype): its
  ** source's in a quantize (F32 or BF16), kept by a clone and a gather;
  ** F32 for fp4_from_host.  A gather that must requantize dequantizes to
  ** it (field case BH-03). */
  nvfp4_dtype nominal;
  nvfp4i_buf row_data, row_scale;   /* [.., K/2], [ru(M,128), ru(K/16,4)] */
  nvfp4i_buf col_data, col_scale;   /* [K, M/2],  [ru(K,128), ru(M/16,4)] */
  float amax[2];                    /* host copy: [rowwise, columnwise] */
  /* A quantize that computed the amax itself (no amax given; reduced over
  ** its amax_group there) leaves it in backend memory (a device's, or the
  ** CPU's own host memory), where the backend reads it, and amax[] is filled on the
  ** first host read (nvfp4i_amax_ready):
  ** amax_dev holds two floats, rowwise at 0, columnwise at amax_dcol (1
  ** with RHT, else 0: one amax for both); amax_pending while amax[] is not
  ** yet filled from it. */
  nvfp4i_buf amax_dev;
  unsigned amax_pending : 1, amax_dcol : 1;
  /* The amax came from reduction amax_seq over the comm of serial
  ** amax_comm (a quantize with amax_group; 0: not reduced): see
  ** nvfp4_comm.serial. */
  uint64_t amax_comm, amax_seq;
};

/* The backend table, picked once per ctx (lib/ctx.c).  Every entry sees
** validated arguments only: lib/ checks shapes and options before dispatch.
** Buffers are in the backend's memory; amaxes are host floats. */
struct nvfp4_backend_ops {
  const char *name;                                  /* "cpu", "cuda" */
  nvfp4_status (*init)    (nvfp4_ctx *);             /* may be NULL */
  void         (*fini)    (nvfp4_ctx *);             /* may be NULL */
  nvfp4_status (*alloc)   (nvfp4_ctx *, size_t bytes, void **p);  /* zeroed */
  /* Like alloc but the contents are unspecified; NULL: alloc is used.  For
  ** buffers that a collective or a kernel overwrites entirely. */
  nvfp4_status (*alloc_uninit)(nvfp4_ctx *, size_t bytes, void **p);
  void         (*free)    (nvfp4_ctx *, void *p);
  nvfp4_status (*to_host) (nvfp4_ctx *, void *dst, const void *src, size_t n);
  nvfp4_status (*from_host)(nvfp4_ctx *, void *dst, const void *src, size_t n);
  /* dst/src both in backend memory: rows x row_bytes with leading dims (bytes) */
  nvfp4_status (*copy2d)  (nvfp4_ctx *, void *dst, size_t dld, const void *src,
                           size_t sld, size_t rows, size_t row_bytes);
  nvfp4_status (*memset)  (nvfp4_ctx *, void *dst, int v, size_t n);
  /* amax[0] = max|x| (NaN ignored); amax[1] = max|bf16(RHT(x^T))| when rht,
  ** else amax[0].  x: F32/BF16, validated. */
  nvfp4_status (*amax)    (nvfp4_ctx *, const nvfp4_tensor *x, int rht,
                           unsigned sign_mask, float amax[2]);
  /* The same enqueued only, into dst (backend memory, two floats, zeroed
  ** by the caller): dst[0] = max|x|, dst[1] = the post-RHT amax when rht
  ** (else not written).  May be NULL (quantize then reads the amax back
  ** through amax); where set, quantize, dequantize and gemm must honour
  ** q->amax_pending (read the amaxes from q->amax_dev). */
  nvfp4_status (*amax_to) (nvfp4_ctx *, const nvfp4_tensor *x, int rht,
                           unsigned sign_mask, float *dst);
  /* Fill q's allocated buffers (zeroed, padding included) from x with the
  ** given amaxes (q->amax already set, or in q->amax_dev while
  ** q->amax_pending); q's usage flags say what to write. */
  nvfp4_status (*quantize)(nvfp4_ctx *, const nvfp4_tensor *x,
                           const nvfp4_qopts *o, nvfp4_tensor *q);
  /* out (allocated, plain F32/BF16, q's shape) = rowwise dequant of q. */
  nvfp4_status (*dequantize)(nvfp4_ctx *, const nvfp4_tensor *q,
                             nvfp4_tensor *out);
  /* out[b][a][:] = in[a][b][:], inner bytes each. */
  nvfp4_status (*swap_first_dims)(nvfp4_ctx *, void *out, const void *in,
                                  int64_t A, int64_t B, size_t inner);
  nvfp4_status (*sync)    (nvfp4_ctx *);
  /* Plain F32/BF16 arithmetic used by collectives and the Linear layer:
  ** dst[i] = dst[i] + src[i] (n elements of dt), BF16 rounded once per add
  ** from an FP32 sum; see lib/comm.c for the order. */
  nvfp4_status (*add_f32) (nvfp4_ctx *, float *acc, const void *src,
                           nvfp4_dtype dt, size_t n);
  /* d [rows_b, rows_a] (allocated, F32/BF16) = alpha * opB . opA^T
  ** (+ bias[rows_a] per row), fp32 accumulation, rounded once (lib/gemm.c);
  ** alpha from the FP4 operands' amaxes (nvfp4i_gemm_alpha), which the
  ** backend reads where they are (an operand's damax). */
  nvfp4_status (*gemm)    (nvfp4_ctx *, const nvfp4i_gemm_operand *a,
                           const nvfp4i_gemm_operand *b,
                           const nvfp4_tensor *bias, nvfp4_tensor *d);
  /* Element-wise work of the Linear layer and the collectives, so that no
  ** tensor element crosses to the host on a device backend (CPU:
  ** lib/elementwise.c; CUDA: kernels/elementwise.cu).  dst[i] = src[i]
  ** (n elements) converted F32<->BF16 (RNE, NaN kept quiet, as
  ** nvfp4i_f32_to_bf16), or copied when the dtypes agree. */
  nvfp4_status (*convert) (nvfp4_ctx *, void *dst, nvfp4_dtype dst_dt,
                           const void *src, nvfp4_dtype src_dt, size_t n);
  /* In place: y[r][c] = fl_ydt(fp32(y[r][c]) + fp32(bias[c])), y [rows, cols]
  ** of y_dt, bias [cols] of b_dt (F32/BF16): one fp32 add, rounded once. */
  nvfp4_status (*bias_add) (nvfp4_ctx *, void *y, nvfp4_dtype y_dt,
                            const void *bias, nvfp4_dtype b_dt, int64_t rows,
                            int64_t cols);
  /* out[c] = sum over r of x[r][c] (x [rows, cols] F32/BF16; grad_bias),
  ** accumulated in fp32 and rounded once to out_dt (F32/BF16).  The CPU
  ** sums as its GEMM with a row of ones did; the CUDA order is in
  ** kernels/elementwise.cu (fixed, so run to run identical). */
  nvfp4_status (*col_sum) (nvfp4_ctx *, void *out, nvfp4_dtype out_dt,
                           const void *x, nvfp4_dtype x_dt, int64_t rows,
                           int64_t cols);
};

/* One GEMM operand as a backend sees it (validated by lib/gemm.c): a 2-D
** matrix [rows, cols] whose rows run along the reduction dim (K-major). */
struct nvfp4i_gemm_operand {
  nvfp4_dtype dt;           /* F32, BF16, or FP4 (packed E2M1 codes) */
  const void *data;         /* plain: [rows, cols], or [cols, rows] if trans;
                               FP4: [rows, cols/2] bytes, low nibble first */
  const uint8_t *scale;     /* FP4: E4M3 byte of (r, block j) at r*scale_ld+j */
  int64_t rows, cols, scale_ld;
  int trans;                /* plain only: stored transposed */
  int round_bf16;           /* plain F32 only: round elements to bf16 first */
  /* FP4 only (ignored otherwise): the amax of the copy read (alpha's
  ** factor, spec §11) and 6*EMAX; damax != NULL: that amax is still in
  ** backend memory (a quantize computed it), there, and amax is stale */
  float amax, e6;
  const float *damax;
};

/* The per-tensor factors folded into a GEMM's alpha (spec §11), host and
** device: fl(fl(amax_A*amax_B) * fl(1/(6*6*EMAX_A*EMAX_B))) for two FP4
** operands (fl(1/7225344) = 0x34149B93 for 448/448), fl(amax * fl(1/(6*EMAX)))
** for one; e6 = 6*EMAX of each operand, amax < 0 for a plain one. */
static inline NVFP4I_HD float nvfp4i_gemm_alpha (float amax_a, float e6a, float amax_b,
                                                 float e6b) {
  if (amax_a >= 0 && amax_b >= 0) return (amax_a * amax_b) * (1.0f / (e6a * e6b));
  if (amax_a >= 0) return amax_a * (1.0f / e6a);
  if (amax_b >= 0) return amax_b * (1.0f / e6b);
  return 1.0f;
}

/* The CPU GEMM (lib/gemm.c), the cpu table's gemm entry. */
NVFP4I_FUNC nvfp4_status nvfp4i_cpu_gemm (nvfp4_ctx *ctx,
                                          const nvfp4i_gemm_operand *a,
                                          const nvfp4i_gemm_operand *b,
                                          const nvfp4_tensor *bias, nvfp4_tensor *d);

/* The cpu table's element-wise entries (lib/elementwise.c). */
NVFP4I_FUNC nvfp4_status nvfp4i_cpu_convert (nvfp4_ctx *ctx, void *dst,
                                             nvfp4_dtype dst_dt, const void *src,
                                             nvfp4_dtype src_dt, size_t n);
NVFP4I_FUNC nvfp4_status nvfp4i_cpu_bias_add (nvfp4_ctx *ctx, void *y, nvfp4_dtype y_dt,
                                              const void *bias, nvfp4_dtype b_dt,
                                              int64_t rows, int64_t cols);
NVFP4I_FUNC nvfp4_status nvfp4i_cpu_col_sum (nvfp4_ctx *ctx, void *out,
                                             nvfp4_dtype out_dt, const void *x,
                                             nvfp4_dtype x_dt, int64_t rows,
                                             int64_t cols);

extern const nvfp4_backend_ops nvfp4i_cpu_ops;     /* lib/ref_backend.c */
#ifdef HAVE_CUDA
extern const nvfp4_backend_ops nvfp4i_cuda_ops;    /* kernels/cuda_backend.cu */
NVFP4I_FUNC int nvfp4i_cuda_usable (const char **why);
#endif

/* ---- errors ---------------------------------------------------------- */
/* Record a message in ctx (printf-style) and return st. */
NVFP4I_FUNC nvfp4_status nvfp4i_fail (nvfp4_ctx *ctx, nvfp4_status st,
                                      const char *fmt, ...)
#ifdef __GNUC__
  __attribute__((format(printf, 3, 4)))
#endif
  ;

#define CHECK(call)  \
  do { nvfp4_status s_ = (call); if (s_ != NVFP4_OK) return s_; } while (0)
#define CHECK_GOTO(call, st, label)  \
  do { if (((st) = (call)) != NVFP4_OK) goto label; } while (0)
#define FAIL_IF(ctx, cond, st, ...)  \
  do { if (cond) return nvfp4i_fail((ctx), (st), __VA_ARGS__); } while (0)

/* An output pointer's first step in every public function: NULL, so that a
** failure, even one with no context to keep its reason, leaves it NULL
** (nvfp4.h, "Conventions"). */
#define NVFP4I_CLEAR(p) do { if ((p) != NULL) *(p) = NULL; } while (0)

/* A pointer argument that must not be NULL, where a context is known (a
** NULL context or object that holds it gives a bare NVFP4_EINVAL): fails
** with "<what>: <arg> is NULL" kept in the context. */
#define CHECK_ARG(ctx, arg, what)  \
  FAIL_IF(ctx, (arg) == NULL, NVFP4_EINVAL, "%s: %s is NULL", (what), #arg)

/* For messages about a dtype the caller passed: its name, or "<n> (not a
** dtype)" for a value outside the enum (nvfp4_dtype_name gives "?").  C
** only (a compound literal holds the text until the end of the block). */
/* The quantize options' own rules for an input of dtype dt (fp32 or bf16), without the
** shape rules (lib/quantize.c; the NVFP4 gather checks them before its
** collectives).  EINVAL naming the rule, EUSAGE (amax_group of another
** context). */
NVFP4I_FUNC nvfp4_status nvfp4i_check_qopts_flags (nvfp4_ctx *ctx, nvfp4_dtype dt,
                                                   const nvfp4_qopts *o);

NVFP4I_FUNC const char *nvfp4i_dtype_desc (nvfp4_dtype dt, char buf[24]);
#ifndef __cplusplus
#define NVFP4I_DTYPE(dt) nvfp4i_dtype_desc((dt), (char[24]){0})
#endif

/* ---- tensors (lib/tensor.c) ------------------------------------------ */
/* The E4M3 maximum of an FP4 tensor's global scale (spec §3.3). */
static inline float nvfp4i_emax (const nvfp4_tensor *t) {
  return t->emax256 ? 256.0f : 448.0f;
}
NVFP4I_FUNC nvfp4_status nvfp4i_buf_alloc (nvfp4_ctx *ctx, nvfp4i_buf *b,
                                           nvfp4_shape shape, size_t elsize);
/* As nvfp4i_buf_alloc, but the contents are unspecified (no zero fill):
** only for buffers every byte of which is written before it is read.
** Uses the backend's alloc_uninit, or its zeroing alloc where it has none. */
NVFP4I_FUNC nvfp4_status nvfp4i_buf_alloc_uninit (nvfp4_ctx *ctx, nvfp4i_buf *b,
                                                  nvfp4_shape shape, size_t elsize);
NVFP4I_FUNC void nvfp4i_buf_free (nvfp4_ctx *ctx, nvfp4i_buf *b);
/* A new FP4 tensor of logical shape with the requested usages allocated
** (zeroed) and the given flags; amax zero. */
NVFP4I_FUNC nvfp4_status nvfp4i_tensor_alloc_fp4 (nvfp4_ctx *ctx,
                                                  nvfp4_shape shape, int row,
                                                  int col, nvfp4_tensor **out);
/* The same with the data buffers not zero-filled, nor the scale buffers
** that hold no padding; scale buffers with padding are zeroed, so it reads
** 0x00: for a cast that writes every data byte and every block's scale. */
NVFP4I_FUNC nvfp4_status nvfp4i_tensor_alloc_fp4_for_cast (nvfp4_ctx *ctx,
                                                           nvfp4_shape shape, int row,
                                                           int col, nvfp4_tensor **out);
/* A new, empty (zero-filled) tensor; ctx only. */
NVFP4I_FUNC nvfp4_tensor *nvfp4i_tensor_new (nvfp4_ctx *ctx);
/* A plain (F32, BF16, U8) tensor's shape and dtype, checked before anything
** is allocated: EINVAL "<what>: shape [..]: dim 1 is negative", "<what>:
** ndim 9 is outside 0..8", "<what>: dtype fp4 is not fp32, bf16 or u8 ..";
** what is the public call (nvfp4i_tensor_alloc_plain says "tensor"). */
NVFP4I_FUNC nvfp4_status nvfp4i_check_plain (nvfp4_ctx *ctx, const char *what,
                                             nvfp4_shape shape, nvfp4_dtype dt);
/* A plain tensor whose storage is allocated but not filled. */
NVFP4I_FUNC nvfp4_status nvfp4i_tensor_alloc_plain (nvfp4_ctx *ctx,
                                                    nvfp4_shape shape,
                                                    nvfp4_dtype dt,
                                                    nvfp4_tensor **out);
/* The same without zero-fill: only for tensors whose every byte the caller
** writes before any is read (gathered outputs, interleaved buffers). */
NVFP4I_FUNC nvfp4_status nvfp4i_tensor_alloc_plain_uninit (nvfp4_ctx *ctx,
                                                           nvfp4_shape shape,
                                                           nvfp4_dtype dt,
                                                           nvfp4_tensor **out);
/* Check one NVFP4 buffer pair against the shape rules of spec §6, the way
** TE's CheckScaleTensorShape does before a GEMM: a gathered scale of the
** wrong width (the `nd` rule with odd B) must not be read silently.  EINVAL
** "<what>: invalid <dir>_scale_inv shape (expected (128,8), got (128,4))"
** (or _data).  lib/gemm.c; dequantize checks the copy it reads too. */
NVFP4I_FUNC nvfp4_status nvfp4i_check_fp4_buffers (nvfp4_ctx *ctx, const char *what,
                                                   const char *dir, const nvfp4i_buf *data,
                                                   nvfp4_shape want_data,
                                                   const nvfp4i_buf *scale,
                                                   nvfp4_shape want_scale);
NVFP4I_FUNC nvfp4_status nvfp4i_check_tensor (nvfp4_ctx *ctx,
                                              const nvfp4_tensor *t,
                                              const char *what);
/* The shape of x's gather over n ranks ([n*d0, d1, ..]) into *g; EINVAL
** when n*d0 passes 2^63 - 1 (a shard with a zero dim may have any d0).
** Local: ranks whose shapes agree reach the same verdict. */
NVFP4I_FUNC nvfp4_status nvfp4i_gathered_shape (nvfp4_ctx *ctx, const char *what,
                                                nvfp4_shape x, int n, nvfp4_shape *g);
/* TE's is_quantizable for a plain shard of the NVFP4 gather: M % 16 == 0
** and K % 16 == 0 (sp-linear-and-gather.md §5.1 C); a shard failing it
** takes the high-precision fallback (lib/gather.c). */
NVFP4I_FUNC int nvfp4i_shard_quantizable (nvfp4_shape s);
/* t->amax[] up to date: an amax still in backend memory (amax_pending) is
** read back (this waits for the work queued before it on t's context) and
** kept.  Every host reader of an FP4 tensor's amax calls it first.  Errors:
** the backend's copy (the tensor unchanged). */
NVFP4I_FUNC nvfp4_status nvfp4i_amax_ready (const nvfp4_tensor *t);
/* t's two amaxes, [rowwise, columnwise], into amax without taking them as
** read (t unchanged): for a backend's own use of them on the host. */
NVFP4I_FUNC nvfp4_status nvfp4i_amax_values (const nvfp4_tensor *t, float amax[2]);
/* dst (a new FP4 tensor) takes src's amaxes as they are: the host pair, the
** reduction tag, and an unread amax copied in backend memory (ENOMEM). */
NVFP4I_FUNC nvfp4_status nvfp4i_amax_copy (nvfp4_tensor *dst, const nvfp4_tensor *src);

/* ---- bf16 helpers (exact; host and device) ---------------------------- */
static inline NVFP4I_HD float nvfp4i_bf16_to_f32 (uint16_t h) {
  union { uint32_t u; float f; } v;
  v.u = (uint32_t)h << 16;
  return v.f;
}

/* RNE to bf16; NaN stays a quiet NaN with its sign.  The kernels' one copy
** of the rule too (quantize, dequantize, GEMM expansion, convert). */
static inline NVFP4I_HD uint16_t nvfp4i_f32_to_bf16 (float f) {
  union { uint32_t u; float f; } v;
  v.f = f;
  if ((v.u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((v.u >> 16) | 0x0040u);
  return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

#ifdef __cplusplus
}
#endif
#endif
