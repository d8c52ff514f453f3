/* Host directories shared with guests (mounts of type directory), over
 * virtio-fs: one virtiofsd per mount, started before the VMM and ended
 * with it.
 *
 * Which directories: those beneath [storage] allowed-directories (none by
 * default), by the rules of host-paths.h, checked when a spec is accepted
 * and again when its VMM starts. The directory checked is the directory
 * shared: it is opened beneath the allowed one (no link or ".." leads
 * out), cloned as a detached mount (nosuid, nodev, and read-only for a
 * read-only mount, so that the kernel refuses the guest's writes with
 * EROFS: virtiofsd 7.2 has no read-only option), and handed to virtiofsd
 * as a descriptor it chroots into (-o sandbox=chroot).
 *
 * Who: virtiofsd runs as root, as the daemon does. It has to: it serves
 * the guest's files with the guest's owners and modes (creating a file as
 * guest UID 1000 makes a file of host UID 1000), which only a process
 * with CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_FOWNER can; it drops every
 * other capability and filters its system calls itself. Its chroot is the
 * shared tree alone. It is not the namespace sandbox (the default) because
 * that forks a second process in a PID namespace of its own, which the
 * daemon would have to record and end as well; the chroot one is a single
 * process, the one the daemon starts, records and ends.
 *
 * Its socket is <runtime dir>/fs<N>/virtiofsd.sock, beside its own log
 * and exit record; a walled-in VMM is given the socket (its owner is the
 * VMM's UID). Its PID and start time are recorded with the VMM's identity
 * ("shares"), so that a daemon started afterwards ends it with the VMM;
 * one an interrupted start left unrecorded is found by its socket. */
#pragma once
#include "hypervisor.h"
#include "core/spec.h"

#include <glib.h>

#define MV_SHARES_KEY           "[storage] allowed-directories"
#define MV_VIRTIOFSD_PATH       "/usr/lib/qemu/virtiofsd"
#define MV_SHARE_SOCKET_NAME    "virtiofsd.sock"

typedef struct _MvShares MvShares;

/* @dirs: as mv_host_paths_new_for_key() takes them (NULL: none);
 * @virtiofsd: its binary (NULL: MV_VIRTIOFSD_PATH). */
MvShares   *mv_shares_new (const char *const *dirs, const char *virtiofsd, GError **error);
/* [storage] allowed-directories and virtiofsd of @config (may be NULL). */
MvShares   *mv_shares_new_from_config (GKeyFile *config, GError **error);
MvShares   *mv_shares_ref (MvShares *shares);
void        mv_shares_unref (MvShares *shares);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvShares, mv_shares_unref)

/* Each directory mount's source against the rules:
 * MV_ERROR_INVALID_ARGUMENT naming mounts[N].source and, for a source
 * outside them, [storage] allowed-directories. @shares may be NULL: no
 * directory is allowed. */
gboolean    mv_shares_check (MvShares *shares, const MvSpec *spec, GError **error);

/* The socket of @runtime_dir's @n-th share. */
char       *mv_shares_socket_path (const char *runtime_dir, guint n);

/* Starts a virtiofsd for each of @vm's shares, checking each source once
 * more; @uid, unless -1, is the walled-in VMM's, to which the sockets are
 * given. Returns the processes (MvProcess*), the caller's to end; on
 * failure none is left running. */
GPtrArray  *mv_shares_start (MvShares *shares, const MvVmSpec *vm, gint64 uid, GError **error);

/* Records @processes in @identity, the VMM's. */
void        mv_shares_to_json (GPtrArray *processes, JsonObject *identity);

/* Ends the virtiofsd processes @identity records (may be NULL) and any
 * other serving a share of @runtime_dir, and removes their directories. */
gboolean    mv_shares_end (const char *runtime_dir, JsonObject *identity, GError **error);
