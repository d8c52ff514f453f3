/* What the Cloud Hypervisor and Firecracker backends share: each is one
 * binary serving a JSON REST API on a Unix socket (http.h), started from
 * a starter that knows the binary and its version. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#include "http.h"
#include "hypervisor.h"

typedef struct {
  MvStarter  base;
  char      *binary;    /* absolute */
  char      *version;
} MvRestStarter;

/* Finds @binary (a path, or a name looked up in PATH) and asks its
 * version, which it prints as "<@version_prefix> v<version>". Fills in
 * the starter's type, socket_name, data, version, default_kernel_args and
 * free; the backend the rest. MV_ERROR_UNAVAILABLE if the binary is missing or cannot be
 * run. */
MvRestStarter *mv_rest_starter_new (const char *type, const char *binary,
                                    const char *version_prefix, GError **error);

/* Gives a failed call's @error the code that the VMM's @status and
 * message mean; @error may be NULL. */
typedef void (*MvRestRefineError) (guint status, GError *error);

typedef struct {
  MvHypervisor       base;
  MvHttp            *http;
  char              *socket_path;
  const char        *path_prefix;    /* before every path a call names */
  MvRestRefineError  refine_error;
} MvRestHypervisor;

/* Fills in the handle's data and free; the backend the operations.
 * @server_name names the VMM in errors. */
MvRestHypervisor *mv_rest_hypervisor_new (const char *socket_path, const char *server_name,
                                          const char *path_prefix,
                                          MvRestRefineError refine_error);
/* @hv once the VMM answers GET @ping_path; otherwise frees @hv, NULL. */
MvHypervisor     *mv_rest_connect (MvRestHypervisor *hv, const char *ping_path, GError **error);

/* Sends @body (may be NULL) to @path and parses a 2xx reply into *@reply
 * (may be NULL); see mv_http_call_json(). */
gboolean          mv_rest_call (MvRestHypervisor *hv, const char *method, const char *path,
                                JsonObject *body, JsonNode **reply, GError **error);
gboolean          mv_rest_put (MvRestHypervisor *hv, const char *path, JsonObject *body,
                               GError **error);
/* The JSON object that GET @path answers; MV_ERROR_FAILED if it is none. */
JsonObject       *mv_rest_get (MvRestHypervisor *hv, const char *path, GError **error);

/* Ends a VMM whose start failed: prefixes @error with @prefix, frees @hv,
 * kills @vmm and cleans up after it. Returns NULL, for the caller to
 * return. */
MvHypervisor     *mv_rest_abandon (MvStarter *starter, MvHypervisor *hv, MvProcess *vmm,
                                   const char *prefix, GError **error);

/* The guest's state as both VMMs name it: "Running", "Paused", or one of
 * their names for a guest that does not run. */
MvVmState         mv_rest_vm_state (const char *state);

/* A disk's rate limiter as both VMMs take it; NULL if it has none. */
JsonObject       *mv_rest_rate_limiter (const MvDiskConfig *disk);
/* A network rate limiter of @bytes_per_second, as both VMMs take it;
 * NULL for 0 (unlimited). */
JsonObject       *mv_rest_net_rate_limiter (guint64 bytes_per_second);

/* @path made absolute against the daemon's working directory: the VMM
 * runs in another one. */
char             *mv_rest_absolute_path (const char *path);

/* What a walled-in VMM of these needs to boot @spec (spec->jail): its
 * binary, the kernel and initrd, the disks (writable unless read-only),
 * /dev/kvm and /dev/net/tun where it has NICs. Both VMMs open every file
 * by path. */
gboolean          mv_rest_furnish_jail (MvRestStarter *starter, const MvVmSpec *spec,
                                        GError **error);
/* The same for a VMM that restores a guest from @snapshot_dir, which it
 * is shown read-only, onto the TAP device @tap_device (NULL: none given),
 * with @disks (MvDiskConfig*, NULL: none): each at its own path, or, for
 * a VMM that opens the disks where the snapshot's guest had them, at the
 * path of the disk in its place in @shown_at (MvDiskConfig*, as many). */
gboolean          mv_rest_furnish_restore_jail (MvRestStarter *starter, MvJail *jail,
                                                const char *snapshot_dir,
                                                const char *tap_device, GPtrArray *disks,
                                                GPtrArray *shown_at, GError **error);
