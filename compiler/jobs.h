/* jobs.h -- compiling a spec's (kernel, target) pairs on several threads
 * (dsv4c -j).  PTX and AMDGCN are generated, emitted and validated in
 * process, each compile in its own LLVMContext; SPIR-V in its helper
 * process as always.  Each job keeps its own artifact and diagnostics, so
 * whatever order the threads finish in, the caller reads the results in
 * job order and writes the same bytes and messages as -j 1. */
#ifndef DSV4_JOBS_H
#define DSV4_JOBS_H

#include "../targets/target.h"

typedef struct {
  const dsv4_kernel *kernel;
  dsv4_target_kind target;
  unsigned want;     /* DSV4_WANT_* */
  dsv4_artifact art; /* filled when the compile succeeded */
  dsv4_diags diags;  /* this job's messages */
  int failed;
} dsv4_job;

/* Run jobs[0, n) on up to threads threads (1: in the calling thread, in
 * order); heavier forms start first. */
void dsv4_run_jobs(dsv4_job *jobs, int n, int threads);
/* The processors this process may run on (sched_getaffinity; at least 1). */
int dsv4_cpu_count(void);

#endif
