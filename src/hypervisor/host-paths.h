/* The host files a machine may name (kernel, initrd, disks): regular
 * files beneath the directories of [paths] allowed-directories, reached
 * without a symbolic link or ".." leading out of them and without /proc's
 * magic links, never in the daemon's own records or runtime files. The
 * same rules hold when a spec is accepted and when its VMM is started, so
 * a file swapped for a link in between is refused too. */
#pragma once
#include <glib.h>

/* Where images and kernels are looked for when nothing is configured. */
#define MV_DEFAULT_ALLOWED_DIRECTORIES  "/var/lib/microvmd/images;/usr/share/microvmd;/usr/lib/microvmd"

typedef struct _MvHostPaths MvHostPaths;

/* @dirs: absolute directories; they need not exist yet. Refuses "/",
 * anything in /proc, /sys or /dev, and a directory that holds or lies in
 * a reserved one (util/reserved-dirs.h) with MV_ERROR_INVALID_ARGUMENT
 * naming [paths] allowed-directories. */
MvHostPaths *mv_host_paths_new (const char *const *dirs, GError **error);
/* The same rules for directories configured elsewhere: @key ("[storage]
 * allowed-directories") is what the messages name. */
MvHostPaths *mv_host_paths_new_for_key (const char *key, const char *const *dirs,
                                        GError **error);
/* From [paths] allowed-directories of @config (NULL: the defaults). */
MvHostPaths *mv_host_paths_new_from_config (GKeyFile *config, GError **error);
void         mv_host_paths_free (MvHostPaths *paths);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvHostPaths, mv_host_paths_free)

/* The directories, for messages: "/a, /b". */
const char  *mv_host_paths_describe (MvHostPaths *paths);

/* Opens @path with @flags (O_RDONLY, O_RDWR or O_PATH; O_CLOEXEC and
 * O_NOCTTY are added) if the rules above allow it; -1 and
 * MV_ERROR_INVALID_ARGUMENT naming @field otherwise. The returned
 * descriptor is the very file that was checked. */
int          mv_host_paths_open (MvHostPaths *paths, const char *field, const char *path,
                                 int flags, GError **error);
/* The same for a directory beneath one of the directories (the directory
 * itself included): an O_PATH descriptor of the very directory checked,
 * which neither lies in nor holds a reserved one. */
int          mv_host_paths_open_dir (MvHostPaths *paths, const char *field, const char *path,
                                     GError **error);
/* Lets machines use the files of @file's directory as well: where the
 * daemon's own guest kernel and initramfs are. */
gboolean     mv_host_paths_allow_dir_of (MvHostPaths *paths, const char *file, GError **error);
/* mv_host_paths_open() without keeping the file open. */
gboolean     mv_host_paths_check (MvHostPaths *paths, const char *field, const char *path,
                                  GError **error);

/* Why microvmd.service may be the reason that opening @path failed with
 * @err, for the end of a message ("; ..."), or "": its PrivateTmp= gives
 * the daemon a /tmp and /var/tmp of its own, its ProtectHome=read-only
 * makes /home, /root and /run/user read-only. Pure. */
const char  *mv_host_path_sandbox_hint (const char *path, int err);

/* What of @path lies beneath @dir ("" for @dir itself), by whole
 * components and without resolving anything, or NULL. Pure. */
const char  *mv_host_path_below (const char *path, const char *dir);
