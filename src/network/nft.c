/* MvNft: microvmd's nftables table (nft.h). Commands are nft's own
 * language, built here from checked IDs, checked interface names and
 * numbers only, and run as one buffer: libnftables sends a buffer to the
 * kernel as one batch, which is committed whole or not at all. */
#include "nft.h"

#include "core/errors.h"
#include "nm.h"

#include <json-glib/json-glib.h>
#include <nftables/libnftables.h>
#include <string.h>

#define TABLE            "inet " MV_NFT_TABLE
#define CHAIN_PREROUTING "nat-prerouting"
#define CHAIN_OUTPUT     "nat-output"
#define CHAIN_FORWARD    "forward"
#define CHAIN_LOCAL_OUT  "output"
#define CHAIN_MACHINES   "machines"
#define CHAIN_NETWORKS   "networks"
#define CHAIN_WAKE       "wake"
#define CHAIN_MASQUERADE "nat-postrouting"

/* The chains that hold tagged rules; a tagged rule found anywhere else is
 * not one of ours and is left alone. */
static const char *const tagged_chains[] = {
  CHAIN_PREROUTING, CHAIN_OUTPUT, CHAIN_MACHINES, CHAIN_NETWORKS, CHAIN_WAKE, CHAIN_MASQUERADE,
};

/* The NFLOG group is 16 bits wide in the kernel's log expression. */
#define WAKE_GROUP_MAX 65535

struct _MvNft {
  GMutex          lock;         /* guards ctx: libnftables is not thread-safe */
  struct nft_ctx *ctx;
  guint           wake_group;
};

/* A rule of the table as listed: its chain, handle and comment. */
typedef struct {
  char   *chain;
  gint64  handle;
  char   *comment;
} ListedRule;

static void
listed_rule_free (ListedRule *rule)
{
  g_free (rule->chain);
  g_free (rule->comment);
  g_free (rule);
}

/* ----- input checks ----- */

gboolean
mv_nft_check_id (const char  *id,
                 GError     **error)
{
  gsize length;

  if (id == NULL || *id == '\0')
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "an ID for the packet rules is empty");
  length = strlen (id);
  if (length > MV_NFT_ID_MAX)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "ID \"%.16s...\" is %zu bytes long; the limit is %d",
                         id, length, MV_NFT_ID_MAX);
  for (const char *p = id; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_')
      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                           "ID \"%s\" may hold only letters, digits, '-' and '_'", id);
  return TRUE;
}

static gboolean
check_prefix (guint        prefix,
              const char  *what,
              GError     **error)
{
  if (prefix > 32)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: prefix length %u is out of range 0 to 32", what, prefix);
  return TRUE;
}

static gboolean
check_port (const MvNftPort  *port,
            GError          **error)
{
  if (port->protocol != MV_NFT_TCP && port->protocol != MV_NFT_UDP)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "published port %u: the protocol must be TCP or UDP", port->host_port);
  if (port->host_port == 0 || port->guest_port == 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "published port %u -> %u: ports are 1 to 65535",
                         port->host_port, port->guest_port);
  return TRUE;
}

static gboolean
check_rule (const MvNftRule  *rule,
            guint             index,
            GError          **error)
{
  gboolean any_port = rule->port_min == 0 && rule->port_max == 0;

  if (rule->protocol != MV_NFT_ANY && rule->protocol != MV_NFT_TCP &&
      rule->protocol != MV_NFT_UDP && rule->protocol != MV_NFT_ICMP)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "firewall rule %u: unknown protocol %d", index, rule->protocol);
  if (!any_port && rule->protocol != MV_NFT_TCP && rule->protocol != MV_NFT_UDP)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "firewall rule %u: ports need the protocol TCP or UDP", index);
  if (!any_port && (rule->port_min == 0 || rule->port_min > rule->port_max))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "firewall rule %u: port range %u-%u is not 1 <= min <= max <= 65535",
                         index, rule->port_min, rule->port_max);
  return check_prefix (rule->source_prefix, "firewall rule source", error);
}

static gboolean
check_machine (const MvNftMachine  *machine,
               GError             **error)
{
  if (!mv_nft_check_id (machine->machine_id, error) ||
      !mv_nm_check_ifname (machine->bridge, error))
    return FALSE;
  if (machine->address == 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "machine %s: the guest's address is 0.0.0.0", machine->machine_id);
  if ((machine->n_ports > 0 && machine->ports == NULL) ||
      (machine->n_rules > 0 && machine->rules == NULL))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "machine %s: ports or rules are counted but missing", machine->machine_id);
  for (guint i = 0; i < machine->n_ports; i++)
    if (!check_port (&machine->ports[i], error))
      return FALSE;
  for (guint i = 0; i < machine->n_rules; i++)
    if (!check_rule (&machine->rules[i], i, error))
      return FALSE;
  return TRUE;
}

/* ----- formatting ----- */

#define IPV4_TEXT_SIZE 16

static const char *
format_ipv4 (char    text[IPV4_TEXT_SIZE],
             guint32 address)
{
  g_snprintf (text, IPV4_TEXT_SIZE, "%u.%u.%u.%u",
              (address >> 24) & 0xff, (address >> 16) & 0xff, (address >> 8) & 0xff, address & 0xff);
  return text;
}

static guint32
prefix_mask (guint prefix)
{
  return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

static const char *
l4_name (MvNftProtocol protocol)
{
  return protocol == MV_NFT_UDP ? "udp" : "tcp";
}

static void
append_port_rules (GString         *commands,
                   const char      *tag,
                   guint32          guest,
                   const MvNftPort *port)
{
  char guest_text[IPV4_TEXT_SIZE], host_text[IPV4_TEXT_SIZE];
  g_autofree char *outside = NULL, *local = NULL;
  const char *l4 = l4_name (port->protocol);

  if (port->host_address != 0)
    {
      outside = g_strdup_printf ("ip daddr %s", format_ipv4 (host_text, port->host_address));
      local = g_strdup (outside);
    }
  else
    {
      outside = g_strdup ("meta nfproto ipv4 fib daddr type local");
      /* The host's own loopback services keep their ports: a DNAT of
       * 127.0.0.1 to a guest would take them over and, without
       * route_localnet, could not be routed anyway. */
      local = g_strdup ("meta nfproto ipv4 ip daddr != 127.0.0.0/8 fib daddr type local");
    }
  format_ipv4 (guest_text, guest);
  g_string_append_printf (commands,
                          "add rule " TABLE " " CHAIN_PREROUTING " %s %s dport %u dnat ip to %s:%u comment \"%s\"\n",
                          outside, l4, port->host_port, guest_text, port->guest_port, tag);
  g_string_append_printf (commands,
                          "add rule " TABLE " " CHAIN_OUTPUT " %s %s dport %u dnat ip to %s:%u comment \"%s\"\n",
                          local, l4, port->host_port, guest_text, port->guest_port, tag);
}

static void
append_firewall_rule (GString         *commands,
                      const char      *tag,
                      const char      *bridge,
                      guint32          guest,
                      const MvNftRule *rule)
{
  char guest_text[IPV4_TEXT_SIZE], source_text[IPV4_TEXT_SIZE];

  /* By the guest's address alone: in the output hook the interface is
   * still the one routed to before the DNAT of a published port (lo), and
   * the networks' subnets never overlap, so the address is the guest's
   * wherever it goes. */
  g_string_append_printf (commands, "add rule " TABLE " " CHAIN_MACHINES " ip daddr %s",
                          format_ipv4 (guest_text, guest));
  if (rule->source_prefix > 0)
    g_string_append_printf (commands, " ip saddr %s/%u",
                            format_ipv4 (source_text, rule->source & prefix_mask (rule->source_prefix)),
                            rule->source_prefix);
  if (rule->protocol == MV_NFT_ICMP)
    g_string_append (commands, " meta l4proto icmp");
  else if (rule->protocol != MV_NFT_ANY && rule->port_min == 0)
    g_string_append_printf (commands, " meta l4proto %s", l4_name (rule->protocol));
  else if (rule->protocol != MV_NFT_ANY && rule->port_min == rule->port_max)
    g_string_append_printf (commands, " %s dport %u", l4_name (rule->protocol), rule->port_min);
  else if (rule->protocol != MV_NFT_ANY)
    g_string_append_printf (commands, " %s dport %u-%u",
                            l4_name (rule->protocol), rule->port_min, rule->port_max);
  g_string_append_printf (commands, " %s comment \"%s\"\n", rule->allow ? "accept" : "drop", tag);
}

/* ----- running nft ----- */

/* nft's error output quotes the command and marks the spot on further
 * lines; its "Error:" lines say what went wrong. */
static char *
error_text (const char *output)
{
  g_auto (GStrv) lines = g_strsplit (output != NULL ? output : "", "\n", -1);
  g_autoptr (GString) text = g_string_new (NULL);

  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], "Error:"))
      {
        if (text->len > 0)
          g_string_append (text, "; ");
        g_string_append (text, g_strstrip (lines[i]));
      }
  if (text->len == 0)
    g_string_append (text, output != NULL && *output != '\0' ? g_strstrip (lines[0]) : "no message");
  return g_string_free (g_steal_pointer (&text), FALSE);
}

/* Runs @commands as one batch; with @listing, the output is JSON with
 * handles and is returned in @output. */
static gboolean
run_locked (MvNft       *nft,
            const char  *commands,
            gboolean     listing,
            char       **output,
            GError     **error)
{
  int rc;
  const char *out, *err;

  nft_ctx_output_set_flags (nft->ctx, listing ? NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE : 0);
  rc = nft_run_cmd_from_buffer (nft->ctx, commands);
  /* Reading a buffer empties it for the next command. */
  out = nft_ctx_get_output_buffer (nft->ctx);
  err = nft_ctx_get_error_buffer (nft->ctx);
  if (rc != 0)
    {
      g_autofree char *text = error_text (err);

      return mv_error_set (error, MV_ERROR_FAILED, "nftables refused the command: %s", text);
    }
  if (output != NULL)
    *output = g_strdup (out);
  return TRUE;
}

static gboolean
is_tagged_chain (const char *chain)
{
  for (gsize i = 0; i < G_N_ELEMENTS (tagged_chains); i++)
    if (g_strcmp0 (chain, tagged_chains[i]) == 0)
      return TRUE;
  return FALSE;
}

/* The rules with a comment in the chains that hold tagged rules. An
 * array of ListedRule. */
static GPtrArray *
list_rules_locked (MvNft   *nft,
                   GError **error)
{
  g_autofree char *output = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) listed_rule_free);
  g_autoptr (GError) parse_error = NULL;
  JsonNode *root;
  JsonArray *items;

  if (!run_locked (nft, "list table " TABLE "\n", TRUE, &output, error))
    return NULL;
  if (!json_parser_load_from_data (parser, output, -1, &parse_error))
    {
      mv_error_set (error, MV_ERROR_FAILED, "nft listed the table as unreadable JSON: %s",
                    parse_error->message);
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) ||
      !json_object_has_member (json_node_get_object (root), "nftables") ||
      !JSON_NODE_HOLDS_ARRAY (json_object_get_member (json_node_get_object (root), "nftables")))
    {
      mv_error_set (error, MV_ERROR_FAILED, "nft listed the table without an \"nftables\" array");
      return NULL;
    }
  items = json_object_get_array_member (json_node_get_object (root), "nftables");
  for (guint i = 0; i < json_array_get_length (items); i++)
    {
      JsonNode *item = json_array_get_element (items, i);
      JsonNode *member;
      JsonObject *rule;
      ListedRule *listed;

      if (!JSON_NODE_HOLDS_OBJECT (item) ||
          (member = json_object_get_member (json_node_get_object (item), "rule")) == NULL ||
          !JSON_NODE_HOLDS_OBJECT (member))
        continue;
      rule = json_node_get_object (member);
      if (!is_tagged_chain (json_object_get_string_member_with_default (rule, "chain", NULL)) ||
          json_object_get_string_member_with_default (rule, "comment", NULL) == NULL ||
          json_object_get_int_member_with_default (rule, "handle", 0) <= 0)
        continue;
      listed = g_new0 (ListedRule, 1);
      listed->chain = g_strdup (json_object_get_string_member (rule, "chain"));
      listed->handle = json_object_get_int_member (rule, "handle");
      listed->comment = g_strdup (json_object_get_string_member (rule, "comment"));
      g_ptr_array_add (rules, listed);
    }
  return g_steal_pointer (&rules);
}

static void
append_deletions (GString    *commands,
                  GPtrArray  *rules,
                  const char *tag)
{
  for (guint i = 0; i < rules->len; i++)
    {
      ListedRule *rule = g_ptr_array_index (rules, i);

      if (strcmp (rule->comment, tag) == 0)
        g_string_append_printf (commands, "delete rule " TABLE " %s handle %" G_GINT64_FORMAT "\n",
                                rule->chain, rule->handle);
    }
}

/* Replaces every rule tagged @tag with @additions (nft commands, maybe
 * empty) in one batch. */
static gboolean
replace_tagged (MvNft       *nft,
                const char  *tag,
                const char  *additions,
                GError     **error)
{
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&nft->lock);
  g_autoptr (GPtrArray) rules = list_rules_locked (nft, error);
  g_autoptr (GString) commands = g_string_new (NULL);

  if (rules == NULL)
    return FALSE;
  append_deletions (commands, rules, tag);
  g_string_append (commands, additions);
  if (commands->len == 0)
    return TRUE;
  return run_locked (nft, commands->str, FALSE, NULL, error);
}

static int
compare_ids (gconstpointer a,
             gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static GPtrArray *
list_tagged (MvNft       *nft,
             const char  *tag_prefix,
             GError     **error)
{
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&nft->lock);
  g_autoptr (GPtrArray) rules = list_rules_locked (nft, error);
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) ids = g_ptr_array_new_with_free_func (g_free);

  if (rules == NULL)
    return NULL;
  for (guint i = 0; i < rules->len; i++)
    {
      ListedRule *rule = g_ptr_array_index (rules, i);
      const char *id;

      if (!g_str_has_prefix (rule->comment, tag_prefix))
        continue;
      id = rule->comment + strlen (tag_prefix);
      if (!mv_nft_check_id (id, NULL) || g_hash_table_contains (seen, id))
        continue;
      g_hash_table_add (seen, (gpointer) id);
      g_ptr_array_add (ids, g_strdup (id));
    }
  g_ptr_array_sort (ids, compare_ids);
  return g_steal_pointer (&ids);
}

/* ----- the table ----- */

MvNft *
mv_nft_new (guint    wake_group,
            GError **error)
{
  g_autoptr (MvNft) nft = NULL;
  g_autoptr (GMutexLocker) locker = NULL;
  g_autofree char *commands = NULL;

  if (wake_group > WAKE_GROUP_MAX)
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "NFLOG group %u is out of range 0 to %d", wake_group, WAKE_GROUP_MAX);
      return NULL;
    }
  nft = g_new0 (MvNft, 1);
  g_mutex_init (&nft->lock);
  nft->wake_group = wake_group;
  nft->ctx = nft_ctx_new (NFT_CTX_DEFAULT);
  if (nft->ctx == NULL)
    {
      mv_error_set (error, MV_ERROR_FAILED, "libnftables could not make a context");
      return NULL;
    }
  nft_ctx_buffer_output (nft->ctx);
  nft_ctx_buffer_error (nft->ctx);

  /* "add" keeps what exists, so the machines' and networks' rules stay;
   * only the fixed rules of forward and output are written again. */
  commands = g_strdup (
    "add table " TABLE "\n"
    "add chain " TABLE " " CHAIN_PREROUTING " { type nat hook prerouting priority dstnat; policy accept; }\n"
    "add chain " TABLE " " CHAIN_OUTPUT " { type nat hook output priority -100; policy accept; }\n"
    "add chain " TABLE " " CHAIN_FORWARD " { type filter hook forward priority filter; policy accept; }\n"
    "add chain " TABLE " " CHAIN_LOCAL_OUT " { type filter hook output priority filter; policy accept; }\n"
    "add chain " TABLE " " CHAIN_WAKE " { type filter hook postrouting priority filter; policy accept; }\n"
    "add chain " TABLE " " CHAIN_MASQUERADE " { type nat hook postrouting priority srcnat; policy accept; }\n"
    "add chain " TABLE " " CHAIN_MACHINES "\n"
    "add chain " TABLE " " CHAIN_NETWORKS "\n"
    "flush chain " TABLE " " CHAIN_FORWARD "\n"
    "add rule " TABLE " " CHAIN_FORWARD " ct state established,related accept\n"
    "add rule " TABLE " " CHAIN_FORWARD " jump " CHAIN_MACHINES "\n"
    "add rule " TABLE " " CHAIN_FORWARD " jump " CHAIN_NETWORKS "\n"
    /* What the host itself sends a guest meets the guest's rules too. */
    "flush chain " TABLE " " CHAIN_LOCAL_OUT "\n"
    "add rule " TABLE " " CHAIN_LOCAL_OUT " ct state established,related accept\n"
    "add rule " TABLE " " CHAIN_LOCAL_OUT " jump " CHAIN_MACHINES "\n");
  locker = g_mutex_locker_new (&nft->lock);
  if (!run_locked (nft, commands, FALSE, NULL, error))
    return NULL;
  g_clear_pointer (&locker, g_mutex_locker_free);
  return g_steal_pointer (&nft);
}

void
mv_nft_free (MvNft *nft)
{
  if (nft == NULL)
    return;
  g_clear_pointer (&nft->ctx, nft_ctx_free);
  g_mutex_clear (&nft->lock);
  g_free (nft);
}

gboolean
mv_nft_apply_machine (MvNft               *nft,
                      const MvNftMachine  *machine,
                      GError             **error)
{
  g_autofree char *tag = NULL;
  g_autoptr (GString) additions = g_string_new (NULL);

  g_return_val_if_fail (nft != NULL && machine != NULL, FALSE);
  if (!check_machine (machine, error))
    return FALSE;
  tag = g_strconcat (MV_NFT_MACHINE_TAG, machine->machine_id, NULL);
  for (guint i = 0; i < machine->n_ports; i++)
    append_port_rules (additions, tag, machine->address, &machine->ports[i]);
  for (guint i = 0; i < machine->n_rules; i++)
    append_firewall_rule (additions, tag, machine->bridge, machine->address, &machine->rules[i]);
  if (machine->sleeping)
    {
      char guest_text[IPV4_TEXT_SIZE];

      g_string_append_printf (additions,
                              "add rule " TABLE " " CHAIN_WAKE " oifname \"%s\" ip daddr %s ct state new "
                              "log prefix \"%s\" group %u comment \"%s\"\n",
                              machine->bridge, format_ipv4 (guest_text, machine->address),
                              machine->machine_id, nft->wake_group, tag);
    }
  return replace_tagged (nft, tag, additions->str, error);
}

gboolean
mv_nft_remove_machine (MvNft       *nft,
                       const char  *machine_id,
                       GError     **error)
{
  g_autofree char *tag = NULL;

  g_return_val_if_fail (nft != NULL, FALSE);
  if (!mv_nft_check_id (machine_id, error))
    return FALSE;
  tag = g_strconcat (MV_NFT_MACHINE_TAG, machine_id, NULL);
  return replace_tagged (nft, tag, "", error);
}

gboolean
mv_nft_apply_network (MvNft       *nft,
                      const char  *network_id,
                      const char  *bridge,
                      guint32      subnet,
                      guint        prefix,
                      gboolean     nat,
                      GError     **error)
{
  g_autofree char *tag = NULL;
  g_autoptr (GString) additions = g_string_new (NULL);

  g_return_val_if_fail (nft != NULL, FALSE);
  if (!mv_nft_check_id (network_id, error) || !mv_nm_check_ifname (bridge, error) ||
      !check_prefix (prefix, "network subnet", error))
    return FALSE;
  if (nat && prefix == 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "network %s: a subnet of prefix 0 would masquerade everything", network_id);
  tag = g_strconcat (MV_NFT_NETWORK_TAG, network_id, NULL);
  g_string_append_printf (additions,
                          "add rule " TABLE " " CHAIN_NETWORKS " iifname \"%s\" accept comment \"%s\"\n"
                          "add rule " TABLE " " CHAIN_NETWORKS " oifname \"%s\" accept comment \"%s\"\n",
                          bridge, tag, bridge, tag);
  if (nat)
    {
      char subnet_text[IPV4_TEXT_SIZE];

      g_string_append_printf (additions,
                              "add rule " TABLE " " CHAIN_MASQUERADE " ip saddr %s/%u oifname != \"%s\" "
                              "masquerade comment \"%s\"\n",
                              format_ipv4 (subnet_text, subnet & prefix_mask (prefix)), prefix, bridge, tag);
    }
  return replace_tagged (nft, tag, additions->str, error);
}

gboolean
mv_nft_remove_network (MvNft       *nft,
                       const char  *network_id,
                       GError     **error)
{
  g_autofree char *tag = NULL;

  g_return_val_if_fail (nft != NULL, FALSE);
  if (!mv_nft_check_id (network_id, error))
    return FALSE;
  tag = g_strconcat (MV_NFT_NETWORK_TAG, network_id, NULL);
  return replace_tagged (nft, tag, "", error);
}

GPtrArray *
mv_nft_list_machines (MvNft   *nft,
                      GError **error)
{
  g_return_val_if_fail (nft != NULL, NULL);
  return list_tagged (nft, MV_NFT_MACHINE_TAG, error);
}

GPtrArray *
mv_nft_list_networks (MvNft   *nft,
                      GError **error)
{
  g_return_val_if_fail (nft != NULL, NULL);
  return list_tagged (nft, MV_NFT_NETWORK_TAG, error);
}

gboolean
mv_nft_remove_all (MvNft   *nft,
                   GError **error)
{
  g_autoptr (GMutexLocker) locker = NULL;

  g_return_val_if_fail (nft != NULL, FALSE);
  locker = g_mutex_locker_new (&nft->lock);
  /* Adding first makes deleting a missing table succeed, in one batch. */
  return run_locked (nft, "add table " TABLE "\ndelete table " TABLE "\n", FALSE, NULL, error);
}
