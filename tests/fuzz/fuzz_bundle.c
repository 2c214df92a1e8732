/* fuzz_bundle.c -- libFuzzer harness for the bundle reader (runtime/src/bundle.c).
 *
 * The first byte of an input chooses how the rest is read: even, as it
 * is; odd, with the header's size and checksum made right first, so the
 * fuzzer reaches the checks behind the checksum (every entry field, the
 * layouts, the code ranges, the SPIR-V and bitcode structure) instead of
 * stopping at it.  A bundle that
 * opens is then listed entry by entry as a tool would.  The reader runs
 * on a stub context: opening and destroying a bundle never touch a
 * backend (rt.h).  Anything but a clean return is a finding, and so is a
 * refusal without a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static dsv4rt_context stub;

/* The header's size field and checksum, as the writer sets them. */
static void fix_header(uint8_t *p, size_t n)
{
  if (n < DSV4_BUNDLE_HEADER_BYTES)
    return;
  uint64_t size = n;
  memcpy(p + DSV4_BUNDLE_AT_SIZE, &size, 8);
  uint32_t crc = dsv4_crc32(p + DSV4_BUNDLE_AT_NENTRIES, n - DSV4_BUNDLE_AT_NENTRIES);
  memcpy(p + DSV4_BUNDLE_AT_CRC, &crc, 4);
}

/* Read every entry back as a listing does. */
static void list(const dsv4rt_bundle *b)
{
  for (int i = 0; i < dsv4rt_bundle_count(b); i++) {
    const char *name, *op, *target, *arch;
    dsv4rt_kernel_info info;
    dsv4_layout l;
    if (dsv4rt_bundle_entry(b, i, &name, &op, &target, &arch) || !name[0] || !op[0] || !target[0] ||
        dsv4rt_bundle_entry_info(b, i, &info) || dsv4rt_bundle_entry_layout(b, i, &l) ||
        strnlen(l.name, sizeof l.name) == sizeof l.name)
      abort();
    (void)dsv4rt_bundle_entry_is_first(b, i);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  size_t n = size - 1;
  uint8_t *p = malloc(n ? n : 1); /* exactly n bytes: a read past them is a finding */
  if (!p)
    return 0;
  memcpy(p, data + 1, n);
  if (data[0] & 1)
    fix_header(p, n);
  dsv4rt_bundle *b = NULL;
  stub.err[0] = 0;
  dsv4rt_status s = dsv4rt_bundle_open_memory(&stub, p, n, &b);
  if (s == DSV4RT_OK)
    list(b);
  else if (b || !stub.err[0])
    abort(); /* a refusal leaves nothing and says why */
  dsv4rt_bundle_destroy(b);
  free(p);
  return 0;
}
