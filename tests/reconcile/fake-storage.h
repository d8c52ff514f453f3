/* Storage kept in memory: for each machine, whether a staged and a whole
 * frozen guest exist and how many retired ones wait for a sweep. A test
 * scripts the failure of the next call of a kind, or holds a worker in it.
 * Blocking calls on the main thread are noted as breaches (storage.h). */
#pragma once
#include "core/host/storage.h"
#include "fake-log.h"

typedef enum {
  FAKE_STORAGE_STAGE,
  FAKE_STORAGE_COMMIT,
  FAKE_STORAGE_DISCARD,
  FAKE_STORAGE_RETIRE,
  FAKE_STORAGE_SWEEP,
  FAKE_STORAGE_REMOVE_DISKS,
  FAKE_STORAGE_N_CALLS,
} FakeStorageCall;

typedef struct _FakeStorage FakeStorage;

FakeStorage *fake_storage_new (FakeLog *log);
void         fake_storage_free (FakeStorage *fake);
MvStorage   *fake_storage_iface (FakeStorage *fake);

void         fake_storage_fail_next (FakeStorage *fake, FakeStorageCall call, const char *message);
FakeHold    *fake_storage_hold (FakeStorage *fake);
/* A frozen guest as a daemon before this one left it: whole, or only
 * staged (its save was interrupted before the commit). */
void         fake_storage_put (FakeStorage *fake, const char *machine_id, gboolean whole);
gboolean     fake_storage_has_whole (FakeStorage *fake, const char *machine_id);
gboolean     fake_storage_has_staged (FakeStorage *fake, const char *machine_id);
/* Frozen guests retired and not swept yet. */
guint        fake_storage_retired (FakeStorage *fake, const char *machine_id);
/* How many calls of @call returned, failed or not. */
guint        fake_storage_count (FakeStorage *fake, FakeStorageCall call);
