/* JSON helpers: the strict readers the spec and record parsers share
 * (each error is MV_ERROR_INVALID_ARGUMENT naming the field), lookups that
 * tolerate a missing or mistyped member (json-glib 1.6 offers them only
 * for scalars), and copies that share nothing. Pure. */
#pragma once
#include <json-glib/json-glib.h>

/* ---- strict reading ---- */

/* "an object", "a string", ...: what @node holds, for error messages. */
const char *mv_json_node_kind (JsonNode *node);
/* Sets "@field: expected @expected, got ..." and returns FALSE. */
gboolean    mv_json_wrong_type (JsonNode *node, const char *field, const char *expected,
                                GError **error);

/* The member @name, or NULL when it is absent or JSON null: null stands
 * for an optional field left out. */
JsonNode   *mv_json_member (JsonObject *object, const char *name);
/* The same, but a missing member is the error "@name: missing". */
JsonNode   *mv_json_required_member (JsonObject *object, const char *name, GError **error);
/* Fails with "unknown field 'x'" for a member not in @known; @where,
 * when not NULL, is the path of a nested object and prefixes the message. */
gboolean    mv_json_reject_unknown_members (JsonObject *object, const char *where,
                                            const char *const *known, GError **error);

gboolean    mv_json_read_bool (JsonNode *node, const char *field, gboolean *out, GError **error);
/* *@out points into @node; a node built in code may hold a NULL string,
 * which reads as "". */
gboolean    mv_json_read_string (JsonNode *node, const char *field, const char **out,
                                 GError **error);
/* Reads the optional string member @name into *@out, a copy (left alone
 * when absent). With @empty_is_absent, "" means the field was left out. */
gboolean    mv_json_read_string_member (JsonObject *object, const char *name,
                                        gboolean empty_is_absent, char **out, GError **error);
/* An integer from @min to @max, written as one: what the daemon's own
 * records hold. */
gboolean    mv_json_read_int (JsonNode *node, const char *field, gint64 min, gint64 max,
                              gint64 *out, GError **error);
/* An integer, also written as an integral double (1000.0), as some
 * clients' encoders do; bounds are the caller's. An integral double that
 * no 64-bit integer holds (1e300) reads as G_MININT64 or G_MAXINT64 with
 * *@written set to how it reads ("1e+300"), for the caller's message;
 * otherwise *@written is NULL. */
gboolean    mv_json_read_integer (JsonNode *node, const char *field, gint64 *out, char **written,
                                  GError **error);

/* How deep @node nests: 0 for a value, 1 for [] or {}, and so on; found
 * without recursion, as for a tree of any depth. */
guint       mv_json_node_depth (JsonNode *node);

/* ---- writing ---- */

/* Sets the string member @name unless @value is NULL. */
void        mv_json_set_optional_string (JsonObject *object, const char *name, const char *value);

/* ---- copies ---- */

/* Copies that share nothing with the original (json_node_copy() shares
 * objects and arrays), member order kept. */
JsonNode   *mv_json_deep_copy (JsonNode *node);
JsonObject *mv_json_object_deep_copy (JsonObject *object);
JsonArray  *mv_json_array_deep_copy (JsonArray *array);

/* ---- tolerant lookups ---- */

/* The member @name of @object if it is an object, else NULL. */
static inline JsonObject *
mv_json_get_object (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* The member @name of @object if it is an array, else NULL. */
static inline JsonArray *
mv_json_get_array (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

/* The member @name of @object if it is a string, else NULL. */
static inline const char *
mv_json_get_string (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && json_node_get_value_type (node) == G_TYPE_STRING ? json_node_get_string (node)
                                                                 : NULL;
}

/* The member @name of @object if it is a non-negative integer, else 0. */
static inline guint64
mv_json_get_uint (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  if (!node || json_node_get_value_type (node) != G_TYPE_INT64 || json_node_get_int (node) < 0)
    return 0;
  return (guint64) json_node_get_int (node);
}
