/*
** bench_args.h -- the benchmark programs' integer arguments (bench/ C sources).
*/
#ifndef NVFP4_BENCH_ARGS_H
#define NVFP4_BENCH_ARGS_H

#include <errno.h>
#include <stdlib.h>

/* s as a decimal integer in 1..max (the whole string: '16abc', '1e3' and
** '' are not integers), else 0. */
static inline long long bench_positive (const char *s, long long max) {
  char *end;
  long long v;
  errno = 0;
  v = strtoll(s, &end, 10);
  return end != s && *end == '\0' && errno == 0 && v > 0 && v <= max ? v : 0;
}

#endif
