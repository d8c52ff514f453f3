/* A read-only JSON document, as the strict reader makes it: every value
 * of one document in one arena, freed at once, members in the order they
 * were written. It is what the spec and the records are read from; a
 * record holds a few hundred values, and a start reads thousands of
 * records, so it costs one allocation per document rather than a few per
 * value. The readers below are strict: each error is
 * MV_ERROR_INVALID_ARGUMENT naming the field. Pure. */
#pragma once
#include <json-glib/json-glib.h>

typedef enum {
  MV_JSON_NULL,
  MV_JSON_BOOLEAN,
  MV_JSON_INTEGER,     /* written without a fraction or an exponent */
  MV_JSON_REAL,        /* any other number */
  MV_JSON_STRING,
  MV_JSON_ARRAY,
  MV_JSON_OBJECT,
} MvJsonKind;

typedef struct MvJson MvJson;

struct MvJson {
  MvJsonKind    kind;
  guint         index;    /* its place in its array or object, from 0 */
  guint         count;    /* arrays and objects: how many values they hold */
  guint         name_length;
  const char   *name;     /* a member's name; NULL elsewhere */
  const MvJson *next;     /* the next element or member */
  union {
    gboolean      boolean;
    gint64        integer;
    double        real;
    const char   *string;  /* UTF-8 without NUL (the reader refuses \u0000) */
    const MvJson *first;   /* arrays and objects: the first value */
  };
};

/* The first value of @container if it is an array or object holding
 * any, else NULL. */
static inline const MvJson *
mv_json_first (const MvJson *container)
{
  return container->kind == MV_JSON_ARRAY || container->kind == MV_JSON_OBJECT ? container->first
                                                                              : NULL;
}

/* Each value of @container in order: none unless it is an array or
 * object. */
#define mv_json_each(item, container) \
  for (const MvJson *item = mv_json_first (container); item != NULL; item = item->next)

/* The arena and the root of one document. What outlives it is copied
 * out of it (mv_json_to_node() for a part kept as it is). */
typedef struct MvJsonDoc MvJsonDoc;

const MvJson *mv_json_doc_root (const MvJsonDoc *doc);
void          mv_json_doc_free (MvJsonDoc *doc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvJsonDoc, mv_json_doc_free)

/* ---- building (the reader's side) ---- */

MvJsonDoc    *mv_json_doc_new       (gsize size_hint);
/* A value of @kind, zeroed, in @doc's arena. */
MvJson       *mv_json_doc_add_value (MvJsonDoc *doc, MvJsonKind kind);
/* A copy of @length bytes of @text, ended, in @doc's arena. */
const char   *mv_json_doc_add_text  (MvJsonDoc *doc, const char *text, gsize length);
void          mv_json_doc_set_root  (MvJsonDoc *doc, const MvJson *root);

/* ---- conversions ---- */

/* json-glib's tree of @value (free with json_node_unref), for what keeps
 * or passes on a part of a document. */
JsonNode     *mv_json_to_node   (const MvJson *value);
/* A document of json-glib's tree @node, for the readers below. */
MvJsonDoc    *mv_json_doc_from_node (JsonNode *node);

/* ---- strict reading ---- */

static inline gboolean
mv_json_is_object (const MvJson *value)
{
  return value->kind == MV_JSON_OBJECT;
}

static inline gboolean
mv_json_is_array (const MvJson *value)
{
  return value->kind == MV_JSON_ARRAY;
}

/* Sets "@field: expected @expected, got ..." and returns FALSE. */
gboolean      mv_json_wrong_type (const MvJson *value, const char *field, const char *expected,
                                  GError **error);

/* The member @name of the object @object, or NULL when it is absent or
 * null: null stands for an optional field left out. */
const MvJson *mv_json_member (const MvJson *object, const char *name);
/* The same, but a missing member is the error "@name: missing". */
const MvJson *mv_json_required_member (const MvJson *object, const char *name, GError **error);
/* Fails with "unknown field 'x'" for a member not in @known; @where,
 * when not NULL, is the path of a nested object and prefixes the message. */
gboolean      mv_json_reject_unknown_members (const MvJson *object, const char *where,
                                              const char *const *known, GError **error);

gboolean      mv_json_read_bool   (const MvJson *value, const char *field, gboolean *out,
                                   GError **error);
/* *@out points into @value's document. */
gboolean      mv_json_read_string (const MvJson *value, const char *field, const char **out,
                                   GError **error);
/* Reads the optional string member @name into *@out, a copy (left alone
 * when absent). With @empty_is_absent, "" means the field was left out. */
gboolean      mv_json_read_string_member (const MvJson *object, const char *name,
                                          gboolean empty_is_absent, char **out, GError **error);
/* An integer from @min to @max, written as one: what the daemon's own
 * records hold. */
gboolean      mv_json_read_int (const MvJson *value, const char *field, gint64 min, gint64 max,
                                gint64 *out, GError **error);
/* An integer, also written as an integral number (1000.0), as some
 * clients' encoders do; bounds are the caller's. An integral number that
 * no 64-bit integer holds (1e300) reads as G_MININT64 or G_MAXINT64 with
 * *@written set to how it reads ("1e+300"), for the caller's message;
 * otherwise *@written is NULL. */
gboolean      mv_json_read_integer (const MvJson *value, const char *field, gint64 *out,
                                    char **written, GError **error);
