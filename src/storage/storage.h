/* The host's storage layer (core/host/storage.h): a machine's frozen guest
 * lives in its state directory, as saved/ once whole and saved.partial/
 * while it is written; a retired one waits as saved.stale-<random> until
 * it is swept. Its overlay disk is overlay.ext4 there (disks.c). */
#pragma once
#include "core/host/images.h"
#include "core/host/records.h"
#include "core/host/storage.h"
#include "core/host/volumes.h"
#include "images.h"

/* Machine directories come from @records, images from @images (NULL: a
 * host that boots no images, whose machines boot the spec's disks); both
 * outlive the storage. */
MvStorage *mv_storage_new (MvRecords *records, MvImageStore *images);
/* The volumes machines mount; @volumes outlives the storage. */
void       mv_storage_set_volumes (MvStorage *storage, MvVolumes *volumes);
void       mv_storage_free (MvStorage *storage);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvStorage, mv_storage_free)

/* The host's images (core/host/images.h) over @store, which outlives it;
 * @store's pulls report their progress. */
MvImages  *mv_host_images_new (MvImageStore *store);
void       mv_host_images_free (MvImages *images);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvImages, mv_host_images_free)
