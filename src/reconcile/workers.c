/* The reconciler's worker threads, and the one way back from them to the
 * main loop.
 *
 * A worker runs a GTaskThreadFunc on a GTask of its own making, as
 * g_task_run_in_thread() would. What the task returns, and whatever else
 * a worker hands over on the way (mv_reconciler_send), reaches the main
 * thread through one queue, in the order it was handed over.
 *
 * Why not GLib's way: a task returned in a thread wakes the main loop
 * with a source of its own, attached while the worker holds the main
 * context's lock, so the woken loop and the worker take turns on that
 * lock before either goes on. Here a worker takes only the queue's lock,
 * writes to the eventfd only when the loop has not been woken already,
 * and the loop runs everything queued by then in one dispatch: under
 * load, many results for one wake-up.
 *
 * Results come in bursts: the disk syncs many records in one commit, and
 * wakes their writers together. What a result begins on the disk (the
 * next record's write) is begun for every result of the burst first;
 * what only tells of it (announcements, events) is put off until the
 * burst has been handled (mv_reconciler_later), still in the same
 * dispatch. */
#include "reconciler-private.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* GLib's pool for GTasks has ten threads, and twenty clients' record
 * writes queued behind them would wait for each other's fsyncs. Here
 * every write that is due is under way at once. */
#define WORKERS_MAX 32

/* Hand-back ---------------------------------------------------------------------- */

typedef struct {
  GSourceFunc    func;     /* its return value is ignored */
  gpointer       data;
  GDestroyNotify free;
} Handed;

typedef struct {
  GSource  source;
  GMutex   lock;
  GQueue   handed;         /* Handed*, oldest first */
  gboolean woken;          /* the eventfd was written since the last dispatch */
  int      fd;
  /* The main thread's alone: */
  guint    dispatching;    /* how deep in hand_back_dispatch() */
  GQueue   later;          /* Handed*, put off until the handed are done */
} HandBack;

static void
run_handed (GQueue *queue)
{
  Handed *one;

  while ((one = g_queue_pop_head (queue)))
    {
      one->func (one->data);
      if (one->free)
        one->free (one->data);
      g_free (one);
    }
}

static gboolean
hand_back_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  HandBack *back = (HandBack *) source;
  GQueue handed = G_QUEUE_INIT;
  guint64 count;

  /* Read first: what is queued after it wakes the loop again. */
  while (read (back->fd, &count, sizeof count) < 0 && errno == EINTR)
    ;
  g_mutex_lock (&back->lock);
  handed = back->handed;
  g_queue_init (&back->handed);
  back->woken = FALSE;
  g_mutex_unlock (&back->lock);

  back->dispatching++;
  run_handed (&handed);
  /* What they put off, in the order they did; what that puts off joins. */
  run_handed (&back->later);
  back->dispatching--;
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs hand_back_funcs = {
  .dispatch = hand_back_dispatch,
};

/* The queue into the main context, made the first time a job is given
 * to the workers: that is where the reconciler runs. */
static HandBack *
hand_back (void)
{
  static HandBack *back;

  if (g_once_init_enter (&back))
    {
      g_autoptr (GMainContext) context = g_main_context_ref_thread_default ();
      HandBack *made = (HandBack *) g_source_new (&hand_back_funcs, sizeof (HandBack));

      g_mutex_init (&made->lock);
      g_queue_init (&made->handed);
      g_queue_init (&made->later);
      made->fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (made->fd < 0)
        g_error ("eventfd: %s", g_strerror (errno));
      g_source_add_unix_fd (&made->source, made->fd, G_IO_IN);
      g_source_set_name (&made->source, "microvmd workers' results");
      /* Not taken out of the poll while it dispatches (which would wake
       * the loop once more when it is put back): see mv_bus_source_attach. */
      g_source_set_can_recurse (&made->source, TRUE);
      g_source_attach (&made->source, context);
      g_once_init_leave (&back, made);
    }
  return back;
}

void
mv_reconciler_send (GSourceFunc func, gpointer data, GDestroyNotify free)
{
  HandBack *back = hand_back ();
  Handed *one = g_new (Handed, 1);
  gboolean wake;

  *one = (Handed) { .func = func, .data = data, .free = free };
  g_mutex_lock (&back->lock);
  g_queue_push_tail (&back->handed, one);
  wake = !back->woken;
  back->woken = TRUE;
  g_mutex_unlock (&back->lock);
  if (wake)
    {
      guint64 one_more = 1;

      while (write (back->fd, &one_more, sizeof one_more) < 0 && errno == EINTR)
        ;
    }
}

void
mv_reconciler_later (GSourceFunc func, gpointer data, GDestroyNotify free)
{
  HandBack *back = hand_back ();
  Handed *one = g_new (Handed, 1);

  *one = (Handed) { .func = func, .data = data, .free = free };
  g_queue_push_tail (&back->later, one);
  /* Outside a dispatch there is no burst to wait for. */
  if (back->dispatching == 0)
    run_handed (&back->later);
}

/* Jobs ----------------------------------------------------------------------------- */

typedef struct {
  GTaskThreadFunc     func;
  gpointer            data;       /* the task's data, freed with it */
  GDestroyNotify      free;
  GAsyncReadyCallback done;
  gpointer            done_data;
  GTask              *task;       /* made by the worker */
  gboolean            returned;
} Job;

/* Each worker's own context, where its tasks return: nobody else is woken
 * by it, and the worker runs what returned at once. */
static GPrivate worker_context = G_PRIVATE_INIT ((GDestroyNotify) g_main_context_unref);

static void
on_returned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Job *job = user_data;

  job->returned = TRUE;
}

static gboolean
job_done (gpointer data)
{
  Job *job = data;

  if (job->done)
    job->done (NULL, G_ASYNC_RESULT (job->task), job->done_data);
  return G_SOURCE_REMOVE;
}

static void
job_free (Job *job)
{
  g_object_unref (job->task);
  g_free (job);
}

static void
run_job (gpointer data, gpointer user_data)
{
  Job *job = data;
  GMainContext *context = g_private_get (&worker_context);

  if (context == NULL)
    {
      context = g_main_context_new ();
      g_private_set (&worker_context, context);
    }
  g_main_context_push_thread_default (context);
  job->task = g_task_new (NULL, NULL, on_returned, job);
  g_main_context_pop_thread_default (context);
  g_task_set_task_data (job->task, job->data, job->free);

  job->func (job->task, NULL, job->data, NULL);
  /* The task's return is queued on this thread's context; once it has
   * run, the task is the main thread's alone. */
  while (!job->returned)
    g_main_context_iteration (context, TRUE);
  mv_reconciler_send (job_done, job, (GDestroyNotify) job_free);
}

void
mv_reconciler_run_task (GTaskThreadFunc func, gpointer data, GDestroyNotify free,
                        GAsyncReadyCallback done, gpointer done_data)
{
  static GThreadPool *workers;
  Job *job = g_new0 (Job, 1);

  if (g_once_init_enter (&workers))
    g_once_init_leave (&workers, g_thread_pool_new (run_job, NULL, WORKERS_MAX, FALSE, NULL));
  hand_back ();
  *job = (Job) { .func = func, .data = data, .free = free, .done = done, .done_data = done_data };
  g_thread_pool_push (workers, job, NULL);
}

void
mv_reconciler_run_in_thread (GTaskThreadFunc func, GAsyncReadyCallback done, gpointer data,
                             GDestroyNotify free)
{
  mv_reconciler_run_task (func, data, free, done, NULL);
}

static void
on_background_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvReconciler *rec = user_data;

  rec->background--;
}

void
mv_reconciler_run_in_background (MvReconciler *rec, GTaskThreadFunc func, gpointer data,
                                 GDestroyNotify free)
{
  rec->background++;
  mv_reconciler_run_task (func, data, free, on_background_done, rec);
}
