/* The host's rules for VMMs, from the [sandbox] and [paths] groups of the
 * configuration: which host files machines may name (host-paths.h),
 * whether VMMs are walled in (jail.h), and the range of user and group
 * IDs they run as, one per running machine.
 *
 * A UID is leased by holding an flock on its file in MV_UID_LEASE_DIR,
 * which every daemon of the host shares. The VMM's parent, which lives
 * exactly as long as the VMM, inherits the lease: it ends with the VMM
 * even while no daemon runs, and the next start can never take a UID
 * that a running VMM still has. Thread-safe; shared by all runtimes. */
#pragma once
#include "host-paths.h"

#include <glib.h>
#include <sys/types.h>

/* Past the UIDs of people and of system users, and outside systemd's
 * DynamicUser range (61184-65519): 65536 IDs from 0x80000. */
#define MV_SANDBOX_DEFAULT_UID_FIRST  524288
#define MV_SANDBOX_DEFAULT_UID_LAST   589823

typedef struct _MvSandbox MvSandbox;

/* [sandbox] enabled (default true) and uid-range ("FIRST-LAST"), [paths]
 * allowed-directories. @config may be NULL: the defaults. A bad value is
 * MV_ERROR_INVALID_ARGUMENT naming the group and key. */
MvSandbox   *mv_sandbox_new_from_config (GKeyFile *config, GError **error);
MvSandbox   *mv_sandbox_ref (MvSandbox *sandbox);
void         mv_sandbox_unref (MvSandbox *sandbox);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvSandbox, mv_sandbox_unref)

/* FALSE only with [sandbox] enabled=false, for measurement and debugging. */
gboolean     mv_sandbox_enabled (MvSandbox *sandbox);
MvHostPaths *mv_sandbox_host_paths (MvSandbox *sandbox);

/* Leases a UID (and the GID of the same number) for @machine_id: the one
 * its ID hashes to if free, else the next free one. Returns the lease, a
 * descriptor whose last close ends it; -1 and MV_ERROR_RESOURCE_EXHAUSTED
 * if every UID of the range is leased. */
int          mv_sandbox_lease_uid (MvSandbox *sandbox, const char *machine_id, uid_t *uid,
                                   GError **error);
/* Whether @uid is within the range (so that a recorded identity names a
 * VMM that may be walled in). */
gboolean     mv_sandbox_owns_uid (MvSandbox *sandbox, uid_t uid);
