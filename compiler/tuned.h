/* tuned.h -- what dsv4c writes for tuning and reads back from it
 * (docs/tuning.md): the sweep manifest beside a sweep's bundle, the
 * toolchain line lockfile entries are keyed by, and the choice of kernels
 * for a tuned bundle (dsv4c --lock).  Nothing here prints: messages come
 * back as diagnostics for the CLI. */
#ifndef DSV4_TUNED_H
#define DSV4_TUNED_H

#include "bundle.h"
#include "diag.h"
#include "jobs.h"
#include "lock.h"
#include "plan.h"

/* The toolchain that compiles target t: "dsv4c 0.1.0, LLVM 19.1.7". */
void dsv4_toolchain(dsv4_target_kind t, char *buf, size_t n);

/* The sweep manifest (JSON, DSV4_SWEEP_FORMAT) of a plan with sweeps:
 * spec hash, toolchains, and per sweep its fields, expanded variants with
 * each target's code hash (from the compiled jobs) and rejected variants
 * with their reasons.  malloc'd; NULL when memory runs out. */
char *dsv4_sweep_manifest(const dsv4_plan *p, const char *spec, const dsv4_job *jobs, int njobs, size_t *len);

/* A tuned build (dsv4c --lock): which kernels to compile, and which
 * lockfile entries apply.  keep[i] is set for every kernel that is not a
 * sweep variant, for every variant that wins an entry that is fresh as far
 * as the spec can tell (spec hash, toolchain, sweep, winner), and for each
 * variant of a sweep the untuned default rule could run (the first of each
 * form, and of each tokens_per_cta where the rule looks at it: untuned, so
 * that a call outside every tuned bucket runs what the untuned bundle
 * would): every kernel compiled is one the bundle holds.
 * *fresh receives those entries, as the lockfile has them (shape and seed
 * too); each stale entry becomes a warning in d naming what it lacks.  0,
 * or 1 with an error in d (the lockfile cannot be read). */
int dsv4_tuned_select(const dsv4_plan *p, const char *lock_path, unsigned targets, unsigned char *keep,
                      dsv4_lock *fresh, dsv4_diags *d);

/* After compiling: drop from *fresh each entry whose winner's compiled code
 * differs from the code that was measured (warned in d).  Such a winner
 * stays in the bundle, untuned (a warning says so when no fresh entry
 * names it).  Returns the entries left. */
int dsv4_tuned_verify(const dsv4_plan *p, const char *lock_path, const dsv4_job *jobs, int njobs, unsigned char *keep,
                      dsv4_lock *fresh, dsv4_diags *d);

/* The choice records of a tuned bundle (bundle format 7): one per fresh
 * entry, its winner's entry index among items (the bundle being written:
 * the winner kernel for the entry's target), bucket and median.  An entry
 * the records cannot hold (a device model longer than the record's field,
 * more than DSV4_BUNDLE_MAX_CHOICES) is left out with a warning in d.
 * *out is malloc'd (NULL when there are none); 0, or 1 (out of memory). */
int dsv4_tuned_choices(const dsv4_lock *fresh, const dsv4_bundle_item *items, int n, const char *lock_path,
                       dsv4_bundle_choice **out, int *nout, dsv4_diags *d);

#endif
