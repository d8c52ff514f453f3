/* The host's snapshots (core/host/snapshots.h), kept in @dir (the state
 * directory's snapshots/), taking machines' disks and frozen guests from
 * @storage, which outlives them. */
#pragma once
#include "core/host/snapshots.h"
#include "core/host/storage.h"

/* What a snapshot (or warm template) being written is called in @dir until
 * it is whole: this prefix and an ID. */
#define MV_SNAPSHOT_STAGED_PREFIX ".staged-"

MvSnapshots *mv_snapshot_store_new (const char *dir, MvStorage *storage);
void         mv_snapshot_store_free (MvSnapshots *snapshots);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvSnapshots, mv_snapshot_store_free)
