/*
** ctx.c -- the context: a backend table picked once, its state, and the
** last error message (kept here, never in a global: style.md §3.13).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "nvfp4_int.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif


/* The text of a refused nvfp4_ctx_create that names a value (there is no
** context to keep it in): one per thread, valid until that thread's next
** nvfp4_ctx_create. */
static _Thread_local char create_why[NVFP4I_ERRLEN + 64];

/* want AUTO: $NVFP4_BACKEND, then CUDA if built and usable, then CPU
** (BLIS_ARCH_TYPE-style override).  NULL with *why set: not possible. */
static const nvfp4_backend_ops *pick_backend (nvfp4_backend want, const char **why) {
  const char *env = getenv("NVFP4_BACKEND");
  if (want == NVFP4_BACKEND_AUTO && env != NULL && *env != '\0') {
    if (strcmp(env, "cpu") == 0) want = NVFP4_BACKEND_CPU;
    else if (strcmp(env, "cuda") == 0) want = NVFP4_BACKEND_CUDA;
    else {
      snprintf(create_why, sizeof create_why, "NVFP4_BACKEND='%.100s': must be 'cpu' or 'cuda'", env);
      *why = create_why;
      return NULL;
    }
  }
  if (want == NVFP4_BACKEND_CPU) return &nvfp4i_cpu_ops;
#ifdef HAVE_CUDA
  if (nvfp4i_cuda_usable(why)) return &nvfp4i_cuda_ops;
#else
  *why = "this build has no CUDA backend (configure --with-cuda)";
#endif
  return (want == NVFP4_BACKEND_CUDA) ? NULL : &nvfp4i_cpu_ops;
}


nvfp4_status nvfp4_ctx_create (nvfp4_backend want, nvfp4_ctx **out,
                               const char **errmsg) {
  const char *why = "";
  const nvfp4_backend_ops *ops;
  nvfp4_ctx *ctx;
  nvfp4_status st;
  if (errmsg) *errmsg = "";
  if (out == NULL) {
    if (errmsg) *errmsg = "ctx_create: out is NULL";
    return NVFP4_EINVAL;
  }
  *out = NULL;
  if (want != NVFP4_BACKEND_AUTO && want != NVFP4_BACKEND_CPU && want != NVFP4_BACKEND_CUDA) {
    snprintf(create_why, sizeof create_why, "backend %d is not NVFP4_BACKEND_AUTO (0), "
             "NVFP4_BACKEND_CPU (1) or NVFP4_BACKEND_CUDA (2)", (int)want);
    if (errmsg) *errmsg = create_why;
    return NVFP4_EINVAL;
  }
  ops = pick_backend(want, &why);
  if (ops == NULL) {
    if (errmsg) *errmsg = why;
    return (getenv("NVFP4_BACKEND") && want == NVFP4_BACKEND_AUTO &&
            strcmp(getenv("NVFP4_BACKEND"), "cuda") != 0)
           ? NVFP4_EINVAL : NVFP4_ENOTSUP;
  }
  ctx = (nvfp4_ctx *)nvfp4i_calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    if (errmsg) *errmsg = "ctx_create: out of memory";
    return NVFP4_ENOMEM;
  }
  ctx->ops = ops;
  if (ops->init != NULL && (st = ops->init(ctx)) != NVFP4_OK) {
    /* the backend's reason (its failing call, or the rule), then what it
    ** had set up before it failed, undone */
    snprintf(create_why, sizeof create_why, "%s backend set-up failed: %s", ops->name,
             ctx->err[0] != '\0' ? ctx->err : nvfp4_status_string(st));
    if (errmsg) *errmsg = create_why;
    if (ops->fini != NULL) ops->fini(ctx);
    free(ctx);
    return st;
  }
  *out = ctx;
  return NVFP4_OK;
}


static void ctx_free (nvfp4_ctx *ctx) {
  if (ctx->ops->fini != NULL) ctx->ops->fini(ctx);
  free(ctx);
}


void nvfp4i_ctx_hold (nvfp4_ctx *ctx) {
  ctx->live++;
}


void nvfp4i_ctx_release (nvfp4_ctx *ctx) {
  if (--ctx->live == 0 && ctx->closing) ctx_free(ctx);
}


void nvfp4_ctx_destroy (nvfp4_ctx *ctx) {
  if (ctx == NULL || ctx->closing) return;
  if (ctx->live > 0) ctx->closing = 1;
  else ctx_free(ctx);
}


const char *nvfp4_ctx_backend (const nvfp4_ctx *ctx) {
  return ctx ? ctx->ops->name : "none";
}


const char *nvfp4_last_error (const nvfp4_ctx *ctx) {
  return ctx ? ctx->err : "no context";
}


size_t nvfp4_ctx_memory (const nvfp4_ctx *ctx) {
  return ctx ? ctx->mem : 0;
}


nvfp4_status nvfp4_ctx_sync (nvfp4_ctx *ctx) {
  if (ctx == NULL) return NVFP4_EINVAL;
  return ctx->ops->sync ? ctx->ops->sync(ctx) : NVFP4_OK;
}


const char *nvfp4_version_string (void) {
  static _Thread_local char buf[160];          /* each thread's own (nvfp4.h) */
  int n = snprintf(buf, sizeof buf, "nvfp4 %s", NVFP4_VERSION);
#ifdef HAVE_CUDA
  {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    n += snprintf(buf + n, sizeof buf - (size_t)n, ", CUDA runtime %d.%d",
                  rt / 1000, (rt % 1000) / 10);
  }
#endif
#ifdef HAVE_NCCL
  snprintf(buf + n, sizeof buf - (size_t)n, ", NCCL %d.%d.%d", NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH);
#endif
  (void)n;
  return buf;
}
