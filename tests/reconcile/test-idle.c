/* Idle standby (seed 002, Sleepy VMs): a running machine with
 * standby_after_seconds goes on standby once its VMM has used less than
 * idle_cpu_percent of one CPU for that long, judged every
 * idle_sample_seconds from the runtime's usage on the injected monotonic
 * clock. The fixture samples every second, with a 10 % threshold. */
#include "fixture.h"

#define SECOND_NS  (G_GUINT64_CONSTANT (1000000000))

static MvMachine *
sleepy (Fixture *f, const char *id, guint32 standby_after)
{
  MvSpec *spec = fixture_spec (id);
  MvMachine *m;
  g_autoptr (GError) error = NULL;

  spec->standby_after_seconds = standby_after;
  m = fixture_define (f, spec);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  return m;
}

/* One idle sample later, with each machine's VMM having used @used_ns
 * more CPU time. */
static void
one_second (Fixture *f, MvMachine **machines, const guint64 *used_ns, guint n)
{
  for (guint i = 0; i < n && used_ns; i++)
    fake_runtime_add_cpu (f->runtime, machines[i]->id, used_ns[i]);
  fake_clock_advance (f->clock, 1000);
  fixture_settle (f);
}

static void
test_idle_goes_on_standby (Fixture *f, gconstpointer data)
{
  MvMachine *m = sleepy (f, "m1", 3);
  MvMachine *machines[] = { m };

  mv_reconciler_run (f->rec);
  /* The first sample is the baseline; then three idle seconds. */
  for (guint i = 0; i < 3; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.save m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.usage m1"), ==, 3);
  one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_true (m->config->standby);
  g_assert_cmpint (m->config->desired, ==, MV_DESIRED_RUNNING);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.save m1"), ==, 1);
  g_assert_null (m->status->state_error);

  /* On standby it is not sampled. */
  one_second (f, machines, NULL, 1);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.usage m1"), ==, 4);
}

static void
test_busy_stays_awake (Fixture *f, gconstpointer data)
{
  MvMachine *m = sleepy (f, "m1", 3);
  MvMachine *machines[] = { m };
  const guint64 half_a_cpu[] = { SECOND_NS / 2 };

  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 10; i++)
    one_second (f, machines, half_a_cpu, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);

  /* Once it stops working, it sleeps after the same idle time. */
  for (guint i = 0; i < 2; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
}

/* A machine on a network that is being talked to is not idle, however
 * little CPU it uses; the network's chatter alone does not keep it up. */
static void
test_traffic_keeps_it_awake (Fixture *f, gconstpointer data)
{
  MvSpec *spec = fixture_spec ("m1");
  MvMachine *m, *machines[1];
  g_autoptr (GError) error = NULL;

  spec->standby_after_seconds = 3;
  spec->network_name = g_strdup ("lan");
  m = machines[0] = fixture_define (f, spec);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 8; i++)
    {
      fake_network_add_received (f->network, "m1", 64 * 1024);
      one_second (f, machines, NULL, 1);
    }
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);

  /* A trickle: idle again, and asleep after the same time. */
  for (guint i = 0; i < 2; i++)
    {
      fake_network_add_received (f->network, "m1", 300);
      one_second (f, machines, NULL, 1);
    }
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  fake_network_add_received (f->network, "m1", 300);
  one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
}

static void
test_threshold (Fixture *f, gconstpointer data)
{
  MvMachine *machines[] = { sleepy (f, "m1", 2), sleepy (f, "m2", 2) };
  /* Just below and just above 10 % of one CPU. */
  const guint64 used[] = { SECOND_NS * 9 / 100, SECOND_NS * 11 / 100 };

  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 3; i++)
    one_second (f, machines, used, 2);
  g_assert_cmpint (machines[0]->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpint (machines[1]->status->state, ==, MV_STATE_RUNNING);
}

static void
test_never_without_standby_after (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  MvMachine *machines[] = { m };

  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 20; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.usage m1"), ==, 0);
}

static void
test_woken_guest_idles_afresh (Fixture *f, gconstpointer data)
{
  MvMachine *m = sleepy (f, "m1", 2);
  MvMachine *machines[] = { m };
  g_autoptr (GError) error = NULL;
  gboolean waking = FALSE;

  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 3; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);

  g_assert_true (mv_reconciler_traffic (f->rec, m, 1, &waking, &error));
  g_assert_true (waking);
  error = fixture_kick (f, m);
  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  /* What it used before it slept does not count: a new baseline first. */
  for (guint i = 0; i < 2; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
}

static void
test_usage_failure_restarts_the_count (Fixture *f, gconstpointer data)
{
  MvMachine *m = sleepy (f, "m1", 2);
  MvMachine *machines[] = { m };

  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 2; i++)
    one_second (f, machines, NULL, 1);
  fake_runtime_fail_next (f->runtime, FAKE_RUNTIME_USAGE, "/proc is not readable", FALSE);
  one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  for (guint i = 0; i < 2; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
}

/* Under emulation an idle guest's VMM spends more than the threshold; its
 * agent's view of the guest's CPUs decides while it comes, and the VMM's
 * CPU time once it stops coming. */
static void
test_guest_view_decides (Fixture *f, gconstpointer data)
{
  MvMachine *idle_guest = sleepy (f, "m1", 3);
  MvMachine *busy_guest = sleepy (f, "m2", 3);
  MvMachine *machines[] = { idle_guest, busy_guest };
  /* Half a CPU each, every second, as the VMMs see it. */
  const guint64 vmm_ns[] = { SECOND_NS / 2, SECOND_NS / 2 };
  guint64 ticks = 1000;

  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 5; i++)
    {
      /* Two CPUs, 100 ticks a second each: m1 busy 1 %, m2 busy 40 %. */
      ticks += 200;
      fake_runtime_guest_usage (f->runtime, "m1", ticks / 100, ticks, 2);
      fake_runtime_guest_usage (f->runtime, "m2", ticks * 4 / 10, ticks, 2);
      one_second (f, machines, vmm_ns, 2);
    }
  g_assert_cmpint (idle_guest->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpint (busy_guest->status->state, ==, MV_STATE_RUNNING);
}

/* The guest's view, once its agent has gone quiet, no longer counts: the
 * VMM's CPU time judges again, and an idle VMM goes on standby. */
static void
test_stale_guest_view_falls_back (Fixture *f, gconstpointer data)
{
  MvMachine *m = sleepy (f, "m1", 3);
  MvMachine *machines[] = { m };

  mv_reconciler_run (f->rec);
  one_second (f, machines, NULL, 1);
  fake_runtime_guest_usage (f->runtime, "m1", 10, 1000, 1);
  for (guint i = 0; i < 9 && m->status->state == MV_STATE_RUNNING; i++)
    one_second (f, machines, NULL, 1);
  /* Nothing new from the guest: no judgement yet. */
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  for (guint i = 0; i < 6 && m->status->state == MV_STATE_RUNNING; i++)
    one_second (f, machines, NULL, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/idle/guest-view-decides", test_guest_view_decides);
  FIXTURE_TEST ("/reconcile/idle/stale-guest-view-falls-back", test_stale_guest_view_falls_back);
  FIXTURE_TEST ("/reconcile/idle/goes-on-standby", test_idle_goes_on_standby);
  FIXTURE_TEST ("/reconcile/idle/busy-stays-awake", test_busy_stays_awake);
  FIXTURE_TEST ("/reconcile/idle/threshold", test_threshold);
  FIXTURE_TEST ("/reconcile/idle/traffic-keeps-it-awake", test_traffic_keeps_it_awake);
  FIXTURE_TEST ("/reconcile/idle/never-without-standby-after", test_never_without_standby_after);
  FIXTURE_TEST ("/reconcile/idle/woken-guest-idles-afresh", test_woken_guest_idles_afresh);
  FIXTURE_TEST ("/reconcile/idle/usage-failure-restarts-the-count",
                test_usage_failure_restarts_the_count);
  return g_test_run ();
}
