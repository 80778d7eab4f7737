/*
** cuda_backend.cu -- placeholder CUDA backend table so CUDA builds link
** while the kernels are written (engineer E replaces this file).  It reports
** itself as not usable, so NVFP4_BACKEND_AUTO falls back to the CPU.
*/
#include "config.h"
#include "nvfp4_int.h"

extern "C" int nvfp4i_cuda_usable (const char **why) {
  *why = "the CUDA backend is not implemented yet";
  return 0;
}

extern "C" nvfp4_status nvfp4i_cuda_all_gather_bytes (nvfp4_comm *c, const void *send,
                                                      size_t n, void *recv) {
  return NVFP4_ENOTSUP;
}

extern "C" const nvfp4_backend_ops nvfp4i_cuda_ops = { "cuda" };
