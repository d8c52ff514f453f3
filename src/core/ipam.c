/* A network's address table and the host names derived from IDs. */
#include "ipam.h"
#include "errors.h"
#include "json-strict.h"
#include "json-out.h"
#include "machine.h"

#include <string.h>

struct _MvIpam {
  MvNetworkSpec *network;
  GHashTable    *by_machine;   /* id → GUINT_TO_POINTER (address) */
  GHashTable    *by_address;   /* GUINT_TO_POINTER (address) → id, owned by by_machine */
};

MvIpam *
mv_ipam_new (const MvNetworkSpec *network)
{
  MvIpam *ipam = g_new0 (MvIpam, 1);

  ipam->network = mv_network_spec_copy (network);
  ipam->by_machine = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ipam->by_address = g_hash_table_new (g_direct_hash, g_direct_equal);
  return ipam;
}

void
mv_ipam_free (MvIpam *ipam)
{
  if (ipam == NULL)
    return;
  g_hash_table_unref (ipam->by_address);
  g_hash_table_unref (ipam->by_machine);
  mv_network_spec_free (ipam->network);
  g_free (ipam);
}

/* Address 0.0.0.0 is never a host's here (the subnet is at least /8 and
 * 0/8 holds no hosts), so it can key by_address. */
static void
take (MvIpam *ipam, const char *machine_id, guint32 address)
{
  char *key = g_strdup (machine_id);

  g_hash_table_insert (ipam->by_machine, key, GUINT_TO_POINTER (address));
  g_hash_table_insert (ipam->by_address, GUINT_TO_POINTER (address), key);
}

void
mv_ipam_release (MvIpam *ipam, const char *machine_id)
{
  gpointer held;

  if (!g_hash_table_lookup_extended (ipam->by_machine, machine_id, NULL, &held))
    return;
  g_hash_table_remove (ipam->by_address, held);
  g_hash_table_remove (ipam->by_machine, machine_id);
}

gboolean
mv_ipam_lookup (MvIpam *ipam, const char *machine_id, guint32 *address)
{
  gpointer held;

  if (!g_hash_table_lookup_extended (ipam->by_machine, machine_id, NULL, &held))
    return FALSE;
  if (address)
    *address = GPOINTER_TO_UINT (held);
  return TRUE;
}

guint
mv_ipam_count (MvIpam *ipam)
{
  return g_hash_table_size (ipam->by_machine);
}

const char *
mv_ipam_instance_at (MvIpam *ipam, const char *address)
{
  guint32 value = 0;

  if (!mv_ipv4_parse (address, &value))
    return NULL;
  return g_hash_table_lookup (ipam->by_address, GUINT_TO_POINTER (value));
}

/* @text as a host address of the subnet that machines may hold. */
static gboolean
parse_host_address (MvIpam *ipam, const char *field, const char *text, guint32 *out,
                    GError **error)
{
  const MvNetworkSpec *network = ipam->network;
  const char *slash = strchr (text, '/');
  g_autofree char *address_text = g_strndup (text, slash ? (gsize) (slash - text) : strlen (text));
  g_autofree char *subnet = mv_network_subnet_to_string (network);
  guint32 address = 0;

  if (!mv_ipv4_parse (address_text, &address))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: %s is not an IPv4 address (a dotted quad)", field, text);
  if (slash != NULL)
    {
      g_autofree char *own = g_strdup_printf ("%u", network->prefix);

      if (!g_str_equal (slash + 1, own))
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "%s: %s has another prefix length than the subnet %s", field, text,
                             subnet);
    }
  if (!mv_network_contains (network, address))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: %s is outside the subnet %s",
                         field, address_text, subnet);
  if (address == network->address || address == mv_network_broadcast (network))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: %s is the %s address of %s, not a host's", field, address_text,
                         address == network->address ? "network" : "broadcast", subnet);
  if (address == network->gateway)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: %s is the gateway of the network %s", field, address_text,
                         network->name);
  *out = address;
  return TRUE;
}

gboolean
mv_ipam_allocate (MvIpam *ipam, const char *machine_id, const char *static_ip,
                  guint32 *address, GError **error)
{
  const MvNetworkSpec *network = ipam->network;
  guint32 held = 0, wanted = 0;
  gboolean holds = mv_ipam_lookup (ipam, machine_id, &held);
  const char *holder;

  if (static_ip == NULL)
    {
      if (holds)
        return (*address = held), TRUE;
      /* The lowest free host: at most as many steps as there are holders. */
      for (guint32 candidate = network->address + 1; candidate < mv_network_broadcast (network);
           candidate++)
        if (candidate != network->gateway &&
            !g_hash_table_contains (ipam->by_address, GUINT_TO_POINTER (candidate)))
          {
            take (ipam, machine_id, candidate);
            return (*address = candidate), TRUE;
          }
      g_autofree char *subnet = mv_network_subnet_to_string (network);
      return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                           "The network %s has no free address left in %s (%u held)",
                           network->name, subnet, mv_ipam_count (ipam));
    }

  if (!parse_host_address (ipam, "static_ip", static_ip, &wanted, error))
    return FALSE;
  if (holds && held == wanted)
    return (*address = held), TRUE;
  holder = g_hash_table_lookup (ipam->by_address, GUINT_TO_POINTER (wanted));
  if (holder != NULL)
    {
      g_autofree char *text = mv_ipv4_to_string (wanted);

      return mv_error_set (error, MV_ERROR_CONFLICT,
                           "static_ip: %s on the network %s is held by machine %s", text,
                           network->name, holder);
    }
  mv_ipam_release (ipam, machine_id);
  take (ipam, machine_id, wanted);
  *address = wanted;
  return TRUE;
}

guint
mv_ipam_reconcile (MvIpam *ipam, GHashTable *live)
{
  g_autoptr (GPtrArray) gone = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  const char *id;

  g_hash_table_iter_init (&iter, ipam->by_machine);
  while (g_hash_table_iter_next (&iter, (gpointer *) &id, NULL))
    if (!g_hash_table_contains (live, id))
      g_ptr_array_add (gone, g_strdup (id));
  for (guint i = 0; i < gone->len; i++)
    mv_ipam_release (ipam, gone->pdata[i]);
  return gone->len;
}

/* ---- allocations.json ---- */

char *
mv_ipam_to_json (MvIpam *ipam)
{
  g_autoptr (GHashTable) texts = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr (JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonObject) object = json_object_new ();
  GHashTableIter iter;
  gpointer id, address;

  g_hash_table_iter_init (&iter, ipam->by_machine);
  while (g_hash_table_iter_next (&iter, &id, &address))
    g_hash_table_insert (texts, id, mv_ipv4_to_string (GPOINTER_TO_UINT (address)));
  json_object_set_int_member (object, "format", MV_ALLOCATIONS_RECORD_FORMAT);
  json_object_set_member (object, "allocations", mv_json_string_map_to_node (texts));
  json_node_set_object (root, object);
  return json_to_string (root, TRUE);
}

MvIpam *
mv_ipam_from_json (const MvNetworkSpec *network, const char *data, gsize len, GError **error)
{
  static const char *const known[] = { "format", "allocations", NULL };
  /* An address is at most 15 bytes, an ID 32: room for a /8's worth
   * would be 800 MiB, so the limit is what a host can run. */
  static const MvJsonLimits limits = { .max_bytes = 64 << 20, .max_depth = 2 };
  g_autoptr (MvJsonDoc) doc = mv_json_read (data, (gssize) len, &limits, "allocations.json",
                                            error);
  const MvJson *root = doc ? mv_json_doc_root (doc) : NULL;
  g_autoptr (MvIpam) ipam = NULL;
  const MvJson *node;
  gint64 format = 0;

  if (root == NULL)
    return NULL;
  if (!mv_json_is_object (root))
    return mv_json_wrong_type (root, "allocations.json", "an object", error), NULL;
  if (!mv_json_reject_unknown_members (root, NULL, known, error))
    return NULL;
  if (!(node = mv_json_required_member (root, "format", error)) ||
      !mv_json_read_int (node, "format", 0, G_MAXINT32, &format, error))
    return NULL;
  if (format != MV_ALLOCATIONS_RECORD_FORMAT)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "format: %" G_GINT64_FORMAT
                         " is not the format %d this microvmd reads", format,
                         MV_ALLOCATIONS_RECORD_FORMAT), NULL;
  if (!(node = mv_json_required_member (root, "allocations", error)))
    return NULL;
  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, "allocations", "an object", error), NULL;

  ipam = mv_ipam_new (network);
  mv_json_each (member, node)
    {
      const char *id = member->name;
      g_autofree char *field = g_strdup_printf ("allocations.%s", id);
      const char *text = NULL;
      const char *holder;
      guint32 address = 0;

      if (!mv_id_validate (id, error))
        return NULL;
      if (!mv_json_read_string (member, field, &text, error) ||
          !parse_host_address (ipam, field, text, &address, error))
        return NULL;
      holder = g_hash_table_lookup (ipam->by_address, GUINT_TO_POINTER (address));
      if (holder != NULL)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "%s: %s is held by machine %s too", field, text, holder), NULL;
      take (ipam, id, address);
    }
  return g_steal_pointer (&ipam);
}

/* ---- names ---- */

/* The SHA-256 of "@purpose:@id", in hex. */
static char *
hash_hex (const char *purpose, const char *id)
{
  g_autofree char *input = g_strconcat (purpose, ":", id, NULL);

  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, input, -1);
}

char *
mv_network_mac_for (const char *machine_id)
{
  g_autofree char *hex = hash_hex ("mac", machine_id);

  return g_strdup_printf ("02:%.2s:%.2s:%.2s:%.2s:%.2s", hex, hex + 2, hex + 4, hex + 6, hex + 8);
}

char *
mv_network_tap_name (const char *machine_id)
{
  g_autofree char *hex = hash_hex ("tap", machine_id);

  return g_strdup_printf ("mv%.13s", hex);
}

char *
mv_network_bridge_name (const char *network_id)
{
  g_autofree char *hex = hash_hex ("bridge", network_id);

  return g_strdup_printf ("mvbr%.11s", hex);
}
