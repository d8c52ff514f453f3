/* mv_bus_run_in_thread: a call's data is let go of on the main thread,
 * after its completion, however the worker and the main thread race. */
#include "bus/bus-util.h"

#define ROUNDS 50

typedef struct {
  GThread  *worker;      /* where the work ran */
  GThread  *freed_on;    /* where the data was let go of */
  gboolean  done_ran;    /* the completion ran before the data went */
  gboolean  done_saw_data;
  gboolean  freed;
} Record;

typedef struct {
  Record *record;
  int     answer;
} Work;

static void
work_free (Work *work)
{
  work->record->freed_on = g_thread_self ();
  work->record->freed = TRUE;
  g_free (work);
}

static void
work_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Work *work = task_data;

  work->record->worker = g_thread_self ();
  g_task_return_int (task, work->answer);
  /* The main thread completes the task meanwhile; the worker's reference
   * to it is then the last, and a destructor given to the task would run
   * here, on the worker. */
  g_usleep (20 * G_TIME_SPAN_MILLISECOND);
}

static void
on_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Work *work = g_task_get_task_data (G_TASK (result));

  work->record->done_ran = TRUE;
  work->record->done_saw_data = work->answer == 42 && !work->record->freed;
  g_assert_cmpint (g_task_propagate_int (G_TASK (result), NULL), ==, 42);
}

static void
test_freed_on_main (void)
{
  for (guint round = 0; round < ROUNDS; round++)
    {
      Record record = { 0 };
      Work *work = g_new0 (Work, 1);
      gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

      work->record = &record;
      work->answer = 42;
      mv_bus_run_in_thread (work_in_thread, work, (GDestroyNotify) work_free, on_done);
      while (!record.freed && g_get_monotonic_time () < deadline)
        g_main_context_iteration (NULL, FALSE);
      g_assert_true (record.freed);
      g_assert_true (record.done_ran);
      g_assert_true (record.done_saw_data);
      g_assert_true (record.worker != g_thread_self ());
      g_assert_true (record.freed_on == g_thread_self ());
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/bus/run-in-thread/freed-on-main", test_freed_on_main);
  return g_test_run ();
}
