/* Records: where a machine's desired and observed records are kept (the
 * store, src/store/, fills this in; tests use an in-memory fake).
 * Contract:
 * - every write is atomic and durable when it returns TRUE: a crash at any
 *   point leaves the previous record or the new one, never a mix;
 * - writes of one machine's records never overlap: create() runs in the
 *   worker that makes a new machine's records, before anything else knows
 *   of it; later writes run on the main thread or in a worker, one at a
 *   time for each machine, in the order they were begun; remove() runs in
 *   the worker of that machine's last destroy step, when nothing else
 *   touches it;
 * - functions touch only the files of the machine they name and keep no
 *   shared state, so they are safe from any thread under that rule. */
#pragma once
#include "core/machine.h"

typedef struct _MvRecords MvRecords;

struct _MvRecords {
  gpointer data;

  /* A new machine appears whole or not at all; MV_ERROR_ALREADY_EXISTS if
   * its records exist. */
  gboolean (*create) (MvRecords *records, const MvConfig *config, const MvStatus *status,
                      GError **error);
  gboolean (*save_config) (MvRecords *records, const MvConfig *config, GError **error);
  gboolean (*save_status) (MvRecords *records, const char *id, const MvStatus *status,
                           GError **error);
  /* Cheap, needs no free space: records that the machine is to be
   * destroyed, for when its config cannot be written (a full disk). */
  gboolean (*mark_destroyed) (MvRecords *records, const char *id, GError **error);
  /* Removes the machine's records; blocks; the directory goes last. */
  gboolean (*remove) (MvRecords *records, const char *id, GError **error);
  /* The machine's directories: its state directory (records, saved guest)
   * and its runtime directory (sockets, logs). Pure; the caller frees. */
  char    *(*machine_dir) (MvRecords *records, const char *id);
  char    *(*runtime_dir) (MvRecords *records, const char *id);
  /* Block: create the runtime directory (0700) before a start, and remove
   * it with everything in it when the machine is destroyed. *made (may be
   * NULL) is set TRUE if it did not exist before. */
  gboolean (*make_runtime_dir) (MvRecords *records, const char *id, gboolean *made,
                                GError **error);
  gboolean (*remove_runtime_dir) (MvRecords *records, const char *id, GError **error);
};
