/* microvmctl stats (Manager.GetAllStats, Machine.GetStats) and metrics
 * (Machine.GetMetrics): what machines use of the host, now and over the
 * last days. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "names.h"
#include "properties.h"
#include "stats-command.h"
#include "table.h"
#include "terminal-text.h"

/* GetMetrics' most samples in one reply (Machine.xml). */
#define METRICS_REPLY_MAX 10080
/* Replies read for one window: seven days kept at one sample a second at
 * most is 60 of them. */
#define METRICS_CALLS_MAX 64
/* metrics' window when --since is not given. */
#define SECOND_USEC G_GINT64_CONSTANT (1000000)
#define METRICS_DEFAULT_WINDOW_USEC (24 * 3600 * SECOND_USEC)

static int
fail_parse (int r)
{
  return mv_fail (_("Failed to parse the reply from microvmd: %s"), g_strerror (-r));
}

void
mv_top_row_free (gpointer p)
{
  MvTopRow *row = p;

  g_free (row->id);
  g_free (row->name);
  g_free (row->state);
  g_free (row);
}

char *
mv_format_cpu_time (guint64 ns)
{
  return g_strdup_printf ("%.2fs", (double) ns / 1e9);
}

typedef struct {
  char *name;
  char *state;
  char *path;
} MachineEntry;

static void
machine_entry_free (gpointer p)
{
  MachineEntry *entry = p;

  g_free (entry->name);
  g_free (entry->state);
  g_free (entry->path);
  g_free (entry);
}

/* ID → MachineEntry of every machine (Manager.ListMachines). */
static int
list_machines (MvCtl *ctl, GHashTable **machines, sd_bus_error *error)
{
  g_autoptr (GHashTable) table = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                        machine_entry_free);
  g_autoptr (sd_bus_message) reply = NULL;
  const char *id, *name, *state, *path;
  int r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ListMachines", 0, error, &reply,
                   NULL);

  if (r < 0)
    return r;
  if ((r = sd_bus_message_enter_container (reply, 'a', "(ssso)")) < 0)
    return sd_bus_error_set_errno (error, r);
  while ((r = sd_bus_message_read (reply, "(ssso)", &id, &name, &state, &path)) > 0)
    {
      MachineEntry *entry = g_new0 (MachineEntry, 1);

      entry->name = g_strdup (name);
      entry->state = g_strdup (state);
      entry->path = g_strdup (path);
      g_hash_table_replace (table, g_strdup (id), entry);
    }
  if (r < 0)
    return sd_bus_error_set_errno (error, r);
  *machines = g_steal_pointer (&table);
  return 0;
}

static MvTopRow *
row_new (const char *id, const MachineEntry *entry)
{
  MvTopRow *row = g_new0 (MvTopRow, 1);

  row->id = g_strdup (id);
  /* A machine made between the two calls: its ID is what there is. */
  row->name = g_strdup (entry ? entry->name : id);
  row->state = g_strdup (entry ? entry->state : "");
  return row;
}

int
mv_read_all_stats (MvCtl *ctl, GPtrArray *rows, sd_bus_error *error)
{
  g_autoptr (GHashTable) machines = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  if ((r = list_machines (ctl, &machines, error)) < 0)
    return r;
  if ((r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetAllStats", 0, error, &reply,
                    NULL)) < 0)
    return r;
  r = sd_bus_message_enter_container (reply, 'a', "(sa{sv})");
  while (r >= 0 && (r = sd_bus_message_enter_container (reply, 'r', "sa{sv}")) > 0)
    {
      const char *id;
      MvTopRow *row;

      if ((r = sd_bus_message_read (reply, "s", &id)) < 0)
        break;
      row = row_new (id, g_hash_table_lookup (machines, id));
      g_ptr_array_add (rows, row);
      if ((r = mv_stats_sample_read (reply, &row->sample)) < 0)
        break;
      r = sd_bus_message_exit_container (reply);
    }
  if (r < 0)
    return sd_bus_error_set_errno (error, r);
  return 0;
}

/* The rows of the machines named on the command line, in that order; a
 * machine without a VMM has a row without a sample. */
static int
read_named_stats (MvCtl *ctl, int argc, char **argv, GPtrArray *rows, GPtrArray *have)
{
  g_auto (sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr (GHashTable) machines = NULL;
  int r;

  if ((r = list_machines (ctl, &machines, &error)) < 0)
    return mv_fail_bus (&error, r);
  for (int i = 0; i < argc; i++)
    {
      g_auto (sd_bus_error) stats_error = SD_BUS_ERROR_NULL;
      g_autoptr (sd_bus_message) reply = NULL;
      g_autofree char *path = NULL;
      g_autofree char *id = NULL;
      GHashTableIter iter;
      gpointer key, value;
      MvTopRow *row;
      int status = mv_resolve_machine (ctl, argv[i], &path);

      if (status != MV_EXIT_OK)
        return status;
      g_hash_table_iter_init (&iter, machines);
      while (id == NULL && g_hash_table_iter_next (&iter, &key, &value))
        if (g_str_equal (((MachineEntry *) value)->path, path))
          id = g_strdup (key);
      row = row_new (id ? id : argv[i], id ? g_hash_table_lookup (machines, id) : NULL);
      g_ptr_array_add (rows, row);

      r = mv_call (ctl, path, MV_MACHINE_IFACE, "GetStats", 0, &stats_error, &reply, NULL);
      if (r < 0 && sd_bus_error_has_name (&stats_error, MV_BUS_ERROR_INVALID_STATE))
        {
          g_ptr_array_add (have, GINT_TO_POINTER (FALSE));
          continue;
        }
      if (r < 0)
        return mv_fail_bus (&stats_error, r);
      if ((r = mv_stats_sample_read (reply, &row->sample)) < 0)
        return fail_parse (r);
      g_ptr_array_add (have, GINT_TO_POINTER (TRUE));
    }
  return MV_EXIT_OK;
}

static void
add_int (JsonBuilder *b, const char *key, gint64 value)
{
  json_builder_set_member_name (b, key);
  json_builder_add_int_value (b, value);
}

/* The totals of a sample, as the bus names them. */
static void
add_sample_members (JsonBuilder *b, const MvStatsSample *s)
{
  add_int (b, "started_at", s->started_at);
  add_int (b, "cpu_time_ns", (gint64) s->cpu_time_ns);
  add_int (b, "resident_memory_bytes", (gint64) s->resident_memory_bytes);
  add_int (b, "disk_read_bytes", (gint64) s->disk_read_bytes);
  add_int (b, "disk_written_bytes", (gint64) s->disk_written_bytes);
  if (s->has_network)
    {
      add_int (b, "network_receive_bytes", (gint64) s->network_receive_bytes);
      add_int (b, "network_transmit_bytes", (gint64) s->network_transmit_bytes);
    }
}

static void
print_stats_json (GPtrArray *rows, GPtrArray *have)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_array (b);
  for (guint i = 0; i < rows->len; i++)
    {
      MvTopRow *row = rows->pdata[i];

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "id");
      json_builder_add_string_value (b, row->id);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, row->name);
      json_builder_set_member_name (b, "state");
      json_builder_add_string_value (b, row->state);
      if (!have || GPOINTER_TO_INT (have->pdata[i]))
        {
          add_int (b, "read_at", row->sample.read_at);
          add_int (b, "vcpus", row->sample.vcpus);
          add_int (b, "memory_bytes", (gint64) row->sample.memory_bytes);
          add_sample_members (b, &row->sample);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  root = json_builder_get_root (b);
  mv_print_json (root);
}

static void
print_stats_table (GPtrArray *rows, GPtrArray *have)
{
  g_autoptr (MvTable) table = NULL;

  if (rows->len == 0)
    {
      printf (_("No machine has a VMM.\n"));
      return;
    }
  table = mv_table_new ("NAME", "STATE", "CPU-TIME", "MEMORY", "DISK-READ", "DISK-WRITTEN",
                        "NET-RX", "NET-TX", NULL);
  for (guint column = 2; column < 8; column++)
    mv_table_set_align_right (table, column);
  for (guint i = 0; i < rows->len; i++)
    {
      MvTopRow *row = rows->pdata[i];
      const MvStatsSample *s = &row->sample;
      gboolean sampled = !have || GPOINTER_TO_INT (have->pdata[i]);
      gboolean network = sampled && s->has_network;
      g_autofree char *name = mv_terminal_text (row->name, -1);
      g_autofree char *state = mv_terminal_text (row->state, -1);
      g_autofree char *cpu = sampled ? mv_format_cpu_time (s->cpu_time_ns) : NULL;
      g_autofree char *memory = sampled ? mv_format_bytes (s->resident_memory_bytes) : NULL;
      g_autofree char *read = sampled ? mv_format_bytes (s->disk_read_bytes) : NULL;
      g_autofree char *written = sampled ? mv_format_bytes (s->disk_written_bytes) : NULL;
      g_autofree char *rx = network ? mv_format_bytes (s->network_receive_bytes) : NULL;
      g_autofree char *tx = network ? mv_format_bytes (s->network_transmit_bytes) : NULL;

      mv_table_add_row (table, name, state, cpu, memory, read, written, rx, tx);
    }
  mv_table_print (table, stdout);
}

int
mv_cmd_stats (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func (mv_top_row_free);
  g_autoptr (GPtrArray) have = NULL;
  g_auto (sd_bus_error) error = SD_BUS_ERROR_NULL;
  int r;

  if (argc > 0)
    {
      int status;

      have = g_ptr_array_new ();
      if ((status = read_named_stats (ctl, argc, argv, rows, have)) != MV_EXIT_OK)
        return status;
    }
  else if ((r = mv_read_all_stats (ctl, rows, &error)) < 0)
    return mv_fail_bus (&error, r);

  if (ctl->json)
    print_stats_json (rows, have);
  else
    print_stats_table (rows, have);
  return MV_EXIT_OK;
}

/* ---- metrics ---- */

/* An ISO 8601 time ("2024-05-01T12:00:00Z", local time without a zone),
 * or how long ago: "90s", "30m", "12h", "2d". */
static gboolean
parse_time (const char *text, gint64 now, gint64 *usec)
{
  static const struct { char suffix; gint64 usec; } units[] = {
    { 's', SECOND_USEC },
    { 'm', 60 * SECOND_USEC },
    { 'h', 3600 * SECOND_USEC },
    { 'd', 86400 * SECOND_USEC },
  };
  gsize length = strlen (text);
  g_autoptr (GTimeZone) local = g_time_zone_new_local ();
  g_autoptr (GDateTime) when = NULL;

  for (gsize i = 0; length > 1 && i < G_N_ELEMENTS (units); i++)
    {
      g_autofree char *digits = NULL;
      guint64 count;

      if (text[length - 1] != units[i].suffix)
        continue;
      digits = g_strndup (text, length - 1);
      /* Up to 100 years (3155760000 s) back, so the product stays in range. */
      if (!g_ascii_string_to_unsigned (digits, 10, 0,
                                       G_GINT64_CONSTANT (3155760000) / (units[i].usec / SECOND_USEC),
                                       &count, NULL))
        return FALSE;
      *usec = now - (gint64) count * units[i].usec;
      return *usec >= 0;
    }
  when = g_date_time_new_from_iso8601 (text, local);
  if (!when)
    return FALSE;
  *usec = g_date_time_to_unix (when) * SECOND_USEC + g_date_time_get_microsecond (when);
  return *usec >= 0;
}

static char *
format_time (gint64 usec)
{
  g_autoptr (GDateTime) when = g_date_time_new_from_unix_local (usec / SECOND_USEC);

  return when ? g_date_time_format (when, "%Y-%m-%dT%H:%M:%S%:z") : g_strdup ("?");
}

typedef struct {
  gint64 time;
  MvStatsSample sample;
} MetricsSample;

/* Appends the samples of one GetMetrics reply to SAMPLES; *COUNT is how
 * many there were. */
static int
read_metrics_reply (sd_bus_message *reply, GArray *samples, guint *count)
{
  int r = sd_bus_message_enter_container (reply, 'a', "(ta{sv})");

  *count = 0;
  while (r >= 0 && (r = sd_bus_message_enter_container (reply, 'r', "ta{sv}")) > 0)
    {
      MetricsSample s;
      guint64 time;

      if ((r = sd_bus_message_read (reply, "t", &time)) < 0 ||
          (r = mv_stats_sample_read (reply, &s.sample)) < 0)
        return r;
      s.time = (gint64) time;
      /* A sample is read at its time; the rates to it need that. */
      s.sample.read_at = s.time;
      /* Off a network the totals are 0; the bus sends them anyway. */
      s.sample.has_network = TRUE;
      g_array_append_val (samples, s);
      (*count)++;
      r = sd_bus_message_exit_container (reply);
    }
  return r;
}

static void
print_metrics_json (GArray *samples)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_array (b);
  for (guint i = 0; i < samples->len; i++)
    {
      const MetricsSample *s = &g_array_index (samples, MetricsSample, i);
      g_autofree char *time = format_time (s->time);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "time");
      json_builder_add_string_value (b, time);
      add_int (b, "time_usec", s->time);
      add_sample_members (b, &s->sample);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  root = json_builder_get_root (b);
  mv_print_json (root);
}

static void
print_metrics_table (GArray *samples)
{
  g_autoptr (MvTable) table = NULL;

  if (samples->len == 0)
    {
      printf (_("No samples in that window.\n"));
      return;
    }
  table = mv_table_new ("TIME", "CPU", "CPU-TIME", "MEMORY", "DISK-READ", "DISK-WRITTEN",
                        "NET-RX", "NET-TX", NULL);
  for (guint column = 1; column < 8; column++)
    mv_table_set_align_right (table, column);
  for (guint i = 0; i < samples->len; i++)
    {
      const MetricsSample *s = &g_array_index (samples, MetricsSample, i);
      MvStatsRates rates;
      gboolean has_rates = i > 0 && mv_stats_rates (&g_array_index (samples, MetricsSample, i - 1).sample,
                                                    &s->sample, &rates);
      g_autofree char *time = format_time (s->time);
      g_autofree char *cpu_percent = has_rates ? g_strdup_printf ("%.1f%%", rates.cpu_percent) : NULL;
      g_autofree char *cpu = mv_format_cpu_time (s->sample.cpu_time_ns);
      g_autofree char *memory = mv_format_bytes (s->sample.resident_memory_bytes);
      g_autofree char *read = mv_format_bytes (s->sample.disk_read_bytes);
      g_autofree char *written = mv_format_bytes (s->sample.disk_written_bytes);
      g_autofree char *rx = mv_format_bytes (s->sample.network_receive_bytes);
      g_autofree char *tx = mv_format_bytes (s->sample.network_transmit_bytes);

      mv_table_add_row (table, time, cpu_percent, cpu, memory, read, written, rx, tx);
    }
  mv_table_print (table, stdout);
}

int
mv_cmd_metrics (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr (GArray) samples = g_array_new (FALSE, FALSE, sizeof (MetricsSample));
  g_autofree char *path = NULL;
  gint64 now = g_get_real_time ();
  gint64 since = now - METRICS_DEFAULT_WINDOW_USEC, until = now;
  int status;

  if (ctl->since && !parse_time (ctl->since, now, &since))
    return mv_usage_error (_("invalid --since '%s': expected an ISO 8601 time or how long ago "
                             "(90s, 30m, 12h, 2d)"), ctl->since);
  if (ctl->until && !parse_time (ctl->until, now, &until))
    return mv_usage_error (_("invalid --until '%s': expected an ISO 8601 time or how long ago "
                             "(90s, 30m, 12h, 2d)"), ctl->until);
  if (until < since)
    return mv_usage_error (_("--until is before --since"));
  if ((status = mv_resolve_machine (ctl, argv[0], &path)) != MV_EXIT_OK)
    return status;

  /* A reply holds the earliest samples of the window; the rest follow. */
  for (guint calls = 0; calls < METRICS_CALLS_MAX && since <= until; calls++)
    {
      g_auto (sd_bus_error) error = SD_BUS_ERROR_NULL;
      g_autoptr (sd_bus_message) reply = NULL;
      guint count;
      int r = mv_call (ctl, path, MV_MACHINE_IFACE, "GetMetrics", 0, &error, &reply, "tt",
                       (guint64) since, (guint64) until);

      if (r < 0)
        return mv_fail_bus (&error, r);
      if ((r = read_metrics_reply (reply, samples, &count)) < 0)
        return fail_parse (r);
      if (count < METRICS_REPLY_MAX)
        break;
      since = g_array_index (samples, MetricsSample, samples->len - 1).time + 1;
    }

  if (ctl->json)
    print_metrics_json (samples);
  else
    print_metrics_table (samples);
  return MV_EXIT_OK;
}
