/* Rows on one machine and the bus: #1 reads against a bare sd-bus
 * service, #6 a polkit-gated call against a read, #8 PropertiesChanged
 * delivery and count. */
#include "bench.h"

#include "names.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *dest;
  const char *path;
  const char *iface;
  const char *member;
  const char *arg;   /* one string argument or NULL */
} Call;

static double
timed_call (Bench *bench, sd_bus *bus, const Call *call)
{
  g_autoptr (sd_bus_message) reply = NULL;
  gint64 t0 = bench_now ();

  if (call->arg)
    reply = bench_call (bench, bus, call->dest, call->path, call->iface, call->member, "ss",
                        MV_MACHINE_IFACE, call->arg);
  else
    reply = bench_call (bench, bus, call->dest, call->path, call->iface, call->member, "s",
                        MV_MACHINE_IFACE);
  return (double) (bench_now () - t0);
}

static double
timed_plain_call (Bench *bench, sd_bus *bus, const Call *call)
{
  g_autoptr (sd_bus_message) reply = NULL;
  gint64 t0 = bench_now ();

  if (call->arg)
    reply = bench_call (bench, bus, call->dest, call->path, call->iface, call->member, "s", call->arg);
  else
    reply = bench_call (bench, bus, call->dest, call->path, call->iface, call->member, NULL);
  return (double) (bench_now () - t0);
}

/* Alternates A and B so that whatever else the machine does falls on both. */
static void
measure_pair (Bench *bench, sd_bus *bus, double (*fn) (Bench *, sd_bus *, const Call *),
              const Call *a, const Call *b, guint warmup, guint runs,
              BenchSamples *sa, BenchSamples *sb)
{
  for (guint i = 0; i < warmup; i++)
    {
      fn (bench, bus, a);
      fn (bench, bus, b);
    }
  for (guint i = 0; i < runs; i++)
    {
      bench_samples_add (sa, fn (bench, bus, a));
      bench_samples_add (sb, fn (bench, bus, b));
    }
}

void
bench_row_reads (Bench *bench)
{
  g_autofree char *path = bench_create_machine (bench, bench->bus, NULL, FALSE);
  guint runs = bench->smoke ? 50 : 3000;
  const Call get_m = { MV_BUS_NAME, path, "org.freedesktop.DBus.Properties", "Get", "State" };
  const Call get_e = { BENCH_ECHO_NAME, BENCH_ECHO_PATH, "org.freedesktop.DBus.Properties", "Get", "State" };
  const Call all_m = { MV_BUS_NAME, path, "org.freedesktop.DBus.Properties", "GetAll", NULL };
  const Call all_e = { BENCH_ECHO_NAME, BENCH_ECHO_PATH, "org.freedesktop.DBus.Properties", "GetAll", NULL };
  BenchSamples *gm = bench_samples_new (), *ge = bench_samples_new ();
  BenchSamples *am = bench_samples_new (), *ae = bench_samples_new ();
  BenchResult *r;

  /* Both services on the same CPU while they are measured: on this
   * 2-core machine, where the scheduler puts each process relative to
   * the bus and the client otherwise moves a round trip by a quarter,
   * from run to run and independently of which service it is. */
  bench_pin_process (bench->daemon_pid, (int) g_get_num_processors () - 1);
  bench_pin_process (bench->echo_pid, (int) g_get_num_processors () - 1);
  measure_pair (bench, bench->bus, timed_call, &get_m, &get_e, runs / 10, runs, gm, ge);
  measure_pair (bench, bench->bus, timed_call, &all_m, &all_e, runs / 10, runs, am, ae);
  bench_pin_process (bench->daemon_pid, -1);
  bench_pin_process (bench->echo_pid, -1);

  r = bench_report_add (bench->report, "1", "1-get-state", "Get(State) round trip", "µs", 1,
                        gm, "bare sd-bus echo service, same property", ge);
  bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 1.3, "≤ 1.3× echo");
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  r = bench_report_add (bench->report, "1", "1-getall", "GetAll(Machine) round trip", "µs", 1,
                        am, "bare sd-bus echo service, same 22 properties", ae);
  bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 1.15, "≤ 1.15× echo");
  bench_result_judge_on_interval (r);
  bench_result_set_note (r, "both services pinned to the same CPU while measured");
  bench_result_print (r);
}

/* ---- #6: run as nobody, so that polkit (not the root shortcut) decides ---- */

int bench_polkit_client_main (const char *address, const char *path, guint runs);

/* The same question the daemon asks polkitd for GetSpec, asked directly
 * by the caller about itself: polkitd's share of a gated call. polkitd
 * takes details only from trusted callers, so none are passed. -1 on
 * error. */
static double
timed_polkit_check (sd_bus *bus, const char *path)
{
  g_autoptr (sd_bus_message) m = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *unique = NULL;
  int authorized = 0;
  gint64 t0 = bench_now ();
  int r;

  sd_bus_get_unique_name (bus, &unique);
  r = sd_bus_message_new_method_call (bus, &m, "org.freedesktop.PolicyKit1",
                                      "/org/freedesktop/PolicyKit1/Authority",
                                      "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
  if (r >= 0)
    r = sd_bus_message_append (m, "(sa{sv})s", "system-bus-name", 1, "name", "s", unique,
                               MV_ACTION_MACHINE_READ_SECRETS);
  if (r >= 0)
    r = sd_bus_message_append (m, "a{ss}", 0);
  if (r >= 0)
    r = sd_bus_message_append (m, "us", 0, "");
  if (r >= 0)
    r = sd_bus_call (bus, m, 0, NULL, &reply);
  if (r >= 0)
    r = sd_bus_message_enter_container (reply, 'r', "bba{ss}");
  if (r >= 0)
    r = sd_bus_message_read (reply, "b", &authorized);
  if (r < 0 || !authorized)
    return -1;
  return (double) (bench_now () - t0);
}

int
bench_polkit_client_main (const char *address, const char *path, guint runs)
{
  Bench local = { 0 };
  sd_bus *bus = NULL;
  const Call read = { MV_BUS_NAME, path, "org.freedesktop.DBus.Properties", "Get", NULL };
  const Call spec = { MV_BUS_NAME, path, MV_MACHINE_IFACE, "GetSpec", NULL };
  const Call desire = { MV_BUS_NAME, path, MV_MACHINE_IFACE, "SetDesiredState", "stopped" };
  g_autoptr (BenchSamples) sr = bench_samples_new ();
  g_autoptr (BenchSamples) ss = bench_samples_new ();
  g_autoptr (BenchSamples) sr2 = bench_samples_new ();
  g_autoptr (BenchSamples) sd = bench_samples_new ();
  g_autoptr (BenchSamples) sp = bench_samples_new ();
  int r = sd_bus_new (&bus);

  if (r >= 0)
    r = sd_bus_set_address (bus, address);
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  if (r < 0)
    {
      g_printerr ("polkit client: cannot connect: %s\n", g_strerror (-r));
      return 1;
    }
  /* Get(State) needs its interface and property: use the typed helper. */
  for (guint round = 0; round < 2; round++)
    for (guint i = 0; i < (round == 0 ? runs / 10 : runs); i++)
      {
        gint64 t0 = bench_now ();
        g_autofree char *state = NULL;
        double a, b, c, d;

        if (sd_bus_get_property_string (bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "State", NULL, &state) < 0)
          {
            g_printerr ("polkit client: Get(State) failed\n");
            return 1;
          }
        a = (double) (bench_now () - t0);
        b = timed_plain_call (&local, bus, &spec);
        t0 = bench_now ();
        g_clear_pointer (&state, free);
        if (sd_bus_get_property_string (bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "State", NULL, &state) < 0)
          return 1;
        c = (double) (bench_now () - t0);
        d = timed_plain_call (&local, bus, &desire);
        if (round == 1)
          {
            bench_samples_add (sr, a);
            bench_samples_add (ss, b);
            bench_samples_add (sr2, c);
            bench_samples_add (sd, d);
            bench_samples_add (sp, timed_polkit_check (bus, path));
          }
      }
  (void) read;
  for (guint i = 0; i < runs; i++)
    g_print ("%.1f %.1f %.1f %.1f %.1f\n", g_array_index (sr->values, double, i),
             g_array_index (ss->values, double, i), g_array_index (sr2->values, double, i),
             g_array_index (sd->values, double, i), g_array_index (sp->values, double, i));
  sd_bus_flush_close_unref (bus);
  return 0;
}

void
bench_row_polkit (Bench *bench)
{
  g_autofree char *path = bench_create_machine (bench, bench->bus, NULL, FALSE);
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  guint runs = bench->smoke ? 20 : 400;
  g_autofree char *runs_arg = g_strdup_printf ("%u", runs);
  const char *argv[] = { self, "--polkit-client", mv_test_env_bus_address (bench->env), path,
                         runs_arg, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  BenchSamples *read = bench_samples_new (), *spec = bench_samples_new ();
  BenchSamples *read2 = bench_samples_new (), *desire = bench_samples_new ();
  BenchSamples *spec2 = bench_samples_new (), *direct = bench_samples_new ();
  BenchResult *r;
  int status;

  mv_test_env_add_polkit_rule (bench->env, "bench-nobody",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id.indexOf(\"org.microvmd1.\") == 0 && subject.user == \"nobody\")\n"
    "    return polkit.Result.YES;\n"
    "});\n");
  status = mv_test_env_run_as_nobody (bench->env, argv, &out, &err);
  if (status != 0)
    bench_fail (bench, "the polkit client failed (status %d): %s", status, err);

  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      double a, b, c, d, e;
      if (sscanf (lines[i], "%lf %lf %lf %lf %lf", &a, &b, &c, &d, &e) != 5)
        continue;
      if (e < 0)
        bench_fail (bench, "polkitd did not authorize uid 65534 when asked directly");
      bench_samples_add (spec2, b);
      bench_samples_add (direct, e);
      bench_samples_add (read, a);
      bench_samples_add (spec, b);
      bench_samples_add (read2, c);
      bench_samples_add (desire, d);
    }
  if (bench_samples_count (spec) != runs)
    bench_fail (bench, "the polkit client reported %u of %u runs", bench_samples_count (spec), runs);

  r = bench_report_add (bench->report, "6", "6-getspec", "GetSpec as uid 65534, allowed by a polkit rule",
                        "µs", 1, spec, "Get(State) as uid 65534", read);
  bench_result_set_note (r, "read-secrets action; the daemon asks the bus for the caller's uid, "
                            "asks polkitd, then checks the caller is still there");
  bench_result_print (r);
  r = bench_report_add (bench->report, "6", "6-getspec-vs-polkitd", "GetSpec as uid 65534 (as above)",
                        "µs", 1, spec2, "polkitd CheckAuthorization alone, same action and caller", direct);
  bench_result_set_note (r, "the difference is the daemon's own share of a gated call");
  bench_result_print (r);
  r = bench_report_add (bench->report, "6", "6-setdesired", "SetDesiredState (no change) as uid 65534, allowed by a polkit rule",
                        "µs", 1, desire, "Get(State) as uid 65534", read2);
  bench_result_print (r);
}

/* ---- #8 ---- */

typedef struct {
  const char *path;
  guint       properties_changed;
  guint       with_state;
  guint       state_changed;
  char       *last_state;
  gint64      started_at;      /* from the last PropertiesChanged carrying it */
  gint64      received_at;     /* wall clock when that one was dispatched */
} Watch;

static int
on_signal (sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
  Watch *w = userdata;
  gint64 now = bench_wall ();
  const char *iface = NULL;

  if (g_strcmp0 (sd_bus_message_get_path (m), w->path) != 0)
    return 0;
  if (sd_bus_message_is_signal (m, MV_MACHINE_IFACE, "StateChanged"))
    {
      const char *state = NULL;
      w->state_changed++;
      if (sd_bus_message_read (m, "s", &state) >= 0)
        {
          g_free (w->last_state);
          w->last_state = g_strdup (state);
        }
      return 0;
    }
  if (!sd_bus_message_is_signal (m, "org.freedesktop.DBus.Properties", "PropertiesChanged"))
    return 0;
  if (sd_bus_message_read (m, "s", &iface) < 0)
    return 0;
  w->properties_changed++;
  if (sd_bus_message_enter_container (m, 'a', "{sv}") < 0)
    return 0;
  while (sd_bus_message_enter_container (m, 'e', "sv") > 0)
    {
      const char *name = NULL;
      sd_bus_message_read (m, "s", &name);
      if (g_strcmp0 (name, "State") == 0)
        w->with_state++;
      if (g_strcmp0 (name, "StartedAt") == 0)
        {
          uint64_t t = 0;
          if (sd_bus_message_read (m, "v", "t", &t) >= 0 && t > 0)
            {
              w->started_at = (gint64) t;
              w->received_at = now;
            }
        }
      else
        sd_bus_message_skip (m, "v");
      sd_bus_message_exit_container (m);
    }
  return 0;
}

static void
pump_until (Bench *bench, sd_bus *bus, gboolean (*done) (Watch *), Watch *w, guint timeout_ms)
{
  gint64 deadline = bench_now () + timeout_ms * 1000;

  while (!done (w))
    {
      int r = sd_bus_process (bus, NULL);
      if (r < 0)
        bench_fail (bench, "bus error while waiting for signals: %s", g_strerror (-r));
      if (r > 0)
        continue;
      if (bench_now () > deadline)
        return;
      sd_bus_wait (bus, 5000);
    }
}

static gboolean
never (Watch *w)
{
  return FALSE;
}

static gboolean
is_running (Watch *w)
{
  return w->last_state && g_ascii_strcasecmp (w->last_state, "running") == 0 && w->received_at != 0;
}

static gboolean
is_stopped (Watch *w)
{
  return w->last_state && g_ascii_strcasecmp (w->last_state, "stopped") == 0;
}

static void
async_call (Bench *bench, sd_bus *bus, const char *dest, const char *path, const char *member)
{
  int r = sd_bus_call_method_async (bus, NULL, dest, path, MV_MACHINE_IFACE, member,
                                    NULL, NULL, NULL);
  if (r < 0)
    bench_fail (bench, "cannot call %s: %s", member, g_strerror (-r));
}

/* Calls @member on the echo service; how long from its StartedAt to the
 * subscriber having the signal. */
static double
echo_delivery (Bench *bench, sd_bus *bus, Watch *e, const char *member)
{
  gint64 deadline = bench_now () + 5 * G_USEC_PER_SEC;

  e->received_at = 0;
  async_call (bench, bus, BENCH_ECHO_NAME, BENCH_ECHO_PATH, member);
  while (e->received_at == 0 && bench_now () < deadline)
    if (sd_bus_process (bus, NULL) == 0)
      sd_bus_wait (bus, 5000);
  if (e->received_at == 0)
    bench_fail (bench, "the echo service's signal after %s did not arrive", member);
  return (double) (e->received_at - e->started_at);
}

void
bench_row_signals (Bench *bench)
{
  g_autofree char *path = bench_create_machine (bench, bench->bus, NULL, FALSE);
  sd_bus *bus = bench_open_bus (bench);
  Watch w = { .path = path };
  guint runs = bench->smoke ? 5 : 100;
  BenchSamples *latency = bench_samples_new (), *floor = bench_samples_new ();
  BenchSamples *latency2 = bench_samples_new (), *durable = bench_samples_new ();
  BenchSamples *per_change = bench_samples_new (), *one = bench_samples_new ();
  g_autofree char *match = g_strdup_printf ("type='signal',path='%s'", path);
  g_autofree char *echo_match = g_strdup_printf ("type='signal',path='%s'", BENCH_ECHO_PATH);
  Watch e = { .path = BENCH_ECHO_PATH };
  BenchResult *r;

  if (sd_bus_add_match (bus, NULL, match, on_signal, &w) < 0 ||
      sd_bus_add_match (bus, NULL, echo_match, on_signal, &e) < 0)
    bench_fail (bench, "cannot subscribe to signals");

  for (guint i = 0; i < runs; i++)
    {
      /* Start and stop: four state changes (starting, running, stopping,
       * stopped); every PropertiesChanged on the object is counted. */
      w.properties_changed = w.with_state = w.state_changed = 0;
      w.received_at = 0;
      async_call (bench, bus, MV_BUS_NAME, path, "Start");
      pump_until (bench, bus, is_running, &w, 10000);
      if (!is_running (&w))
        bench_fail (bench, "no Running PropertiesChanged after Start");
      bench_samples_add (latency, (double) (w.received_at - w.started_at));
      /* The figure again, for its second baseline: the same signal from a
       * bare service that first writes the state as the daemon must. */
      bench_samples_add (latency2, (double) (w.received_at - w.started_at));
      async_call (bench, bus, MV_BUS_NAME, path, "Stop");
      pump_until (bench, bus, is_stopped, &w, 10000);
      if (!is_stopped (&w))
        bench_fail (bench, "no Stopped StateChanged after Stop");
      /* Late duplicates would come within a main loop turn or two. */
      pump_until (bench, bus, never, &w, 20);
      if (w.state_changed == 0)
        bench_fail (bench, "no StateChanged signals seen");
      bench_samples_add (per_change, (double) w.with_state / w.state_changed);
      bench_samples_add (one, 1.0);
      if (i == 0)
        g_print ("[8] cycle: %u PropertiesChanged (%u with State) for %u state changes\n",
                 w.properties_changed, w.with_state, w.state_changed);

      bench_samples_add (floor, echo_delivery (bench, bus, &e, "Emit"));
      bench_samples_add (durable, echo_delivery (bench, bus, &e, "EmitDurable"));
    }

  r = bench_report_add (bench->report, "8", "8-delivery", "PropertiesChanged delivery: state set → subscriber has it (Running)",
                        "µs", 1, latency, "bare sd-bus service: value set → subscriber has it", floor);
  bench_result_set_note (r, "from StartedAt (set with the Running state) to dispatch in the client, wall clock, same host");
  bench_result_print (r);
  r = bench_report_add (bench->report, "8", "8-delivery-durable", "PropertiesChanged delivery (as above)",
                        "µs", 1, latency2,
                        "bare sd-bus service that writes the state as the daemon does (temp, fsync, rename, dir fsync), then signals",
                        durable);
  bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 2.0, "≤ 2× the bare service + the one write");
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  r = bench_report_add (bench->report, "8", "8-count", "PropertiesChanged carrying State per state change (start+stop cycle)",
                        "signals", 1, per_change, "one signal per change", one);
  bench_result_set_target (r, BENCH_TARGET_VALUE_EXACTLY, 1.0, "exactly 1");
  bench_result_print (r);
  g_free (w.last_state);
  g_free (e.last_state);
  sd_bus_flush_close_unref (bus);
}
