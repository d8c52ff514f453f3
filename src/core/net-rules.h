/* What a machine's spec says about traffic to it: the ports it publishes
 * on the host (the spec's "ports") and the rules for what may enter it
 * (its "firewall"). Pure: the model and its JSON forms; the host network
 * carries them out.
 *
 * Firewall rules apply to traffic entering the guest, whether from the
 * host, from other guests or through a published port. They are taken in
 * order and the first rule that matches decides; traffic that no rule
 * matches is allowed. Replies to connections the guest opened itself
 * always pass, whatever the rules say. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "json-out.h"
#include "json-tree.h"

#define MV_PORTS_MAX       64
#define MV_NET_PORT_MAX    65535

typedef enum {
  MV_NET_PROTOCOL_ANY,
  MV_NET_PROTOCOL_TCP,
  MV_NET_PROTOCOL_UDP,
  MV_NET_PROTOCOL_ICMP,
} MvNetProtocol;

/* A published port: host_address:host_port on the host reaches guest_port
 * in the guest. */
typedef struct {
  guint32       host_address;   /* IPv4, host byte order; 0 = every address of the host */
  guint16       host_port;
  guint16       guest_port;
  MvNetProtocol protocol;       /* TCP or UDP */
} MvPortMapping;

/* One ingress rule: traffic entering the guest. */
typedef struct {
  gboolean      allow;          /* FALSE: deny (dropped) */
  MvNetProtocol protocol;       /* ANY matches every protocol */
  guint16       port_min, port_max;  /* 0, 0: every port; only for TCP and UDP */
  guint32       source;         /* network address, host byte order */
  guint         source_prefix;  /* 0 with source 0: from anywhere */
} MvFirewallRule;

/* "any", "tcp", "udp", "icmp". */
const char    *mv_net_protocol_to_string (MvNetProtocol protocol);
gboolean       mv_net_protocol_from_string (const char *text, MvNetProtocol *protocol);

/* ---- published ports ---- */

/* One element of the spec's "ports", @field its name ("ports[2]"):
 * {"host_ip": dotted quad (default any), "host_port": 1-65535,
 * "guest_port": 1-65535 (default host_port), "protocol": "tcp" or "udp"
 * (default tcp)}, read strictly; MV_ERROR_INVALID_ARGUMENT naming
 * "@field.member". */
MvPortMapping *mv_port_mapping_from_json (const MvJson *node, const char *field, GError **error);
/* Every member written out, so that a mapping has one spelling. */
void           mv_port_mapping_write (MvJsonOut *out, const MvPortMapping *port);
MvPortMapping *mv_port_mapping_copy (const MvPortMapping *port);
/* Whether @a and @b take the same port of the host: the same protocol and
 * host port, and the same host address or either of them 0. */
gboolean       mv_port_mapping_overlaps (const MvPortMapping *a, const MvPortMapping *b);
/* The first mapping of @b that @a publishes too (same protocol and host
 * port, and the same host address or either of them 0), or NULL. */
const MvPortMapping *mv_port_mappings_conflict (const GPtrArray *a, const GPtrArray *b);
/* "tcp 0.0.0.0:8080 -> 80" */
char          *mv_port_mapping_to_string (const MvPortMapping *port);
/* The limits of @ports (MvPortMapping*) that a spec's must keep: at most
 * MV_PORTS_MAX, ports 1-65535, TCP or UDP, no host port twice
 * ("ports[1]: tcp 8080 is published twice"). */
gboolean       mv_port_mappings_validate (const GPtrArray *ports, GError **error);

/* ---- firewall rules ---- */

/* MvFirewallRule* (free with g_free) from the spec's firewall array:
 * each {"action": "allow" or "deny", "protocol": "tcp", "udp", "icmp" or
 * "any" (default any), "port": N or "N-M" (only with tcp or udp), "source":
 * "ADDRESS/PREFIX" (default "0.0.0.0/0", host bits zero; an address alone
 * is /32)}, read strictly. MV_ERROR_INVALID_ARGUMENT naming
 * "firewall[N].field". */
GPtrArray     *mv_firewall_rules_parse (JsonArray *rules, GError **error);
