/* Snapshots: a machine frozen to disk as a resource of its own (seed 002,
 * Snapshot and FrozenGuest), their record (snapshot.json), the names they
 * get, and the spec a fork of one starts from. Pure. */
#pragma once
#include "image-config.h"
#include "spec.h"

#include <json-glib/json-glib.h>

#define MV_SNAPSHOT_RECORD_FORMAT  1
#define MV_SNAPSHOTS_MAX           4096
/* snapshot.json: the machine's spec with room for the snapshot's fields. */
#define MV_SNAPSHOT_RECORD_MAX_BYTES  (MV_SPEC_MAX_BYTES + 16 * 1024)
/* A fork's spec document: the fields that differ from the source's. */
#define MV_FORK_SPEC_MAX_BYTES     MV_SPEC_MAX_BYTES

typedef enum {
  MV_SNAPSHOT_MEMORY,     /* a running, paused or standby guest, with its overlay disk */
  MV_SNAPSHOT_DISK,       /* a stopped machine's overlay disk alone */
} MvSnapshotKind;

typedef struct {
  char          *id;
  char          *name;
  MvSnapshotKind kind;
  char          *machine_id;          /* the machine it was taken from, which may be gone */
  char          *machine_name;        /* its name then */
  /* The frozen guest (seed 002, FrozenGuest): what the machine was then. */
  MvSpec        *spec;
  MvImageConfig *image_config;        /* of the image it is pinned to; NULL: none */
  char          *address;             /* its address on its network, CIDR; NULL: none */
  char          *mac_address;         /* NULL: none */
  char          *hypervisor_type;     /* memory: only it resumes the guest */
  char          *hypervisor_version;  /* memory: which must match as well */
  guint          vcpus;
  guint64        memory_bytes;
  char          *image_digest;        /* NULL: it boots no image */
  gboolean       has_disk;            /* holds an overlay disk (a machine with an image) */
  gint64         created_at;          /* µs since the epoch */
  guint64        size_bytes;          /* its files on the host's disk, measured when taken */
} MvSnapshot;

void        mv_snapshot_free (MvSnapshot *snapshot);
MvSnapshot *mv_snapshot_copy (const MvSnapshot *snapshot);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvSnapshot, mv_snapshot_free)

const char *mv_snapshot_kind_to_string (MvSnapshotKind kind);

/* The name a snapshot of @machine_name taken at @now (µs) gets when it is
 * given none: "web-20261201-221500", shortened to a valid name. */
char       *mv_snapshot_default_name (const char *machine_name, gint64 now);

/* The rules a record is held to: name, IDs, kind and what it needs. */
gboolean    mv_snapshot_validate (const MvSnapshot *snapshot, GError **error);

/* snapshot.json, format 1: the spec with its secrets (a restore puts it
 * back whole), so the file is the daemon's alone. */
char       *mv_snapshot_to_json (const MvSnapshot *snapshot);
MvSnapshot *mv_snapshot_from_json (const char *data, gsize len, GError **error);

/* The spec of a fork of @snapshot: its spec with the members of the JSON
 * object @fork_json (at most MV_FORK_SPEC_MAX_BYTES, at least "name") in
 * place of its own, and never its "id", "static_ip" or "hostname" unless
 * @fork_json gives them: the fork has an identity of its own. Parsed
 * strictly as a spec is; not validated. */
MvSpec     *mv_snapshot_fork_spec (const MvSnapshot *snapshot, const char *fork_json,
                                   GError **error);
