/* The spec model: life cycle, the names of its enumerations, and how
 * two specs compare. Pure. */
#include "spec.h"
#include "spec-private.h"
#include "json-util.h"
#include "enum-names.h"

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
mv_disk_new (const char *path, gboolean read_only)
{
  MvDisk *disk = g_new0 (MvDisk, 1);

  disk->path = g_strdup (path);
  disk->read_only = read_only;
  return disk;
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
  spec->memory_bytes = MV_DEFAULT_MEMORY_BYTES;
  spec->disks = g_ptr_array_new_with_free_func (disk_free);
  spec->readiness = MV_READINESS_VMM;
  spec->ssh_keys = g_ptr_array_new_with_free_func (g_free);
  spec->metadata = string_map_new ();
  spec->firewall = json_array_new ();
  spec->restart_mode = MV_RESTART_NO;
  spec->labels = string_map_new ();
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
  g_clear_pointer (&spec->disks, g_ptr_array_unref);
  g_free (spec->readiness_text);
  g_free (spec->network_name);
  g_free (spec->static_ip);
  g_free (spec->hostname);
  g_clear_pointer (&spec->ssh_keys, g_ptr_array_unref);
  g_free (spec->user_data);
  g_clear_pointer (&spec->metadata, g_hash_table_unref);
  g_clear_pointer (&spec->firewall, json_array_unref);
  g_clear_pointer (&spec->labels, g_hash_table_unref);
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
  copy->memory_bytes = spec->memory_bytes;
  copy->max_memory_bytes = spec->max_memory_bytes;
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);
      g_ptr_array_add (copy->disks, mv_disk_new (disk->path, disk->read_only));
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
  copy->restart_mode = spec->restart_mode;
  copy->restart_max_retries = spec->restart_max_retries;
  copy->standby_after_seconds = spec->standby_after_seconds;
  copy_string_map (copy->labels, spec->labels);
  copy->remove_on_exit = spec->remove_on_exit;
  return copy;
}

/* ---- restart modes and readiness ---- */

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
  if (strcmp (s, "vmm") == 0)
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

gboolean
mv_spec_shape_differs (const MvSpec *a, const MvSpec *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  if (mv_spec_vcpus (a) != mv_spec_vcpus (b) ||
      a->max_vcpus != b->max_vcpus ||
      a->memory_bytes != b->memory_bytes ||
      a->max_memory_bytes != b->max_memory_bytes ||
      g_strcmp0 (a->hypervisor_type, b->hypervisor_type) != 0 ||
      g_strcmp0 (a->hypervisor_version, b->hypervisor_version) != 0 ||
      a->disks->len != b->disks->len)
    return TRUE;
  for (guint i = 0; i < a->disks->len; i++)
    {
      const MvDisk *da = g_ptr_array_index (a->disks, i);
      const MvDisk *db = g_ptr_array_index (b->disks, i);

      if (g_strcmp0 (da->path, db->path) != 0 || da->read_only != db->read_only)
        return TRUE;
    }
  return FALSE;
}
