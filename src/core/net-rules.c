/* Published ports and firewall rules: their JSON forms and limits. */
#include "net-rules.h"
#include "errors.h"
#include "json-tree.h"
#include "network-spec.h"
#include "spec-private.h"
#include "text.h"

#include <string.h>

#define invalid(error, ...) mv_error_set ((error), MV_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

static const char *const protocol_names[] = {
  [MV_NET_PROTOCOL_ANY] = "any",
  [MV_NET_PROTOCOL_TCP] = "tcp",
  [MV_NET_PROTOCOL_UDP] = "udp",
  [MV_NET_PROTOCOL_ICMP] = "icmp",
};

const char *
mv_net_protocol_to_string (MvNetProtocol protocol)
{
  if ((guint) protocol >= G_N_ELEMENTS (protocol_names))
    return "unknown";
  return protocol_names[protocol];
}

gboolean
mv_net_protocol_from_string (const char *text, MvNetProtocol *protocol)
{
  for (guint i = 0; i < G_N_ELEMENTS (protocol_names); i++)
    if (g_strcmp0 (text, protocol_names[i]) == 0)
      {
        *protocol = (MvNetProtocol) i;
        return TRUE;
      }
  return FALSE;
}

static gboolean
port_protocol (MvNetProtocol protocol)
{
  return protocol == MV_NET_PROTOCOL_TCP || protocol == MV_NET_PROTOCOL_UDP;
}

/* The optional string member @name of the object at @where. */
static gboolean
read_word (const MvJson *object, const char *where, const char *name, const char **out,
           GError **error)
{
  const MvJson *node = mv_json_member (object, name);
  g_autofree char *field = g_strdup_printf ("%s.%s", where, name);

  if (node == NULL)
    return TRUE;
  return mv_json_read_string (node, field, out, error);
}

static gboolean
read_port_number (const MvJson *object, const char *where, const char *name, guint16 *out,
                  GError **error)
{
  const MvJson *node = mv_json_member (object, name);
  g_autofree char *field = g_strdup_printf ("%s.%s", where, name);
  g_autofree char *written = NULL;
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!mv_json_read_integer (node, field, &value, &written, error) ||
      !mv_spec_check_range (field, value, written, 1, MV_NET_PORT_MAX, FALSE, error))
    return FALSE;
  *out = (guint16) value;
  return TRUE;
}

/* ---- published ports ---- */

MvPortMapping *
mv_port_mapping_from_json (const MvJson *node, const char *field, GError **error)
{
  static const char *const known[] = { "host_ip", "host_port", "guest_port", "protocol", NULL };
  g_autofree MvPortMapping *port = g_new0 (MvPortMapping, 1);
  const char *host_ip = NULL;
  const char *protocol = NULL;

  g_return_val_if_fail (node != NULL && field != NULL, NULL);

  if (!mv_json_is_object (node))
    {
      mv_json_wrong_type (node, field, "an object", error);
      return NULL;
    }
  if (!mv_json_reject_unknown_members (node, field, known, error))
    return NULL;

  if (!read_word (node, field, "host_ip", &host_ip, error))
    return NULL;
  if (host_ip != NULL && !mv_ipv4_parse (host_ip, &port->host_address))
    {
      g_autofree char *shown = mv_text_excerpt (host_ip, -1, MV_EXCERPT_MAX_BYTES);

      invalid (error, "%s.host_ip: \"%s\" is not an IPv4 address (a dotted quad)", field, shown);
      return NULL;
    }

  if (mv_json_member (node, "host_port") == NULL)
    {
      invalid (error, "%s.host_port: required", field);
      return NULL;
    }
  if (!read_port_number (node, field, "host_port", &port->host_port, error))
    return NULL;
  port->guest_port = port->host_port;
  if (!read_port_number (node, field, "guest_port", &port->guest_port, error))
    return NULL;

  port->protocol = MV_NET_PROTOCOL_TCP;
  if (!read_word (node, field, "protocol", &protocol, error))
    return NULL;
  if (protocol != NULL &&
      (!mv_net_protocol_from_string (protocol, &port->protocol) || !port_protocol (port->protocol)))
    {
      g_autofree char *shown = mv_text_excerpt (protocol, -1, MV_EXCERPT_MAX_BYTES);

      invalid (error, "%s.protocol: \"%s\" is not one of tcp, udp", field, shown);
      return NULL;
    }
  return g_steal_pointer (&port);
}

void
mv_port_mapping_write (MvJsonOut *out, const MvPortMapping *port)
{
  g_autofree char *host_ip = mv_ipv4_to_string (port->host_address);

  mv_json_out_begin_object (out);
  mv_json_out_string_member (out, "host_ip", host_ip);
  mv_json_out_int_member (out, "host_port", port->host_port);
  mv_json_out_int_member (out, "guest_port", port->guest_port);
  mv_json_out_string_member (out, "protocol", mv_net_protocol_to_string (port->protocol));
  mv_json_out_end_object (out);
}

MvPortMapping *
mv_port_mapping_copy (const MvPortMapping *port)
{
  return g_memdup2 (port, sizeof *port);
}

gboolean
mv_port_mapping_overlaps (const MvPortMapping *a, const MvPortMapping *b)
{
  return a->protocol == b->protocol && a->host_port == b->host_port &&
         (a->host_address == b->host_address || a->host_address == 0 || b->host_address == 0);
}

const MvPortMapping *
mv_port_mappings_conflict (const GPtrArray *a, const GPtrArray *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, NULL);

  for (guint j = 0; j < b->len; j++)
    for (guint i = 0; i < a->len; i++)
      if (mv_port_mapping_overlaps (g_ptr_array_index (a, i), g_ptr_array_index (b, j)))
        return g_ptr_array_index (b, j);
  return NULL;
}

char *
mv_port_mapping_to_string (const MvPortMapping *port)
{
  g_autofree char *host_ip = mv_ipv4_to_string (port->host_address);

  return g_strdup_printf ("%s %s:%u -> %u", mv_net_protocol_to_string (port->protocol), host_ip,
                          port->host_port, port->guest_port);
}

gboolean
mv_port_mappings_validate (const GPtrArray *ports, GError **error)
{
  g_return_val_if_fail (ports != NULL, FALSE);

  if (ports->len > MV_PORTS_MAX)
    return invalid (error, "ports: %u ports, more than the limit of %d", ports->len, MV_PORTS_MAX);
  for (guint i = 0; i < ports->len; i++)
    {
      const MvPortMapping *port = g_ptr_array_index (ports, i);
      g_autofree char *host_field = g_strdup_printf ("ports[%u].host_port", i);
      g_autofree char *guest_field = g_strdup_printf ("ports[%u].guest_port", i);

      if (!mv_spec_check_range (host_field, port->host_port, NULL, 1, MV_NET_PORT_MAX, FALSE,
                                error) ||
          !mv_spec_check_range (guest_field, port->guest_port, NULL, 1, MV_NET_PORT_MAX, FALSE,
                                error))
        return FALSE;
      if (!port_protocol (port->protocol))
        return invalid (error, "ports[%u].protocol: %s is not one of tcp, udp", i,
                        mv_net_protocol_to_string (port->protocol));
      for (guint j = 0; j < i; j++)
        if (mv_port_mapping_overlaps (g_ptr_array_index (ports, j), port))
          return invalid (error, "ports[%u]: %s %u is published twice", i,
                          mv_net_protocol_to_string (port->protocol), port->host_port);
    }
  return TRUE;
}

/* ---- firewall rules ---- */

/* Decimal digits without a sign or leading zeros, 1 to 65535. */
static gboolean
parse_port_text (const char *text, gsize len, guint16 *out)
{
  guint value = 0;

  if (len == 0 || len > 5 || text[0] == '0')
    return FALSE;
  for (gsize i = 0; i < len; i++)
    {
      if (!g_ascii_isdigit (text[i]))
        return FALSE;
      value = value * 10 + (guint) (text[i] - '0');
    }
  if (value > MV_NET_PORT_MAX)
    return FALSE;
  *out = (guint16) value;
  return TRUE;
}

/* N (an integer or a string of one) or "N-M", N at most M. */
static gboolean
read_rule_port (const MvJson *node, const char *field, MvFirewallRule *rule, GError **error)
{
  const char *text;
  const char *dash;
  gboolean ok;
  g_autofree char *shown = NULL;

  if (node->kind == MV_JSON_INTEGER || node->kind == MV_JSON_REAL)
    {
      g_autofree char *written = NULL;
      gint64 value;

      if (!mv_json_read_integer (node, field, &value, &written, error) ||
          !mv_spec_check_range (field, value, written, 1, MV_NET_PORT_MAX, FALSE, error))
        return FALSE;
      rule->port_min = rule->port_max = (guint16) value;
      return TRUE;
    }
  if (node->kind != MV_JSON_STRING)
    return mv_json_wrong_type (node, field, "a port or a string \"N-M\"", error);

  text = node->string;
  dash = strchr (text, '-');
  if (dash == NULL)
    {
      ok = parse_port_text (text, strlen (text), &rule->port_min);
      rule->port_max = rule->port_min;
    }
  else
    ok = parse_port_text (text, (gsize) (dash - text), &rule->port_min) &&
         parse_port_text (dash + 1, strlen (dash + 1), &rule->port_max);
  if (ok)
    {
      if (rule->port_min <= rule->port_max)
        return TRUE;
      return invalid (error, "%s: \"%s\" ends before it starts (%u > %u)", field, text,
                      rule->port_min, rule->port_max);
    }
  shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);
  return invalid (error, "%s: \"%s\" is not a port or a range of ports (N or N-M, from 1 to %d)",
                  field, shown, MV_NET_PORT_MAX);
}

/* "ADDRESS/PREFIX" with the host bits zero, or an address alone (/32). */
static gboolean
read_rule_source (const char *text, const char *field, MvFirewallRule *rule, GError **error)
{
  g_autofree char *shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);
  g_autofree char *address = NULL;
  const char *slash = strchr (text, '/');
  guint prefix = 32;

  if (slash != NULL)
    {
      const char *digits = slash + 1;
      gsize len = strlen (digits);

      address = g_strndup (text, (gsize) (slash - text));
      if (len == 0 || len > 2 || strspn (digits, "0123456789") != len ||
          (len == 2 && digits[0] == '0'))
        return invalid (error, "%s: \"%s\" is not ADDRESS/PREFIX (a prefix length of 0 to 32)",
                        field, shown);
      prefix = (guint) g_ascii_strtoull (digits, NULL, 10);
      if (prefix > 32)
        return invalid (error, "%s: \"%s\" is not ADDRESS/PREFIX (a prefix length of 0 to 32)",
                        field, shown);
    }
  else
    address = g_strdup (text);
  if (!mv_ipv4_parse (address, &rule->source))
    return invalid (error, "%s: \"%s\" is not an IPv4 network (ADDRESS/PREFIX, as "
                    "\"10.0.0.0/8\")", field, shown);
  if ((rule->source & mv_ipv4_mask (prefix)) != rule->source)
    {
      g_autofree char *network = mv_ipv4_to_string (rule->source & mv_ipv4_mask (prefix));

      return invalid (error, "%s: \"%s\" has host bits set (the network is %s/%u)", field,
                      shown, network, prefix);
    }
  rule->source_prefix = prefix;
  return TRUE;
}

static MvFirewallRule *
parse_rule (const MvJson *node, guint index, GError **error)
{
  static const char *const known[] = { "action", "protocol", "port", "source", NULL };
  g_autofree char *where = g_strdup_printf ("firewall[%u]", index);
  g_autofree MvFirewallRule *rule = g_new0 (MvFirewallRule, 1);
  const MvJson *port;
  const char *action = NULL;
  const char *protocol = NULL;
  const char *source = NULL;

  if (!mv_json_is_object (node))
    {
      mv_json_wrong_type (node, where, "an object", error);
      return NULL;
    }
  if (!mv_json_reject_unknown_members (node, where, known, error))
    return NULL;

  if (!read_word (node, where, "action", &action, error))
    return NULL;
  if (action == NULL)
    {
      invalid (error, "%s.action: required (allow or deny)", where);
      return NULL;
    }
  if (strcmp (action, "allow") != 0 && strcmp (action, "deny") != 0)
    {
      g_autofree char *shown = mv_text_excerpt (action, -1, MV_EXCERPT_MAX_BYTES);

      invalid (error, "%s.action: \"%s\" is not one of allow, deny", where, shown);
      return NULL;
    }
  rule->allow = strcmp (action, "allow") == 0;

  rule->protocol = MV_NET_PROTOCOL_ANY;
  if (!read_word (node, where, "protocol", &protocol, error))
    return NULL;
  if (protocol != NULL && !mv_net_protocol_from_string (protocol, &rule->protocol))
    {
      g_autofree char *shown = mv_text_excerpt (protocol, -1, MV_EXCERPT_MAX_BYTES);

      invalid (error, "%s.protocol: \"%s\" is not one of tcp, udp, icmp, any", where, shown);
      return NULL;
    }

  if ((port = mv_json_member (node, "port")) != NULL)
    {
      g_autofree char *field = g_strdup_printf ("%s.port", where);

      if (!port_protocol (rule->protocol))
        {
          invalid (error, "%s: only for tcp and udp rules, not %s", field,
                   mv_net_protocol_to_string (rule->protocol));
          return NULL;
        }
      if (!read_rule_port (port, field, rule, error))
        return NULL;
    }

  if (!read_word (node, where, "source", &source, error))
    return NULL;
  if (source != NULL)
    {
      g_autofree char *field = g_strdup_printf ("%s.source", where);

      if (!read_rule_source (source, field, rule, error))
        return NULL;
    }
  return g_steal_pointer (&rule);
}

GPtrArray *
mv_firewall_rules_parse (JsonArray *rules, GError **error)
{
  g_autoptr(GPtrArray) parsed = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(MvJsonDoc) doc = NULL;

  g_return_val_if_fail (rules != NULL, NULL);

  if (json_array_get_length (rules) == 0)
    return g_steal_pointer (&parsed);
  node = json_node_init_array (json_node_alloc (), rules);
  doc = mv_json_doc_from_node (node);
  mv_json_each (element, mv_json_doc_root (doc))
    {
      MvFirewallRule *rule = parse_rule (element, element->index, error);

      if (rule == NULL)
        return NULL;
      g_ptr_array_add (parsed, rule);
    }
  return g_steal_pointer (&parsed);
}
