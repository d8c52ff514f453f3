/* Records kept in memory: the last config and status written for each
 * machine, how many writes there were, and a failure scripted for the next
 * write of a kind. Breaches of the Records contract (records.h) are noted:
 * a record written off the main thread or for a machine whose records are
 * gone, a blocking call on the main thread. */
#pragma once
#include "core/host/records.h"
#include "fake-log.h"

typedef enum {
  FAKE_RECORDS_CREATE,
  FAKE_RECORDS_SAVE_CONFIG,
  FAKE_RECORDS_SAVE_STATUS,
  FAKE_RECORDS_REMOVE,
  FAKE_RECORDS_MAKE_RUNTIME_DIR,
  FAKE_RECORDS_REMOVE_RUNTIME_DIR,
  FAKE_RECORDS_MARK_DESTROYED,
  FAKE_RECORDS_N_CALLS,
} FakeRecordsCall;

typedef struct _FakeRecords FakeRecords;

FakeRecords *fake_records_new (FakeLog *log);
void         fake_records_free (FakeRecords *fake);
MvRecords   *fake_records_iface (FakeRecords *fake);

/* The next @call fails with @message (MV_ERROR_FAILED). */
void         fake_records_fail_next (FakeRecords *fake, FakeRecordsCall call, const char *message);
/* Records as a daemon before this one left them (copies are kept). */
void         fake_records_put (FakeRecords *fake, const MvConfig *config, const MvStatus *status);
gboolean     fake_records_exist (FakeRecords *fake, const char *machine_id);
/* Copies of what was last written, or NULL. */
MvConfig    *fake_records_config (FakeRecords *fake, const char *machine_id);
MvStatus    *fake_records_status (FakeRecords *fake, const char *machine_id);
/* How many calls of @call succeeded. */
guint        fake_records_count (FakeRecords *fake, FakeRecordsCall call);
