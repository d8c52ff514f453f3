/* The daily metrics sampler on the injected clock: every sample interval
 * each machine with a VMM is sampled on the main thread and handed to the
 * writer in a worker thread, one round at a time. */
#include "fixture.h"

#define SECOND_NS  (G_GUINT64_CONSTANT (1000000000))

typedef struct {
  GMutex     lock;
  GCond      cond;
  gboolean   hold;        /* the writer waits while set */
  GPtrArray *written;     /* "DIR TIME CPU" */
  gboolean   off_main;    /* every write came from another thread */
} Writer;

static gboolean
record_write (const char *machine_dir, const MvMetricsSample *sample, guint sample_seconds,
              gpointer data, GError **error)
{
  Writer *w = data;

  g_mutex_lock (&w->lock);
  while (w->hold)
    g_cond_wait (&w->cond, &w->lock);
  if (g_main_context_is_owner (g_main_context_default ()))
    w->off_main = FALSE;
  g_ptr_array_add (w->written, g_strdup_printf ("%s %" G_GINT64_FORMAT " %" G_GUINT64_FORMAT
                                                " %u", machine_dir, sample->time,
                                                sample->cpu_ns, sample_seconds));
  g_mutex_unlock (&w->lock);
  return TRUE;
}

static void
writer_init (Writer *w)
{
  *w = (Writer) { 0 };
  g_mutex_init (&w->lock);
  g_cond_init (&w->cond);
  w->written = g_ptr_array_new_with_free_func (g_free);
  w->off_main = TRUE;
}

static void
writer_clear (Writer *w)
{
  g_ptr_array_unref (w->written);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->cond);
}

static guint
n_written (Writer *w)
{
  guint n;

  g_mutex_lock (&w->lock);
  n = w->written->len;
  g_mutex_unlock (&w->lock);
  return n;
}

static void
tick (Fixture *f, MvMetricsSampler *sampler, guint seconds)
{
  fake_clock_advance (f->clock, seconds * 1000);
  WAIT_UNTIL (f, !mv_metrics_sampler_busy (sampler));
}

static void
test_samples_running_machines (Fixture *f, gconstpointer data)
{
  MvMachine *a = fixture_running (f, "a");
  MvMachine *b = fixture_running (f, "b");
  MvMachine *idle = fixture_define (f, fixture_spec ("c"));
  MvMetricsSampler *sampler;
  Writer w;
  g_autofree char *expect = NULL;

  writer_init (&w);
  g_assert_null (idle->status->vmm);
  sampler = mv_metrics_sampler_new (f->rec, 60, record_write, &w);
  fake_runtime_add_cpu (f->runtime, a->id, 3 * SECOND_NS);
  fake_runtime_add_cpu (f->runtime, b->id, 5 * SECOND_NS);

  /* Nothing before the interval is up. */
  fake_clock_advance (f->clock, 59 * 1000);
  g_assert_false (mv_metrics_sampler_busy (sampler));
  g_assert_cmpuint (n_written (&w), ==, 0);

  tick (f, sampler, 1);
  g_assert_cmpuint (n_written (&w), ==, 2);
  /* Name order; the time is the injected clock's; the stopped one is left out. */
  expect = g_strdup_printf ("/var/lib/fake/machines/a %" G_GINT64_FORMAT " %" G_GUINT64_FORMAT
                            " 60", fake_clock_real (f->clock), 3 * SECOND_NS);
  g_assert_cmpstr (w.written->pdata[0], ==, expect);
  g_assert_true (g_str_has_prefix (w.written->pdata[1], "/var/lib/fake/machines/b "));
  g_assert_true (w.off_main);

  fake_runtime_add_cpu (f->runtime, a->id, SECOND_NS);
  tick (f, sampler, 60);
  g_assert_cmpuint (n_written (&w), ==, 4);
  g_clear_pointer (&expect, g_free);
  expect = g_strdup_printf ("/var/lib/fake/machines/a %" G_GINT64_FORMAT " %" G_GUINT64_FORMAT
                            " 60", fake_clock_real (f->clock), 4 * SECOND_NS);
  g_assert_cmpstr (w.written->pdata[2], ==, expect);

  /* A stopped machine is no longer sampled. */
  {
    g_autoptr (GError) error = fixture_request (f, b, MV_REQUEST_STOP);
    g_assert_no_error (error);
  }
  tick (f, sampler, 60);
  g_assert_cmpuint (n_written (&w), ==, 5);

  /* Once freed it samples no more. */
  mv_metrics_sampler_free (sampler);
  fake_clock_advance (f->clock, 600 * 1000);
  g_assert_cmpuint (n_written (&w), ==, 5);
  writer_clear (&w);
}

static void
test_slow_round_skips_next (Fixture *f, gconstpointer data)
{
  fixture_running (f, "a");
  MvMetricsSampler *sampler;
  Writer w;

  writer_init (&w);
  sampler = mv_metrics_sampler_new (f->rec, 1, record_write, &w);
  w.hold = TRUE;
  fake_clock_advance (f->clock, 1000);
  g_assert_true (mv_metrics_sampler_busy (sampler));
  /* Three more intervals pass while the first round is stuck on the disk. */
  fake_clock_advance (f->clock, 3000);

  g_mutex_lock (&w.lock);
  w.hold = FALSE;
  g_cond_broadcast (&w.cond);
  g_mutex_unlock (&w.lock);
  WAIT_UNTIL (f, !mv_metrics_sampler_busy (sampler));
  g_assert_cmpuint (n_written (&w), ==, 1);

  tick (f, sampler, 1);
  g_assert_cmpuint (n_written (&w), ==, 2);

  /* Freed while a round writes: the round finishes on its own. */
  w.hold = TRUE;
  fake_clock_advance (f->clock, 1000);
  g_assert_true (mv_metrics_sampler_busy (sampler));
  mv_metrics_sampler_free (sampler);
  g_mutex_lock (&w.lock);
  w.hold = FALSE;
  g_cond_broadcast (&w.cond);
  g_mutex_unlock (&w.lock);
  WAIT_UNTIL (f, n_written (&w) == 3);
  /* Its completion reaches the main loop before the writer goes. */
  for (guint i = 0; i < 100; i++)
    g_main_context_iteration (NULL, FALSE);
  writer_clear (&w);
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/metrics/samples-running-machines", test_samples_running_machines);
  FIXTURE_TEST ("/metrics/slow-round-skips-next", test_slow_round_skips_next);
  return g_test_run ();
}
