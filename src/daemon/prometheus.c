/* The Prometheus endpoint. A scrape is answered on the main loop: what it
 * reads is the machines' records in memory, the steps' counts and, for
 * each machine with a VMM, the cheap /proc reads of its stats. The text
 * is kept for MV_PROMETHEUS_CACHE_USEC, and the connections served at
 * once are capped. */
#include "prometheus.h"
#include "core/errors.h"
#include "core/prom-text.h"
#include "util/soup-lib.h"

#include "config.h"

#include <math.h>
#include <string.h>

struct _MvPrometheus {
  MvReconciler   *reconciler;
  SoupServer     *server;
  GSocketService *service;
  guint           max_connections;
  GHashTable     *connections;    /* GSocketConnection* served, weakly held */
  GBytes         *cached;         /* the last scrape's text, or NULL */
  gint64          cached_at;      /* µs, monotonic */
};

GSocketAddress *
mv_listen_address_parse (const char *group, const char *text, gboolean any_port, GError **error)
{
  const char *colon = strrchr (text, ':');
  gboolean has_port = colon && !strchr (colon, ']') && colon[1] != '\0';
  g_autoptr (GSocketConnectable) parsed = g_network_address_parse (text, 0, NULL);
  g_autoptr (GInetAddress) address = NULL;
  GNetworkAddress *network;
  guint port = 0;

  if (parsed)
    {
      network = G_NETWORK_ADDRESS (parsed);
      port = g_network_address_get_port (network);
      address = g_inet_address_new_from_string (g_network_address_get_hostname (network));
    }
  if (!address || !has_port || (port == 0 && !any_port))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "[%s] listen: \"%s\" must be an IP address and a port from %d to "
                   "65535, as 127.0.0.1:9477 or [::1]:9477", group, text, any_port ? 0 : 1);
      return NULL;
    }
  return g_inet_socket_address_new (address, (guint16) port);
}

/* ---- The series ---- */

/* Health as the guest's agent said it, kept to the values the agent
 * speaks so that a guest cannot make up label values. */
static const char *const health_values[] = { "starting", "healthy", "unhealthy", "none" };

static const char *
health_of (const MvMachine *machine)
{
  for (guint i = 0; i + 1 < G_N_ELEMENTS (health_values); i++)
    if (g_strcmp0 (machine->health, health_values[i]) == 0)
      return health_values[i];
  return "none";
}

typedef struct {
  MvMachine     *machine;
  gboolean       has_stats;
  MvMachineStats stats;
} MachineRow;

typedef enum { VALUE_CPU, VALUE_MEMORY, VALUE_DISK_READ, VALUE_DISK_WRITTEN,
               VALUE_NET_RX, VALUE_NET_TX } StatValue;

static const struct {
  const char *name;
  const char *type;
  const char *help;
  StatValue   value;
  gboolean    network;
} machine_stats[] = {
  { "microvmd_machine_cpu_seconds_total", "counter",
    "CPU time the machine's VMM has used since it started, in seconds.", VALUE_CPU, FALSE },
  { "microvmd_machine_resident_memory_bytes", "gauge",
    "Resident memory of the machine's VMM, in bytes.", VALUE_MEMORY, FALSE },
  { "microvmd_machine_disk_read_bytes_total", "counter",
    "Bytes the machine's VMM has read from storage since it started.", VALUE_DISK_READ, FALSE },
  { "microvmd_machine_disk_written_bytes_total", "counter",
    "Bytes the machine's VMM has written to storage since it started.", VALUE_DISK_WRITTEN,
    FALSE },
  { "microvmd_machine_network_receive_bytes_total", "counter",
    "Bytes the machine's guest has received on its network interface.", VALUE_NET_RX, TRUE },
  { "microvmd_machine_network_transmit_bytes_total", "counter",
    "Bytes the machine's guest has sent on its network interface.", VALUE_NET_TX, TRUE },
};

static void
append_stat (GString *out, const char *name, const char *const *labels, StatValue value,
             const MvMachineStats *s)
{
  switch (value)
    {
    case VALUE_CPU:
      mv_prom_sample_double (out, name, labels, s->usage.cpu_ns / 1e9);
      break;
    case VALUE_MEMORY:
      mv_prom_sample_u64 (out, name, labels, s->usage.memory_bytes);
      break;
    case VALUE_DISK_READ:
      mv_prom_sample_u64 (out, name, labels, s->usage.disk_read_bytes);
      break;
    case VALUE_DISK_WRITTEN:
      mv_prom_sample_u64 (out, name, labels, s->usage.disk_write_bytes);
      break;
    case VALUE_NET_RX:
      mv_prom_sample_u64 (out, name, labels, s->network.rx_bytes);
      break;
    case VALUE_NET_TX:
      mv_prom_sample_u64 (out, name, labels, s->network.tx_bytes);
      break;
    }
}

static void
render_daemon (GString *out, GArray *rows, MvReconciler *reconciler)
{
  const MvOpStats *ops = mv_reconciler_op_stats (reconciler);
  guint by_state[MV_STATE_COUNT] = { 0 };
  guint by_health[G_N_ELEMENTS (health_values)] = { 0 };

  for (guint i = 0; i < rows->len; i++)
    {
      MvMachine *machine = g_array_index (rows, MachineRow, i).machine;
      const char *health = health_of (machine);

      by_state[machine->status->state]++;
      for (guint h = 0; h < G_N_ELEMENTS (health_values); h++)
        if (health == health_values[h])
          by_health[h]++;
    }

  mv_prom_family (out, "microvmd_machines", "gauge", "Machines defined, by observed state.");
  for (guint s = 0; s < MV_STATE_COUNT; s++)
    {
      const char *labels[] = { "state", mv_state_to_string (s), NULL };
      mv_prom_sample_u64 (out, "microvmd_machines", labels, by_state[s]);
    }
  mv_prom_family (out, "microvmd_machines_by_health", "gauge",
                  "Machines defined, by what their health check finds (none: no check).");
  for (guint h = 0; h < G_N_ELEMENTS (health_values); h++)
    {
      const char *labels[] = { "health", health_values[h], NULL };
      mv_prom_sample_u64 (out, "microvmd_machines_by_health", labels, by_health[h]);
    }

  mv_prom_family (out, "microvmd_operations_total", "counter",
                  "Reconcile steps taken since the daemon started, by kind.");
  for (guint k = 0; k < ops->n_kinds; k++)
    {
      const char *labels[] = { "kind", ops->kinds[k].kind, NULL };
      mv_prom_sample_u64 (out, "microvmd_operations_total", labels, ops->kinds[k].total);
    }
  mv_prom_family (out, "microvmd_operation_failures_total", "counter",
                  "Reconcile steps that failed since the daemon started, by kind.");
  for (guint k = 0; k < ops->n_kinds; k++)
    {
      const char *labels[] = { "kind", ops->kinds[k].kind, NULL };
      mv_prom_sample_u64 (out, "microvmd_operation_failures_total", labels,
                          ops->kinds[k].failures);
    }

  mv_prom_family (out, "microvmd_reconcile_step_duration_seconds", "histogram",
                  "How long reconcile steps took, by kind, in seconds.");
  for (guint k = 0; k < ops->n_kinds; k++)
    {
      const MvOpKind *kind = &ops->kinds[k];

      for (guint b = 0; b <= MV_OP_BUCKETS; b++)
        {
          g_autoptr (GString) le = g_string_new (NULL);
          const char *labels[] = { "kind", kind->kind, "le", NULL, NULL };

          mv_prom_append_double (le, b < MV_OP_BUCKETS ? mv_op_bucket_bounds[b] : INFINITY);
          labels[3] = le->str;
          mv_prom_sample_u64 (out, "microvmd_reconcile_step_duration_seconds_bucket", labels,
                              b < MV_OP_BUCKETS ? kind->buckets[b] : kind->total);
        }
      {
        const char *labels[] = { "kind", kind->kind, NULL };
        mv_prom_sample_double (out, "microvmd_reconcile_step_duration_seconds_sum", labels,
                               kind->seconds_sum);
        mv_prom_sample_u64 (out, "microvmd_reconcile_step_duration_seconds_count", labels,
                            kind->total);
      }
    }
}

static void
render_machines (GString *out, GArray *rows)
{
  for (guint f = 0; f < G_N_ELEMENTS (machine_stats); f++)
    {
      mv_prom_family (out, machine_stats[f].name, machine_stats[f].type, machine_stats[f].help);
      for (guint i = 0; i < rows->len; i++)
        {
          MachineRow *row = &g_array_index (rows, MachineRow, i);
          const char *labels[] = { "id", row->machine->id,
                                   "name", row->machine->config->spec->name, NULL };

          if (!row->has_stats || (machine_stats[f].network && !row->stats.has_network))
            continue;
          append_stat (out, machine_stats[f].name, labels, machine_stats[f].value, &row->stats);
        }
    }

  mv_prom_family (out, "microvmd_machine_state", "gauge",
                  "The machine's observed state: 1 for the state it is in.");
  for (guint i = 0; i < rows->len; i++)
    {
      MvMachine *machine = g_array_index (rows, MachineRow, i).machine;
      const char *labels[] = { "id", machine->id, "name", machine->config->spec->name,
                               "state", mv_state_to_string (machine->status->state), NULL };

      mv_prom_sample_u64 (out, "microvmd_machine_state", labels, 1);
    }
  mv_prom_family (out, "microvmd_machine_health", "gauge",
                  "What the machine's health check finds: 1 for its finding (none: no check "
                  "or nothing said yet).");
  for (guint i = 0; i < rows->len; i++)
    {
      MvMachine *machine = g_array_index (rows, MachineRow, i).machine;
      const char *labels[] = { "id", machine->id, "name", machine->config->spec->name,
                               "health", health_of (machine), NULL };

      mv_prom_sample_u64 (out, "microvmd_machine_health", labels, 1);
    }
  mv_prom_family (out, "microvmd_machine_restarts_total", "counter",
                  "Times the machine was restarted by its restart policy.");
  for (guint i = 0; i < rows->len; i++)
    {
      MvMachine *machine = g_array_index (rows, MachineRow, i).machine;
      const char *labels[] = { "id", machine->id, "name", machine->config->spec->name, NULL };

      mv_prom_sample_u64 (out, "microvmd_machine_restarts_total", labels,
                          machine->status->restart_count);
    }
}

GString *
mv_prometheus_render (MvReconciler *reconciler)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_list (reconciler);
  g_autoptr (GArray) rows = g_array_sized_new (FALSE, TRUE, sizeof (MachineRow), machines->len);
  GString *out = g_string_sized_new (4096 + machines->len * 1536);

  for (guint i = 0; i < machines->len; i++)
    {
      MachineRow row = { .machine = machines->pdata[i] };

      /* A machine whose VMM cannot be read has its stats left out, as
       * GetAllStats does. */
      row.has_stats = row.machine->status->vmm &&
                      mv_reconciler_read_stats (row.machine, &row.stats, NULL);
      g_array_append_val (rows, row);
    }
  render_daemon (out, rows, reconciler);
  render_machines (out, rows);
  return out;
}

/* ---- The server ---- */

/* Only GET and HEAD are answered. */
static gboolean
refuse_method (SoupServerMessage *msg)
{
  const char *method = mv_soup.server_message_get_method (msg);

  if (g_str_equal (method, "GET") || g_str_equal (method, "HEAD"))
    return FALSE;
  mv_soup.message_headers_replace (mv_soup.server_message_get_response_headers (msg), "Allow",
                                   "GET, HEAD");
  mv_soup.server_message_set_status (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL);
  return TRUE;
}

/* Once the headers are in, before a body is read. */
static void
on_request_headers (SoupServer *server, SoupServerMessage *msg, const char *path,
                    GHashTable *query, gpointer user_data)
{
  refuse_method (msg);
}

static void
on_not_found (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
              gpointer user_data)
{
  mv_soup.server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
}

static void
on_metrics (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
            gpointer user_data)
{
  MvPrometheus *prometheus = user_data;
  GString *text;
  gsize length;
  gint64 now;

  if (refuse_method (msg))
    return;
  /* The handler is also asked for paths below /metrics/. */
  if (strcmp (path, MV_PROMETHEUS_PATH) != 0)
    {
      mv_soup.server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
      return;
    }
  now = g_get_monotonic_time ();
  if (!prometheus->cached || now - prometheus->cached_at >= MV_PROMETHEUS_CACHE_USEC)
    {
      text = mv_prometheus_render (prometheus->reconciler);
      length = text->len;
      g_clear_pointer (&prometheus->cached, g_bytes_unref);
      prometheus->cached = g_bytes_new_take (g_string_free (text, FALSE), length);
      prometheus->cached_at = now;
    }
  mv_soup.server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  mv_soup.message_headers_replace (mv_soup.server_message_get_response_headers (msg),
                                   "Content-Type", MV_PROM_CONTENT_TYPE);
  mv_soup.message_body_append_bytes (mv_soup.server_message_get_response_body (msg),
                                     prometheus->cached);
}

/* ---- Connections ---- */

static void
on_connection_gone (gpointer data, GObject *gone)
{
  MvPrometheus *prometheus = data;

  g_hash_table_remove (prometheus->connections, gone);
}

/* One over the cap is told so and closed at once; a client's retry finds
 * room once a scrape ends. */
static void
refuse_connection (GSocketConnection *connection)
{
  static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
                             "Content-Length: 0\r\n"
                             "Connection: close\r\n\r\n";
  GSocket *socket = g_socket_connection_get_socket (connection);

  /* A fresh socket's send buffer takes these bytes without waiting. */
  g_socket_set_blocking (socket, FALSE);
  g_socket_send (socket, busy, sizeof busy - 1, NULL, NULL);
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source,
             gpointer user_data)
{
  MvPrometheus *prometheus = user_data;
  g_autoptr (GSocketAddress) local = NULL, remote = NULL;
  g_autoptr (GError) error = NULL;

  if (g_hash_table_size (prometheus->connections) >= prometheus->max_connections)
    {
      g_debug ("Metrics: %u connections are open, the most [prometheus] max-connections "
               "allows: one more is refused", prometheus->max_connections);
      refuse_connection (connection);
      return TRUE;
    }
  local = g_socket_connection_get_local_address (connection, NULL);
  remote = g_socket_connection_get_remote_address (connection, NULL);
  if (!mv_soup.server_accept_iostream (prometheus->server, G_IO_STREAM (connection), local, remote,
                                       &error))
    {
      g_debug ("Metrics: cannot serve a connection: %s", error->message);
      return TRUE;
    }
  g_hash_table_add (prometheus->connections, connection);
  g_object_weak_ref (G_OBJECT (connection), on_connection_gone, prometheus);
  return TRUE;
}

MvPrometheus *
mv_prometheus_new (MvReconciler *reconciler, GSocketAddress *address, guint max_connections,
                   GError **error)
{
  g_autoptr (GSocketService) service = g_socket_service_new ();
  const char *failure = mv_soup_load ();
  MvPrometheus *prometheus;

  g_return_val_if_fail (max_connections > 0, NULL);
  if (failure)
    {
      mv_error_set (error, MV_ERROR_FAILED, "%s", failure);
      return NULL;
    }
  /* The connections are accepted here, not by libsoup, to count them. */
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), address,
                                      G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL, NULL,
                                      error))
    return NULL;
  prometheus = g_new0 (MvPrometheus, 1);
  prometheus->reconciler = reconciler;
  prometheus->max_connections = max_connections;
  prometheus->connections = g_hash_table_new (NULL, NULL);
  prometheus->server = mv_soup.server_new ("server-header", "microvmd/" PACKAGE_VERSION, NULL);
  mv_soup.server_add_early_handler (prometheus->server, NULL, on_request_headers, NULL, NULL);
  mv_soup.server_add_handler (prometheus->server, NULL, on_not_found, NULL, NULL);
  mv_soup.server_add_handler (prometheus->server, MV_PROMETHEUS_PATH, on_metrics, prometheus, NULL);
  prometheus->service = g_steal_pointer (&service);
  g_signal_connect (prometheus->service, "incoming", G_CALLBACK (on_incoming), prometheus);
  g_socket_service_start (prometheus->service);
  return prometheus;
}

void
mv_prometheus_free (MvPrometheus *prometheus)
{
  GHashTableIter iter;
  gpointer connection;

  if (!prometheus)
    return;
  g_socket_service_stop (prometheus->service);
  g_socket_listener_close (G_SOCKET_LISTENER (prometheus->service));
  g_signal_handlers_disconnect_by_data (prometheus->service, prometheus);
  g_object_unref (prometheus->service);
  g_hash_table_iter_init (&iter, prometheus->connections);
  while (g_hash_table_iter_next (&iter, &connection, NULL))
    g_object_weak_unref (connection, on_connection_gone, prometheus);
  g_hash_table_unref (prometheus->connections);
  mv_soup.server_disconnect (prometheus->server);
  g_object_unref (prometheus->server);
  g_clear_pointer (&prometheus->cached, g_bytes_unref);
  g_free (prometheus);
}
