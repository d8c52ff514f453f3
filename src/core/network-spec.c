/* A network's spec and record, and IPv4 addresses in text. */
#include "network-spec.h"
#include "errors.h"
#include "json-strict.h"
#include "machine.h"
#include "spec.h"

#include <string.h>

void
mv_network_spec_free (MvNetworkSpec *network)
{
  if (network == NULL)
    return;
  g_free (network->id);
  g_free (network->name);
  g_free (network);
}

MvNetworkSpec *
mv_network_spec_copy (const MvNetworkSpec *network)
{
  MvNetworkSpec *copy = g_memdup2 (network, sizeof *network);

  copy->id = g_strdup (network->id);
  copy->name = g_strdup (network->name);
  return copy;
}

/* ---- IPv4 ---- */

gboolean
mv_ipv4_parse (const char *text, guint32 *out)
{
  guint32 address = 0;
  const char *p = text;

  if (text == NULL)
    return FALSE;
  for (guint octet = 0; octet < 4; octet++)
    {
      guint value = 0;
      guint digits = 0;
      const char *start;

      if (octet > 0 && *p++ != '.')
        return FALSE;
      start = p;
      while (g_ascii_isdigit (*p) && digits < 4)
        {
          value = value * 10 + (guint) (*p - '0');
          p++;
          digits++;
        }
      /* "010" reads as octal to inet_aton(): refused, not guessed. */
      if (digits == 0 || digits > 3 || value > 255 || (digits > 1 && *start == '0'))
        return FALSE;
      address = (address << 8) | value;
    }
  if (*p != '\0')
    return FALSE;
  *out = address;
  return TRUE;
}

char *
mv_ipv4_to_string (guint32 address)
{
  return g_strdup_printf ("%u.%u.%u.%u", address >> 24, (address >> 16) & 0xff,
                          (address >> 8) & 0xff, address & 0xff);
}

guint32
mv_ipv4_mask (guint prefix)
{
  return prefix == 0 ? 0 : G_MAXUINT32 << (32 - MIN (prefix, 32));
}

char *
mv_network_subnet_to_string (const MvNetworkSpec *network)
{
  g_autofree char *address = mv_ipv4_to_string (network->address);

  return g_strdup_printf ("%s/%u", address, network->prefix);
}

guint32
mv_network_broadcast (const MvNetworkSpec *network)
{
  return network->address | ~mv_ipv4_mask (network->prefix);
}

gboolean
mv_network_contains (const MvNetworkSpec *network, guint32 address)
{
  return (address & mv_ipv4_mask (network->prefix)) == network->address;
}

/* "10.0.0.0/24" into @network's address and prefix. */
static gboolean
parse_subnet (const char *text, MvNetworkSpec *network, GError **error)
{
  const char *slash = strchr (text, '/');
  g_autofree char *address_text = NULL;
  guint64 prefix = 0;
  guint32 address = 0;

  if (strchr (text, ':') != NULL)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "subnet: %s is IPv6; networks are IPv4 subnets in this microvmd", text);
  if (slash == NULL)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "subnet: %s has no prefix length; give it as CIDR, such as 10.0.0.0/24",
                         text);
  address_text = g_strndup (text, slash - text);
  if (!mv_ipv4_parse (address_text, &address))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "subnet: %s is not an IPv4 address (a dotted quad)", address_text);
  if (!g_ascii_string_to_unsigned (slash + 1, 10, 0, 32, &prefix, NULL) ||
      (slash[1] == '0' && slash[2] != '\0'))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "subnet: the prefix length '%s' is not a number from 0 to 32", slash + 1);
  network->address = address;
  network->prefix = (guint) prefix;
  return TRUE;
}

gboolean
mv_network_spec_validate (const MvNetworkSpec *network, GError **error)
{
  guint32 mask = mv_ipv4_mask (network->prefix);
  guint32 broadcast;
  g_autofree char *subnet = NULL;
  g_autofree char *gateway = NULL;

  if (!mv_name_validate ("name", network->name, error))
    return FALSE;
  subnet = mv_network_subnet_to_string (network);
  if (network->prefix < MV_NETWORK_PREFIX_MIN || network->prefix > MV_NETWORK_PREFIX_MAX)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "subnet: the prefix length of %s is outside /%d to /%d", subnet,
                         MV_NETWORK_PREFIX_MIN, MV_NETWORK_PREFIX_MAX);
  if ((network->address & mask) != network->address)
    {
      g_autofree char *prefix_address = mv_ipv4_to_string (network->address & mask);

      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                           "subnet: %s is not a network address: host bits are set; "
                           "the network is %s/%u", subnet, prefix_address, network->prefix);
    }
  broadcast = mv_network_broadcast (network);
  gateway = mv_ipv4_to_string (network->gateway);
  if (!mv_network_contains (network, network->gateway))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "gateway: %s is outside the subnet %s",
                         gateway, subnet);
  if (network->gateway == network->address || network->gateway == broadcast)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "gateway: %s is the %s address of %s, not a host's", gateway,
                         network->gateway == broadcast ? "broadcast" : "network", subnet);
  if (network->mtu < MV_NETWORK_MTU_MIN || network->mtu > MV_NETWORK_MTU_MAX)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "mtu: %u is outside %d to %d",
                         network->mtu, MV_NETWORK_MTU_MIN, MV_NETWORK_MTU_MAX);
  return TRUE;
}

gboolean
mv_network_spec_overlaps (const MvNetworkSpec *a, const MvNetworkSpec *b)
{
  guint32 mask = mv_ipv4_mask (MIN (a->prefix, b->prefix));

  return (a->address & mask) == (b->address & mask);
}

gboolean
mv_network_spec_check_overlap (const MvNetworkSpec *network, GPtrArray *others, GError **error)
{
  for (guint i = 0; i < others->len; i++)
    {
      const MvNetworkSpec *other = others->pdata[i];
      g_autofree char *mine = NULL, *theirs = NULL;

      if (!mv_network_spec_overlaps (network, other))
        continue;
      mine = mv_network_subnet_to_string (network);
      theirs = mv_network_subnet_to_string (other);
      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                           "subnet: %s overlaps %s of the network %s", mine, theirs, other->name);
    }
  return TRUE;
}

/* ---- JSON ---- */

static const MvJson *
parse_object (const char *data, gssize len, const char *what, MvJsonDoc **doc, GError **error)
{
  static const MvJsonLimits limits = { .max_bytes = MV_NETWORK_SPEC_MAX_BYTES, .max_depth = 1 };
  const MvJson *root;

  *doc = mv_json_read (data, len, &limits, what, error);
  if (*doc == NULL)
    return NULL;
  root = mv_json_doc_root (*doc);
  if (!mv_json_is_object (root))
    {
      mv_json_wrong_type (root, what, "an object", error);
      return NULL;
    }
  return root;
}

static gboolean
read_required_string (const MvJson *object, const char *field, const char **out, GError **error)
{
  const MvJson *node = mv_json_required_member (object, field, error);

  return node != NULL && mv_json_read_string (node, field, out, error);
}

/* The fields a spec and a record share; the gateway defaults to the
 * subnet's first host in a spec, and is required in a record. */
static gboolean
read_fields (const MvJson *object, gboolean record, MvNetworkSpec *network, GError **error)
{
  const char *text = NULL;
  const MvJson *node;
  gint64 mtu = MV_NETWORK_MTU_DEFAULT;

  if (!read_required_string (object, "name", &text, error))
    return FALSE;
  network->name = g_strdup (text);
  if (!read_required_string (object, "subnet", &text, error) ||
      !parse_subnet (text, network, error))
    return FALSE;

  node = record ? mv_json_required_member (object, "gateway", error)
                : mv_json_member (object, "gateway");
  if (record && node == NULL)
    return FALSE;
  if (node != NULL)
    {
      if (!mv_json_read_string (node, "gateway", &text, error))
        return FALSE;
      if (strchr (text, ':') != NULL)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                             "gateway: %s is IPv6; networks are IPv4 in this microvmd", text);
      if (!mv_ipv4_parse (text, &network->gateway))
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "gateway: %s is not an IPv4 address (a dotted quad)", text);
    }
  else
    network->gateway = network->address + 1;

  network->nat = TRUE;
  node = mv_json_member (object, "nat");
  if (node != NULL && !mv_json_read_bool (node, "nat", &network->nat, error))
    return FALSE;

  node = mv_json_member (object, "mtu");
  if (node != NULL && !mv_json_read_int (node, "mtu", G_MININT64, G_MAXINT64, &mtu, error))
    return FALSE;
  if (mtu < MV_NETWORK_MTU_MIN || mtu > MV_NETWORK_MTU_MAX)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "mtu: %" G_GINT64_FORMAT " is outside %d to %d", mtu,
                         MV_NETWORK_MTU_MIN, MV_NETWORK_MTU_MAX);
  network->mtu = (guint) mtu;
  return TRUE;
}

MvNetworkSpec *
mv_network_spec_from_json (const char *json, GError **error)
{
  static const char *const known[] = { "name", "subnet", "gateway", "nat", "mtu", NULL };
  g_autoptr (MvJsonDoc) doc = NULL;
  g_autoptr (MvNetworkSpec) network = g_new0 (MvNetworkSpec, 1);
  const MvJson *object = parse_object (json, -1, "spec", &doc, error);

  if (object == NULL || !mv_json_reject_unknown_members (object, NULL, known, error) ||
      !read_fields (object, FALSE, network, error) || !mv_network_spec_validate (network, error))
    return NULL;
  return g_steal_pointer (&network);
}

char *
mv_network_spec_to_json (const MvNetworkSpec *network)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (GDateTime) created = g_date_time_new_from_unix_utc (network->created_at / G_USEC_PER_SEC);
  g_autofree char *created_text = g_date_time_format_iso8601 (created);
  g_autofree char *subnet = mv_network_subnet_to_string (network);
  g_autofree char *gateway = mv_ipv4_to_string (network->gateway);
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "format");
  json_builder_add_int_value (builder, MV_NETWORK_RECORD_FORMAT);
  json_builder_set_member_name (builder, "id");
  json_builder_add_string_value (builder, network->id);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, network->name);
  json_builder_set_member_name (builder, "subnet");
  json_builder_add_string_value (builder, subnet);
  json_builder_set_member_name (builder, "gateway");
  json_builder_add_string_value (builder, gateway);
  json_builder_set_member_name (builder, "nat");
  json_builder_add_boolean_value (builder, network->nat);
  json_builder_set_member_name (builder, "mtu");
  json_builder_add_int_value (builder, network->mtu);
  json_builder_set_member_name (builder, "created_at");
  json_builder_add_string_value (builder, created_text);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  return json_to_string (root, TRUE);
}

MvNetworkSpec *
mv_network_spec_from_record (const char *data, gsize len, GError **error)
{
  static const char *const known[] = { "format", "id", "name", "subnet", "gateway", "nat", "mtu",
                                       "created_at", NULL };
  g_autoptr (MvJsonDoc) doc = NULL;
  g_autoptr (MvNetworkSpec) network = g_new0 (MvNetworkSpec, 1);
  g_autoptr (GDateTime) created = NULL;
  const MvJson *object = parse_object (data, (gssize) len, "network.json", &doc, error);
  const MvJson *node;
  const char *text = NULL;
  gint64 format = 0;

  if (object == NULL || !mv_json_reject_unknown_members (object, NULL, known, error))
    return NULL;
  if (!(node = mv_json_required_member (object, "format", error)) ||
      !mv_json_read_int (node, "format", 0, G_MAXINT32, &format, error))
    return NULL;
  if (format != MV_NETWORK_RECORD_FORMAT)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "format: %" G_GINT64_FORMAT
                         " is not the format %d this microvmd reads", format,
                         MV_NETWORK_RECORD_FORMAT), NULL;
  if (!read_required_string (object, "id", &text, error) || !mv_id_validate (text, error))
    return NULL;
  network->id = g_strdup (text);
  if (!read_fields (object, TRUE, network, error) ||
      !read_required_string (object, "created_at", &text, error))
    return NULL;
  created = g_date_time_new_from_iso8601 (text, NULL);
  if (created == NULL)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "created_at: not an ISO 8601 time with a time zone"), NULL;
  network->created_at = g_date_time_to_unix (created) * G_USEC_PER_SEC;
  if (!mv_network_spec_validate (network, error))
    return NULL;
  return g_steal_pointer (&network);
}
