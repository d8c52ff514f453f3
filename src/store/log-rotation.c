/* Machines' logs bounded on disk by copy and truncate: the VMM keeps its
 * log open with O_APPEND, so the file cannot be renamed away from it. */
#include "log-rotation.h"
#include "names.h"
#include "util/fault.h"
#include "util/fd.h"
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One read and write of the copy. */
#define COPY_CHUNK (64 * 1024)

/* Copies @from_fd from its start to its end as it is when the copy gets
 * there (the VMM may still be writing), but at most @limit bytes. */
static gboolean
copy_to_end (int from_fd, int to_fd, guint64 limit)
{
  g_autofree char *buffer = g_malloc (COPY_CHUNK);
  guint64 copied = 0;

  while (copied < limit)
    {
      ssize_t n = pread (from_fd, buffer, MIN (COPY_CHUNK, limit - copied), (off_t) copied);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return FALSE;
      if (n == 0)
        break;
      if (!mv_fd_write_all (to_fd, buffer, (gsize) n))
        return FALSE;
      copied += (guint64) n;
    }
  return TRUE;
}

gboolean
mv_log_rotate (const char *path, const char *rotated, guint64 max_bytes, gboolean *done,
               GError **error)
{
  g_autofree char *partial = g_strconcat (rotated, ".tmp", NULL);
  struct stat st;
  int fd, out;

  *done = FALSE;
  fd = open (path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return errno == ENOENT ? TRUE : mv_set_errno_error (error, errno, "Could not open %s", path);
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || (guint64) st.st_size <= max_bytes)
    {
      close (fd);
      return TRUE;
    }
  unlink (partial);
  out = open (partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "Could not create %s", partial);
    }
  /* What grows while the copy runs is copied too, up to twice the cap,
   * so that the window in which a write is lost is the truncation's. */
  if (!copy_to_end (fd, out, MAX ((guint64) st.st_size, max_bytes * 2)))
    {
      int errsv = errno;

      close (fd);
      close (out);
      unlink (partial);
      return mv_set_errno_error (error, errsv, "Could not rotate %s", path);
    }
  mv_fault_point ("log-rotation", "copied");
  /* The copy takes the rotated name before the log is emptied: a crash
   * in between leaves its lines twice, never nowhere. */
  if (close (out) < 0 || rename (partial, rotated) < 0)
    {
      int errsv = errno;

      close (fd);
      unlink (partial);
      return mv_set_errno_error (error, errsv, "Could not rotate %s into %s", path, rotated);
    }
  mv_fault_point ("log-rotation", "renamed");
  if (ftruncate (fd, 0) < 0)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "Could not empty %s", path);
    }
  close (fd);
  *done = TRUE;
  return TRUE;
}

static void
rotate_one (const char *dir, const char *name, guint64 max_bytes)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *rotated = g_strconcat (path, MV_LOG_ROTATED_SUFFIX, NULL);
  g_autoptr (GError) error = NULL;
  gboolean done;

  if (!mv_log_rotate (path, rotated, max_bytes, &done, &error))
    g_warning ("Logs: %s", error->message);
  else if (done)
    g_debug ("Logs: rotated %s", path);
}

void
mv_logs_rotate_machines (const char *machines_dir, GPtrArray *ids, guint64 max_bytes)
{
  for (guint i = 0; i < ids->len; i++)
    {
      g_autofree char *machine_dir = g_build_filename (machines_dir, ids->pdata[i], NULL);

      rotate_one (machine_dir, MV_CONSOLE_LOG_NAME, max_bytes);
      rotate_one (machine_dir, MV_VMM_LOG_NAME, max_bytes);
      rotate_one (machine_dir, MV_WORKLOAD_LOG_NAME, max_bytes);
    }
}

/* What a round's thread and the rotator share: the rotator may be freed
 * while a round runs. */
typedef struct {
  char    *machines_dir;
  guint64  max_bytes;
  gboolean busy;
} RotatorState;

struct _MvLogRotator {
  RotatorState *state;
  guint         timer_id;
  MvLogsPick    pick;
  gpointer      pick_data;
  gint64        since;    /* when the last round picked; 0 before the first */
};

static void
rotator_state_clear (RotatorState *state)
{
  g_free (state->machines_dir);
}

static void
rotator_state_release (RotatorState *state)
{
  g_rc_box_release_full (state, (GDestroyNotify) rotator_state_clear);
}

/* One round: the machines it looks at, picked on the main thread. */
typedef struct {
  RotatorState *state;
  GPtrArray    *ids;
} Round;

static void
round_free (Round *round)
{
  rotator_state_release (round->state);
  g_ptr_array_unref (round->ids);
  g_free (round);
}

static void
round_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Round *round = task_data;

  mv_logs_rotate_machines (round->state->machines_dir, round->ids, round->state->max_bytes);
  g_task_return_boolean (task, TRUE);
}

static void
round_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Round *round = g_task_get_task_data (G_TASK (result));

  round->state->busy = FALSE;
}

static gboolean
on_check (gpointer user_data)
{
  MvLogRotator *rotator = user_data;
  g_autoptr (GTask) task = NULL;
  Round *round;
  gint64 now;

  /* A round still under way keeps the time it picked from: the next
   * one looks back to it. */
  if (rotator->state->busy)
    return G_SOURCE_CONTINUE;
  rotator->state->busy = TRUE;
  round = g_new0 (Round, 1);
  round->state = g_rc_box_acquire (rotator->state);
  round->ids = rotator->pick (rotator->since, &now, rotator->pick_data);
  rotator->since = now;
  task = g_task_new (NULL, NULL, round_done, NULL);
  g_task_set_task_data (task, round, (GDestroyNotify) round_free);
  g_task_run_in_thread (task, round_thread);
  return G_SOURCE_CONTINUE;
}

MvLogRotator *
mv_log_rotator_new (const char *machines_dir, guint64 max_bytes, guint check_seconds,
                    MvLogsPick pick, gpointer pick_data)
{
  MvLogRotator *rotator = g_new0 (MvLogRotator, 1);

  rotator->state = g_rc_box_new0 (RotatorState);
  rotator->state->machines_dir = g_strdup (machines_dir);
  rotator->state->max_bytes = max_bytes;
  rotator->pick = pick;
  rotator->pick_data = pick_data;
  rotator->timer_id = g_timeout_add_seconds (check_seconds, on_check, rotator);
  return rotator;
}

void
mv_log_rotator_free (MvLogRotator *rotator)
{
  if (!rotator)
    return;
  g_clear_handle_id (&rotator->timer_id, g_source_remove);
  rotator_state_release (rotator->state);
  g_free (rotator);
}
