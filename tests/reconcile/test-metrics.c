/* The daily metrics sampler on the injected clock: every sample interval
 * each machine with a VMM is sampled on the main thread and handed to the
 * writer in a worker thread, one round at a time. */
#include "fixture.h"
#include "core/metrics.h"
#include "store/metrics.h"

#include <glib/gstdio.h>
#include <string.h>

#include "util/files.h"

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

/* The store's writer, with each machine's directory under @data. */
static gboolean
store_write (const char *machine_dir, const MvMetricsSample *sample, guint sample_seconds,
             gpointer data, GError **error)
{
  g_autofree char *base = g_path_get_basename (machine_dir);
  g_autofree char *dir = g_build_filename (data, base, NULL);

  return mv_metrics_append (dir, sample, sample_seconds, error);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The metrics directory's entries, sorted, joined with spaces. */
static char *
listing (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

/* The day files of today and the @n - 1 days before it, oldest first. */
static char *
last_days (gint64 now, guint n, const char *also)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);

  for (guint i = n; i-- > 0;)
    g_ptr_array_add (names, mv_metrics_file_name (now - (gint64) i * 86400 * G_USEC_PER_SEC));
  if (also)
    g_ptr_array_add (names, g_strdup (also));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

/* Through the store's writer on the injected clock, an hour a sample for
 * ten days: a day's file goes once it is seven days old, the week's stay,
 * and what is not a day's file is left alone. */
static void
test_prunes_after_seven_days (Fixture *f, gconstpointer data)
{
  g_autofree char *root = g_dir_make_tmp ("test-metrics-XXXXXX", NULL);
  g_autofree char *machine_dir = g_build_filename (root, "a", NULL);
  g_autofree char *metrics_dir = g_build_filename (machine_dir, MV_METRICS_DIR, NULL);
  g_autofree char *stray = g_build_filename (metrics_dir, "notes.txt", NULL);
  MvMetricsSampler *sampler;
  gint64 first;

  g_assert_nonnull (root);
  fixture_running (f, "a");
  g_assert_cmpint (g_mkdir_with_parents (metrics_dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (stray, "kept", -1, NULL));
  sampler = mv_metrics_sampler_new (f->rec, MV_METRICS_SAMPLE_MAX_S, store_write, root);

  tick (f, sampler, MV_METRICS_SAMPLE_MAX_S);
  first = fake_clock_real (f->clock);
  for (guint day = 1; day <= 10; day++)
    {
      g_autofree char *have = NULL, *want = NULL;
      gint64 now;

      for (guint hour = 0; hour < 24; hour++)
        tick (f, sampler, MV_METRICS_SAMPLE_MAX_S);
      now = fake_clock_real (f->clock);
      g_assert_cmpint (now - first, ==, (gint64) day * 86400 * G_USEC_PER_SEC);
      have = listing (metrics_dir);
      /* Day 0 and each day since have a file, seven at most. */
      want = last_days (now, MIN (day + 1, MV_METRICS_KEEP_DAYS), "notes.txt");
      g_assert_cmpstr (have, ==, want);
    }
  /* What the week holds is read back: the oldest kept day is whole. */
  {
    gint64 now = fake_clock_real (f->clock);
    g_autoptr (GError) error = NULL;
    g_autoptr (GArray) week = mv_metrics_read (machine_dir, 0, now, 100000, &error);

    g_assert_no_error (error);
    g_assert_nonnull (week);
    g_assert_cmpuint (week->len, >=, 6 * 24);
    g_assert_cmpuint (week->len, <=, 7 * 24);
    g_assert_cmpint (g_array_index (week, MvMetricsSample, week->len - 1).time, ==, now);
    g_assert_cmpint (g_array_index (week, MvMetricsSample, 0).time, >,
                     now - (gint64) MV_METRICS_KEEP_DAYS * 86400 * G_USEC_PER_SEC);
  }
  mv_metrics_sampler_free (sampler);
  g_assert_true (mv_remove_tree (root, NULL));
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/metrics/samples-running-machines", test_samples_running_machines);
  FIXTURE_TEST ("/metrics/slow-round-skips-next", test_slow_round_skips_next);
  FIXTURE_TEST ("/metrics/prunes-after-seven-days", test_prunes_after_seven_days);
  return g_test_run ();
}
