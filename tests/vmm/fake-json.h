/* JSON checked the way serde derives check it, with serde_json's messages:
 * "unknown field `foo`, expected one of `a`, `b` at line 1 column 6",
 * "missing field `x`", "invalid type: string \"1\", expected u8". */
#pragma once
#include <json-glib/json-glib.h>

typedef enum {
  FAKE_U8, FAKE_U16, FAKE_U32, FAKE_U64, FAKE_USIZE, FAKE_I64,
  FAKE_BOOL, FAKE_STR, FAKE_ANY, FAKE_ENUM, FAKE_STRUCT, FAKE_LIST,
} FakeKind;

typedef struct _FakeType FakeType;

typedef struct {
  const char     *name;
  const FakeType *type;
  gboolean        required;
  const char     *fallback;   /* JSON text used when absent; NULL: null */
} FakeField;

struct _FakeType {
  FakeKind                 kind;
  gboolean                 nullable;   /* Option<T>: null is allowed */
  const char              *name;       /* struct and enum names */
  const FakeField         *fields;     /* NULL-terminated */
  gboolean                 lenient;    /* unknown fields kept, not refused */
  const char *const       *variants;   /* NULL-terminated */
  gboolean                 any_case;   /* variants match in any case */
  const FakeType          *of;         /* list element */
};

/* Schemas are static tables built with these. */
#define FAKE_STRUCT_OF(n, f)      { .kind = FAKE_STRUCT, .name = n, .fields = f }
#define FAKE_OPT_STRUCT_OF(n, f)  { .kind = FAKE_STRUCT, .nullable = TRUE, .name = n, .fields = f }
#define FAKE_LENIENT_OF(n, f)     { .kind = FAKE_STRUCT, .name = n, .fields = f, .lenient = TRUE }
#define FAKE_OPT_LENIENT_OF(n, f) { .kind = FAKE_STRUCT, .nullable = TRUE, .name = n, .fields = f, \
                                    .lenient = TRUE }
#define FAKE_ENUM_OF(n, v)        { .kind = FAKE_ENUM, .name = n, .variants = v }
#define FAKE_OPT_ENUM_OF(n, v)    { .kind = FAKE_ENUM, .nullable = TRUE, .name = n, .variants = v }
#define FAKE_LIST_OF(t)           { .kind = FAKE_LIST, .of = t }
#define FAKE_OPT_LIST_OF(t)       { .kind = FAKE_LIST, .nullable = TRUE, .of = t }

extern const FakeType fake_u8, fake_u16, fake_u32, fake_u64, fake_usize, fake_i64;
extern const FakeType fake_bool, fake_str, fake_any;
extern const FakeType fake_opt_u8, fake_opt_u16, fake_opt_u64, fake_opt_usize, fake_opt_i64;
extern const FakeType fake_opt_bool, fake_opt_str;

GQuark fake_json_error_quark (void);

/* Parses @len bytes of @data and checks them against @type (NULL: any
 * JSON). Struct fields left out get their fallback, so the result has
 * every field. The error message is serde_json's, position included. */
JsonNode *fake_json_parse (const char *data, gsize len, const FakeType *type, GError **error);
/* Checks a value already parsed (a snapshot's config, say). */
JsonNode *fake_json_check (JsonNode *value, const FakeType *type, GError **error);

/* Compact JSON text, as serde_json::to_string writes it. */
char     *fake_json_text (JsonNode *node);
/* RFC 7396 merge patch of @patch into @target (consumed); returns the
 * result. */
JsonNode *fake_json_merge_patch (JsonNode *target, JsonNode *patch);

/* Small accessors for checked objects. */
gint64       fake_json_int (JsonObject *object, const char *name);
const char  *fake_json_str (JsonObject *object, const char *name);   /* NULL if null */
gboolean     fake_json_bool (JsonObject *object, const char *name);
JsonObject  *fake_json_obj (JsonObject *object, const char *name);   /* NULL if null */
JsonArray   *fake_json_arr (JsonObject *object, const char *name);   /* NULL if null */
gboolean     fake_json_is_null (JsonObject *object, const char *name);
JsonObject  *fake_json_object_copy (JsonObject *object);
