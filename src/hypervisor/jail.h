/* The wall one VMM runs behind, on the model of Firecracker's jailer:
 *
 * - a user and group of its own, leased from the sandbox's range (never
 *   two running VMMs with one UID), no supplementary groups, every
 *   capability set empty, the bounding set dropped, NoNewPrivs;
 * - private mount and IPC namespaces whose root is an empty tmpfs that
 *   shows, each at its host path: /usr and the root's links into it
 *   (binaries and libraries, read-only), the VMM's binary, its runtime
 *   directory (read-write; sockets, console), the host files it was given
 *   (read-only unless a disk is to be written), a /dev with only the
 *   nodes it needs, and a /proc of its own processes only. Nothing of the
 *   state directory, of other machines or of the rest of the host is
 *   there;
 * - umask 077, so that what it creates is 0600 whatever the daemon's
 *   umask is.
 *
 * Files it cannot open as its own user are made reachable on purpose:
 * - a read-only file (kernel, initrd, read-only disk, a saved guest to
 *   restore) is shown through an idmapped read-only mount that maps the
 *   file's owner to the VMM's UID: it can read the file and nothing else,
 *   and nothing on the host changes;
 * - a disk to be written gets an ACL entry for the VMM's UID for as long
 *   as the VMM runs (a writable idmapped mount would let the VMM, as the
 *   file's apparent owner, chmod the host file, setuid bit included). The
 *   VMM's parent takes the entry away when the VMM ends, whether or not a
 *   daemon runs then;
 * - where the VMM takes descriptors (QEMU's -add-fd), the daemon opens the
 *   file itself and passes it (mv_jail_pass_fd());
 * - a TAP device the VMM opens by name is owned by the VMM's UID while
 *   the VMM runs (mv_jail_give_tap()), and by root again after.
 *
 * The runtime directory is root:<the VMM's group> 01770 while the VMM
 * runs: the VMM creates its sockets and console there but cannot remove
 * or replace the daemon's files (its log, its exit record); it is given
 * back to root (0700) when the VMM ends.
 *
 * Building it happens before the VMM is forked (mv_jail_prepare(), where
 * failures are errors with messages); the forked child only replays it
 * with plain system calls (mv_jail_enter()), since it is a fork of a
 * threaded process. */
#pragma once
#include "grants.h"
#include "sandbox.h"

#include <glib.h>
#include <sys/types.h>

typedef struct _MvJail MvJail;

/* A wall for the VMM of @machine_id, whose runtime directory is
 * @runtime_dir (absolute); leases its UID. */
MvJail     *mv_jail_new (MvSandbox *sandbox, const char *machine_id, const char *runtime_dir,
                         GError **error);
/* Before the VMM is handed over (mv_jail_hand_over()), also takes back
 * what was granted. */
void        mv_jail_free (MvJail *jail);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvJail, mv_jail_free)

uid_t       mv_jail_uid (MvJail *jail);
gid_t       mv_jail_gid (MvJail *jail);

/* Opens the host file @path that a spec names as @field (host-paths.h),
 * read-write if @writable; the jail keeps the descriptor. */
int         mv_jail_open_host_file (MvJail *jail, const char *field, const char *path,
                                    gboolean writable, GError **error);
/* Shows the host file @path (@field of the spec) to the VMM at its path,
 * read-only unless @writable. */
gboolean    mv_jail_show_host_file (MvJail *jail, const char *field, const char *path,
                                    gboolean writable, GError **error);
/* The same for a file of the daemon's own (an image, an overlay disk, a
 * volume): not held to [paths] allowed-directories, but never reached
 * through a symbolic link. */
int         mv_jail_open_own_file (MvJail *jail, const char *field, const char *path,
                                   gboolean writable, GError **error);
gboolean    mv_jail_show_own_file (MvJail *jail, const char *field, const char *path,
                                   gboolean writable, GError **error);
/* Shows the file @path (the daemon's own if @own, else a host file as
 * above) at the absolute path @at instead of its own: where a restored
 * guest's VMM, which cannot be told of another path, opens the disk it
 * had when its state was taken. MV_ERROR_INVALID_ARGUMENT if something
 * else is shown at @at. */
gboolean    mv_jail_show_file_at (MvJail *jail, const char *field, const char *path,
                                  gboolean own, const char *at, gboolean writable,
                                  GError **error);
/* Shows a directory of the daemon's (a saved guest) read-only. */
gboolean    mv_jail_show_dir (MvJail *jail, const char *path, GError **error);
/* Shows the VMM's binary, unless /usr already does. */
gboolean    mv_jail_show_binary (MvJail *jail, const char *path, GError **error);
/* Adds the device node @path (/dev/kvm, /dev/net/tun), the VMM's alone. */
gboolean    mv_jail_add_device (MvJail *jail, const char *path, GError **error);
/* The same for the node @path shown at @at (a test's tree stands for
 * /dev). */
gboolean    mv_jail_add_device_at (MvJail *jail, const char *path, const char *at,
                                   GError **error);
/* Shows a device's sysfs directory, read-only, at its path. */
gboolean    mv_jail_show_sysfs_dir (MvJail *jail, const char *path, GError **error);
/* For a VMM that opens the TAP device @name itself (Cloud Hypervisor,
 * Firecracker): makes the VMM's UID its owner (TUNSETOWNER), so that it
 * may attach without privileges, and adds /dev/net/tun. The owner goes
 * back to root when the VMM ends (mv_jail_grants()), or when the jail
 * is freed before it was handed over. */
gboolean    mv_jail_give_tap (MvJail *jail, const char *name, GError **error);
/* Passes @fd to the VMM under the same number; it stays the caller's. */
int         mv_jail_pass_fd (MvJail *jail, int fd);
/* The jail closes @fd when it is freed; returns @fd. */
int         mv_jail_take_fd (MvJail *jail, int fd);

/* For process.c. Builds what the child replays; FALSE with an error
 * naming what could not be set up. */
gboolean    mv_jail_prepare (MvJail *jail, GError **error);
/* The descriptors the VMM's parent keeps for the VMM's lifetime: the
 * UID lease, the files it takes grants back from, the runtime directory. */
const int  *mv_jail_parent_fds (MvJail *jail, guint *n);
/* The descriptors the VMM gets. */
const int  *mv_jail_passed_fds (MvJail *jail, guint *n);
/* The VMM's parent has the lease and the grants now: freeing the jail
 * no longer takes them back. */
void        mv_jail_hand_over (MvJail *jail);

/* In the forked VMM, async-signal-safe: enters the namespaces, builds
 * the root, drops every privilege. Returns 0, or -errno with *step set
 * to what failed. The caller chdir()s and execs. */
int         mv_jail_enter (const MvJail *jail, const char **step);
/* What the VMM's parent gives back once the VMM is gone
 * (mv_grants_release()): the grants, the TAP devices and the runtime
 * directory. It points into @jail. */
void        mv_jail_grants (const MvJail *jail, MvGrants *grants);

/* For a running walled-in VMM @pidfd (checked to be it): shows the
 * daemon's directory @dir, given to @uid meanwhile, at its path in the
 * VMM's root, where the VMM writes a snapshot; and hides it again, giving
 * it and what is in it back to root. Blocks briefly (a fork). */
gboolean    mv_jail_show_dir_to_running (int pidfd, uid_t uid, const char *dir, GError **error);
gboolean    mv_jail_hide_dir_from_running (int pidfd, const char *dir, GError **error);
/* For a running walled-in VMM @pidfd, as mv_jail_show_sysfs_dir() and
 * mv_jail_add_device_at() do before one starts: shows it the sysfs
 * directory @path read-only, and makes the character device @path's
 * node at @at in its /dev, its UID's alone (0600); either is left as it
 * is if there already. Blocks briefly (a fork). */
gboolean    mv_jail_show_sysfs_dir_to_running (int pidfd, const char *path, GError **error);
gboolean    mv_jail_add_device_to_running (int pidfd, uid_t uid, const char *path,
                                           const char *at, GError **error);
/* Takes back what the two above gave: the mount at @path, if any, and the
 * node at @at. What the VMM opened stays open. */
void        mv_jail_take_from_running (int pidfd, const char *path, const char *at);

/* Gives @runtime_dir back to root, 0700, whatever a VMM left there: for
 * the daemon, after a VMM whose parent could not do it. */
void        mv_jail_reclaim_runtime_dir (const char *runtime_dir);
