/* Text from outside, made safe to show and to name things with: short
 * escaped excerpts for messages, and the characters a name may not hold
 * because they make it display as another. Pure. */
#pragma once
#include <glib.h>

/* How much of an input a message quotes at most. */
#define MV_EXCERPT_MAX_BYTES  40

/* At most @max_bytes of @text (@length bytes, or up to its NUL when
 * negative), printable characters kept as they are; controls, invisible
 * and bidirectional characters written as \u{XXXX}, bytes that are not
 * UTF-8 as \xNN, quotes and backslashes escaped; "…" when cut. Always
 * valid UTF-8. */
char       *mv_text_excerpt (const char *text, gssize length, gsize max_bytes);

/* Why @c may not appear in a name ("a bidirectional control"), or NULL
 * when it may: C0 and C1 controls, bidirectional controls, invisible and
 * formatting characters, private-use and unassigned code points, and
 * every space but U+0020. */
const char *mv_text_name_char_problem (gunichar c);

/* Checks @name (valid UTF-8) against the rules above, that it is in
 * Unicode normalization form C (so that one name has one spelling), does
 * not start with a combining mark, and neither starts nor ends with a
 * space. The message starts with "@field: " and calls @name a @noun:
 * "labels: U+202E is not allowed in a key (a bidirectional control)". */
gboolean    mv_text_check_name_chars (const char *field, const char *noun, const char *name,
                                      GError **error);

/* @value as bytes for people: "1000", "33554432 (32 MiB)". */
char       *mv_text_bytes (guint64 value);
