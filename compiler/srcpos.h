/* srcpos.h -- find the source line of a field inside a Lua table constructor.
 *
 * Lua records the line of a function call but not the line of each table
 * field, so diagnostics that name a field (kernel.tile.values_per_thread,
 * layout.segments[2].type) rescan the spec text to point at the right line.
 * The scanner is a small Lua lexer (strings, long brackets, comments) plus a
 * table-constructor walker; it never allocates, prints or exits.
 */
#ifndef DSV4_SRCPOS_H
#define DSV4_SRCPOS_H

#include <stddef.h>

/* Line (1-based) of the key named by `path` in the table constructor whose
 * call begins on `start_line` of `src` (the first `{` token on or after that
 * line opens the root table).  Each path element is a field name ("tile",
 * matching `tile = v` and `["tile"] = v`) or "#N", the N-th positional item
 * (1-based; `name = v` and `[k] = v` items are not counted).  For a named
 * field the line of its key is returned, for a positional item the line of
 * the item's first token.  When an element is missing, the line of the
 * deepest element found is returned, or start_line when none was.  Values
 * may be tables `{...}` or calls with table arguments (`f {...}`,
 * `f({...})`): the first `{` in the value is descended into.  When a name
 * occurs twice in one table, the last occurrence wins, as in Lua. */
int dsv4_srcpos_find(const char *src, size_t len, int start_line,
                     const char *const *path, int npath);

/* The same, and *col the 1-based column of that key or item (bytes from
 * its line's start), or of the constructor's `{` for an empty path; 0
 * where no position was found on the returned line. */
int dsv4_srcpos_find_col(const char *src, size_t len, int start_line,
                         const char *const *path, int npath, int *col);

#endif /* DSV4_SRCPOS_H */
