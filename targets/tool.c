/* tool.c -- running the external validators (ptxas, ld.lld, the SPIR-V
 * helper) as child processes, so a crash or abort in them becomes a
 * diagnostic instead of taking the compiler down. */
#define _GNU_SOURCE
#include "target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void dsv4_artifact_free(dsv4_artifact *a)
{
  free(a->code);
  free(a->aux);
  free(a->llvm);
  free(a->asm_text);
  memset(a, 0, sizeof *a);
}

/* Append n bytes to a growing buffer. */
static int append(unsigned char **buf, size_t *len, size_t *cap, const unsigned char *p, size_t n)
{
  if (*len + n + 1 > *cap) {
    size_t c = (*cap + n + 1) * 2;
    unsigned char *q = realloc(*buf, c);
    if (!q)
      return -1;
    *buf = q, *cap = c;
  }
  memcpy(*buf + *len, p, n);
  *len += n;
  (*buf)[*len] = 0;
  return 0;
}

/* The tool runs through posix_spawn, with every pipe end close-on-exec:
 * dsv4c compiles on several threads (-j), each of which may start tools,
 * and a tool must inherit no other thread's pipe (or that thread would not
 * see its own tool's end of file until this one ended). */
int dsv4_run_tool(char *const argv[], const void *in, size_t in_len, unsigned char **out, size_t *out_len,
                  char **err_out)
{
  int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
  *out = NULL, *out_len = 0, *err_out = NULL;
  if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
    for (int i = 0; i < 2; i++)
      if (pin[i] >= 0)
        close(pin[i]);
    for (int i = 0; i < 2; i++)
      if (pout[i] >= 0)
        close(pout[i]);
    *err_out = strdup("cannot create pipes");
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pin[0], 0); /* dup2 clears close-on-exec on 0, 1, 2 */
  posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
  posix_spawn_file_actions_adddup2(&fa, perr[1], 2);
  pid_t pid;
  extern char **environ;
  int se = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pin[0]), close(pout[1]), close(perr[1]);
  if (se) {
    close(pin[1]), close(pout[0]), close(perr[0]);
    char m[600];
    snprintf(m, sizeof m, "cannot run %s: %s", argv[0], strerror(se));
    *err_out = strdup(m);
    return 127;
  }
  signal(SIGPIPE, SIG_IGN);
  size_t olen = 0, ocap = 0, elen = 0, ecap = 0, sent = 0;
  unsigned char *obuf = NULL, *ebuf = NULL;
  int fds_open = 2, in_open = 1;
  if (!in || in_len == 0) {
    close(pin[1]);
    in_open = 0;
  } else
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
  while (fds_open > 0) {
    struct pollfd p[3] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}, {in_open ? pin[1] : -1, POLLOUT, 0}};
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    unsigned char tmp[65536];
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t r = read(p[i].fd, tmp, sizeof tmp);
      if (r <= 0) {
        close(p[i].fd);
        if (i == 0)
          pout[0] = -1;
        else
          perr[0] = -1;
        fds_open--;
      } else if (i == 0)
        append(&obuf, &olen, &ocap, tmp, (size_t)r);
      else
        append(&ebuf, &elen, &ecap, tmp, (size_t)r);
    }
    if (in_open && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = write(pin[1], (const char *)in + sent, in_len - sent);
      if (w > 0)
        sent += (size_t)w;
      if (w < 0 && errno != EAGAIN) {
        close(pin[1]);
        in_open = 0;
      } else if (sent == in_len) {
        close(pin[1]);
        in_open = 0;
      }
    }
  }
  if (in_open)
    close(pin[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  *out = obuf, *out_len = olen;
  *err_out = ebuf ? (char *)ebuf : strdup("");
  if (WIFSIGNALED(st))
    return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

const char *dsv4_find_tool(const char *const *candidates, char *buf, size_t n)
{
  for (const char *const *c = candidates; *c; c++) {
    if (strchr(*c, '/')) {
      if (access(*c, X_OK) == 0) {
        snprintf(buf, n, "%s", *c);
        return buf;
      }
      continue;
    }
    const char *path = getenv("PATH");
    if (!path)
      path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
      const char *e = strchr(path, ':');
      size_t m = e ? (size_t)(e - path) : strlen(path);
      snprintf(buf, n, "%.*s/%s", (int)m, path, *c);
      if (m && access(buf, X_OK) == 0)
        return buf;
      path += m + (e ? 1 : 0);
    }
  }
  return NULL;
}

int dsv4_tmpdir(char *dir, size_t n)
{
  const char *t = getenv("TMPDIR");
  snprintf(dir, n, "%s/dsv4c.XXXXXX", t && *t ? t : "/tmp");
  return mkdtemp(dir) ? 0 : -1;
}

/* Remove a directory of plain files (what dsv4_tmpdir users create). */
void dsv4_rmtree_flat(const char *dir)
{
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(dir);
}

int dsv4_write_file(const char *path, const void *p, size_t n)
{
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  size_t w = fwrite(p, 1, n, f);
  return (fclose(f) || w != n) ? -1 : 0;
}

int dsv4_read_file(const char *path, unsigned char **p, size_t *n)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  size_t len = 0, cap = 0;
  unsigned char *buf = NULL, tmp[65536];
  size_t r;
  while ((r = fread(tmp, 1, sizeof tmp, f)) > 0)
    if (append(&buf, &len, &cap, tmp, r)) {
      fclose(f);
      free(buf);
      return -1;
    }
  fclose(f);
  if (!buf)
    buf = calloc(1, 1);
  *p = buf, *n = len;
  return 0;
}
