/* One way to write a document three ways: as a json-glib tree, as the
 * text json_to_string() would make of that tree, or only as that text's
 * length. A serializer written once against MvJsonOut gives all three, so
 * a size check or a fingerprint needs no tree. Pure. */
#pragma once
#include <json-glib/json-glib.h>

typedef enum {
  MV_JSON_OUT_TREE,   /* a JsonNode, taken with mv_json_out_steal_node() */
  MV_JSON_OUT_TEXT,   /* compact text, taken with mv_json_out_steal_text() */
  MV_JSON_OUT_COUNT,  /* only the text's length, mv_json_out_size() */
} MvJsonOutMode;

/* Deep enough for every document the daemon writes this way. */
#define MV_JSON_OUT_MAX_DEPTH 16

typedef struct {
  MvJsonOutMode mode;
  JsonBuilder  *builder;                        /* TREE */
  GString      *text;                           /* TEXT */
  gsize         size;                           /* TEXT and COUNT */
  guint         depth;
  gboolean      has_items[MV_JSON_OUT_MAX_DEPTH]; /* per open container: a comma is due */
  gboolean      after_name;                     /* a member's name was written last */
} MvJsonOut;

void      mv_json_out_init        (MvJsonOut *out, MvJsonOutMode mode);
void      mv_json_out_clear       (MvJsonOut *out);
JsonNode *mv_json_out_steal_node  (MvJsonOut *out);
char     *mv_json_out_steal_text  (MvJsonOut *out);
gsize     mv_json_out_size        (const MvJsonOut *out);

void mv_json_out_begin_object (MvJsonOut *out);
void mv_json_out_end_object   (MvJsonOut *out);
void mv_json_out_begin_array  (MvJsonOut *out);
void mv_json_out_end_array    (MvJsonOut *out);
/* The next value is the member @name of the open object. */
void mv_json_out_name         (MvJsonOut *out, const char *name);

void mv_json_out_string  (MvJsonOut *out, const char *value);
void mv_json_out_int     (MvJsonOut *out, gint64 value);
void mv_json_out_boolean (MvJsonOut *out, gboolean value);
/* Any tree, written as it is; @node stays the caller's. */
void mv_json_out_node    (MvJsonOut *out, JsonNode *node);
void mv_json_out_array   (MvJsonOut *out, JsonArray *array);

/* A member @name with its value, in one call. */
void mv_json_out_string_member  (MvJsonOut *out, const char *name, const char *value);
/* ...left out when @value is NULL. */
void mv_json_out_optional_string (MvJsonOut *out, const char *name, const char *value);
void mv_json_out_int_member     (MvJsonOut *out, const char *name, gint64 value);
void mv_json_out_boolean_member (MvJsonOut *out, const char *name, gboolean value);
/* An array of the strings of the NULL-terminated @strings (none when NULL). */
void mv_json_out_strv           (MvJsonOut *out, char **strings);
/* An array of the strings of @strings (char*); each is @value when it is
 * not NULL (a redaction), else the array's own. */
void mv_json_out_string_array   (MvJsonOut *out, GPtrArray *strings, const char *value);
/* An object of the char* -> char* @map with its keys in byte order, so
 * that the text does not depend on hash order; each value is @value when
 * it is not NULL (a redaction), else the map's own. */
void mv_json_out_string_map     (MvJsonOut *out, GHashTable *map, const char *value);
/* The same object as a tree of its own. */
JsonNode *mv_json_string_map_to_node (GHashTable *map);
