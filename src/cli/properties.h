/* D-Bus properties as microvmctl reads them: any value decoded into a JSON
 * node, kept with its name and signature in the order the daemon sent them. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <systemd/sd-bus.h>

typedef struct {
  char *name;
  char *signature;
  JsonNode *value;
} MvProperty;

/* An array of MvProperty that frees its elements. */
GPtrArray *mv_properties_new (void);

/* Reads one a{sv} from M into PROPS. */
int mv_properties_read (sd_bus_message *m, GPtrArray *props);

/* Reads any single value from M: basic types become JSON scalars, arrays and
 * structs JSON arrays, dictionaries JSON objects; variants are unwrapped. */
int mv_bus_read_value (sd_bus_message *m, JsonNode **out);

/* Appends a string property: one read on its own (Get), not with GetAll. */
void mv_properties_add_string (GPtrArray *props, const char *name, const char *value);

const MvProperty *mv_properties_lookup (GPtrArray *props, const char *name);

/* The value of a string property, or "" when it is missing or not a string. */
const char *mv_properties_get_string (GPtrArray *props, const char *name);

/* The value of an integer property, or 0 when it is missing. */
gint64 mv_properties_get_int (GPtrArray *props, const char *name);

/* The property's value as a person reads it on one line. */
char *mv_property_format (const MvProperty *prop);

/* "MemoryBytes" → "memory_bytes", "VCPUs" → "vcpus", "APIVersion" →
 * "api_version": the spelling of the spec document and of --json output. */
char *mv_json_key_from_property (const char *name);

/* 268435456 → "256M"; binary units, one decimal when not whole. */
char *mv_format_bytes (guint64 bytes);
