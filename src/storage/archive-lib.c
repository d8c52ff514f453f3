#include "archive-lib.h"
#include "core/errors.h"

#include <dlfcn.h>

/* The soname the headers were written for. */
#define ARCHIVE_SONAME "libarchive.so.13"

MvArchiveLib mv_archive;
static char *failure;   /* why it could not be opened; NULL once it was */

static void *
find (void *handle, const char *name)
{
  void *sym = dlsym (handle, name);

  if (sym == NULL && failure == NULL)
    failure = g_strdup_printf ("%s has no %s", ARCHIVE_SONAME, name);
  return sym;
}

static void
open_library (void)
{
  void *handle = dlopen (ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);

  if (handle == NULL)
    {
      failure = g_strdup (dlerror ());
      return;
    }
#define FIND(field, name) mv_archive.field = find (handle, name)
  FIND (read_new, "archive_read_new");
  FIND (read_free, "archive_read_free");
  FIND (read_support_filter_gzip, "archive_read_support_filter_gzip");
  FIND (read_support_filter_zstd, "archive_read_support_filter_zstd");
  FIND (read_support_format_tar, "archive_read_support_format_tar");
  FIND (read_open_filename, "archive_read_open_filename");
  FIND (read_next_header, "archive_read_next_header");
  FIND (read_data_block, "archive_read_data_block");
  FIND (error_string, "archive_error_string");
  FIND (entry_pathname, "archive_entry_pathname");
  FIND (entry_filetype, "archive_entry_filetype");
  FIND (entry_size_is_set, "archive_entry_size_is_set");
  FIND (entry_size, "archive_entry_size");
  FIND (entry_mtime, "archive_entry_mtime");
  FIND (entry_uid, "archive_entry_uid");
  FIND (entry_gid, "archive_entry_gid");
  FIND (entry_perm, "archive_entry_perm");
  FIND (entry_hardlink, "archive_entry_hardlink");
  FIND (entry_symlink, "archive_entry_symlink");
#undef FIND
}

gboolean
mv_archive_load (GError **error)
{
  static gsize opened;

  if (g_once_init_enter (&opened))
    {
      open_library ();
      g_once_init_leave (&opened, 1);
    }
  if (failure)
    return mv_error_set (error, MV_ERROR_FAILED, "Images cannot be unpacked: %s", failure);
  return TRUE;
}
