/* The Prometheus endpoint: GET /metrics in the text exposition format
 * (docs/metrics.md lists every series), served by libsoup on the main
 * loop from [prometheus] listen. */
#pragma once
#include "reconcile/reconciler.h"

#include <gio/gio.h>

#define MV_PROMETHEUS_DEFAULT_LISTEN "127.0.0.1:9477"
#define MV_PROMETHEUS_PATH           "/metrics"
/* [prometheus] max-connections: connections served at once; one more is
 * answered 503 and closed. */
#define MV_PROMETHEUS_MAX_CONNECTIONS_DEFAULT 16
#define MV_PROMETHEUS_MAX_CONNECTIONS_MAX     1024
/* A scrape within this long of the last one is answered with its text:
 * a scrape of 1,000 machines takes about 10 ms to render. */
#define MV_PROMETHEUS_CACHE_USEC     G_USEC_PER_SEC

typedef struct _MvPrometheus MvPrometheus;

/* "ADDRESS:PORT" ("[ADDRESS]:PORT" for IPv6), a literal IP address and a
 * port of 1 to 65535 (0 too, any free one, if @any_port): no name is
 * looked up. Errors name [@group] listen. */
GSocketAddress *mv_listen_address_parse (const char *group, const char *text, gboolean any_port,
                                         GError **error);

/* Everything the endpoint serves, as of now: stats are read here (a few
 * /proc files a machine with a VMM). */
GString        *mv_prometheus_render (MvReconciler *reconciler);

/* Listens on @address, serving up to @max_connections at once;
 * @reconciler outlives it. */
MvPrometheus   *mv_prometheus_new (MvReconciler *reconciler, GSocketAddress *address,
                                   guint max_connections, GError **error);
void            mv_prometheus_free (MvPrometheus *prometheus);
