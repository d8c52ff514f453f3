/* What storage.c and disks.c share. */
#pragma once
#include "storage.h"

#define MV_OVERLAY_NAME          "overlay.ext4"
#define MV_OVERLAY_PARTIAL_NAME  "overlay.ext4.partial"

typedef struct {
  MvRecords    *records;
  MvImageStore *images;
  MvVolumes    *volumes;     /* NULL: this host keeps no volumes */
} MvStorageData;

/* <machine dir>/@name. */
char      *mv_storage_path (MvStorage *storage, const char *machine_id, const char *name);
GPtrArray *mv_storage_prepare_disks (MvStorage *storage, const MvRuntimeRequest *req, GError **error);
GPtrArray *mv_storage_prepare_template_disks (MvStorage *storage, const MvRuntimeRequest *req,
                                              const char *overlay, GError **error);
gboolean   mv_storage_remove_disks (MvStorage *storage, const char *machine_id, GError **error);
