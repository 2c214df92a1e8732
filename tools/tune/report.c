/* report.c -- what a person reads of a lockfile: <stem>.md, a table a
 * kernel (sweep) and shape bucket with every variant's times and gate, and
 * one SVG plot each (the median time against each swept field, a panel a
 * field; every variant that passed its gate a point, the winner marked).
 * Both are derived from the lockfile alone (and the manifest, for the
 * fields' values), so `dsv4c-tune report` remakes them after a merge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void esc(dsv4_text *t, const char *s) /* for SVG text and Markdown cells */
{
  for (; *s; s++)
    if (*s == '<')
      dsv4_text_printf(t, "&lt;");
    else if (*s == '>')
      dsv4_text_printf(t, "&gt;");
    else if (*s == '&')
      dsv4_text_printf(t, "&amp;");
    else if (*s == '|')
      dsv4_text_printf(t, "\\|");
    else if (*s == '\n')
      dsv4_text_printf(t, " ");
    else
      dsv4_text_printf(t, "%c", *s);
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
  esc(t, e->key.kernel);
  dsv4_text_printf(t, " on ");
  esc(t, e->key.device);
  dsv4_text_printf(t, " (%s %s), %s: median time a launch; winner ", e->key.target, e->key.arch, e->key.bucket);
  esc(t, e->winner[0] ? e->winner : "none");
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
    esc(t, nf ? sw->field[p] : "variants by rank");
    dsv4_text_printf(t, "</text>\n<text x=\"%d\" y=\"%d\" transform=\"rotate(-90 %d %d)\" text-anchor=\"middle\">us"
                        "</text>\n", x0 - 45, y0 + ph / 2, x0 - 45, y0 + ph / 2);
    int slots = nf ? nvals : (npass ? npass : 1);
    for (int k = 0; nf && k < nvals; k++) {
      int x = x0 + (int)((k + 0.5) * pw / slots);
      dsv4_text_printf(t, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x, y0 + ph + 16);
      esc(t, vals[k]);
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
      esc(t, v->name);
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
  dsv4_text_printf(&md, "# Tuning report: %s\n\nEvery variant of each sweep on each shape bucket: the correctness gate "
                        "(against the reference, two runs bit for bit), then the median, min and max time of a launch "
                        "in microseconds.  Winner: %s.\n",
                   base, DSV4_LOCK_TIE_BREAK);
  for (int i = 0; i < l->n; i++) {
    dsv4_lock_entry *e = &l->e[i];
    const tune_sweep *sw = NULL;
    for (int s = 0; m && s < m->nsweeps; s++)
      if (!strcmp(m->s[s].kernel, e->key.kernel))
        sw = &m->s[s];
    char svg[1400];
    svg_name(base, e, svg, sizeof svg);
    dsv4_text_printf(&md, "\n## %s, %s\n\n%s %s on %s; measured at %s; toolchain %s; spec %.12s\n\n![plot](%s)\n\n",
                     e->key.kernel, e->key.bucket, e->key.target, e->key.arch, e->key.device, e->shape,
                     e->key.toolchain, e->key.spec_hash, svg);
    dsv4_text_printf(&md, "| rank | variant |");
    for (int f = 0; sw && f < sw->nfields; f++)
      dsv4_text_printf(&md, " %s |", sw->field[f]);
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
        dsv4_text_printf(&md, "| %d | %s%s%s |", k + 1, win ? "**" : "", v[k].name, win ? "** (winner)" : "");
      else
        dsv4_text_printf(&md, "| - | %s |", v[k].name);
      const tune_variant *tv = m ? tune_manifest_variant(m, v[k].name, NULL) : NULL;
      for (int f = 0; sw && f < sw->nfields; f++)
        dsv4_text_printf(&md, " %s |", tv ? tv->values[f] : "");
      if (v[k].gate == DSV4_GATE_PASS)
        dsv4_text_printf(&md, " %.3f | %.3f | %.3f | pass |\n", v[k].median_us, v[k].min_us, v[k].max_us);
      else {
        dsv4_text_printf(&md, " | | | %s: ", dsv4_gate_name(v[k].gate));
        esc(&md, v[k].reason);
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
