/* placeholder until the reference quantizer lands */
#include "ref_quantize.h"
nvfp4_status nvfp4i_ref_amax (nvfp4_ctx *ctx, const nvfp4_tensor *x, int rht, unsigned m, float a[2]) { return NVFP4_ENOTSUP; }
nvfp4_status nvfp4i_ref_quantize (nvfp4_ctx *ctx, const nvfp4_tensor *x, const nvfp4_qopts *o, nvfp4_tensor *q) { return NVFP4_ENOTSUP; }
nvfp4_status nvfp4i_ref_dequantize (nvfp4_ctx *ctx, const nvfp4_tensor *q, nvfp4_tensor *out) { return NVFP4_ENOTSUP; }
