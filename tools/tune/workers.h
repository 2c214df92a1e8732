/* workers.h -- the processes of a dsv4c-tune run (workers.c) and what
 * main.c hands them: the options of the run, the probe's answers, the
 * work items and the workers.  The parent never touches a device: a probe
 * process tells it the device's name and which variants run there; a
 * worker process a device measures the items it is sent over a pipe and
 * answers each with a wire_result. */
#ifndef DSV4_TUNE_WORKERS_H
#define DSV4_TUNE_WORKERS_H

#include <sys/types.h>

#include "tune.h"

#define MAX_DEVICES 16

typedef struct {
  const char *bundle, *lock, *manifest, *shapes, *only, *backend_name;
  dsv4rt_backend backend;
  int devices[MAX_DEVICES], ndevices;
  int shard, nshards;
  double timeout_s;
  int retry_failed, no_report, quick, seed_given;
  tune_opts o;
} options;

/* What the probe learns of a variant on the device. */
typedef struct {
  int runs;
  char target[8], arch[16], code[65];
  dsv4_layout L;
  int v_dim, heads;
} probe_variant;

typedef struct {
  int ok, status;
  char device[256];
  char error[400];
} probe_head;

typedef struct {
  int shape, sweep, variant; /* indices: shapes, manifest sweeps, their sorted variants */
  const probe_variant *pv;
  int done;
} item;

/* A worker's answer to one item number. */
typedef struct {
  int item;
  tune_result r;
} wire_result;

typedef struct {
  pid_t pid;
  int to, from; /* pipes: item numbers in, results out */
  int busy, item;
  double started;
} worker;

/* n bytes from / to a pipe, through EINTR and short transfers; 0 or -1. */
int tune_read_full(int fd, void *p, size_t n);
int tune_write_full(int fd, const void *p, size_t n);
/* Ask device (in a child process) for its name and, for the manifest's
 * variants in order (npv of them), what runs there; 0, or 1 with the
 * reason in head->error. */
int tune_probe(const options *o, int device, const tune_manifest *m, probe_head *head, probe_variant *pv,
               int npv);
/* Start worker all[d] on device (nall workers in all); 0 or 1. */
int tune_spawn(worker *all, int nall, int d, const options *o, int device, const tune_inputs *in,
               const item *items, const tune_manifest *m);
/* End worker w (killed first if kill_it) and wait for it; its wait status in *status. */
void tune_reap(worker *w, int kill_it, int *status);

#endif
