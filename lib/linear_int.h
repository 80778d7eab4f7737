/*
** linear_int.h -- internals shared by lib/gemm.c and lib/linear.c.
*/
#ifndef NVFP4_LINEAR_INT_H
#define NVFP4_LINEAR_INT_H

#include "nvfp4_int.h"

/* nvfp4_gemm with one extra switch: round_bf16 rounds plain fp32 operands
** to bf16 before the product (the `bf16` baseline recipe). */
NVFP4I_FUNC nvfp4_status nvfp4i_gemm_ex (nvfp4_ctx *ctx, const nvfp4_tensor *a,
                                         nvfp4_usage ua, const nvfp4_tensor *b,
                                         nvfp4_usage ub, const nvfp4_tensor *bias,
                                         nvfp4_dtype out_dt, int round_bf16,
                                         nvfp4_tensor **out);

#endif
