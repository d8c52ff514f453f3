/* What the files of the spec share among themselves (spec.c, spec-json.c,
 * spec-validate.c, spec-metadata.c); other code uses spec.h. */
#pragma once
#include "spec.h"

MvDisk  *mv_disk_new (const char *path, gboolean read_only);

/* The names mv_restart_mode_to_string() and mv_readiness_to_string() give,
 * read back; *@readiness_text is set (a copy) for the console kind only. */
gboolean mv_restart_mode_from_string (const char *s, MvRestartMode *mode);
gboolean mv_readiness_from_string (const char *s, MvReadiness *readiness,
                                   char **readiness_text);

/* Checks @value of the numeric field @field, named as the document names
 * it ("restart.max_retries"), against the field's own bounds, which
 * spec-validate.c keeps; the message states them. @written, when not
 * NULL, is how the document wrote a number no integer holds ("1e+300"). */
gboolean mv_spec_check_number (const char *field, gint64 value, const char *written,
                               GError **error);

/* What a fingerprint or a comparison leaves out of the document. */
typedef enum {
  MV_SPEC_CANON_NO_ID_LABELS = 1 << 0,
  MV_SPEC_CANON_NO_STANDBY   = 1 << 1,
  MV_SPEC_CANON_STRIP_QUERY  = 1 << 2,
} MvSpecCanonFlags;

/* The document with its secrets, less what @flags leave out, compact:
 * the form specs are compared and fingerprinted in. */
char    *mv_spec_canonical_json (const MvSpec *spec, MvSpecCanonFlags flags);
