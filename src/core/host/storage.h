/* Storage: what a machine keeps on the host's disks beside its records.
 * Today that is its frozen guest (standby); images, overlay disks and
 * volumes join here (src/storage/ fills it in; tests use a fake).
 * Contract:
 * - functions that block say so and are called from worker threads, at
 *   most one at a time per machine; the others are cheap and may be called
 *   on the main thread;
 * - a failed call leaves what was there before (a half-written frozen
 *   guest is never found under the name of a whole one). */
#pragma once
#include "runtime.h"

typedef struct _MvStorage MvStorage;

struct _MvStorage {
  gpointer data;

  /* Where the machine's frozen guest lives once whole. Pure. */
  char    *(*saved_state_dir) (MvStorage *storage, const char *machine_id);
  /* Blocks: removes any earlier frozen guest, creates an empty directory
   * for a new one and returns its path; it is not found as the machine's
   * frozen guest until commit_saved_state(). */
  char    *(*stage_saved_state) (MvStorage *storage, const char *machine_id, GError **error);
  /* Cheap: makes the staged frozen guest the machine's, whole, at once. */
  gboolean (*commit_saved_state) (MvStorage *storage, const char *machine_id, GError **error);
  /* Blocks (as long as removing a guest's memory takes): removes the
   * frozen guest, whole or staged. */
  gboolean (*discard_saved_state) (MvStorage *storage, const char *machine_id, GError **error);
  /* Cheap: moves the frozen guest out of the way so nothing finds it any
   * more; its files are deleted by sweep(). */
  gboolean (*retire_saved_state) (MvStorage *storage, const char *machine_id, GError **error);
  /* Blocks: deletes what retire_saved_state() moved aside, also what a
   * crash left of it. */
  gboolean (*sweep) (MvStorage *storage, const char *machine_id, GError **error);
  /* Cheap: whether a whole frozen guest exists, and a staged one. */
  gboolean (*has_saved_state) (MvStorage *storage, const char *machine_id);
  gboolean (*has_staged_state) (MvStorage *storage, const char *machine_id);
};
