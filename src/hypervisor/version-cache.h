/* The versions binaries gave, remembered by each binary's identity
 * (device, inode, size, modification and change times) in a file of the
 * daemon's runtime directory. QEMU tells its version only by running,
 * which takes it 40-60 ms; a daemon that restarts asks it again only if
 * the binary is another. The runtime directory goes with a reboot, and
 * the remembered versions with it. */
#pragma once
#include <glib.h>

typedef struct _MvVersionCache MvVersionCache;

/* Asks the binary: its version, or NULL if it has none to tell. */
typedef char *(*MvVersionProbe) (const char *binary);

/* Remembers in the file @path; NULL: remembers nothing. */
MvVersionCache *mv_version_cache_new (const char *path);
MvVersionCache *mv_version_cache_ref (MvVersionCache *cache);
void            mv_version_cache_unref (MvVersionCache *cache);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvVersionCache, mv_version_cache_unref)

/* @binary's version: the one remembered for it if it is the same file,
 * else what @probe says, remembered if it said something. @cache may be
 * NULL. Safe from any thread. */
char           *mv_version_cache_get (MvVersionCache *cache, const char *binary,
                                      MvVersionProbe probe);
