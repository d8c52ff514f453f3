/* Versions remembered by binary identity (version-cache.h). The file is
 * a key file, a group per binary:
 *
 *   [/usr/bin/qemu-system-x86_64]
 *   identity=2049:1835021:19331952:1700000000123456789:1700000000123456789
 *   version=7.2.22
 */
#include "version-cache.h"

#include <sys/stat.h>

#define KEY_IDENTITY  "identity"
#define KEY_VERSION   "version"

struct _MvVersionCache {
  gint    refs;
  char   *path;
  GMutex  lock;      /* the file's read, change and write */
};

MvVersionCache *
mv_version_cache_new (const char *path)
{
  MvVersionCache *cache = g_new0 (MvVersionCache, 1);

  cache->refs = 1;
  cache->path = g_strdup (path);
  g_mutex_init (&cache->lock);
  return cache;
}

MvVersionCache *
mv_version_cache_ref (MvVersionCache *cache)
{
  g_atomic_int_inc (&cache->refs);
  return cache;
}

void
mv_version_cache_unref (MvVersionCache *cache)
{
  if (!cache || !g_atomic_int_dec_and_test (&cache->refs))
    return;
  g_mutex_clear (&cache->lock);
  g_free (cache->path);
  g_free (cache);
}

static gint64
nanoseconds (const struct timespec *t)
{
  return (gint64) t->tv_sec * G_GINT64_CONSTANT (1000000000) + t->tv_nsec;
}

/* Which file @binary is, as a key's value; NULL if it cannot be read. A
 * binary replaced or rewritten has another. */
static char *
identity_of (const char *binary)
{
  struct stat st;

  if (stat (binary, &st) < 0)
    return NULL;
  return g_strdup_printf ("%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT ":%" G_GINT64_FORMAT
                          ":%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT,
                          (guint64) st.st_dev, (guint64) st.st_ino, (gint64) st.st_size,
                          nanoseconds (&st.st_mtim), nanoseconds (&st.st_ctim));
}

char *
mv_version_cache_get (MvVersionCache *cache, const char *binary, MvVersionProbe probe)
{
  g_autoptr (GKeyFile) file = NULL;
  g_autofree char *identity = NULL, *remembered = NULL, *version = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GMutexLocker) locker = NULL;

  if (!cache || !cache->path)
    return probe (binary);
  locker = g_mutex_locker_new (&cache->lock);
  /* Before the binary runs: if it is replaced meanwhile, what it said is
   * remembered for the file it was, which no longer matches. */
  identity = identity_of (binary);
  if (!identity)
    return probe (binary);
  file = g_key_file_new ();
  if (g_key_file_load_from_file (file, cache->path, G_KEY_FILE_NONE, NULL))
    {
      remembered = g_key_file_get_string (file, binary, KEY_IDENTITY, NULL);
      if (g_strcmp0 (remembered, identity) == 0 &&
          (version = g_key_file_get_string (file, binary, KEY_VERSION, NULL)) && *version)
        return g_steal_pointer (&version);
    }
  version = probe (binary);
  if (!version)
    return NULL;
  g_key_file_set_string (file, binary, KEY_IDENTITY, identity);
  g_key_file_set_string (file, binary, KEY_VERSION, version);
  /* Lost with a crash, it is asked again: nothing to sync. */
  if (!g_key_file_save_to_file (file, cache->path, &error))
    g_debug ("Could not remember %s's version in %s: %s", binary, cache->path, error->message);
  return g_steal_pointer (&version);
}
