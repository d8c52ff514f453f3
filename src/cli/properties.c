/* D-Bus properties as microvmctl reads them. The reader is generic, so a
 * property the daemon adds later is shown without a change here. */
#include "properties.h"

#include <errno.h>
#include <string.h>

static void
mv_property_free (gpointer data)
{
  MvProperty *prop = data;

  g_free (prop->name);
  g_free (prop->signature);
  if (prop->value != NULL)
    json_node_unref (prop->value);
  g_free (prop);
}

GPtrArray *
mv_properties_new (void)
{
  return g_ptr_array_new_with_free_func (mv_property_free);
}

static int
read_basic (sd_bus_message *m, char type, JsonNode **out)
{
  union {
    uint8_t y;
    int16_t n;
    uint16_t q;
    int32_t i;
    uint32_t u;
    int64_t x;
    uint64_t t;
    double d;
    int b;
    const char *s;
  } v = { 0 };
  JsonNode *node;
  int r;

  switch (type)
    {
    case SD_BUS_TYPE_BYTE: case SD_BUS_TYPE_INT16: case SD_BUS_TYPE_UINT16:
    case SD_BUS_TYPE_INT32: case SD_BUS_TYPE_UINT32: case SD_BUS_TYPE_INT64:
    case SD_BUS_TYPE_UINT64: case SD_BUS_TYPE_DOUBLE: case SD_BUS_TYPE_BOOLEAN:
    case SD_BUS_TYPE_STRING: case SD_BUS_TYPE_OBJECT_PATH: case SD_BUS_TYPE_SIGNATURE:
    case SD_BUS_TYPE_UNIX_FD:
      break;
    default:
      return -EBADMSG;
    }

  r = sd_bus_message_read_basic (m, type, &v);
  if (r < 0)
    return r;

  node = json_node_alloc ();
  switch (type)
    {
    case SD_BUS_TYPE_BYTE:    json_node_init_int (node, v.y); break;
    case SD_BUS_TYPE_INT16:   json_node_init_int (node, v.n); break;
    case SD_BUS_TYPE_UINT16:  json_node_init_int (node, v.q); break;
    case SD_BUS_TYPE_INT32:   json_node_init_int (node, v.i); break;
    case SD_BUS_TYPE_UNIX_FD: json_node_init_int (node, v.i); break;
    case SD_BUS_TYPE_UINT32:  json_node_init_int (node, v.u); break;
    case SD_BUS_TYPE_INT64:   json_node_init_int (node, v.x); break;
    /* JSON readers take integers as doubles or int64 anyway; the daemon's
     * counters and byte sizes stay far below 2^63. */
    case SD_BUS_TYPE_UINT64:  json_node_init_int (node, (gint64) v.t); break;
    case SD_BUS_TYPE_DOUBLE:  json_node_init_double (node, v.d); break;
    case SD_BUS_TYPE_BOOLEAN: json_node_init_boolean (node, v.b); break;
    default:                  json_node_init_string (node, v.s); break;
    }
  *out = node;
  return 0;
}

static char *
node_to_key (JsonNode *node)
{
  if (JSON_NODE_HOLDS_VALUE (node))
    {
      switch (json_node_get_value_type (node))
        {
        case G_TYPE_STRING:
          return g_strdup (json_node_get_string (node));
        case G_TYPE_INT64:
          return g_strdup_printf ("%" G_GINT64_FORMAT, json_node_get_int (node));
        case G_TYPE_BOOLEAN:
          return g_strdup (json_node_get_boolean (node) ? "true" : "false");
        case G_TYPE_DOUBLE:
          return g_strdup_printf ("%g", json_node_get_double (node));
        default:
          break;
        }
    }
  return g_strdup ("");
}

static int
read_dict_entry (sd_bus_message *m, JsonObject *object)
{
  g_autoptr(JsonNode) key = NULL;
  JsonNode *value = NULL;
  const char *contents = NULL;
  char type;
  int r;

  r = sd_bus_message_peek_type (m, &type, &contents);
  if (r < 0)
    return r;
  if (r == 0 || type != SD_BUS_TYPE_DICT_ENTRY)
    return -EBADMSG;

  r = sd_bus_message_enter_container (m, type, contents);
  if (r < 0)
    return r;
  r = mv_bus_read_value (m, &key);
  if (r < 0)
    return r;
  r = mv_bus_read_value (m, &value);
  if (r < 0)
    return r;

  {
    g_autofree char *name = node_to_key (key);
    json_object_set_member (object, name, value);
  }
  return sd_bus_message_exit_container (m);
}

static int
read_container (sd_bus_message *m, char type, const char *contents, JsonNode **out)
{
  gboolean is_dict = type == SD_BUS_TYPE_ARRAY && contents[0] == SD_BUS_TYPE_DICT_ENTRY_BEGIN;
  g_autoptr(JsonObject) object = is_dict ? json_object_new () : NULL;
  g_autoptr(JsonArray) array = is_dict ? NULL : json_array_new ();
  JsonNode *node;
  int r;

  r = sd_bus_message_enter_container (m, type, contents);
  if (r < 0)
    return r;

  while ((r = sd_bus_message_at_end (m, FALSE)) == 0)
    {
      if (is_dict)
        {
          r = read_dict_entry (m, object);
        }
      else
        {
          JsonNode *element = NULL;

          r = mv_bus_read_value (m, &element);
          if (r >= 0)
            json_array_add_element (array, element);
        }
      if (r < 0)
        return r;
    }
  if (r < 0)
    return r;

  r = sd_bus_message_exit_container (m);
  if (r < 0)
    return r;

  node = json_node_alloc ();
  if (is_dict)
    json_node_init_object (node, object);
  else
    json_node_init_array (node, array);
  *out = node;
  return 0;
}

int
mv_bus_read_value (sd_bus_message *m, JsonNode **out)
{
  const char *contents = NULL;
  char type;
  int r;

  r = sd_bus_message_peek_type (m, &type, &contents);
  if (r < 0)
    return r;
  if (r == 0)
    return -EBADMSG;

  switch (type)
    {
    case SD_BUS_TYPE_VARIANT:
      r = sd_bus_message_enter_container (m, type, contents);
      if (r < 0)
        return r;
      r = mv_bus_read_value (m, out);
      if (r < 0)
        return r;
      return sd_bus_message_exit_container (m);

    case SD_BUS_TYPE_ARRAY:
    case SD_BUS_TYPE_STRUCT:
      return read_container (m, type, contents, out);

    default:
      return read_basic (m, type, out);
    }
}

int
mv_properties_read (sd_bus_message *m, GPtrArray *props)
{
  int r;

  r = sd_bus_message_enter_container (m, SD_BUS_TYPE_ARRAY, "{sv}");
  if (r < 0)
    return r;

  while ((r = sd_bus_message_enter_container (m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0)
    {
      g_autofree MvProperty *prop = g_new0 (MvProperty, 1);
      const char *name, *signature;

      r = sd_bus_message_read_basic (m, SD_BUS_TYPE_STRING, &name);
      if (r < 0)
        return r;
      r = sd_bus_message_peek_type (m, NULL, &signature);
      if (r < 0)
        return r;
      if (r == 0)
        return -EBADMSG;

      prop->name = g_strdup (name);
      prop->signature = g_strdup (signature);
      r = mv_bus_read_value (m, &prop->value);
      g_ptr_array_add (props, g_steal_pointer (&prop));
      if (r < 0)
        return r;

      r = sd_bus_message_exit_container (m);
      if (r < 0)
        return r;
    }
  if (r < 0)
    return r;

  return sd_bus_message_exit_container (m);
}

void
mv_properties_add_string (GPtrArray *props, const char *name, const char *value)
{
  MvProperty *prop = g_new0 (MvProperty, 1);

  prop->name = g_strdup (name);
  prop->signature = g_strdup ("s");
  prop->value = json_node_init_string (json_node_alloc (), value);
  g_ptr_array_add (props, prop);
}

const MvProperty *
mv_properties_lookup (GPtrArray *props, const char *name)
{
  for (guint i = 0; i < props->len; i++)
    {
      const MvProperty *prop = g_ptr_array_index (props, i);
      if (g_str_equal (prop->name, name))
        return prop;
    }
  return NULL;
}

const char *
mv_properties_get_string (GPtrArray *props, const char *name)
{
  const MvProperty *prop = mv_properties_lookup (props, name);

  if (prop == NULL || prop->value == NULL ||
      !JSON_NODE_HOLDS_VALUE (prop->value) ||
      json_node_get_value_type (prop->value) != G_TYPE_STRING)
    return "";
  return json_node_get_string (prop->value);
}

gint64
mv_properties_get_int (GPtrArray *props, const char *name)
{
  const MvProperty *prop = mv_properties_lookup (props, name);

  if (prop == NULL || prop->value == NULL ||
      !JSON_NODE_HOLDS_VALUE (prop->value) ||
      json_node_get_value_type (prop->value) != G_TYPE_INT64)
    return 0;
  return json_node_get_int (prop->value);
}

/* Nested arrays (structs inside an array, mostly) are joined with blanks, the
 * outermost with commas: a(ss) reads "qemu 7.2, firecracker 1.7". */
static void
append_node (GString *out, JsonNode *node, guint depth)
{
  const char *separator = depth == 0 ? ", " : " ";

  switch (JSON_NODE_TYPE (node))
    {
    case JSON_NODE_OBJECT:
      {
        JsonObject *object = json_node_get_object (node);
        g_autoptr(GList) members = json_object_get_members (object);

        for (GList *l = members; l != NULL; l = l->next)
          {
            if (l != members)
              g_string_append (out, separator);
            g_string_append_printf (out, "%s=", (const char *) l->data);
            append_node (out, json_object_get_member (object, l->data), depth + 1);
          }
        break;
      }
    case JSON_NODE_ARRAY:
      {
        JsonArray *array = json_node_get_array (node);

        for (guint i = 0; i < json_array_get_length (array); i++)
          {
            if (i > 0)
              g_string_append (out, separator);
            append_node (out, json_array_get_element (array, i), depth + 1);
          }
        break;
      }
    case JSON_NODE_VALUE:
      if (json_node_get_value_type (node) == G_TYPE_BOOLEAN)
        g_string_append (out, json_node_get_boolean (node) ? "yes" : "no");
      else
        {
          g_autofree char *text = node_to_key (node);
          g_string_append (out, text);
        }
      break;
    case JSON_NODE_NULL:
      break;
    }
}

static char *
format_timestamp (gint64 usec)
{
  g_autoptr(GDateTime) time = NULL;

  if (usec <= 0)
    return g_strdup ("-");
  time = g_date_time_new_from_unix_local (usec / G_USEC_PER_SEC);
  if (time == NULL)
    return g_strdup_printf ("%" G_GINT64_FORMAT, usec);
  return g_date_time_format (time, "%Y-%m-%d %H:%M:%S %Z");
}

char *
mv_property_format (const MvProperty *prop)
{
  GString *out;

  if (prop->value == NULL)
    return g_strdup ("-");

  if (g_str_equal (prop->signature, "t") && g_str_has_suffix (prop->name, "At"))
    return format_timestamp (json_node_get_int (prop->value));

  if (g_str_equal (prop->signature, "t") && g_str_has_suffix (prop->name, "Bytes"))
    {
      guint64 bytes = (guint64) json_node_get_int (prop->value);
      g_autofree char *human = mv_format_bytes (bytes);
      return g_strdup_printf ("%s (%" G_GUINT64_FORMAT " bytes)", human, bytes);
    }

  /* The daemon's way of saying "none" for exit codes. */
  if (g_str_equal (prop->signature, "i") && json_node_get_int (prop->value) == -1)
    return g_strdup ("-");

  out = g_string_new (NULL);
  append_node (out, prop->value, 0);
  if (out->len == 0)
    g_string_append (out, "-");
  return g_string_free (out, FALSE);
}

char *
mv_json_key_from_property (const char *name)
{
  GString *key = g_string_new (NULL);
  gsize len = strlen (name);

  for (gsize i = 0; i < len; i++)
    {
      char c = name[i];

      if (i > 0 && g_ascii_isupper (c))
        {
          char prev = name[i - 1];
          char next = name[i + 1];
          /* "VCPUs": a capital run followed by a plural "s" is one word. */
          gboolean plural_acronym = next == 's' && (i + 2 == len || g_ascii_isupper (name[i + 2]));

          if (g_ascii_islower (prev) || g_ascii_isdigit (prev) ||
              (g_ascii_isupper (prev) && g_ascii_islower (next) && !plural_acronym))
            g_string_append_c (key, '_');
        }
      g_string_append_c (key, g_ascii_tolower (c));
    }
  return g_string_free (key, FALSE);
}

char *
mv_format_bytes (guint64 bytes)
{
  static const char units[] = "BKMGTPE";
  guint64 unit = 1;
  guint i = 0;

  while (i + 2 < sizeof units && bytes >= unit * 1024)
    {
      unit *= 1024;
      i++;
    }

  if (bytes % unit == 0)
    return g_strdup_printf ("%" G_GUINT64_FORMAT "%c", bytes / unit, units[i]);
  return g_strdup_printf ("%.1f%c", (double) bytes / (double) unit, units[i]);
}
