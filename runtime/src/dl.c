/* dl.c -- all OS-specific library loading behind three small functions. */
#include <dlfcn.h>
#include <stddef.h>

#include "rt.h"

/* First library of names that loads, or NULL. */
void *rt_dlopen(const char *const *names)
{
  for (; *names; names++) {
    void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
    if (h)
      return h;
  }
  return NULL;
}

void *rt_dlsym(void *lib, const char *sym) { return lib ? dlsym(lib, sym) : NULL; }

void rt_dlclose(void *lib)
{
  if (lib)
    dlclose(lib);
}
