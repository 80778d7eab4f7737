/*
** consumer.c -- a downstream program, built by tests/install/installed.sh
** (make installcheck) against the installed headers and library only, with
** the flags `pkg-config --cflags --libs nvfp4` gives; as C, and as C++.
** Each rank quantizes a [32, 1, 64] bf16 shard and the ranks all-gather it
** along dim 0 (the gathered columnwise data is 2-D, [64, 32 * size / 2]).
** Prints "consumer: ok ..." on rank 0; exit status 1 on any failure.
*/
#include <stdio.h>
#include <nvfp4.h>
#include <nvfp4_mpi.h>

#define CHECK(call) do {                                                  \
    nvfp4_status s_ = (call);                                             \
    if (s_ != NVFP4_OK) {                                                 \
      fprintf(stderr, "consumer: %s: %s\n", #call,                        \
              ctx != NULL ? nvfp4_last_error(ctx) : nvfp4_status_string(s_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                       \
    }                                                                     \
  } while (0)

int main (int argc, char **argv) {
  nvfp4_ctx *ctx = NULL;
  nvfp4_comm *world = NULL;
  nvfp4_tensor *x = NULL, *g = NULL;
  nvfp4_qopts q = {0};
  nvfp4_gather_opts go = {0};
  int64_t dims[3] = {32, 1, 64};
  char buf[64];
  int size;
  nvfp4_shape cw;
  MPI_Init(&argc, &argv);
  CHECK(nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL));
  CHECK(nvfp4_comm_create_mpi(ctx, MPI_COMM_WORLD, &world));
  size = nvfp4_comm_size(world);
  CHECK(nvfp4_tensor_randn(ctx, nvfp4_shape_make(3, dims), NVFP4_BF16,
                           1 + (uint64_t)nvfp4_comm_rank(world), &x));
  q.rowwise = q.columnwise = 1;
  go.quant = &q;
  CHECK(nvfp4_all_gather(world, x, &go, &g));
  cw = nvfp4_tensor_buffer_shape(g, NVFP4_COLUMNWISE_DATA);
  if (cw.ndim != 2 || cw.dim[0] != 64 || cw.dim[1] != 16 * size) {
    fprintf(stderr, "consumer: columnwise data %s, expected [64, %d]\n",
            nvfp4_shape_format(cw, buf, sizeof buf), 16 * size);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (nvfp4_comm_rank(world) == 0)
    printf("consumer: ok, %s, %d ranks, gathered %s\n", nvfp4_version_string(), size,
           nvfp4_shape_format(nvfp4_tensor_shape(g), buf, sizeof buf));
  nvfp4_tensor_destroy(g);
  nvfp4_tensor_destroy(x);
  nvfp4_comm_destroy(world);
  nvfp4_ctx_destroy(ctx);
  MPI_Finalize();
  return 0;
}
