/* The one way microvmd reads a JSON document that comes from outside:
 * RFC 8259 exactly, within limits of size and nesting, checked in one
 * pass without recursion, which also builds the daemon's own document
 * (json-tree.h); json-glib's tree, where one is wanted, is made from that
 * (json-glib's own parser recurses, and accepts comments, single quotes
 * and more). Pure. */
#pragma once
#include <json-glib/json-glib.h>
#include "json-tree.h"

typedef struct {
  gsize max_bytes;   /* the whole text */
  guint max_depth;   /* arrays and objects inside each other; {} is 1 */
} MvJsonLimits;

/* Checks that @text (@length bytes, or up to its NUL when negative) is
 * exactly one JSON value with nothing but whitespace around it, at most
 * @limits->max_bytes long and @limits->max_depth deep; that no string
 * holds a raw control character, the escape \u0000 or a lone surrogate;
 * that it is UTF-8 without a byte order mark; that no object has a key
 * twice; and that every number is held exactly enough: integers in 64
 * bits, others finite. Errors are MV_ERROR_INVALID_ARGUMENT, start with
 * "@what: " and give the byte offset (from 0) or the field; they never
 * quote the document beyond a key's short excerpt. */
gboolean  mv_json_check (const char *text, gssize length, const MvJsonLimits *limits,
                         const char *what, GError **error);

/* mv_json_check(), building the daemon's own read-only document in the
 * same pass (json-tree.h); never NULL on success. */
MvJsonDoc *mv_json_read (const char *text, gssize length, const MvJsonLimits *limits,
                         const char *what, GError **error);

/* mv_json_read() as json-glib's tree: the root node (free with
 * json_node_unref), never NULL on success; the same tree json-glib's
 * parser makes of the text. For what is read loosely with json-glib's
 * lookups (the hypervisors' replies). */
JsonNode  *mv_json_parse (const char *text, gssize length, const MvJsonLimits *limits,
                          const char *what, GError **error);
