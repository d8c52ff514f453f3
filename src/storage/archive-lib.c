#include "archive-lib.h"
#include "core/errors.h"
#include "util/library.h"

MvArchiveLib mv_archive;

#define SYMBOL(field) { "archive_" #field, (void **) &mv_archive.field }
static const MvLibrarySymbol symbols[] = {
  SYMBOL (read_new),
  SYMBOL (read_free),
  SYMBOL (read_support_filter_gzip),
  SYMBOL (read_support_filter_zstd),
  SYMBOL (read_support_format_tar),
  SYMBOL (read_open_filename),
  SYMBOL (read_next_header),
  SYMBOL (read_data_block),
  SYMBOL (error_string),
  SYMBOL (entry_pathname),
  SYMBOL (entry_filetype),
  SYMBOL (entry_size_is_set),
  SYMBOL (entry_size),
  SYMBOL (entry_mtime),
  SYMBOL (entry_uid),
  SYMBOL (entry_gid),
  SYMBOL (entry_perm),
  SYMBOL (entry_hardlink),
  SYMBOL (entry_symlink),
};
#undef SYMBOL

/* The soname the headers are of. */
static MvLibrary library = { "libarchive.so.13", symbols, G_N_ELEMENTS (symbols) };

gboolean
mv_archive_load (GError **error)
{
  const char *failure = mv_library_load (&library);

  if (failure)
    return mv_error_set (error, MV_ERROR_FAILED, "Images cannot be unpacked: %s", failure);
  return TRUE;
}
