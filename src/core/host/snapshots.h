/* Snapshots: frozen copies of a machine kept beyond its life (seed 002,
 * Store.StageSnapshot, CreateSnapshot, SnapshotDir), from which it is
 * restored or forked. src/storage/ keeps them beside the machines; a
 * machine's destroy keeps its snapshots.
 * Contract:
 * - the functions that block say so and are called from worker threads;
 *   the reconciler never has two of them at work on one snapshot, nor on
 *   one machine;
 * - a snapshot is written in a staged directory and moved into place
 *   whole: a failed or interrupted create leaves no snapshot behind, only
 *   staging that sweep() removes; a removed one is gone from its name at
 *   once, its files after. */
#pragma once
#include "core/snapshot.h"
#include "runtime.h"

typedef struct _MvSnapshots MvSnapshots;

struct _MvSnapshots {
  gpointer data;

  /* Blocks: a new, empty directory to write a snapshot in, with the
   * directory for its frozen guest (state_dir()) made in it. It is no
   * snapshot until commit(). */
  char      *(*stage) (MvSnapshots *snapshots, GError **error);
  /* Pure: where a frozen guest is in the snapshot directory @dir (staged
   * or whole): what Runtime.snapshot() writes and Runtime.restore() reads. */
  char      *(*state_dir) (MvSnapshots *snapshots, const char *dir);
  /* Pure: where a machine's overlay disk is in the snapshot directory @dir. */
  char      *(*disk_path) (MvSnapshots *snapshots, const char *dir);
  /* Pure: the directory of the snapshot @id once it is whole. */
  char      *(*dir) (MvSnapshots *snapshots, const char *id);
  /* Blocks: copies @machine_id's overlay disk into @dir (a reflink where
   * the file system can); *@had says whether it has one. A full disk is
   * MV_ERROR_RESOURCE_EXHAUSTED. */
  gboolean   (*take_disk) (MvSnapshots *snapshots, const char *dir, const char *machine_id,
                           gboolean *had, GError **error);
  /* Blocks: copies @machine_id's frozen guest (standby) into @dir's. */
  gboolean   (*take_saved_state) (MvSnapshots *snapshots, const char *dir,
                                  const char *machine_id, GError **error);
  /* Blocks: writes @snapshot's record into the staged @dir, sets its
   * size_bytes to what the snapshot takes on disk, makes it all durable
   * and moves it into place under its ID in one rename. */
  gboolean   (*commit) (MvSnapshots *snapshots, const char *dir, MvSnapshot *snapshot,
                        GError **error);
  /* Cheap: whether the file system of @dir has (almost) no room left:
   * what a failure to write a frozen guest there means then. */
  gboolean   (*full) (MvSnapshots *snapshots, const char *dir);
  /* Blocks: removes a staged directory and all in it. */
  void       (*discard) (MvSnapshots *snapshots, const char *dir);
  /* Blocks: makes the disk in @dir (if it holds one) @machine_id's overlay
   * disk, replacing its own in one rename; with @state, the frozen guest
   * in @dir becomes the machine's (Storage's saved state, committed
   * whole). @dir is copied from, or with @move (a staged directory about
   * to be discarded) its files are moved. */
  gboolean   (*put_back) (MvSnapshots *snapshots, const char *dir, const char *machine_id,
                          gboolean state, gboolean move, GError **error);
  /* Blocks: removes the snapshot @id. */
  gboolean   (*remove) (MvSnapshots *snapshots, const char *id, GError **error);
  /* Blocks: every whole snapshot (MvSnapshot*); one whose record cannot be
   * read or is invalid is left as it is and named in @invalid (ID →
   * message), as invalid machine records are. */
  GPtrArray *(*load) (MvSnapshots *snapshots, GHashTable *invalid, GError **error);
  /* Blocks: removes what interrupted creates and removals left. */
  gboolean   (*sweep) (MvSnapshots *snapshots, GError **error);
};
