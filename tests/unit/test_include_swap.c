/* test_include_swap.c -- include() runs the file it checked: a link in the
 * spec's folder swapped to a file outside it between the check (realpath)
 * and the open must not make the run execute the outside file (issue 37,
 * item 4).  The race is made certain, not hoped for: the test links with
 * -Wl,--wrap=realpath, and the wrapper swaps the link the moment after
 * the sandbox resolved it. */
#define _DEFAULT_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "spec.h"

static int passed, failed;
static char link_path[PATH_MAX], outside_path[PATH_MAX];
static char sub_path[PATH_MAX], sub_moved[PATH_MAX], other_dir[PATH_MAX];
static int swaps, swap_folder; /* swap_folder: the second case (a folder of the path, not the file) */

char *__real_realpath(const char *path, char *resolved);
char *__real___realpath_chk(const char *path, char *resolved, size_t n);

/* After a realpath of the link: (once) the link re-pointed outside the
 * spec's folder. */
static void swap_after(const char *path, const char *r)
{
  size_t n = strlen(path);
  if (r && !swaps && !swap_folder && n >= 8 && !strcmp(path + n - 8, "link.lua")) {
    swaps++;
    if (unlink(link_path) || symlink(outside_path, link_path))
      perror("swapping the link");
  }
  if (r && !swaps && swap_folder && n >= 10 && !strcmp(path + n - 10, "sub/in.lua")) {
    swaps++; /* the folder becomes a link to one outside, which has its own in.lua */
    if (rename(sub_path, sub_moved) || symlink(other_dir, sub_path))
      perror("swapping the folder");
  }
}

char *__wrap_realpath(const char *path, char *resolved)
{
  char *r = __real_realpath(path, resolved);
  swap_after(path, r);
  return r;
}

/* The same where the library was built with _FORTIFY_SOURCE (realpath then
 * calls this). */
char *__wrap___realpath_chk(const char *path, char *resolved, size_t n)
{
  char *r = __real___realpath_chk(path, resolved, n);
  swap_after(path, r);
  return r;
}

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* Load spec; 1 if its diagnostics contain text. */
static int says(const dsv4_diags *d, const char *text)
{
  for (int i = 0; i < d->n; i++)
    if (strstr(d->items[i].msg, text))
      return 1;
  return 0;
}

int main(void)
{
  char base[] = "/tmp/dsv4_swap_XXXXXX";
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  char root[256], other[256], spec[PATH_MAX], inside[PATH_MAX];
  snprintf(root, sizeof root, "%s/specs", base);
  snprintf(other, sizeof other, "%s/elsewhere", base);
  if (mkdir(root, 0700) || mkdir(other, 0700)) {
    perror("mkdir");
    return 1;
  }
  snprintf(spec, sizeof spec, "%s/spec.lua", root);
  snprintf(inside, sizeof inside, "%s/inside.lua", root);
  snprintf(link_path, sizeof link_path, "%s/link.lua", root);
  snprintf(outside_path, sizeof outside_path, "%s/outside.lua", other);
  /* the spec stops on an error naming which file ran; "declares no kernel" otherwise */
  write_file(spec, "local v = include \"link.lua\"\nif v ~= \"inside\" then error(\"ran \" .. tostring(v)) end\n");
  write_file(inside, "return \"inside\"\n");
  write_file(outside_path, "return \"outside\"\n");
  if (symlink("inside.lua", link_path)) {
    perror("symlink");
    return 1;
  }
  static dsv4_plan plan;
  dsv4_diags d = {0};
  int rc = dsv4_spec_load(spec, NULL, &plan, &d);
  CHECK(swaps == 1, "the link was swapped %d times (the wrapper did not run: the test proves nothing)", swaps);
  CHECK(rc != 0 && says(&d, "declares no kernel"), "the spec did not run to its end (%d diagnostics: %s)", d.n,
        d.n ? d.items[0].msg : "none");
  CHECK(!says(&d, "ran outside"), "include ran the file outside the spec's folder: %s", d.items[0].msg);
  for (int i = 0; i < d.n; i++)
    printf("  %s:%d: %s\n", d.items[i].file, d.items[i].line, d.items[i].msg);

  /* a folder of the resolved path swapped for a link: the file opened is
   * not the one resolved, and the include is refused */
  char in_path[PATH_MAX + 16], other_in[PATH_MAX + 16];
  snprintf(sub_path, sizeof sub_path, "%s/sub", root);
  snprintf(sub_moved, sizeof sub_moved, "%s/sub.moved", root);
  snprintf(other_dir, sizeof other_dir, "%s", other);
  snprintf(in_path, sizeof in_path, "%s/in.lua", sub_path);
  snprintf(other_in, sizeof other_in, "%s/in.lua", other);
  if (mkdir(sub_path, 0700)) {
    perror("mkdir");
    return 1;
  }
  write_file(in_path, "return \"inside\"\n");
  write_file(other_in, "return \"outside\"\n");
  write_file(spec, "local v = include \"sub/in.lua\"\nif v ~= \"inside\" then error(\"ran \" .. tostring(v)) end\n");
  swaps = 0, swap_folder = 1;
  dsv4_diags d2 = {0};
  rc = dsv4_spec_load(spec, NULL, &plan, &d2);
  CHECK(swaps == 1, "the folder was swapped %d times (the wrapper did not run: the test proves nothing)", swaps);
  CHECK(rc != 0 && !says(&d2, "ran outside"), "include ran the file outside the spec's folder");
  CHECK(says(&d2, "changed while it was opened"), "the include was not refused as changed (%s)",
        d2.n ? d2.items[0].msg : "no diagnostic");
  for (int i = 0; i < d2.n; i++)
    printf("  %s:%d: %s\n", d2.items[i].file, d2.items[i].line, d2.items[i].msg);
  char moved_in[PATH_MAX + 16];
  snprintf(moved_in, sizeof moved_in, "%s/in.lua", sub_moved);
  unlink(sub_path), unlink(moved_in), rmdir(sub_moved), unlink(other_in);
  unlink(link_path), unlink(inside), unlink(spec), unlink(outside_path), rmdir(root), rmdir(other), rmdir(base);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
