/* diag.c -- collecting diagnostics without printing them. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Append one diagnostic; past DSV4_DIAG_MAX only the count grows. */
static void add(dsv4_diags *d, dsv4_severity sev, const char *file, int line, const char *fmt, va_list ap)
{
  if (sev == DSV4_SEV_ERROR)
    d->errors++;
  if (d->n >= DSV4_DIAG_MAX)
    return;
  dsv4_diag *g = &d->items[d->n++];
  g->sev = sev;
  snprintf(g->file, sizeof g->file, "%s", file ? file : "");
  g->line = line;
  g->col = 0;
  vsnprintf(g->msg, sizeof g->msg, fmt, ap);
}

void dsv4_error(dsv4_diags *d, const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  add(d, DSV4_SEV_ERROR, file, line, fmt, ap);
  va_end(ap);
}

void dsv4_note(dsv4_diags *d, const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  add(d, DSV4_SEV_NOTE, file, line, fmt, ap);
  va_end(ap);
}

void dsv4_diag_format(const dsv4_diag *g, char *buf, size_t n)
{
  static const char *sev[] = {"error", "warning", "note"};
  const char *file = g->file[0] ? g->file : "dsv4c";
  if (g->line > 0)
    snprintf(buf, n, "%s:%d: %s: %s", file, g->line, sev[g->sev], g->msg);
  else
    snprintf(buf, n, "%s: %s: %s", file, sev[g->sev], g->msg);
}
