/* A VMM's scope under systemd, and its registration with machined
 * (systemd-scope.h). */
#include "systemd-scope.h"
#include "core/errors.h"

#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#define SYSTEMD_DEST        "org.freedesktop.systemd1"
#define SYSTEMD_PATH        "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER     "org.freedesktop.systemd1.Manager"
#define MACHINED_DEST       "org.freedesktop.machine1"
#define MACHINED_PATH       "/org/freedesktop/machine1"
#define MACHINED_MANAGER    "org.freedesktop.machine1.Manager"

/* How long a job of the scope may take: systemd does a scope's start and
 * stop in a moment, but a stop waits for what is left in it to end. */
#define JOB_TIMEOUT_US      (15 * G_USEC_PER_SEC)

/* machined's limit on a machine's name (HOST_NAME_MAX). */
#define MACHINE_NAME_MAX    64

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus, sd_bus_flush_close_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_slot, sd_bus_slot_unref)

gboolean
mv_scope_host_has_systemd (void)
{
  return sd_booted () > 0;
}

char *
mv_scope_unit_name (const char *machine_id)
{
  return g_strdup_printf ("microvmd-%s.scope", machine_id);
}

static gboolean
bus_failed (GError **error, int r, const sd_bus_error *bus_error, const char *what,
            const char *unit)
{
  return mv_error_set (error, MV_ERROR_FAILED, "%s %s: %s", what, unit,
                       bus_error && sd_bus_error_is_set (bus_error) ? bus_error->message
                                                                     : g_strerror (-r));
}

/* Sends @m and waits for the reply; an error named @harmless (may be
 * NULL) is none. */
static gboolean
call_message (sd_bus *bus, sd_bus_message *m, const char *harmless, const char *what,
              const char *subject, GError **error)
{
  sd_bus_error bus_error = SD_BUS_ERROR_NULL;
  gboolean ok = TRUE;
  int r = sd_bus_call (bus, m, 0, &bus_error, NULL);

  if (r < 0 && !(harmless && sd_bus_error_has_name (&bus_error, harmless)))
    ok = bus_failed (error, r, &bus_error, what, subject);
  sd_bus_error_free (&bus_error);
  return ok;
}

static sd_bus *
open_bus (GError **error)
{
  sd_bus *bus = NULL;
  int r = sd_bus_open_system_with_description (&bus, "microvmd-scope");

  if (r < 0)
    {
      mv_error_set (error, MV_ERROR_UNAVAILABLE, "Could not reach systemd on the system bus: %s",
                    g_strerror (-r));
      return NULL;
    }
  return bus;
}

/* A job of systemd's that this connection waits for: its path, and its
 * result once JobRemoved names it. */
typedef struct {
  const char *path;
  char       *result;
} Job;

static int
on_job_removed (sd_bus_message *m, void *user_data, sd_bus_error *ret_error)
{
  Job *job = user_data;
  const char *path = NULL, *unit = NULL, *result = NULL;
  guint32 id;

  if (sd_bus_message_read (m, "uoss", &id, &path, &unit, &result) >= 0 && job->path &&
      g_str_equal (path, job->path))
    job->result = g_strdup (result);
  return 0;
}

/* Waits until the job @reply names is done: TRUE if it ended "done". */
static gboolean
wait_for_job (sd_bus *bus, Job *job, sd_bus_message *reply, const char *what, const char *unit,
              GError **error)
{
  gint64 deadline = g_get_monotonic_time () + JOB_TIMEOUT_US;
  int r = sd_bus_message_read (reply, "o", &job->path);

  if (r < 0)
    return bus_failed (error, r, NULL, what, unit);
  while (!job->result)
    {
      gint64 now = g_get_monotonic_time ();

      if ((r = sd_bus_process (bus, NULL)) < 0)
        return bus_failed (error, r, NULL, what, unit);
      if (r > 0)
        continue;
      if (now >= deadline)
        return mv_error_set (error, MV_ERROR_FAILED, "%s %s: systemd did not finish within %d s",
                             what, unit, (int) (JOB_TIMEOUT_US / G_USEC_PER_SEC));
      if ((r = sd_bus_wait (bus, (guint64) (deadline - now))) < 0)
        return bus_failed (error, r, NULL, what, unit);
    }
  if (!g_str_equal (job->result, "done"))
    return mv_error_set (error, MV_ERROR_FAILED, "%s %s: systemd's job ended \"%s\"", what, unit,
                         job->result);
  return TRUE;
}

static int
append_limits (sd_bus_message *m, const MvVmmLimits *limits)
{
  /* systemd takes the quota as CPU time per second of wall time. */
  guint64 per_sec = limits->cpu_quota_us * G_USEC_PER_SEC / limits->cpu_period_us;
  int r;

  if ((r = sd_bus_message_append (m, "(sv)", "CPUQuotaPerSecUSec", "t", per_sec)) < 0 ||
      (r = sd_bus_message_append (m, "(sv)", "CPUQuotaPeriodUSec", "t",
                                  limits->cpu_period_us)) < 0 ||
      (r = sd_bus_message_append (m, "(sv)", "MemoryMax", "t", limits->memory_max_bytes)) < 0)
    return r;
  return sd_bus_message_append (m, "(sv)", "TasksMax", "t", limits->tasks_max);
}

/* Starts @unit with @pid in it and waits for systemd to have done it. */
static gboolean
start_scope (sd_bus *bus, const char *unit, const char *description, int pid,
             const MvVmmLimits *limits, sd_bus_error *bus_error, GError **error)
{
  g_autoptr (sd_bus_message) m = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (sd_bus_slot) slot = NULL;
  Job job = { NULL, NULL };
  gboolean ok;
  int r;

  /* Before the call, so that the job's end cannot pass unseen. */
  r = sd_bus_match_signal (bus, &slot, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "JobRemoved",
                           on_job_removed, &job);
  if (r >= 0)
    r = sd_bus_message_new_method_call (bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                        "StartTransientUnit");
  if (r >= 0)
    r = sd_bus_message_append (m, "ss", unit, "fail");
  if (r >= 0)
    r = sd_bus_message_open_container (m, 'a', "(sv)");
  if (r >= 0)
    r = sd_bus_message_append (m, "(sv)(sv)(sv)", "Description", "s", description, "Slice", "s",
                               MV_SCOPE_SLICE, "CollectMode", "s", "inactive-or-failed");
  /* The stats and the idle judgement read the scope's CPU time. */
  if (r >= 0)
    r = sd_bus_message_append (m, "(sv)", "CPUAccounting", "b", 1);
  /* systemd moves processes into a running scope (the VMM after its
   * virtiofsd helpers) only where it is delegated; the daemon makes no
   * groups below it. */
  if (r >= 0)
    r = sd_bus_message_append (m, "(sv)", "Delegate", "b", 1);
  if (r >= 0)
    r = sd_bus_message_append (m, "(sv)", "PIDs", "au", 1, (guint32) pid);
  if (r >= 0)
    r = append_limits (m, limits);
  if (r >= 0)
    r = sd_bus_message_close_container (m);
  /* No auxiliary units. */
  if (r >= 0)
    r = sd_bus_message_append (m, "a(sa(sv))", 0);
  if (r < 0)
    return bus_failed (error, r, NULL, "Could not ask systemd to start", unit);
  if ((r = sd_bus_call (bus, m, 0, bus_error, &reply)) < 0)
    return bus_failed (error, r, bus_error, "systemd could not start", unit);
  ok = wait_for_job (bus, &job, reply, "Could not start", unit, error);
  g_free (job.result);
  return ok;
}

gboolean
mv_scope_place (const char *unit, const char *description, int pid, const MvVmmLimits *limits,
                GError **error)
{
  g_autoptr (sd_bus) bus = open_bus (error);
  sd_bus_error bus_error = SD_BUS_ERROR_NULL;
  gboolean ok;
  int r;

  if (!bus)
    return FALSE;
  /* The scope runs already if a helper of the VMM's came first. */
  r = sd_bus_call_method (bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                          "AttachProcessesToUnit", &bus_error, NULL, "ssau", unit, "", 1,
                          (guint32) pid);
  if (r >= 0)
    return TRUE;
  if (!sd_bus_error_has_names (&bus_error, "org.freedesktop.systemd1.NoSuchUnit",
                               "org.freedesktop.systemd1.UnitInactive"))
    {
      ok = bus_failed (error, r, &bus_error, "Could not put the VMM's process into", unit);
      sd_bus_error_free (&bus_error);
      return ok;
    }
  sd_bus_error_free (&bus_error);
  ok = start_scope (bus, unit, description, pid, limits, &bus_error, error);
  sd_bus_error_free (&bus_error);
  return ok;
}

gboolean
mv_scope_set_limits (const char *unit, const MvVmmLimits *limits, GError **error)
{
  g_autoptr (sd_bus) bus = open_bus (error);
  g_autoptr (sd_bus_message) m = NULL;
  int r;

  if (!bus)
    return FALSE;
  r = sd_bus_message_new_method_call (bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                      "SetUnitProperties");
  /* runtime: the scope is transient, and goes with the VMM. */
  if (r >= 0)
    r = sd_bus_message_append (m, "sb", unit, 1);
  if (r >= 0)
    r = sd_bus_message_open_container (m, 'a', "(sv)");
  if (r >= 0)
    r = append_limits (m, limits);
  if (r >= 0)
    r = sd_bus_message_close_container (m);
  if (r < 0)
    return bus_failed (error, r, NULL, "Could not ask systemd to change", unit);
  return call_message (bus, m, "org.freedesktop.systemd1.NoSuchUnit",
                       "systemd could not change the limits of", unit, error);
}

gboolean
mv_scope_stop (const char *unit, GError **error)
{
  g_autoptr (sd_bus) bus = open_bus (error);
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (sd_bus_slot) slot = NULL;
  sd_bus_error bus_error = SD_BUS_ERROR_NULL;
  Job job = { NULL, NULL };
  gboolean ok;
  int r;

  if (!bus)
    return FALSE;
  r = sd_bus_match_signal (bus, &slot, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "JobRemoved",
                           on_job_removed, &job);
  if (r < 0)
    return bus_failed (error, r, NULL, "Could not ask systemd to stop", unit);
  r = sd_bus_call_method (bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "StopUnit",
                          &bus_error, &reply, "ss", unit, "replace");
  if (r < 0)
    {
      /* A scope whose processes are all gone has gone with them. */
      ok = sd_bus_error_has_name (&bus_error, "org.freedesktop.systemd1.NoSuchUnit") ||
           bus_failed (error, r, &bus_error, "systemd could not stop", unit);
      sd_bus_error_free (&bus_error);
      return ok;
    }
  ok = wait_for_job (bus, &job, reply, "Could not stop", unit, error);
  g_free (job.result);
  return ok;
}

char *
mv_scope_machine_name (const char *name, const char *machine_id)
{
  gboolean fits = name && *name && strlen (name) <= MACHINE_NAME_MAX && name[0] != '-' &&
                  name[0] != '.';
  g_autofree char *fallback = NULL;

  for (const char *p = name; fits && *p; p++)
    fits = g_ascii_isalnum (*p) || *p == '-' || *p == '_' || (*p == '.' && p[1] != '.');
  if (fits && name[strlen (name) - 1] != '.')
    return g_strdup (name);
  fallback = g_strconcat ("microvmd-", machine_id, NULL);
  return g_strndup (fallback, MACHINE_NAME_MAX);
}

/* @machine_id as the 128-bit ID machined takes, if it is one (32 hex
 * digits, dashes aside); FALSE: it is some other string. */
static gboolean
parse_id128 (const char *machine_id, guint8 out[16])
{
  guint n = 0;

  for (const char *p = machine_id; *p; p++)
    {
      if (*p == '-')
        continue;
      if (!g_ascii_isxdigit (*p) || n >= 32)
        return FALSE;
      if (n % 2 == 0)
        out[n / 2] = (guint8) (g_ascii_xdigit_value (*p) << 4);
      else
        out[n / 2] |= (guint8) g_ascii_xdigit_value (*p);
      n++;
    }
  return n == 32;
}

gboolean
mv_scope_register_machine (const char *name, const char *machine_id, int pid, GError **error)
{
  g_autoptr (sd_bus) bus = open_bus (error);
  g_autoptr (sd_bus_message) m = NULL;
  guint8 id[16];
  gboolean has_id = parse_id128 (machine_id, id);
  int r;

  if (!bus)
    return FALSE;
  r = sd_bus_message_new_method_call (bus, &m, MACHINED_DEST, MACHINED_PATH, MACHINED_MANAGER,
                                      "RegisterMachine");
  if (r >= 0)
    r = sd_bus_message_append (m, "s", name);
  if (r >= 0)
    r = sd_bus_message_append_array (m, 'y', id, has_id ? sizeof id : 0);
  /* The machine is the VMM's process, in the scope it was put in. */
  if (r >= 0)
    r = sd_bus_message_append (m, "ssus", "microvmd", "vm", (guint32) pid, "");
  if (r < 0)
    return bus_failed (error, r, NULL, "Could not ask machined to register", name);
  return call_message (bus, m, NULL, "machined could not register", name, error);
}
