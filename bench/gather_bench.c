/*
** gather_bench.c -- the NVFP4 all-gather (rowwise + columnwise, with the
** columnwise de-interleave and re-pad) of a grad_output shard [S/TP, B, H],
** against, measured in the same run:
**   - a plain all-gather of the same number of bytes in one buffer (the
**     bound: on the nccl transport, one ncclAllGather);
**   - a bf16 all-gather of the unquantized shard (why NVFP4 gathers exist).
** A benchmark, not a test.  Bus bandwidth as nccl-tests defines it for an
** all-gather: busbw = (total gathered bytes / time) * (n - 1) / n.
**
**   mpirun -np TP bench/gather_bench [S B H [iterations]]   (default 8192 1 8192 20)
**
** Both timed calls include the library's cross-rank metadata check and the
** output allocation, as a user's call would.
**
** Then the quantize that makes the shard, with its amax reduced over the
** group (amax_group) against the same quantize with the local amax: on the
** nccl transport the reduction runs on the device and the call returns
** before the GPU is done ("host time per call"); on the staged transport the
** amax is read back for it, and the host waits for the amax pass.
*/
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>
#include "nvfp4.h"
#include "nvfp4_mpi.h"
#include "bench_args.h"

static nvfp4_ctx *ctx;
static int rank;


#define OK(call) do { nvfp4_status s_ = (call); if (s_ != NVFP4_OK) { \
  fprintf(stderr, "[rank %d] %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__, #call, \
          nvfp4_status_string(s_), nvfp4_last_error(ctx)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)


/* Seconds per call, the slowest rank's (warm-up first). */
typedef nvfp4_status (*gather_fn) (nvfp4_comm *, const nvfp4_tensor *, const void *,
                                   nvfp4_tensor **);

static nvfp4_status fp4_gather (nvfp4_comm *c, const nvfp4_tensor *x, const void *g,
                                nvfp4_tensor **out) {
  return nvfp4_all_gather(c, x, (const nvfp4_gather_opts *)g, out);
}

static nvfp4_status plain_gather (nvfp4_comm *c, const nvfp4_tensor *x, const void *g,
                                  nvfp4_tensor **out) {
  return nvfp4_all_gather_plain(c, x, out);
}


static nvfp4_status quant_call (nvfp4_comm *c, const nvfp4_tensor *x, const void *o,
                                nvfp4_tensor **out) {
  (void)c;
  return nvfp4_quantize(ctx, x, (const nvfp4_qopts *)o, out);
}


/* Column+SP forward's pair: the input quantized with its amax reduced over
** c (o), then its FP4 shard gathered rowwise as it is. */
static nvfp4_status quant_gather (nvfp4_comm *c, const nvfp4_tensor *x, const void *o,
                                  nvfp4_tensor **out) {
  nvfp4_gather_opts g = {0};
  nvfp4_tensor *q = NULL;
  nvfp4_status st = nvfp4_quantize(ctx, x, (const nvfp4_qopts *)o, &q);
  g.rowwise = 1;
  if (st == NVFP4_OK) st = nvfp4_all_gather(c, q, &g, out);
  nvfp4_tensor_destroy(q);
  return st;
}


/* Seconds per call, the slowest rank's (warm-up first); *host (if not
** NULL): the seconds per call until the calls returned, before the sync. */
static double timed_host (nvfp4_comm *c, gather_fn f, const nvfp4_tensor *x, const void *g,
                          int iters, double *host) {
  nvfp4_tensor *out = NULL;
  double t0, t;
  int i;
  for (i = 0; i < 3; i++) {
    OK(f(c, x, g, &out));
    nvfp4_tensor_destroy(out);
  }
  OK(nvfp4_ctx_sync(ctx));
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  for (i = 0; i < iters; i++) {
    OK(f(c, x, g, &out));
    nvfp4_tensor_destroy(out);
  }
  if (host != NULL) {
    *host = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, host, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  OK(nvfp4_ctx_sync(ctx));
  t = (MPI_Wtime() - t0) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

static double timed (nvfp4_comm *c, gather_fn f, const nvfp4_tensor *x, const void *g,
                     int iters) {
  return timed_host(c, f, x, g, iters, NULL);
}


static size_t nbytes (nvfp4_shape s) {
  return (size_t)nvfp4_shape_numel(s);
}


int main (int argc, char **argv) {
  int64_t S = 8192, B = 1, H = 8192, Ml;
  int iters = 20, size;
  nvfp4_comm *world;
  nvfp4_tensor *x, *q = NULL, *flat;
  nvfp4_qopts o = {0};
  nvfp4_gather_opts g = {0};
  size_t per_rank;
  double t_fp4, t_flat, t_bf16, total, busf, t_qg, t_ql, h_qg, h_ql, t_qa, h_qa;
  nvfp4_qopts ol, oi;
  const char *why = "";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* every rank has the same arguments: every rank refuses them, rank 0 says why */
  if (argc != 1 && argc != 4 && argc != 5) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np TP gather_bench [S B H [iterations]]\n");
    MPI_Finalize();
    return 2;
  }
  if (argc >= 4) {
    S = bench_positive(argv[1], 1ll << 40);
    B = bench_positive(argv[2], 1ll << 40);
    H = bench_positive(argv[3], 1ll << 40);
    if (S == 0 || B == 0 || H == 0) {
      if (rank == 0)
        fprintf(stderr, "gather_bench: S B H = %s %s %s: each must be a positive integer\n", argv[1],
                argv[2], argv[3]);
      MPI_Finalize();
      return 2;
    }
  }
  if (argc >= 5 && (iters = (int)bench_positive(argv[4], 1000000)) == 0) {
    if (rank == 0) fprintf(stderr, "gather_bench: iterations '%s' must be an integer in 1..1000000\n",
                           argv[4]);
    MPI_Finalize();
    return 2;
  }
  if (nvfp4_ctx_create(NVFP4_BACKEND_AUTO, &ctx, &why) != NVFP4_OK) {
    fprintf(stderr, "no context: %s\n", why);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  OK(nvfp4_comm_create_mpi(ctx, MPI_COMM_WORLD, &world));
  if (S % size != 0) {
    if (rank == 0) fprintf(stderr, "S=%lld is not a multiple of %d ranks\n", (long long)S, size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  Ml = S / size * B;
  OK(nvfp4_tensor_randn(ctx, nvfp4_shape_make(3, (int64_t[]){S / size, B, H}), NVFP4_BF16,
                        11 + (uint64_t)rank, &x));
  /* The grad_output quantizer: both usages, RHT on the columnwise copy, SR,
  ** amax reduced over the group (what the row-parallel SP backward gathers). */
  o.rowwise = o.columnwise = o.rht = o.sr = 1;
  o.sr_seed = 5 + (uint64_t)rank;
  o.amax_group = world;
  OK(nvfp4_quantize(ctx, x, &o, &q));
  g.rowwise = g.columnwise = 1;
  /* Bytes each rank contributes: data plus unpadded scales, both directions. */
  per_rank = nbytes(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA)) + (size_t)Ml * (size_t)(H / 16)
           + nbytes(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA)) + (size_t)H * (size_t)(Ml / 16);
  OK(nvfp4_tensor_create(ctx, nvfp4_shape_make(1, (int64_t[]){(int64_t)per_rank}), NVFP4_U8, &flat));
  t_fp4 = timed(world, fp4_gather, q, &g, iters);
  t_flat = timed(world, plain_gather, flat, NULL, iters);
  t_bf16 = timed(world, plain_gather, x, NULL, iters);
  ol = o;
  ol.amax_group = NULL;
  t_qg = timed_host(world, quant_call, x, &o, iters, &h_qg);
  t_ql = timed_host(world, quant_call, x, &ol, iters, &h_ql);
  oi = o;                     /* the input quantizer of column+SP: no SR */
  oi.sr = 0;
  t_qa = timed_host(world, quant_gather, x, &oi, iters, &h_qa);
  total = (double)per_rank * size;
  busf = size > 1 ? (double)(size - 1) / size : 1.0;
  if (rank == 0) {
    printf("# NVFP4 all-gather of grad_output [S/TP, B, H] = [%lld, %lld, %lld], TP=%d, backend %s, "
           "transport %s, %d iterations\n", (long long)(S / size), (long long)B, (long long)H,
           size, nvfp4_ctx_backend(ctx), nvfp4_comm_transport(world), iters);
    printf("%-44s %10.1f us  busbw %7.1f GB/s\n", "nvfp4 gather (row+col, de-interleave, pad)",
           t_fp4 * 1e6, total / t_fp4 * busf * 1e-9);
    printf("%-44s %10.1f us  busbw %7.1f GB/s\n", "plain all-gather, same bytes, one buffer",
           t_flat * 1e6, total / t_flat * busf * 1e-9);
    printf("%-44s %10.1f us  busbw %7.1f GB/s\n", "bf16 all-gather of the unquantized shard",
           t_bf16 * 1e6, (double)nvfp4_shape_numel(nvfp4_tensor_shape(x)) * 2 * size / t_bf16 * busf * 1e-9);
    printf("ratio nvfp4 busbw / one-buffer busbw: %.3f (target >= 0.85)\n", t_flat / t_fp4);
    printf("time nvfp4 gather / bf16 gather:      %.3f\n", t_fp4 / t_bf16);
    printf("%-44s %10.1f us  host time per call %7.1f us\n",
           "quantize, amax reduced over the group", t_qg * 1e6, h_qg * 1e6);
    printf("%-44s %10.1f us  host time per call %7.1f us\n",
           "quantize, local amax", t_ql * 1e6, h_ql * 1e6);
    printf("time quantize with amax_group / local amax: %.3f\n", t_qg / t_ql);
    printf("%-44s %10.1f us  host time per call %7.1f us\n",
           "quantize (amax_group) + gather of the shard", t_qa * 1e6, h_qa * 1e6);
  }
  nvfp4_tensor_destroy(flat);
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(x);
  nvfp4_comm_destroy(world);
  nvfp4_ctx_destroy(ctx);
  MPI_Finalize();
  return 0;
}
