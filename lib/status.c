/*
** status.c -- status strings and the per-context error message.
*/
#include <stdarg.h>
#include <stdio.h>
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
