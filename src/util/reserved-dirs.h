/* Directories the daemon keeps for itself: its records and its runtime
 * files. No host path that a machine names may lie beneath one, however
 * the configuration lets machines reach the host's files. Registered once
 * at startup by whoever owns them (the store); read from any thread. */
#pragma once
#include <glib.h>

/* Adds @dir (absolute; resolved through symbolic links if it exists). */
void        mv_reserved_dirs_add (const char *dir);
/* The registered directory that @path (absolute and resolved) lies in or
 * is, or NULL; the caller frees it. */
char       *mv_reserved_dirs_holding (const char *path);
/* The registered directory that lies in @dir (absolute and resolved) or
 * is it, or NULL; the caller frees it. */
char       *mv_reserved_dirs_within (const char *dir);
/* Whether @path is @dir or lies beneath it, by whole components; pure. */
gboolean    mv_path_is_beneath (const char *path, const char *dir);
