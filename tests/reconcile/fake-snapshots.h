/* Snapshots that exist only as names in memory; every call is logged, so
 * that a test can tell the reconciler left them alone. */
#pragma once
#include "core/host/snapshots.h"
#include "fake-log.h"

typedef struct _FakeSnapshots FakeSnapshots;

FakeSnapshots *fake_snapshots_new (FakeLog *log);
void           fake_snapshots_free (FakeSnapshots *fake);
MvSnapshots   *fake_snapshots_iface (FakeSnapshots *fake);
/* A snapshot of @machine_id called @name; returns its ID. */
char          *fake_snapshots_add (FakeSnapshots *fake, const char *machine_id, const char *name);
guint          fake_snapshots_count (FakeSnapshots *fake);
