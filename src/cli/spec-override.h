/* The --set FIELD=JSON options of fork and snapshot fork: the fields of
 * the new machine's spec that differ from the one it is copied from. */
#pragma once

#include <glib.h>

/* How many --set options one command takes: a spec has fewer fields. */
#define MV_SPEC_OVERRIDES_MAX 64

/* How deep a value may nest, as the daemon allows a spec to. */
#define MV_SPEC_OVERRIDE_MAX_DEPTH 32

/* The largest document sent, the daemon's limit for a fork's spec. */
#define MV_SPEC_OVERRIDES_MAX_BYTES (2 * 1024 * 1024)

/* Builds the spec_json of a fork: {"name": NAME} and the field of each
 * "FIELD=JSON" in OVERRIDES (char *, in their order). Returns NULL with
 * ERROR set, naming the argument, when one has no "=", a FIELD that is
 * not a spec field's name (lower-case letters, digits and "_"), a value
 * that is not JSON or nests too deep, when a field is given twice or is
 * "name" (NAME gives it), when there are too many, or when the document
 * would be larger than the daemon takes. */
char *mv_spec_overrides_build (const char *name, GPtrArray *overrides, GError **error);
