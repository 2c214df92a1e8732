/* main.c -- dsv4c-tune: measure a sweep's variants on a workload's shapes
 * and write the lockfile (docs/tuning.md).
 *
 *   dsv4c-tune BUNDLE --lock FILE [--shapes v4|quick|FILE] [--quick] [--backend auto|cuda|hip|opencl]
 *              [--devices 0,1,...] [--shard I/N] [--timeout S] [--reps N] [--seed N] [--rotate MiB]
 *              [--manifest FILE] [-k SWEEP] [--retry-failed] [--no-report]
 *   dsv4c-tune merge A.lock B.lock ... -o OUT.lock
 *   dsv4c-tune report LOCK [--manifest FILE]
 *
 * The work is a list of (shape, variant) items in one order (the shapes as
 * listed, each sweep's variants by name); --shard I/N takes the I-th of N
 * contiguous parts of it.  Items already in the lockfile are skipped (an
 * interrupted run resumes; --retry-failed measures the failed ones again).
 * A shape's inputs and reference are made once, in this process; then one
 * worker process a device (fork, so it shares them) runs the shape's
 * variants one at a time as this process hands them out, each under a time
 * limit: a worker that crashes or hangs is killed and replaced, and the
 * variant it ran is recorded as crashed or timed out.  A variant whose
 * launch fails ends its worker too (a CUDA context does not survive an
 * illegal access).  The lockfile is written (atomically) as results come
 * in and at the end, then the report beside it.  The processes themselves
 * (probe, workers, their pipes) are workers.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dsv4_abi.h"
#include "dsv4_check.h"
#include "tune.h"
#include "workers.h"

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig, interrupted = 1; }

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: dsv4c-tune BUNDLE --lock FILE [--shapes v4|quick|FILE] [--quick] [--backend auto|cuda|hip|opencl]\n"
          "                  [--devices 0,1,...] [--shard I/N] [--timeout S] [--reps N] [--seed N] [--rotate MiB]\n"
          "                  [--manifest FILE] [-k SWEEP] [--retry-failed] [--no-report]\n"
          "       dsv4c-tune merge A.lock B.lock ... -o OUT.lock\n"
          "       dsv4c-tune report LOCK [--manifest FILE]\n"
          "\n"
          "Measure every variant of the sweeps in BUNDLE (dsv4c -o of a spec with sweeps; its manifest\n"
          "<spec>.sweep.json beside it) on each shape: a correctness gate against the reference (two runs\n"
          "that must agree bit for bit), then device-timed runs.  Results go to the lockfile FILE (resumed\n"
          "if it exists), with the winner of each shape bucket, and a report beside it (FILE less .lock,\n"
          "plus .md and .svg).\n"
          "  --shapes LIST     v4 (default: V4-Pro/V4-Flash decode at T 8..512 and C128, the indexer\n"
          "                    logits at B 64..256, next_n 1, 2, contexts to 64K), quick, or a file of\n"
          "                    '<op> <dims>' lines (sparse_decode T=8,H=128,topk=128,extra=1024,xbs=64;\n"
          "                    paged_mqa_logits B=64,next_n=1,L=16384)\n"
          "  --quick           small shapes and few repetitions (a CPU device: CI)\n"
          "  --devices LIST    one worker a device (default 0)\n"
          "  --shard I/N       the I-th (0-based) of N equal parts of the (shape, variant) list\n"
          "  --timeout S       seconds a variant may take on one shape (default 120; --quick 600)\n"
          "  --reps N          timed batches (default 30; --quick 3)\n"
          "  --seed N          the inputs' seed (default DSV4_SEED, else the clock; give shards one)\n"
          "  --rotate MiB      bytes of caches the timing rotates through (default 256; --quick 8)\n"
          "  --retry-failed    measure again the variants the lockfile has as failed\n"
          "Exit status: 0 done, 1 error, 2 bad usage, 3 nothing in the sweep runs on the device (nothing written),\n"
          "77 no device, 130 interrupted (resume by running again).\n");
}

static int parse_devices(const char *s, options *o)
{
  o->ndevices = 0;
  for (const char *p = s; *p;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > 1023 || o->ndevices == MAX_DEVICES || (*end && *end != ','))
      return 1;
    o->devices[o->ndevices++] = (int)v;
    p = *end ? end + 1 : end;
  }
  return o->ndevices == 0;
}

static int parse_args(int argc, char **argv, options *o)
{
  static const struct option longs[] = {
      {"lock", required_argument, 0, 'l'},      {"shapes", required_argument, 0, 's'},
      {"quick", no_argument, 0, 'q'},           {"backend", required_argument, 0, 'b'},
      {"devices", required_argument, 0, 'd'},   {"shard", required_argument, 0, 'S'},
      {"timeout", required_argument, 0, 't'},   {"reps", required_argument, 0, 'r'},
      {"seed", required_argument, 0, 'e'},      {"rotate", required_argument, 0, 'R'},
      {"manifest", required_argument, 0, 'm'},  {"retry-failed", no_argument, 0, 'F'},
      {"no-report", no_argument, 0, 'N'},       {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->shapes = "v4", o->backend_name = "auto", o->ndevices = 1, o->nshards = 1;
  double rotate = -1, timeout = -1;
  int reps = -1, c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":k:h", longs, NULL)) != -1) {
    char *end;
    switch (c) {
    case 'l': o->lock = optarg; break;
    case 's': o->shapes = optarg; break;
    case 'q': o->quick = 1; break;
    case 'm': o->manifest = optarg; break;
    case 'k': o->only = optarg; break;
    case 'F': o->retry_failed = 1; break;
    case 'N': o->no_report = 1; break;
    case 'b':
      o->backend_name = optarg;
      if (dsv4rt_backend_parse(optarg, &o->backend)) {
        fprintf(stderr, "dsv4c-tune: --backend takes auto, cuda, hip or opencl\n");
        return 2;
      }
      break;
    case 'd':
      if (parse_devices(optarg, o)) {
        fprintf(stderr, "dsv4c-tune: --devices takes a list of device numbers (0,1,...), not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'S':
      if (sscanf(optarg, "%d/%d", &o->shard, &o->nshards) != 2 || o->nshards < 1 || o->shard < 0 ||
          o->shard >= o->nshards) {
        fprintf(stderr, "dsv4c-tune: --shard takes I/N with 0 <= I < N, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 't':
      timeout = strtod(optarg, &end);
      if (*end || !(timeout > 0)) {
        fprintf(stderr, "dsv4c-tune: --timeout takes seconds, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'r':
      reps = (int)strtol(optarg, &end, 10);
      if (*end || reps < 1 || reps > 100000) {
        fprintf(stderr, "dsv4c-tune: --reps takes a count, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'e':
      o->o.seed = strtoull(optarg, &end, 0), o->seed_given = 1;
      if (*end) {
        fprintf(stderr, "dsv4c-tune: --seed takes a number, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'R':
      rotate = strtod(optarg, &end);
      if (*end || !(rotate > 0) || rotate > 65536) {
        fprintf(stderr, "dsv4c-tune: --rotate takes MiB, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'h':
      usage(stdout);
      exit(0);
    case ':':
      fprintf(stderr, "dsv4c-tune: option '%s' needs an argument\n", argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "dsv4c-tune: unknown option '%s'\n", argv[optind - 1]);
      return 2;
    }
  }
  if (optind != argc - 1 || !o->lock) {
    fprintf(stderr, optind != argc - 1 ? "dsv4c-tune: give one bundle\n" : "dsv4c-tune: give --lock FILE\n");
    usage(stderr);
    return 2;
  }
  o->bundle = argv[optind];
  if (o->quick && !strcmp(o->shapes, "v4"))
    o->shapes = "quick";
  o->timeout_s = timeout > 0 ? timeout : o->quick ? 600 : 120;
  o->o.reps = reps > 0 ? reps : o->quick ? 3 : 30;
  o->o.batch = o->quick ? 2 : 10;
  o->o.warmup = o->quick ? 1 : 5;
  o->o.rotate_bytes = (size_t)((rotate > 0 ? rotate : o->quick ? 8 : 256) * 1048576.0);
  return 0;
}

/* ---- the lockfile side ------------------------------------------------------------------- */

typedef struct {
  const options *o;
  const tune_manifest *m;
  const tune_shape *shapes;
  item *items;
  dsv4_lock lock;
  char model[DSV4_LOCK_TEXT];
  probe_variant sweep_pv[TUNE_MAX_SWEEPS]; /* each sweep's first variant that runs here (or none) */
  int total, finished;
  double last_save;
  int tty;
} run;

static int target_index(const char *t) { return !strcmp(t, "ptx") ? 0 : !strcmp(t, "amdgcn") ? 1 : 2; }

static void item_key(const run *R, const item *it, dsv4_lock_key *k)
{
  memset(k, 0, sizeof *k);
  const tune_sweep *sw = &R->m->s[it->sweep];
  /* a variant that does not run here is recorded with its sweep's others
   * (the target and arch they run as here) */
  const probe_variant *pv = it->pv->runs ? it->pv : &R->sweep_pv[it->sweep];
  snprintf(k->spec_hash, sizeof k->spec_hash, "%s", R->m->spec_hash);
  snprintf(k->kernel, sizeof k->kernel, "%s", sw->kernel);
  snprintf(k->op, sizeof k->op, "%s", dsv4_tune_op_name(sw->op));
  snprintf(k->target, sizeof k->target, "%s", pv->runs ? pv->target : "none");
  snprintf(k->arch, sizeof k->arch, "%s", pv->runs ? pv->arch : "none");
  snprintf(k->device, sizeof k->device, "%s", R->model);
  snprintf(k->toolchain, sizeof k->toolchain, "%s", pv->runs ? R->m->toolchain[target_index(pv->target)] : "");
  dsv4_shape b = dsv4_shape_bucket(&R->shapes[it->shape].shape);
  dsv4_shape_format(&b, k->bucket, sizeof k->bucket);
}

static void save(run *R, int force)
{
  if (!force && now_s() - R->last_save < 2)
    return;
  if (dsv4_lock_write(R->o->lock, &R->lock))
    fprintf(stderr, "dsv4c-tune: cannot write %s: %s\n", R->o->lock, strerror(errno));
  R->last_save = now_s();
}

static void progress(run *R, const item *it, const tune_result *r)
{
  const char *name = R->m->s[it->sweep].v[it->variant].name;
  char shape[128], line[700];
  tune_shape_text(&R->shapes[it->shape], shape, sizeof shape);
  if (r->gate == DSV4_GATE_PASS)
    snprintf(line, sizeof line, "%s %s: %.2f us", name, shape, r->median_us);
  else
    snprintf(line, sizeof line, "%s %s: %s (%.200s)", name, shape, dsv4_gate_name(r->gate), r->reason);
  if (R->tty) {
    int width = 30, fill = R->total ? R->finished * width / R->total : width;
    fprintf(stderr, "\r\033[K[%.*s%*s] %d/%d %.90s", fill, "##############################", width - fill, "",
            R->finished, R->total, line);
    if (R->finished == R->total)
      fputc('\n', stderr);
  } else
    fprintf(stderr, "dsv4c-tune: %d/%d %s\n", R->finished, R->total, line);
}

static void record(run *R, item *it, const tune_result *r)
{
  dsv4_lock_key k;
  item_key(R, it, &k);
  dsv4_lock_entry *e = dsv4_lock_find(&R->lock, &k, 1);
  if (!e) {
    fprintf(stderr, "dsv4c-tune: out of memory\n");
    exit(1);
  }
  if (!e->shape[0]) {
    tune_shape_text(&R->shapes[it->shape], e->shape, sizeof e->shape);
    e->seed = (long long)R->o->o.seed;
  }
  dsv4_lock_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.name, sizeof v.name, "%s", R->m->s[it->sweep].v[it->variant].name);
  snprintf(v.code, sizeof v.code, "%s", it->pv->code);
  v.gate = r->gate, v.median_us = r->median_us, v.min_us = r->min_us, v.max_us = r->max_us, v.samples = r->samples;
  snprintf(v.reason, sizeof v.reason, "%s", r->reason);
  if (dsv4_lock_put(e, &v)) {
    fprintf(stderr, "dsv4c-tune: out of memory\n");
    exit(1);
  }
  dsv4_lock_decide(e);
  it->done = 1;
  R->finished++;
  progress(R, it, r);
  save(R, 0);
}

/* Measure items list[0, n) (one shape and kernel kind) on the devices. */
static int measure_items(run *R, const tune_inputs *in, int *list, int n)
{
  const options *o = R->o;
  worker w[MAX_DEVICES];
  memset(w, 0, sizeof w);
  int next = 0, busy = 0;
  while (next < n || busy) {
    if (interrupted)
      break;
    for (int d = 0; d < o->ndevices && next < n; d++) {
      if (w[d].busy)
        continue;
      if (!w[d].pid && tune_spawn(w, o->ndevices, d, o, o->devices[d], in, R->items, R->m)) {
        fprintf(stderr, "dsv4c-tune: cannot start a worker: %s\n", strerror(errno));
        return 1;
      }
      int k = list[next];
      if (tune_write_full(w[d].to, &k, sizeof k)) { /* it died before taking work: that variant is recorded so */
        int st = 0;
        tune_reap(&w[d], 1, &st);
        tune_result r = {.gate = DSV4_GATE_CRASHED};
        snprintf(r.reason, sizeof r.reason, "the worker on device %d died before it took the variant (%s %d)",
                 o->devices[d], WIFSIGNALED(st) ? "signal" : "status",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        next++;
        record(R, &R->items[k], &r);
        continue;
      }
      w[d].busy = 1, w[d].item = k, w[d].started = now_s();
      next++, busy++;
    }
    struct pollfd p[MAX_DEVICES];
    double wait = 1.0;
    for (int d = 0; d < o->ndevices; d++) {
      p[d].fd = w[d].busy ? w[d].from : -1, p[d].events = POLLIN, p[d].revents = 0;
      if (w[d].busy) {
        double left = w[d].started + o->timeout_s - now_s();
        if (left < wait)
          wait = left > 0 ? left : 0;
      }
    }
    int pr = poll(p, (nfds_t)o->ndevices, (int)(wait * 1000) + 1);
    if (pr < 0 && errno != EINTR)
      return 1;
    if (interrupted) /* what is running is not recorded: a resumed run measures it */
      break;
    for (int d = 0; d < o->ndevices; d++) {
      if (!w[d].busy)
        continue;
      item *it = &R->items[w[d].item];
      tune_result r;
      memset(&r, 0, sizeof r);
      if (pr > 0 && (p[d].revents & (POLLIN | POLLHUP | POLLERR))) {
        wire_result wr;
        if (!tune_read_full(w[d].from, &wr, sizeof wr) && wr.item == w[d].item) {
          w[d].busy = 0, busy--;
          record(R, it, &wr.r);
          if (wr.r.backend_failed) /* it ends itself: a fresh worker for the next variant */
            tune_reap(&w[d], 0, NULL);
          continue;
        }
        int st = 0; /* it ended without an answer: crashed */
        tune_reap(&w[d], 1, &st);
        busy--;
        r.gate = DSV4_GATE_CRASHED;
        if (WIFSIGNALED(st))
          snprintf(r.reason, sizeof r.reason, "the worker died on signal %d (%s) running it", WTERMSIG(st),
                   strsignal(WTERMSIG(st)));
        else
          snprintf(r.reason, sizeof r.reason, "the worker exited with status %d running it", WEXITSTATUS(st));
        record(R, it, &r);
      } else if (now_s() - w[d].started > o->timeout_s) {
        tune_reap(&w[d], 1, NULL);
        busy--;
        r.gate = DSV4_GATE_TIMEOUT;
        snprintf(r.reason, sizeof r.reason, "ran past the time limit of %.0f s (--timeout); killed", o->timeout_s);
        record(R, it, &r);
      }
    }
  }
  for (int d = 0; d < o->ndevices; d++)
    tune_reap(&w[d], interrupted, NULL);
  return 0;
}

static int same_kind(const probe_variant *a, const probe_variant *b)
{
  return !strcmp(a->L.name, b->L.name) && a->v_dim == b->v_dim && a->heads == b->heads;
}

/* ---- tune ------------------------------------------------------------------------------ */

static int tune(int argc, char **argv)
{
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc;
  char err[1024], mpath[4096];
  if (!o.manifest) { /* <stem>.sweep.json beside <stem>.dsv4b */
    snprintf(mpath, sizeof mpath, "%s", o.bundle);
    char *dot = strrchr(mpath, '.'), *slash = strrchr(mpath, '/');
    if (dot && (!slash || dot > slash))
      *dot = 0;
    strncat(mpath, ".sweep.json", sizeof mpath - strlen(mpath) - 1);
    o.manifest = mpath;
  }
  static tune_manifest m;
  if (tune_manifest_read(o.manifest, &m, err, sizeof err)) {
    fprintf(stderr, "dsv4c-tune: %s\n", err);
    return 1;
  }
  tune_shape *shapes = NULL;
  int nshapes = 0;
  if (tune_shapes(o.shapes, &shapes, &nshapes, err, sizeof err)) {
    fprintf(stderr, "dsv4c-tune: %s\n", err);
    tune_manifest_free(&m);
    return 2;
  }
  run R = {.o = &o, .m = &m, .shapes = shapes, .tty = isatty(2)};
  /* resume: what the lockfile has already */
  if (!access(o.lock, F_OK) && dsv4_lock_read(o.lock, &R.lock, err, sizeof err)) {
    fprintf(stderr, "dsv4c-tune: %s\n", err);
    free(shapes);
    tune_manifest_free(&m);
    return 1;
  }
  if (!o.seed_given) { /* a resumed run keeps its inputs' seed */
    o.o.seed = dsv4_check_seed();
    for (int i = 0; i < R.lock.n; i++)
      if (i == 0 || (uint64_t)R.lock.e[i].seed < o.o.seed)
        o.o.seed = (uint64_t)R.lock.e[i].seed;
  }
  o.o.seed &= (1ull << 53) - 1; /* a JSON number holds it exactly */
  /* the devices */
  int nv = 0;
  for (int s = 0; s < m.nsweeps; s++)
    nv += m.s[s].nvariants;
  probe_variant *pv = calloc((size_t)(nv ? nv : 1), sizeof *pv), *pv2 = calloc((size_t)(nv ? nv : 1), sizeof *pv2);
  probe_head h;
  for (int d = 0; d < o.ndevices; d++) {
    int bad = tune_probe(&o, o.devices[d], &m, &h, d ? pv2 : pv, nv);
    char model[DSV4_LOCK_TEXT];
    dsv4_tune_device_model(h.device, model, sizeof model);
    if (bad)
      fprintf(stderr, "dsv4c-tune: device %d (%s): %s\n", o.devices[d], o.backend_name, h.error);
    else if (d && strcmp(model, R.model))
      fprintf(stderr, "dsv4c-tune: device %d is a %s, device %d a %s: run one tuner a GPU model\n", o.devices[0],
              R.model, o.devices[d], model);
    if (bad || (d && strcmp(model, R.model))) {
      free(pv), free(pv2), free(shapes);
      dsv4_lock_free(&R.lock);
      tune_manifest_free(&m);
      return !bad ? 2 : h.status == DSV4RT_ERR_NO_BACKEND ? 77 : 1;
    }
    snprintf(R.model, sizeof R.model, "%s", model);
    fprintf(stderr, "dsv4c-tune: device %d: %s\n", o.devices[d], h.device);
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN); /* a worker that died shows as a failed write, not the end of the tuner */
  /* the items, in one order; this shard's part; what is left of it */
  int cap = 0, n = 0;
  for (int s = 0; s < nshapes; s++)
    for (int w = 0; w < m.nsweeps; w++)
      if (m.s[w].op == shapes[s].shape.op && (!o.only || !strcmp(o.only, m.s[w].kernel)))
        cap += m.s[w].nvariants;
  R.items = calloc((size_t)(cap ? cap : 1), sizeof *R.items);
  for (int s = 0; s < nshapes; s++)
    for (int w = 0, base = 0; w < m.nsweeps; base += m.s[w].nvariants, w++)
      if (m.s[w].op == shapes[s].shape.op && (!o.only || !strcmp(o.only, m.s[w].kernel)))
        for (int v = 0; v < m.s[w].nvariants; v++)
          if (m.s[w].v[v].expanded)
            R.items[n++] = (item){s, w, v, &pv[base + v], 0};
  for (int w = 0, base = 0; w < m.nsweeps; base += m.s[w].nvariants, w++)
    for (int v = m.s[w].nvariants - 1; v >= 0; v--)
      if (pv[base + v].runs)
        R.sweep_pv[w] = pv[base + v];
  /* nothing of the sweep runs on this device (a PTX sweep on a machine
   * without an NVIDIA GPU): one line, no lockfile, no report, status 3 */
  int runnable = 0;
  for (int i = 0; i < n; i++)
    runnable += R.items[i].pv->runs;
  if (n && !runnable) {
    char built[200] = "";
    size_t at = 0;
    int kinds = 0;
    for (int i = 0; i < n && at < sizeof built - 40; i++) {
      char one[40];
      const probe_variant *p = R.items[i].pv;
      snprintf(one, sizeof one, "%s %s", p->target[0] ? p->target : "?", p->arch[0] ? p->arch : "?");
      if (!strstr(built, one))
        at += (size_t)snprintf(built + at, sizeof built - at, "%s%s", kinds++ ? ", " : "", one);
    }
    int nv_sel = 0;
    for (int w = 0; w < m.nsweeps; w++)
      if (!o.only || !strcmp(o.only, m.s[w].kernel))
        for (int v = 0; v < m.s[w].nvariants; v++)
          nv_sel += m.s[w].v[v].expanded;
    fprintf(stderr, "dsv4c-tune: nothing to tune: none of the %d variants in %s runs on %s (they are built for %s); "
            "%s not written\n", nv_sel, o.bundle, h.device, built, o.lock);
    free(R.items), free(pv), free(pv2), free(shapes);
    dsv4_lock_free(&R.lock);
    tune_manifest_free(&m);
    return 3;
  }
  int lo = (int)((long long)n * o.shard / o.nshards), hi = (int)((long long)n * (o.shard + 1) / o.nshards);
  int *todo = malloc((size_t)(n ? n : 1) * sizeof *todo), ntodo = 0, skipped = 0, have = 0;
  for (int i = lo; i < hi; i++) {
    item *it = &R.items[i];
    dsv4_lock_key k;
    item_key(&R, it, &k);
    dsv4_lock_entry *e = dsv4_lock_find(&R.lock, &k, 0);
    dsv4_lock_variant *v = e ? dsv4_lock_variant_find(e, m.s[it->sweep].v[it->variant].name) : NULL;
    if (v && strcmp(v->code, it->pv->code)) /* measured on other code: measured again */
      v = NULL;
    if (v && (!o.retry_failed || v->gate == DSV4_GATE_PASS || v->gate == DSV4_GATE_SKIPPED)) {
      have++;
      continue;
    }
    if (!it->pv->runs) { /* recorded, never run: it does not run on this device */
      tune_result r = {.gate = DSV4_GATE_SKIPPED};
      snprintf(r.reason, sizeof r.reason, "does not run on %s (its target, arch or shared memory)", R.model);
      R.total++;
      record(&R, it, &r);
      skipped++;
      continue;
    }
    todo[ntodo++] = i;
  }
  R.total += ntodo;
  fprintf(stderr, "dsv4c-tune: %d (shape, variant) items in shard %d/%d: %d in %s already, %d do not run here, %d to "
          "measure on %d device(s)\n", hi - lo, o.shard, o.nshards, have, o.lock, skipped, ntodo, o.ndevices);
  /* shape by shape, each kind of kernel with its own inputs */
  int *list = malloc((size_t)(ntodo ? ntodo : 1) * sizeof *list);
  for (int s = 0; s < nshapes && !interrupted; s++) {
    for (int first = 0; first < ntodo && !interrupted; first++) {
      item *a = &R.items[todo[first]];
      if (a->shape != s || a->done)
        continue;
      int nl = 0;
      for (int j = first; j < ntodo; j++) {
        item *b = &R.items[todo[j]];
        if (b->shape == s && !b->done && same_kind(a->pv, b->pv))
          list[nl++] = todo[j];
      }
      char shape[128];
      tune_shape_text(&shapes[s], shape, sizeof shape);
      double t0 = now_s();
      tune_inputs *in = tune_inputs_make(&shapes[s], &a->pv->L, a->pv->v_dim, a->pv->heads, &o.o, err, sizeof err);
      if (!in) {
        fprintf(stderr, "dsv4c-tune: %s %s: %s\n", dsv4_tune_op_name(shapes[s].shape.op), shape, err);
        for (int j = 0; j < nl; j++) {
          tune_result r = {.gate = DSV4_GATE_ERROR};
          snprintf(r.reason, sizeof r.reason, "the inputs: %.300s", err);
          record(&R, &R.items[list[j]], &r);
        }
        continue;
      }
      if (!R.tty)
        fprintf(stderr, "dsv4c-tune: %s %s (%s): inputs and reference made in %.1f s; %d variant(s)\n",
                dsv4_tune_op_name(shapes[s].shape.op), shape, shapes[s].label, now_s() - t0, nl);
      rc |= measure_items(&R, in, list, nl);
      tune_inputs_free(in);
      save(&R, 1);
    }
  }
  save(&R, 1);
  if (!o.no_report && tune_report(o.lock, &R.lock, &m, err, sizeof err))
    fprintf(stderr, "dsv4c-tune: report: %s\n", err);
  int status = interrupted ? 130 : rc ? 1 : 0;
  if (interrupted)
    fprintf(stderr, "\ndsv4c-tune: interrupted; %s holds what was measured: run the same command again to go on\n",
            o.lock);
  else {
    int winners = 0, entries = 0;
    for (int i = 0; i < R.lock.n; i++)
      entries++, winners += R.lock.e[i].winner[0] != 0;
    fprintf(stderr, "dsv4c-tune: %s: %d entries, %d with a winner\n", o.lock, entries, winners);
  }
  free(list), free(todo), free(R.items), free(pv), free(pv2), free(shapes);
  dsv4_lock_free(&R.lock);
  tune_manifest_free(&m);
  return status;
}

/* ---- merge and report ------------------------------------------------------------------- */

static int merge(int argc, char **argv)
{
  const char *out = NULL;
  const char **in = malloc((size_t)argc * sizeof *in); /* any number of shards */
  int n = 0;
  if (!in) {
    fprintf(stderr, "dsv4c-tune: out of memory\n");
    return 1;
  }
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else
      in[n++] = argv[i];
  }
  if (!out || n < 1) {
    fprintf(stderr, "usage: dsv4c-tune merge A.lock B.lock ... -o OUT.lock\n");
    free(in);
    return 2;
  }
  dsv4_lock all = {0};
  char err[1024];
  for (int i = 0; i < n; i++) {
    dsv4_lock l;
    if (dsv4_lock_read(in[i], &l, err, sizeof err)) {
      fprintf(stderr, "dsv4c-tune: %s\n", err);
      dsv4_lock_free(&all);
      free(in);
      return 1;
    }
    int bad = dsv4_lock_merge(&all, &l);
    dsv4_lock_free(&l);
    if (bad) {
      fprintf(stderr, "dsv4c-tune: out of memory\n");
      dsv4_lock_free(&all);
      free(in);
      return 1;
    }
  }
  int rc = dsv4_lock_write(out, &all);
  if (rc)
    fprintf(stderr, "dsv4c-tune: cannot write %s: %s\n", out, strerror(errno));
  dsv4_lock_free(&all);
  free(in);
  return rc ? 1 : 0;
}

static int report(int argc, char **argv)
{
  const char *lock = NULL, *manifest = NULL;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--manifest") && i + 1 < argc)
      manifest = argv[++i];
    else
      lock = argv[i];
  if (!lock) {
    fprintf(stderr, "usage: dsv4c-tune report LOCK [--manifest FILE]\n");
    return 2;
  }
  char err[1024];
  dsv4_lock l;
  static tune_manifest m;
  if (dsv4_lock_read(lock, &l, err, sizeof err)) {
    fprintf(stderr, "dsv4c-tune: %s\n", err);
    return 1;
  }
  if (manifest && tune_manifest_read(manifest, &m, err, sizeof err)) {
    fprintf(stderr, "dsv4c-tune: %s\n", err);
    dsv4_lock_free(&l);
    return 1;
  }
  int rc = tune_report(lock, &l, manifest ? &m : NULL, err, sizeof err);
  if (rc)
    fprintf(stderr, "dsv4c-tune: %s\n", err);
  dsv4_lock_free(&l);
  tune_manifest_free(&m);
  return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
  if (argc > 1 && !strcmp(argv[1], "merge"))
    return merge(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "report"))
    return report(argc, argv);
  return tune(argc, argv);
}
