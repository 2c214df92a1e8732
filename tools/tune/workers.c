/* workers.c -- dsv4c-tune's processes (see workers.h): the probe that asks
 * a device what of the manifest runs there, and the workers that measure
 * variants, one a device, each its own process so that a kernel that
 * crashes or hangs takes only its worker with it. */
#define _GNU_SOURCE
#include "workers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

/* ---- I/O on pipes ------------------------------------------------------------------ */

int tune_read_full(int fd, void *p, size_t n)
{
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

int tune_write_full(int fd, const void *p, size_t n)
{
  size_t put = 0;
  while (put < n) {
    ssize_t w = write(fd, (const char *)p + put, n - put);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    put += (size_t)w;
  }
  return 0;
}

/* ---- the probe: the device's name and what of the manifest runs there -------------- */

int tune_probe(const options *o, int device, const tune_manifest *m, probe_head *head, probe_variant *pv,
               int npv)
{
  int p[2];
  memset(head, 0, sizeof *head);
  if (pipe(p)) {
    snprintf(head->error, sizeof head->error, "cannot make a pipe");
    return 1;
  }
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    snprintf(head->error, sizeof head->error, "cannot fork");
    return 1;
  }
  if (pid == 0) { /* the child: this process never touches a device itself */
    close(p[0]);
    probe_head h = {0};
    probe_variant *v = calloc((size_t)(npv ? npv : 1), sizeof *v);
    dsv4rt_context *ctx = NULL;
    dsv4rt_bundle *b = NULL;
    dsv4rt_status s = dsv4rt_context_create(o->backend, device, &ctx);
    if (!s)
      s = dsv4rt_bundle_open(ctx, o->bundle, &b);
    h.status = s;
    if (s)
      snprintf(h.error, sizeof h.error, "%.390s", dsv4rt_last_error(ctx));
    else {
      h.ok = 1;
      snprintf(h.device, sizeof h.device, "%s", dsv4rt_device_name(ctx));
      int k = 0;
      for (int sw = 0; sw < m->nsweeps; sw++)
        for (int i = 0; i < m->s[sw].nvariants; i++, k++)
          for (int e = 0; v && e < dsv4rt_bundle_count(b) && !v[k].runs; e++) {
            const char *name, *op, *target, *arch;
            dsv4rt_kernel_info info;
            if (dsv4rt_bundle_entry(b, e, &name, &op, &target, &arch) || strcmp(name, m->s[sw].v[i].name))
              continue;
            if (!v[k].target[0]) { /* what it is built for, said when nothing runs here */
              snprintf(v[k].target, sizeof v[k].target, "%s", target);
              snprintf(v[k].arch, sizeof v[k].arch, "%s", arch);
            }
            if (!dsv4rt_bundle_entry_runs(b, e) || dsv4rt_bundle_entry_info(b, e, &info) ||
                dsv4rt_bundle_entry_layout(b, e, &v[k].L) || dsv4rt_bundle_entry_code_hash(b, e, v[k].code))
              continue;
            v[k].runs = 1, v[k].v_dim = info.v_dim, v[k].heads = info.heads;
            snprintf(v[k].target, sizeof v[k].target, "%s", target);
            snprintf(v[k].arch, sizeof v[k].arch, "%s", arch);
          }
    }
    int bad = tune_write_full(p[1], &h, sizeof h) || (v && tune_write_full(p[1], v, (size_t)npv * sizeof *v));
    dsv4rt_bundle_destroy(b);
    dsv4rt_context_destroy(ctx);
    free(v);
    _exit(bad);
  }
  close(p[1]);
  int bad = tune_read_full(p[0], head, sizeof *head) ||
            (head->ok && tune_read_full(p[0], pv, (size_t)npv * sizeof *pv));
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (bad && !head->error[0])
    snprintf(head->error, sizeof head->error, "the probe process ended (%s %d) before it answered",
             WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  return bad || !head->ok;
}

/* ---- workers -------------------------------------------------------------------------- */

/* The worker process: a context on device, the bundle, the inputs uploaded
 * once; then each item number read from `in` measured and answered. */
static void worker_main(const options *o, int device, const tune_inputs *in, const item *items,
                        const tune_manifest *m, int in_fd, int out_fd)
{
  /* the parent decides when to stop (a Ctrl-C or a `timeout` reaches the
   * whole process group: a worker that died of it would read as a crash),
   * and a worker does not outlive it */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1)
    _exit(0);
#endif
  dsv4rt_context *ctx = NULL;
  dsv4rt_bundle *b = NULL;
  tune_device *dev = NULL;
  char err[400] = "";
  dsv4rt_status s = dsv4rt_context_create(o->backend, device, &ctx);
  if (!s)
    s = dsv4rt_bundle_open(ctx, o->bundle, &b);
  if (s)
    snprintf(err, sizeof err, "%s: %.360s", dsv4rt_status_name(s), dsv4rt_last_error(ctx));
  else if (!(dev = tune_device_upload(ctx, in, err, sizeof err)))
    s = DSV4RT_ERR_BACKEND;
  /* DSV4C_TUNE_FAULT=<variant>:<crash|hang|wrong|nondet>: that variant
   * misbehaves so (the tests of the tuner's own isolation and gate) */
  const char *fault = getenv("DSV4C_TUNE_FAULT"), *colon = fault ? strchr(fault, ':') : NULL;
  int k, code = 0;
  while (!tune_read_full(in_fd, &k, sizeof k)) {
    wire_result w = {.item = k};
    const char *name = m->s[items[k].sweep].v[items[k].variant].name;
    tune_opts to = o->o;
    if (colon && strlen(name) == (size_t)(colon - fault) && !strncmp(fault, name, strlen(name))) {
      /* as a kernel's fault would: the default action (the runtime may hold a handler) */
      if (!strcmp(colon + 1, "crash")) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
      }
      if (!strcmp(colon + 1, "hang"))
        for (;;)
          pause();
      to.fault = !strcmp(colon + 1, "wrong") ? 1 : !strcmp(colon + 1, "nondet") ? 2 : 0;
    }
    if (s) {
      w.r.gate = DSV4_GATE_ERROR;
      snprintf(w.r.reason, sizeof w.r.reason, "the worker on device %d: %.360s", device, err);
    } else
      tune_measure(ctx, b, name, in, dev, &to, &w.r);
    if (tune_write_full(out_fd, &w, sizeof w))
      break;
    if (w.r.backend_failed) {
      code = 3; /* a fresh context for the next variant */
      break;
    }
  }
  tune_device_free(dev);
  dsv4rt_bundle_destroy(b);
  dsv4rt_context_destroy(ctx);
  _exit(code);
}

/* Start worker all[d] on device; the child keeps none of the other
 * workers' pipes (else a worker would hold another's input open, and that
 * one would never see the end of its work). */
int tune_spawn(worker *all, int nall, int d, const options *o, int device, const tune_inputs *in,
               const item *items, const tune_manifest *m)
{
  worker *w = &all[d];
  int a[2], r[2];
  if (pipe2(a, O_CLOEXEC))
    return 1;
  if (pipe2(r, O_CLOEXEC)) {
    close(a[0]), close(a[1]);
    return 1;
  }
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(a[0]), close(a[1]), close(r[0]), close(r[1]);
    return 1;
  }
  if (pid == 0) {
    close(a[1]), close(r[0]);
    for (int i = 0; i < nall; i++)
      if (i != d && all[i].pid > 0)
        close(all[i].to), close(all[i].from);
    worker_main(o, device, in, items, m, a[0], r[1]);
  }
  close(a[0]), close(r[1]);
  w->pid = pid, w->to = a[1], w->from = r[0], w->busy = 0;
  return 0;
}

void tune_reap(worker *w, int kill_it, int *status)
{
  if (w->pid <= 0)
    return;
  if (kill_it)
    kill(w->pid, SIGKILL);
  close(w->to), close(w->from);
  int st = 0;
  while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
    ;
  if (status)
    *status = st;
  w->pid = 0, w->busy = 0;
}
