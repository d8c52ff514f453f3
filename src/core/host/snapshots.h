/* Snapshots: frozen copies of a machine kept beyond its life (memory and
 * disk), from which it is restored or forked. Not on this host yet; a
 * machine's destroy keeps its snapshots (seed 002, Delete).
 * Contract:
 * - create() and remove() block and are called from worker threads;
 * - create() stages the snapshot and moves it into place whole: a failed or
 *   interrupted create leaves no snapshot behind, only staging that
 *   sweep_staging() removes. */
#pragma once
#include "runtime.h"

typedef struct _MvSnapshots MvSnapshots;

struct _MvSnapshots {
  gpointer data;

  /* Copies the frozen guest in @state_dir (as Runtime.save() wrote it)
   * into a new snapshot called @name; returns its ID. */
  char    *(*create) (MvSnapshots *snapshots, const MvRuntimeRequest *req, const char *name,
                      const char *state_dir, GError **error);
  gboolean (*remove) (MvSnapshots *snapshots, const char *snapshot_id, GError **error);
  /* Where the snapshot's frozen guest is, for Runtime.restore(). Pure. */
  char    *(*state_dir) (MvSnapshots *snapshots, const char *snapshot_id);
  /* Removes what interrupted creates left. */
  gboolean (*sweep_staging) (MvSnapshots *snapshots, GError **error);
};
