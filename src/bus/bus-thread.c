/* Work of a bus call done on a worker thread, with what the call holds
 * let go of on the main thread. A GTask is finalized by whichever thread
 * drops it last, which may be the worker; its task data often holds the
 * call's sd_bus_message, and sd-bus counts references to its messages and
 * their bus without atomics: only the main thread may drop one. */
#include "bus-util.h"

#include <gio/gio.h>

typedef struct {
  GAsyncReadyCallback done;
  gpointer            data;
  GDestroyNotify      free;
} ThreadCall;

static void
on_thread_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ThreadCall *call = user_data;

  call->done (source, result, NULL);
  if (call->free)
    call->free (call->data);
  g_free (call);
}

void
mv_bus_run_in_thread (GTaskThreadFunc func, gpointer data, GDestroyNotify free,
                      GAsyncReadyCallback done)
{
  ThreadCall *call = g_new (ThreadCall, 1);
  g_autoptr (GTask) task = NULL;

  *call = (ThreadCall) { .done = done, .data = data, .free = free };
  task = g_task_new (NULL, NULL, on_thread_done, call);
  /* Kept by the task without a destructor: on_thread_done frees it. */
  g_task_set_task_data (task, data, NULL);
  g_task_run_in_thread (task, func);
}
