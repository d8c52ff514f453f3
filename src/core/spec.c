/* The spec model: life cycle, the names of its enumerations, and how
 * two specs compare. Pure. */
#include "spec.h"
#include "spec-private.h"
#include "json-util.h"
#include "enum-names.h"
#include "net-rules.h"

#include <string.h>

/* ---- life cycle ---- */

static void
disk_free (gpointer data)
{
  MvDisk *disk = data;

  g_free (disk->path);
  g_free (disk);
}

MvDisk *
mv_disk_new (const char *path, gboolean read_only, gboolean root)
{
  MvDisk *disk = g_new0 (MvDisk, 1);

  disk->path = g_strdup (path);
  disk->read_only = read_only;
  disk->root = root;
  return disk;
}

MvGpu *
mv_gpu_new (const char *profile, const char *mediated_device_uuid)
{
  MvGpu *gpu = g_new0 (MvGpu, 1);

  gpu->profile = g_strdup (profile);
  gpu->mediated_device_uuid = g_strdup (mediated_device_uuid);
  return gpu;
}

gboolean
mv_gpu_equal (const MvGpu *a, const MvGpu *b)
{
  if (!a || !b)
    return a == b;
  return g_strcmp0 (a->profile, b->profile) == 0 &&
         g_strcmp0 (a->mediated_device_uuid, b->mediated_device_uuid) == 0;
}

void
mv_gpu_free (MvGpu *gpu)
{
  if (!gpu)
    return;
  g_free (gpu->profile);
  g_free (gpu->mediated_device_uuid);
  g_free (gpu);
}

MvCpuAffinity *
mv_cpu_affinity_new (guint32 vcpu)
{
  MvCpuAffinity *affinity = g_new0 (MvCpuAffinity, 1);

  affinity->vcpu = vcpu;
  affinity->host_cpus = g_array_new (FALSE, FALSE, sizeof (guint32));
  return affinity;
}

void
mv_cpu_affinity_free (MvCpuAffinity *affinity)
{
  if (affinity == NULL)
    return;
  g_array_unref (affinity->host_cpus);
  g_free (affinity);
}

MvCpuAffinity *
mv_cpu_affinity_copy (const MvCpuAffinity *affinity)
{
  MvCpuAffinity *copy = mv_cpu_affinity_new (affinity->vcpu);

  g_array_append_vals (copy->host_cpus, affinity->host_cpus->data, affinity->host_cpus->len);
  return copy;
}

GPtrArray *
mv_cpu_affinity_list_copy (const GPtrArray *from)
{
  GPtrArray *list = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_cpu_affinity_free);

  for (guint i = 0; from != NULL && i < from->len; i++)
    g_ptr_array_add (list, mv_cpu_affinity_copy (g_ptr_array_index (from, i)));
  return list;
}

MvMount *
mv_mount_new (MvMountType type)
{
  MvMount *mount = g_new0 (MvMount, 1);

  mount->type = type;
  if (type == MV_MOUNT_FILE)
    mount->mode = MV_FILE_MOUNT_DEFAULT_MODE;
  else if (type == MV_MOUNT_TMPFS)
    mount->mode = MV_TMPFS_DEFAULT_MODE;
  return mount;
}

void
mv_mount_free (MvMount *mount)
{
  if (mount == NULL)
    return;
  g_free (mount->source);
  g_free (mount->target);
  g_clear_pointer (&mount->content, g_bytes_unref);
  g_free (mount);
}

static MvMount *
mount_copy (const MvMount *mount)
{
  MvMount *copy = g_new0 (MvMount, 1);

  *copy = *mount;
  copy->source = g_strdup (mount->source);
  copy->target = g_strdup (mount->target);
  copy->content = mount->content != NULL ? g_bytes_ref (mount->content) : NULL;
  return copy;
}

MvHealthCheck *
mv_health_check_new (MvHealthCheckKind kind)
{
  MvHealthCheck *check = g_new0 (MvHealthCheck, 1);

  check->kind = kind;
  check->interval_seconds = MV_HEALTH_DEFAULT_INTERVAL_SECONDS;
  check->timeout_seconds = MV_HEALTH_DEFAULT_TIMEOUT_SECONDS;
  check->retries = MV_HEALTH_DEFAULT_RETRIES;
  return check;
}

void
mv_health_check_free (MvHealthCheck *check)
{
  if (check == NULL)
    return;
  g_strfreev (check->exec);
  g_free (check->http_path);
  g_free (check);
}

static MvHealthCheck *
health_check_copy (const MvHealthCheck *check)
{
  MvHealthCheck *copy = g_new0 (MvHealthCheck, 1);

  *copy = *check;
  copy->exec = g_strdupv (check->exec);
  copy->http_path = g_strdup (check->http_path);
  return copy;
}

static GHashTable *
string_map_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

MvSpec *
mv_spec_new (void)
{
  MvSpec *spec = g_new0 (MvSpec, 1);

  spec->cpu_millicores = MV_DEFAULT_CPU_MILLICORES;
  spec->cpu_affinity = mv_cpu_affinity_list_copy (NULL);
  spec->memory_bytes = MV_DEFAULT_MEMORY_BYTES;
  spec->disks = g_ptr_array_new_with_free_func (disk_free);
  spec->readiness = MV_READINESS_AUTO;
  spec->ssh_keys = g_ptr_array_new_with_free_func (g_free);
  spec->pci_devices = g_ptr_array_new_with_free_func (g_free);
  spec->metadata = string_map_new ();
  spec->firewall = json_array_new ();
  spec->ports = g_ptr_array_new_with_free_func (g_free);
  spec->restart_mode = MV_RESTART_NO;
  spec->labels = string_map_new ();
  spec->env = string_map_new ();
  spec->init_mode = MV_INIT_MODE_AUTO;
  spec->mounts = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_mount_free);
  return spec;
}

void
mv_spec_free (MvSpec *spec)
{
  if (spec == NULL)
    return;
  g_free (spec->id);
  g_free (spec->name);
  g_free (spec->hypervisor_type);
  g_free (spec->hypervisor_version);
  g_free (spec->kernel);
  g_free (spec->initrd);
  g_free (spec->kernel_args);
  g_clear_pointer (&spec->cpu_affinity, g_ptr_array_unref);
  g_clear_pointer (&spec->cpu_topology, g_free);
  g_clear_pointer (&spec->disks, g_ptr_array_unref);
  g_free (spec->readiness_text);
  g_free (spec->network_name);
  g_free (spec->static_ip);
  g_free (spec->hostname);
  g_clear_pointer (&spec->ssh_keys, g_ptr_array_unref);
  g_clear_pointer (&spec->pci_devices, g_ptr_array_unref);
  g_clear_pointer (&spec->gpu, mv_gpu_free);
  g_free (spec->user_data);
  g_clear_pointer (&spec->metadata, g_hash_table_unref);
  g_clear_pointer (&spec->firewall, json_array_unref);
  g_clear_pointer (&spec->ports, g_ptr_array_unref);
  g_clear_pointer (&spec->labels, g_hash_table_unref);
  g_strfreev (spec->cmd);
  g_clear_pointer (&spec->env, g_hash_table_unref);
  g_free (spec->user);
  g_free (spec->working_dir);
  g_free (spec->image);
  g_free (spec->image_digest);
  g_free (spec->kernel_name);
  g_clear_pointer (&spec->mounts, g_ptr_array_unref);
  g_clear_pointer (&spec->health_check, mv_health_check_free);
  g_free (spec);
}

static void
copy_string_map (GHashTable *dst, GHashTable *src)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, src);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (dst, g_strdup (key), g_strdup (value));
}

MvSpec *
mv_spec_copy (const MvSpec *spec)
{
  MvSpec *copy;

  g_return_val_if_fail (spec != NULL, NULL);

  copy = mv_spec_new ();
  copy->id = g_strdup (spec->id);
  copy->name = g_strdup (spec->name);
  copy->hypervisor_type = g_strdup (spec->hypervisor_type);
  copy->hypervisor_version = g_strdup (spec->hypervisor_version);
  copy->kernel = g_strdup (spec->kernel);
  copy->initrd = g_strdup (spec->initrd);
  copy->kernel_args = g_strdup (spec->kernel_args);
  copy->cpu_millicores = spec->cpu_millicores;
  copy->max_vcpus = spec->max_vcpus;
  g_ptr_array_unref (copy->cpu_affinity);
  copy->cpu_affinity = mv_cpu_affinity_list_copy (spec->cpu_affinity);
  copy->cpu_topology = g_memdup2 (spec->cpu_topology, sizeof (MvCpuTopology));
  for (guint i = 0; i < spec->pci_devices->len; i++)
    g_ptr_array_add (copy->pci_devices, g_strdup (spec->pci_devices->pdata[i]));
  if (spec->gpu)
    copy->gpu = mv_gpu_new (spec->gpu->profile, spec->gpu->mediated_device_uuid);
  copy->memory_bytes = spec->memory_bytes;
  copy->max_memory_bytes = spec->max_memory_bytes;
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);
      g_ptr_array_add (copy->disks, mv_disk_new (disk->path, disk->read_only, disk->root));
    }
  copy->readiness = spec->readiness;
  copy->readiness_text = g_strdup (spec->readiness_text);
  copy->network_name = g_strdup (spec->network_name);
  copy->static_ip = g_strdup (spec->static_ip);
  copy->hostname = g_strdup (spec->hostname);
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    g_ptr_array_add (copy->ssh_keys, g_strdup (g_ptr_array_index (spec->ssh_keys, i)));
  copy->user_data = g_strdup (spec->user_data);
  copy_string_map (copy->metadata, spec->metadata);
  json_array_unref (copy->firewall);
  copy->firewall = mv_json_array_deep_copy (spec->firewall);
  for (guint i = 0; i < spec->ports->len; i++)
    g_ptr_array_add (copy->ports, mv_port_mapping_copy (g_ptr_array_index (spec->ports, i)));
  copy->restart_mode = spec->restart_mode;
  copy->restart_max_retries = spec->restart_max_retries;
  copy->standby_after_seconds = spec->standby_after_seconds;
  copy_string_map (copy->labels, spec->labels);
  copy->remove_on_exit = spec->remove_on_exit;
  copy->cmd = g_strdupv (spec->cmd);
  copy_string_map (copy->env, spec->env);
  copy->user = g_strdup (spec->user);
  copy->working_dir = g_strdup (spec->working_dir);
  copy->image = g_strdup (spec->image);
  copy->image_digest = g_strdup (spec->image_digest);
  copy->kernel_name = g_strdup (spec->kernel_name);
  copy->disk_bytes = spec->disk_bytes;
  copy->disk_bytes_per_second = spec->disk_bytes_per_second;
  copy->disk_iops = spec->disk_iops;
  copy->upload_bytes_per_second = spec->upload_bytes_per_second;
  copy->download_bytes_per_second = spec->download_bytes_per_second;
  copy->init_mode = spec->init_mode;
  copy->start_mode = spec->start_mode;
  for (guint i = 0; i < spec->mounts->len; i++)
    g_ptr_array_add (copy->mounts, mount_copy (g_ptr_array_index (spec->mounts, i)));
  if (spec->health_check != NULL)
    copy->health_check = health_check_copy (spec->health_check);
  return copy;
}

/* ---- enumerations and readiness ---- */

static const char *const restart_mode_names[] = {
  [MV_RESTART_NO] = "no",
  [MV_RESTART_ON_FAILURE] = "on-failure",
  [MV_RESTART_UNLESS_STOPPED] = "unless-stopped",
  [MV_RESTART_ALWAYS] = "always",
};

const char *
mv_restart_mode_to_string (MvRestartMode mode)
{
  return mv_enum_to_name (restart_mode_names, G_N_ELEMENTS (restart_mode_names), mode, "no");
}

gboolean
mv_restart_mode_from_string (const char *s, MvRestartMode *mode)
{
  guint value;

  /* An empty mode is "no", as in the policy's own definition. */
  if (*s == '\0')
    value = MV_RESTART_NO;
  else if (!mv_enum_from_name (restart_mode_names, G_N_ELEMENTS (restart_mode_names), s,
                               &value))
    return FALSE;
  *mode = value;
  return TRUE;
}

static const char *const start_mode_names[] = {
  [MV_START_MODE_AUTO] = "auto",
  [MV_START_MODE_COLD] = "cold",
  [MV_START_MODE_WARM] = "warm",
};

const char *
mv_start_mode_to_string (MvStartMode mode)
{
  return mv_enum_to_name (start_mode_names, G_N_ELEMENTS (start_mode_names), mode, "auto");
}

gboolean
mv_start_mode_from_string (const char *s, MvStartMode *mode)
{
  guint value;

  if (!mv_enum_from_name (start_mode_names, G_N_ELEMENTS (start_mode_names), s, &value))
    return FALSE;
  *mode = value;
  return TRUE;
}

static const char *const init_mode_names[] = {
  [MV_INIT_MODE_AUTO] = "auto",
  [MV_INIT_MODE_EXEC] = "exec",
  [MV_INIT_MODE_SYSTEMD] = "systemd",
};

const char *
mv_init_mode_to_string (MvInitMode mode)
{
  return mv_enum_to_name (init_mode_names, G_N_ELEMENTS (init_mode_names), mode, "auto");
}

gboolean
mv_init_mode_from_string (const char *s, MvInitMode *mode)
{
  guint value;

  if (!mv_enum_from_name (init_mode_names, G_N_ELEMENTS (init_mode_names), s, &value))
    return FALSE;
  *mode = value;
  return TRUE;
}

static const char *const mount_type_names[] = {
  [MV_MOUNT_FILE] = "file",
  [MV_MOUNT_TMPFS] = "tmpfs",
  [MV_MOUNT_VOLUME] = "volume",
  [MV_MOUNT_DIRECTORY] = "directory",
};

const char *
mv_mount_type_to_string (MvMountType type)
{
  return mv_enum_to_name (mount_type_names, G_N_ELEMENTS (mount_type_names), type, "file");
}

gboolean
mv_mount_type_from_string (const char *s, MvMountType *type)
{
  guint value;

  if (!mv_enum_from_name (mount_type_names, G_N_ELEMENTS (mount_type_names), s, &value))
    return FALSE;
  *type = value;
  return TRUE;
}

#define READINESS_CONSOLE_PREFIX "console:"

char *
mv_readiness_to_string (MvReadiness readiness, const char *readiness_text)
{
  switch (readiness)
    {
    case MV_READINESS_AUTO:
      return g_strdup ("auto");
    case MV_READINESS_AGENT:
      return g_strdup ("agent");
    case MV_READINESS_CONSOLE:
      return g_strconcat (READINESS_CONSOLE_PREFIX, readiness_text ? readiness_text : "", NULL);
    case MV_READINESS_VMM:
      break;
    }
  return g_strdup ("vmm");
}

gboolean
mv_readiness_from_string (const char *s, MvReadiness *readiness, char **readiness_text)
{
  if (strcmp (s, "auto") == 0)
    *readiness = MV_READINESS_AUTO;
  else if (strcmp (s, "vmm") == 0)
    *readiness = MV_READINESS_VMM;
  else if (strcmp (s, "agent") == 0)
    *readiness = MV_READINESS_AGENT;
  else if (g_str_has_prefix (s, READINESS_CONSOLE_PREFIX))
    {
      *readiness = MV_READINESS_CONSOLE;
      g_free (*readiness_text);
      *readiness_text = g_strdup (s + strlen (READINESS_CONSOLE_PREFIX));
    }
  else
    return FALSE;
  return TRUE;
}

/* ---- comparisons ---- */

guint
mv_spec_vcpus (const MvSpec *spec)
{
  g_return_val_if_fail (spec != NULL, 0);
  return (spec->cpu_millicores + 999u) / 1000u;
}

guint
mv_spec_max_vcpus (const MvSpec *spec)
{
  g_return_val_if_fail (spec != NULL, 0);
  return MAX (mv_spec_vcpus (spec), spec->max_vcpus);
}

char *
mv_spec_fingerprint (const MvSpec *spec)
{
  g_autofree char *json = NULL;

  g_return_val_if_fail (spec != NULL, NULL);
  json = mv_spec_canonical_json (spec, MV_SPEC_CANON_NO_ID_LABELS | MV_SPEC_CANON_STRIP_QUERY);
  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, json, -1);
}

gboolean
mv_spec_equal (const MvSpec *a, const MvSpec *b)
{
  g_autofree char *ja = NULL;
  g_autofree char *jb = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  ja = mv_spec_canonical_json (a, 0);
  jb = mv_spec_canonical_json (b, 0);
  return strcmp (ja, jb) == 0;
}

gboolean
mv_spec_differs_beyond_standby (const MvSpec *a, const MvSpec *b)
{
  g_autofree char *ja = NULL;
  g_autofree char *jb = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  ja = mv_spec_canonical_json (a, MV_SPEC_CANON_NO_STANDBY);
  jb = mv_spec_canonical_json (b, MV_SPEC_CANON_NO_STANDBY);
  return strcmp (ja, jb) != 0;
}

static gboolean
host_devices_differ (const MvSpec *a, const MvSpec *b)
{
  if (a->pci_devices->len != b->pci_devices->len || !mv_gpu_equal (a->gpu, b->gpu))
    return TRUE;
  for (guint i = 0; i < a->pci_devices->len; i++)
    if (g_strcmp0 (a->pci_devices->pdata[i], b->pci_devices->pdata[i]) != 0)
      return TRUE;
  return FALSE;
}

gboolean
mv_spec_shape_differs (const MvSpec *a, const MvSpec *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  if (mv_spec_vcpus (a) != mv_spec_vcpus (b) ||
      a->max_vcpus != b->max_vcpus ||
      (a->cpu_topology == NULL) != (b->cpu_topology == NULL) ||
      (a->cpu_topology && memcmp (a->cpu_topology, b->cpu_topology, sizeof *a->cpu_topology)) ||
      host_devices_differ (a, b) ||
      a->memory_bytes != b->memory_bytes ||
      a->max_memory_bytes != b->max_memory_bytes ||
      g_strcmp0 (a->hypervisor_type, b->hypervisor_type) != 0 ||
      g_strcmp0 (a->hypervisor_version, b->hypervisor_version) != 0 ||
      g_strcmp0 (a->image_digest, b->image_digest) != 0 ||
      mv_spec_overlay_bytes (a) != mv_spec_overlay_bytes (b) ||
      /* The frozen guest's interface has its address in it. */
      g_strcmp0 (a->network_name, b->network_name) != 0 ||
      g_strcmp0 (a->static_ip, b->static_ip) != 0 ||
      a->disks->len != b->disks->len)
    return TRUE;
  for (guint i = 0; i < a->disks->len; i++)
    {
      const MvDisk *da = g_ptr_array_index (a->disks, i);
      const MvDisk *db = g_ptr_array_index (b->disks, i);

      if (g_strcmp0 (da->path, db->path) != 0 || da->read_only != db->read_only ||
          da->root != db->root)
        return TRUE;
    }
  return FALSE;
}

gboolean
mv_spec_differs_only_in_guest_metadata (const MvSpec *a, const MvSpec *b)
{
  g_autofree char *rest_a = NULL;
  g_autofree char *rest_b = NULL;
  g_autofree char *ja = NULL;
  g_autofree char *jb = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  rest_a = mv_spec_canonical_json (a, MV_SPEC_CANON_NO_STANDBY | MV_SPEC_CANON_NO_GUEST_METADATA);
  rest_b = mv_spec_canonical_json (b, MV_SPEC_CANON_NO_STANDBY | MV_SPEC_CANON_NO_GUEST_METADATA);
  if (strcmp (rest_a, rest_b) != 0)
    return FALSE;
  ja = mv_spec_canonical_json (a, MV_SPEC_CANON_NO_STANDBY);
  jb = mv_spec_canonical_json (b, MV_SPEC_CANON_NO_STANDBY);
  return strcmp (ja, jb) != 0;
}

/* ---- the workload ---- */

guint64
mv_spec_overlay_bytes (const MvSpec *spec)
{
  g_return_val_if_fail (spec != NULL, 0);

  if (spec->disk_bytes > 0)
    return spec->disk_bytes;
  return spec->image != NULL ? MV_DEFAULT_DISK_BYTES : 0;
}

const MvDisk *
mv_spec_root_disk (const MvSpec *spec)
{
  g_return_val_if_fail (spec != NULL, NULL);

  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);

      if (disk->root)
        return disk;
    }
  return NULL;
}

MvInitMode
mv_spec_effective_init_mode (const MvSpec *spec)
{
  /* What the usual images start systemd as. */
  static const char *const systemd_commands[] = {
    "systemd", "/sbin/init", "/lib/systemd/systemd", "/usr/lib/systemd/systemd", NULL
  };

  g_return_val_if_fail (spec != NULL, MV_INIT_MODE_EXEC);

  if (spec->init_mode != MV_INIT_MODE_AUTO)
    return spec->init_mode;
  if (spec->cmd != NULL && spec->cmd[0] != NULL && g_strv_contains (systemd_commands, spec->cmd[0]))
    return MV_INIT_MODE_SYSTEMD;
  return MV_INIT_MODE_EXEC;
}

MvSpec *
mv_spec_warm_template (const MvSpec *spec, const char *key)
{
  MvSpec *template = mv_spec_copy (spec);

  g_free (template->name);
  template->name = g_strdup_printf ("warm-%.12s", key);
  g_clear_pointer (&template->id, g_free);
  g_clear_pointer (&template->hostname, g_free);
  g_clear_pointer (&template->user_data, g_free);
  g_clear_pointer (&template->static_ip, g_free);
  g_clear_pointer (&template->user, g_free);
  g_clear_pointer (&template->working_dir, g_free);
  g_clear_pointer (&template->cmd, g_strfreev);
  g_clear_pointer (&template->health_check, mv_health_check_free);
  g_ptr_array_set_size (template->ssh_keys, 0);
  g_hash_table_remove_all (template->metadata);
  g_hash_table_remove_all (template->env);
  g_hash_table_remove_all (template->labels);
  g_ptr_array_set_size (template->mounts, 0);
  /* Its NIC reaches nothing: no ports, no rules of a machine's. */
  g_ptr_array_set_size (template->ports, 0);
  g_clear_pointer (&template->firewall, json_array_unref);
  template->firewall = json_array_new ();
  return template;
}
