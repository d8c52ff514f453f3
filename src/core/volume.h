/* Volumes: named persistent disks that outlive the machines mounting
 * them. Their spec (Manager.CreateVolume), their record (volume.json) and
 * who may hold one. Pure. */
#pragma once
#include "spec.h"
#include "state.h"

#include <json-glib/json-glib.h>

#define MV_VOLUME_MIN_BYTES      (G_GUINT64_CONSTANT (16) << 20)   /* 16 MiB */
#define MV_VOLUME_MAX_BYTES      (G_GUINT64_CONSTANT (16) << 40)   /* 16 TiB */
#define MV_VOLUMES_MAX           4096
#define MV_VOLUME_RECORD_FORMAT  1
/* A volume spec, as CreateVolume takes it. */
#define MV_VOLUME_SPEC_MAX_BYTES 4096

typedef struct {
  char   *id;
  char   *name;
  guint64 size_bytes;
  gint64  created_at;      /* µs since the epoch */
} MvVolume;

void      mv_volume_free (MvVolume *volume);
MvVolume *mv_volume_copy (const MvVolume *volume);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvVolume, mv_volume_free)

/* The {name, size_bytes} of a CreateVolume, read strictly (unknown
 * fields refused); MV_ERROR_INVALID_ARGUMENT naming the field. The
 * volume's id and created_at are left unset. */
MvVolume *mv_volume_spec_from_json (const char *json, GError **error);
/* The size and name rules a volume's record and spec share. */
gboolean  mv_volume_validate (const MvVolume *volume, GError **error);

/* volume.json, format 1. */
char     *mv_volume_to_json (const MvVolume *volume);
MvVolume *mv_volume_from_json (const char *data, gsize len, GError **error);
