/* fuzz_lock.c -- libFuzzer harness for the lockfile reader (common/lock.c:
 * the one reader dsv4c --lock, dsv4c-tune and dsv4rt_bundle_load_tuning share).
 *
 * An input is parsed as a lockfile.  A refusal must say why (a message)
 * and keep nothing.  A lockfile that parses must hold what the reader
 * promises (every bucket of a known op a bucket, every entry findable by
 * its key, every winner a passing variant) and survive what its users do
 * with it: the canonical text read back gives the same text (the format's
 * round trip), and merging it into itself and into an empty lock gives
 * that text again (merge is idempotent).  Anything else is a finding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "lock.h"

static void check(int ok)
{
  if (!ok)
    abort();
}

static char *canon(dsv4_lock *l, size_t *n)
{
  char *s = dsv4_lock_format(l, n);
  check(s != NULL && strlen(s) == *n);
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  dsv4_lock l;
  char err[512];
  err[0] = 0;
  if (dsv4_lock_parse((const char *)data, size, &l, err, sizeof err)) {
    check(err[0] && l.n == 0 && l.e == NULL); /* a refusal says why and keeps nothing */
    return 0;
  }
  for (int i = 0; i < l.n; i++) {
    dsv4_lock_entry *e = &l.e[i];
    check(dsv4_lock_find(&l, &e->key, 0) == e);
    int op = dsv4_tune_op_from_name(e->key.op);
    dsv4_shape s;
    char why[300];
    if (op)
      check(!dsv4_shape_parse(op, e->key.bucket, &s) && !dsv4_shape_check_bucket(&s, why, sizeof why));
    check(e->seed >= 0);
    const dsv4_lock_variant *w = e->winner[0] ? dsv4_lock_variant_find(e, e->winner) : NULL;
    check(!e->winner[0] || (w && w->gate == DSV4_GATE_PASS));
  }
  size_t n1, n2, n3;
  char *t1 = canon(&l, &n1);
  dsv4_lock back, fresh = {0};
  check(dsv4_lock_parse(t1, n1, &back, err, sizeof err) == 0); /* what it writes, it reads */
  char *t2 = canon(&back, &n2);
  check(n1 == n2 && !memcmp(t1, t2, n1));
  check(dsv4_lock_merge(&back, &l) == 0 && dsv4_lock_merge(&fresh, &l) == 0);
  char *t3 = canon(&back, &n3);
  check(n1 == n3 && !memcmp(t1, t3, n1));
  free(t3);
  t3 = canon(&fresh, &n3);
  check(n1 == n3 && !memcmp(t1, t3, n1));
  free(t1), free(t2), free(t3);
  dsv4_lock_free(&back), dsv4_lock_free(&fresh), dsv4_lock_free(&l);
  return 0;
}
