/*
** test_shape.c -- lib/shape.c: buffer shapes of spec/nvfp4-numerics.md §6,
** the quantizability rule, and the all-gather's columnwise bookkeeping
** rules with the table of spec/sp-linear-and-gather.md §7.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "nvfp4.h"


static nvfp4_shape S (int n, ...) {
  int64_t d[NVFP4_MAX_DIMS];
  va_list ap;
  int i;
  va_start(ap, n);
  for (i = 0; i < n; i++) d[i] = va_arg(ap, int64_t);
  va_end(ap);
  return nvfp4_shape_make(n, d);
}

#define D(x) ((int64_t)(x))

static void assert_shape (nvfp4_shape got, nvfp4_shape want) {
  char a[128], b[128];
  if (!nvfp4_shape_equal(got, want))
    fail_msg("shape %s, expected %s", nvfp4_shape_format(got, a, sizeof a),
             nvfp4_shape_format(want, b, sizeof b));
}


/* Table 7.1 of spec/sp-linear-and-gather.md: per-rank local buffers. */
static const struct { int64_t S, B, H, TP; int64_t rd[3], rs[2], cd[2], cs[2]; } local_rows[] = {
  {4096, 1, 8192, 2, {2048, 1, 4096}, {2048, 512}, {8192, 1024}, {8192, 128}},
  {4096, 3, 8192, 2, {2048, 3, 4096}, {6144, 512}, {8192, 3072}, {8192, 384}},
  {4096, 2, 8192, 2, {2048, 2, 4096}, {4096, 512}, {8192, 2048}, {8192, 256}},
  {8192, 1, 8192, 4, {2048, 1, 4096}, {2048, 512}, {8192, 1024}, {8192, 128}},
  {128, 1, 256, 2, {64, 1, 128}, {128, 16}, {256, 32}, {256, 4}},
  {64, 5, 64, 2, {32, 5, 32}, {256, 4}, {64, 80}, {128, 12}},
};


static void test_local_buffer_shapes_table71 (void **state) {
  size_t i;
  for (i = 0; i < sizeof local_rows / sizeof local_rows[0]; i++) {
    nvfp4_shape x = S(3, local_rows[i].S / local_rows[i].TP, local_rows[i].B, local_rows[i].H);
    assert_shape(nvfp4_rowwise_data_shape(x), nvfp4_shape_make(3, local_rows[i].rd));
    assert_shape(nvfp4_rowwise_scale_shape(x), nvfp4_shape_make(2, local_rows[i].rs));
    assert_shape(nvfp4_columnwise_data_shape(x), nvfp4_shape_make(2, local_rows[i].cd));
    assert_shape(nvfp4_columnwise_scale_shape(x), nvfp4_shape_make(2, local_rows[i].cs));
  }
}


/* Table 7.3: gathered outputs equal the shapes of the full tensor. */
static void test_gathered_shapes_table73 (void **state) {
  assert_shape(nvfp4_columnwise_data_shape(S(3, D(4096), D(3), D(8192))), S(2, D(8192), D(6144)));
  assert_shape(nvfp4_columnwise_scale_shape(S(3, D(4096), D(3), D(8192))), S(2, D(8192), D(768)));
  assert_shape(nvfp4_rowwise_scale_shape(S(3, D(64), D(5), D(64))), S(2, D(384), D(4)));
  assert_shape(nvfp4_columnwise_scale_shape(S(3, D(64), D(5), D(64))), S(2, D(128), D(20)));
  assert_shape(nvfp4_columnwise_data_shape(S(3, D(128), D(1), D(256))), S(2, D(256), D(64)));
}


/* The columnwise copy of [S, 1, H] is 2-D [H, S/2], never [H, S, 0]. */
static void test_columnwise_shape_s1h (void **state) {
  assert_shape(nvfp4_columnwise_data_shape(S(3, D(128), D(1), D(256))), S(2, D(256), D(64)));
  assert_shape(nvfp4_columnwise_data_shape(S(4, D(16), D(8), D(4), D(512))), S(2, D(512), D(256)));
  assert_shape(nvfp4_rowwise_data_shape(S(4, D(16), D(8), D(4), D(512))), S(4, D(16), D(8), D(4), D(256)));
}


/* Table 7.2: U (unpadded columnwise scale width) under both rules. */
static const struct { int64_t S, B, H, TP, flat_u, nd_u, nd_ct; int64_t nd_t[3]; } bk_rows[] = {
  {4096, 1, 8192, 2, 128, 0, 0, {8192, 2048, 0}},
  {4096, 3, 8192, 2, 384, 256, 2048, {8192, 2048, 1}},
  {4096, 2, 8192, 2, 256, 256, 2048, {8192, 2048, 1}},
  {8192, 1, 8192, 4, 128, 0, 0, {8192, 2048, 0}},
  {128, 1, 256, 2, 4, 0, 0, {256, 64, 0}},
  {64, 5, 64, 2, 10, 8, 64, {64, 32, 2}},
};


static void test_cw_rule_table72 (void **state) {
  size_t i;
  for (i = 0; i < sizeof bk_rows / sizeof bk_rows[0]; i++) {
    nvfp4_shape x = S(3, bk_rows[i].S / bk_rows[i].TP, bk_rows[i].B, bk_rows[i].H);
    nvfp4_cw_bookkeeping f = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, x);
    nvfp4_cw_bookkeeping n = nvfp4_cw_rule_apply(NVFP4_CW_ND, x);
    assert_int_equal(f.scale_width, bk_rows[i].flat_u);
    assert_int_equal(f.rows, bk_rows[i].H);
    assert_shape(f.in_shape_t, nvfp4_columnwise_data_shape(x));
    assert_int_equal(n.scale_width, bk_rows[i].nd_u);
    assert_int_equal(n.packed_cols, bk_rows[i].nd_ct);
    assert_shape(n.in_shape_t, nvfp4_shape_make(3, bk_rows[i].nd_t));
  }
}


/* The bug report's figure is for a local [4096, 3, 8192] shard: 512, not 768. */
static void test_cw_rule_local_4096x3 (void **state) {
  nvfp4_shape x = S(3, D(4096), D(3), D(8192));
  assert_int_equal(nvfp4_cw_rule_apply(NVFP4_CW_ND, x).scale_width, 512);
  assert_int_equal(nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, x).scale_width, 768);
}


/* ND is wrong iff the second-to-last dim is odd; 2-D inputs always agree. */
static void test_cw_rule_nd_wrong_iff_odd (void **state) {
  int64_t b, c;
  for (b = 1; b <= 6; b++) {
    nvfp4_shape x = S(3, D(32), b, D(64));
    int64_t f = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, x).scale_width;
    int64_t n = nvfp4_cw_rule_apply(NVFP4_CW_ND, x).scale_width;
    if (b % 2) assert_int_equal(n, 32 * (b - 1) / 16);
    else assert_int_equal(n, f);
  }
  for (c = 1; c <= 3; c++) {
    nvfp4_shape x = S(4, D(2), D(16), c, D(64));
    int64_t f = nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, x).scale_width;
    int64_t n = nvfp4_cw_rule_apply(NVFP4_CW_ND, x).scale_width;
    assert_true((c % 2) ? n != f : n == f);
  }
  for (b = 16; b <= 64; b += 16) {
    nvfp4_shape x = S(2, b, D(64));
    assert_int_equal(nvfp4_cw_rule_apply(NVFP4_CW_ND, x).scale_width,
                     nvfp4_cw_rule_apply(NVFP4_CW_FLAT2D, x).scale_width);
  }
}


static void test_cw_rule_names (void **state) {
  nvfp4_cw_rule r = NVFP4_CW_ND;
  assert_int_equal(nvfp4_cw_rule_parse("flat2d", &r), NVFP4_OK);
  assert_int_equal(r, NVFP4_CW_FLAT2D);
  assert_int_equal(nvfp4_cw_rule_parse("nd", &r), NVFP4_OK);
  assert_int_equal(r, NVFP4_CW_ND);
  assert_int_equal(nvfp4_cw_rule_parse("2d", &r), NVFP4_EINVAL);
  assert_int_equal(nvfp4_cw_rule_parse("nd", NULL), NVFP4_EINVAL);
  assert_int_equal(r, NVFP4_CW_ND);       /* untouched on error */
  assert_int_equal(nvfp4_cw_rule_parse(NULL, &r), NVFP4_EINVAL);
  assert_string_equal(nvfp4_cw_rule_name(NVFP4_CW_FLAT2D), "flat2d");
  assert_string_equal(nvfp4_cw_rule_name(NVFP4_CW_ND), "nd");
}


/* Field cases BH-16, BH-17, BH-25 (scale shapes), BH-21 and BH-22. */
static void test_scale_shapes_field_cases (void **state) {
  assert_shape(nvfp4_rowwise_scale_shape(S(2, D(576), D(2048))), S(2, D(640), D(128)));   /* BH-16 */
  assert_shape(nvfp4_rowwise_scale_shape(S(2, D(128), D(48))), S(2, D(128), D(4)));       /* BH-17 */
  assert_shape(nvfp4_rowwise_scale_shape(S(2, D(256), D(80))), S(2, D(256), D(8)));
  assert_shape(nvfp4_rowwise_scale_shape(S(2, D(1024), D(3696))), S(2, D(1024), D(232)));
  assert_shape(nvfp4_rowwise_data_shape(S(3, D(7984), D(1), D(3072))), S(3, D(7984), D(1), D(1536))); /* BH-25 */
  assert_shape(nvfp4_rowwise_scale_shape(S(3, D(7984), D(1), D(3072))), S(2, D(8064), D(192)));
  assert_shape(nvfp4_columnwise_data_shape(S(3, D(7984), D(1), D(3072))), S(2, D(3072), D(3992)));
  assert_shape(nvfp4_columnwise_scale_shape(S(3, D(7984), D(1), D(3072))), S(2, D(3072), D(500)));
  assert_shape(nvfp4_rowwise_scale_shape(S(3, D(31936), D(1), D(3072))), S(2, D(32000), D(192)));
  assert_shape(nvfp4_columnwise_scale_shape(S(3, D(31936), D(1), D(3072))), S(2, D(3072), D(1996)));
  assert_shape(nvfp4_rowwise_data_shape(S(2, D(1), D(16))), S(2, D(1), D(8)));             /* BH-21 */
  assert_shape(nvfp4_rowwise_scale_shape(S(2, D(33), D(16))), S(2, D(128), D(4)));
  assert_shape(nvfp4_rowwise_data_shape(S(2, D(0), D(64))), S(2, D(0), D(32)));            /* BH-22 */
  assert_shape(nvfp4_rowwise_scale_shape(S(2, D(0), D(64))), S(2, D(0), D(4)));
  assert_shape(nvfp4_columnwise_data_shape(S(2, D(0), D(64))), S(2, D(64), D(0)));
  assert_shape(nvfp4_columnwise_scale_shape(S(2, D(0), D(64))), S(2, D(128), D(0)));
}


static void test_check_quantizable (void **state) {
  char msg[256];
  assert_int_equal(nvfp4_shape_check_quantizable(S(3, D(2048), D(1), D(8192)), 1, 1, msg, sizeof msg), NVFP4_OK);
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(1), D(16)), 1, 0, msg, sizeof msg), NVFP4_OK);
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(1), D(16)), 1, 1, msg, sizeof msg), NVFP4_EINVAL);
  assert_non_null(strstr(msg, "M=1"));
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(16), D(40)), 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  assert_non_null(strstr(msg, "K=40"));
  assert_non_null(strstr(msg, "multiple of 16"));
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(-16), D(16)), 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  assert_non_null(strstr(msg, "negative"));
  assert_int_equal(nvfp4_shape_check_quantizable(S(1, D(32)), 0, 1, msg, sizeof msg), NVFP4_EINVAL);
  assert_int_equal(nvfp4_shape_check_quantizable(S(0), 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  assert_int_equal(nvfp4_shape_check_quantizable(S(3, D(12), D(1), D(64)), 1, 1, NULL, 0), NVFP4_EINVAL);
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(1) << 40, D(1) << 40), 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  assert_non_null(strstr(msg, "2^60"));
  /* 2^60 elements in one row: the rowwise scale pads its one row to 128
  ** (128 * 2^56 bytes, which saturated the byte count); columnwise only,
  ** [2^56, 16]: that scale is [128, 2^52] (2^59 bytes) and the shape passes */
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(1), D(1) << 60), 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  assert_non_null(strstr(msg, "padded rowwise scale_inv would exceed 2^60 bytes"));
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(1) << 56, D(16)), 0, 1, msg, sizeof msg), NVFP4_OK);
  /* n == 0: msg is not written, on success (it wrote msg[0]) or failure */
  msg[0] = 'x';
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(16), D(16)), 1, 1, msg, 0), NVFP4_OK);
  assert_int_equal(nvfp4_shape_check_quantizable(S(2, D(16), D(40)), 1, 1, msg, 0), NVFP4_EINVAL);
  assert_int_equal(msg[0], 'x');
}


static void test_shape_basics (void **state) {
  char buf[64];
  nvfp4_shape x = S(3, D(4096), D(1), D(8192));
  assert_int_equal(nvfp4_shape_M(x), 4096);
  assert_int_equal(nvfp4_shape_K(x), 8192);
  assert_int_equal(nvfp4_shape_numel(x), 4096LL * 8192);
  assert_string_equal(nvfp4_shape_format(x, buf, sizeof buf), "[4096, 1, 8192]");
  assert_string_equal(nvfp4_shape_format(S(0), buf, sizeof buf), "[]");
  nvfp4_shape_format(x, buf, 8);
  assert_int_equal(strlen(buf), 7);          /* truncated, terminated */
  assert_null(nvfp4_shape_format(x, NULL, 10));      /* no buffer: nothing written */
  assert_int_equal(nvfp4_shape_make(2, NULL).ndim, 0);
  assert_true(nvfp4_shape_equal(x, S(3, D(4096), D(1), D(8192))));
  assert_false(nvfp4_shape_equal(x, S(2, D(4096), D(8192))));
  /* huge shapes saturate (no overflow), and the scale shapes with them */
  x = S(2, INT64_MAX, INT64_MAX);
  assert_true(nvfp4_shape_numel(x) == INT64_MAX && nvfp4_shape_M(S(3, D(1) << 40, D(1) << 40, D(16))) == INT64_MAX);
  assert_true(nvfp4_rowwise_scale_shape(x).dim[0] == INT64_MAX);
}


/* A caller's struct may hold any ndim: the functions read and write at most
** 8 dims (the values behind dim[] are guards that would show up), and
** check_quantizable refuses the rank before it formats the dims.  The ASan
** build of make check catches any access past dim[]. */
static void test_ndim_out_of_range (void **state) {
  struct { nvfp4_shape s; int64_t guard[4]; } w;
  nvfp4_cw_bookkeeping b;
  char msg[256], buf[128];
  int i;
  memset(&w, 0, sizeof w);
  for (i = 0; i < NVFP4_MAX_DIMS; i++) w.s.dim[i] = 32;
  for (i = 0; i < 4; i++) w.guard[i] = 1000 + i;
  w.s.ndim = 9;
  assert_int_equal(nvfp4_shape_numel(w.s), (int64_t)1 << 40);       /* 32^8 */
  assert_int_equal(nvfp4_shape_M(w.s), (int64_t)1 << 35);           /* 32^7 */
  assert_int_equal(nvfp4_shape_K(w.s), 32);
  assert_string_equal(nvfp4_shape_format(w.s, buf, sizeof buf), "[32, 32, 32, 32, 32, 32, 32, 32]");
  assert_int_equal(nvfp4_shape_check_quantizable(w.s, 1, 1, msg, sizeof msg), NVFP4_EINVAL);
  assert_string_equal(msg, "shape with ndim 9: ndim is outside 1..8");
  assert_int_equal(nvfp4_rowwise_data_shape(w.s).ndim, 8);
  assert_int_equal(nvfp4_rowwise_data_shape(w.s).dim[7], 16);
  b = nvfp4_cw_rule_apply(NVFP4_CW_ND, w.s);      /* [K, d0..d6] with the last halved */
  assert_int_equal(b.in_shape_t.ndim, 8);
  assert_int_equal(b.rows, 32);
  assert_int_equal(b.packed_cols, (int64_t)1 << 34);                /* 32^6 * 16 */
  assert_true(nvfp4_shape_equal(w.s, w.s));
  w.s.ndim = 1000;
  assert_int_equal(nvfp4_shape_check_quantizable(w.s, 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  assert_string_equal(msg, "shape with ndim 1000: ndim is outside 1..8");
  w.s.ndim = -3;
  assert_int_equal(nvfp4_shape_numel(w.s), 1);
  assert_int_equal(nvfp4_shape_K(w.s), 1);
  assert_string_equal(nvfp4_shape_format(w.s, buf, sizeof buf), "[]");
  assert_int_equal(nvfp4_shape_check_quantizable(w.s, 1, 0, msg, sizeof msg), NVFP4_EINVAL);
  for (i = 0; i < 4; i++) assert_int_equal(w.guard[i], 1000 + i);
  /* the ND rule's packed width saturates as numel does (it was a signed
  ** overflow: 2^40 * 2^40 wrapped to 0) */
  b = nvfp4_cw_rule_apply(NVFP4_CW_ND, S(3, D(1) << 40, D(1) << 40, D(16)));
  assert_true(b.packed_cols == INT64_MAX && b.scale_width == INT64_MAX / 16);
}


int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_shape_basics),
    cmocka_unit_test(test_local_buffer_shapes_table71),
    cmocka_unit_test(test_gathered_shapes_table73),
    cmocka_unit_test(test_columnwise_shape_s1h),
    cmocka_unit_test(test_cw_rule_table72),
    cmocka_unit_test(test_cw_rule_local_4096x3),
    cmocka_unit_test(test_cw_rule_nd_wrong_iff_odd),
    cmocka_unit_test(test_cw_rule_names),
    cmocka_unit_test(test_scale_shapes_field_cases),
    cmocka_unit_test(test_check_quantizable),
    cmocka_unit_test(test_ndim_out_of_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
