/* A read-only JSON document in one arena, and the strict readers of its
 * values. Pure. */
#include "json-tree.h"
#include "errors.h"

#include <string.h>

/* The arena: blocks of growing size, each used from its start. */
typedef struct Block Block;
struct Block {
  Block *next;
  gsize  size;
  gsize  used;
  char   data[];
};

struct MvJsonDoc {
  Block        *blocks;     /* the newest first */
  gsize         next_size;
  const MvJson *root;
};

#define ARENA_ALIGN 8
#define ARENA_MIN_BLOCK 1024

static Block *
new_block (gsize size)
{
  Block *block = g_malloc (sizeof (Block) + size);

  block->next = NULL;
  block->size = size;
  block->used = 0;
  return block;
}

MvJsonDoc *
mv_json_doc_new (gsize size_hint)
{
  MvJsonDoc *doc = g_new0 (MvJsonDoc, 1);

  doc->next_size = MAX (size_hint, ARENA_MIN_BLOCK);
  return doc;
}

static void *
arena_alloc (MvJsonDoc *doc, gsize size)
{
  Block *block = doc->blocks;
  void *at;

  size = (size + ARENA_ALIGN - 1) & ~(gsize) (ARENA_ALIGN - 1);
  if (block == NULL || block->size - block->used < size)
    {
      block = new_block (MAX (doc->next_size, size));
      block->next = doc->blocks;
      doc->blocks = block;
      doc->next_size = MIN (doc->next_size * 2, (gsize) 1 << 24);
    }
  at = block->data + block->used;
  block->used += size;
  return at;
}

MvJson *
mv_json_doc_add_value (MvJsonDoc *doc, MvJsonKind kind)
{
  MvJson *value = arena_alloc (doc, sizeof (MvJson));

  memset (value, 0, sizeof *value);
  value->kind = kind;
  return value;
}

const char *
mv_json_doc_add_text (MvJsonDoc *doc, const char *text, gsize length)
{
  char *copy = arena_alloc (doc, length + 1);

  memcpy (copy, text, length);
  copy[length] = '\0';
  return copy;
}

void
mv_json_doc_set_root (MvJsonDoc *doc, const MvJson *root)
{
  doc->root = root;
}

const MvJson *
mv_json_doc_root (const MvJsonDoc *doc)
{
  return doc->root;
}

void
mv_json_doc_free (MvJsonDoc *doc)
{
  if (doc == NULL)
    return;
  while (doc->blocks != NULL)
    {
      Block *next = doc->blocks->next;

      g_free (doc->blocks);
      doc->blocks = next;
    }
  g_free (doc);
}

/* ---- conversions ---- */

/* Both recurse: every tree here comes from a reader that bounds its
 * depth, or from a spec that was read so. */

JsonNode *
mv_json_to_node (const MvJson *value)
{
  switch (value->kind)
    {
    case MV_JSON_NULL:
      return json_node_init_null (json_node_alloc ());
    case MV_JSON_BOOLEAN:
      return json_node_init_boolean (json_node_alloc (), value->boolean);
    case MV_JSON_INTEGER:
      return json_node_init_int (json_node_alloc (), value->integer);
    case MV_JSON_REAL:
      return json_node_init_double (json_node_alloc (), value->real);
    case MV_JSON_STRING:
      return json_node_init_string (json_node_alloc (), value->string);
    case MV_JSON_ARRAY:
      {
        g_autoptr(JsonArray) array = json_array_sized_new (value->count);

        mv_json_each (element, value)
          json_array_add_element (array, mv_json_to_node (element));
        return json_node_init_array (json_node_alloc (), array);
      }
    case MV_JSON_OBJECT:
      {
        g_autoptr(JsonObject) object = json_object_new ();

        mv_json_each (member, value)
          json_object_set_member (object, member->name, mv_json_to_node (member));
        return json_node_init_object (json_node_alloc (), object);
      }
    }
  g_return_val_if_reached (NULL);
}

static MvJson *
value_from_node (MvJsonDoc *doc, JsonNode *node)
{
  MvJson *value;
  MvJson *last = NULL;
  GList *items = NULL;
  JsonObject *object = NULL;

  switch (JSON_NODE_TYPE (node))
    {
    case JSON_NODE_NULL:
      return mv_json_doc_add_value (doc, MV_JSON_NULL);
    case JSON_NODE_VALUE:
      switch (json_node_get_value_type (node))
        {
        case G_TYPE_BOOLEAN:
          value = mv_json_doc_add_value (doc, MV_JSON_BOOLEAN);
          value->boolean = json_node_get_boolean (node);
          return value;
        case G_TYPE_INT64:
          value = mv_json_doc_add_value (doc, MV_JSON_INTEGER);
          value->integer = json_node_get_int (node);
          return value;
        case G_TYPE_DOUBLE:
          value = mv_json_doc_add_value (doc, MV_JSON_REAL);
          value->real = json_node_get_double (node);
          return value;
        default:
          {
            const char *text = json_node_get_string (node);

            value = mv_json_doc_add_value (doc, MV_JSON_STRING);
            value->string = mv_json_doc_add_text (doc, text ? text : "", text ? strlen (text) : 0);
            return value;
          }
        }
    case JSON_NODE_ARRAY:
      value = mv_json_doc_add_value (doc, MV_JSON_ARRAY);
      items = json_array_get_elements (json_node_get_array (node));
      break;
    case JSON_NODE_OBJECT:
      value = mv_json_doc_add_value (doc, MV_JSON_OBJECT);
      object = json_node_get_object (node);
      items = json_object_get_members (object);
      break;
    default:
      g_return_val_if_reached (NULL);
    }
  for (GList *l = items; l != NULL; l = l->next)
    {
      MvJson *item;

      if (object != NULL)
        {
          item = value_from_node (doc, json_object_get_member (object, l->data));
          item->name_length = strlen (l->data);
          item->name = mv_json_doc_add_text (doc, l->data, item->name_length);
        }
      else
        item = value_from_node (doc, l->data);
      item->index = value->count++;
      if (last == NULL)
        value->first = item;
      else
        last->next = item;
      last = item;
    }
  g_list_free (items);
  return value;
}

MvJsonDoc *
mv_json_doc_from_node (JsonNode *node)
{
  MvJsonDoc *doc = mv_json_doc_new (0);

  mv_json_doc_set_root (doc, value_from_node (doc, node));
  return doc;
}

/* ---- strict reading ---- */

/* "an object", "a string", ...: what @value is, for error messages. */
static const char *
kind_name (const MvJson *value)
{
  switch (value->kind)
    {
    case MV_JSON_OBJECT:
      return "an object";
    case MV_JSON_ARRAY:
      return "an array";
    case MV_JSON_NULL:
      return "null";
    case MV_JSON_STRING:
      return "a string";
    case MV_JSON_BOOLEAN:
      return "a boolean";
    case MV_JSON_INTEGER:
      return "an integer";
    case MV_JSON_REAL:
      return "a number";
    }
  return "a value";
}

gboolean
mv_json_wrong_type (const MvJson *value, const char *field, const char *expected, GError **error)
{
  g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
               "%s: expected %s, got %s", field, expected, kind_name (value));
  return FALSE;
}

/* Whether @member is named @name, @length bytes long. */
static inline gboolean
is_named (const MvJson *member, const char *name, gsize length)
{
  return member->name_length == length && memcmp (member->name, name, length) == 0;
}

const MvJson *
mv_json_member (const MvJson *object, const char *name)
{
  gsize length = strlen (name);

  g_return_val_if_fail (object->kind == MV_JSON_OBJECT, NULL);

  /* Objects here hold a few dozen members at most that are looked up by
   * name; larger ones (maps) are walked, never searched. */
  mv_json_each (member, object)
    if (is_named (member, name, length))
      return member->kind == MV_JSON_NULL ? NULL : member;
  return NULL;
}

const MvJson *
mv_json_required_member (const MvJson *object, const char *name, GError **error)
{
  const MvJson *value = mv_json_member (object, name);

  if (value == NULL)
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "%s: missing", name);
  return value;
}

gboolean
mv_json_reject_unknown_members (const MvJson *object, const char *where,
                                const char *const *known, GError **error)
{
  mv_json_each (member, object)
    {
      const char *const *k = known;

      while (*k != NULL && ((*k)[0] != member->name[0] || strcmp (*k, member->name) != 0))
        k++;
      if (*k != NULL)
        continue;
      if (where != NULL)
        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                     "%s: unknown field '%s'", where, member->name);
      else
        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                     "unknown field '%s'", member->name);
      return FALSE;
    }
  return TRUE;
}

gboolean
mv_json_read_bool (const MvJson *value, const char *field, gboolean *out, GError **error)
{
  if (value->kind != MV_JSON_BOOLEAN)
    return mv_json_wrong_type (value, field, "a boolean", error);
  *out = value->boolean;
  return TRUE;
}

gboolean
mv_json_read_string (const MvJson *value, const char *field, const char **out, GError **error)
{
  if (value->kind != MV_JSON_STRING)
    return mv_json_wrong_type (value, field, "a string", error);
  *out = value->string;
  return TRUE;
}

gboolean
mv_json_read_string_member (const MvJson *object, const char *name, gboolean empty_is_absent,
                            char **out, GError **error)
{
  const MvJson *value = mv_json_member (object, name);
  const char *text = NULL;

  if (value == NULL)
    return TRUE;
  if (!mv_json_read_string (value, name, &text, error))
    return FALSE;
  g_free (*out);
  *out = (empty_is_absent && *text == '\0') ? NULL : g_strdup (text);
  return TRUE;
}

gboolean
mv_json_read_int (const MvJson *value, const char *field, gint64 min, gint64 max,
                  gint64 *out, GError **error)
{
  if (value->kind != MV_JSON_INTEGER)
    return mv_json_wrong_type (value, field, "an integer", error);
  if (value->integer < min)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: %" G_GINT64_FORMAT " is below the minimum of %" G_GINT64_FORMAT,
                   field, value->integer, min);
      return FALSE;
    }
  if (value->integer > max)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: %" G_GINT64_FORMAT " is more than the limit of %" G_GINT64_FORMAT,
                   field, value->integer, max);
      return FALSE;
    }
  *out = value->integer;
  return TRUE;
}

gboolean
mv_json_read_integer (const MvJson *value, const char *field, gint64 *out, char **written,
                      GError **error)
{
  double real;

  *written = NULL;
  if (value->kind == MV_JSON_INTEGER)
    {
      *out = value->integer;
      return TRUE;
    }
  if (value->kind != MV_JSON_REAL)
    return mv_json_wrong_type (value, field, "an integer", error);

  real = value->real;
  /* -2^63 and 2^63 are exact doubles; the integers lie between them.
   * Doubles beyond hold only whole numbers. */
  if (real >= -9223372036854775808.0 && real < 9223372036854775808.0)
    {
      if ((double) (gint64) real != real)
        return mv_json_wrong_type (value, field, "an integer", error);
      *out = (gint64) real;
      return TRUE;
    }
  {
    char text[G_ASCII_DTOSTR_BUF_SIZE];

    *written = g_strdup (g_ascii_formatd (text, sizeof text, "%g", real));
  }
  *out = real < 0 ? G_MININT64 : G_MAXINT64;
  return TRUE;
}
