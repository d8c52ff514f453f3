/* What the REST backends share. */
#include "rest.h"
#include "host-devices.h"
#include "jail.h"
#include "versions.h"
#include "core/errors.h"

#include <string.h>

/* The guest's console is its first serial port, and a panic reboots it.
 * With reboot=k, Firecracker's Ctrl-Alt-Del makes the guest reset, which
 * ends Firecracker (it has no ACPI); a power-off ends Cloud Hypervisor. */
#define DEFAULT_KERNEL_ARGS "console=ttyS0 reboot=k panic=1"

/* ---- the starter ---- */

static const char *
rest_version (MvStarter *base)
{
  return ((MvRestStarter *) base)->version;
}

static const char *
rest_default_kernel_args (MvStarter *base)
{
  return DEFAULT_KERNEL_ARGS;
}

static void
rest_starter_free (MvStarter *base)
{
  MvRestStarter *starter = (MvRestStarter *) base;

  g_free (starter->binary);
  g_free (starter->version);
  g_free (starter);
}

MvRestStarter *
mv_rest_starter_new (const char *type, const char *binary, const char *version_prefix,
                     GError **error)
{
  g_autofree char *path = g_path_is_absolute (binary) ? g_strdup (binary)
                                                      : g_find_program_in_path (binary);
  g_autofree char *version = NULL;
  MvRestStarter *starter;

  if (!path)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "%s is not installed (not in PATH)",
                   binary);
      return NULL;
    }
  version = mv_binary_version (path, version_prefix, error);
  if (!version)
    return NULL;
  starter = g_new0 (MvRestStarter, 1);
  starter->binary = g_steal_pointer (&path);
  starter->version = g_steal_pointer (&version);
  starter->base.type = type;
  starter->base.socket_name = "api.sock";
  starter->base.opens_paths = TRUE;
  starter->base.data = starter;
  starter->base.version = rest_version;
  starter->base.default_kernel_args = rest_default_kernel_args;
  starter->base.free = rest_starter_free;
  return starter;
}

MvHypervisor *
mv_rest_abandon (MvStarter *starter, MvHypervisor *hv, MvProcess *vmm, const char *prefix,
                 GError **error)
{
  g_prefix_error (error, "%s", prefix);
  hv->free (hv);
  mv_process_kill (vmm, NULL);
  starter->cleanup (starter, vmm->socket_path);
  return NULL;
}

/* ---- API calls ---- */

static void
rest_hypervisor_free (MvHypervisor *base)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;

  mv_http_free (hv->http);
  g_free (hv->socket_path);
  g_free (hv);
}

MvRestHypervisor *
mv_rest_hypervisor_new (const char *socket_path, const char *server_name,
                        const char *path_prefix, MvRestRefineError refine_error)
{
  MvRestHypervisor *hv = g_new0 (MvRestHypervisor, 1);

  hv->base.data = hv;
  hv->base.free = rest_hypervisor_free;
  hv->http = mv_http_new (socket_path, server_name);
  hv->socket_path = g_strdup (socket_path);
  hv->path_prefix = path_prefix;
  hv->refine_error = refine_error;
  return hv;
}

MvHypervisor *
mv_rest_connect (MvRestHypervisor *hv, const char *ping_path, GError **error)
{
  if (!mv_rest_call (hv, "GET", ping_path, NULL, NULL, error))
    {
      hv->base.free (&hv->base);
      return NULL;
    }
  return &hv->base;
}

gboolean
mv_rest_call (MvRestHypervisor *hv, const char *method, const char *path, JsonObject *body,
              JsonNode **reply, GError **error)
{
  g_autofree char *full_path = g_strconcat (hv->path_prefix, path, NULL);
  g_autoptr (JsonNode) node = NULL;
  guint status = 0;

  if (body)
    {
      node = json_node_new (JSON_NODE_OBJECT);
      json_node_set_object (node, body);
    }
  if (mv_http_call_json (hv->http, method, full_path, node, reply, &status, error))
    return TRUE;
  hv->refine_error (status, error ? *error : NULL);
  return FALSE;
}

gboolean
mv_rest_put (MvRestHypervisor *hv, const char *path, JsonObject *body, GError **error)
{
  return mv_rest_call (hv, "PUT", path, body, NULL, error);
}

JsonObject *
mv_rest_get (MvRestHypervisor *hv, const char *path, GError **error)
{
  g_autoptr (JsonNode) reply = NULL;

  if (!mv_rest_call (hv, "GET", path, NULL, &reply, error))
    return NULL;
  if (!reply || !JSON_NODE_HOLDS_OBJECT (reply))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s answered GET %s without a JSON object",
                   mv_http_server_name (hv->http), path);
      return NULL;
    }
  return json_object_ref (json_node_get_object (reply));
}

/* ---- what both take and give ---- */

MvVmState
mv_rest_vm_state (const char *state)
{
  if (strcmp (state, "Running") == 0)
    return MV_VM_STATE_RUNNING;
  if (strcmp (state, "Paused") == 0)
    return MV_VM_STATE_PAUSED;
  /* Cloud Hypervisor's Created, Shutdown, BreakPoint; Firecracker's Not
   * started. */
  return MV_VM_STATE_STOPPED;
}

static JsonObject *
token_bucket (guint64 size)
{
  JsonObject *bucket = json_object_new ();

  /* Refilled once a second: size is the rate per second. */
  json_object_set_int_member (bucket, "size", (gint64) size);
  json_object_set_int_member (bucket, "refill_time", 1000);
  return bucket;
}

JsonObject *
mv_rest_rate_limiter (const MvDiskConfig *disk)
{
  JsonObject *limiter;

  if (!disk->rate_limit_bytes_per_second && !disk->rate_limit_iops)
    return NULL;
  limiter = json_object_new ();
  if (disk->rate_limit_bytes_per_second)
    json_object_set_object_member (limiter, "bandwidth",
                                   token_bucket (disk->rate_limit_bytes_per_second));
  if (disk->rate_limit_iops)
    json_object_set_object_member (limiter, "ops", token_bucket (disk->rate_limit_iops));
  return limiter;
}

JsonObject *
mv_rest_net_rate_limiter (guint64 bytes_per_second)
{
  JsonObject *limiter;

  if (!bytes_per_second)
    return NULL;
  limiter = json_object_new ();
  json_object_set_object_member (limiter, "bandwidth", token_bucket (bytes_per_second));
  return limiter;
}

char *
mv_rest_absolute_path (const char *path)
{
  g_autofree char *cwd = NULL;

  if (g_path_is_absolute (path))
    return g_strdup (path);
  cwd = g_get_current_dir ();
  return g_build_filename (cwd, path, NULL);
}

/* ---- the wall ---- */

/* Firecracker and Cloud Hypervisor run only on KVM. */
static gboolean
furnish_devices (MvJail *jail, gboolean nics, GError **error)
{
  if (g_file_test ("/dev/kvm", G_FILE_TEST_EXISTS) && !mv_jail_add_device (jail, "/dev/kvm", error))
    return FALSE;
  return !nics || mv_jail_add_device (jail, "/dev/net/tun", error);
}

gboolean
mv_rest_furnish_jail (MvRestStarter *starter, const MvVmSpec *spec, GError **error)
{
  MvJail *jail = spec->jail;

  if (!mv_jail_show_binary (jail, starter->binary, error) ||
      !mv_jail_show_host_file (jail, "kernel", spec->boot.kernel_path, FALSE, error) ||
      (spec->boot.initrd_path && *spec->boot.initrd_path &&
       !mv_jail_show_host_file (jail, "initrd", spec->boot.initrd_path, FALSE, error)))
    return FALSE;
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *disk = spec->disks->pdata[i];
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);

      if (!(disk->own ? mv_jail_show_own_file : mv_jail_show_host_file) (jail, field, disk->path, !disk->read_only, error))
        return FALSE;
    }
  /* Both VMMs open their TAPs by name, as the VMM's user. */
  for (guint i = 0; i < spec->nets->len; i++)
    if (!mv_jail_give_tap (jail, ((MvNetConfig *) spec->nets->pdata[i])->tap_device, error))
      return FALSE;
  return mv_host_devices_give (jail, spec->devices, error) &&
         furnish_devices (jail, spec->nets->len > 0, error);
}

gboolean
mv_rest_furnish_restore_jail (MvRestStarter *starter, MvJail *jail, const char *snapshot_dir,
                              const char *tap_device, GPtrArray *disks, GPtrArray *shown_at,
                              GError **error)
{
  g_autofree char *dir = mv_rest_absolute_path (snapshot_dir);

  for (guint i = 0; disks && i < disks->len; i++)
    {
      const MvDiskConfig *disk = disks->pdata[i];
      const char *at = shown_at ? ((const MvDiskConfig *) shown_at->pdata[i])->path : disk->path;
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);

      if (!mv_jail_show_file_at (jail, field, disk->path, disk->own, at, !disk->read_only, error))
        return FALSE;
    }
  return mv_jail_show_binary (jail, starter->binary, error) &&
         mv_jail_show_dir (jail, dir, error) &&
         (!tap_device || mv_jail_give_tap (jail, tap_device, error)) &&
         furnish_devices (jail, tap_device != NULL, error);
}
