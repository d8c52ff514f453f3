/* A shared library opened the first time a feature needs it rather than
 * with the process: what is linked is loaded and relocated at every
 * start, used or not. */
#pragma once
#include <glib.h>

/* One function to find in the library, and where to put it. */
typedef struct {
  const char *name;
  void      **slot;
} MvLibrarySymbol;

typedef struct {
  const char            *soname;
  const MvLibrarySymbol *symbols;
  gsize                  n_symbols;
  /* The caller says why the library could not be opened, rather than
   * the log (a command line, which has no log). */
  gboolean               quiet;
  /* Kept by mv_library_load(): */
  gsize                  loaded;
  char                  *failure;
} MvLibrary;

/* Opens @library and fills its symbols' slots, once for the process and
 * from any thread. NULL once every slot is filled; otherwise why not (a
 * library that is missing, or lacks a function), then and ever after,
 * said once in the log unless @library is quiet. */
const char *mv_library_load (MvLibrary *library);
