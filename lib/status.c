/*
** status.c -- status strings, the per-context error message, and the
** library's host allocations (with the test knob that makes one fail).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "nvfp4_int.h"


static const char *const status_string[NVFP4_NSTATUS] = {
  [NVFP4_OK] = "ok",
  [NVFP4_EINVAL] = "invalid argument",
  [NVFP4_EUSAGE] = "invalid usage",
  [NVFP4_ENOMEM] = "out of memory",
  [NVFP4_ENOTSUP] = "not supported by this backend",
  [NVFP4_EMISMATCH] = "ranks disagree",
  [NVFP4_EPEER] = "another rank failed",
  [NVFP4_ECUDA] = "CUDA error",
  [NVFP4_ECUBLAS] = "cuBLAS error",
  [NVFP4_ENCCL] = "NCCL error",
  [NVFP4_EMPI] = "MPI error",
};


const char *nvfp4_status_string (nvfp4_status s) {
  if ((int)s < 0 || s >= NVFP4_NSTATUS || status_string[s] == NULL)
    return "unknown status";
  return status_string[s];
}


nvfp4_status nvfp4i_fail (nvfp4_ctx *ctx, nvfp4_status st, const char *fmt, ...) {
  va_list ap;
  if (ctx == NULL) return st;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return st;
}


/* The allocation failure injected by nvfp4i_alloc_fail_after: how many
** allocations remain before the one that fails (0: none armed), and
** whether it has failed since. */
static long alloc_countdown;
static int alloc_fired;

void nvfp4i_alloc_fail_after (long n) {
  alloc_countdown = n > 0 ? n : 0;
  alloc_fired = 0;
}

int nvfp4i_alloc_fired (void) {
  return alloc_fired;
}

int nvfp4i_alloc_refused (void) {
  if (alloc_countdown == 0 || --alloc_countdown > 0) return 0;
  alloc_fired = 1;
  return 1;
}

void *nvfp4i_malloc (size_t n) {
  return nvfp4i_alloc_refused() ? NULL : malloc(n);
}

void *nvfp4i_calloc (size_t n, size_t size) {
  return nvfp4i_alloc_refused() ? NULL : calloc(n, size);
}
