/* libarchive, opened the first time a layer is unpacked rather than
 * with the daemon. With libxml2, ICU and the C++ runtime behind it, it
 * was a fifth of what a start spends loading and relocating libraries,
 * for a feature used only while an image is pulled. */
#pragma once
#include <archive.h>
#include <archive_entry.h>
#include <glib.h>

/* Every function of libarchive the daemon calls, by its name there. */
typedef struct {
  typeof (archive_read_new)                 *read_new;
  typeof (archive_read_free)                *read_free;
  typeof (archive_read_support_filter_gzip) *read_support_filter_gzip;
  typeof (archive_read_support_filter_zstd) *read_support_filter_zstd;
  typeof (archive_read_support_format_tar)  *read_support_format_tar;
  typeof (archive_read_open_filename)       *read_open_filename;
  typeof (archive_read_next_header)         *read_next_header;
  typeof (archive_read_data_block)          *read_data_block;
  typeof (archive_error_string)             *error_string;
  typeof (archive_entry_pathname)           *entry_pathname;
  typeof (archive_entry_filetype)           *entry_filetype;
  typeof (archive_entry_size_is_set)        *entry_size_is_set;
  typeof (archive_entry_size)               *entry_size;
  typeof (archive_entry_mtime)              *entry_mtime;
  typeof (archive_entry_uid)                *entry_uid;
  typeof (archive_entry_gid)                *entry_gid;
  typeof (archive_entry_perm)               *entry_perm;
  typeof (archive_entry_hardlink)           *entry_hardlink;
  typeof (archive_entry_symlink)            *entry_symlink;
} MvArchiveLib;

/* The table, filled by mv_archive_load(): call it, and see it succeed,
 * before anything in it. */
extern MvArchiveLib mv_archive;

/* Opens the library on the first call, from any thread; FALSE with
 * @error set if it cannot be, then and on every later call. */
gboolean mv_archive_load (GError **error);
