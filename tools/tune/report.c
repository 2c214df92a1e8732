/* report.c -- what a person reads of a lockfile: <stem>.md, a table a
 * kernel (sweep) and shape bucket with every variant's times and gate, and
 * one SVG plot each (the median time against each swept field, a panel a
 * field; every variant that passed its gate a point, the winner marked).
 * Both are derived from the lockfile alone (and the manifest, for the
 * fields' values), so `dsv4c-tune report` remakes them after a merge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "sha256.h"
#include "tune.h"

/* A file name part of s: letters, digits, '.', '-', '_' kept, the rest '_'. */
static void sanitize(const char *s, char *out, size_t n)
{
  size_t o = 0;
  for (; *s && o + 1 < n; s++)
    out[o++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
                       *s == '-' || *s == '_'
                   ? *s
                   : '_';
  out[o] = 0;
}

/* The plot's file name for entry e (stem-relative: <base>-<kernel>-<bucket>-<key hash>.svg). */
static void svg_name(const char *base, const dsv4_lock_entry *e, char *out, size_t n)
{
  char k[64], b[160], key[900], hex[65];
  sanitize(e->key.kernel, k, sizeof k);
  sanitize(e->key.bucket, b, sizeof b);
  snprintf(key, sizeof key, "%s|%s|%s|%s|%s|%s|%s|%s", e->key.kernel, e->key.op, e->key.target, e->key.arch,
           e->key.device, e->key.toolchain, e->key.bucket, e->key.spec_hash);
  dsv4_sha256_hex(key, strlen(key), hex);
  snprintf(out, n, "%s-%s-%s-%.8s.svg", base, k, b, hex);
}

static int by_time(const void *a, const void *b)
{
  const dsv4_lock_variant *x = a, *y = b;
  int px = x->gate == DSV4_GATE_PASS, py = y->gate == DSV4_GATE_PASS;
  if (px != py)
    return py - px;
  if (px && x->median_us != y->median_us)
    return x->median_us < y->median_us ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not
 * one: an XML reader refuses a document with a bad sequence. */
static int utf8_len(const unsigned char *p)
{
  int n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 && p[0] >= 0xC2 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3
        : (p[0] & 0xF8) == 0xF0 && p[0] <= 0xF4 ? 4 : 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80)
      return 0;
  return n;
}

/* Text taken from a lockfile or manifest (any bytes: a hostile file's
 * too), as SVG character data or an attribute value: markup characters as
 * entities, control characters as spaces, bad UTF-8 as '?'. */
static void esc_svg(dsv4_text *t, const char *s)
{
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n = utf8_len(p);
    if (!n)
      dsv4_text_printf(t, "?"), p++;
    else if (n > 1)
      dsv4_text_printf(t, "%.*s", n, (const char *)p), p += n;
    else {
      switch (*p) {
      case '<': dsv4_text_printf(t, "&lt;"); break;
      case '>': dsv4_text_printf(t, "&gt;"); break;
      case '&': dsv4_text_printf(t, "&amp;"); break;
      case '"': dsv4_text_printf(t, "&quot;"); break;
      case '\'': dsv4_text_printf(t, "&#39;"); break;
      default: dsv4_text_printf(t, "%c", *p < 0x20 || *p == 0x7f ? ' ' : *p);
      }
      p++;
    }
  }
}

/* The same for Markdown (a table cell or a heading): HTML's characters as
 * entities (no tag or comment gets through), the table's '|' and what
 * would start emphasis, code or a link backslashed, control characters as
 * spaces; '_' only where it could start or end emphasis (not inside a
 * word, as in sd__h64_pair1). */
static void esc_md(dsv4_text *t, const char *s)
{
  const unsigned char *start = (const unsigned char *)s;
  for (const unsigned char *p = start; *p;) {
    int n = utf8_len(p);
    if (!n) {
      dsv4_text_printf(t, "?"), p++;
      continue;
    }
    if (n > 1) {
      dsv4_text_printf(t, "%.*s", n, (const char *)p), p += n;
      continue;
    }
    int c = *p,
        word_before = p > start &&
                      ((p[-1] >= '0' && p[-1] <= '9') || ((p[-1] | 32) >= 'a' && (p[-1] | 32) <= 'z') || p[-1] == '_'),
        word_after = (p[1] >= '0' && p[1] <= '9') || ((p[1] | 32) >= 'a' && (p[1] | 32) <= 'z') || p[1] == '_';
    if (c == '<')
      dsv4_text_printf(t, "&lt;");
    else if (c == '>')
      dsv4_text_printf(t, "&gt;");
    else if (c == '&')
      dsv4_text_printf(t, "&amp;");
    else if (c == '|' || c == '\\' || c == '*' || c == '`' || c == '[' || c == ']' || c == '~' ||
             (c == '_' && !(word_before && word_after)))
      dsv4_text_printf(t, "\\%c", c);
    else
      dsv4_text_printf(t, "%c", c < 0x20 || c == 0x7f ? ' ' : c);
    p++;
  }
}

/* One plot: a panel a swept field (or one panel of the variants by rank
 * when the manifest is not at hand). */
static void plot(dsv4_text *t, const dsv4_lock_entry *e, const tune_sweep *sw, const tune_manifest *m)
{
  int nf = sw ? sw->nfields : 0, panels = nf ? nf : 1;
  const int pw = 300, ph = 260, left = 60, top = 40, bottom = 60;
  double lo = 0, hi = 0;
  int npass = 0;
  for (int i = 0; i < e->nvariants; i++)
    if (e->v[i].gate == DSV4_GATE_PASS) {
      double y = e->v[i].median_us;
      if (!npass++ || y < lo)
        lo = y;
      if (npass == 1 || y > hi)
        hi = y;
    }
  if (!npass)
    lo = 0, hi = 1;
  double span = hi - lo > 1e-9 ? hi - lo : (hi > 0 ? hi * 0.1 : 1);
  lo -= span * 0.08, hi += span * 0.08;
  if (lo < 0)
    lo = 0;
  int W = panels * (pw + left) + 20, H = ph + top + bottom;
  dsv4_text_printf(t, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                      "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
  dsv4_text_printf(t, "<text x=\"10\" y=\"16\" font-size=\"13\">");
  esc_svg(t, e->key.kernel);
  dsv4_text_printf(t, " on ");
  esc_svg(t, e->key.device);
  dsv4_text_printf(t, " (");
  esc_svg(t, e->key.target);
  dsv4_text_printf(t, " ");
  esc_svg(t, e->key.arch);
  dsv4_text_printf(t, "), ");
  esc_svg(t, e->key.bucket);
  dsv4_text_printf(t, ": median time a launch; winner ");
  esc_svg(t, e->winner[0] ? e->winner : "none");
  dsv4_text_printf(t, "</text>\n");
  for (int p = 0; p < panels; p++) {
    int x0 = p * (pw + left) + left, y0 = top;
    int nvals = nf ? 0 : 1;
    char vals[16][24];
    if (nf) /* the field's values, in the order the variants hold them */
      for (int v = 0; v < sw->nvariants; v++) {
        const char *val = sw->v[v].values[p];
        int seen = 0;
        for (int k = 0; k < nvals; k++)
          seen |= !strcmp(vals[k], val);
        if (!seen && nvals < 16)
          snprintf(vals[nvals++], sizeof vals[0], "%s", val);
      }
    dsv4_text_printf(t, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", x0, y0,
                     pw, ph);
    int dec = 0; /* enough decimals that the grid's labels differ */
    for (double step = (hi - lo) / 4; dec < 6 && step < 10; step *= 10)
      dec++;
    for (int g = 0; g <= 4; g++) { /* y grid */
      double v = lo + (hi - lo) * g / 4;
      int y = y0 + ph - (int)((v - lo) / (hi - lo) * ph);
      dsv4_text_printf(t, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>"
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.*f</text>\n",
                       x0, y, x0 + pw, y, x0 - 4, y + 4, dec, v);
    }
    dsv4_text_printf(t, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x0 + pw / 2, y0 + ph + 40);
    esc_svg(t, nf ? sw->field[p] : "variants by rank");
    dsv4_text_printf(t, "</text>\n<text x=\"%d\" y=\"%d\" transform=\"rotate(-90 %d %d)\" text-anchor=\"middle\">us"
                        "</text>\n", x0 - 45, y0 + ph / 2, x0 - 45, y0 + ph / 2);
    int slots = nf ? nvals : (npass ? npass : 1);
    for (int k = 0; nf && k < nvals; k++) {
      int x = x0 + (int)((k + 0.5) * pw / slots);
      dsv4_text_printf(t, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x, y0 + ph + 16);
      esc_svg(t, vals[k]);
      dsv4_text_printf(t, "</text>\n");
    }
    int rank = 0;
    for (int i = 0; i < e->nvariants; i++) {
      const dsv4_lock_variant *v = &e->v[i];
      if (v->gate != DSV4_GATE_PASS)
        continue;
      int slot = rank++;
      if (nf) {
        const tune_sweep *s2 = NULL;
        const tune_variant *tv = m ? tune_manifest_variant(m, v->name, &s2) : NULL;
        slot = -1;
        for (int k = 0; tv && k < nvals; k++)
          if (!strcmp(vals[k], tv->values[p]))
            slot = k;
        if (slot < 0)
          continue;
      }
      /* spread a slot's points a little, by name, so that they do not hide each other */
      unsigned hsh = 0;
      for (const char *c = v->name; *c; c++)
        hsh = hsh * 31 + (unsigned char)*c;
      int jitter = nf ? (int)(hsh % 21) - 10 : 0;
      int x = x0 + (int)((slot + 0.5) * pw / slots) + jitter;
      int y = y0 + ph - (int)((v->median_us - lo) / (hi - lo) * ph);
      int win = !strcmp(v->name, e->winner);
      dsv4_text_printf(t, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"%s\"%s><title>", x, y, win ? 6 : 3,
                       win ? "#d62728" : "#1f77b4", win ? " stroke=\"black\"" : " fill-opacity=\"0.6\"");
      esc_svg(t, v->name);
      dsv4_text_printf(t, ": %.3f us</title></circle>\n", v->median_us);
      if (win && p == 0) {
        dsv4_text_printf(t, "<text x=\"%d\" y=\"%d\" fill=\"#d62728\">winner</text>\n", x + 8, y - 6);
      }
    }
  }
  dsv4_text_printf(t, "</svg>\n");
}

int tune_report(const char *lock_path, dsv4_lock *l, const tune_manifest *m, char *err, size_t errlen)
{
  char stem[4096], dir[4096], base[1024];
  snprintf(stem, sizeof stem, "%s", lock_path);
  char *dot = strrchr(stem, '.'), *slash = strrchr(stem, '/');
  if (dot && (!slash || dot > slash))
    *dot = 0;
  slash = strrchr(stem, '/');
  snprintf(base, sizeof base, "%.1000s", slash ? slash + 1 : stem);
  if (slash)
    snprintf(dir, sizeof dir, "%.*s/", (int)(slash - stem), stem);
  else
    dir[0] = 0;
  size_t len;
  char *canon = dsv4_lock_format(l, &len); /* sorts l and decides its winners */
  free(canon);
  dsv4_text md = {0};
  dsv4_text_printf(&md, "# Tuning report: ");
  esc_md(&md, base);
  dsv4_text_printf(&md, "\n\nEvery variant of each sweep on each shape bucket: the correctness gate "
                        "(against the reference, two runs bit for bit), then the median, min and max time of a launch "
                        "in microseconds.  Winner: %s.\n",
                   DSV4_LOCK_TIE_BREAK);
  for (int i = 0; i < l->n; i++) {
    dsv4_lock_entry *e = &l->e[i];
    const tune_sweep *sw = NULL;
    for (int s = 0; m && s < m->nsweeps; s++)
      if (!strcmp(m->s[s].kernel, e->key.kernel))
        sw = &m->s[s];
    char svg[1400];
    svg_name(base, e, svg, sizeof svg);
    /* every string from the lockfile or manifest escaped (the plot's name is made of safe characters) */
    char spec12[13];
    snprintf(spec12, sizeof spec12, "%.12s", e->key.spec_hash);
    const char *parts[] = {
        "\n## ",     e->key.kernel, ", ",          e->key.bucket,    "\n\n",   e->key.target,  " ",
        e->key.arch, " on ",        e->key.device, "; measured at ", e->shape, "; toolchain ", e->key.toolchain,
        "; spec ",   spec12};
    for (size_t q = 0; q < sizeof parts / sizeof *parts; q++)
      if (q % 2)
        esc_md(&md, parts[q]);
      else
        dsv4_text_printf(&md, "%s", parts[q]);
    dsv4_text_printf(&md, "\n\n![plot](%s)\n\n", svg);
    dsv4_text_printf(&md, "| rank | variant |");
    for (int f = 0; sw && f < sw->nfields; f++) {
      dsv4_text_printf(&md, " ");
      esc_md(&md, sw->field[f]);
      dsv4_text_printf(&md, " |");
    }
    dsv4_text_printf(&md, " median us | min us | max us | gate |\n|---|---|");
    for (int f = 0; sw && f < sw->nfields; f++)
      dsv4_text_printf(&md, "---|");
    dsv4_text_printf(&md, "---|---|---|---|\n");
    dsv4_lock_variant *v = malloc((size_t)(e->nvariants ? e->nvariants : 1) * sizeof *v);
    if (!v) {
      free(md.s);
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    memcpy(v, e->v, (size_t)e->nvariants * sizeof *v);
    qsort(v, (size_t)e->nvariants, sizeof *v, by_time);
    for (int k = 0; k < e->nvariants; k++) {
      int win = !strcmp(v[k].name, e->winner);
      if (v[k].gate == DSV4_GATE_PASS)
        dsv4_text_printf(&md, "| %d | %s", k + 1, win ? "**" : "");
      else
        dsv4_text_printf(&md, "| - | ");
      esc_md(&md, v[k].name);
      dsv4_text_printf(&md, "%s |", v[k].gate == DSV4_GATE_PASS && win ? "** (winner)" : "");
      const tune_variant *tv = m ? tune_manifest_variant(m, v[k].name, NULL) : NULL;
      for (int f = 0; sw && f < sw->nfields; f++) {
        dsv4_text_printf(&md, " ");
        esc_md(&md, tv ? tv->values[f] : "");
        dsv4_text_printf(&md, " |");
      }
      if (v[k].gate == DSV4_GATE_PASS)
        dsv4_text_printf(&md, " %.3f | %.3f | %.3f | pass |\n", v[k].median_us, v[k].min_us, v[k].max_us);
      else {
        dsv4_text_printf(&md, " | | | %s: ", dsv4_gate_name(v[k].gate));
        esc_md(&md, v[k].reason);
        dsv4_text_printf(&md, " |\n");
      }
    }
    free(v);
    dsv4_text t = {0};
    plot(&t, e, sw, m);
    char path[6000];
    snprintf(path, sizeof path, "%s%s", dir, svg);
    if (t.failed || dsv4_tune_write_file(path, t.s, t.n)) {
      free(t.s), free(md.s);
      snprintf(err, errlen, "cannot write %s", path);
      return -1;
    }
    free(t.s);
  }
  char path[6000];
  snprintf(path, sizeof path, "%s.md", stem);
  int rc = md.failed || dsv4_tune_write_file(path, md.s, md.n);
  if (rc)
    snprintf(err, errlen, "cannot write %s", path);
  free(md.s);
  return rc ? -1 : 0;
}
