/*
** ref_quantize.h -- the CPU reference numerics (backend entries).  Arguments
** are validated by lib/quantize.c before these are called.
*/
#ifndef NVFP4_REF_QUANTIZE_H
#define NVFP4_REF_QUANTIZE_H

#include "nvfp4_int.h"

NVFP4I_FUNC nvfp4_status nvfp4i_ref_amax (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                          int rht, unsigned sign_mask,
                                          float amax[2]);
NVFP4I_FUNC nvfp4_status nvfp4i_ref_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x,
                                              const nvfp4_qopts *o, nvfp4_tensor *q);
NVFP4I_FUNC nvfp4_status nvfp4i_ref_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q,
                                                nvfp4_tensor *out);

#endif
