/* Watching VMMs end by themselves: the pidfd says when, the VMM's event
 * channel (where it has one) or its parent's record of the wait status
 * says why. */
#include "runtime-private.h"
#include "core/json-util.h"

#include <glib-unix.h>
#include <string.h>
#include <sys/wait.h>

struct _MvRuntimeWatches {
  MvStarter           *starter;
  GHashTable          *table;           /* id -> Watch* */
  guint                next_id;
  MvRuntimeExitFilter  filter;
  gpointer             filter_data;
};

typedef struct {
  MvRuntimeWatches  *watches;
  guint              id;
  char              *machine_id;
  MvProcess         *vmm;
  MvVmEvents        *events;
  MvVmEnd            end;
  GSource           *exit_source;
  GSource           *events_source;
  GSource           *gone_source;
  char              *socket_path;   /* as recorded, even once the VMM is gone */
  guint              exit_poll;     /* waiting for the exit status */
  guint              exit_polls;
  MvRuntimeExitFunc  func;
  gpointer           user_data;
} Watch;

static gboolean on_vmm_exit (gpointer user_data);

static gboolean
on_vmm_exit_poll (gpointer user_data)
{
  Watch *w = user_data;

  w->exit_poll = 0;
  on_vmm_exit (w);
  return G_SOURCE_REMOVE;
}

static void
drop_source (GSource **source)
{
  if (*source)
    g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

static void
watch_free (Watch *w)
{
  g_clear_handle_id (&w->exit_poll, g_source_remove);
  drop_source (&w->exit_source);
  drop_source (&w->events_source);
  drop_source (&w->gone_source);
  mv_vm_events_free (w->events);
  mv_process_free (w->vmm);
  g_free (w->socket_path);
  g_free (w->machine_id);
  g_free (w);
}

/* Tells the watcher, once, and forgets the watch. */
static void
watch_report (Watch *w)
{
  gboolean has_exit_code = TRUE;
  int exit_code = 0, status = 0;
  g_autofree char *reason = NULL;

  switch (w->end)
    {
    case MV_VM_END_GUEST_POWEROFF:
      reason = g_strdup ("the guest powered off");
      break;
    case MV_VM_END_GUEST_RESET:
      exit_code = 1;
      reason = g_strdup ("the guest rebooted or panicked, which ends its VMM");
      break;
    case MV_VM_END_HOST_REQUEST:
      reason = g_strdup ("the VMM was told to quit");
      break;
    case MV_VM_END_HOST_SIGNAL:
      has_exit_code = FALSE;
      reason = g_strdup ("the VMM was ended by a signal");
      break;
    case MV_VM_END_UNKNOWN:
    default:
      /* The VMM said nothing; its parent wrote down how it ended. A VMM
       * whose guest powers off exits with status 0. */
      if (!w->socket_path || !mv_vmm_read_exit (w->socket_path, &status))
        {
          has_exit_code = FALSE;
          reason = g_strdup ("the VMM process ended unexpectedly");
        }
      else if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        reason = g_strdup ("the guest ended itself: its VMM exited with status 0");
      else if (WIFEXITED (status))
        {
          exit_code = WEXITSTATUS (status);
          reason = g_strdup_printf ("the VMM exited with status %d", exit_code);
        }
      else
        {
          has_exit_code = FALSE;
          reason = g_strdup_printf ("the VMM was killed by signal %d (%s)", WTERMSIG (status),
                                    g_strsignal (WTERMSIG (status)));
        }
      break;
    }
  if (w->watches->filter)
    w->watches->filter (w->machine_id, &has_exit_code, &exit_code, &reason,
                        w->watches->filter_data);
  g_hash_table_steal (w->watches->table, GUINT_TO_POINTER (w->id));
  w->func (w->machine_id, has_exit_code, exit_code, reason, w->user_data);
  watch_free (w);
}

/* How long the VMM's parent may take to write down how it ended. */
#define EXIT_STATUS_WAIT_MS  1000
#define EXIT_STATUS_POLL_MS  20

static gboolean
on_vmm_exit (gpointer user_data)
{
  Watch *w = user_data;
  int status;

  /* The VMM said why before it went; what it said may still be unread. */
  if (w->events)
    w->events->read (w->events, &w->end);
  if (w->end == MV_VM_END_UNKNOWN && w->socket_path &&
      !mv_vmm_read_exit (w->socket_path, &status) &&
      w->exit_polls++ < EXIT_STATUS_WAIT_MS / EXIT_STATUS_POLL_MS)
    {
      /* The pidfd fires as the VMM ends, before its parent reaps it. */
      if (!w->exit_poll)
        w->exit_poll = g_timeout_add (EXIT_STATUS_POLL_MS, on_vmm_exit_poll, w);
      return G_SOURCE_REMOVE;
    }
  watch_report (w);
  return G_SOURCE_REMOVE;
}

static gboolean
on_vmm_event (int fd, GIOCondition condition, gpointer user_data)
{
  Watch *w = user_data;

  if (w->events->read (w->events, &w->end))
    return G_SOURCE_CONTINUE;
  g_clear_pointer (&w->events_source, g_source_unref);
  return G_SOURCE_REMOVE;
}

MvRuntimeWatches *
mv_runtime_watches_new (MvStarter *starter)
{
  MvRuntimeWatches *watches = g_new0 (MvRuntimeWatches, 1);

  watches->starter = starter;
  watches->table = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) watch_free);
  return watches;
}

void
mv_runtime_watches_free (MvRuntimeWatches *watches)
{
  if (!watches)
    return;
  g_hash_table_unref (watches->table);
  g_free (watches);
}

guint
mv_runtime_watches_add (MvRuntimeWatches *watches, const char *machine_id, JsonObject *vmm,
                        MvRuntimeExitFunc func, gpointer user_data)
{
  MvStarter *starter = watches->starter;
  Watch *w = g_new0 (Watch, 1);
  g_autoptr (GError) local = NULL;

  w->watches = watches;
  w->id = ++watches->next_id;
  w->machine_id = g_strdup (machine_id);
  w->func = func;
  w->user_data = user_data;
  w->end = MV_VM_END_UNKNOWN;
  w->vmm = mv_process_attach_recorded (vmm);
  w->socket_path = g_strdup (mv_json_get_string (vmm, "socket"));
  g_hash_table_insert (watches->table, GUINT_TO_POINTER (w->id), w);

  if (!w->vmm)
    {
      /* Gone already: say so from the main loop, as for any other end. */
      w->gone_source = g_idle_source_new ();
      g_source_set_callback (w->gone_source, on_vmm_exit, w, NULL);
      g_source_attach (w->gone_source, NULL);
      return w->id;
    }

  w->exit_source = mv_process_exit_source_new (w->vmm);
  g_source_set_callback (w->exit_source, on_vmm_exit, w, NULL);
  g_source_attach (w->exit_source, NULL);

  if (starter->open_events)
    w->events = starter->open_events (starter, w->vmm->socket_path, &local);
  if (w->events)
    {
      w->events_source = g_unix_fd_source_new (w->events->fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
      g_source_set_callback (w->events_source, G_SOURCE_FUNC (on_vmm_event), w, NULL);
      g_source_attach (w->events_source, NULL);
    }
  else if (local)
    g_debug ("No events from VMM %d: %s", w->vmm->pid, local->message);
  return w->id;
}

void
mv_runtime_watches_remove (MvRuntimeWatches *watches, guint watch_id)
{
  Watch *w = g_hash_table_lookup (watches->table, GUINT_TO_POINTER (watch_id));

  if (!w)
    return;
  g_hash_table_steal (watches->table, GUINT_TO_POINTER (watch_id));
  watch_free (w);
}

void
mv_runtime_watches_set_filter (MvRuntimeWatches *watches, MvRuntimeExitFilter filter,
                               gpointer data)
{
  watches->filter = filter;
  watches->filter_data = data;
}
