#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "core/errors.h"
#include "core/json-strict.h"
#include "util/files.h"
#include "util/reserved-dirs.h"
#include "names.h"
#include "util/fault.h"
#include "patches.h"

/* Entries of machines/ that are the store's own work in progress, named
 * so they can never be taken for a record (IDs do not start with '.'). */
#define STAGING_PREFIX  ".staging-"
#define REMOVING_PREFIX ".removing-"

struct _MvStore {
  char *state_dir;
  char *runtime_dir;
  char *machines_dir;          /* <state>/machines */
  char *runtime_machines_dir;  /* <runtime>/machines */
};

typedef int MvFd;

static void
close_fd (MvFd fd)
{
  /* Only read-side and already-failed descriptors get here; writes are
   * closed explicitly so their errors are seen. */
  close (fd);
}

G_DEFINE_AUTO_CLEANUP_FREE_FUNC (MvFd, close_fd, -1)


static gboolean
write_all (int fd, const char *data, gsize len, const char *path, GError **error)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, MIN (len, (gsize) G_MAXSSIZE));

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          return mv_set_errno_error (error, errno, "Cannot write %s", path);
        }
      /* A regular file accepts at least one byte or says why not. */
      if (n == 0)
        return mv_set_errno_error (error, ENOSPC, "Cannot write %s", path);
      data += n;
      len -= (gsize) n;
    }
  return TRUE;
}

/* Writes and syncs @data into the new file @fd; consumes @fd. */
static gboolean
fill_new_file (int fd, const char *data, gsize len, const char *path, GError **error)
{
  g_auto(MvFd) owned = fd;
  int raw;

  /* mkstemp's mode is filtered by the umask; the contract is 0600. */
  if (fchmod (owned, 0600) < 0)
    return mv_set_errno_error (error, errno, "Cannot set the mode of a temporary file for %s",
                               path);
  if ((errno = mv_fault_io ("write")) || !write_all (owned, data, len, path, error))
    return errno ? mv_set_errno_error (error, errno, "Cannot write %s", path) : FALSE;
  if ((errno = mv_fault_io ("fsync")) || fsync (owned) < 0)
    return mv_set_errno_error (error, errno, "Cannot sync %s", path);

  raw = g_steal_fd (&owned);
  /* Linux releases the descriptor even when close() reports EINTR. */
  if (close (raw) < 0 && errno != EINTR)
    return mv_set_errno_error (error, errno, "Cannot write %s", path);
  return TRUE;
}

gboolean
mv_write_file_atomic (const char *path, const char *data, gsize len, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *temp = g_strdup_printf ("%s/.%s.XXXXXX", dir, base);
  int fd;

  if ((errno = mv_fault_io ("create")))
    return mv_set_errno_error (error, errno, "Cannot create a temporary file for %s", path);
  fd = g_mkstemp_full (temp, O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot create a temporary file for %s", path);

  if (!fill_new_file (fd, data, len, path, error))
    {
      g_unlink (temp);
      return FALSE;
    }

  if ((errno = mv_fault_io ("rename")) || rename (temp, path) < 0)
    {
      int errsv = errno;

      g_unlink (temp);
      return mv_set_errno_error (error, errsv, "Cannot replace %s", path);
    }

  /* Without this the rename itself may not survive a power cut. */
  if ((errno = mv_fault_io ("dirsync")))
    return mv_set_errno_error (error, errno, "Cannot sync directory %s", dir);
  return mv_fsync_dir (dir, error);
}

/* Creates @path (and its parents) 0700 unless it is there. An existing
 * directory keeps the mode the administrator gave it. */
static gboolean
ensure_dir (const char *path, GError **error)
{
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    return TRUE;
  if (g_mkdir_with_parents (path, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create directory %s", path);
  /* mkdir's mode is filtered by the umask. */
  if (chmod (path, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot set the mode of %s", path);
  return TRUE;
}

/* IDs become directory names: besides what makes an ID valid, the store
 * needs it to be one path component and not one of its dot-entries. */
static gboolean
check_id (const char *id, GError **error)
{
  if (id == NULL || *id == '\0')
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "id: missing");
      return FALSE;
    }
  if (!mv_id_validate (id, error))
    return FALSE;
  if (id[0] == '.' || strchr (id, '/') != NULL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "id: \"%s\" cannot name a directory of its own", id);
      return FALSE;
    }
  return TRUE;
}

MvStore *
mv_store_new (const char *state_dir, const char *runtime_dir, GError **error)
{
  g_autoptr(MvStore) store = g_new0 (MvStore, 1);
  g_autofree char *snapshots = NULL;

  g_return_val_if_fail (state_dir != NULL, NULL);
  g_return_val_if_fail (runtime_dir != NULL, NULL);

  store->state_dir = g_strdup (state_dir);
  store->runtime_dir = g_strdup (runtime_dir);
  store->machines_dir = g_build_filename (state_dir, MV_MACHINES_DIR, NULL);
  store->runtime_machines_dir = g_build_filename (runtime_dir, MV_MACHINES_DIR, NULL);

  if (!ensure_dir (store->state_dir, error) ||
      !ensure_dir (store->machines_dir, error) ||
      !ensure_dir (store->runtime_dir, error) ||
      !ensure_dir (store->runtime_machines_dir, error))
    return NULL;

  /* Records and runtime files are never a machine's disk or kernel. */
  snapshots = g_build_filename (state_dir, MV_SNAPSHOTS_DIR, NULL);
  mv_reserved_dirs_add (store->machines_dir);
  mv_reserved_dirs_add (snapshots);
  mv_reserved_dirs_add (store->runtime_dir);
  return g_steal_pointer (&store);
}

void
mv_store_free (MvStore *store)
{
  if (store == NULL)
    return;
  g_free (store->state_dir);
  g_free (store->runtime_dir);
  g_free (store->machines_dir);
  g_free (store->runtime_machines_dir);
  g_free (store);
}

const char *
mv_store_state_dir (MvStore *store)
{
  return store->state_dir;
}

const char *
mv_store_runtime_dir (MvStore *store)
{
  return store->runtime_dir;
}

char *
mv_store_machine_dir (MvStore *store, const char *id)
{
  return g_build_filename (store->machines_dir, id, NULL);
}

char *
mv_store_machine_runtime_dir (MvStore *store, const char *id)
{
  return g_build_filename (store->runtime_machines_dir, id, NULL);
}

void
mv_record_free (MvRecord *record)
{
  if (record == NULL)
    return;
  mv_config_free (record->config);
  mv_status_free (record->status);
  g_free (record);
}

void
mv_invalid_record_free (MvInvalidRecord *invalid)
{
  if (invalid == NULL)
    return;
  g_free (invalid->path);
  g_free (invalid->reason);
  g_free (invalid);
}

static const MvJsonLimits record_limits = {
  .max_bytes = MV_RECORD_MAX_BYTES,
  .max_depth = MV_RECORD_MAX_DEPTH,
};

/* One member or element per line, for people and grep, but never
 * indented: indentation grows with the depth on every line, so a deeply
 * nested record would grow with the square of its depth. What cannot be
 * read back (too large, too deep, not UTF-8) is refused here, so that a
 * write that succeeds is a record the next start can load. */
static char *
node_to_data (JsonNode *node, const char *what, gsize *len, GError **error)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;
  g_autofree char *data = NULL;

  json_generator_set_pretty (generator, TRUE);
  json_generator_set_indent (generator, 0);
  json_generator_set_root (generator, node);
  text = json_generator_to_data (generator, NULL);
  data = g_strconcat (text, "\n", NULL);
  *len = strlen (data);
  if (!mv_json_check (data, (gssize) *len, &record_limits, what, error))
    return NULL;
  return g_steal_pointer (&data);
}

static gboolean
write_node (const char *path, const char *what, JsonNode *node, GError **error)
{
  gsize len;
  g_autofree char *data = node_to_data (node, what, &len, error);

  if (data == NULL)
    {
      g_prefix_error (error, "Cannot write %s: ", path);
      return FALSE;
    }
  return mv_write_file_atomic (path, data, len, error);
}

static gboolean
write_config (const char *dir, const MvConfig *config, GError **error)
{
  g_autofree char *path = g_build_filename (dir, MV_CONFIG_RECORD, NULL);
  g_autoptr(JsonNode) node = mv_config_to_node (config);

  return write_node (path, MV_CONFIG_RECORD, node, error);
}

static gboolean
write_status (const char *dir, const MvStatus *status, GError **error)
{
  g_autofree char *path = g_build_filename (dir, MV_STATUS_RECORD, NULL);
  g_autoptr(JsonNode) node = mv_status_to_node (status);

  return write_node (path, MV_STATUS_RECORD, node, error);
}

static gboolean
exists_no_follow (const char *path)
{
  GStatBuf buf;

  return g_lstat (path, &buf) == 0;
}

static gboolean
already_exists (const char *id, GError **error)
{
  g_set_error (error, MV_ERROR, MV_ERROR_ALREADY_EXISTS,
               "A machine with id %s already exists", id);
  return FALSE;
}

/* Writes and syncs @node as the new file @name in the staging directory:
 * nothing else can see the directory yet, so there is no temporary file
 * to rename, and one sync of the directory covers every file in it. */
static gboolean
stage_file (const char *staging, const char *name, JsonNode *node, GError **error)
{
  g_autofree char *path = g_build_filename (staging, name, NULL);
  gsize len;
  g_autofree char *data = node_to_data (node, name, &len, error);
  int fd;

  if (data == NULL)
    {
      g_prefix_error (error, "Cannot write %s: ", path);
      return FALSE;
    }
  if ((errno = mv_fault_io ("create")))
    return mv_set_errno_error (error, errno, "Cannot create %s", path);
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", path);
  return fill_new_file (fd, data, len, path, error);
}

static gboolean
stage_record (const char *staging, const MvConfig *config, const MvStatus *status,
              GError **error)
{
  g_autoptr(MvStatus) fresh = NULL;
  g_autoptr(JsonNode) config_node = mv_config_to_node (config);
  g_autoptr(JsonNode) status_node = NULL;

  if (status == NULL)
    status = fresh = mv_status_new ();
  status_node = mv_status_to_node (status);

  if (!stage_file (staging, MV_CONFIG_RECORD, config_node, error) ||
      !stage_file (staging, MV_STATUS_RECORD, status_node, error))
    return FALSE;
  if ((errno = mv_fault_io ("dirsync")))
    return mv_set_errno_error (error, errno, "Cannot sync directory %s", staging);
  return mv_fsync_dir (staging, error);
}

/* Moves the staged record into place without ever replacing another. */
static gboolean
publish_record (const char *staging, const char *final, const char *id, GError **error)
{
  if ((errno = mv_fault_io ("rename")))
    return mv_set_errno_error (error, errno, "Cannot move %s to %s", staging, final);
  if (renameat2 (AT_FDCWD, staging, AT_FDCWD, final, RENAME_NOREPLACE) == 0)
    return TRUE;

  if (errno == EEXIST)
    return already_exists (id, error);
  if (errno != EINVAL && errno != ENOSYS)
    return mv_set_errno_error (error, errno, "Cannot move %s to %s", staging, final);

  /* A file system without RENAME_NOREPLACE: rename() would still replace
   * an empty directory, so look first. Only the main thread writes
   * records, so nothing can appear in between. */
  if (exists_no_follow (final))
    return already_exists (id, error);
  if (rename (staging, final) < 0)
    return mv_set_errno_error (error, errno, "Cannot move %s to %s", staging, final);
  return TRUE;
}

gboolean
mv_store_create_machine (MvStore *store, const MvConfig *config,
                         const MvStatus *status, GError **error)
{
  g_autofree char *final = NULL;
  g_autofree char *staging = NULL;

  g_return_val_if_fail (store != NULL, FALSE);
  g_return_val_if_fail (config != NULL, FALSE);

  if (!check_id (config->id, error))
    return FALSE;

  /* Checked first so that a refused create writes nothing at all. */
  final = mv_store_machine_dir (store, config->id);
  if (exists_no_follow (final))
    return already_exists (config->id, error);

  staging = g_strdup_printf ("%s/" STAGING_PREFIX "%s-XXXXXX", store->machines_dir, config->id);
  if (g_mkdtemp_full (staging, 0700) == NULL)
    return mv_set_errno_error (error, errno, "Cannot create a directory in %s",
                               store->machines_dir);

  if (!stage_record (staging, config, status, error) ||
      (mv_fault_point ("create", "staged"), FALSE) ||
      !publish_record (staging, final, config->id, error))
    {
      /* The staging directory was never a record; it goes. */
      mv_remove_tree (staging, NULL);
      return FALSE;
    }

  return mv_fsync_dir (store->machines_dir, error);
}

static gboolean
require_machine_dir (const char *dir, const char *id, GError **error)
{
  if (g_file_test (dir, G_FILE_TEST_IS_DIR))
    return TRUE;
  g_set_error (error, MV_ERROR, MV_ERROR_NOT_FOUND, "No machine with id %s", id);
  return FALSE;
}

gboolean
mv_store_save_config (MvStore *store, const MvConfig *config, GError **error)
{
  g_autofree char *dir = NULL;

  g_return_val_if_fail (store != NULL, FALSE);
  g_return_val_if_fail (config != NULL, FALSE);

  if (!check_id (config->id, error))
    return FALSE;
  dir = mv_store_machine_dir (store, config->id);
  if (!require_machine_dir (dir, config->id, error))
    return FALSE;
  return write_config (dir, config, error);
}

gboolean
mv_store_save_status (MvStore *store, const char *id, const MvStatus *status,
                      GError **error)
{
  g_autofree char *dir = NULL;

  g_return_val_if_fail (store != NULL, FALSE);
  g_return_val_if_fail (status != NULL, FALSE);

  if (!check_id (id, error))
    return FALSE;
  dir = mv_store_machine_dir (store, id);
  if (!require_machine_dir (dir, id, error))
    return FALSE;
  return write_status (dir, status, error);
}

/* Deletes a directory that has already left the records' namespace. */
static gboolean
finish_removal (MvStore *store, const char *removing, GError **error)
{
  return mv_remove_tree (removing, error) && mv_fsync_dir (store->machines_dir, error);
}

gboolean
mv_store_mark_destroyed (MvStore *store, const char *id, GError **error)
{
  g_autofree char *dir = mv_store_machine_dir (store, id);
  g_autofree char *marker = g_build_filename (dir, MV_DESTROY_MARKER, NULL);
  int fd = open (marker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", marker);
  close (fd);
  return mv_fsync_dir (dir, error);
}

gboolean
mv_store_remove_machine (MvStore *store, const char *id, GError **error)
{
  g_autofree char *final = NULL;
  g_autofree char *removing = NULL;
  g_autofree char *runtime = NULL;

  g_return_val_if_fail (store != NULL, FALSE);

  if (!check_id (id, error))
    return FALSE;

  final = mv_store_machine_dir (store, id);
  removing = g_strdup_printf ("%s/" REMOVING_PREFIX "%s", store->machines_dir, id);
  runtime = mv_store_machine_runtime_dir (store, id);

  /* Runtime files go first: if anything below fails the record is still
   * there, and the removal can be asked for again. */
  if (!mv_remove_tree (runtime, error))
    return FALSE;

  /* What an interrupted earlier removal left would block the rename. */
  if (!mv_remove_tree (removing, error))
    return FALSE;

  /* One rename takes the whole record out of sight, so a crash during
   * the deletion below never leaves a half record to be found invalid;
   * the next start finishes the job. A machine already gone is not an
   * error: removal resumes where it stopped. */
  if (rename (final, removing) < 0)
    {
      if (errno == ENOENT)
        return TRUE;
      return mv_set_errno_error (error, errno, "Cannot move %s to %s", final, removing);
    }
  if (!mv_fsync_dir (store->machines_dir, error))
    return FALSE;

  return finish_removal (store, removing, error);
}

static void
add_invalid (GPtrArray *invalid, const char *id, const char *path, const char *reason)
{
  MvInvalidRecord *record;

  if (id != NULL)
    g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                      MV_LOG_FIELD_MACHINE_ID, id,
                      "MESSAGE", "Invalid record %s, left as it is: %s", path, reason);
  else
    g_warning ("Invalid record %s, left as it is: %s", path, reason);

  if (invalid == NULL)
    return;
  record = g_new0 (MvInvalidRecord, 1);
  record->path = g_strdup (path);
  record->reason = g_strdup (reason);
  g_ptr_array_add (invalid, record);
}

/* Reads the record file @name of a machine's directory, only within the
 * record limits. *@missing tells a file that is not there from one that
 * cannot be read, for the optional status.json. */
static gboolean
read_record_file (int dir_fd, const char *name, const char *path, char **data, gsize *len,
                  gboolean *missing, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  *missing = FALSE;
  /* Records are regular files the daemon wrote; anything else (a link,
   * a FIFO that would block the read) was put there by hand. */
  if (!mv_file_read_bounded_at (dir_fd, name, O_NOFOLLOW, path, MV_RECORD_MAX_BYTES, name,
                                data, len, &local_error))
    {
      *missing = g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
      if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE))
        g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "not a regular file");
      else
        g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  return TRUE;
}

/* Reads a record's text, strictly: anything else is an invalid record.
 * A record in the current format is read as it is; one in another format
 * is brought up to date first, on json-glib's tree that the patches work
 * on, and read from that. */
static MvJsonDoc *
read_record_text (const char *data, gsize len, const char *what, gint64 current,
                  gboolean (*upgrade) (JsonObject *, gboolean *, GError **),
                  gboolean *changed, GError **error)
{
  g_autoptr(MvJsonDoc) doc = NULL;
  g_autoptr(JsonNode) tree = NULL;
  const MvJson *root;
  const MvJson *format;

  doc = mv_json_read (data, (gssize) len, &record_limits, what, error);
  if (doc == NULL)
    return NULL;
  root = mv_json_doc_root (doc);
  if (!mv_json_is_object (root))
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "expected a JSON object");
      return NULL;
    }
  format = mv_json_member (root, "format");
  if (format != NULL && format->kind == MV_JSON_INTEGER && format->integer == current)
    return g_steal_pointer (&doc);

  /* The patches judge any other format, or its absence. */
  tree = mv_json_to_node (root);
  if (!upgrade (json_node_get_object (tree), changed, error))
    return NULL;
  return mv_json_doc_from_node (tree);
}

MvConfig *
mv_store_parse_config (const char *data, gsize len, gboolean *upgraded, GError **error)
{
  g_autoptr(MvJsonDoc) doc = NULL;

  *upgraded = FALSE;
  doc = read_record_text (data, len, MV_CONFIG_RECORD, MV_CONFIG_FORMAT, mv_patches_upgrade_config,
                     upgraded, error);
  return doc != NULL ? mv_config_from_node (mv_json_doc_root (doc), error) : NULL;
}

MvStatus *
mv_store_parse_status (const char *data, gsize len, gboolean *upgraded, GError **error)
{
  g_autoptr(MvJsonDoc) doc = NULL;

  *upgraded = FALSE;
  doc = read_record_text (data, len, MV_STATUS_RECORD, MV_STATUS_FORMAT, mv_patches_upgrade_status,
                     upgraded, error);
  return doc != NULL ? mv_status_from_node (mv_json_doc_root (doc), error) : NULL;
}

/* Temporary files of writes that a crash interrupted: the record they
 * were to replace is still whole, so they are only litter. */
static gboolean
is_stale_temp_file (const char *name)
{
  return g_str_has_prefix (name, "." MV_CONFIG_RECORD ".") ||
         g_str_has_prefix (name, "." MV_STATUS_RECORD ".");
}

/* What reading one entry of machines/ found: a record, or where it is
 * at fault and why. */
typedef struct {
  MvRecord *record;
  gboolean  config_changed;   /* read in an older format: to be written back */
  gboolean  status_changed;
  char     *bad_path;
  char     *reason;
} Loaded;

/* What one listing of a machine's directory says: a delete asked for
 * when config.json could not be written, and the litter of interrupted
 * writes. */
typedef struct {
  gboolean   destroy_marker;
  gboolean   other_files;     /* anything but the records, the marker and litter */
  GPtrArray *litter;          /* names, or NULL when there is none */
} Listing;

/* What one name in a machine's directory says. */
static void
list_name (const char *name, Listing *listing)
{
  if (strcmp (name, MV_DESTROY_MARKER) == 0)
    listing->destroy_marker = TRUE;
  else if (is_stale_temp_file (name))
    {
      if (listing->litter == NULL)
        listing->litter = g_ptr_array_new_with_free_func (g_free);
      g_ptr_array_add (listing->litter, g_strdup (name));
    }
  else if (strcmp (name, ".") != 0 && strcmp (name, "..") != 0 &&
           strcmp (name, MV_CONFIG_RECORD) != 0 && strcmp (name, MV_STATUS_RECORD) != 0)
    listing->other_files = TRUE;
}

/* Lists @path, open as *@dir_fd, and closes it. The entries are read
 * with getdents64() on the descriptor itself: fdopendir() would check it
 * with three more system calls per record. */
static gboolean
list_machine_dir (int *dir_fd, const char *path, Listing *listing, GError **error)
{
  g_auto(MvFd) fd = g_steal_fd (dir_fd);
  /* Aligned for the records the kernel writes into it. */
  union {
    struct dirent64 first;
    char            bytes[4096];
  } buffer;

  for (;;)
    {
      ssize_t n = getdents64 (fd, buffer.bytes, sizeof buffer.bytes);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return mv_set_errno_error (error, errno, "Cannot list %s", path);
      if (n == 0)
        return TRUE;
      for (ssize_t at = 0; at < n;)
        {
          const struct dirent64 *entry = (const struct dirent64 *) (buffer.bytes + at);

          list_name (entry->d_name, listing);
          at += entry->d_reclen;
        }
    }
}

/* Reads and checks the machine directory @name of machines/ (@dir_fd);
 * nothing on disk is changed but the litter of interrupted writes. Runs
 * on a loader thread: what it writes back is left to the caller. Each
 * file is opened in the directory's descriptor, and the directory listed
 * once through it: ten thousand records make every system call count. */
static void
read_record (int machines_fd, const char *dir, const char *name, Loaded *out)
{
  /* Paths are joined plainly: g_build_filename() costs more than the
   * rest of a record's bookkeeping. */
  g_autofree char *config_path = g_strconcat (dir, "/" MV_CONFIG_RECORD, NULL);
  g_autofree char *status_path = g_strconcat (dir, "/" MV_STATUS_RECORD, NULL);
  g_autofree char *config_data = NULL;
  g_autofree char *status_data = NULL;
  g_autoptr(MvConfig) config = NULL;
  g_autoptr(MvStatus) status = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(MvFd) dir_fd = -1;
  Listing listing = { 0 };
  gboolean missing;
  gsize len;

  dir_fd = openat (machines_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0)
    {
      out->bad_path = g_strdup (dir);
      out->reason = g_strdup (errno == ELOOP ? "a symbolic link, not a directory"
                              : errno == ENOTDIR ? "not a directory"
                              : g_strerror (errno));
      return;
    }
  if (!read_record_file (dir_fd, MV_CONFIG_RECORD, config_path, &config_data, &len,
                         &missing, &error) ||
      !(config = mv_store_parse_config (config_data, len, &out->config_changed, &error)))
    {
      out->bad_path = g_steal_pointer (&config_path);
      out->reason = g_strdup (error->message);
      return;
    }
  if (g_strcmp0 (config->id, name) != 0)
    {
      out->bad_path = g_strdup (dir);
      out->reason = g_strdup_printf ("the directory is named %s but config.json has id %s", name,
                                     config->id != NULL ? config->id : "(none)");
      return;
    }

  if (read_record_file (dir_fd, MV_STATUS_RECORD, status_path, &status_data, &len,
                        &missing, &error))
    status = mv_store_parse_status (status_data, len, &out->status_changed, &error);
  else if (missing)
    status = mv_status_new ();
  if (status == NULL)
    {
      out->bad_path = g_steal_pointer (&status_path);
      out->reason = g_strdup (error->message);
      return;
    }

  if (!list_machine_dir (&dir_fd, dir, &listing, &error))
    {
      out->bad_path = g_strdup (dir);
      out->reason = g_strdup (error->message);
      return;
    }
  if (listing.destroy_marker)
    config->desired = MV_DESIRED_DESTROYED;
  for (guint i = 0; listing.litter != NULL && i < listing.litter->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, g_ptr_array_index (listing.litter, i), NULL);

      if (g_unlink (path) == 0)
        g_debug ("Removed %s, left by an interrupted write", path);
    }
  g_clear_pointer (&listing.litter, g_ptr_array_unref);

  out->record = g_new0 (MvRecord, 1);
  out->record->config = g_steal_pointer (&config);
  out->record->status = g_steal_pointer (&status);
  out->record->other_files = listing.other_files;
}

/* Writes back a record read in an older format. Only a record that is
 * valid as a whole gets here; a failed write-back is not fatal: the record
 * is still read correctly and the upgrade is tried again at the next
 * start. */
static void
write_back (const char *dir, const Loaded *loaded)
{
  g_autoptr(GError) error = NULL;

  if (loaded->config_changed && !write_config (dir, loaded->record->config, &error))
    {
      g_warning ("Cannot write back the upgraded %s/%s: %s", dir, MV_CONFIG_RECORD,
                 error->message);
      g_clear_error (&error);
    }
  if (loaded->status_changed && !write_status (dir, loaded->record->status, &error))
    g_warning ("Cannot write back the upgraded %s/%s: %s", dir, MV_STATUS_RECORD,
               error->message);
}

/* The entries of machines/ shared out among loader threads. */
typedef struct {
  const char *machines_dir;
  int         machines_fd;
  GPtrArray  *names;
  Loaded     *loaded;         /* one per name */
  gint        next;           /* the next name to take, atomically */
} Loading;

static gpointer
loader_thread (gpointer data)
{
  Loading *loading = data;
  guint i;

  while ((i = (guint) g_atomic_int_add (&loading->next, 1)) < loading->names->len)
    {
      const char *entry = loading->names->pdata[i];
      g_autofree char *path = NULL;

      /* The store's own work in progress is finished by the caller. */
      if (entry[0] == '.')
        continue;
      path = g_strconcat (loading->machines_dir, "/", entry, NULL);
      read_record (loading->machines_fd, path, entry, &loading->loaded[i]);
    }
  return NULL;
}

/* Reads every entry of @names, on as many threads as there are CPUs (up
 * to eight) when there are enough to share: parsing and checking ten
 * thousand records is most of a start. */
static Loaded *
read_records (const char *machines_dir, int machines_fd, GPtrArray *names)
{
  Loading loading = { .machines_dir = machines_dir, .machines_fd = machines_fd, .names = names,
                      .loaded = g_new0 (Loaded, MAX (names->len, 1)) };
  guint threads = MIN (g_get_num_processors (), 8);
  g_autofree GThread **helpers = NULL;

  if (names->len < 64 || threads < 2)
    {
      loader_thread (&loading);
      return loading.loaded;
    }
  helpers = g_new0 (GThread *, threads - 1);
  for (guint t = 0; t + 1 < threads; t++)
    helpers[t] = g_thread_new ("microvmd-load", loader_thread, &loading);
  loader_thread (&loading);
  for (guint t = 0; t + 1 < threads; t++)
    g_thread_join (helpers[t]);
  return loading.loaded;
}

/* Finishes the store's own interrupted work: a staging directory is a
 * create that never happened, a removing one a removal that did. */
static void
clean_leftover (MvStore *store, const char *name, const char *path)
{
  g_autoptr(GError) error = NULL;
  GStatBuf buf;

  if (g_lstat (path, &buf) < 0 || !S_ISDIR (buf.st_mode))
    return;

  /* The runtime dir is found by the ID in the name; a name that holds no
   * valid ID (".removing-..") must not lead the removal anywhere else. */
  if (g_str_has_prefix (name, REMOVING_PREFIX) &&
      check_id (name + strlen (REMOVING_PREFIX), NULL))
    {
      g_autofree char *runtime =
        mv_store_machine_runtime_dir (store, name + strlen (REMOVING_PREFIX));

      if (!mv_remove_tree (runtime, &error))
        {
          g_warning ("Cannot finish an interrupted removal: %s", error->message);
          return;
        }
    }

  if (!finish_removal (store, path, &error))
    g_warning ("Cannot remove %s: %s", path, error->message);
  else
    g_debug ("Removed %s, left by an interrupted operation", path);
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static gint
compare_records (gconstpointer a, gconstpointer b)
{
  const MvRecord *ra = *(MvRecord *const *) a;
  const MvRecord *rb = *(MvRecord *const *) b;
  int cmp = g_strcmp0 (ra->config->spec->name, rb->config->spec->name);

  /* Names are unique on a host; the ID only settles a damaged one. */
  return cmp != 0 ? cmp : g_strcmp0 (ra->config->id, rb->config->id);
}

GPtrArray *
mv_store_load_machines (MvStore *store, GPtrArray *invalid)
{
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_record_free);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = NULL;
  g_autofree Loaded *loaded = NULL;
  g_auto(MvFd) machines_fd = -1;
  const char *name;

  g_return_val_if_fail (store != NULL, NULL);

  dir = g_dir_open (store->machines_dir, 0, &error);
  if (dir == NULL)
    {
      add_invalid (invalid, NULL, store->machines_dir, error->message);
      return g_steal_pointer (&records);
    }
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  machines_fd = open (store->machines_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (machines_fd < 0)
    {
      add_invalid (invalid, NULL, store->machines_dir, g_strerror (errno));
      return g_steal_pointer (&records);
    }
  /* Sorted so that warnings come out in the same order every time. */
  g_ptr_array_sort (names, compare_names);

  loaded = read_records (store->machines_dir, machines_fd, names);
  /* In the order of the names, on this thread: warnings, write-backs and
   * the store's own leftovers, as if read one by one. */
  for (guint i = 0; i < names->len; i++)
    {
      const char *entry = g_ptr_array_index (names, i);
      g_autofree char *path = g_build_filename (store->machines_dir, entry, NULL);
      Loaded *one = &loaded[i];

      if (entry[0] == '.')
        {
          if (g_str_has_prefix (entry, STAGING_PREFIX) ||
              g_str_has_prefix (entry, REMOVING_PREFIX))
            clean_leftover (store, entry, path);
          continue;
        }
      if (one->record == NULL)
        {
          add_invalid (invalid, entry, one->bad_path, one->reason);
          g_free (one->bad_path);
          g_free (one->reason);
          continue;
        }
      write_back (path, one);
      g_ptr_array_add (records, one->record);
    }

  g_ptr_array_sort (records, compare_records);
  return g_steal_pointer (&records);
}
