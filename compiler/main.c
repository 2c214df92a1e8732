/* main.c -- the dsv4c command line.  The pipeline reads as a straight line:
 * spec -> plan -> (per kernel, per target) generate, emit, validate ->
 * dumps, loose artifacts and one bundle.  Only this file prints or exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm/Config/llvm-config.h>
#include <lua.h>

#include "../targets/target.h"
#include "bundle.h"
#include "embed.h"
#include "jobs.h"
#include "spec.h"
#include "tuned.h"

#include "dsv4c_commit.h" /* DSV4C_COMMIT, made at every build (cmake/commit.cmake) */

#ifndef DSV4C_VERSION
#define DSV4C_VERSION "0.1.0"
#endif

enum { EMIT_NONE, EMIT_PLAN, EMIT_LLVM, EMIT_ASM, EMIT_C };

typedef struct {
  const char *spec;
  const char *outdir;
  unsigned targets; /* bit per dsv4_target_kind; 0 = what the spec names */
  int emit;
  const char *only; /* -k: one kernel */
  int verbose;
  const char *incdirs[DSV4_SPEC_MAX_INCLUDE_DIRS]; /* -I */
  dsv4_spec_opts sopts;
  int jobs;          /* -j: compile threads (0: one a processor) */
  int no_ptxas;      /* --no-ptxas */
  const char *lock;  /* --lock FILE: a tuned bundle */
  int check;         /* --check: compile and validate, write nothing */
  int outdir_default; /* outdir is the spec's stem, not given by -o */
  char stem_buf[256];
  char specs_buf[PATH_MAX];
} options;

/* "specs/decode.lua" -> "decode" */
static void spec_stem(const char *spec, char *buf, size_t n)
{
  const char *b = strrchr(spec, '/');
  b = b ? b + 1 : spec;
  snprintf(buf, n, "%s", b);
  char *dot = strrchr(buf, '.');
  if (dot && dot != buf)
    *dot = 0;
}

/* The default output folder: the spec's stem ("decode"), or "<stem>.out"
 * where the stem is the spec's own file name (a spec without extension). */
static void default_outdir(const char *spec, char *buf, size_t n)
{
  spec_stem(spec, buf, n);
  const char *b = strrchr(spec, '/');
  if (!strcmp(buf, b ? b + 1 : spec))
    snprintf(buf + strlen(buf), n - strlen(buf), ".out");
}

/* The shipped specs folder, searched by include() after the -I folders:
 * <prefix>/share/dsv4c/specs beside an installed dsv4c, else the source
 * tree's specs/ for a dsv4c run from its build tree.  NULL if neither. */
static const char *shipped_specs(char *buf, size_t n)
{
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  struct stat st;
  if (len > 0) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      int w = snprintf(buf, n, "%s/../share/dsv4c/specs", exe);
      if (w > 0 && (size_t)w < n && !stat(buf, &st) && S_ISDIR(st.st_mode))
        return buf;
    }
  }
#ifdef DSV4C_SOURCE_SPECS
  snprintf(buf, n, "%s", DSV4C_SOURCE_SPECS);
  if (!stat(buf, &st) && S_ISDIR(st.st_mode))
    return buf;
#endif
  return NULL;
}

/* What this dsv4c is and what it was built with: the toolchain a bundle's
 * code depends on (the tuning lockfile keys on the same: tuned.c). */
static void print_version(void)
{
  printf("dsv4c %s (commit %s)\n", DSV4C_VERSION, DSV4C_COMMIT);
  printf("  LLVM %s (PTX, AMDGCN; ld.lld-19 links HSA code objects)\n", LLVM_VERSION_STRING);
  printf("  LLVM %s with the Khronos SPIRV-LLVM-Translator (SPIR-V, in dsv4c-spirv)\n", DSV4C_LLVM15_VERSION);
  printf("  %s (the spec language)\n", LUA_RELEASE);
  printf("  SPIRV-Tools %s (SPIR-V validation)\n", dsv4_spirv_tools_version());
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: dsv4c SPEC [-t ptx,amdgcn,spirv] [-o DIR | --check] [--emit plan|llvm|asm|c] [-k KERNEL]\n"
          "             [-I DIR] [-v] [-j N] [--no-ptxas] [--lock FILE]\n"
          "       dsv4c --help | --version\n"
          "\n"
          "Compile the kernels a Lua spec declares for the targets it names.\n"
          "  -t, --target LIST   only these targets (comma-separated): ptx, amdgcn, spirv\n"
          "  -o, --output DIR    write <kernel>.ptx/.hsaco/.spv (+ <kernel>.spir12.bc) and\n"
          "                      <spec>.dsv4b, the bundle holding all of them with a manifest,\n"
          "                      into DIR (default: the folder <spec> in the current folder,\n"
          "                      \"decode\" for specs/decode.lua); one line says what was written\n"
          "  --check             compile and validate every artifact, write nothing\n"
          "  --emit STAGE        print a stage to stdout: plan (checked spec), llvm\n"
          "                      (optimized IR), asm (PTX, AMDGCN assembly, SPIR-V disassembly),\n"
          "                      writing files only when -o is given;\n"
          "                      c: what -o writes plus <stem>_kernels.c (the bundle's bytes as a\n"
          "                      C array) and <stem>_kernels.h (opener, kernel names, typed\n"
          "                      launchers), <stem> made a C identifier, into DIR (default: .)\n"
          "  -k, --kernel NAME   only this kernel (or every variant of the sweep of that name)\n"
          "  -j, --jobs N        compile on N threads (default: one a processor); the output is the\n"
          "                      same bytes whatever N\n"
          "  --no-ptxas          leave ptxas's assembly of PTX out (sweeps: the driver still assembles\n"
          "                      each variant when dsv4c-tune loads it, and a refusal disqualifies it)\n"
          "  --lock FILE         a tuned build: the spec's kernels less the sweep variants that win no\n"
          "                      fresh entry of the lockfile FILE (dsv4c-tune); the bundle carries the\n"
          "                      winners as choice records (dsv4rt_bundle_open installs those of its\n"
          "                      GPU model), and <spec>.lock beside it holds those entries; stale\n"
          "                      entries (spec, toolchain or code changed) are reported and left out\n"
          "  -I DIR              a folder include() searches after the including file's own;\n"
          "                      the shipped specs (layouts.lua, ...) are searched last\n"
          "                      (includes never resolve outside these folders)\n"
          "  --max-instructions N  the spec's instruction budget (default %lld)\n"
          "  --max-memory MB     the spec's memory cap in MiB (default %lld)\n"
          "  -v, --verbose       say how each artifact was validated\n"
          "  --version           dsv4c's version and commit, and the LLVM, Lua and SPIRV-Tools it uses\n"
          "Exit status: 0 success, 1 spec or code-generation error, 2 bad usage.\n"
          "Compiling never needs a GPU.\n",
          DSV4_SPEC_MAX_INSTRUCTIONS, DSV4_SPEC_MAX_MEMORY >> 20);
}

/* Each diagnostic, and under it the source line with a caret where its
 * column is known. */
static void print_diags(const dsv4_diags *d)
{
  char line[2048], excerpt[2048];
  for (int i = 0; i < d->n; i++) {
    const dsv4_diag *g = &d->items[i];
    dsv4_diag_format(g, line, sizeof line);
    fprintf(stderr, "%s\n", line);
    size_t len = 0;
    unsigned char *src = NULL;
    if (g->col > 0 && !dsv4_read_file(g->file, &src, &len)) {
      dsv4_diag_excerpt(g, (const char *)src, len, excerpt, sizeof excerpt);
      fputs(excerpt, stderr);
      free(src);
    }
  }
  if (d->errors > d->n)
    fprintf(stderr, "dsv4c: %d more error(s) not shown\n", d->errors - d->n);
}

/* Parse "ptx,spirv" into a bit set; 0 on success. */
static int parse_targets(const char *s, unsigned *out)
{
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  *out = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int t = dsv4_target_from_name(tok);
    if (t < 0) {
      fprintf(stderr, "dsv4c: unknown target '%s' (expected ptx, amdgcn or spirv)\n", tok);
      return 1;
    }
    *out |= 1u << t;
  }
  return *out == 0;
}

/* A positive count (times unit) that fits a long long; 0 on success. */
static int parse_limit(const char *s, long long unit, long long *out)
{
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v <= 0 || v > LLONG_MAX / unit)
    return 1;
  *out = v * unit;
  return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
  static const struct option longs[] = {
      {"target", required_argument, 0, 't'}, {"output", required_argument, 0, 'o'},
      {"emit", required_argument, 0, 'e'},   {"kernel", required_argument, 0, 'k'},
      {"verbose", no_argument, 0, 'v'},      {"help", no_argument, 0, 'h'},
      {"version", no_argument, 0, 'V'},      {"max-instructions", required_argument, 0, 'N'},
      {"max-memory", required_argument, 0, 'M'}, {"jobs", required_argument, 0, 'j'},
      {"no-ptxas", no_argument, 0, 'P'},         {"lock", required_argument, 0, 'L'},
      {"check", no_argument, 0, 'C'},            {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":t:o:k:I:j:vh", longs, NULL)) != -1) {
    switch (c) {
    case 'j': {
      long long v;
      if (parse_limit(optarg, 1, &v) || v > 1024) {
        fprintf(stderr, "dsv4c: -j takes a number of threads from 1 to 1024, not '%s'\n", optarg);
        return 2;
      }
      o->jobs = (int)v;
      break;
    }
    case 'P':
      o->no_ptxas = 1;
      break;
    case 'L':
      o->lock = optarg;
      break;
    case 'C':
      o->check = 1;
      break;
    case 'I':
      if (o->sopts.ninclude_dirs == DSV4_SPEC_MAX_INCLUDE_DIRS) {
        fprintf(stderr, "dsv4c: more than %d -I folders\n", DSV4_SPEC_MAX_INCLUDE_DIRS);
        return 2;
      }
      o->incdirs[o->sopts.ninclude_dirs++] = optarg;
      o->sopts.include_dirs = o->incdirs;
      break;
    case 'N':
    case 'M':
      if (parse_limit(optarg, c == 'M' ? 1LL << 20 : 1, c == 'M' ? &o->sopts.max_memory : &o->sopts.max_instructions)) {
        fprintf(stderr, "dsv4c: %s takes a positive number, not '%s'\n",
                c == 'M' ? "--max-memory" : "--max-instructions", optarg);
        return 2;
      }
      break;
    case 't':
      if (parse_targets(optarg, &o->targets))
        return 2;
      break;
    case 'o':
      o->outdir = optarg;
      break;
    case 'k':
      o->only = optarg;
      break;
    case 'v':
      o->verbose = 1;
      break;
    case 'e':
      if (!strcmp(optarg, "plan"))
        o->emit = EMIT_PLAN;
      else if (!strcmp(optarg, "llvm"))
        o->emit = EMIT_LLVM;
      else if (!strcmp(optarg, "asm"))
        o->emit = EMIT_ASM;
      else if (!strcmp(optarg, "c"))
        o->emit = EMIT_C;
      else {
        fprintf(stderr, "dsv4c: --emit takes plan, llvm, asm or c, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'h':
      usage(stdout);
      exit(0);
    case 'V':
      print_version();
      exit(0);
    case ':':
      fprintf(stderr, "dsv4c: option '%s' needs an argument\n", argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "dsv4c: unknown option '%s'\n", argv[optind - 1]);
      return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, optind >= argc ? "dsv4c: no spec file given\n" : "dsv4c: more than one spec file given\n");
    usage(stderr);
    return 2;
  }
  o->spec = argv[optind];
  /* the shipped specs (layouts.lua, ...) after the -I folders */
  if (o->sopts.ninclude_dirs < DSV4_SPEC_MAX_INCLUDE_DIRS && shipped_specs(o->specs_buf, sizeof o->specs_buf)) {
    o->incdirs[o->sopts.ninclude_dirs++] = o->specs_buf;
    o->sopts.include_dirs = o->incdirs;
  }
  if (o->check && (o->outdir || o->emit == EMIT_C)) {
    fprintf(stderr, "dsv4c: --check writes nothing: it takes neither -o nor --emit c\n");
    return 2;
  }
  /* a compile writes its output: -o DIR, else --emit c into the current
   * folder, else the folder named after the spec; --check and the dumps
   * to stdout (--emit plan|llvm|asm) write only where -o says */
  if (!o->outdir && !o->check && o->emit == EMIT_C)
    o->outdir = ".";
  if (!o->outdir && !o->check && o->emit == EMIT_NONE) {
    default_outdir(o->spec, o->stem_buf, sizeof o->stem_buf);
    o->outdir = o->stem_buf;
    o->outdir_default = 1;
  }
  if (o->lock && !o->outdir) {
    fprintf(stderr, "dsv4c: --lock builds a tuned bundle: it takes no --check and writes where -o says\n");
    return 2;
  }
  return 0;
}

/* The output folder, made if missing; 0 on success.  Parallel builds run
 * several dsv4c into one folder: another may create it between our look
 * and our mkdir. */
static int make_outdir(const char *dir)
{
  struct stat st;
  if (mkdir(dir, 0777) && !(errno == EEXIST && !stat(dir, &st) && S_ISDIR(st.st_mode))) {
    fprintf(stderr, "dsv4c: cannot create %s: %s\n", dir,
            errno == EEXIST ? "a file of that name is in the way" : strerror(errno));
    return 1;
  }
  return 0;
}

/* Write path atomically (temporary name, then rename). */
static int write_out(const char *dir, const char *name, const void *p, size_t n)
{
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  if (dsv4_write_file(tmp, p, n) || rename(tmp, path)) {
    fprintf(stderr, "dsv4c: cannot write %s: %s\n", path, strerror(errno));
    unlink(tmp);
    return 1;
  }
  return 0;
}

/* Whether -k selects kernel k: its name, or the sweep it is a variant of. */
static int selected(const dsv4_plan *p, const options *o, const dsv4_kernel *k)
{
  if (!o->only || !strcmp(k->name, o->only))
    return 1;
  const dsv4_variant *v = dsv4_plan_variant(p, k->name);
  return v && !strcmp(p->sweeps[v->sweep].kernel, o->only);
}

/* The one line every compile that writes prints: where, and what. */
static void print_summary(const options *o, const char *bundle, int n, int nchoices, size_t blen,
                          const int per_target[DSV4_TARGET_COUNT], int nfallback)
{
  char what[512] = "";
  size_t w = 0;
  for (int t = 0; t < DSV4_TARGET_COUNT; t++)
    if (per_target[t] && w < sizeof what)
      w += (size_t)snprintf(what + w, sizeof what - w, "%s%d .%s", w ? ", " : "", per_target[t],
                            dsv4_target_ext((dsv4_target_kind)t));
  if (nfallback && w < sizeof what)
    snprintf(what + w, sizeof what - w, ", %d .spir12.bc", nfallback);
  const char *dir = o->outdir;
  size_t dl = strlen(dir);
  char choices[64] = "";
  if (nchoices)
    snprintf(choices, sizeof choices, ", %d choice record%s", nchoices, nchoices == 1 ? "" : "s");
  fprintf(stderr, "dsv4c: wrote %s%s%s (%d artifact%s%s, %zu bytes) and %s beside it\n", dir,
          dl && dir[dl - 1] == '/' ? "" : "/", bundle, n, n == 1 ? "" : "s", choices, blen, what);
}

static int count_errors(const dsv4_diags *d)
{
  int n = 0;
  for (int i = 0; i < d->n; i++)
    n += d->items[i].sev == DSV4_SEV_ERROR;
  return n;
}

int main(int argc, char **argv)
{
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc;
  static dsv4_plan plan;
  dsv4_diags d = {0};
  if (dsv4_spec_load(o.spec, &o.sopts, &plan, &d)) {
    print_diags(&d);
    return 1;
  }
  if (o.only) {
    int found = 0;
    for (int i = 0; i < plan.nkernels; i++)
      found |= selected(&plan, &o, &plan.kernels[i]);
    if (!found) {
      fprintf(stderr, "dsv4c: %s declares no kernel '%s'\n", o.spec, o.only);
      return 2;
    }
  }
  if (o.emit == EMIT_PLAN) {
    char *s = dsv4_plan_dump(&plan);
    fputs(s ? s : "", stdout);
    free(s);
    return 0;
  }
  /* a tuned build: the kernels the lockfile's fresh entries choose */
  static unsigned char keep[DSV4_MAX_KERNELS];
  dsv4_lock fresh = {0};
  memset(keep, 1, sizeof keep);
  if (o.lock && dsv4_tuned_select(&plan, o.lock, o.targets, keep, &fresh, &d)) {
    print_diags(&d);
    return 1;
  }
  unsigned want = o.emit == EMIT_LLVM ? DSV4_WANT_LLVM : o.emit == EMIT_ASM ? DSV4_WANT_ASM : 0;
  if (o.no_ptxas)
    want |= DSV4_WANT_NO_PTXAS;
  /* every (kernel, target) to build, in the plan's order: compiled on -j
   * threads, then read back in this order (the same output for any -j) */
  dsv4_job *jobs = calloc(DSV4_MAX_KERNELS * DSV4_TARGET_COUNT, sizeof *jobs);
  static dsv4_bundle_item items[DSV4_MAX_KERNELS * DSV4_TARGET_COUNT];
  if (!jobs) {
    fprintf(stderr, "dsv4c: out of memory\n");
    return 1;
  }
  int nj = 0, n = 0, failed = 0;
  for (int i = 0; i < plan.nkernels; i++) {
    const dsv4_kernel *k = &plan.kernels[i];
    if (!selected(&plan, &o, k) || !keep[i])
      continue;
    for (int t = 0; t < DSV4_TARGET_COUNT; t++) {
      if (!k->target[t].enabled || (o.targets && !(o.targets & (1u << t))))
        continue;
      jobs[nj].kernel = k, jobs[nj].target = (dsv4_target_kind)t, jobs[nj].want = want;
      nj++;
    }
  }
  dsv4_run_jobs(jobs, nj, o.jobs > 0 ? o.jobs : dsv4_cpu_count());
  /* a sweep variant a code generator refuses (a rule the checker does not
   * know) is a rejected variant with that reason, not a failed build: it
   * leaves the bundle on every target, and the manifest says why */
  static unsigned char refused[DSV4_MAX_KERNELS];
  int nrefused = 0;
  for (int i = 0; i < nj; i++) {
    dsv4_job *j = &jobs[i];
    dsv4_variant *v = (dsv4_variant *)dsv4_plan_variant(&plan, j->kernel->name);
    int k = (int)(j->kernel - plan.kernels);
    if (!j->failed || !v || refused[k])
      continue;
    refused[k] = 1, nrefused++;
    v->kernel = -1;
    snprintf(v->reason, sizeof v->reason, "code generation for %s: %.*s", dsv4_target_name(j->target),
             (int)sizeof v->reason - 40, j->diags.n ? j->diags.items[0].msg : "failed");
    if (nrefused == 1 || o.verbose)
      fprintf(stderr, "dsv4c: note: sweep variant %s left out: %s\n", j->kernel->name, v->reason);
  }
  if (nrefused > 1 && !o.verbose)
    fprintf(stderr, "dsv4c: note: %d sweep variants left out in all (-v, --emit plan or the sweep manifest says why)\n",
            nrefused);
  for (int i = 0; i < nj; i++) {
    dsv4_job *j = &jobs[i];
    if (refused[j->kernel - plan.kernels]) {
      j->failed = 1; /* out of the bundle, its diagnostics a note above */
      continue;
    }
    for (int g = 0; g < j->diags.n; g++)
      dsv4_diag_add(&d, &j->diags.items[g]);
    d.errors += j->diags.errors - count_errors(&j->diags); /* those it could not keep */
    if (j->failed) {
      failed = 1;
      continue;
    }
    const dsv4_kernel *k = j->kernel;
    dsv4_target_kind t = j->target;
    dsv4_artifact *a = &j->art;
    const char *dump = o.emit == EMIT_LLVM ? a->llvm : o.emit == EMIT_ASM ? a->asm_text : NULL;
    if (dump)
      printf("; ---- kernel %s, target %s (%s)\n%s\n", k->name, dsv4_target_name(t), k->target[t].arch, dump);
    if (o.verbose)
      fprintf(stderr, "dsv4c: %s [%s %s]: %zu bytes; %s\n", k->name, dsv4_target_name(t), k->target[t].arch,
              a->code_len, a->note);
  }
  /* a tuned build keeps the winners whose code is the code measured */
  if (!failed && o.lock) {
    int used = dsv4_tuned_verify(&plan, o.lock, jobs, nj, keep, &fresh, &d);
    if (o.verbose)
      fprintf(stderr, "dsv4c: %s: %d fresh entries choose kernels\n", o.lock, used);
  }
  for (int i = 0; i < nj; i++) {
    dsv4_job *j = &jobs[i];
    if (j->failed || !keep[j->kernel - plan.kernels] || refused[j->kernel - plan.kernels])
      continue;
    items[n].kernel = j->kernel, items[n].target = j->target, items[n].art = &j->art;
    n++;
  }
  /* a tuned build's choice records: the fresh entries' winners, by entry */
  dsv4_bundle_choice *choices = NULL;
  int nchoices = 0;
  if (!failed && o.lock && dsv4_tuned_choices(&fresh, items, n, o.lock, &choices, &nchoices, &d))
    failed = 1;
  print_diags(&d);
  if (!failed && n == 0) {
    fprintf(stderr, "dsv4c: %s: no kernel is declared for the selected target(s)\n", o.spec);
    failed = 1;
  }
  /* the output folder, made only now that there is something to write */
  if (!failed && o.outdir && make_outdir(o.outdir))
    failed = 1;
  /* --emit c: the bundle as C source and its header, made (every generated
   * name checked) before anything is written, written before the rest */
  if (!failed && o.emit == EMIT_C) {
    dsv4_diags ed = {0};
    dsv4_embed e;
    if (dsv4_embed_build(o.spec, items, n, choices, nchoices, &e, &ed)) {
      print_diags(&ed);
      failed = 1;
    } else {
      failed |= write_out(o.outdir, e.h_name, e.h_text, e.h_len) || write_out(o.outdir, e.c_name, e.c_text, e.c_len);
      if (o.verbose && !failed)
        fprintf(stderr, "dsv4c: wrote %s/%s and %s/%s\n", o.outdir, e.c_name, o.outdir, e.h_name);
    }
    dsv4_embed_free(&e);
  }
  /* write only when every artifact compiled and validated */
  if (!failed && o.outdir) {
    char name[512], stem[256];
    int per_target[DSV4_TARGET_COUNT] = {0}, nfallback = 0;
    for (int i = 0; i < n && !failed; i++) {
      snprintf(name, sizeof name, "%s.%s", items[i].kernel->name, dsv4_target_ext(items[i].target));
      failed |= write_out(o.outdir, name, items[i].art->code, items[i].art->code_len);
      per_target[items[i].target]++;
      if (items[i].art->aux_len) {
        snprintf(name, sizeof name, "%s.spir12.bc", items[i].kernel->name);
        failed |= write_out(o.outdir, name, items[i].art->aux, items[i].art->aux_len);
        nfallback++;
      }
    }
    spec_stem(o.spec, stem, sizeof stem);
    /* a spec with sweeps: the manifest dsv4c-tune reads beside the bundle */
    if (!failed && plan.nsweeps && !o.lock) {
      size_t mlen;
      char *m = dsv4_sweep_manifest(&plan, o.spec, jobs, nj, &mlen);
      snprintf(name, sizeof name, "%s.sweep.json", stem);
      failed |= !m || write_out(o.outdir, name, m, mlen);
      free(m);
    }
    if (!failed && o.lock) { /* the entries the tuned bundle's kernels were chosen by */
      size_t llen;
      char *l = dsv4_lock_format(&fresh, &llen);
      snprintf(name, sizeof name, "%s.lock", stem);
      failed |= !l || write_out(o.outdir, name, l, llen);
      free(l);
    }
    unsigned char *bundle = NULL;
    size_t blen = 0;
    if (!failed && dsv4_bundle_build_tuned(items, n, choices, nchoices, &bundle, &blen, &d) == 0) {
      snprintf(name, sizeof name, "%s.dsv4b", stem);
      failed |= write_out(o.outdir, name, bundle, blen);
      if (!failed)
        print_summary(&o, name, n, nchoices, blen, per_target, nfallback);
    } else if (!failed) {
      print_diags(&d);
      failed = 1;
    }
    free(bundle);
  }
  for (int i = 0; i < nj; i++)
    dsv4_artifact_free(&jobs[i].art);
  free(jobs);
  free(choices);
  dsv4_lock_free(&fresh);
  return failed ? 1 : 0;
}
