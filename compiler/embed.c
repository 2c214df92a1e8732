/* embed.c -- dsv4c --emit c: the bundle as a C array plus a typed header
 * (embed.h says what is generated; docs/design.md "Embedded kernels" why). */
#include "embed.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h" /* dsv4_text: the growing buffer --emit plan and the lockfile use */

/* ---- names ------------------------------------------------------------------ */

static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_alnum_(int c) { return is_alpha(c) || (c >= '0' && c <= '9') || c == '_'; }
static int to_upper(int c) { return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c; }

static void upper(char *dst, const char *src, size_t n)
{
  size_t i = 0;
  for (; src[i] && i + 1 < n; i++)
    dst[i] = (char)to_upper((unsigned char)src[i]);
  dst[i] = 0;
}

static const char *base_name(const char *path)
{
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

int dsv4_embed_prefix(const char *spec, char *out, size_t n, dsv4_diags *d)
{
  const char *b = base_name(spec);
  size_t len = strlen(b);
  const char *dot = strrchr(b, '.');
  if (dot && dot != b)
    len = (size_t)(dot - b);
  if (len == 0 || len + 1 > n) {
    dsv4_error(d, spec, 0, "--emit c: the spec's name '%.*s' gives no C identifier (empty or over %zu bytes)",
               (int)len, b, n - 1);
    return 1;
  }
  for (size_t i = 0; i < len; i++)
    out[i] = is_alnum_((unsigned char)b[i]) ? b[i] : '_';
  out[len] = 0;
  if (!is_alpha((unsigned char)out[0])) {
    dsv4_error(d, spec, 0,
               "--emit c: the spec's name '%.*s' does not begin with a letter, so it gives no C identifier for "
               "the generated names; rename the spec",
               (int)len, b);
    return 1;
  }
  char low[8];
  size_t k = 0;
  for (; k < sizeof low - 1 && out[k]; k++)
    low[k] = (char)(out[k] >= 'A' && out[k] <= 'Z' ? out[k] - 'A' + 'a' : out[k]);
  low[k] = 0;
  if (!strncmp(low, "dsv4_", 5) || !strncmp(low, "dsv4rt", 6)) {
    dsv4_error(d, spec, 0,
               "--emit c: the generated names would begin with '%s', which belongs to the runtime's headers "
               "(dsv4_*, dsv4rt*); rename the spec",
               out);
    return 1;
  }
  return 0;
}

/* The runtime call and argument struct of each op (dsv4rt.h); an op this
 * table lacks gets its name constant only. */
static const char *op_call(dsv4_op op, const char **args)
{
  switch (op) {
  case DSV4_OP_DEQUANT_GATHER: *args = "dsv4rt_dequant_gather_args"; return "dsv4rt_dequant_gather";
  case DSV4_OP_PAGED_GATHER: *args = "dsv4rt_paged_gather_args"; return "dsv4rt_paged_gather";
  case DSV4_OP_KV_INSERT: *args = "dsv4rt_kv_insert_args"; return "dsv4rt_kv_insert";
  case DSV4_OP_SPARSE_DECODE: *args = "dsv4rt_sparse_decode_args"; return "dsv4rt_sparse_decode";
  case DSV4_OP_PAGED_MQA_LOGITS: *args = "dsv4rt_mqa_logits_args"; return "dsv4rt_paged_mqa_logits";
  case DSV4_OP_TOPK: *args = "dsv4rt_topk_args"; return "dsv4rt_topk";
  case DSV4_OP_PAGED_MQA_LOGITS_TOPK: *args = "dsv4rt_mqa_logits_topk_args"; return "dsv4rt_paged_mqa_logits_topk";
  default: *args = NULL; return NULL;
  }
}

/* Every name the two files define, with who asked for it, so that a clash
 * (a kernel called "kernels_open", two names equal once upper-cased) is an
 * error naming both and not a C compiler's complaint in someone's build. */
typedef struct {
  char name[DSV4_EMBED_PREFIX_MAX + DSV4_NAME_MAX + 16];
  const dsv4_kernel *k; /* NULL: one of the fixed names */
} gen_name;

static int claim(gen_name *names, int *nn, const char *name, const dsv4_kernel *k, dsv4_diags *d)
{
  for (int i = 0; i < *nn; i++) {
    if (strcmp(names[i].name, name))
      continue;
    const dsv4_kernel *o = names[i].k;
    if (k && o)
      dsv4_error(d, k->file, k->line,
                 "--emit c: kernel '%s' gives the C name %s, which kernel '%s' (%s:%d) gives too; rename one", k->name,
                 name, o->name, o->file, o->line);
    else if (k)
      dsv4_error(d, k->file, k->line, "--emit c: kernel '%s' gives the C name %s, which the header defines already; "
                 "rename the kernel", k->name, name);
    else
      dsv4_error(d, NULL, 0, "--emit c: the C name %s is generated twice", name);
    return 1;
  }
  snprintf(names[*nn].name, sizeof names[*nn].name, "%s", name);
  names[(*nn)++].k = k;
  return 0;
}

/* ---- the two files ---------------------------------------------------------- */

static void hex_lines(dsv4_text *t, const unsigned char *p, size_t n)
{
  static const char hx[] = "0123456789abcdef";
  char line[16 * 6 + 4];
  for (size_t i = 0; i < n; i += 16) {
    size_t m = n - i < 16 ? n - i : 16, w = 0;
    line[w++] = ' ', line[w++] = ' ';
    for (size_t j = 0; j < m; j++) {
      unsigned v = p[i + j];
      line[w++] = '0', line[w++] = 'x', line[w++] = hx[v >> 4], line[w++] = hx[v & 15], line[w++] = ',';
      if (j + 1 < m)
        line[w++] = ' ';
    }
    line[w++] = '\n';
    dsv4_text_printf(t, "%.*s", (int)w, line);
  }
}

int dsv4_embed_build(const char *spec, const dsv4_bundle_item *items, int n, const dsv4_bundle_choice *choices,
                     int nchoices, dsv4_embed *e, dsv4_diags *d)
{
  memset(e, 0, sizeof *e);
  if (dsv4_embed_prefix(spec, e->prefix, sizeof e->prefix, d))
    return 1;
  const char *P = e->prefix, *src = base_name(spec);
  char PU[DSV4_EMBED_PREFIX_MAX], buf[DSV4_EMBED_PREFIX_MAX + DSV4_NAME_MAX + 16], ku[DSV4_NAME_MAX];
  upper(PU, P, sizeof PU);
  snprintf(e->c_name, sizeof e->c_name, "%s_kernels.c", P);
  snprintf(e->h_name, sizeof e->h_name, "%s_kernels.h", P);

  /* the kernels, once each, in bundle order (a kernel has an item per target) */
  const dsv4_kernel *ks[DSV4_MAX_KERNELS];
  int nk = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < nk && !seen; j++)
      seen = ks[j] == items[i].kernel;
    if (!seen && nk < DSV4_MAX_KERNELS)
      ks[nk++] = items[i].kernel;
  }

  static gen_name names[4 + 2 * DSV4_MAX_KERNELS];
  int nn = 0, bad = 0;
  static const char *const fixed[] = {"%s_kernels_bundle", "%s_kernels_bundle_size", "%s_kernels_open"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
    snprintf(buf, sizeof buf, fixed[i], P);
    bad |= claim(names, &nn, buf, NULL, d);
  }
  snprintf(buf, sizeof buf, "%s_KERNELS_H", PU);
  bad |= claim(names, &nn, buf, NULL, d);
  for (int i = 0; i < nk; i++) {
    const char *args;
    upper(ku, ks[i]->name, sizeof ku);
    snprintf(buf, sizeof buf, "%s_KERNEL_%s", PU, ku);
    bad |= claim(names, &nn, buf, ks[i], d);
    if (op_call(ks[i]->op, &args)) {
      snprintf(buf, sizeof buf, "%s_%s", P, ks[i]->name);
      bad |= claim(names, &nn, buf, ks[i], d);
    }
  }
  if (bad)
    return 1;

  unsigned char *bundle = NULL;
  size_t blen = 0;
  if (dsv4_bundle_build_tuned(items, n, choices, nchoices, &bundle, &blen, d))
    return 1;

  /* ---- <prefix>_kernels.h ---- */
  dsv4_text h = {0};
  dsv4_text_printf(&h,
                   "/* %s -- generated by dsv4c --emit c from %s; do not edit.\n"
                   " *\n"
                   " * The kernels of %s, embedded in %s as the bundle dsv4c writes\n"
                   " * beside it (the same %zu bytes: %d kernel%s, %d entr%s).  Open them with\n"
                   " * %s_kernels_open(); link %s and libdsv4rt. */\n"
                   "#ifndef %s_KERNELS_H\n"
                   "#define %s_KERNELS_H\n\n"
                   "#include <stddef.h>\n"
                   "#include <string.h>\n\n"
                   "#include <dsv4rt.h>\n\n"
                   "#ifdef __cplusplus\n"
                   "extern \"C\" {\n"
                   "#endif\n\n"
                   "/* The bundle's bytes (16-byte aligned) and their number. */\n"
                   "extern const unsigned char %s_kernels_bundle[];\n"
                   "extern const size_t %s_kernels_bundle_size;\n\n"
                   "/* Open the embedded bundle on ctx through dsv4rt_bundle_open_memory, which\n"
                   " * checks it as dsv4rt_bundle_open checks a file (version, size, checksum,\n"
                   " * every entry) and copies it.  The caller owns *out (dsv4rt_bundle_destroy). */\n"
                   "dsv4rt_status %s_kernels_open(dsv4rt_context *ctx, dsv4rt_bundle **out);\n\n"
                   "/* Each kernel's name, for dsv4rt_launch_opts.kernel and\n"
                   " * dsv4rt_bundle_kernel_runs: op, cache layout, targets. */\n",
                   e->h_name, src, src, e->c_name, blen, nk, nk == 1 ? "" : "s", n, n == 1 ? "y" : "ies", P, e->c_name,
                   PU, PU, P, P, P);
  for (int i = 0; i < nk; i++) {
    const dsv4_kernel *k = ks[i];
    upper(ku, k->name, sizeof ku);
    dsv4_text_printf(&h, "#define %s_KERNEL_%s \"%s\" /* %s, %s:", PU, ku, k->name, dsv4_op_name(k->op),
        dsv4_op_has_layout(k->op) ? k->layout.name : "no cache");
    for (int j = 0; j < n; j++)
      if (items[j].kernel == k)
        dsv4_text_printf(&h, " %s %s", dsv4_target_name(items[j].target), k->target[items[j].target].arch);
    dsv4_text_printf(&h, " */\n");
  }
  dsv4_text_printf(&h, "\n/* Launchers: the op's call with opts->kernel set to the kernel, the other\n"
          " * options taken from opts (NULL: the defaults).  Validated as the op call\n"
          " * validates; DSV4RT_ERR_NO_KERNEL where this kernel does not run on the\n"
          " * context's device (no other kernel of the op is taken instead). */\n");
  for (int i = 0; i < nk; i++) {
    const dsv4_kernel *k = ks[i];
    const char *args, *call = op_call(k->op, &args);
    if (!call)
      continue;
    upper(ku, k->name, sizeof ku);
    dsv4_text_printf(&h,
        "static inline dsv4rt_status %s_%s(dsv4rt_bundle *b, const %s *a,\n"
        "    const dsv4rt_launch_opts *opts)\n"
        "{\n"
        "  dsv4rt_launch_opts o;\n"
        "  if (opts)\n"
        "    o = *opts;\n"
        "  else\n"
        "    memset(&o, 0, sizeof o);\n"
        "  o.kernel = %s_KERNEL_%s;\n"
        "  return %s(b, a, &o);\n"
        "}\n\n",
        P, k->name, args, PU, ku, call);
  }
  dsv4_text_printf(&h, "#ifdef __cplusplus\n}\n#endif\n#endif\n");

  /* ---- <prefix>_kernels.c ---- */
  dsv4_text c = {0};
  dsv4_text_printf(&c,
      "/* %s -- generated by dsv4c --emit c from %s; do not edit.\n"
      " * The bundle of %s, %zu bytes, as dsv4c writes it to a .dsv4b file. */\n"
      "#include \"%s\"\n\n"
      "#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
      "_Alignas(16)\n"
      "#else\n"
      "__attribute__((aligned(16)))\n"
      "#endif\n"
      "const unsigned char %s_kernels_bundle[%zu] = {\n",
      e->c_name, src, src, blen, e->h_name, P, blen);
  hex_lines(&c, bundle, blen);
  dsv4_text_printf(&c,
      "};\n\n"
      "const size_t %s_kernels_bundle_size = sizeof %s_kernels_bundle;\n\n"
      "dsv4rt_status %s_kernels_open(dsv4rt_context *ctx, dsv4rt_bundle **out)\n"
      "{\n"
      "  return dsv4rt_bundle_open_memory(ctx, %s_kernels_bundle, sizeof %s_kernels_bundle, out);\n"
      "}\n",
      P, P, P, P, P);
  free(bundle);

  if (h.failed || c.failed) {
    free(h.s), free(c.s);
    dsv4_error(d, spec, 0, "--emit c: out of memory");
    return 1;
  }
  e->h_text = h.s, e->h_len = h.n;
  e->c_text = c.s, e->c_len = c.n;
  return 0;
}

void dsv4_embed_free(dsv4_embed *e)
{
  free(e->c_text);
  free(e->h_text);
  e->c_text = e->h_text = NULL;
}
