/* files.h -- small file helpers: a whole file read (with a size limit and
 * regular files only, for the readers of untrusted files) or written
 * atomically. */
#ifndef DSV4_FILES_H
#define DSV4_FILES_H

#include <stddef.h>

/* Read a whole file (NUL-terminated, malloc'd); -1 on failure. */
int dsv4_tune_read_file(const char *path, char **text, size_t *len);
/* The same for a regular file of at most max bytes: -1 with errno EFBIG
 * past it (found before reading), EINVAL for a FIFO, device or folder. */
int dsv4_tune_read_file_max(const char *path, size_t max, char **text, size_t *len);
/* Write a whole file atomically; 0 or -1. */
int dsv4_tune_write_file(const char *path, const void *p, size_t n);

#endif
