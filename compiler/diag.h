/* diag.h -- one diagnostic type for the whole compiler.
 *
 * The spec checker, the code generators and the target emitters all report
 * through a dsv4_diags list; only the CLI prints it, as
 * "file:line:col: error: message" followed, where the column is known, by
 * the source line and a caret under the column.  Library code never
 * prints or exits.
 */
#ifndef DSV4_DIAG_H
#define DSV4_DIAG_H

#include <stddef.h>

#define DSV4_DIAG_MAX 32

typedef enum { DSV4_SEV_ERROR, DSV4_SEV_WARNING, DSV4_SEV_NOTE } dsv4_severity;

typedef struct {
  dsv4_severity sev;
  char file[256];
  int line, col; /* 0 when unknown */
  char msg[768];
} dsv4_diag;

typedef struct {
  int n;       /* diagnostics kept (at most DSV4_DIAG_MAX) */
  int errors;  /* errors reported, kept or not */
  dsv4_diag items[DSV4_DIAG_MAX];
} dsv4_diags;

#if defined(__GNUC__)
#define DSV4_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DSV4_PRINTF(a, b)
#endif

/* Record an error at file:line (line 0 = no position). */
void dsv4_error(dsv4_diags *d, const char *file, int line, const char *fmt, ...) DSV4_PRINTF(4, 5);
/* Record an error at file:line:col (col 0 = the line only). */
void dsv4_error_at(dsv4_diags *d, const char *file, int line, int col, const char *fmt, ...) DSV4_PRINTF(5, 6);
/* Record a diagnostic made elsewhere (the SPIR-V helper's), as it is. */
void dsv4_diag_add(dsv4_diags *d, const dsv4_diag *g);
/* Record a note (extra context printed after the error it follows). */
void dsv4_note(dsv4_diags *d, const char *file, int line, const char *fmt, ...) DSV4_PRINTF(4, 5);
/* Format one diagnostic as the CLI prints it (no trailing newline):
 * "file:line:col: error: message", less what is unknown. */
void dsv4_diag_format(const dsv4_diag *g, char *buf, size_t n);
/* Where g has a line and a column: its source line out of src (the text of
 * g->file) and a caret line under the column, each ending in a newline
 * (tabs kept, so the caret lines up); "" otherwise. */
void dsv4_diag_excerpt(const dsv4_diag *g, const char *src, size_t len, char *buf, size_t n);

#endif
