#include "sandbox.h"
#include "core/errors.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct _MvSandbox {
  gatomicrefcount  ref;
  gboolean         enabled;
  uid_t            first;
  uid_t            last;
  MvHostPaths     *paths;
};

#define invalid(error, ...) mv_error_set ((error), MV_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

static gboolean
parse_range (const char *text, uid_t *first, uid_t *last, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (text, "-", 3);
  guint64 a, b;

  if (g_strv_length (parts) != 2 ||
      !g_ascii_string_to_unsigned (g_strstrip (parts[0]), 10, 1, G_MAXINT32 - 1, &a, NULL) ||
      !g_ascii_string_to_unsigned (g_strstrip (parts[1]), 10, 1, G_MAXINT32 - 1, &b, NULL))
    return invalid (error, "[sandbox] uid-range: '%s' is not FIRST-LAST, two user IDs from 1 "
                    "to %d", text, G_MAXINT32 - 1);
  /* Below 1000 are the system's own users; 65534 is nobody. */
  if (a > b || a < 1000 || (a <= 65534 && b >= 65534))
    return invalid (error, "[sandbox] uid-range: %s must run upwards, start at 1000 or above "
                    "and leave out 65534 (nobody)", text);
  *first = (uid_t) a;
  *last = (uid_t) b;
  return TRUE;
}

MvSandbox *
mv_sandbox_new_from_config (GKeyFile *config, GError **error)
{
  g_autoptr (MvSandbox) sandbox = g_new0 (MvSandbox, 1);
  g_autoptr (GError) local = NULL;

  g_atomic_ref_count_init (&sandbox->ref);
  sandbox->enabled = TRUE;
  sandbox->first = MV_SANDBOX_DEFAULT_UID_FIRST;
  sandbox->last = MV_SANDBOX_DEFAULT_UID_LAST;
  if (config && g_key_file_has_key (config, "sandbox", "enabled", NULL))
    {
      sandbox->enabled = g_key_file_get_boolean (config, "sandbox", "enabled", &local);
      if (local)
        {
          invalid (error, "[sandbox] enabled: must be true or false");
          return NULL;
        }
    }
  if (config && g_key_file_has_key (config, "sandbox", "uid-range", NULL))
    {
      g_autofree char *range = g_key_file_get_string (config, "sandbox", "uid-range", NULL);

      if (!parse_range (range ? range : "", &sandbox->first, &sandbox->last, error))
        return NULL;
    }
  sandbox->paths = mv_host_paths_new_from_config (config, error);
  if (!sandbox->paths)
    return NULL;
  return g_steal_pointer (&sandbox);
}

MvSandbox *
mv_sandbox_ref (MvSandbox *sandbox)
{
  g_atomic_ref_count_inc (&sandbox->ref);
  return sandbox;
}

void
mv_sandbox_unref (MvSandbox *sandbox)
{
  if (!sandbox || !g_atomic_ref_count_dec (&sandbox->ref))
    return;
  mv_host_paths_free (sandbox->paths);
  g_free (sandbox);
}

gboolean
mv_sandbox_enabled (MvSandbox *sandbox)
{
  return sandbox->enabled;
}

MvHostPaths *
mv_sandbox_host_paths (MvSandbox *sandbox)
{
  return sandbox->paths;
}

gboolean
mv_sandbox_owns_uid (MvSandbox *sandbox, uid_t uid)
{
  return uid >= sandbox->first && uid <= sandbox->last;
}

/* An ID that a user or group of the host already has is never handed to
 * a VMM: files of that user's would be the VMM's. */
static gboolean
id_is_taken (uid_t id)
{
  struct passwd pw, *pwp = NULL;
  struct group gr, *grp = NULL;
  char buf[4096];

  return (getpwuid_r (id, &pw, buf, sizeof buf, &pwp) == 0 && pwp) ||
         (getgrgid_r ((gid_t) id, &gr, buf, sizeof buf, &grp) == 0 && grp);
}

static int
try_lease (int dir_fd, uid_t uid)
{
  char name[32];
  int fd;

  g_snprintf (name, sizeof name, "%u.lock", (unsigned) uid);
  fd = openat (dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return -1;
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      close (fd);
      return -1;
    }
  return fd;
}

int
mv_sandbox_lease_uid (MvSandbox *sandbox, const char *machine_id, uid_t *uid, GError **error)
{
  guint64 size = (guint64) sandbox->last - sandbox->first + 1;
  guint64 start = g_str_hash (machine_id) % size;
  int dir_fd;

  if (g_mkdir_with_parents (MV_UID_LEASE_DIR, 0700) < 0 ||
      (dir_fd = open (MV_UID_LEASE_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not open %s, where the VMMs' "
                   "user IDs are leased: %s", MV_UID_LEASE_DIR, g_strerror (saved));
      return -1;
    }
  for (guint64 i = 0; i < size; i++)
    {
      uid_t candidate = (uid_t) (sandbox->first + (start + i) % size);
      int fd;

      if (id_is_taken (candidate) || (fd = try_lease (dir_fd, candidate)) < 0)
        continue;
      close (dir_fd);
      *uid = candidate;
      return fd;
    }
  close (dir_fd);
  g_set_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED,
               "[sandbox] uid-range: all %" G_GUINT64_FORMAT " user IDs from %u to %u are "
               "taken by running VMMs", size, (unsigned) sandbox->first,
               (unsigned) sandbox->last);
  return -1;
}
