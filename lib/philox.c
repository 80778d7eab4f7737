/*
** philox.c -- the stateful Philox4x32-10 generator of TE (spec §5.2); the
** pure round function and the SR byte mapping are inline in philox.h.
*/
#include "philox.h"


void nvfp4i_philox_init (nvfp4i_philox *p, uint64_t seed, uint64_t subsequence,
                         uint64_t offset) {
  p->key = seed;
  p->ctr[0] = (uint32_t)offset;
  p->ctr[1] = (uint32_t)(offset >> 32);
  p->ctr[2] = (uint32_t)subsequence;
  p->ctr[3] = (uint32_t)(subsequence >> 32);
}


void nvfp4i_philox_generate4 (nvfp4i_philox *p, uint32_t out[4]) {
  int i;
  nvfp4i_philox4x32_10(p->ctr, p->key, out);
  for (i = 0; i < 4; i++)         /* 128-bit increment */
    if (++p->ctr[i] != 0) break;
}
