/*
** test_tensor.c -- lib/tensor.c and lib/ctx.c: ownership, host round trips,
** FP4 buffers assembled from host bytes, and every bad input path.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>
#include <math.h>
#include <cmocka.h>
#include "config.h"         /* PACKAGE_VERSION, from configure.ac's AC_INIT */
#include "nvfp4.h"
#include "nvfp4_mpi.h"      /* nvfp4_comm_create_mpi (no MPI call is made here) */


static int setup (void **state) {
  nvfp4_ctx *ctx = NULL;
  if (nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL) != NVFP4_OK) return -1;
  *state = ctx;
  return 0;
}


static int teardown (void **state) {
  nvfp4_ctx_destroy((nvfp4_ctx *)*state);
  return 0;
}


static nvfp4_shape shape2 (int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return nvfp4_shape_make(2, d);
}


static void test_ctx_backend_and_env (void **state) {
  nvfp4_ctx *c = NULL;
  const char *why = NULL;
  assert_string_equal(nvfp4_ctx_backend((nvfp4_ctx *)*state), "cpu");
  assert_string_equal(nvfp4_last_error((nvfp4_ctx *)*state), "");
  setenv("NVFP4_BACKEND", "tpu", 1);
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_AUTO, &c, &why), NVFP4_EINVAL);
  assert_null(c);
  assert_non_null(strstr(why, "NVFP4_BACKEND='tpu': must be 'cpu' or 'cuda'"));
  setenv("NVFP4_BACKEND", "cpu", 1);
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_AUTO, &c, &why), NVFP4_OK);
  assert_string_equal(nvfp4_ctx_backend(c), "cpu");
  nvfp4_ctx_destroy(c);
  unsetenv("NVFP4_BACKEND");
  nvfp4_ctx_destroy(NULL);
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, NULL, NULL), NVFP4_EINVAL);
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, NULL, &why), NVFP4_EINVAL);
  assert_string_equal(why, "ctx_create: out is NULL");      /* the reason, not "" */
  /* a value outside the enum is refused, not taken for AUTO */
  assert_int_equal(nvfp4_ctx_create((nvfp4_backend)9, &c, &why), NVFP4_EINVAL);
  assert_null(c);
  assert_non_null(strstr(why, "backend 9 is not NVFP4_BACKEND_AUTO (0)"));
  assert_non_null(strstr(nvfp4_version_string(), NVFP4_VERSION));
  /* the header's version is the package's (two places to keep in step) */
  assert_string_equal(NVFP4_VERSION, PACKAGE_VERSION);
}


/* nvfp4_ctx_memory: the bytes of the buffers alive on the context, each
** tensor's counted when made and given back when destroyed; a quantize's
** four buffers at their padded sizes (spec §6) and its amax's two floats. */
static void test_ctx_memory (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  nvfp4_tensor *a = NULL, *b = NULL, *q = NULL, *t = NULL;
  nvfp4_qopts o;
  assert_int_equal(nvfp4_ctx_memory(ctx), 0);
  assert_int_equal(nvfp4_ctx_memory(NULL), 0);
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(3, 5), NVFP4_F32, &a), NVFP4_OK);
  assert_int_equal(nvfp4_ctx_memory(ctx), 60);
  assert_int_equal(nvfp4_tensor_randn(ctx, shape2(32, 64), NVFP4_BF16, 7, &b), NVFP4_OK);
  assert_int_equal(nvfp4_ctx_memory(ctx), 60 + 4096);
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  assert_int_equal(nvfp4_quantize(ctx, b, &o, &q), NVFP4_OK);
  /* rowwise data [32, 32], scale [128, 4]; columnwise data [64, 16], scale
  ** [128, 4]; the computed amax, two floats */
  assert_int_equal(nvfp4_ctx_memory(ctx), 60 + 4096 + 1024 + 512 + 1024 + 512 + 8);
  assert_int_equal(nvfp4_tensor_clone(q, &t), NVFP4_OK);
  assert_int_equal(nvfp4_ctx_memory(ctx), 60 + 4096 + 2 * (1024 + 512 + 1024 + 512 + 8));
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(b);
  assert_int_equal(nvfp4_ctx_memory(ctx), 60 + 1024 + 512 + 1024 + 512 + 8);
  /* a failed call leaves the count as it was */
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(-1, 5), NVFP4_F32, &b), NVFP4_EINVAL);
  assert_int_equal(nvfp4_ctx_memory(ctx), 60 + 1024 + 512 + 1024 + 512 + 8);
  nvfp4_tensor_destroy(t);
  nvfp4_tensor_destroy(a);
  assert_int_equal(nvfp4_ctx_memory(ctx), 0);
}


static void test_round_trip_f32_bf16 (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  float in[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e30f}, out[6];
  uint16_t h[4] = {0x3f80, 0xbfc0, 0x7f80, 0x0001}, ho[4];
  nvfp4_tensor *t = NULL, *c = NULL, *r = NULL;
  int64_t d[3] = {1, 2, 3};
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 3), NVFP4_F32, in, sizeof in, &t), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_dtype(t), NVFP4_F32);
  assert_ptr_equal(nvfp4_tensor_ctx(t), ctx);
  assert_int_equal(nvfp4_tensor_to_host(t, out, sizeof out), NVFP4_OK);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(nvfp4_tensor_clone(t, &c), NVFP4_OK);
  nvfp4_tensor_destroy(t);                   /* the clone owns its own copy */
  memset(out, 0, sizeof out);
  assert_int_equal(nvfp4_tensor_to_host(c, out, sizeof out), NVFP4_OK);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(nvfp4_tensor_reshape(c, nvfp4_shape_make(3, d), &r), NVFP4_OK);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(r), nvfp4_shape_make(3, d)));
  nvfp4_tensor_destroy(c);
  nvfp4_tensor_destroy(r);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 2), NVFP4_BF16, h, sizeof h, &t), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(t, ho, sizeof ho), NVFP4_OK);
  assert_memory_equal(h, ho, sizeof h);
  nvfp4_tensor_destroy(t);
  nvfp4_tensor_destroy(NULL);
}


/* nvfp4_tensor_convert: fp32 -> bf16 rounds to nearest even (ties both
** ways, the largest float to Inf, NaN quiet, -0 kept), bf16 -> fp32 is
** exact, and the wrong dtypes are refused by name. */
static void test_convert (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  float in[8] = {1.0f, 0x1.01p+0f, 0x1.03p+0f, -2.5f, -0.0f, FLT_MAX, 0x1.fep-127f, 0.0f}, back[8];
  /* 1 + 2^-8 ties down to 1, 1 + 3 2^-8 ties up to 1 + 2^-6; the subnormal rounds up */
  const uint16_t want[8] = {0x3f80, 0x3f80, 0x3f82, 0xc020, 0x8000, 0x7f80, 0x0080, 0x0000};
  uint16_t h[8];
  uint32_t qnan = 0x7f800001u;               /* a signalling NaN */
  nvfp4_tensor *f = NULL, *b = NULL, *g = NULL, *bad = (nvfp4_tensor *)0x1, *q = NULL;
  int i;
  memcpy(&in[7], &qnan, 4);
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 4), NVFP4_F32, in, sizeof in, &f), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_convert(f, NVFP4_BF16, &b), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_dtype(b), NVFP4_BF16);
  assert_true(nvfp4_shape_equal(nvfp4_tensor_shape(b), shape2(2, 4)));
  assert_int_equal(nvfp4_tensor_to_host(b, h, sizeof h), NVFP4_OK);
  for (i = 0; i < 7; i++) assert_int_equal(h[i], want[i]);
  assert_int_equal(h[7] & 0x7fc0, 0x7fc0);   /* NaN, quiet */
  assert_int_equal(nvfp4_tensor_convert(b, NVFP4_F32, &g), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(g, back, sizeof back), NVFP4_OK);
  for (i = 0; i < 8; i++) {
    uint32_t u;
    memcpy(&u, &back[i], 4);
    assert_int_equal(u, (uint32_t)h[i] << 16);   /* exact */
  }
  nvfp4_tensor_destroy(g);
  assert_int_equal(nvfp4_tensor_convert(b, NVFP4_U8, &bad), NVFP4_EINVAL);
  assert_null(bad);
  assert_non_null(strstr(nvfp4_last_error(ctx), "target dtype u8 is not fp32 or bf16"));
  assert_int_equal(nvfp4_tensor_convert(b, (nvfp4_dtype)42, &bad), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "42 (not a dtype)"));
  nvfp4_tensor_destroy(b);
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(16, 16), NVFP4_F32, &b), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, b, NULL, &q), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_convert(q, NVFP4_F32, &bad), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "the tensor is fp4"));
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(b);
  /* an fp4 reshape keeps M, also where numel and K do not fix it (K = 0: [32, 0] as [3, 0] kept a
  ** columnwise copy of M = 32 that no later call took) */
  {
    nvfp4_qopts both;
    memset(&both, 0, sizeof both);
    both.rowwise = both.columnwise = 1;
    assert_int_equal(nvfp4_tensor_create(ctx, shape2(32, 0), NVFP4_F32, &b), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, b, &both, &q), NVFP4_OK);
    bad = (nvfp4_tensor *)0x1;
    assert_int_equal(nvfp4_tensor_reshape(q, shape2(3, 0), &bad), NVFP4_EINVAL);
    assert_null(bad);
    assert_string_equal(nvfp4_last_error(ctx), "tensor_reshape: [32, 0] cannot become [3, 0] (fp4 keeps the "
                                               "last dim K and the product M of the others)");
    {
      int64_t d3[3] = {2, 16, 0};
      assert_int_equal(nvfp4_tensor_reshape(q, nvfp4_shape_make(3, d3), &bad), NVFP4_OK);
      assert_int_equal(nvfp4_shape_M(nvfp4_tensor_shape(bad)), 32);
      nvfp4_tensor_destroy(bad);
    }
    nvfp4_tensor_destroy(q);
    nvfp4_tensor_destroy(b);
  }
  nvfp4_tensor_destroy(f);
  assert_int_equal(nvfp4_tensor_convert(NULL, NVFP4_F32, &bad), NVFP4_EINVAL);
}


static void test_create_zeroed_and_empty (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  nvfp4_tensor *t = NULL;
  float out[8];
  int i;
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(2, 4), NVFP4_F32, &t), NVFP4_OK);
  memset(out, 0xff, sizeof out);
  assert_int_equal(nvfp4_tensor_to_host(t, out, sizeof out), NVFP4_OK);
  for (i = 0; i < 8; i++) assert_true(out[i] == 0.0f);
  nvfp4_tensor_destroy(t);
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(0, 64), NVFP4_BF16, &t), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(t, NULL, 0), NVFP4_OK);
  nvfp4_tensor_destroy(t);
}


static void test_bad_inputs (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  nvfp4_tensor *t = (nvfp4_tensor *)0x1, *ok = NULL;
  float in[4] = {1, 2, 3, 4}, out[4];
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(-1, 4), NVFP4_F32, &t), NVFP4_EINVAL);
  assert_null(t);
  /* each message names the call, the value and the rule: the dim, not only the shape */
  assert_string_equal(nvfp4_last_error(ctx), "tensor_create: shape [-1, 4]: dim 0 is negative");
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, -2), NVFP4_F32, in, 16, &t), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_from_host: shape [2, -2]: dim 1 is negative");
  assert_int_equal(nvfp4_tensor_randn(ctx, shape2(2, -2), NVFP4_F32, 1, &t), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "randn: shape [2, -2]: dim 1 is negative");
  assert_int_equal(nvfp4_tensor_uniform(ctx, shape2(-3, 2), NVFP4_BF16, 1, 0.0, 1.0, &t),
                   NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "uniform: shape [-3, 2]: dim 0 is negative");
  assert_null(t);
  assert_int_equal(nvfp4_tensor_create(ctx, shape2((int64_t)1 << 31, (int64_t)1 << 31), NVFP4_F32, &t), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "2^60"));          /* 2^62 * 4 bytes would wrap */
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(2, 2), NVFP4_FP4, &t), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "tensor_create: dtype fp4 is not fp32, bf16 or u8 (an fp4 "
                                                "tensor comes from nvfp4_quantize"));
  assert_int_equal(nvfp4_tensor_create(NULL, shape2(2, 2), NVFP4_F32, &t), NVFP4_EINVAL);
  /* a NULL output where the context is known: the reason replaces the last
  ** one (it said fp4 above) */
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(2, 2), NVFP4_F32, NULL), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_create: out is NULL");
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 2), NVFP4_F32, in, 16, NULL), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_from_host: out is NULL");
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 2), NVFP4_F32, in, 12, &t), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "12 bytes"));
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 2), NVFP4_F32, NULL, 16, &t), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "tensor_from_host: host is NULL (16 bytes to copy)"));
  /* the bytes the caller asked to copy, not the shape's */
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 2), NVFP4_F32, NULL, 5, &t), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_from_host: host is NULL (5 bytes to copy)");
  /* the byte count is checked before anything is allocated: a shape of 2^61
  ** bytes with 16 given is that EINVAL, not an ENOMEM from the allocation */
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2((int64_t)1 << 30, (int64_t)1 << 29), NVFP4_F32,
                                          in, 16, &t), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_from_host: 16 bytes given, shape needs "
                                             "2305843009213693952");
  assert_null(t);
  {
    nvfp4_shape nine = shape2(2, 2);
    nine.ndim = 9;                /* a caller's struct: no dims are read past dim[] */
    assert_int_equal(nvfp4_tensor_create(ctx, nine, NVFP4_F32, &t), NVFP4_EINVAL);
    assert_string_equal(nvfp4_last_error(ctx), "tensor_create: ndim 9 is outside 0..8");
  }
  assert_int_equal(nvfp4_tensor_create(ctx, shape2(2, 2), (nvfp4_dtype)42, &t), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "dtype 42"));
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 2), NVFP4_F32, in, sizeof in, &ok), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(ok, out, 8), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "holds 16"));
  assert_int_equal(nvfp4_tensor_to_host(ok, NULL, 16), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_to_host: host is NULL (16 bytes to copy)");
  assert_int_equal(nvfp4_tensor_clone(ok, NULL), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_clone: out is NULL");
  assert_int_equal(nvfp4_tensor_convert(ok, NVFP4_BF16, NULL), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_convert: out is NULL");
  assert_int_equal(nvfp4_tensor_reshape(ok, shape2(4, 1), NULL), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_reshape: out is NULL");
  assert_int_equal(nvfp4_tensor_amax(ok, 0, NULL), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "amax: amax is NULL");
  assert_int_equal(nvfp4_tensor_reshape(ok, shape2(3, 2), &t), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "[2, 2] cannot become [3, 2]"));
  assert_int_equal(nvfp4_tensor_buffer_read(ok, NVFP4_ROWWISE_DATA, out, 4), NVFP4_EUSAGE);
  assert_int_equal(nvfp4_tensor_amax(ok, 0, out), NVFP4_EUSAGE);
  assert_int_equal(nvfp4_tensor_has_rowwise(ok), 0);
  assert_int_equal(nvfp4_tensor_buffer_shape(ok, NVFP4_ROWWISE_SCALE).ndim, 0);
  {  /* refused before any MPI call: MPI is not initialized here */
    nvfp4_comm *c = (nvfp4_comm *)0x1;
    assert_int_equal(nvfp4_comm_create_mpi(ctx, MPI_COMM_NULL, &c), NVFP4_EINVAL);
    assert_null(c);
    assert_string_equal(nvfp4_last_error(ctx), "comm_create_mpi: mc is MPI_COMM_NULL (a comm is "
                                               "made over a communicator this rank belongs to)");
  }
  /* the tensor is intact after all that */
  assert_int_equal(nvfp4_tensor_to_host(ok, out, sizeof out), NVFP4_OK);
  assert_memory_equal(in, out, sizeof in);
  nvfp4_tensor_destroy(ok);
}


/* Every output a failed call is given is NULL afterwards (nvfp4.h,
** "Conventions"), also where there is no context to keep a reason (a NULL
** ctx, tensor, comm, handle or layer): a caller may free it unconditionally.
** It held a stale pointer after a NULL context before. */
static void test_outputs_null_after_failure (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  static char poison;
  nvfp4_tensor *t, *dx, *dw, *db;
  const nvfp4_tensor *ct;
  nvfp4_comm *c;
  nvfp4_handle *h;
  nvfp4_linear *l;
  nvfp4_gather_opts g;
  nvfp4_linear_config cfg;
  memset(&g, 0, sizeof g);
  memset(&cfg, 0, sizeof cfg);
#define CLEARED(call, p) do {                                    \
    (p) = (void *)&poison;                                       \
    assert_int_not_equal((call), NVFP4_OK);                      \
    assert_null(p);                                              \
  } while (0)
  CLEARED(nvfp4_tensor_create(NULL, shape2(2, 2), NVFP4_F32, &t), t);
  CLEARED(nvfp4_tensor_from_host(NULL, shape2(2, 2), NVFP4_F32, NULL, 16, &t), t);
  CLEARED(nvfp4_tensor_fp4_from_host(NULL, shape2(16, 16), NULL, NULL, NULL, NULL, NULL, &t), t);
  CLEARED(nvfp4_tensor_clone(NULL, &t), t);
  CLEARED(nvfp4_tensor_convert(NULL, NVFP4_BF16, &t), t);
  CLEARED(nvfp4_tensor_reshape(NULL, shape2(2, 2), &t), t);
  CLEARED(nvfp4_tensor_narrow(NULL, 0, 0, 1, &t), t);
  CLEARED(nvfp4_tensor_randn(NULL, shape2(2, 2), NVFP4_F32, 1, &t), t);
  CLEARED(nvfp4_tensor_uniform(NULL, shape2(2, 2), NVFP4_F32, 1, 0.0, 1.0, &t), t);
  CLEARED(nvfp4_quantize(NULL, NULL, NULL, &t), t);
  CLEARED(nvfp4_quantize(ctx, NULL, NULL, &t), t);
  CLEARED(nvfp4_dequantize(NULL, NULL, NVFP4_BF16, &t), t);
  CLEARED(nvfp4_swap_first_dims(NULL, NULL, &t), t);
  CLEARED(nvfp4_gemm(NULL, NULL, NVFP4_ROWWISE, NULL, NVFP4_ROWWISE, NULL, NVFP4_F32, &t), t);
  CLEARED(nvfp4_gemm_ref64(NULL, NULL, NVFP4_ROWWISE, NULL, NVFP4_ROWWISE, &t), t);
  CLEARED(nvfp4_comm_create_mpi(NULL, MPI_COMM_WORLD, &c), c);
  CLEARED(nvfp4_comm_split(NULL, 1, &c), c);
  CLEARED(nvfp4_all_gather_plain(NULL, NULL, &t), t);
  CLEARED(nvfp4_reduce_scatter(NULL, NULL, &t), t);
  CLEARED(nvfp4_all_reduce_sum(NULL, NULL, &t), t);
  CLEARED(nvfp4_all_gather(NULL, NULL, &g, &t), t);
  CLEARED(nvfp4_all_gather_async(NULL, NULL, &g, &h), h);
  CLEARED(nvfp4_handle_wait(NULL, &t), t);
  CLEARED(nvfp4_handle_take(NULL, &t), t);
  CLEARED(nvfp4_linear_create(NULL, &cfg, &l), l);
  CLEARED(nvfp4_linear_create(ctx, NULL, &l), l);
  CLEARED(nvfp4_linear_forward(NULL, NULL, &t), t);
  CLEARED(nvfp4_linear_operand_get(NULL, NVFP4_LIN_WEIGHT, &ct), ct);
  dx = dw = db = (nvfp4_tensor *)(void *)&poison;
  assert_int_equal(nvfp4_linear_backward(NULL, NULL, &dx, &dw, &db), NVFP4_EINVAL);
  assert_null(dx);
  assert_null(dw);
  assert_null(db);
#undef CLEARED
}


/* nvfp4_tensor_narrow: a [3, 4, 2] fp32 tensor cut along each dim gives the
** elements a loop over the full tensor picks; bad bounds name the value. */
static void test_narrow (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  int64_t d3[3] = {3, 4, 2};
  float x[24], got[24];
  nvfp4_tensor *t = NULL, *n = NULL, *q = NULL;
  nvfp4_shape s;
  int i, j, k;
  for (i = 0; i < 24; i++) x[i] = (float)i + 0.5f;
  assert_int_equal(nvfp4_tensor_from_host(ctx, nvfp4_shape_make(3, d3), NVFP4_F32, x,
                                          sizeof x, &t), NVFP4_OK);
  /* dim 1, elements 1..2: [3, 2, 2] */
  assert_int_equal(nvfp4_tensor_narrow(t, 1, 1, 2, &n), NVFP4_OK);
  s = nvfp4_tensor_shape(n);
  assert_int_equal(s.ndim, 3);
  assert_int_equal(s.dim[0], 3);
  assert_int_equal(s.dim[1], 2);
  assert_int_equal(s.dim[2], 2);
  assert_int_equal(nvfp4_tensor_to_host(n, got, 12 * sizeof(float)), NVFP4_OK);
  for (i = 0; i < 3; i++)
    for (j = 0; j < 2; j++)
      for (k = 0; k < 2; k++)
        assert_true(got[(i * 2 + j) * 2 + k] == x[i * 8 + (j + 1) * 2 + k]);
  nvfp4_tensor_destroy(n);
  /* dim 0, the last row (a rank's shard of the sequence): [1, 4, 2] */
  assert_int_equal(nvfp4_tensor_narrow(t, 0, 2, 1, &n), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(n, got, 8 * sizeof(float)), NVFP4_OK);
  assert_memory_equal(got, x + 16, 8 * sizeof(float));
  nvfp4_tensor_destroy(n);
  /* the last dim, one element: [3, 4, 1] holds the odd elements */
  assert_int_equal(nvfp4_tensor_narrow(t, 2, 1, 1, &n), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_to_host(n, got, 12 * sizeof(float)), NVFP4_OK);
  for (i = 0; i < 12; i++) assert_true(got[i] == x[2 * i + 1]);
  nvfp4_tensor_destroy(n);
  /* length 0 at the end: an empty [3, 0, 2] */
  assert_int_equal(nvfp4_tensor_narrow(t, 1, 4, 0, &n), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_shape(n).dim[1], 0);
  assert_int_equal(nvfp4_shape_numel(nvfp4_tensor_shape(n)), 0);
  nvfp4_tensor_destroy(n);
  /* bad bounds: EINVAL naming the value and the rule, out NULL */
  n = t;
  assert_int_equal(nvfp4_tensor_narrow(t, 3, 0, 1, &n), NVFP4_EINVAL);
  assert_null(n);
  assert_non_null(strstr(nvfp4_last_error(ctx), "dim 3 is outside 0..2 (shape [3, 4, 2])"));
  assert_int_equal(nvfp4_tensor_narrow(t, -1, 0, 1, &n), NVFP4_EINVAL);
  assert_int_equal(nvfp4_tensor_narrow(t, 1, 5, 0, &n), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "start 5 is outside 0..4 (dim 1 has size 4)"));
  assert_int_equal(nvfp4_tensor_narrow(t, 1, -1, 1, &n), NVFP4_EINVAL);
  assert_int_equal(nvfp4_tensor_narrow(t, 1, 2, 3, &n), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "start 2 + length 3 runs past dim 1 of size 4"));
  assert_int_equal(nvfp4_tensor_narrow(t, 1, 0, -1, &n), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "length -1 is negative"));
  {
    nvfp4_tensor *z = NULL;
    assert_int_equal(nvfp4_tensor_create(ctx, nvfp4_shape_make(0, NULL), NVFP4_F32, &z), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_narrow(z, 0, 0, 1, &n), NVFP4_EINVAL);
    assert_non_null(strstr(nvfp4_last_error(ctx), "a 0-d tensor has no dim to narrow"));
    nvfp4_tensor_destroy(z);
  }
  assert_int_equal(nvfp4_tensor_narrow(t, 1, 0, 1, NULL), NVFP4_EINVAL);
  assert_int_equal(nvfp4_tensor_narrow(NULL, 1, 0, 1, &n), NVFP4_EINVAL);
  assert_null(n);
  {
    int64_t d2[2] = {16, 16};
    float z[256];
    nvfp4_tensor *p = NULL;
    memset(z, 0, sizeof z);
    assert_int_equal(nvfp4_tensor_from_host(ctx, nvfp4_shape_make(2, d2), NVFP4_F32, z,
                                            sizeof z, &p), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, p, NULL, &q), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_narrow(q, 0, 0, 1, &n), NVFP4_EINVAL);
    assert_non_null(strstr(nvfp4_last_error(ctx), "the tensor is fp4"));
    nvfp4_tensor_destroy(p);
  }
  /* the input is untouched */
  assert_int_equal(nvfp4_tensor_to_host(t, got, sizeof x), NVFP4_OK);
  assert_memory_equal(got, x, sizeof x);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(t);
}


/* x quantized with o1 and with o2 differ, nvfp4_tensor_equal saying why. */
static void equal_says (nvfp4_ctx *ctx, const nvfp4_tensor *x, const nvfp4_qopts *o1,
                        const nvfp4_qopts *o2, const char *why_expected) {
  nvfp4_tensor *q1 = NULL, *q2 = NULL;
  char why[160];
  int eq = -1;
  assert_int_equal(nvfp4_quantize(ctx, x, o1, &q1), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, x, o2, &q2), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(q1, q2, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 0);
  assert_string_equal(why, why_expected);
  nvfp4_tensor_destroy(q1);
  nvfp4_tensor_destroy(q2);
}


/* nvfp4_tensor_equal: equal copies; each way two tensors can differ is
** reported with its first difference; the reason is cut to why_len. */
static void test_equal (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state, *other = NULL;
  int64_t d2[2] = {32, 16};
  float x[512];
  nvfp4_tensor *a = NULL, *b = NULL, *r = NULL, *c = NULL, *qa = NULL, *qb = NULL,
               *qr = NULL, *o = NULL;
  nvfp4_qopts both;
  char why[160], small[8];
  int eq = -1, i;
  for (i = 0; i < 512; i++) x[i] = (float)((i * 37) % 101) / 8.0f - 6.0f;
  assert_int_equal(nvfp4_tensor_from_host(ctx, nvfp4_shape_make(2, d2), NVFP4_F32, x,
                                          sizeof x, &a), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_clone(a, &b), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(a, b, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 1);
  assert_string_equal(why, "");
  /* one element changed: its first byte that differs (little-endian fp32) */
  nvfp4_tensor_destroy(b);
  x[5] = -x[5];
  assert_int_equal(nvfp4_tensor_from_host(ctx, nvfp4_shape_make(2, d2), NVFP4_F32, x,
                                          sizeof x, &b), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(a, b, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 0);
  {
    unsigned char u[4], v[4];
    float was = -x[5];
    memcpy(u, &was, 4);
    memcpy(v, &x[5], 4);
    for (i = 0; i < 4 && u[i] == v[i]; i++) ;
    assert_non_null(strstr(why, "elements: first difference at byte "));
    assert_non_null(strstr(why, " (0-based) of 2048: 0x"));
    assert_int_equal(atoi(why + strlen("elements: first difference at byte ")), 20 + i);
  }
  /* cut to why_len, NUL-terminated; NULL why is allowed */
  assert_int_equal(nvfp4_tensor_equal(a, b, &eq, small, sizeof small), NVFP4_OK);
  assert_int_equal(eq, 0);
  assert_string_equal(small, "element");
  eq = -1;
  assert_int_equal(nvfp4_tensor_equal(a, b, &eq, NULL, 0), NVFP4_OK);
  assert_int_equal(eq, 0);
  /* shape, then dtype */
  {
    int64_t d3[2] = {16, 32};
    assert_int_equal(nvfp4_tensor_reshape(a, nvfp4_shape_make(2, d3), &r), NVFP4_OK);
  }
  assert_int_equal(nvfp4_tensor_equal(a, r, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 0);
  assert_string_equal(why, "tensors differ: fp32 [32, 16] vs fp32 [16, 32]");
  assert_int_equal(nvfp4_tensor_convert(a, NVFP4_BF16, &c), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(a, c, &eq, why, sizeof why), NVFP4_OK);
  assert_string_equal(why, "tensors differ: fp32 [32, 16] vs bf16 [32, 16]");
  /* FP4: the same quantization is equal; usages, amaxes and codes differ */
  memset(&both, 0, sizeof both);
  both.rowwise = both.columnwise = 1;
  assert_int_equal(nvfp4_quantize(ctx, a, &both, &qa), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, a, &both, &qb), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(qa, qb, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 1);
  assert_int_equal(nvfp4_quantize(ctx, a, NULL, &qr), NVFP4_OK);      /* rowwise only */
  assert_int_equal(nvfp4_tensor_equal(qa, qr, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 0);
  assert_string_equal(why, "columnwise usage: present vs absent");
  nvfp4_tensor_destroy(qb);
  both.has_amax = 1;                      /* amax 8: other scales, other amax */
  both.amax[0] = both.amax[1] = 8.0f;
  assert_int_equal(nvfp4_quantize(ctx, a, &both, &qb), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(qa, qb, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 0);
  assert_non_null(strstr(why, "rowwise_data: first difference at byte "));   /* data before scales */
  nvfp4_tensor_destroy(qr);             /* element 5 negated: its code's sign bit */
  assert_int_equal(nvfp4_quantize(ctx, b, &both, &qr), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(qb, qr, &eq, why, sizeof why), NVFP4_OK);
  assert_int_equal(eq, 0);
  assert_non_null(strstr(why, "rowwise_data: first difference at byte 2 (0-based) of 256: 0x"));
  /* what the bytes mean: the RHT'd columnwise copy, 4over6's E4M3 maximum 256 */
  {
    nvfp4_tensor *xb = NULL;
    nvfp4_qopts o1, o2;
    assert_int_equal(nvfp4_tensor_convert(a, NVFP4_BF16, &xb), NVFP4_OK);
    memset(&o1, 0, sizeof o1);
    o1.columnwise = 1;
    o2 = o1;
    o2.rht = 1;
    equal_says(ctx, xb, &o1, &o2, "decoded differently: no RHT, E4M3 maximum 448 vs RHT, E4M3 maximum 448");
    memset(&o1, 0, sizeof o1);
    o2 = o1;
    o2.four_over_six = 1;
    equal_says(ctx, xb, &o2, &o1, "decoded differently: no RHT, E4M3 maximum 256 vs no RHT, E4M3 maximum 448");
    nvfp4_tensor_destroy(xb);
  }
  /* the same bytes with another amax */
  {
    uint8_t data[16 * 8], scale[128 * 4];
    float am1[2] = {2688.0f, 0.0f}, am2[2] = {2.5f, 0.0f};
    nvfp4_tensor *f1 = NULL, *f2 = NULL;
    memset(data, 0x21, sizeof data);
    memset(scale, 0x38, sizeof scale);
    assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL,
                                                am1, &f1), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL,
                                                am2, &f2), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_equal(f1, f2, &eq, why, sizeof why), NVFP4_OK);
    assert_int_equal(eq, 0);
    assert_string_equal(why, "rowwise amax: 2688.000000 vs 2.500000");
    nvfp4_tensor_destroy(f1);
    nvfp4_tensor_destroy(f2);
  }
  /* errors: NULL equal, NULL tensors, a tensor of another context */
  assert_int_equal(nvfp4_tensor_equal(a, b, NULL, why, sizeof why), NVFP4_EINVAL);
  eq = -7;
  strcpy(why, "stale");
  assert_int_equal(nvfp4_tensor_equal(NULL, b, &eq, why, sizeof why), NVFP4_EINVAL);
  assert_int_equal(eq, 0);                /* a failure leaves 0 and "" */
  assert_string_equal(why, "");
  assert_int_equal(nvfp4_tensor_equal(a, NULL, &eq, why, sizeof why), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "tensor_equal: b is NULL"));
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &other, NULL), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_from_host(other, nvfp4_shape_make(2, d2), NVFP4_F32, x,
                                          sizeof x, &o), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_equal(a, o, &eq, why, sizeof why), NVFP4_EUSAGE);
  assert_non_null(strstr(nvfp4_last_error(ctx), "tensor_equal: b: tensor belongs to another context"));
  nvfp4_tensor_destroy(o);
  nvfp4_ctx_destroy(other);
  nvfp4_tensor_destroy(qa); nvfp4_tensor_destroy(qb); nvfp4_tensor_destroy(qr);
  nvfp4_tensor_destroy(a); nvfp4_tensor_destroy(b); nvfp4_tensor_destroy(r);
  nvfp4_tensor_destroy(c);
}


/* BH-14: hand-made bytes assemble into an NVFP4 tensor whose buffers read back. */
static void test_fp4_from_host (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  uint8_t data[16 * 8], scale[128 * 4], back[128 * 4];
  float amax[2] = {2688.0f, 0.0f}, a = 0;
  nvfp4_tensor *q = NULL;
  const uint8_t row0[8] = {0x21, 0x43, 0x65, 0x07, 0xA9, 0xCB, 0xED, 0x8F};
  memset(data, 0, sizeof data);
  memset(scale, 0, sizeof scale);
  memcpy(data, row0, 8);
  scale[0] = 0x38;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL, amax, &q), NVFP4_OK);
  assert_true(nvfp4_tensor_has_rowwise(q));
  assert_false(nvfp4_tensor_has_columnwise(q));
  assert_int_equal(nvfp4_tensor_dtype(q), NVFP4_FP4);
  assert_int_equal(nvfp4_tensor_nominal_dtype(q), NVFP4_F32);    /* no source: fp32 */
  {   /* a quantize's result stands for its source's dtype, kept by a clone */
    nvfp4_tensor *x = NULL, *qb = NULL, *c = NULL;
    nvfp4_qopts o;
    memset(&o, 0, sizeof o);
    o.rowwise = 1;
    assert_int_equal(nvfp4_tensor_randn(ctx, shape2(16, 32), NVFP4_BF16, 3, &x), NVFP4_OK);
    assert_int_equal(nvfp4_quantize(ctx, x, &o, &qb), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_nominal_dtype(qb), NVFP4_BF16);
    assert_int_equal(nvfp4_tensor_clone(qb, &c), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_nominal_dtype(c), NVFP4_BF16);
    assert_int_equal(nvfp4_tensor_nominal_dtype(x), NVFP4_BF16);     /* a plain tensor: its own */
    assert_int_equal(nvfp4_tensor_nominal_dtype(NULL), NVFP4_F32);
    nvfp4_tensor_destroy(c); nvfp4_tensor_destroy(qb); nvfp4_tensor_destroy(x);
  }
  assert_true(nvfp4_shape_equal(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), shape2(128, 4)));
  assert_int_equal(nvfp4_tensor_buffer_read(q, NVFP4_ROWWISE_SCALE, back, sizeof scale), NVFP4_OK);
  assert_memory_equal(back, scale, sizeof scale);
  assert_int_equal(nvfp4_tensor_buffer_read(q, NVFP4_ROWWISE_DATA, back, sizeof data), NVFP4_OK);
  assert_memory_equal(back, data, sizeof data);
  assert_int_equal(nvfp4_tensor_buffer_read(q, NVFP4_ROWWISE_DATA, NULL, sizeof data), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "buffer_read: host is NULL (128 bytes of rowwise data to copy)");
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL, amax, NULL),
                   NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_fp4_from_host: out is NULL");
  assert_int_equal(nvfp4_tensor_amax(q, 0, &a), NVFP4_OK);
  assert_true(a == 2688.0f);
  assert_int_equal(nvfp4_tensor_amax(q, 1, &a), NVFP4_EUSAGE);
  assert_int_equal(nvfp4_tensor_amax(q, 5, &a), NVFP4_EINVAL);  /* not taken for columnwise */
  assert_string_equal(nvfp4_last_error(ctx), "amax: direction 5 is not 0 (rowwise) or 1 (columnwise)");
  assert_true(a == 2688.0f);
  assert_int_equal(nvfp4_tensor_buffer_read(q, NVFP4_COLUMNWISE_DATA, back, 8), NVFP4_EUSAGE);
  assert_non_null(strstr(nvfp4_last_error(ctx), "columnwise data"));
  assert_int_equal(nvfp4_tensor_to_host(q, back, 8), NVFP4_EINVAL);
  nvfp4_tensor_destroy(q);
  q = NULL;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), NULL, NULL, NULL, NULL, amax, &q), NVFP4_EINVAL);
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, NULL, NULL, NULL, amax, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_fp4_from_host: rowwise usage: row_scale is NULL but "
                                             "row_data is given (a usage needs both its data and its scale_inv)");
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, scale, amax, &q),
                   NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_fp4_from_host: columnwise usage: col_data is NULL but "
                                             "col_scale is given (a usage needs both its data and its scale_inv)");
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 24), data, scale, NULL, NULL, amax, &q), NVFP4_EINVAL);
  assert_non_null(strstr(nvfp4_last_error(ctx), "K=24"));
  assert_null(q);
  /* an amax below 0 or NaN (the global scale divides by it: dequantize gave
  ** -1 for a code worth +1), refused as quantize refuses a given one */
  amax[0] = -2688.0f;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL, amax, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_fp4_from_host: rowwise amax -2688 must be >= 0 and not NaN");
  amax[0] = 1.0f;
  amax[1] = NAN;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL, amax, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_fp4_from_host: columnwise amax nan must be >= 0 and not NaN");
  assert_null(q);
  /* a NaN with its sign bit set (0/0 on x86) reads "nan" too, not "-nan" */
  amax[1] = -NAN;
  assert_int_equal(nvfp4_tensor_fp4_from_host(ctx, shape2(16, 16), data, scale, NULL, NULL, amax, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "tensor_fp4_from_host: columnwise amax nan must be >= 0 and not NaN");
  assert_null(q);
}


/* A tensor of one context handed to another (another backend in general):
** a clear EUSAGE, nothing touched. */
static void test_foreign_context (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state, *other = NULL;
  nvfp4_tensor *t = NULL, *q = (nvfp4_tensor *)0x1;
  float in[32], out[32];
  int i;
  for (i = 0; i < 32; i++) in[i] = (float)i - 7.5f;
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &other, NULL), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_from_host(other, shape2(2, 16), NVFP4_F32, in, sizeof in, &t), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(ctx, t, NULL, &q), NVFP4_EUSAGE);
  assert_null(q);
  assert_string_equal(nvfp4_last_error(ctx), "quantize: x: tensor belongs to another context "
                                             "(cpu backend)");
  assert_int_equal(nvfp4_swap_first_dims(ctx, t, &q), NVFP4_EUSAGE);
  assert_non_null(strstr(nvfp4_last_error(ctx), "swap_first_dims: in: tensor belongs to another"));
  assert_int_equal(nvfp4_dequantize(ctx, t, NVFP4_F32, &q), NVFP4_EUSAGE);
  assert_non_null(strstr(nvfp4_last_error(ctx), "dequantize: q: tensor belongs to another"));
  /* a NULL input tensor: EINVAL naming the argument (nvfp4.h, "Conventions") */
  assert_int_equal(nvfp4_quantize(ctx, NULL, NULL, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "quantize: x: tensor is NULL");
  assert_int_equal(nvfp4_dequantize_columnwise(ctx, NULL, NVFP4_F32, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "dequantize_columnwise: q: tensor is NULL");
  assert_int_equal(nvfp4_swap_first_dims(ctx, NULL, &q), NVFP4_EINVAL);
  assert_string_equal(nvfp4_last_error(ctx), "swap_first_dims: in: tensor is NULL");
  assert_null(q);
  assert_int_equal(nvfp4_tensor_to_host(t, out, sizeof out), NVFP4_OK);
  assert_memory_equal(in, out, sizeof in);
  {
    /* rel_error took the two contexts' tensors and gave a value */
    nvfp4_tensor *r = NULL;
    double e = -1;
    assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(2, 16), NVFP4_F32, in, sizeof in, &r), NVFP4_OK);
    assert_int_equal(nvfp4_rel_error(NULL, t, r, &e), NVFP4_EUSAGE);
    assert_non_null(strstr(nvfp4_last_error(other), "rel_error: ref belongs to another context"));
    assert_true(e == -1);
    assert_int_equal(nvfp4_rel_error(NULL, r, r, &e), NVFP4_OK);
    assert_true(e == 0);
    nvfp4_tensor_destroy(r);
  }
  nvfp4_tensor_destroy(t);
  nvfp4_ctx_destroy(other);
}


/* A context destroyed before its tensors stays alive for them (it was freed,
** and destroying or reading them afterwards read freed memory: ASan and
** valgrind in CI) and is freed with the last one. */
static void test_ctx_destroyed_first (void **state) {
  nvfp4_ctx *other = NULL;
  nvfp4_tensor *a = NULL, *b = NULL;
  float in[16], out[16];
  int i;
  (void)state;
  for (i = 0; i < 16; i++) in[i] = (float)i;
  assert_int_equal(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &other, NULL), NVFP4_OK);
  assert_int_equal(nvfp4_tensor_from_host(other, shape2(1, 16), NVFP4_F32, in, sizeof in, &a), NVFP4_OK);
  assert_int_equal(nvfp4_quantize(other, a, NULL, &b), NVFP4_OK);
  nvfp4_ctx_destroy(other);
  nvfp4_ctx_destroy(other);                 /* again while kept: a no-op */
  assert_int_equal(nvfp4_tensor_to_host(a, out, sizeof out), NVFP4_OK);
  assert_memory_equal(in, out, sizeof in);
  assert_ptr_equal(nvfp4_tensor_ctx(b), other);
  nvfp4_tensor_destroy(a);
  nvfp4_tensor_destroy(b);                  /* the last: frees the context */
}


/* A quantize that computes its own amax keeps it with the new tensor (in
** the backend's memory: lib/quantize.c) until it is read.  A clone and a
** reshape taken before any read carry it, each read gives the same bits,
** the cast's bytes equal those of a cast given that amax, and dequantize
** and the GEMM read it (with and without RHT, whose columnwise amax is the
** post-RHT one). */
static void test_amax_kept_until_read (void **state) {
  nvfp4_ctx *ctx = (nvfp4_ctx *)*state;
  float x[64 * 32], want = 0.0f, am[2], ac[2], ar[2];
  nvfp4_tensor *xf = NULL, *xb = NULL, *q = NULL, *c = NULL, *r = NULL, *g = NULL,
               *dq = NULL, *dg = NULL, *mm = NULL;
  int rht, i, eq = -1;
  char why[160];
  for (i = 0; i < 64 * 32; i++) {
    x[i] = (float)((i * 53) % 211 - 105) / 16.0f;
    if (fabsf(x[i]) > want) want = fabsf(x[i]);        /* exact in bf16: k/16, |k| <= 105 */
  }
  assert_int_equal(nvfp4_tensor_from_host(ctx, shape2(64, 32), NVFP4_F32, x, sizeof x, &xf),
                   NVFP4_OK);
  assert_int_equal(nvfp4_tensor_convert(xf, NVFP4_BF16, &xb), NVFP4_OK);
  for (rht = 0; rht < 2; rht++) {
    nvfp4_qopts o, given;
    memset(&o, 0, sizeof o);
    o.rowwise = o.columnwise = 1;
    o.rht = (unsigned)rht;
    assert_int_equal(nvfp4_quantize(ctx, xb, &o, &q), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_clone(q, &c), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_reshape(q, shape2(64, 32), &r), NVFP4_OK);
    /* the clone read first, the original destroyed after that read */
    assert_int_equal(nvfp4_tensor_amax(c, 0, &ac[0]), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_amax(c, 1, &ac[1]), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_amax(q, 0, &am[0]), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_amax(q, 1, &am[1]), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_amax(r, 1, &ar[1]), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_amax(r, 0, &ar[0]), NVFP4_OK);
    assert_true(am[0] == want);
    if (!rht) assert_true(am[1] == want);
    else assert_true(am[1] > 0.0f && am[1] != want);   /* the post-RHT amax */
    assert_memory_equal(ac, am, sizeof am);
    assert_memory_equal(ar, am, sizeof am);
    /* the same bytes as a cast given that amax */
    given = o;
    given.has_amax = 1;
    given.amax[0] = am[0];
    given.amax[1] = am[1];
    assert_int_equal(nvfp4_quantize(ctx, xb, &given, &g), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_equal(c, g, &eq, why, sizeof why), NVFP4_OK);
    assert_int_equal(eq, 1);
    nvfp4_tensor_destroy(c);
    nvfp4_tensor_destroy(r);
    nvfp4_tensor_destroy(q);
    /* dequantize and the GEMM of a tensor whose amax was never read */
    assert_int_equal(nvfp4_quantize(ctx, xb, &o, &q), NVFP4_OK);
    assert_int_equal(nvfp4_dequantize(ctx, q, NVFP4_F32, &dq), NVFP4_OK);
    assert_int_equal(nvfp4_dequantize(ctx, g, NVFP4_F32, &dg), NVFP4_OK);
    assert_int_equal(nvfp4_tensor_equal(dq, dg, &eq, why, sizeof why), NVFP4_OK);
    assert_int_equal(eq, 1);
    nvfp4_tensor_destroy(q);
    assert_int_equal(nvfp4_quantize(ctx, xb, &o, &q), NVFP4_OK);
    {
      nvfp4_tensor *m2 = NULL;
      float h1[64 * 64], h2[64 * 64];
      assert_int_equal(nvfp4_gemm(ctx, q, NVFP4_ROWWISE, q, NVFP4_ROWWISE, NULL, NVFP4_F32,
                                  &mm), NVFP4_OK);
      assert_int_equal(nvfp4_gemm(ctx, g, NVFP4_ROWWISE, g, NVFP4_ROWWISE, NULL, NVFP4_F32,
                                  &m2), NVFP4_OK);
      assert_int_equal(nvfp4_tensor_to_host(mm, h1, sizeof h1), NVFP4_OK);
      assert_int_equal(nvfp4_tensor_to_host(m2, h2, sizeof h2), NVFP4_OK);
      assert_memory_equal(h1, h2, sizeof h1);
      assert_true(h1[0] > 0.0f);                  /* x[0]^2 summed: not all zero */
      nvfp4_tensor_destroy(m2);
    }
    nvfp4_tensor_destroy(mm);
    nvfp4_tensor_destroy(dq);
    nvfp4_tensor_destroy(dg);
    nvfp4_tensor_destroy(g);
    nvfp4_tensor_destroy(q);
  }
  nvfp4_tensor_destroy(xb);
  nvfp4_tensor_destroy(xf);
}


static void test_status_strings (void **state) {
  assert_string_equal(nvfp4_status_string(NVFP4_OK), "ok");
  assert_string_equal(nvfp4_status_string(NVFP4_EINVAL), "invalid argument");
  assert_string_equal(nvfp4_status_string((nvfp4_status)999), "unknown status");
  assert_string_equal(nvfp4_dtype_name(NVFP4_BF16), "bf16");
  assert_int_equal(nvfp4_dtype_size(NVFP4_F32), 4);
  assert_int_equal(nvfp4_dtype_size(NVFP4_FP4), 0);
}


int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_status_strings),
    cmocka_unit_test_setup_teardown(test_ctx_backend_and_env, setup, teardown),
    cmocka_unit_test_setup_teardown(test_round_trip_f32_bf16, setup, teardown),
    cmocka_unit_test_setup_teardown(test_convert, setup, teardown),
    cmocka_unit_test_setup_teardown(test_create_zeroed_and_empty, setup, teardown),
    cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
    cmocka_unit_test_setup_teardown(test_fp4_from_host, setup, teardown),
    cmocka_unit_test_setup_teardown(test_narrow, setup, teardown),
    cmocka_unit_test_setup_teardown(test_equal, setup, teardown),
    cmocka_unit_test_setup_teardown(test_amax_kept_until_read, setup, teardown),
    cmocka_unit_test_setup_teardown(test_outputs_null_after_failure, setup, teardown),
    cmocka_unit_test_setup_teardown(test_foreign_context, setup, teardown),
    cmocka_unit_test(test_ctx_destroyed_first),
    cmocka_unit_test_setup_teardown(test_ctx_memory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
