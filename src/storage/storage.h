/* The host's storage layer (core/host/storage.h): a machine's frozen guest
 * lives in its state directory, as saved/ once whole and saved.partial/
 * while it is written; a retired one waits as saved.stale-<random> until
 * it is swept. */
#pragma once
#include "core/host/records.h"
#include "core/host/storage.h"

/* Machine directories come from @records, which outlives the storage. */
MvStorage *mv_storage_new (MvRecords *records);
void       mv_storage_free (MvStorage *storage);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvStorage, mv_storage_free)
