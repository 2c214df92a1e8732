/* dl.c -- all OS-specific library loading behind three small functions.
 *
 * A vendor library is loaded once for the process and never unloaded.  The
 * OpenCL ICD loader keeps what it allocates for a context (and the ICDs it
 * opened) in its own globals: unloading it with the context leaked those
 * on every context.  Drivers (libcuda) start threads that run their code
 * after the context is gone.  So rt_dlopen opens a name once (RTLD_NODELETE,
 * the handle kept in a small table) and rt_dlclose leaves it loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "rt.h"

#define RT_DL_PINNED 8

/* Libraries opened so far, by the name they were opened with. */
static struct {
  char name[256];
  void *lib;
} pinned[RT_DL_PINNED];
static int npinned;
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;

/* The library `name`, opened on first use and kept; NULL if it does not load. */
static void *open_pinned(const char *name)
{
  for (int i = 0; i < npinned; i++)
    if (!strcmp(pinned[i].name, name))
      return pinned[i].lib;
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib && npinned < RT_DL_PINNED && strlen(name) < sizeof pinned[0].name) {
    strcpy(pinned[npinned].name, name);
    pinned[npinned++].lib = lib;
  }
  return lib; /* (a full table: opened again next time; NODELETE still keeps it) */
}

/* First library of names that loads, or NULL. */
void *rt_dlopen(const char *const *names)
{
  void *lib = NULL;
  pthread_mutex_lock(&pin_lock);
  for (; *names && !lib; names++)
    lib = open_pinned(*names);
  pthread_mutex_unlock(&pin_lock);
  return lib;
}

void *rt_dlsym(void *lib, const char *sym) { return lib ? dlsym(lib, sym) : NULL; }

/* The caller is done with lib; the library itself stays loaded (above). */
void rt_dlclose(void *lib) { (void)lib; }
