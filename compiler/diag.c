/* diag.c -- collecting diagnostics without printing them. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Append one diagnostic; past DSV4_DIAG_MAX only the count grows. */
static void add(dsv4_diags *d, dsv4_severity sev, const char *file, int line, int col, const char *fmt,
                va_list ap)
{
  if (sev == DSV4_SEV_ERROR)
    d->errors++;
  if (d->n >= DSV4_DIAG_MAX)
    return;
  dsv4_diag *g = &d->items[d->n++];
  g->sev = sev;
  snprintf(g->file, sizeof g->file, "%s", file ? file : "");
  g->line = line;
  g->col = line > 0 && col > 0 ? col : 0;
  vsnprintf(g->msg, sizeof g->msg, fmt, ap);
}

void dsv4_error(dsv4_diags *d, const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  add(d, DSV4_SEV_ERROR, file, line, 0, fmt, ap);
  va_end(ap);
}

void dsv4_error_at(dsv4_diags *d, const char *file, int line, int col, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  add(d, DSV4_SEV_ERROR, file, line, col, fmt, ap);
  va_end(ap);
}

void dsv4_diag_add(dsv4_diags *d, const dsv4_diag *g)
{
  if (g->sev == DSV4_SEV_ERROR)
    d->errors++;
  if (d->n >= DSV4_DIAG_MAX)
    return;
  dsv4_diag *c = &d->items[d->n++];
  *c = *g;
  c->file[sizeof c->file - 1] = 0; /* from a pipe: terminate what is read */
  c->msg[sizeof c->msg - 1] = 0;
  if ((unsigned)c->sev > DSV4_SEV_NOTE)
    c->sev = DSV4_SEV_ERROR;
}

void dsv4_note(dsv4_diags *d, const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  add(d, DSV4_SEV_NOTE, file, line, 0, fmt, ap);
  va_end(ap);
}

void dsv4_diag_format(const dsv4_diag *g, char *buf, size_t n)
{
  static const char *sev[] = {"error", "warning", "note"};
  const char *file = g->file[0] ? g->file : "dsv4c";
  if (g->line > 0 && g->col > 0)
    snprintf(buf, n, "%s:%d:%d: %s: %s", file, g->line, g->col, sev[g->sev], g->msg);
  else if (g->line > 0)
    snprintf(buf, n, "%s:%d: %s: %s", file, g->line, sev[g->sev], g->msg);
  else
    snprintf(buf, n, "%s: %s: %s", file, sev[g->sev], g->msg);
}

void dsv4_diag_excerpt(const dsv4_diag *g, const char *src, size_t len, char *buf, size_t n)
{
  if (!n)
    return;
  buf[0] = 0;
  if (!src || g->line <= 0 || g->col <= 0)
    return;
  size_t i = 0; /* the start of line g->line (\n, \r, \r\n and \n\r end a line, as in Lua) */
  for (int line = 1; line < g->line && i < len; line++) {
    while (i < len && src[i] != '\n' && src[i] != '\r')
      i++;
    if (i < len) {
      char c = src[i++];
      if (i < len && (src[i] == '\n' || src[i] == '\r') && src[i] != c)
        i++;
    }
  }
  size_t e = i;
  while (e < len && src[e] != '\n' && src[e] != '\r')
    e++;
  if (i >= len || (size_t)g->col > e - i + 1)
    return;
  size_t o = (size_t)snprintf(buf, n, "  %.*s\n  ", (int)(e - i), src + i);
  if (o >= n) /* no room for the caret: leave the excerpt out */
    return (void)(buf[0] = 0);
  for (int c = 1; c < g->col && o + 1 < n; c++)
    buf[o++] = src[i + (size_t)c - 1] == '\t' ? '\t' : ' ';
  if (o + 2 < n) {
    buf[o++] = '^';
    buf[o++] = '\n';
  }
  buf[o < n ? o : n - 1] = 0;
}
