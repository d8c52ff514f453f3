/* Storage: what a machine keeps on the host's disks beside its records:
 * its frozen guest (standby), its overlay disk, the images and volumes it
 * boots with (src/storage/ fills it in; tests use a fake).
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
   * crash left of it and of an overlay disk being made. */
  gboolean (*sweep) (MvStorage *storage, const char *machine_id, GError **error);
  /* Cheap: whether a whole frozen guest exists, and a staged one. */
  gboolean (*has_saved_state) (MvStorage *storage, const char *machine_id);
  gboolean (*has_staged_state) (MvStorage *storage, const char *machine_id);

  /* Blocks: readies the disks @req's guest boots with, as MvBlock* in the
   * guest's order (mv_spec_blocks()) with their host paths: the image the
   * spec is pinned to (pulled again by its digest if the host no longer
   * has it), the overlay disk (made at the first start, grown to the
   * spec's size), the spec's disks as they are. May be NULL: a storage
   * that only keeps frozen guests, whose machines boot the spec's disks. */
  GPtrArray *(*prepare_disks) (MvStorage *storage, const MvRuntimeRequest *req, GError **error);
  /* Blocks: as prepare_disks(), for a warm template of machines like
   * @req's: its overlay disk is made at @overlay. NULL with prepare_disks. */
  GPtrArray *(*prepare_template_disks) (MvStorage *storage, const MvRuntimeRequest *req,
                                        const char *overlay, GError **error);
  /* Blocks: removes what prepare_disks() made for the machine alone (its
   * overlay disk); what is shared stays. May be NULL, as prepare_disks. */
  gboolean (*remove_disks) (MvStorage *storage, const char *machine_id, GError **error);
};

/* The disks @spec's guest has, in its order, without host paths except
 * for the spec's own disks. Pure. */
GPtrArray  *mv_spec_blocks (const MvSpec *spec);
void        mv_block_free (MvBlock *block);
/* "/dev/vda" for 0, ..., "/dev/vdz" for 25. */
char       *mv_block_device (guint position);
/* The position of the first block of @role in @blocks (for a VOLUME or
 * DISK, the one of @index), or -1. */
gint        mv_blocks_find (GPtrArray *blocks, MvBlockRole role, guint index);
