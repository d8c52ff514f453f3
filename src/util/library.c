#include "library.h"

#include <dlfcn.h>

static void
open_library (MvLibrary *library)
{
  void *handle = dlopen (library->soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);

  if (handle == NULL)
    {
      library->failure = g_strdup (dlerror ());
      return;
    }
  for (gsize i = 0; i < library->n_symbols; i++)
    {
      *library->symbols[i].slot = dlsym (handle, library->symbols[i].name);
      if (*library->symbols[i].slot == NULL)
        {
          library->failure = g_strdup_printf ("%s has no %s", library->soname,
                                              library->symbols[i].name);
          return;
        }
    }
}

const char *
mv_library_load (MvLibrary *library)
{
  if (g_once_init_enter (&library->loaded))
    {
      open_library (library);
      /* Said once in the log, whoever asked and however often. */
      if (library->failure && !library->quiet)
        g_warning ("Cannot open %s: %s", library->soname, library->failure);
      g_once_init_leave (&library->loaded, 1);
    }
  return library->failure;
}
