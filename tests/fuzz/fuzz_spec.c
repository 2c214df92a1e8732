/* fuzz_spec.c -- libFuzzer harness for the spec loader and checker.
 *
 * Each input is written as a spec file into a private folder (the spec's
 * folder, so include() of a sibling resolves there; the project's specs/
 * is the -I folder) and loaded with small limits, then the plan is dumped.
 * Anything but a clean return (a crash, a sanitizer report, a hang past
 * libFuzzer's -timeout) is a finding.  The limits are small so that a
 * runaway spec costs milliseconds, not seconds.
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spec.h"

static char dir[64], path[96];
static const char *incdirs[1];

/* Once: the private folder and the -I folder (DSV4C_SPECS, else ./specs). */
static void setup(void)
{
  snprintf(dir, sizeof dir, "/tmp/dsv4c-fuzz-XXXXXX");
  if (!mkdtemp(dir))
    abort();
  snprintf(path, sizeof path, "%s/fuzz.lua", dir);
  const char *specs = getenv("DSV4C_SPECS");
  incdirs[0] = specs ? specs : "specs";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static dsv4_plan plan;
  if (!dir[0])
    setup();
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  fwrite(data, 1, size, f);
  fclose(f);
  dsv4_spec_opts o = {.max_instructions = 2000000, .max_memory = 64 << 20, .include_dirs = incdirs,
                      .ninclude_dirs = 1};
  dsv4_diags d = {0};
  if (!dsv4_spec_load(path, &o, &plan, &d)) {
    char *s = dsv4_plan_dump(&plan);
    free(s);
  } else if (d.errors == 0) {
    abort(); /* a failure must say why */
  }
  return 0;
}
