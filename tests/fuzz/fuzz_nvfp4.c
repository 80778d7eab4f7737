/*
** fuzz_nvfp4.c -- libFuzzer target for the shape rules and the quantizer's
** input validation (issue: reliability).  Build: make fuzz (needs clang);
** run: tests/fuzz/fuzz_nvfp4 tests/fuzz/corpus -max_total_time=60.
**
** The input is read as: 1 byte ndim (mod 6), ndim x 2-byte dims (some
** steered to multiples of 16), 1 byte option bits, 1 byte dtype, then the
** element bytes.  Properties checked (abort on violation):
**  - every shape rule is total (no crash, no negative results for dims >= 0);
**  - nvfp4_quantize succeeds iff nvfp4_shape_check_quantizable does and the
**    options are consistent; on failure the message is non-empty and the
**    output pointer stays NULL;
**  - on success each buffer has exactly the shape its rule gives, the scale
**    padding is 0x00, and the rowwise dequantization is finite for finite,
**    bounded inputs;
**  - the flat2d rule always gives scale width M/16 and never exceeds it.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvfp4.h"

#define REQUIRE(c)  do { if (!(c)) { fprintf(stderr, "violated: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static nvfp4_ctx *ctx;


static int64_t rd16 (const uint8_t **p, size_t *n) {
  int64_t v = 0;
  if (*n >= 2) { v = (*p)[0] | ((*p)[1] << 8); *p += 2; *n -= 2; }
  return v;
}


static void check_rules (nvfp4_shape x) {
  nvfp4_cw_bookkeeping f = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, x);
  nvfp4_cw_bookkeeping d = nvfp4_cw_rule_apply(NVFP4_CW_ND, x);
  REQUIRE(f.scale_width == 2 * (nvfp4_shape_M(x) / 2) / 16);
  REQUIRE(d.scale_width >= 0 && d.packed_cols >= 0);
  if (x.ndim >= 2 && nvfp4_shape_M(x) % 16 == 0 && x.dim[x.ndim - 2] % 2 == 0)
    REQUIRE(d.scale_width == f.scale_width);
  REQUIRE(nvfp4_rowwise_scale_shape(x).dim[0] % 128 == 0);
  REQUIRE(nvfp4_columnwise_scale_shape(x).dim[1] % 4 == 0);
}


static void check_padding (const nvfp4_tensor *q, nvfp4_buffer b, int64_t rows, int64_t cols) {
  nvfp4_shape s = nvfp4_tensor_buffer_shape(q, b);
  size_t n = (size_t)nvfp4_shape_numel(s);
  uint8_t *buf = malloc(n ? n : 1);
  int64_t r, c;
  REQUIRE(buf != NULL);
  REQUIRE(nvfp4_tensor_buffer_read(q, b, buf, n) == NVFP4_OK);
  for (r = 0; r < s.dim[0]; r++)
    for (c = 0; c < s.dim[1]; c++)
      if (r >= rows || c >= cols) REQUIRE(buf[r * s.dim[1] + c] == 0);
  free(buf);
}


int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  int64_t dims[NVFP4_MAX_DIMS];
  nvfp4_shape x;
  nvfp4_qopts o;
  nvfp4_tensor *t = NULL, *q = NULL, *dq = NULL;
  nvfp4_dtype dt;
  nvfp4_status st;
  char msg[256];
  int i, nd, bits, finite = 1;
  size_t numel, esz, k;
  uint8_t *host;
  if (ctx == NULL && nvfp4_ctx_create(NVFP4_BACKEND_CPU, &ctx, NULL) != NVFP4_OK) abort();
  if (size < 3) return 0;
  nd = data[0] % 6; data++; size--;
  for (i = 0; i < nd; i++) {
    int64_t v = rd16(&data, &size);
    dims[i] = (v & 0x8000) ? (v & 0x7) * 16 : (v & 0x3f);   /* small; half steered to %16 */
  }
  x = nvfp4_shape_make(nd, dims);
  check_rules(x);
  if (size < 2) return 0;
  bits = data[0]; dt = (data[1] & 1) ? NVFP4_BF16 : NVFP4_F32; data += 2; size -= 2;
  numel = (size_t)nvfp4_shape_numel(x);
  if (numel > 4096) return 0;
  esz = nvfp4_dtype_size(dt);
  host = calloc(numel ? numel : 1, esz);
  if (host == NULL) return 0;
  memcpy(host, data, size < numel * esz ? size : numel * esz);
  for (k = 0; k < numel; k++) {          /* bounded finite inputs make dequant finite */
    float v = dt == NVFP4_F32 ? ((float *)host)[k] : 0.0f;
    if (dt == NVFP4_BF16) {           /* |x| < 1e30: fl(sf * amax) cannot overflow (§10) */
      union { uint32_t u; float f; } b;
      b.u = (uint32_t)((uint16_t *)host)[k] << 16;
      v = b.f;
    }
    if (!(fabsf(v) < 1e30f)) finite = 0;
  }
  if (nvfp4_tensor_from_host(ctx, x, dt, host, numel * esz, &t) != NVFP4_OK) { free(host); return 0; }
  memset(&o, 0, sizeof o);
  o.rowwise = bits & 1; o.columnwise = (bits >> 1) & 1; o.rht = (bits >> 2) & 1;
  o.sr = (bits >> 3) & 1; o.two_d = (bits >> 4) & 1; o.rht_no_signs = (bits >> 5) & 1;
  o.sr_seed = (uint64_t)bits * 7919u;
  if (!o.rowwise && !o.columnwise) o.rowwise = 1;
  st = nvfp4_quantize(ctx, t, &o, &q);
  {
    int shape_ok = nvfp4_shape_check_quantizable(x, o.rowwise, o.columnwise, msg, sizeof msg) == NVFP4_OK;
    int opts_ok = !(o.rht && (dt != NVFP4_BF16 || !o.columnwise)) && !(o.two_d && (o.rht || o.sr)) &&
                  !(o.rht_no_signs && !o.rht);
    if (st == NVFP4_OK) REQUIRE(shape_ok && opts_ok);
    else {
      REQUIRE(q == NULL);
      REQUIRE(nvfp4_last_error(ctx)[0] != '\0');
      if (shape_ok && opts_ok) REQUIRE(st == NVFP4_ENOMEM);
    }
  }
  if (st == NVFP4_OK) {
    REQUIRE(nvfp4_shape_equal(nvfp4_tensor_shape(q), x));
    if (o.rowwise) {
      REQUIRE(nvfp4_shape_equal(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_DATA), nvfp4_rowwise_data_shape(x)));
      REQUIRE(nvfp4_shape_equal(nvfp4_tensor_buffer_shape(q, NVFP4_ROWWISE_SCALE), nvfp4_rowwise_scale_shape(x)));
      check_padding(q, NVFP4_ROWWISE_SCALE, nvfp4_shape_M(x), nvfp4_shape_K(x) / 16);
      REQUIRE(nvfp4_dequantize(ctx, q, NVFP4_F32, &dq) == NVFP4_OK);
      if (finite) {
        float *v = malloc(numel * 4 + 4);
        REQUIRE(v != NULL);
        REQUIRE(nvfp4_tensor_to_host(dq, v, numel * 4) == NVFP4_OK);
        for (k = 0; k < numel; k++) REQUIRE(isfinite(v[k]));
        free(v);
      }
      nvfp4_tensor_destroy(dq);
    }
    if (o.columnwise) {
      REQUIRE(nvfp4_shape_equal(nvfp4_tensor_buffer_shape(q, NVFP4_COLUMNWISE_DATA), nvfp4_columnwise_data_shape(x)));
      check_padding(q, NVFP4_COLUMNWISE_SCALE, nvfp4_shape_K(x), nvfp4_shape_M(x) / 16);
    }
  }
  nvfp4_tensor_destroy(q);
  nvfp4_tensor_destroy(t);
  free(host);
  return 0;
}
