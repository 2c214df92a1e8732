/* check.h -- the one CHECK of the C tests: counts a passed or a failed
 * assertion (the including file defines `passed` and `failed`) and prints
 * a failure with its file, line and message. */
#ifndef DSV4_TEST_CHECK_H
#define DSV4_TEST_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                          \
  do {                                            \
    if (cond)                                     \
      passed++;                                   \
    else {                                        \
      failed++;                                   \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
    }                                             \
  } while (0)

#endif
