/* The limits of a spec: every field checked, the message naming the
 * field and the limit. Pure. */
#include "spec.h"
#include "json-out.h"
#include "spec-private.h"
#include "json-util.h"
#include "text.h"

#include <string.h>

#include "errors.h"
#include "machine.h"
#include "image-ref.h"
#include "net-rules.h"

#define invalid(error, ...) mv_error_set ((error), MV_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

/* The bounds of every numeric field, for reading and validation alike. */
static const struct {
  const char *field;
  gint64      min;
  gint64      max;
  gboolean    bytes;
} number_bounds[] = {
  { "cpu_millicores", MV_CPU_MILLICORES_MIN, MV_CPU_MILLICORES_MAX, FALSE },
  { "max_vcpus", 0, MV_VCPUS_MAX, FALSE },
  { "memory_bytes", MV_MEMORY_MIN_BYTES, MV_MEMORY_MAX_BYTES, TRUE },
  { "max_memory_bytes", 0, MV_MEMORY_MAX_BYTES, TRUE },
  { "restart.max_retries", 0, MV_RESTART_MAX_RETRIES_MAX, FALSE },
  { "standby_after_seconds", 0, MV_STANDBY_AFTER_MAX_SECONDS, FALSE },
  { "sleep_after_idle_seconds", 0, MV_STANDBY_AFTER_MAX_SECONDS, FALSE },
};

static char *
number_text (gint64 value, gboolean bytes)
{
  if (bytes && value >= 0)
    return mv_text_bytes ((guint64) value);
  return g_strdup_printf ("%" G_GINT64_FORMAT, value);
}

gboolean
mv_spec_check_range (const char *field, gint64 value, const char *written, gint64 min,
                     gint64 max, gboolean bytes, GError **error)
{
  g_autofree char *shown = NULL;
  g_autofree char *bound = NULL;

  if (written == NULL && value >= min && value <= max)
    return TRUE;
  shown = written != NULL ? g_strdup (written) : number_text (value, bytes);
  if (value < min)
    {
      bound = number_text (min, bytes);
      return invalid (error, "%s: %s is below the minimum of %s", field, shown, bound);
    }
  bound = number_text (max, bytes);
  return invalid (error, "%s: %s is more than the limit of %s", field, shown, bound);
}

gboolean
mv_spec_check_number (const char *field, gint64 value, const char *written, GError **error)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (number_bounds); i++)
    if (strcmp (number_bounds[i].field, field) == 0)
      break;
  g_return_val_if_fail (i < G_N_ELEMENTS (number_bounds), FALSE);

  return mv_spec_check_range (field, value, written, number_bounds[i].min, number_bounds[i].max,
                              number_bounds[i].bytes, error);
}

static gboolean
check_utf8 (const char *field, const char *value, GError **error)
{
  if (value != NULL && !g_utf8_validate (value, -1, NULL))
    return invalid (error, "%s: not valid UTF-8", field);
  return TRUE;
}

gboolean
mv_name_validate (const char *field, const char *name, GError **error)
{
  gsize len;

  if (name == NULL)
    return invalid (error, "%s: required", field);
  len = strlen (name);
  if (len == 0)
    return invalid (error, "%s: empty", field);
  if (len > MV_NAME_MAX_BYTES)
    return invalid (error, "%s: longer than %d bytes", field, MV_NAME_MAX_BYTES);
  if (!g_utf8_validate (name, len, NULL))
    return invalid (error, "%s: not valid UTF-8", field);
  /* Names become path components and command-line arguments: no
   * separators, no ".", "..", hidden files or things that look like
   * options. */
  if (name[0] == '-' || name[0] == '.')
    return invalid (error, "%s: starts with '%c'", field, name[0]);
  for (const char *p = name; *p != '\0'; p++)
    {
      if (*p == '/')
        return invalid (error, "%s: contains '/'", field);
      if ((guchar) *p < 0x20 || *p == 0x7f)
        return invalid (error, "%s: contains a control character", field);
    }
  return mv_text_check_name_chars (field, "name", name, error);
}

/* C0 controls and DEL: nothing a path or a command line needs, and they
 * change how logs and messages display. */
static gboolean
check_no_controls (const char *field, const char *value, GError **error)
{
  for (const char *p = value; p != NULL && *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      return invalid (error, "%s: contains a control character (0x%02x)", field, (guchar) *p);
  return TRUE;
}

static gboolean
check_path (const char *field, const char *path, gboolean required, GError **error)
{
  if (path == NULL)
    return required ? invalid (error, "%s: required", field) : TRUE;
  if (*path == '\0')
    return invalid (error, "%s: empty", field);
  if (strlen (path) > MV_PATH_MAX_BYTES)
    return invalid (error, "%s: longer than %d bytes", field, MV_PATH_MAX_BYTES);
  if (!check_utf8 (field, path, error) || !check_no_controls (field, path, error))
    return FALSE;
  if (path[0] != '/')
    {
      g_autofree char *shown = mv_text_excerpt (path, -1, MV_EXCERPT_MAX_BYTES);

      return invalid (error, "%s: \"%s\" is not an absolute path", field, shown);
    }
  return TRUE;
}

/* Only the bytes in @allowed (and, with @alnum, ASCII letters and
 * digits), at most @max_bytes of them; @what says what the field holds. */
static gboolean
check_ascii_field (const char *field, const char *value, gsize max_bytes, gboolean alnum,
                   const char *allowed, const char *what, GError **error)
{
  gsize len;

  if (value == NULL)
    return TRUE;
  len = strlen (value);
  if (len > max_bytes)
    return invalid (error, "%s: %" G_GSIZE_FORMAT " bytes, more than the limit of %" G_GSIZE_FORMAT,
                    field, len, max_bytes);
  for (const char *p = value; *p != '\0'; p++)
    if (!(alnum && g_ascii_isalnum (*p)) && strchr (allowed, *p) == NULL)
      return invalid (error, "%s: may hold only %s", field, what);
  return TRUE;
}

static gboolean
valid_dns_name (const char *name)
{
  const char *label = name;

  for (;;)
    {
      gsize len = strcspn (label, ".");

      if (len < 1 || len > 63 || label[0] == '-' || label[len - 1] == '-')
        return FALSE;
      for (gsize i = 0; i < len; i++)
        if (!g_ascii_isalnum (label[i]) && label[i] != '-')
          return FALSE;
      if (label[len] == '\0')
        return TRUE;
      label += len + 1;
    }
}

static gboolean
validate_hypervisor (const MvSpec *spec, GError **error)
{
  /* "test" is the runtime the daemon's own tests run machines on. */
  static const char *const types[] = {
    "cloud-hypervisor", "firecracker", "qemu", "test", NULL
  };

  if (spec->hypervisor_type != NULL && !g_strv_contains (types, spec->hypervisor_type))
    {
      g_autofree char *shown = mv_text_excerpt (spec->hypervisor_type, -1, MV_EXCERPT_MAX_BYTES);

      return invalid (error, "hypervisor_type: \"%s\" is not one of "
                      "cloud-hypervisor, firecracker, qemu", shown);
    }
  return check_ascii_field ("hypervisor_version", spec->hypervisor_version,
                            MV_HYPERVISOR_VERSION_MAX_BYTES, TRUE, "._+-",
                            "letters, digits, '.', '_', '+' and '-'", error);
}

static gboolean
validate_boot (const MvSpec *spec, GError **error)
{
  if (!check_path ("kernel", spec->kernel, FALSE, error) ||
      !check_path ("initrd", spec->initrd, FALSE, error))
    return FALSE;
  if (spec->kernel_args != NULL)
    {
      if (strlen (spec->kernel_args) > MV_KERNEL_ARGS_MAX_BYTES)
        return invalid (error, "kernel_args: longer than %d bytes", MV_KERNEL_ARGS_MAX_BYTES);
      if (!check_utf8 ("kernel_args", spec->kernel_args, error))
        return FALSE;
      if (strpbrk (spec->kernel_args, "\r\n") != NULL)
        return invalid (error, "kernel_args: contains a newline");
      if (!check_no_controls ("kernel_args", spec->kernel_args, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
check_memory_step (const char *field, guint64 value, GError **error)
{
  if (value % MV_MEMORY_STEP_BYTES == 0)
    return TRUE;
  return invalid (error, "%s: %" G_GUINT64_FORMAT " is not a multiple of %" G_GUINT64_FORMAT
                  " (2 MiB)", field, value, MV_MEMORY_STEP_BYTES);
}

/* A guint64 beyond G_MAXINT64 is past every limit; it is shown as it is. */
static gboolean
check_bytes (const char *field, guint64 value, GError **error)
{
  if (value > G_MAXINT64)
    {
      g_autofree char *shown = g_strdup_printf ("%" G_GUINT64_FORMAT, value);

      return mv_spec_check_number (field, G_MAXINT64, shown, error);
    }
  return mv_spec_check_number (field, (gint64) value, NULL, error);
}

static gboolean
validate_resources (const MvSpec *spec, GError **error)
{
  guint vcpus = mv_spec_vcpus (spec);

  if (!mv_spec_check_number ("cpu_millicores", spec->cpu_millicores, NULL, error))
    return FALSE;
  if (spec->max_vcpus != 0 && (spec->max_vcpus < vcpus || spec->max_vcpus > MV_VCPUS_MAX))
    return invalid (error, "max_vcpus: %u is outside %u–%d "
                    "(from the vCPUs of cpu_millicores to the maximum)",
                    spec->max_vcpus, vcpus, MV_VCPUS_MAX);

  if (!check_bytes ("memory_bytes", spec->memory_bytes, error) ||
      !check_memory_step ("memory_bytes", spec->memory_bytes, error))
    return FALSE;

  if (spec->max_memory_bytes != 0)
    {
      if (spec->max_memory_bytes < spec->memory_bytes)
        return invalid (error, "max_memory_bytes: %" G_GUINT64_FORMAT " is below "
                        "memory_bytes %" G_GUINT64_FORMAT,
                        spec->max_memory_bytes, spec->memory_bytes);
      if (!check_bytes ("max_memory_bytes", spec->max_memory_bytes, error) ||
          !check_memory_step ("max_memory_bytes", spec->max_memory_bytes, error))
        return FALSE;
    }
  return TRUE;
}

/* Each vCPU the machine can have (its vCPUs, or max_vcpus when it has
 * room to grow: a hot-added vCPU is pinned as it comes) at most once, each
 * to a non-empty set of distinct host CPU numbers below
 * MV_HOST_CPUS_MAX. Whether those CPUs exist here is the host's to say
 * (the hypervisor layer checks at create and at each start). */
static gboolean
validate_cpu_affinity (const MvSpec *spec, GError **error)
{
  /* validate_resources() holds both to MV_VCPUS_MAX already. */
  guint vcpus = MIN (mv_spec_max_vcpus (spec), MV_VCPUS_MAX);
  gint pinned_by[MV_VCPUS_MAX];
  g_autofree guint8 *seen = NULL;

  if (spec->cpu_affinity->len == 0)
    return TRUE;
  if (spec->cpu_affinity->len > MV_VCPUS_MAX)
    return invalid (error, "cpu_affinity: %u entries, more than the limit of %d (one per vCPU)",
                    spec->cpu_affinity->len, MV_VCPUS_MAX);
  for (guint v = 0; v < MV_VCPUS_MAX; v++)
    pinned_by[v] = -1;
  seen = g_new (guint8, MV_HOST_CPUS_MAX / 8);
  for (guint i = 0; i < spec->cpu_affinity->len; i++)
    {
      const MvCpuAffinity *affinity = g_ptr_array_index (spec->cpu_affinity, i);
      const GArray *cpus = affinity->host_cpus;

      if (affinity->vcpu >= vcpus)
        return invalid (error, "cpu_affinity[%u].vcpu: %u is not one of the machine's vCPUs "
                        "(0 to %u%s)", i, affinity->vcpu, vcpus - 1,
                        spec->max_vcpus > 0 ? ", max_vcpus included"
                                            : "; max_vcpus gives room for more");
      if (pinned_by[affinity->vcpu] >= 0)
        return invalid (error, "cpu_affinity[%u].vcpu: vCPU %u is pinned already by "
                        "cpu_affinity[%d]", i, affinity->vcpu, pinned_by[affinity->vcpu]);
      pinned_by[affinity->vcpu] = (gint) i;
      if (cpus->len == 0)
        return invalid (error, "cpu_affinity[%u].host_cpus: empty; give at least one host CPU "
                        "(leave the vCPU out to let it run on any)", i);
      if (cpus->len > MV_HOST_CPUS_MAX)
        return invalid (error, "cpu_affinity[%u].host_cpus: %u CPUs, more than the limit of %d",
                        i, cpus->len, MV_HOST_CPUS_MAX);
      memset (seen, 0, MV_HOST_CPUS_MAX / 8);
      for (guint j = 0; j < cpus->len; j++)
        {
          guint32 cpu = g_array_index (cpus, guint32, j);

          if (cpu >= MV_HOST_CPUS_MAX)
            return invalid (error, "cpu_affinity[%u].host_cpus: CPU %u is more than the limit "
                            "of %d", i, cpu, MV_HOST_CPUS_MAX - 1);
          if (seen[cpu / 8] & (1u << (cpu % 8)))
            return invalid (error, "cpu_affinity[%u].host_cpus: CPU %u is listed twice", i, cpu);
          seen[cpu / 8] |= (guint8) (1u << (cpu % 8));
        }
    }
  return TRUE;
}

static gboolean
validate_disks (const MvSpec *spec, GError **error)
{
  gint root = -1;

  if (spec->disks->len > MV_DISKS_MAX)
    return invalid (error, "disks: %u disks, more than the limit of %d",
                    spec->disks->len, MV_DISKS_MAX);
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);

      if (!check_path (field, disk->path, TRUE, error))
        return FALSE;
      if (!disk->root)
        continue;
      if (root >= 0)
        return invalid (error, "disks[%u].root: only one disk can be the root; disks[%d] is",
                        i, root);
      root = (gint) i;
    }
  return TRUE;
}

static gboolean
check_optional_range (const char *field, guint64 value, guint64 min, guint64 max,
                      gboolean bytes, GError **error)
{
  if (value == 0)
    return TRUE;
  if (value > G_MAXINT64)
    return mv_spec_check_range (field, G_MAXINT64, NULL, (gint64) min, (gint64) max, bytes, error);
  return mv_spec_check_range (field, (gint64) value, NULL, (gint64) min, (gint64) max, bytes,
                              error);
}

/* The image and the kernel it boots, its overlay disk and the disks'
 * rate limits. The reference's syntax is checked here; whether it can be
 * had is for the image store. */
static gboolean
validate_image_and_disks (const MvSpec *spec, GError **error)
{
  gboolean image = spec->image != NULL;

  if (image)
    {
      g_autoptr(MvImageRef) ref = mv_image_ref_parse (spec->image, NULL, error);

      if (ref == NULL)
        return FALSE;
      if (spec->initrd != NULL)
        return invalid (error, "initrd: a machine booted from an image boots microvmd's "
                        "initramfs; leave initrd out");
      if (mv_spec_root_disk (spec) != NULL)
        return invalid (error, "disks: a machine booted from an image has the image as its "
                        "root; no disk can be marked root");
    }
  if (spec->image_digest != NULL)
    {
      if (!image)
        return invalid (error, "image_digest: only with image");
      if (!mv_image_digest_is_valid (spec->image_digest))
        return invalid (error, "image_digest: not \"sha256:\" and 64 lowercase hex digits");
    }
  if (spec->kernel_name != NULL)
    {
      if (spec->kernel != NULL)
        return invalid (error, "kernel_name: names a configured kernel; kernel names a file; "
                        "give one of them");
      if (!check_ascii_field ("kernel_name", spec->kernel_name, MV_KERNEL_NAME_MAX_BYTES, TRUE,
                              "._-", "letters, digits, '.', '_' and '-'", error))
        return FALSE;
    }
  if (spec->disk_bytes != 0 && !image && mv_spec_root_disk (spec) == NULL)
    return invalid (error, "disk_bytes: the overlay disk is for a root file system: "
                    "it needs image, or a disk marked root");
  if (spec->disks->len + (image ? 1 : 0) + (mv_spec_overlay_bytes (spec) > 0 ? 1 : 0) >
      MV_BLOCK_DEVICES_MAX)
    return invalid (error, "disks: %u disks beside the image and the overlay disk, more than "
                    "the %d a guest can have", spec->disks->len, MV_BLOCK_DEVICES_MAX);
  return check_optional_range ("disk_bytes", spec->disk_bytes, MV_DISK_BYTES_MIN,
                               MV_DISK_BYTES_MAX, TRUE, error) &&
         check_optional_range ("disk_bytes_per_second", spec->disk_bytes_per_second,
                               MV_DISK_BYTES_PER_SECOND_MIN, MV_DISK_BYTES_PER_SECOND_MAX, TRUE,
                               error) &&
         check_optional_range ("disk_iops", spec->disk_iops, MV_DISK_IOPS_MIN, MV_DISK_IOPS_MAX,
                               FALSE, error);
}

static gboolean
validate_readiness (const MvSpec *spec, GError **error)
{
  switch (spec->readiness)
    {
    case MV_READINESS_AUTO:
    case MV_READINESS_VMM:
    case MV_READINESS_AGENT:
      return TRUE;
    case MV_READINESS_CONSOLE:
      if (spec->readiness_text == NULL || *spec->readiness_text == '\0')
        return invalid (error, "readiness: the console text is empty");
      if (strlen (spec->readiness_text) > MV_READINESS_TEXT_MAX_BYTES)
        return invalid (error, "readiness: the console text is longer than %d bytes",
                        MV_READINESS_TEXT_MAX_BYTES);
      return check_utf8 ("readiness", spec->readiness_text, error);
    }
  return invalid (error, "readiness: unknown kind %d", (int) spec->readiness);
}

static gboolean
validate_hostname (const MvSpec *spec, GError **error)
{
  /* Empty is the machine's name. */
  if (spec->hostname == NULL || *spec->hostname == '\0')
    return TRUE;
  if (strlen (spec->hostname) > MV_HOSTNAME_MAX_BYTES)
    return invalid (error, "hostname: longer than %d bytes", MV_HOSTNAME_MAX_BYTES);
  if (!valid_dns_name (spec->hostname))
    {
      g_autofree char *shown = mv_text_excerpt (spec->hostname, -1, MV_EXCERPT_MAX_BYTES);

      return invalid (error, "hostname: \"%s\" is not a DNS name (labels of 1–63 letters, "
                      "digits and '-', not starting or ending with '-')", shown);
    }
  return TRUE;
}

/* A map of strings: at most @max_entries (@noun in the message), keys of
 * 1 to @key_max bytes that display as themselves (core/text.h), values of
 * at most @value_max (0: any), UTF-8; with @value_text, values hold no
 * control characters either, being for people. */
static gboolean
check_string_map (const char *field, GHashTable *map, const char *noun, guint max_entries,
                  gsize key_max, gsize value_max, gboolean value_text, GError **error)
{
  GHashTableIter iter;
  gpointer key, value;

  if (g_hash_table_size (map) > max_entries)
    return invalid (error, "%s: %u %s, more than the limit of %u",
                    field, g_hash_table_size (map), noun, max_entries);
  g_hash_table_iter_init (&iter, map);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      gsize len = strlen (key);

      if (len == 0)
        return invalid (error, "%s: empty key", field);
      if (len > key_max)
        return invalid (error, "%s: a key is longer than %" G_GSIZE_FORMAT " bytes",
                        field, key_max);
      if (!check_utf8 (field, key, error) ||
          !mv_text_check_name_chars (field, "key", key, error))
        return FALSE;
      if (value_max != 0 && strlen (value) > value_max)
        return invalid (error, "%s.%s: value longer than %" G_GSIZE_FORMAT " bytes",
                        field, (const char *) key, value_max);
      if (!check_utf8 (field, value, error))
        return FALSE;
      if (value_text)
        {
          g_autofree char *where = g_strdup_printf ("%s.%s", field, (const char *) key);

          if (!check_no_controls (where, value, error))
            return FALSE;
        }
    }
  return TRUE;
}

static gsize
string_map_json_size (GHashTable *map)
{
  MvJsonOut out;
  gsize size;

  mv_json_out_init (&out, MV_JSON_OUT_COUNT);
  mv_json_out_string_map (&out, map, NULL);
  size = mv_json_out_size (&out);
  mv_json_out_clear (&out);
  return size;
}

/* A redacted value sent back (a spec shown without its secrets, then sent
 * to Update) would wipe the secret it stands for: refused. */
static gboolean
check_not_redacted (const char *field, const char *value, GError **error)
{
  if (g_strcmp0 (value, MV_SPEC_REDACTED) != 0)
    return TRUE;
  return invalid (error, "%s: \"%s\" stands for a secret that a shown spec hides; send the "
                  "spec with its secrets (GetSpec, or microvmctl show --json as a caller "
                  "allowed to read them), or leave the field out to clear it", field,
                  MV_SPEC_REDACTED);
}

static gboolean
validate_guest_metadata (const MvSpec *spec, GError **error)
{
  GHashTableIter iter;
  gpointer key, value;
  gsize size;

  if (spec->ssh_keys->len > MV_SSH_KEYS_MAX)
    return invalid (error, "ssh_keys: %u keys, more than the limit of %d",
                    spec->ssh_keys->len, MV_SSH_KEYS_MAX);
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    {
      const char *key_text = g_ptr_array_index (spec->ssh_keys, i);
      g_autofree char *field = g_strdup_printf ("ssh_keys[%u]", i);
      gsize len = key_text != NULL ? strlen (key_text) : 0;

      if (len == 0)
        return invalid (error, "%s: empty", field);
      if (len > MV_SSH_KEY_MAX_BYTES)
        return invalid (error, "%s: longer than %d bytes", field, MV_SSH_KEY_MAX_BYTES);
      if (!check_utf8 (field, key_text, error))
        return FALSE;
      if (strpbrk (key_text, "\r\n") != NULL)
        return invalid (error, "%s: contains a newline (one key per entry)", field);
      if (!check_not_redacted (field, key_text, error))
        return FALSE;
    }
  if (!check_not_redacted ("user_data", spec->user_data, error))
    return FALSE;
  g_hash_table_iter_init (&iter, spec->metadata);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      g_autofree char *field = g_strdup_printf ("metadata.%s", (const char *) key);

      if (!check_not_redacted (field, value, error))
        return FALSE;
    }

  if (spec->user_data != NULL)
    {
      if (strlen (spec->user_data) > MV_USER_DATA_MAX_BYTES)
        return invalid (error, "user_data: longer than %d bytes", MV_USER_DATA_MAX_BYTES);
      if (!check_utf8 ("user_data", spec->user_data, error))
        return FALSE;
    }

  if (!check_string_map ("metadata", spec->metadata, "entries", MV_METADATA_MAX_ENTRIES,
                         MV_METADATA_KEY_MAX_BYTES, 0, FALSE, error))
    return FALSE;
  size = string_map_json_size (spec->metadata);
  if (size > MV_METADATA_MAX_JSON_BYTES)
    return invalid (error, "metadata: %" G_GSIZE_FORMAT " bytes of JSON, more than the limit of %d",
                    size, MV_METADATA_MAX_JSON_BYTES);

  size = mv_spec_metadata_document_size (spec);
  if (size > MV_METADATA_DOCUMENT_MAX_BYTES)
    return invalid (error, "metadata: the guest metadata document (hostname, ssh_keys, "
                    "user_data and metadata) is %" G_GSIZE_FORMAT " bytes, "
                    "more than the limit of %d", size, MV_METADATA_DOCUMENT_MAX_BYTES);
  return TRUE;
}

static gboolean
validate_labels (const MvSpec *spec, GError **error)
{
  return check_string_map ("labels", spec->labels, "labels", MV_LABELS_MAX,
                           MV_LABEL_KEY_MAX_BYTES, MV_LABEL_VALUE_MAX_BYTES, TRUE, error);
}

static gboolean
validate_policies (const MvSpec *spec, guint32 standby_min, GError **error)
{
  guint n_rules = json_array_get_length (spec->firewall);

  if (n_rules > MV_FIREWALL_RULES_MAX)
    return invalid (error, "firewall: %u rules, more than the limit of %d",
                    n_rules, MV_FIREWALL_RULES_MAX);
  for (guint i = 0; i < n_rules; i++)
    {
      JsonNode *rule = json_array_get_element (spec->firewall, i);
      g_autofree char *json = NULL;
      guint depth;
      gsize size;

      if (!JSON_NODE_HOLDS_OBJECT (rule))
        return invalid (error, "firewall[%u]: expected an object", i);
      /* The depth first: writing out a deep rule to measure it is what
       * the limit is there to prevent. */
      depth = mv_json_node_depth (rule);
      if (depth > MV_FIREWALL_RULE_MAX_DEPTH)
        return invalid (error, "firewall[%u]: nesting depth %u is more than the limit of %d",
                        i, depth, MV_FIREWALL_RULE_MAX_DEPTH);
      json = json_to_string (rule, FALSE);
      size = strlen (json);
      if (size > MV_FIREWALL_RULE_MAX_BYTES)
        return invalid (error, "firewall[%u]: %" G_GSIZE_FORMAT " bytes of JSON, more than the "
                        "limit of %d", i, size, MV_FIREWALL_RULE_MAX_BYTES);
    }
  if (n_rules > 0)
    {
      g_autoptr(GPtrArray) rules = mv_firewall_rules_parse (spec->firewall, error);

      if (rules == NULL)
        return FALSE;
    }

  if ((guint) spec->restart_mode > MV_RESTART_ALWAYS)
    return invalid (error, "restart.mode: unknown mode %d", (int) spec->restart_mode);
  if (!mv_spec_check_number ("restart.max_retries", spec->restart_max_retries, NULL, error))
    return FALSE;
  if (spec->restart_max_retries != 0 && spec->restart_mode != MV_RESTART_ON_FAILURE)
    return invalid (error, "restart.max_retries: only applies to mode on-failure, not %s",
                    mv_restart_mode_to_string (spec->restart_mode));

  if (!mv_spec_check_number ("standby_after_seconds", spec->standby_after_seconds, NULL, error))
    return FALSE;
  if (spec->standby_after_seconds != 0 && spec->standby_after_seconds < standby_min)
    return invalid (error, "standby_after_seconds: %u is below the minimum of %u "
                    "(0 turns standby off)",
                    spec->standby_after_seconds, standby_min);
  /* Standby freezes the guest to a file; what virtiofsd holds of a shared
   * directory (open files, the guest's view of it) is not in that file. */
  if (spec->standby_after_seconds != 0 && mv_spec_has_directory_mount (spec))
    return invalid (error, "standby_after_seconds: a machine with a directory mount cannot be "
                    "put on standby (0 turns standby off)");
  return TRUE;
}

static gboolean
validate_network (const MvSpec *spec, GError **error)
{
  if (spec->network_name != NULL && !mv_name_validate ("network_name", spec->network_name, error))
    return FALSE;
  if (spec->network_name == NULL)
    {
      const char *needs = spec->static_ip ? "static_ip"
                          : spec->ports->len > 0 ? "ports"
                          : json_array_get_length (spec->firewall) > 0 ? "firewall"
                          : spec->upload_bytes_per_second ? "upload_bytes_per_second"
                          : spec->download_bytes_per_second ? "download_bytes_per_second"
                          : NULL;
      if (needs)
        return invalid (error, "%s: the machine is on no network (network_name is not set)",
                        needs);
    }
  if (!mv_port_mappings_validate (spec->ports, error))
    return FALSE;
  if (!check_optional_range ("upload_bytes_per_second", spec->upload_bytes_per_second,
                             MV_NET_BYTES_PER_SECOND_MIN, MV_NET_BYTES_PER_SECOND_MAX, TRUE,
                             error) ||
      !check_optional_range ("download_bytes_per_second", spec->download_bytes_per_second,
                             MV_NET_BYTES_PER_SECOND_MIN, MV_NET_BYTES_PER_SECOND_MAX, TRUE,
                             error))
    return FALSE;
  return check_ascii_field ("static_ip", spec->static_ip, MV_STATIC_IP_MAX_BYTES, FALSE,
                            "0123456789abcdefABCDEF.:/",
                            "an IP address and a prefix length", error);
}

/* ---- the workload ---- */

/* An absolute path with one spelling: no "." or ".." components, no
 * "//", no trailing '/' but for "/" itself (refused with !@root_ok). */
static gboolean
check_normalized_path (const char *field, const char *path, gboolean root_ok, GError **error)
{
  g_autofree char *shown = NULL;
  gboolean normal = TRUE;

  if (!check_path (field, path, TRUE, error))
    return FALSE;
  if (strcmp (path, "/") == 0)
    return root_ok ? TRUE : invalid (error, "%s: \"/\" is not allowed", field);
  for (const char *component = path + 1; normal; )
    {
      gsize len = strcspn (component, "/");

      if (len == 0 || (len == 1 && component[0] == '.') ||
          (len == 2 && component[0] == '.' && component[1] == '.'))
        normal = FALSE;
      if (component[len] == '\0')
        break;
      component += len + 1;
    }
  if (normal)
    return TRUE;
  shown = mv_text_excerpt (path, -1, MV_EXCERPT_MAX_BYTES);
  return invalid (error, "%s: \"%s\" is not a normalized path "
                  "(no \".\" or \"..\", no \"//\", no trailing \"/\")", field, shown);
}

/* A user or group name as useradd takes it, or a decimal ID below
 * 4294967295 (which is (uid_t) -1). */
static gboolean
valid_user_part (const char *part, gsize len, gboolean *numeric)
{
  if (len == 0)
    return FALSE;
  *numeric = g_ascii_isdigit (part[0]);
  if (*numeric)
    {
      guint64 value = 0;

      if (len > 10 || (part[0] == '0' && len > 1))
        return FALSE;
      for (gsize i = 0; i < len; i++)
        {
          if (!g_ascii_isdigit (part[i]))
            return FALSE;
          value = value * 10 + (guint64) (part[i] - '0');
        }
      return value <= G_MAXUINT32 - 1;
    }
  if (len > 32 || !(g_ascii_isalpha (part[0]) || part[0] == '_'))
    return FALSE;
  for (gsize i = 1; i < len; i++)
    if (!g_ascii_isalnum (part[i]) && strchr ("_.-", part[i]) == NULL)
      return FALSE;
  return TRUE;
}

static gboolean
check_user (const char *user, GError **error)
{
  gsize len;
  const char *colon;
  gboolean user_numeric = FALSE, group_numeric = FALSE;
  gboolean ok;

  /* Empty is root, as absent is. */
  if (user == NULL || *user == '\0')
    return TRUE;
  len = strlen (user);
  if (len > MV_USER_MAX_BYTES)
    return invalid (error, "user: %" G_GSIZE_FORMAT " bytes, more than the limit of %d",
                    len, MV_USER_MAX_BYTES);
  colon = strchr (user, ':');
  if (colon == NULL)
    ok = valid_user_part (user, len, &user_numeric);
  else
    ok = valid_user_part (user, colon - user, &user_numeric) &&
         valid_user_part (colon + 1, strlen (colon + 1), &group_numeric) &&
         user_numeric == group_numeric;
  if (!ok)
    {
      g_autofree char *shown = mv_text_excerpt (user, -1, MV_EXCERPT_MAX_BYTES);

      return invalid (error, "user: \"%s\" is not one of name, uid, name:group, uid:gid "
                      "(names of at most 32 letters, digits, '_', '.' and '-', not starting "
                      "with a digit, '.' or '-'; IDs from 0 to 4294967294)", shown);
    }
  return TRUE;
}

/* An argument vector of 1 to @max_args non-empty strings of UTF-8, at
 * most @max_bytes together (0: no limit but the document's). */
static gboolean
check_argv (const char *field, char **argv, guint max_args, gsize max_bytes, GError **error)
{
  guint n = argv != NULL ? g_strv_length (argv) : 0;
  gsize total = 0;

  if (n == 0)
    return invalid (error, "%s: an empty list (it needs at least the program)", field);
  if (n > max_args)
    return invalid (error, "%s: %u arguments, more than the limit of %u", field, n, max_args);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *where = g_strdup_printf ("%s[%u]", field, i);

      if (*argv[i] == '\0')
        return invalid (error, "%s: empty", where);
      if (!check_utf8 (where, argv[i], error))
        return FALSE;
      total += strlen (argv[i]);
    }
  if (max_bytes != 0 && total > max_bytes)
    {
      g_autofree char *limit = mv_text_bytes (max_bytes);

      return invalid (error, "%s: %" G_GSIZE_FORMAT " bytes of arguments in all, more than the "
                      "limit of %s", field, total, limit);
    }
  return TRUE;
}

static gboolean
valid_env_name (const char *name)
{
  if (!(g_ascii_isalpha (name[0]) || name[0] == '_'))
    return FALSE;
  for (const char *p = name + 1; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '_')
      return FALSE;
  return TRUE;
}

static gboolean
check_env (GHashTable *env, GError **error)
{
  GHashTableIter iter;
  gpointer key, value;
  gsize total = 0;

  if (g_hash_table_size (env) > MV_ENV_MAX)
    return invalid (error, "env: %u variables, more than the limit of %d",
                    g_hash_table_size (env), MV_ENV_MAX);
  g_hash_table_iter_init (&iter, env);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      if (!valid_env_name (key))
        {
          g_autofree char *shown = mv_text_excerpt (key, -1, MV_EXCERPT_MAX_BYTES);

          return invalid (error, "env: \"%s\" is not a variable name "
                          "(letters, digits and '_', not starting with a digit)", shown);
        }
      if (!g_utf8_validate (value, -1, NULL))
        return invalid (error, "env.%s: not valid UTF-8", (const char *) key);
      total += strlen (key) + 1 + strlen (value);
    }
  if (total > MV_ENV_MAX_BYTES)
    {
      g_autofree char *limit = mv_text_bytes (MV_ENV_MAX_BYTES);

      return invalid (error, "env: %" G_GSIZE_FORMAT " bytes of KEY=VALUE in all, more than the "
                      "limit of %s", total, limit);
    }
  return TRUE;
}

static gboolean
validate_workload (const MvSpec *spec, GError **error)
{
  if (spec->cmd != NULL && !check_argv ("cmd", spec->cmd, MV_CMD_MAX_ARGS, MV_CMD_MAX_BYTES, error))
    return FALSE;
  if (!check_env (spec->env, error) || !check_user (spec->user, error))
    return FALSE;
  if (spec->working_dir != NULL && *spec->working_dir != '\0' &&
      !check_normalized_path ("working_dir", spec->working_dir, TRUE, error))
    return FALSE;
  if ((guint) spec->init_mode > MV_INIT_MODE_SYSTEMD)
    return invalid (error, "init_mode: unknown mode %d", (int) spec->init_mode);
  if ((guint) spec->start_mode > MV_START_MODE_WARM)
    return invalid (error, "start_mode: unknown mode %d", (int) spec->start_mode);
  return TRUE;
}

/* What one mount of each type may and must set. */
static gboolean
validate_mount (const MvSpec *spec, guint i, const MvMount *mount, GError **error)
{
  g_autofree char *target = g_strdup_printf ("mounts[%u].target", i);
  g_autofree char *source = g_strdup_printf ("mounts[%u].source", i);
  const char *type = mv_mount_type_to_string (mount->type);
  gboolean wants_source = mount->type == MV_MOUNT_VOLUME || mount->type == MV_MOUNT_DIRECTORY;

  if ((guint) mount->type > MV_MOUNT_DIRECTORY)
    return invalid (error, "mounts[%u].type: unknown type %d", i, (int) mount->type);
  if (!check_normalized_path (target, mount->target, FALSE, error))
    return FALSE;

  if (wants_source && (mount->source == NULL || *mount->source == '\0'))
    return invalid (error, "%s: required for %s mounts", source, type);
  if (!wants_source && mount->source != NULL)
    return invalid (error, "%s: not for %s mounts", source, type);
  if (mount->type == MV_MOUNT_VOLUME && !mv_name_validate (source, mount->source, error))
    return FALSE;
  if (mount->type == MV_MOUNT_DIRECTORY &&
      !check_normalized_path (source, mount->source, TRUE, error))
    return FALSE;

  if (mount->type != MV_MOUNT_FILE && mount->content != NULL)
    return invalid (error, "mounts[%u].content: only for file mounts, not %s", i, type);
  if (mount->mode > MV_MOUNT_MODE_MAX)
    return invalid (error, "mounts[%u].mode: %o is more than the limit of 07777", i, mount->mode);
  if (wants_source && mount->mode != 0)
    return invalid (error, "mounts[%u].mode: only for file and tmpfs mounts, not %s", i, type);

  if (mount->size_bytes != 0)
    {
      g_autofree char *field = g_strdup_printf ("mounts[%u].size_bytes", i);

      if (mount->type != MV_MOUNT_TMPFS)
        return invalid (error, "%s: only for tmpfs mounts, not %s", field, type);
      if (mount->size_bytes < MV_TMPFS_MIN_BYTES)
        return mv_spec_check_range (field, (gint64) mount->size_bytes, NULL, MV_TMPFS_MIN_BYTES,
                                    G_MAXINT64, TRUE, error);
      if (mount->size_bytes > spec->memory_bytes)
        {
          g_autofree char *size = mv_text_bytes (mount->size_bytes);
          g_autofree char *memory = mv_text_bytes (spec->memory_bytes);

          return invalid (error, "%s: %s is more than memory_bytes %s", field, size, memory);
        }
    }
  return TRUE;
}

static gboolean
validate_mounts (const MvSpec *spec, GError **error)
{
  g_autoptr(GHashTable) targets = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) volumes = g_hash_table_new (g_str_hash, g_str_equal);
  guint64 file_bytes = 0;

  if (spec->mounts->len > MV_MOUNTS_MAX)
    return invalid (error, "mounts: %u mounts, more than the limit of %d",
                    spec->mounts->len, MV_MOUNTS_MAX);
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = g_ptr_array_index (spec->mounts, i);
      gpointer other;

      if (!validate_mount (spec, i, mount, error))
        return FALSE;
      if (g_hash_table_lookup_extended (targets, mount->target, NULL, &other))
        {
          g_autofree char *shown = mv_text_excerpt (mount->target, -1, MV_EXCERPT_MAX_BYTES);

          return invalid (error, "mounts[%u].target: \"%s\" is also the target of mounts[%u]",
                          i, shown, GPOINTER_TO_UINT (other));
        }
      g_hash_table_insert (targets, mount->target, GUINT_TO_POINTER (i));
      if (mount->type == MV_MOUNT_VOLUME)
        {
          if (g_hash_table_lookup_extended (volumes, mount->source, NULL, &other))
            return invalid (error, "mounts[%u].source: volume %s is also mounted by mounts[%u]",
                            i, mount->source, GPOINTER_TO_UINT (other));
          g_hash_table_insert (volumes, mount->source, GUINT_TO_POINTER (i));
          if (g_hash_table_size (volumes) > MV_VOLUME_MOUNTS_MAX)
            return invalid (error, "mounts[%u]: more than the limit of %d volume mounts "
                            "(/dev/vde to /dev/vdz)", i, MV_VOLUME_MOUNTS_MAX);
        }
      if (mount->content != NULL)
        file_bytes += g_bytes_get_size (mount->content);
    }
  if (g_hash_table_size (volumes) > 0 &&
      spec->disks->len + (spec->image != NULL ? 1 : 0) + (mv_spec_overlay_bytes (spec) > 0 ? 1 : 0) +
      g_hash_table_size (volumes) > MV_BLOCK_DEVICES_MAX)
    return invalid (error, "mounts: %u volumes beside %u other disks, more than the %d a guest "
                    "can have", g_hash_table_size (volumes),
                    spec->disks->len + (spec->image != NULL ? 1 : 0) +
                    (mv_spec_overlay_bytes (spec) > 0 ? 1 : 0), MV_BLOCK_DEVICES_MAX);
  if (file_bytes > MV_FILE_MOUNT_MAX_BYTES)
    {
      g_autofree char *limit = mv_text_bytes (MV_FILE_MOUNT_MAX_BYTES);

      return invalid (error, "mounts: file contents total %" G_GUINT64_FORMAT " bytes, over the "
                      "limit of %s", file_bytes, limit);
    }
  return TRUE;
}

static gboolean
check_http_path (const char *path, GError **error)
{
  gsize len;

  if (path == NULL || path[0] != '/')
    return invalid (error, "health_check.http.path: must start with '/'");
  len = strlen (path);
  if (len > MV_HEALTH_HTTP_PATH_MAX_BYTES)
    return invalid (error, "health_check.http.path: %" G_GSIZE_FORMAT " bytes, more than the "
                    "limit of %d", len, MV_HEALTH_HTTP_PATH_MAX_BYTES);
  for (const char *p = path; *p != '\0'; p++)
    if ((guchar) *p <= 0x20 || (guchar) *p >= 0x7f)
      return invalid (error, "health_check.http.path: may hold only printable ASCII without "
                      "spaces (0x%02x at offset %" G_GSIZE_FORMAT ")", (guchar) *p,
                      (gsize) (p - path));
  return TRUE;
}

static gboolean
validate_health_check (const MvSpec *spec, GError **error)
{
  const MvHealthCheck *check = spec->health_check;

  if (check == NULL)
    return TRUE;
  switch (check->kind)
    {
    case MV_HEALTH_CHECK_EXEC:
      if (!check_argv ("health_check.exec", check->exec, MV_HEALTH_EXEC_MAX_ARGS, 0, error))
        return FALSE;
      break;
    case MV_HEALTH_CHECK_TCP:
      if (!mv_spec_check_range ("health_check.tcp", check->port, NULL, 1, MV_HEALTH_PORT_MAX,
                                FALSE, error))
        return FALSE;
      break;
    case MV_HEALTH_CHECK_HTTP:
      if (!mv_spec_check_range ("health_check.http.port", check->port, NULL, 1,
                                MV_HEALTH_PORT_MAX, FALSE, error) ||
          !check_http_path (check->http_path, error))
        return FALSE;
      break;
    default:
      return invalid (error, "health_check: unknown kind %d", (int) check->kind);
    }
  if (!mv_spec_check_range ("health_check.interval_seconds", check->interval_seconds, NULL, 1,
                            MV_HEALTH_INTERVAL_MAX_SECONDS, FALSE, error) ||
      !mv_spec_check_range ("health_check.retries", check->retries, NULL, 1,
                            MV_HEALTH_RETRIES_MAX, FALSE, error) ||
      !mv_spec_check_range ("health_check.start_period_seconds", check->start_period_seconds,
                            NULL, 0, MV_HEALTH_START_PERIOD_MAX_SECONDS, FALSE, error))
    return FALSE;
  if (check->timeout_seconds < 1)
    return invalid (error, "health_check.timeout_seconds: %u is below the minimum of 1",
                    check->timeout_seconds);
  if (check->timeout_seconds > check->interval_seconds)
    return invalid (error, "health_check.timeout_seconds: %u is more than interval_seconds %u",
                    check->timeout_seconds, check->interval_seconds);
  return TRUE;
}

/* The field limits keep most specs well below this, but not every field
 * at its limit at once (file contents, cmd and env can fill it): this
 * holds the document, and the record around it, to a size the readers
 * accept whatever the fields allow. */
static gboolean
validate_size (const MvSpec *spec, GError **error)
{
  gsize size = mv_spec_canonical_size (spec, 0);

  if (size > MV_SPEC_MAX_BYTES)
    {
      g_autofree char *limit = mv_text_bytes (MV_SPEC_MAX_BYTES);

      return invalid (error, "spec: %" G_GSIZE_FORMAT " bytes of JSON, more than the limit of %s",
                      size, limit);
    }
  return TRUE;
}

gboolean
mv_spec_validate (const MvSpec *spec, GError **error)
{
  return mv_spec_validate_with_standby_min (spec, MV_STANDBY_AFTER_MIN_SECONDS, error);
}

/* "0000:01:00.0": domain, bus, device (below 32) and function (below 8),
 * in lower-case hexadecimal, as sysfs names the device. */
static gboolean
pci_address_valid (const char *s)
{
  static const char form[] = "xxxx:xx:xx.x";
  guint device;

  if (strlen (s) != sizeof form - 1)
    return FALSE;
  for (guint i = 0; form[i]; i++)
    if (form[i] == 'x' ? !(g_ascii_isdigit (s[i]) || (s[i] >= 'a' && s[i] <= 'f'))
                       : s[i] != form[i])
      return FALSE;
  device = (guint) g_ascii_strtoull (s + 8, NULL, 16);
  return device < 32 && s[11] <= '7';
}

/* At most MV_PCI_DEVICES_MAX distinct PCI addresses; a GPU's profile a
 * sysfs name, its UUID in the form sysfs names it. */
static gboolean
validate_host_devices (const MvSpec *spec, GError **error)
{
  if (spec->pci_devices->len > MV_PCI_DEVICES_MAX)
    return invalid (error, "pci_devices: %u devices, more than the limit of %d",
                    spec->pci_devices->len, MV_PCI_DEVICES_MAX);
  for (guint i = 0; i < spec->pci_devices->len; i++)
    {
      const char *address = spec->pci_devices->pdata[i];
      g_autofree char *shown = mv_text_excerpt (address, -1, MV_EXCERPT_MAX_BYTES);

      if (!pci_address_valid (address))
        return invalid (error, "pci_devices[%u]: \"%s\" is not a PCI address "
                        "(domain:bus:device.function in lower-case hexadecimal, such as "
                        "0000:01:00.0)", i, shown);
      for (guint j = 0; j < i; j++)
        if (g_str_equal (address, spec->pci_devices->pdata[j]))
          return invalid (error, "pci_devices[%u]: %s is listed already (pci_devices[%u])", i,
                          address, j);
    }
  if (spec->gpu)
    {
      const char *profile = spec->gpu->profile;
      const char *uuid = spec->gpu->mediated_device_uuid;
      gsize length = strlen (profile);

      if (length == 0 || length > 64 || profile[0] == '.' ||
          strspn (profile, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
          != length)
        {
          g_autofree char *shown = mv_text_excerpt (profile, -1, MV_EXCERPT_MAX_BYTES);
          return invalid (error, "gpu.profile: \"%s\" is not a mediated device type's name "
                          "(1 to 64 letters, digits, '.', '_' or '-', such as nvidia-35)", shown);
        }
      if (!g_uuid_string_is_valid (uuid) || strspn (uuid, "0123456789abcdef-") != strlen (uuid))
        {
          g_autofree char *shown = mv_text_excerpt (uuid, -1, MV_EXCERPT_MAX_BYTES);
          return invalid (error, "gpu.mediated_device_uuid: \"%s\" is not a UUID in lower "
                          "case", shown);
        }
    }
  if (spec->standby_after_seconds != 0 && mv_spec_has_host_devices (spec))
    return invalid (error, "standby_after_seconds: a machine with passed-through devices "
                    "cannot be put on standby (0 turns standby off)");
  return TRUE;
}

/* Threads × cores × dies × packages is every vCPU the machine can have. */
static gboolean
validate_cpu_topology (const MvSpec *spec, GError **error)
{
  const MvCpuTopology *t = spec->cpu_topology;
  guint64 product;

  if (!t)
    return TRUE;
  {
    static const char *const names[] = { "threads_per_core", "cores_per_die",
                                         "dies_per_package", "packages" };
    const guint32 parts[] = { t->threads_per_core, t->cores_per_die, t->dies_per_package,
                              t->packages };

    for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
      if (parts[i] < 1 || parts[i] > MV_VCPUS_MAX)
        return invalid (error, "cpu_topology.%s: %u is outside 1–%d", names[i], parts[i],
                        MV_VCPUS_MAX);
  }
  product = (guint64) t->threads_per_core * t->cores_per_die * t->dies_per_package * t->packages;
  if (product != mv_spec_max_vcpus (spec))
    return invalid (error, "cpu_topology: %u threads per core × %u cores per die × %u dies per "
                    "package × %u packages is %" G_GUINT64_FORMAT " vCPUs, and the machine "
                    "has %u%s", t->threads_per_core, t->cores_per_die, t->dies_per_package,
                    t->packages, product, mv_spec_max_vcpus (spec),
                    spec->max_vcpus > mv_spec_vcpus (spec) ? " (max_vcpus)" : "");
  return TRUE;
}

gboolean
mv_spec_validate_with_standby_min (const MvSpec *spec, guint32 standby_min, GError **error)
{
  g_return_val_if_fail (spec != NULL, FALSE);

  if (spec->id != NULL && !mv_id_validate (spec->id, error))
    return FALSE;
  return mv_name_validate ("name", spec->name, error) &&
         validate_hypervisor (spec, error) &&
         validate_boot (spec, error) &&
         validate_resources (spec, error) &&
         validate_cpu_affinity (spec, error) &&
         validate_cpu_topology (spec, error) &&
         validate_host_devices (spec, error) &&
         validate_disks (spec, error) &&
         validate_image_and_disks (spec, error) &&
         validate_readiness (spec, error) &&
         validate_network (spec, error) &&
         validate_hostname (spec, error) &&
         validate_guest_metadata (spec, error) &&
         validate_labels (spec, error) &&
         validate_policies (spec, standby_min, error) &&
         validate_workload (spec, error) &&
         validate_mounts (spec, error) &&
         validate_health_check (spec, error) &&
         validate_size (spec, error);
}

gboolean
mv_spec_has_directory_mount (const MvSpec *spec)
{
  g_return_val_if_fail (spec != NULL, FALSE);

  for (guint i = 0; spec->mounts && i < spec->mounts->len; i++)
    if (((const MvMount *) g_ptr_array_index (spec->mounts, i))->type == MV_MOUNT_DIRECTORY)
      return TRUE;
  return FALSE;
}

gboolean
mv_spec_has_host_devices (const MvSpec *spec)
{
  return spec->pci_devices->len > 0 || spec->gpu != NULL;
}

gboolean
mv_spec_mounts_volumes (const MvSpec *spec)
{
  for (guint i = 0; i < spec->mounts->len; i++)
    if (((const MvMount *) spec->mounts->pdata[i])->type == MV_MOUNT_VOLUME)
      return TRUE;
  return FALSE;
}

gboolean
mv_spec_adds_host_devices (const MvSpec *current, const MvSpec *wanted)
{
  if (wanted->pci_devices->len < current->pci_devices->len ||
      (current->gpu && !mv_gpu_equal (current->gpu, wanted->gpu)))
    return FALSE;
  for (guint i = 0; i < current->pci_devices->len; i++)
    if (!g_str_equal (current->pci_devices->pdata[i], wanted->pci_devices->pdata[i]))
      return FALSE;
  return wanted->pci_devices->len > current->pci_devices->len || (!current->gpu && wanted->gpu);
}

const char *
mv_spec_unfreezable (const MvSpec *spec)
{
  if (mv_spec_has_directory_mount (spec))
    return "a machine with a directory mount cannot be frozen: virtiofsd's view of the shared "
           "directory is not part of the saved guest";
  if (mv_spec_has_host_devices (spec))
    return "a machine with passed-through devices (pci_devices, gpu) cannot be frozen: a "
           "device's own state is not the hypervisor's to save";
  return NULL;
}

char *
mv_spec_directory_tag (const MvSpec *spec, guint index)
{
  guint before = 0;

  g_return_val_if_fail (spec != NULL && index < spec->mounts->len, NULL);
  if (((const MvMount *) g_ptr_array_index (spec->mounts, index))->type != MV_MOUNT_DIRECTORY)
    return NULL;
  for (guint i = 0; i < index; i++)
    if (((const MvMount *) g_ptr_array_index (spec->mounts, i))->type == MV_MOUNT_DIRECTORY)
      before++;
  return g_strdup_printf (MV_DIRECTORY_TAG_PREFIX "%u", before);
}

