#include <string.h>

#include "core/errors.h"
#include "core/json-strict.h"
#include "core/net-rules.h"

/* JSON written with single quotes, for readable test documents. */
static JsonNode *
parse (const char *single_quoted)
{
  static const MvJsonLimits limits = { .max_bytes = 65536, .max_depth = 8 };
  g_autofree char *json = g_strdup (single_quoted);
  g_autoptr(GError) error = NULL;
  JsonNode *node;

  g_strdelimit (json, "'", '"');
  node = mv_json_parse (json, -1, &limits, "test", &error);
  g_assert_no_error (error);
  return node;
}

static GPtrArray *
parse_rules (const char *single_quoted, GError **error)
{
  g_autoptr(JsonNode) node = parse (single_quoted);

  g_assert_true (JSON_NODE_HOLDS_ARRAY (node));
  return mv_firewall_rules_parse (json_node_get_array (node), error);
}

static void
test_protocol_names (void)
{
  static const struct {
    MvNetProtocol protocol;
    const char   *name;
  } cases[] = {
    { MV_NET_PROTOCOL_ANY, "any" },
    { MV_NET_PROTOCOL_TCP, "tcp" },
    { MV_NET_PROTOCOL_UDP, "udp" },
    { MV_NET_PROTOCOL_ICMP, "icmp" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      MvNetProtocol back = MV_NET_PROTOCOL_ANY;

      g_assert_cmpstr (mv_net_protocol_to_string (cases[i].protocol), ==, cases[i].name);
      g_assert_true (mv_net_protocol_from_string (cases[i].name, &back));
      g_assert_cmpint (back, ==, cases[i].protocol);
    }
  g_assert_false (mv_net_protocol_from_string ("TCP", &(MvNetProtocol) { 0 }));
  g_assert_false (mv_net_protocol_from_string ("sctp", &(MvNetProtocol) { 0 }));
}

/* ---- firewall rules ---- */

static void
test_rules_good (void)
{
  static const struct {
    const char   *json;
    gboolean      allow;
    MvNetProtocol protocol;
    guint         port_min, port_max;
    const char   *source;   /* dotted quad */
    guint         prefix;
  } cases[] = {
    { "{'action':'allow'}", TRUE, MV_NET_PROTOCOL_ANY, 0, 0, "0.0.0.0", 0 },
    { "{'action':'deny'}", FALSE, MV_NET_PROTOCOL_ANY, 0, 0, "0.0.0.0", 0 },
    { "{'action':'allow','protocol':'tcp','port':22}", TRUE, MV_NET_PROTOCOL_TCP, 22, 22,
      "0.0.0.0", 0 },
    { "{'action':'allow','protocol':'tcp','port':22.0}", TRUE, MV_NET_PROTOCOL_TCP, 22, 22,
      "0.0.0.0", 0 },
    { "{'action':'allow','protocol':'udp','port':'53'}", TRUE, MV_NET_PROTOCOL_UDP, 53, 53,
      "0.0.0.0", 0 },
    { "{'action':'deny','protocol':'tcp','port':'1-65535'}", FALSE, MV_NET_PROTOCOL_TCP, 1,
      65535, "0.0.0.0", 0 },
    { "{'action':'allow','protocol':'tcp','port':'8000-8000'}", TRUE, MV_NET_PROTOCOL_TCP,
      8000, 8000, "0.0.0.0", 0 },
    { "{'action':'allow','protocol':'icmp','source':'10.0.0.0/8'}", TRUE, MV_NET_PROTOCOL_ICMP,
      0, 0, "10.0.0.0", 8 },
    { "{'action':'deny','protocol':'any','source':'192.168.1.7'}", FALSE, MV_NET_PROTOCOL_ANY,
      0, 0, "192.168.1.7", 32 },
    { "{'action':'deny','source':'192.168.1.7/32'}", FALSE, MV_NET_PROTOCOL_ANY, 0, 0,
      "192.168.1.7", 32 },
    { "{'action':'allow','source':'0.0.0.0/0'}", TRUE, MV_NET_PROTOCOL_ANY, 0, 0, "0.0.0.0", 0 },
    { "{'action':'allow','protocol':null,'port':null,'source':null}", TRUE, MV_NET_PROTOCOL_ANY,
      0, 0, "0.0.0.0", 0 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *array = g_strdup_printf ("[%s]", cases[i].json);
      g_autoptr(GError) error = NULL;
      g_autoptr(GPtrArray) rules = parse_rules (array, &error);
      const MvFirewallRule *rule;
      g_autofree char *source = NULL;

      g_test_message ("%s", cases[i].json);
      g_assert_no_error (error);
      g_assert_cmpuint (rules->len, ==, 1);
      rule = g_ptr_array_index (rules, 0);
      g_assert_cmpint (rule->allow, ==, cases[i].allow);
      g_assert_cmpint (rule->protocol, ==, cases[i].protocol);
      g_assert_cmpuint (rule->port_min, ==, cases[i].port_min);
      g_assert_cmpuint (rule->port_max, ==, cases[i].port_max);
      source = g_strdup_printf ("%u.%u.%u.%u", rule->source >> 24, (rule->source >> 16) & 0xff,
                                (rule->source >> 8) & 0xff, rule->source & 0xff);
      g_assert_cmpstr (source, ==, cases[i].source);
      g_assert_cmpuint (rule->source_prefix, ==, cases[i].prefix);
    }
}

static void
test_rules_order_kept (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) rules = parse_rules ("[{'action':'allow','protocol':'tcp','port':22,"
                                            "'source':'10.0.0.0/8'},{'action':'deny'}]", &error);

  g_assert_no_error (error);
  g_assert_cmpuint (rules->len, ==, 2);
  g_assert_true (((MvFirewallRule *) g_ptr_array_index (rules, 0))->allow);
  g_assert_false (((MvFirewallRule *) g_ptr_array_index (rules, 1))->allow);

  g_clear_pointer (&rules, g_ptr_array_unref);
  rules = parse_rules ("[]", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (rules->len, ==, 0);
}

static void
test_rules_bad (void)
{
  static const struct {
    const char *json;
    const char *message;
  } cases[] = {
    { "['allow']", "firewall[0]: expected an object, got a string" },
    { "[{'action':'allow'},{}]", "firewall[1].action: required (allow or deny)" },
    { "[{'action':'permit'}]", "firewall[0].action: \"permit\" is not one of allow, deny" },
    { "[{'action':true}]", "firewall[0].action: expected a string, got a boolean" },
    { "[{'allow':'tcp/22'}]", "firewall[0]: unknown field 'allow'" },
    { "[{'action':'allow','from':'10.0.0.0/8'}]", "firewall[0]: unknown field 'from'" },
    { "[{'action':'allow','protocol':'sctp'}]",
      "firewall[0].protocol: \"sctp\" is not one of tcp, udp, icmp, any" },
    { "[{'action':'allow','protocol':'TCP'}]",
      "firewall[0].protocol: \"TCP\" is not one of tcp, udp, icmp, any" },
    { "[{'action':'allow','protocol':6}]",
      "firewall[0].protocol: expected a string, got an integer" },
    /* Ports only where the protocol has them. */
    { "[{'action':'allow','port':22}]", "firewall[0].port: only for tcp and udp rules, not any" },
    { "[{'action':'allow','protocol':'icmp','port':22}]",
      "firewall[0].port: only for tcp and udp rules, not icmp" },
    /* 1 to 65535, at and past each end. */
    { "[{'action':'allow','protocol':'tcp','port':0}]",
      "firewall[0].port: 0 is below the minimum of 1" },
    { "[{'action':'allow','protocol':'tcp','port':65536}]",
      "firewall[0].port: 65536 is more than the limit of 65535" },
    { "[{'action':'allow','protocol':'tcp','port':-1}]",
      "firewall[0].port: -1 is below the minimum of 1" },
    { "[{'action':'allow','protocol':'tcp','port':22.5}]", "firewall[0].port: " },
    { "[{'action':'allow','protocol':'tcp','port':'0'}]",
      "firewall[0].port: \"0\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'65536'}]",
      "firewall[0].port: \"65536\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'1-65536'}]",
      "firewall[0].port: \"1-65536\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'022'}]",
      "firewall[0].port: \"022\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'80-'}]",
      "firewall[0].port: \"80-\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'-80'}]",
      "firewall[0].port: \"-80\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'80-90-100'}]",
      "firewall[0].port: \"80-90-100\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':' 80'}]",
      "firewall[0].port: \" 80\" is not a port or a range of ports (N or N-M, from 1 to 65535)" },
    { "[{'action':'allow','protocol':'tcp','port':'90-80'}]",
      "firewall[0].port: \"90-80\" ends before it starts (90 > 80)" },
    { "[{'action':'allow','protocol':'tcp','port':[80]}]",
      "firewall[0].port: expected a port or a string \"N-M\", got an array" },
    /* Sources: a network with its host bits zero. */
    { "[{'action':'deny','source':'10.0.0.1/8'}]",
      "firewall[0].source: \"10.0.0.1/8\" has host bits set (the network is 10.0.0.0/8)" },
    { "[{'action':'deny','source':'10.0.0.0/33'}]",
      "firewall[0].source: \"10.0.0.0/33\" is not ADDRESS/PREFIX (a prefix length of 0 to 32)" },
    { "[{'action':'deny','source':'10.0.0.0/'}]",
      "firewall[0].source: \"10.0.0.0/\" is not ADDRESS/PREFIX (a prefix length of 0 to 32)" },
    { "[{'action':'deny','source':'10.0.0.0/08'}]",
      "firewall[0].source: \"10.0.0.0/08\" is not ADDRESS/PREFIX (a prefix length of 0 to 32)" },
    { "[{'action':'deny','source':'10.0.0/8'}]",
      "firewall[0].source: \"10.0.0/8\" is not an IPv4 network (ADDRESS/PREFIX, as \"10.0.0.0/8\")" },
    { "[{'action':'deny','source':'fd00::/8'}]",
      "firewall[0].source: \"fd00::/8\" is not an IPv4 network (ADDRESS/PREFIX, as \"10.0.0.0/8\")" },
    { "[{'action':'deny','source':'any'}]",
      "firewall[0].source: \"any\" is not an IPv4 network (ADDRESS/PREFIX, as \"10.0.0.0/8\")" },
    { "[{'action':'deny','source':8}]", "firewall[0].source: expected a string, got an integer" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GPtrArray) rules = NULL;

      g_test_message ("%s", cases[i].json);
      rules = parse_rules (cases[i].json, &error);
      g_assert_null (rules);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (g_str_has_suffix (cases[i].message, ": "))
        g_assert_true (g_str_has_prefix (error->message, cases[i].message));
      else
        g_assert_cmpstr (error->message, ==, cases[i].message);
    }
}

/* ---- published ports ---- */

static MvPortMapping *
port_from (const char *single_quoted, GError **error)
{
  g_autoptr(JsonNode) node = parse (single_quoted);
  g_autoptr(MvJsonDoc) doc = mv_json_doc_from_node (node);

  return mv_port_mapping_from_json (mv_json_doc_root (doc), "ports[3]", error);
}

static void
test_port_good (void)
{
  static const struct {
    const char   *json;
    guint32       host_address;
    guint         host_port, guest_port;
    MvNetProtocol protocol;
    const char   *text;
  } cases[] = {
    { "{'host_port':8080}", 0, 8080, 8080, MV_NET_PROTOCOL_TCP, "tcp 0.0.0.0:8080 -> 8080" },
    { "{'host_port':8080,'guest_port':80}", 0, 8080, 80, MV_NET_PROTOCOL_TCP,
      "tcp 0.0.0.0:8080 -> 80" },
    { "{'host_ip':'127.0.0.1','host_port':1,'guest_port':65535,'protocol':'udp'}", 0x7f000001,
      1, 65535, MV_NET_PROTOCOL_UDP, "udp 127.0.0.1:1 -> 65535" },
    { "{'host_ip':'0.0.0.0','host_port':65535,'protocol':'tcp'}", 0, 65535, 65535,
      MV_NET_PROTOCOL_TCP, "tcp 0.0.0.0:65535 -> 65535" },
    { "{'host_ip':null,'host_port':53,'guest_port':null,'protocol':null}", 0, 53, 53,
      MV_NET_PROTOCOL_TCP, "tcp 0.0.0.0:53 -> 53" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree MvPortMapping *port = port_from (cases[i].json, &error);
      g_autofree MvPortMapping *back = NULL;
      g_autofree char *text = NULL;
      g_autoptr(MvJsonDoc) doc = NULL;
      g_autofree char *written = NULL;
      MvJsonOut out;

      g_test_message ("%s", cases[i].json);
      g_assert_no_error (error);
      g_assert_cmphex (port->host_address, ==, cases[i].host_address);
      g_assert_cmpuint (port->host_port, ==, cases[i].host_port);
      g_assert_cmpuint (port->guest_port, ==, cases[i].guest_port);
      g_assert_cmpint (port->protocol, ==, cases[i].protocol);
      text = mv_port_mapping_to_string (port);
      g_assert_cmpstr (text, ==, cases[i].text);

      /* Written out and read back, the same mapping. */
      mv_json_out_init (&out, MV_JSON_OUT_TEXT);
      mv_port_mapping_write (&out, port);
      written = mv_json_out_steal_text (&out);
      mv_json_out_clear (&out);
      doc = mv_json_read (written, -1, &(MvJsonLimits) { 4096, 2 }, "ports[0]", &error);
      g_assert_no_error (error);
      back = mv_port_mapping_from_json (mv_json_doc_root (doc), "ports[0]", &error);
      g_assert_no_error (error);
      g_assert_cmpmem (back, sizeof *back, port, sizeof *port);
    }
}

static void
test_port_bad (void)
{
  static const struct {
    const char *json;
    const char *message;
  } cases[] = {
    { "[8080]", "ports[3]: expected an object, got an array" },
    { "{}", "ports[3].host_port: required" },
    { "{'guest_port':80}", "ports[3].host_port: required" },
    { "{'host_port':8080,'container_port':80}", "ports[3]: unknown field 'container_port'" },
    { "{'host_port':0}", "ports[3].host_port: 0 is below the minimum of 1" },
    { "{'host_port':65536}", "ports[3].host_port: 65536 is more than the limit of 65535" },
    { "{'host_port':'8080'}", "ports[3].host_port: expected an integer, got a string" },
    { "{'host_port':8080,'guest_port':0}", "ports[3].guest_port: 0 is below the minimum of 1" },
    { "{'host_port':8080,'guest_port':65536}",
      "ports[3].guest_port: 65536 is more than the limit of 65535" },
    { "{'host_port':8080,'protocol':'icmp'}",
      "ports[3].protocol: \"icmp\" is not one of tcp, udp" },
    { "{'host_port':8080,'protocol':'any'}", "ports[3].protocol: \"any\" is not one of tcp, udp" },
    { "{'host_port':8080,'protocol':'sctp'}",
      "ports[3].protocol: \"sctp\" is not one of tcp, udp" },
    { "{'host_port':8080,'host_ip':'localhost'}",
      "ports[3].host_ip: \"localhost\" is not an IPv4 address (a dotted quad)" },
    { "{'host_port':8080,'host_ip':'127.0.0.1:80'}",
      "ports[3].host_ip: \"127.0.0.1:80\" is not an IPv4 address (a dotted quad)" },
    { "{'host_port':8080,'host_ip':'::1'}",
      "ports[3].host_ip: \"::1\" is not an IPv4 address (a dotted quad)" },
    { "{'host_port':8080,'host_ip':'10.0.0.0/8'}",
      "ports[3].host_ip: \"10.0.0.0/8\" is not an IPv4 address (a dotted quad)" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree MvPortMapping *port = NULL;

      g_test_message ("%s", cases[i].json);
      port = port_from (cases[i].json, &error);
      g_assert_null (port);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (g_str_has_prefix (cases[i].message, "ports[3]: expected"))
        g_assert_true (g_str_has_prefix (error->message, "ports[3]: expected an object"));
      else
        g_assert_cmpstr (error->message, ==, cases[i].message);
    }
}

static MvPortMapping *
port_new (MvNetProtocol protocol, guint32 host_address, guint16 host_port)
{
  MvPortMapping *port = g_new0 (MvPortMapping, 1);

  port->protocol = protocol;
  port->host_address = host_address;
  port->host_port = host_port;
  port->guest_port = 80;
  return port;
}

static void
test_port_conflicts (void)
{
  static const struct {
    MvNetProtocol protocol_a;
    guint32       address_a;
    guint         port_a;
    MvNetProtocol protocol_b;
    guint32       address_b;
    guint         port_b;
    gboolean      conflict;
  } cases[] = {
    { MV_NET_PROTOCOL_TCP, 0, 8080, MV_NET_PROTOCOL_TCP, 0, 8080, TRUE },
    { MV_NET_PROTOCOL_TCP, 0, 8080, MV_NET_PROTOCOL_TCP, 0x7f000001, 8080, TRUE },
    { MV_NET_PROTOCOL_TCP, 0x7f000001, 8080, MV_NET_PROTOCOL_TCP, 0, 8080, TRUE },
    { MV_NET_PROTOCOL_TCP, 0x7f000001, 8080, MV_NET_PROTOCOL_TCP, 0x7f000001, 8080, TRUE },
    { MV_NET_PROTOCOL_TCP, 0x7f000001, 8080, MV_NET_PROTOCOL_TCP, 0x7f000002, 8080, FALSE },
    { MV_NET_PROTOCOL_TCP, 0, 8080, MV_NET_PROTOCOL_UDP, 0, 8080, FALSE },
    { MV_NET_PROTOCOL_TCP, 0, 8080, MV_NET_PROTOCOL_TCP, 0, 8081, FALSE },
    { MV_NET_PROTOCOL_UDP, 0, 53, MV_NET_PROTOCOL_UDP, 0x0a000001, 53, TRUE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GPtrArray) a = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) b = g_ptr_array_new_with_free_func (g_free);
      MvPortMapping *other = port_new (cases[i].protocol_b, cases[i].address_b, cases[i].port_b);

      g_test_message ("case %u", i);
      g_ptr_array_add (a, port_new (MV_NET_PROTOCOL_UDP, 0, 9999));
      g_ptr_array_add (a, port_new (cases[i].protocol_a, cases[i].address_a, cases[i].port_a));
      g_ptr_array_add (b, port_new (MV_NET_PROTOCOL_TCP, 0, 7777));
      g_ptr_array_add (b, other);
      g_assert_true (mv_port_mappings_conflict (a, b) == (cases[i].conflict ? other : NULL));
      g_assert_cmpint (mv_port_mapping_overlaps (g_ptr_array_index (a, 1), other), ==,
                       cases[i].conflict);
    }
}

/* The first of @b that @a holds, in the order of @b. */
static void
test_port_conflict_first (void)
{
  g_autoptr(GPtrArray) a = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) b = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();

  g_ptr_array_add (a, port_new (MV_NET_PROTOCOL_TCP, 0, 443));
  g_ptr_array_add (a, port_new (MV_NET_PROTOCOL_TCP, 0, 80));
  g_ptr_array_add (b, port_new (MV_NET_PROTOCOL_TCP, 0, 22));
  g_ptr_array_add (b, port_new (MV_NET_PROTOCOL_TCP, 0, 80));
  g_ptr_array_add (b, port_new (MV_NET_PROTOCOL_TCP, 0, 443));
  g_assert_true (mv_port_mappings_conflict (a, b) == g_ptr_array_index (b, 1));
  g_assert_null (mv_port_mappings_conflict (a, none));
  g_assert_null (mv_port_mappings_conflict (none, b));
}

static void
test_ports_validate (void)
{
  g_autoptr(GPtrArray) ports = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  MvPortMapping *port;

  for (guint i = 0; i < MV_PORTS_MAX; i++)
    g_ptr_array_add (ports, port_new (MV_NET_PROTOCOL_TCP, 0, (guint16) (1000 + i)));
  g_assert_true (mv_port_mappings_validate (ports, &error));
  g_assert_no_error (error);
  g_ptr_array_add (ports, port_new (MV_NET_PROTOCOL_TCP, 0, 2000));
  g_assert_false (mv_port_mappings_validate (ports, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "ports: 65 ports, more than the limit of 64");
  g_clear_error (&error);

  g_ptr_array_set_size (ports, 0);
  g_ptr_array_add (ports, port_new (MV_NET_PROTOCOL_TCP, 0x7f000001, 8080));
  g_ptr_array_add (ports, port_new (MV_NET_PROTOCOL_UDP, 0, 8080));
  g_ptr_array_add (ports, port_new (MV_NET_PROTOCOL_TCP, 0x7f000002, 8080));
  g_assert_true (mv_port_mappings_validate (ports, &error));
  g_ptr_array_add (ports, port_new (MV_NET_PROTOCOL_TCP, 0, 8080));
  g_assert_false (mv_port_mappings_validate (ports, &error));
  g_assert_cmpstr (error->message, ==, "ports[3]: tcp 8080 is published twice");
  g_clear_error (&error);

  g_ptr_array_set_size (ports, 0);
  port = port_new (MV_NET_PROTOCOL_TCP, 0, 0);
  g_ptr_array_add (ports, port);
  g_assert_false (mv_port_mappings_validate (ports, &error));
  g_assert_cmpstr (error->message, ==, "ports[0].host_port: 0 is below the minimum of 1");
  g_clear_error (&error);
  port->host_port = 80;
  port->guest_port = 0;
  g_assert_false (mv_port_mappings_validate (ports, &error));
  g_assert_cmpstr (error->message, ==, "ports[0].guest_port: 0 is below the minimum of 1");
  g_clear_error (&error);
  port->guest_port = 80;
  port->protocol = MV_NET_PROTOCOL_ICMP;
  g_assert_false (mv_port_mappings_validate (ports, &error));
  g_assert_cmpstr (error->message, ==, "ports[0].protocol: icmp is not one of tcp, udp");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/net-rules/protocol-names", test_protocol_names);
  g_test_add_func ("/net-rules/firewall/good", test_rules_good);
  g_test_add_func ("/net-rules/firewall/order", test_rules_order_kept);
  g_test_add_func ("/net-rules/firewall/bad", test_rules_bad);
  g_test_add_func ("/net-rules/ports/good", test_port_good);
  g_test_add_func ("/net-rules/ports/bad", test_port_bad);
  g_test_add_func ("/net-rules/ports/conflicts", test_port_conflicts);
  g_test_add_func ("/net-rules/ports/conflict-first", test_port_conflict_first);
  g_test_add_func ("/net-rules/ports/validate", test_ports_validate);
  return g_test_run ();
}
