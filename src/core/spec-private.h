/* What the files of the spec share among themselves (spec.c, spec-json.c,
 * spec-validate.c, spec-metadata.c); other code uses spec.h. */
#pragma once
#include "spec.h"

MvDisk  *mv_disk_new (const char *path, gboolean read_only, gboolean root);
/* A mount of @type with that type's default mode, nothing else set. */
MvMount *mv_mount_new (MvMountType type);
void     mv_mount_free (MvMount *mount);
/* A check of @kind with the default times and retries. */
MvHealthCheck *mv_health_check_new (MvHealthCheckKind kind);
void     mv_health_check_free (MvHealthCheck *check);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvMount, mv_mount_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvHealthCheck, mv_health_check_free)

#define MV_FILE_MOUNT_DEFAULT_MODE        0644
#define MV_TMPFS_DEFAULT_MODE             01777
#define MV_MOUNT_MODE_MAX                 07777
#define MV_TMPFS_MIN_BYTES                4096
#define MV_HEALTH_DEFAULT_INTERVAL_SECONDS 30
#define MV_HEALTH_DEFAULT_TIMEOUT_SECONDS 5
#define MV_HEALTH_DEFAULT_RETRIES         3
#define MV_HEALTH_PORT_MAX                65535

/* The names mv_restart_mode_to_string() and mv_readiness_to_string() give,
 * read back; *@readiness_text is set (a copy) for the console kind only. */
gboolean mv_restart_mode_from_string (const char *s, MvRestartMode *mode);
gboolean mv_init_mode_from_string (const char *s, MvInitMode *mode);
gboolean mv_mount_type_from_string (const char *s, MvMountType *type);
gboolean mv_readiness_from_string (const char *s, MvReadiness *readiness,
                                   char **readiness_text);

/* Checks @value of the numeric field @field, named as the document names
 * it ("restart.max_retries"), against the field's own bounds, which
 * spec-validate.c keeps; the message states them. @written, when not
 * NULL, is how the document wrote a number no integer holds ("1e+300"). */
gboolean mv_spec_check_number (const char *field, gint64 value, const char *written,
                               GError **error);
/* The same against bounds the caller gives, for fields whose names hold
 * an index ("mounts[2].size_bytes"); @bytes shows values as sizes. */
gboolean mv_spec_check_range (const char *field, gint64 value, const char *written,
                              gint64 min, gint64 max, gboolean bytes, GError **error);

/* What a fingerprint or a comparison leaves out of the document. */
typedef enum {
  MV_SPEC_CANON_NO_ID_LABELS = 1 << 0,
  MV_SPEC_CANON_NO_STANDBY   = 1 << 1,
  MV_SPEC_CANON_STRIP_QUERY  = 1 << 2,
  /* hostname, ssh_keys, user_data and metadata */
  MV_SPEC_CANON_NO_GUEST_METADATA = 1 << 3,
} MvSpecCanonFlags;

/* The document with its secrets, less what @flags leave out, compact:
 * the form specs are compared and fingerprinted in. */
char    *mv_spec_canonical_json (const MvSpec *spec, MvSpecCanonFlags flags);
/* The length of mv_spec_canonical_json()'s text, found without making it. */
gsize    mv_spec_canonical_size (const MvSpec *spec, MvSpecCanonFlags flags);
