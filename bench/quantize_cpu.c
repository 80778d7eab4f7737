/*
** quantize_cpu.c -- CPU reference quantize throughput: a bf16 [M, K]
** tensor (default 8192 x 8192) quantized rowwise + columnwise (1D blocks,
** RNE) on the CPU backend.  Prints seconds, GB/s counted as 3.125 bytes per
** element (2 in, 2 x (0.5 + 1/16) out; design.md "Performance model") and
** the ratio to memcpy's bandwidth, measured in this run on a copy of that
** many bytes and counted as cuda_bench counts its copy: read + write, 2 x
** its size (a memcpy of B bytes moves 2B, the quantize 3.125 B/element).
** Usage: quantize_cpu [M K [reps]]
*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nvfp4.h"
#include "bench_args.h"


static double now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


int main (int argc, char **argv) {
  int64_t d[2] = {8192, 8192}, n, i;
  int reps = 3, r;
  nvfp4_ctx *ctx = NULL;
  nvfp4_tensor *x = NULL, *q = NULL;
  nvfp4_qopts o;
  uint16_t *h;
  uint64_t s = 88172645463325252ull;
  double best = 1e30, mbest = 1e30, bytes;
  char *src, *dst;
  if (argc == 2 || argc > 4) {
    fprintf(stderr, "usage: quantize_cpu [M K [reps]]\n");
    return 2;
  }
  if (argc >= 3) {
    d[0] = bench_positive(argv[1], 1ll << 40);
    d[1] = bench_positive(argv[2], 1ll << 40);
    if (d[0] == 0 || d[1] == 0 || d[0] % 16 != 0 || d[1] % 16 != 0 || d[0] > (1ll << 40) / d[1]) {
      fprintf(stderr, "quantize_cpu: [M, K] = [%s, %s]: M and K must be positive multiples of 16 "
              "(the block size; M for the columnwise copy), M * K at most 2^40\n", argv[1], argv[2]);
      return 2;
    }
  }
  if (argc >= 4 && (reps = (int)bench_positive(argv[3], INT_MAX)) == 0) {
    fprintf(stderr, "quantize_cpu: reps '%s' must be a positive integer\n", argv[3]);
    return 2;
  }
  n = d[0] * d[1];
  bytes = 3.125 * (double)n;
  if (nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL) != NVFP4_OK) {
    fprintf(stderr, "quantize_cpu: cannot create a CPU context\n");
    return 1;
  }
  h = (uint16_t *)malloc((size_t)n * 2);
  if (h == NULL) {
    fprintf(stderr, "quantize_cpu: out of memory (%.0f MB of input)\n", (double)n * 2 / 1e6);
    return 1;
  }
  for (i = 0; i < n; i++) {           /* xorshift64: bf16 values in about +-4 */
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    h[i] = (uint16_t)(0x3c00u + (s >> 52) % 0x0500u) | (uint16_t)((s & 1) << 15);
  }
  if (nvfp4_tensor_from_host(ctx, nvfp4_shape_make(2, d), NVFP4_BF16, h, (size_t)n * 2,
                             &x) != NVFP4_OK) {
    fprintf(stderr, "%s\n", nvfp4_last_error(ctx));
    return 1;
  }
  free(h);
  memset(&o, 0, sizeof o);
  o.rowwise = o.columnwise = 1;
  for (r = 0; r < reps; r++) {
    double t0 = now(), t;
    if (nvfp4_quantize(ctx, x, &o, &q) != NVFP4_OK) {
      fprintf(stderr, "quantize: %s\n", nvfp4_last_error(ctx));
      return 1;
    }
    t = now() - t0;
    if (t < best) best = t;
    nvfp4_tensor_destroy(q);
  }
  src = (char *)malloc((size_t)bytes);
  dst = (char *)malloc((size_t)bytes);
  if (src == NULL || dst == NULL) {
    fprintf(stderr, "quantize_cpu: out of memory (two memcpy buffers of %.0f MB)\n", bytes / 1e6);
    return 1;
  }
  memset(src, 1, (size_t)bytes);
  memset(dst, 0, (size_t)bytes);      /* fault the pages in first */
  for (r = 0; r < reps; r++) {
    double t0 = now(), t;
    memcpy(dst, src, (size_t)bytes);
    t = now() - t0;
    if (t < mbest) mbest = t;
  }
  printf("quantize bf16 [%lld, %lld] rowwise+columnwise 1D RNE (cpu, best of %d): "
         "%.3f s, %.2f GB/s; memcpy of %.0f MB (moves %.0f MB): %.3f s, %.2f GB/s; ratio %.3f "
         "(dst %d)\n",
         (long long)d[0], (long long)d[1], reps, best, bytes / best / 1e9, bytes / 1e6,
         2 * bytes / 1e6, mbest, 2 * bytes / mbest / 1e9, (bytes / best) / (2 * bytes / mbest),
         dst[(size_t)bytes / 2]);
  free(src); free(dst);
  nvfp4_tensor_destroy(x);
  nvfp4_ctx_destroy(ctx);
  return 0;
}
