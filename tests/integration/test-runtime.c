/* A runtime for tests: no guest, only a state file in the machine's
 * runtime directory that says what the "VMM" is doing. It survives a
 * daemon restart like a real VMM would, and a test can end the VMM by
 * writing "exited CODE" or "crashed" into that file.
 *
 * The kernel command line steers it: "test.fail-start" makes a start fail,
 * "test.fail-restore" a restore, "test.start-delay-ms=N" makes a start
 * take N ms. A guest is frozen by moving its state file into the saved
 * directory; the CPU time it has used is what "test-vmm.cpu" says (ns),
 * 0 when there is no such file. */
#include "test-runtime.h"
#include "core/errors.h"

#include <errno.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FILE "test-vmm.state"

typedef struct {
  char             *machine_id;
  char             *path;
  MvRuntimeExitFunc func;
  gpointer          user_data;
  guint             id;
  int               wd;         /* inotify's descriptor of the file's directory */
} Watch;

static GHashTable *watches;   /* watch id -> Watch* */
static guint next_watch_id = 1;

static char *
state_path (const MvRuntimeRequest *req)
{
  return g_build_filename (req->runtime_dir, STATE_FILE, NULL);
}

/* Replaced whole (a reader never sees half a state) but not synced: the
 * state lives as long as a VMM would, and a simulated VMM's fsyncs would
 * be counted as the daemon's work wherever the daemon is timed. */
static gboolean
write_state (const char *path, const char *state, GError **error)
{
  g_autofree char *temp = g_strconcat (path, ".new", NULL);

  if (!g_file_set_contents_full (temp, state, -1, G_FILE_SET_CONTENTS_NONE, 0600, error))
    return FALSE;
  if (g_rename (temp, path) < 0)
    {
      int saved = errno;

      g_unlink (temp);
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved), "Cannot rename %s: %s", temp,
                   g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

static char *
read_state (const char *path)
{
  char *contents = NULL;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return NULL;
  return g_strstrip (contents);
}

static guint
arg_value (const MvSpec *spec, const char *key)
{
  const char *args = spec->kernel_args ? spec->kernel_args : "";
  g_autofree char *needle = g_strconcat (key, "=", NULL);
  const char *p = strstr (args, needle);

  return p ? (guint) strtoul (p + strlen (needle), NULL, 10) : 0;
}

static char *
test_version (MvRuntime *rt, GError **error)
{
  return g_strdup ("1.0.0");
}

static JsonObject *
test_start (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  g_autofree char *path = state_path (req);
  /* A template boots for as long as its machine, and as long again as
   * test.template-delay-ms says. */
  guint delay = arg_value (req->spec, "test.start-delay-ms") +
                (req->build_template ? arg_value (req->spec, "test.template-delay-ms") : 0);
  JsonObject *vmm;

  /* Like a guest slow to become ready: the wait gives up once cancelled. */
  for (gint64 end = g_get_monotonic_time () + delay * G_TIME_SPAN_MILLISECOND;
       g_get_monotonic_time () < end;)
    {
      if (g_cancellable_is_cancelled (req->cancellable))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE,
                       "Given up waiting for the guest: its start was cancelled");
          return NULL;
        }
      g_usleep (10 * G_TIME_SPAN_MILLISECOND);
    }
  if (req->spec->kernel_args && strstr (req->spec->kernel_args, "test.fail-start"))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "The guest did not boot\nThe console's last lines:\nKernel panic - not syncing");
      return NULL;
    }
  if (req->build_template && strstr (req->spec->kernel_args ? req->spec->kernel_args : "",
                                      "test.fail-template"))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The template did not boot");
      return NULL;
    }
  /* A template runs as "template" until it is frozen. */
  if (!write_state (path, req->build_template ? "template" : "running", error))
    return NULL;
  vmm = json_object_new ();
  json_object_set_string_member (vmm, "type", "test");
  json_object_set_string_member (vmm, "state_file", path);
  return vmm;
}

/* What a template stands for: the spec's shape and its NIC's MTU, as
 * the real runtimes' inputs are. */
static char *
test_warm_inputs (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  const MvSpec *spec = req->spec;

  return g_strdup_printf ("hypervisor=test 1.0.0\nkernel=%s\ncmdline=%s\nvcpus=%u\n"
                          "memory=%" G_GUINT64_FORMAT "\nnic=%d mtu=%u\n",
                          spec->kernel ? spec->kernel : "",
                          spec->kernel_args ? spec->kernel_args : "", mv_spec_vcpus (spec),
                          spec->memory_bytes, req->network != NULL,
                          req->network ? req->network->mtu : 0);
}

static gboolean
test_stop (MvRuntime *rt, const MvRuntimeRequest *req, gboolean force, GError **error)
{
  g_autofree char *path = state_path (req);

  if (g_unlink (path) < 0 && errno != ENOENT)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not stop: %s", g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

static gboolean
set_if_running (const MvRuntimeRequest *req, const char *state, GError **error)
{
  g_autofree char *path = state_path (req);
  g_autofree char *current = read_state (path);

  if (!current || (!g_str_equal (current, "running") && !g_str_equal (current, "paused")))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The VMM is not running");
      return FALSE;
    }
  return write_state (path, state, error);
}

static gboolean
test_pause (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  return set_if_running (req, "paused", error);
}

static gboolean
test_resume (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  return set_if_running (req, "running", error);
}

static MvVmmState
test_probe (MvRuntime *rt, const MvRuntimeRequest *req)
{
  g_autofree char *path = state_path (req);
  g_autofree char *state = read_state (path);

  if (g_strcmp0 (state, "running") == 0)
    return MV_VMM_RUNNING;
  if (g_strcmp0 (state, "paused") == 0)
    return MV_VMM_PAUSED;
  return MV_VMM_GONE;
}

static gboolean
test_destroy (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  g_autofree char *path = state_path (req);

  g_unlink (path);
  if (g_rmdir (req->runtime_dir) < 0 && errno != ENOENT)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not remove %s: %s",
                   req->runtime_dir, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

#define SAVED_FILE "guest.frozen"

static gboolean
test_save (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  g_autofree char *path = state_path (req);
  g_autofree char *state = read_state (path);
  g_autofree char *saved = g_build_filename (state_dir, SAVED_FILE, NULL);

  if (!state || (!g_str_equal (state, "running") && !g_str_equal (state, "paused") &&
                 !g_str_equal (state, "template")))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The VMM is not running");
      return FALSE;
    }
  if (!write_state (saved, state, error))
    return FALSE;
  g_unlink (path);
  return TRUE;
}

/* The guest's state goes into @state_dir as save() writes it; the VMM
 * stays, paused. "test.snapshot-busy" in the kernel arguments makes it a
 * guest that cannot be snapshotted yet, "test.fail-snapshot" one whose
 * snapshot fails. */
static gboolean
test_snapshot (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  g_autofree char *path = state_path (req);
  g_autofree char *state = read_state (path);
  g_autofree char *saved = g_build_filename (state_dir, SAVED_FILE, NULL);
  const char *args = req->spec->kernel_args ? req->spec->kernel_args : "";

  if (!state || (!g_str_equal (state, "running") && !g_str_equal (state, "paused")))
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "The VMM is not running");
  if (strstr (args, "test.snapshot-busy"))
    return mv_error_set (error, MV_ERROR_UNAVAILABLE, "The guest's memory is still being "
                         "restored; try again in a moment");
  if (strstr (args, "test.fail-snapshot"))
    return mv_error_set (error, MV_ERROR_FAILED, "The VMM could not write the snapshot");
  return write_state (saved, state, error) && write_state (path, "paused", error);
}

static JsonObject *
test_restore (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  g_autofree char *saved = g_build_filename (state_dir, SAVED_FILE, NULL);
  g_autofree char *state = read_state (saved);
  g_autofree char *path = state_path (req);
  JsonObject *vmm;

  if (!state)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_NOT_FOUND, "No frozen guest in %s", state_dir);
      return NULL;
    }
  if (req->spec->kernel_args && strstr (req->spec->kernel_args, "test.fail-restore"))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The frozen guest did not wake");
      return NULL;
    }
  /* A template wakes only as one, told who it is; a machine's own guest
   * never does. */
  if (g_str_equal (state, "template") != req->from_template)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, req->from_template
                   ? "The frozen guest is no template" : "The frozen guest is a template");
      return NULL;
    }
  /* The guest runs on where it was, and is let run. */
  if (!write_state (path, "running", error))
    return NULL;
  vmm = json_object_new ();
  json_object_set_string_member (vmm, "type", "test");
  json_object_set_string_member (vmm, "state_file", path);
  json_object_set_boolean_member (vmm, "restored", TRUE);
  return vmm;
}

static gboolean
test_usage (MvRuntime *rt, const MvRuntimeRequest *req, MvRuntimeUsage *usage, GError **error)
{
  g_autofree char *path = g_build_filename (req->runtime_dir, "test-vmm.cpu", NULL);
  g_autofree char *value = read_state (path);

  *usage = (MvRuntimeUsage) { .cpu_ns = value ? g_ascii_strtoull (value, NULL, 10) : 0 };
  return TRUE;
}

/* Whether the watched VMM has ended, as its state file says now; if it
 * has, the watch is over and its owner told. */
static void
check_watch (guint id)
{
  Watch *w = g_hash_table_lookup (watches, GUINT_TO_POINTER (id));
  g_autofree char *state = NULL;
  g_autofree char *machine_id = NULL;
  MvRuntimeExitFunc func;
  gpointer data;
  int code = 0;
  gboolean has_code;

  if (!w)
    return;
  state = read_state (w->path);
  if (!state || g_str_equal (state, "running") || g_str_equal (state, "paused"))
    return;

  has_code = sscanf (state, "exited %d", &code) == 1;
  func = w->func;
  data = w->user_data;
  machine_id = g_strdup (w->machine_id);
  g_hash_table_remove (watches, GUINT_TO_POINTER (id));
  func (machine_id, has_code, code, has_code ? "the guest powered off" : "the VMM crashed", data);
}

static gboolean
check_watch_later (gpointer id)
{
  check_watch (GPOINTER_TO_UINT (id));
  return G_SOURCE_REMOVE;
}

/* The state files are watched with inotify, not polled: a host with
 * thousands of test VMMs costs nothing while they run. inotify gives one
 * descriptor per directory, which is one machine's: @by_wd finds the
 * watches on it (usually one) without looking through the others. */
static int inotify_fd = -1;
static GHashTable *by_wd;     /* wd -> GArray of watch ids */

static void
check_all_watches (void)
{
  g_autoptr (GList) ids = g_hash_table_get_keys (watches);

  for (GList *l = ids; l; l = l->next)
    check_watch (GPOINTER_TO_UINT (l->data));
}

static gboolean
on_inotify (gint fd, GIOCondition condition, gpointer user_data)
{
  char buf[16384] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  g_autoptr (GArray) due = g_array_new (FALSE, FALSE, sizeof (guint));
  ssize_t n = read (fd, buf, sizeof buf);

  for (ssize_t at = 0; n > 0 && at < n;)
    {
      const struct inotify_event *event = (const struct inotify_event *) (buf + at);
      GArray *ids;

      at += (ssize_t) (sizeof *event + event->len);
      /* Events were lost: every file is looked at again. */
      if (event->mask & IN_Q_OVERFLOW)
        {
          check_all_watches ();
          return G_SOURCE_CONTINUE;
        }
      ids = g_hash_table_lookup (by_wd, GINT_TO_POINTER (event->wd));
      if (ids && event->len > 0 && g_str_equal (event->name, STATE_FILE))
        g_array_append_vals (due, ids->data, ids->len);
    }
  /* Told after the loop: a told owner may watch or unwatch. */
  for (guint i = 0; i < due->len; i++)
    check_watch (g_array_index (due, guint, i));
  return G_SOURCE_CONTINUE;
}

static void
watch_free (Watch *w)
{
  GArray *ids = g_hash_table_lookup (by_wd, GINT_TO_POINTER (w->wd));

  for (guint i = 0; ids && i < ids->len; i++)
    if (g_array_index (ids, guint, i) == w->id)
      {
        g_array_remove_index_fast (ids, i);
        break;
      }
  /* The descriptor goes with the last watch on it. */
  if (ids && ids->len == 0)
    {
      g_hash_table_remove (by_wd, GINT_TO_POINTER (w->wd));
      inotify_rm_watch (inotify_fd, w->wd);
    }
  g_free (w->machine_id);
  g_free (w->path);
  g_free (w);
}

static guint
test_watch (MvRuntime *rt, const char *machine_id, JsonObject *vmm, MvRuntimeExitFunc func,
            gpointer user_data)
{
  Watch *w = g_new0 (Watch, 1);
  guint id = next_watch_id++;
  g_autofree char *dir = NULL;
  GArray *ids;

  if (!watches)
    {
      watches = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) watch_free);
      by_wd = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_array_unref);
      inotify_fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
      g_assert_cmpint (inotify_fd, >=, 0);
      g_unix_fd_add (inotify_fd, G_IO_IN, on_inotify, NULL);
    }
  w->id = id;
  w->machine_id = g_strdup (machine_id);
  w->path = g_strdup (json_object_get_string_member (vmm, "state_file"));
  w->func = func;
  w->user_data = user_data;
  dir = g_path_get_dirname (w->path);
  w->wd = inotify_add_watch (inotify_fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO);
  g_assert_cmpint (w->wd, >=, 0);
  ids = g_hash_table_lookup (by_wd, GINT_TO_POINTER (w->wd));
  if (!ids)
    {
      ids = g_array_new (FALSE, FALSE, sizeof (guint));
      g_hash_table_insert (by_wd, GINT_TO_POINTER (w->wd), ids);
    }
  g_array_append_val (ids, id);
  g_hash_table_insert (watches, GUINT_TO_POINTER (id), w);
  /* What the file said before the watch began is looked at from the main
   * loop, as an event would be. */
  g_idle_add_full (G_PRIORITY_DEFAULT, check_watch_later, GUINT_TO_POINTER (id), NULL);
  return id;
}

static void
test_unwatch (MvRuntime *rt, guint watch_id)
{
  if (watches)
    g_hash_table_remove (watches, GUINT_TO_POINTER (watch_id));
}

MvRuntime *
mv_test_runtime_new (void)
{
  MvRuntime *rt = g_new0 (MvRuntime, 1);

  rt->type = "test";
  rt->version = test_version;
  rt->start = test_start;
  rt->stop = test_stop;
  rt->pause = test_pause;
  rt->resume = test_resume;
  rt->probe = test_probe;
  rt->destroy = test_destroy;
  rt->watch = test_watch;
  rt->unwatch = test_unwatch;
  rt->save = test_save;
  rt->snapshot = test_snapshot;
  rt->restore = test_restore;
  rt->warm_inputs = test_warm_inputs;
  rt->usage = test_usage;
  return rt;
}
