/* virtiofsd for directory mounts: the rules, the processes, their records. */
#include "shares.h"
#include "host-paths.h"
#include "process.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <linux/mount.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define START_TIMEOUT_MS  10000
#define SHARE_DIR_PREFIX  "fs"

struct _MvShares {
  gint         ref_count;
  MvHostPaths *paths;
  char        *virtiofsd;
};

MvShares *
mv_shares_new (const char *const *dirs, const char *virtiofsd, GError **error)
{
  static const char *const none[] = { NULL };
  g_autoptr (MvShares) shares = g_new0 (MvShares, 1);

  shares->ref_count = 1;
  shares->virtiofsd = g_strdup (virtiofsd && *virtiofsd ? virtiofsd : MV_VIRTIOFSD_PATH);
  shares->paths = mv_host_paths_new_for_key (MV_SHARES_KEY, dirs ? dirs : none, error);
  if (!shares->paths)
    return NULL;
  return g_steal_pointer (&shares);
}

MvShares *
mv_shares_new_from_config (GKeyFile *config, GError **error)
{
  g_auto (GStrv) dirs = NULL;
  g_autofree char *virtiofsd = NULL;
  g_autoptr (GError) local = NULL;

  if (config && g_key_file_has_key (config, "storage", "allowed-directories", NULL))
    {
      dirs = g_key_file_get_string_list (config, "storage", "allowed-directories", NULL, &local);
      if (!dirs)
        {
          mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, MV_SHARES_KEY ": %s", local->message);
          return NULL;
        }
    }
  if (config)
    virtiofsd = g_key_file_get_string (config, "storage", "virtiofsd", NULL);
  if (virtiofsd && *virtiofsd && !g_path_is_absolute (virtiofsd))
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "[storage] virtiofsd: %s is not an absolute path", virtiofsd);
      return NULL;
    }
  return mv_shares_new ((const char *const *) dirs, virtiofsd, error);
}

MvShares *
mv_shares_ref (MvShares *shares)
{
  g_atomic_int_inc (&shares->ref_count);
  return shares;
}

void
mv_shares_unref (MvShares *shares)
{
  if (!shares || !g_atomic_int_dec_and_test (&shares->ref_count))
    return;
  g_clear_pointer (&shares->paths, mv_host_paths_free);
  g_free (shares->virtiofsd);
  g_free (shares);
}

/* ---- the rules ---- */

/* The O_PATH descriptor of @source, checked as @field. */
static int
open_source (MvShares *shares, const char *field, const char *source, GError **error)
{
  static const char *const none[] = { NULL };
  g_autoptr (MvHostPaths) empty = NULL;

  if (shares)
    return mv_host_paths_open_dir (shares->paths, field, source, error);
  empty = mv_host_paths_new_for_key (MV_SHARES_KEY, none, error);
  return empty ? mv_host_paths_open_dir (empty, field, source, error) : -1;
}

gboolean
mv_shares_check (MvShares *shares, const MvSpec *spec, GError **error)
{
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = spec->mounts->pdata[i];
      g_autofree char *field = NULL;
      int fd;

      if (mount->type != MV_MOUNT_DIRECTORY)
        continue;
      field = g_strdup_printf ("mounts[%u].source", i);
      fd = open_source (shares, field, mount->source, error);
      if (fd < 0)
        return FALSE;
      close (fd);
    }
  return TRUE;
}

char *
mv_shares_socket_path (const char *runtime_dir, guint n)
{
  g_autofree char *dir = g_strdup_printf (SHARE_DIR_PREFIX "%u", n);

  return g_build_filename (runtime_dir, dir, MV_SHARE_SOCKET_NAME, NULL);
}

/* ---- starting ---- */

/* The tree virtiofsd serves: a detached copy of the mount at @dir_fd,
 * rooted there, nosuid and nodev, read-only if @read_only. Nothing of it
 * is attached anywhere on the host; it goes with the last descriptor. */
static int
clone_tree (int dir_fd, const char *field, const char *source, gboolean read_only,
            GError **error)
{
  struct mount_attr attr = {
    .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
  };
  int tree = (int) syscall (SYS_open_tree, dir_fd, "",
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

  if (tree < 0 ||
      syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    {
      int saved = errno;

      if (tree >= 0)
        close (tree);
      mv_error_set (error, MV_ERROR_FAILED, "%s: could not prepare %s to be shared: %s", field,
                    source, g_strerror (saved));
      return -1;
    }
  return tree;
}

/* A fresh directory for the share's socket and virtiofsd's own files: a
 * walled-in VMM may pass through it, to the socket, and do nothing else. */
static gboolean
make_share_dir (const char *socket_path, gint64 uid, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);

  if (g_mkdir (dir, 0700) < 0 && errno != EEXIST)
    {
      int saved = errno;
      return mv_error_set (error, MV_ERROR_FAILED, "Could not make %s: %s", dir,
                           g_strerror (saved));
    }
  if (chmod (dir, uid >= 0 ? 0711 : 0700) < 0)
    {
      int saved = errno;
      return mv_error_set (error, MV_ERROR_FAILED, "Could not set up %s: %s", dir,
                           g_strerror (saved));
    }
  return TRUE;
}

static MvProcess *
start_one (MvShares *shares, const MvShareConfig *share, gint64 uid, const MvCgroupJoin *cgroup,
           GError **error)
{
  g_autofree char *field = g_strdup_printf ("mounts[%u].source", share->mount_index);
  g_autofree char *socket_option = g_strconcat ("--socket-path=", share->socket_path, NULL);
  g_autofree char *source_option = NULL;
  MvProcessOptions options = { 0 };
  MvProcess *process;
  int dir_fd, tree;

  dir_fd = open_source (shares, field, share->source, error);
  if (dir_fd < 0)
    return NULL;
  tree = clone_tree (dir_fd, field, share->source, share->read_only, error);
  close (dir_fd);
  if (tree < 0)
    return NULL;
  if (!make_share_dir (share->socket_path, uid, error))
    {
      close (tree);
      return NULL;
    }
  g_unlink (share->socket_path);

  /* "/." so that virtiofsd's check that the source is a directory sees
   * the directory the link leads to, not the link. */
  source_option = g_strdup_printf ("source=/proc/self/fd/%d/.", tree);
  const char *argv[] = {
    shares->virtiofsd, socket_option, "-o", source_option, "-o", "sandbox=chroot",
    "-o", "cache=auto", "-o", "no_posix_lock", "-o", "no_xattr", NULL,
  };
  options.passed_fds = &tree;
  options.n_passed_fds = 1;
  options.ready_when_listening = TRUE;
  /* Its work is the guest's: it counts against the VMM's limits. */
  options.cgroup = cgroup;
  process = mv_process_start_with (share->socket_path, argv, &options, START_TIMEOUT_MS, error);
  close (tree);
  if (!process)
    return NULL;
  /* virtiofsd made the socket its own (0700); the VMM connects to it as
   * its own user. */
  if (uid >= 0 && chown (share->socket_path, (uid_t) uid, (gid_t) uid) < 0)
    {
      int saved = errno;
      g_autoptr (GError) local = NULL;

      mv_process_kill (process, &local);
      mv_process_free (process);
      mv_error_set (error, MV_ERROR_FAILED, "Could not give %s to the VMM: %s",
                    share->socket_path, g_strerror (saved));
      return NULL;
    }
  return process;
}

GPtrArray *
mv_shares_start (MvShares *shares, const MvVmSpec *vm, gint64 uid, GError **error)
{
  g_autoptr (GPtrArray) processes =
    g_ptr_array_new_with_free_func ((GDestroyNotify) mv_process_free);

  for (guint i = 0; i < vm->shares->len; i++)
    {
      MvProcess *process = start_one (shares, vm->shares->pdata[i], uid, vm->cgroup, error);

      if (!process)
        {
          for (guint j = 0; j < processes->len; j++)
            mv_process_kill (processes->pdata[j], NULL);
          return NULL;
        }
      g_ptr_array_add (processes, process);
    }
  return g_steal_pointer (&processes);
}

void
mv_shares_to_json (GPtrArray *processes, JsonObject *identity)
{
  JsonArray *array;

  if (!processes || processes->len == 0)
    return;
  array = json_array_new ();
  for (guint i = 0; i < processes->len; i++)
    {
      JsonObject *object = json_object_new ();

      mv_process_to_json (processes->pdata[i], object);
      json_array_add_object_element (array, object);
    }
  json_object_set_array_member (identity, "shares", array);
}

/* ---- ending ---- */

/* The socket @pid serves if it is a virtiofsd serving a share of
 * @runtime_dir: its "--socket-path=" argument. */
static char *
share_socket_of (const char *pid, const char *runtime_dir)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/cmdline", pid);
  g_autofree char *contents = NULL;
  g_autofree char *prefix = g_strconcat ("--socket-path=", runtime_dir, "/" SHARE_DIR_PREFIX,
                                         NULL);
  gsize length;

  if (!g_file_get_contents (path, &contents, &length, NULL))
    return NULL;
  for (gsize i = 0; i < length; i += strlen (contents + i) + 1)
    if (g_str_has_prefix (contents + i, prefix) &&
        g_str_has_suffix (contents + i, "/" MV_SHARE_SOCKET_NAME))
      return g_strdup (contents + i + strlen ("--socket-path="));
  return NULL;
}

/* Field 22 of /proc/PID/stat, counted from the last ')'. */
static gboolean
read_start_time (const char *pid, guint64 *start_time)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/stat", pid);
  g_autofree char *contents = NULL;
  g_auto (GStrv) fields = NULL;
  const char *p;

  if (!g_file_get_contents (path, &contents, NULL, NULL) || !(p = strrchr (contents, ')')))
    return FALSE;
  fields = g_strsplit_set (p + 1, " \n", -1);
  return g_strv_length (fields) >= 21 &&
         g_ascii_string_to_unsigned (fields[20], 10, 0, G_MAXUINT64, start_time, NULL);
}

/* The share directories mv_shares_start made in @runtime_dir. */
static GPtrArray *
list_share_dirs (const char *runtime_dir)
{
  GPtrArray *dirs = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) dir = g_dir_open (runtime_dir, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    if (g_str_has_prefix (name, SHARE_DIR_PREFIX) &&
        g_ascii_string_to_unsigned (name + strlen (SHARE_DIR_PREFIX), 10, 0, G_MAXUINT, NULL,
                                    NULL))
      g_ptr_array_add (dirs, g_build_filename (runtime_dir, name, NULL));
  return dirs;
}

gboolean
mv_shares_end (const char *runtime_dir, JsonObject *identity, GError **error)
{
  JsonNode *node = identity ? json_object_get_member (identity, "shares") : NULL;
  JsonArray *recorded = node && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
  g_autoptr (GPtrArray) share_dirs = list_share_dirs (runtime_dir);
  g_autoptr (GDir) proc = NULL;
  g_autofree char *machine_id = g_path_get_basename (runtime_dir);
  const char *name;

  for (guint i = 0; recorded && i < json_array_get_length (recorded); i++)
    {
      JsonNode *element = json_array_get_element (recorded, i);
      g_autoptr (MvProcess) process =
        JSON_NODE_HOLDS_OBJECT (element)
        ? mv_process_attach_recorded (json_node_get_object (element)) : NULL;

      if (process && !mv_process_kill (process, error))
        return FALSE;
    }

  /* What an interrupted start left unrecorded. A virtiofsd is started
   * only once its share's directory is made, and the directory goes only
   * after it (below): with none, no virtiofsd serves this machine, and
   * the host's processes need not be read. */
  if (share_dirs->len > 0)
    proc = g_dir_open ("/proc", 0, NULL);
  while (proc && (name = g_dir_read_name (proc)))
    {
      g_autofree char *socket = NULL;
      g_autoptr (MvProcess) process = NULL;
      guint64 pid, start_time;

      if (!g_ascii_string_to_unsigned (name, 10, 2, G_MAXINT, &pid, NULL) ||
          (int) pid == getpid () || !(socket = share_socket_of (name, runtime_dir)))
        continue;
      if (!read_start_time (name, &start_time))
        continue;
      process = mv_process_attach ((int) pid, start_time, socket, -1);
      if (!process)
        continue;
      /* The runtime directory is named after the machine. */
      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "Ending virtiofsd process %d, left serving %s", process->pid, socket);
      if (!mv_process_kill (process, error))
        return FALSE;
    }

  for (guint i = 0; i < share_dirs->len; i++)
    {
      const char *share_dir = share_dirs->pdata[i];
      g_autoptr (GDir) files = g_dir_open (share_dir, 0, NULL);
      const char *file;

      while (files && (file = g_dir_read_name (files)))
        {
          g_autofree char *path = g_build_filename (share_dir, file, NULL);
          g_unlink (path);
        }
      g_rmdir (share_dir);
    }
  return TRUE;
}
