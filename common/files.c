/* files.c -- whole-file reading and atomic writing (see files.h). */
#define _POSIX_C_SOURCE 200809L
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dsv4_tune_read_file(const char *path, char **text, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  size_t n = 0, cap = 4096;
  char *s = malloc(cap);
  size_t r;
  while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n - 1 == 0) {
      char *t = realloc(s, cap *= 2);
      if (!t)
        free(s);
      s = t;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!s || bad) {
    free(s);
    return -1;
  }
  s[n] = 0;
  *text = s, *len = n;
  return 0;
}

int dsv4_tune_read_file_max(const char *path, size_t max, char **text, size_t *len)
{
  /* O_NONBLOCK: opening a FIFO would wait for a writer (for ever) */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat st;
  int why = fstat(fd, &st) ? errno : !S_ISREG(st.st_mode) ? EINVAL : (uint64_t)st.st_size > max ? EFBIG : 0;
  FILE *f = why ? NULL : fdopen(fd, "rb");
  if (!f) { /* a FIFO or /dev/zero would be read for ever; a huge file needs no reading to refuse */
    why = why ? why : errno;
    close(fd);
    errno = why;
    return -1;
  }
  /* the size may change under us: read at most max + 1 bytes, refuse more */
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *s = malloc(cap + 1);
  size_t r;
  while (s && (r = fread(s + n, 1, cap - n, f)) > 0)
    if ((n += r) == cap) {
      if (n > max)
        break;
      size_t c2 = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *t = realloc(s, c2 + 1);
      if (!t)
        free(s);
      s = t, cap = c2;
    }
  int bad = ferror(f);
  fclose(f);
  if (!s || bad || n > max) {
    free(s);
    errno = !s ? ENOMEM : bad ? EIO : EFBIG;
    return -1;
  }
  s[n] = 0;
  *text = s, *len = n;
  return 0;
}

int dsv4_tune_write_file(const char *path, const void *p, size_t n)
{
  /* a path that is not a regular file (/dev/null, a FIFO, a terminal) is
   * written as it is: the rename below would replace it, a device node
   * included, with a regular file */
  struct stat st;
  if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      return -1;
    }
    FILE *d = fopen(path, "wb");
    if (!d)
      return -1;
    size_t w = fwrite(p, 1, n, d);
    int bad = fclose(d) || w != n;
    if (bad && !errno)
      errno = EIO;
    return bad ? -1 : 0;
  }
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return -1;
  size_t w = fwrite(p, 1, n, f);
  if (fclose(f) || w != n || rename(tmp, path)) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
  }
  return 0;
}
