/*
** test_philox.c -- lib/philox.[ch]: Philox4x32-10 known answers (Random123
** and spec §5.2), TE's stateful init/generate4, and the SR byte mapping.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include "philox.h"


static void test_philox_zero_kat (void **state) {
  uint32_t c[4] = {0, 0, 0, 0}, w[4];
  nvfp4i_philox4x32_10(c, 0, w);
  assert_int_equal(w[0], 0x6627e8d5u);
  assert_int_equal(w[1], 0xe169c58du);
  assert_int_equal(w[2], 0xbc57ac4cu);
  assert_int_equal(w[3], 0x9b00dbd8u);
}


/* Random123 kat_vectors: all-ones and pi. */
static void test_philox_random123_kats (void **state) {
  uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, w[4];
  uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  nvfp4i_philox4x32_10(c1, 0xffffffffffffffffull, w);
  assert_int_equal(w[0], 0x408f276du);
  assert_int_equal(w[1], 0x41c83b0eu);
  assert_int_equal(w[2], 0xa20bc7c6u);
  assert_int_equal(w[3], 0x6d5451fdu);
  /* key = {0xa4093822, 0x299f31d0}: lo32 first */
  nvfp4i_philox4x32_10(c2, ((uint64_t)0x299f31d0u << 32) | 0xa4093822u, w);
  assert_int_equal(w[0], 0xd16cfe09u);
  assert_int_equal(w[1], 0x94fdccebu);
  assert_int_equal(w[2], 0x5001e420u);
  assert_int_equal(w[3], 0x24126ea1u);
}


static void test_philox_init_kat (void **state) {
  nvfp4i_philox p;
  uint32_t w[4], v[4];
  nvfp4i_philox_init(&p, 0x0123456789ABCDEFull, 5, 7);
  nvfp4i_philox_generate4(&p, w);
  assert_int_equal(w[0], 0x91b7d2e0u);
  assert_int_equal(w[1], 0xa4d4b6c4u);
  assert_int_equal(w[2], 0xc6acf628u);
  assert_int_equal(w[3], 0xe0e4b442u);
  /* generate4 advanced the counter by one: same as offset 8 */
  nvfp4i_philox_generate4(&p, w);
  nvfp4i_philox_init(&p, 0x0123456789ABCDEFull, 5, 8);
  nvfp4i_philox_generate4(&p, v);
  assert_memory_equal(w, v, sizeof w);
}


/* The 128-bit increment carries across words. */
static void test_philox_counter_carry (void **state) {
  nvfp4i_philox p;
  uint32_t w[4], v[4];
  uint32_t c[4] = {0, 0, 1, 0};
  nvfp4i_philox_init(&p, 42, 0, 0xffffffffffffffffull);
  nvfp4i_philox_generate4(&p, w);
  nvfp4i_philox_generate4(&p, w);
  nvfp4i_philox4x32_10(c, 42, v);
  assert_memory_equal(w, v, sizeof w);
}


/* nvfp4i_sr_byte = byte (e&3) of word ((e>>2)&3) of init(seed, stream,
** offset + e/16).generate4(); the block form agrees. */
static void test_sr_byte_mapping (void **state) {
  uint64_t seed = 0x0123456789ABCDEFull, off = 5, e;
  int stream;
  for (stream = 0; stream < 2; stream++)
    for (e = 0; e < 64; e++) {
      nvfp4i_philox p;
      uint32_t w[4];
      uint8_t b[16];
      nvfp4i_philox_init(&p, seed, (uint64_t)stream, off + (e >> 4));
      nvfp4i_philox_generate4(&p, w);
      assert_int_equal(nvfp4i_sr_byte(seed, off, stream, e),
                       (w[(e >> 2) & 3] >> (8 * (e & 3))) & 0xffu);
      nvfp4i_sr_block_bytes(seed, off + (e >> 4), stream, b);
      assert_int_equal(b[e & 15], nvfp4i_sr_byte(seed, off, stream, e));
    }
  /* spec KAT: seed 0x0123456789ABCDEF, subseq 5, offset 7 -> word0 0x91b7d2e0 */
  assert_int_equal(nvfp4i_sr_byte(seed, 7, 5, 0), 0xe0);
  assert_int_equal(nvfp4i_sr_byte(seed, 7, 5, 3), 0x91);
  assert_int_equal(nvfp4i_sr_byte(seed, 0, 5, 7 * 16 + 15), 0xe0);
  /* streams and seeds differ */
  assert_int_not_equal(nvfp4i_sr_byte(seed, 7, 0, 0) | (nvfp4i_sr_byte(seed, 7, 0, 1) << 8),
                       nvfp4i_sr_byte(seed, 7, 1, 0) | (nvfp4i_sr_byte(seed, 7, 1, 1) << 8));
}


/* The bytes are roughly uniform (chi-square over 256 bins, 65536 draws). */
static void test_sr_bytes_uniform (void **state) {
  unsigned hist[256] = {0};
  double chi = 0.0, expect = 65536.0 / 256.0;
  uint64_t e;
  int i;
  for (e = 0; e < 65536; e++) hist[nvfp4i_sr_byte(99, 0, 0, e)]++;
  for (i = 0; i < 256; i++) chi += (hist[i] - expect) * (hist[i] - expect) / expect;
  /* 255 dof: mean 255, sd 22.6; 400 is > 6 sigma */
  assert_true(chi < 400.0);
}


int main (void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_philox_zero_kat),
    cmocka_unit_test(test_philox_random123_kats),
    cmocka_unit_test(test_philox_init_kat),
    cmocka_unit_test(test_philox_counter_carry),
    cmocka_unit_test(test_sr_byte_mapping),
    cmocka_unit_test(test_sr_bytes_uniform),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
