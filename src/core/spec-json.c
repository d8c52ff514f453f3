/* The spec as a JSON document: reading what clients send and config.json
 * keeps, and writing it back. Reading checks types, not limits. Pure. */
#include "spec.h"
#include "spec-private.h"
#include "json-strict.h"
#include "json-out.h"
#include "image-ref.h"
#include "net-rules.h"
#include "text.h"

#include <string.h>

#include "errors.h"

/* ---- reading ---- */

/* An integer that the spec's field of type up to @type_max holds. What
 * the type cannot hold is refused here with the field's own bounds,
 * which lie within it; the rest is for validation to judge. */
static gboolean
read_number (const MvJson *node, const char *field, gint64 type_max, gint64 *out, GError **error)
{
  g_autofree char *written = NULL;
  gint64 value;

  if (!mv_json_read_integer (node, field, &value, &written, error))
    return FALSE;
  if (value < 0 || value > type_max || written != NULL)
    {
      gboolean in_bounds = mv_spec_check_number (field, value, written, error);

      g_return_val_if_fail (!in_bounds, FALSE);
      return FALSE;
    }
  *out = value;
  return TRUE;
}

/* The same for a field whose bounds the caller gives (its name holds an
 * index, or its bounds depend on the field it sits in). */
static gboolean
read_ranged (const MvJson *node, const char *field, gint64 type_max, gint64 min, gint64 max,
             gint64 *out, GError **error)
{
  g_autofree char *written = NULL;
  gint64 value;

  if (!mv_json_read_integer (node, field, &value, &written, error))
    return FALSE;
  if (value < 0 || value > type_max || written != NULL)
    {
      gboolean in_bounds = mv_spec_check_range (field, value, written, min, max, FALSE, error);

      g_return_val_if_fail (!in_bounds, FALSE);
      return FALSE;
    }
  *out = value;
  return TRUE;
}

static gboolean
read_uint32_member (const MvJson *object, const char *name, guint32 *out, GError **error)
{
  const MvJson *node = mv_json_member (object, name);
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!read_number (node, name, G_MAXUINT32, &value, error))
    return FALSE;
  *out = (guint32) value;
  return TRUE;
}

static gboolean
read_uint64_member (const MvJson *object, const char *name, guint64 *out, GError **error)
{
  const MvJson *node = mv_json_member (object, name);
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!read_number (node, name, G_MAXINT64, &value, error))
    return FALSE;
  *out = (guint64) value;
  return TRUE;
}

static gboolean
read_string_map (const MvJson *node, const char *field, GHashTable *into, GError **error)
{
  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, field, "an object of strings", error);
  mv_json_each (member, node)
    {
      const char *s = NULL;

      if (member->kind != MV_JSON_STRING)
        {
          g_autofree char *where = g_strdup_printf ("%s.%s", field, member->name);

          return mv_json_read_string (member, where, &s, error);
        }
      g_hash_table_insert (into, g_strdup (member->name), g_strdup (member->string));
    }
  return TRUE;
}

static gboolean
parse_disks (const MvJson *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "path", "read_only", "root", NULL };

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "disks", "an array", error);
  mv_json_each (element, node)
    {
      guint i = element->index;
      g_autofree char *where = g_strdup_printf ("disks[%u]", i);
      g_autofree char *path_field = g_strdup_printf ("disks[%u].path", i);
      g_autofree char *ro_field = g_strdup_printf ("disks[%u].read_only", i);
      g_autofree char *root_field = g_strdup_printf ("disks[%u].root", i);
      const MvJson *field;
      const char *path = NULL;
      gboolean read_only = FALSE;
      gboolean root = FALSE;

      if (!mv_json_is_object (element))
        return mv_json_wrong_type (element, where, "an object", error);
      if (!mv_json_reject_unknown_members (element, where, known, error))
        return FALSE;
      if ((field = mv_json_member (element, "path")) != NULL &&
          !mv_json_read_string (field, path_field, &path, error))
        return FALSE;
      if ((field = mv_json_member (element, "read_only")) != NULL &&
          !mv_json_read_bool (field, ro_field, &read_only, error))
        return FALSE;
      if ((field = mv_json_member (element, "root")) != NULL &&
          !mv_json_read_bool (field, root_field, &root, error))
        return FALSE;
      g_ptr_array_add (spec->disks, mv_disk_new (path, read_only, root));
    }
  return TRUE;
}

/* [{"vcpu": N, "host_cpus": [..]}, ...]; numbers that no vCPU or host
 * CPU could be are refused here, the rest judged by validation. */
static gboolean
parse_cpu_affinity (const MvJson *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "vcpu", "host_cpus", NULL };

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "cpu_affinity", "an array of objects", error);
  mv_json_each (element, node)
    {
      guint i = element->index;
      g_autofree char *where = g_strdup_printf ("cpu_affinity[%u]", i);
      g_autofree char *vcpu_field = g_strconcat (where, ".vcpu", NULL);
      g_autofree char *cpus_field = g_strconcat (where, ".host_cpus", NULL);
      g_autoptr(MvCpuAffinity) affinity = NULL;
      const MvJson *field;
      const MvJson *cpus;
      gint64 value;

      if (!mv_json_is_object (element))
        return mv_json_wrong_type (element, where, "an object", error);
      if (!mv_json_reject_unknown_members (element, where, known, error))
        return FALSE;
      if ((field = mv_json_member (element, "vcpu")) == NULL)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: required (the vCPU's number, from 0)", vcpu_field);
          return FALSE;
        }
      if (!read_ranged (field, vcpu_field, G_MAXUINT32, 0, MV_VCPUS_MAX - 1, &value, error))
        return FALSE;
      affinity = mv_cpu_affinity_new ((guint32) value);
      if ((field = mv_json_member (element, "host_cpus")) == NULL)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: required (the host CPUs the vCPU may run on)", cpus_field);
          return FALSE;
        }
      if (!mv_json_is_array (field))
        return mv_json_wrong_type (field, cpus_field, "an array of integers", error);
      cpus = field;
      mv_json_each (host_cpu, cpus)
        {
          g_autofree char *cpu_field = g_strdup_printf ("%s[%u]", cpus_field, host_cpu->index);
          guint32 cpu;

          if (!read_ranged (host_cpu, cpu_field, G_MAXUINT32, 0,
                            MV_HOST_CPUS_MAX - 1, &value, error))
            return FALSE;
          cpu = (guint32) value;
          g_array_append_val (affinity->host_cpus, cpu);
        }
      g_ptr_array_add (spec->cpu_affinity, g_steal_pointer (&affinity));
    }
  return TRUE;
}

/* {"threads_per_core": T, "cores_per_die": C, "dies_per_package": D,
 * "packages": P}, each from 1; their product is judged by validation. */
static gboolean
parse_cpu_topology (const MvJson *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "threads_per_core", "cores_per_die", "dies_per_package",
                                       "packages", NULL };
  g_autofree MvCpuTopology *topology = g_new0 (MvCpuTopology, 1);
  guint32 *parts[] = { &topology->threads_per_core, &topology->cores_per_die,
                       &topology->dies_per_package, &topology->packages };

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, "cpu_topology", "an object", error);
  if (!mv_json_reject_unknown_members (node, "cpu_topology", known, error))
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    {
      g_autofree char *where = g_strconcat ("cpu_topology.", known[i], NULL);
      const MvJson *field = mv_json_member (node, known[i]);
      gint64 value;

      if (field == NULL)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: required (give all four "
                             "of threads_per_core, cores_per_die, dies_per_package and "
                             "packages)", where);
      if (!read_ranged (field, where, G_MAXUINT32, 1, MV_VCPUS_MAX, &value, error))
        return FALSE;
      *parts[i] = (guint32) value;
    }
  g_free (spec->cpu_topology);
  spec->cpu_topology = g_steal_pointer (&topology);
  return TRUE;
}

static gboolean
parse_readiness (const MvJson *node, MvSpec *spec, GError **error)
{
  const char *value = NULL;

  if (!mv_json_read_string (node, "readiness", &value, error))
    return FALSE;
  if (!mv_readiness_from_string (value, &spec->readiness, &spec->readiness_text))
    {
      g_autofree char *shown = mv_text_excerpt (value, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "readiness: \"%s\" is not one of auto, vmm, agent, console:TEXT", shown);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_ssh_keys (const MvJson *node, MvSpec *spec, GError **error)
{

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "ssh_keys", "an array of strings", error);
  mv_json_each (element, node)
    {
      g_autofree char *where = g_strdup_printf ("ssh_keys[%u]", element->index);
      const char *key = NULL;

      if (!mv_json_read_string (element, where, &key, error))
        return FALSE;
      g_ptr_array_add (spec->ssh_keys, g_strdup (key));
    }
  return TRUE;
}

static gboolean
parse_pci_devices (const MvJson *node, MvSpec *spec, GError **error)
{
  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "pci_devices", "an array of PCI addresses", error);
  mv_json_each (element, node)
    {
      g_autofree char *where = g_strdup_printf ("pci_devices[%u]", element->index);
      const char *address = NULL;

      if (!mv_json_read_string (element, where, &address, error))
        return FALSE;
      g_ptr_array_add (spec->pci_devices, g_strdup (address));
    }
  return TRUE;
}

/* {"profile": ..., "mediated_device_uuid": ...}, both required. */
static gboolean
parse_gpu (const MvJson *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "profile", "mediated_device_uuid", NULL };
  const char *values[2] = { NULL, NULL };

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, "gpu", "an object", error);
  if (!mv_json_reject_unknown_members (node, "gpu", known, error))
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (values); i++)
    {
      g_autofree char *where = g_strconcat ("gpu.", known[i], NULL);
      const MvJson *field = mv_json_member (node, known[i]);

      if (field == NULL)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: required", where);
      if (!mv_json_read_string (field, where, &values[i], error))
        return FALSE;
    }
  mv_gpu_free (spec->gpu);
  spec->gpu = mv_gpu_new (values[0], values[1]);
  return TRUE;
}

static gboolean
parse_firewall (const MvJson *node, MvSpec *spec, GError **error)
{

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "firewall", "an array of objects", error);
  mv_json_each (rule, node)
    {
      guint i = rule->index;

      if (!mv_json_is_object (rule))
        {
          g_autofree char *where = g_strdup_printf ("firewall[%u]", i);
          return mv_json_wrong_type (rule, where, "an object", error);
        }
    }
  /* Most specs have none, and keep the empty array they were made with. */
  if (node->count > 0)
    {
      g_autoptr(JsonNode) copy = mv_json_to_node (node);

      json_array_unref (spec->firewall);
      spec->firewall = json_array_ref (json_node_get_array (copy));
    }
  return TRUE;
}

static gboolean
parse_ports (const MvJson *node, MvSpec *spec, GError **error)
{

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "ports", "an array of objects", error);
  mv_json_each (element, node)
    {
      g_autofree char *where = g_strdup_printf ("ports[%u]", element->index);
      MvPortMapping *port = mv_port_mapping_from_json (element, where,
                                                       error);

      if (port == NULL)
        return FALSE;
      g_ptr_array_add (spec->ports, port);
    }
  return TRUE;
}

static gboolean
parse_restart (const MvJson *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "mode", "max_retries", NULL };
  const MvJson *field;

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, "restart", "an object", error);
  if (!mv_json_reject_unknown_members (node, "restart", known, error))
    return FALSE;
  if ((field = mv_json_member (node, "mode")) != NULL)
    {
      const char *mode = NULL;

      if (!mv_json_read_string (field, "restart.mode", &mode, error))
        return FALSE;
      if (!mv_restart_mode_from_string (mode, &spec->restart_mode))
        {
          g_autofree char *shown = mv_text_excerpt (mode, -1, MV_EXCERPT_MAX_BYTES);

          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "restart.mode: \"%s\" is not one of no, on-failure, unless-stopped, always",
                       shown);
          return FALSE;
        }
    }
  if ((field = mv_json_member (node, "max_retries")) != NULL)
    {
      gint64 value;

      if (!read_number (field, "restart.max_retries", G_MAXUINT32, &value, error))
        return FALSE;
      spec->restart_max_retries = (guint32) value;
    }
  return TRUE;
}

/* standby_after_seconds also goes by sleep_after_idle_seconds; giving
 * both is fine as long as they agree. */
static gboolean
parse_standby (const MvJson *object, MvSpec *spec, GError **error)
{
  const MvJson *canonical = mv_json_member (object, "standby_after_seconds");
  const MvJson *alias = mv_json_member (object, "sleep_after_idle_seconds");
  gint64 a = 0, b = 0;

  if (canonical != NULL &&
      !read_number (canonical, "standby_after_seconds", G_MAXUINT32, &a, error))
    return FALSE;
  if (alias != NULL &&
      !read_number (alias, "sleep_after_idle_seconds", G_MAXUINT32, &b, error))
    return FALSE;
  if (canonical != NULL && alias != NULL && a != b)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "standby_after_seconds: %" G_GINT64_FORMAT " differs from "
                   "sleep_after_idle_seconds %" G_GINT64_FORMAT " (the same field)",
                   a, b);
      return FALSE;
    }
  if (canonical != NULL || alias != NULL)
    spec->standby_after_seconds = (guint32) (canonical != NULL ? a : b);
  return TRUE;
}

/* ---- the workload ---- */

/* An array of strings, as a NULL-terminated vector; [] is an empty one,
 * for validation to judge. */
static gboolean
read_string_vector (const MvJson *node, const char *field, char ***out, GError **error)
{
  g_autoptr(GPtrArray) strings = g_ptr_array_new_with_free_func (g_free);

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, field, "an array of strings", error);
  mv_json_each (element, node)
    {
      g_autofree char *where = g_strdup_printf ("%s[%u]", field, element->index);
      const char *s = NULL;

      if (!mv_json_read_string (element, where, &s, error))
        return FALSE;
      g_ptr_array_add (strings, g_strdup (s));
    }
  g_ptr_array_add (strings, NULL);
  g_strfreev (*out);
  *out = (char **) g_ptr_array_free (g_steal_pointer (&strings), FALSE);
  return TRUE;
}

static gboolean
parse_init_mode (const MvJson *node, MvSpec *spec, GError **error)
{
  const char *value = NULL;

  if (!mv_json_read_string (node, "init_mode", &value, error))
    return FALSE;
  if (!mv_init_mode_from_string (value, &spec->init_mode))
    {
      g_autofree char *shown = mv_text_excerpt (value, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "init_mode: \"%s\" is not one of auto, exec, systemd", shown);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_start_mode (const MvJson *node, MvSpec *spec, GError **error)
{
  const char *value = NULL;

  if (!mv_json_read_string (node, "start_mode", &value, error))
    return FALSE;
  if (!mv_start_mode_from_string (value, &spec->start_mode))
    {
      g_autofree char *shown = mv_text_excerpt (value, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "start_mode: \"%s\" is not one of auto, cold, warm", shown);
      return FALSE;
    }
  return TRUE;
}

static int
base64_value (char c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

/* Base64 as RFC 4648 writes it: the standard alphabet, padded, with the
 * bits past the data zero, so that content has one spelling (GLib's
 * decoder skips what it does not know instead). */
static GBytes *
decode_base64 (const char *text, const char *field, GError **error)
{
  gsize len = strlen (text);
  gsize padding = 0;
  gsize out_len = 0;
  g_autofree guchar *out = NULL;

  if (len % 4 != 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: not base64 (%" G_GSIZE_FORMAT " characters, not a multiple of 4; "
                   "padding with '=' is required)", field, len);
      return NULL;
    }
  if (len > 0 && text[len - 1] == '=')
    padding = text[len - 2] == '=' ? 2 : 1;
  for (gsize i = 0; i < len - padding; i++)
    if (base64_value (text[i]) < 0)
      {
        g_autofree char *shown = mv_text_excerpt (text + i, 1, MV_EXCERPT_MAX_BYTES);

        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                     "%s: not base64 (\"%s\" at offset %" G_GSIZE_FORMAT " is not in the "
                     "standard alphabet)", field, shown, i);
        return NULL;
      }
  if (padding > 0)
    {
      int last = base64_value (text[len - padding - 1]);
      int unused = padding == 1 ? 0x03 : 0x0f;

      if ((last & unused) != 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: not base64 (the bits after the last byte are not zero)", field);
          return NULL;
        }
    }
  if (len == 0)
    return g_bytes_new (NULL, 0);
  out = g_base64_decode (text, &out_len);
  return g_bytes_new_take (g_steal_pointer (&out), out_len);
}

/* A JSON integer, or a string of one to four octal digits ("0644"). */
static gboolean
parse_mode (const MvJson *node, const char *field, guint32 *out, GError **error)
{
  if (node->kind == MV_JSON_STRING)
    {
      const char *text = node->string;
      gsize len = strlen (text);

      if (len < 1 || len > 4 || strspn (text, "01234567") != len)
        {
          g_autofree char *shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);

          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: \"%s\" is not a mode (1 to 4 octal digits, as \"0644\")",
                       field, shown);
          return FALSE;
        }
      *out = (guint32) g_ascii_strtoull (text, NULL, 8);
      return TRUE;
    }
  if (node->kind == MV_JSON_INTEGER || node->kind == MV_JSON_REAL)
    {
      g_autofree char *written = NULL;
      gint64 value;

      if (!mv_json_read_integer (node, field, &value, &written, error))
        return FALSE;
      if (written != NULL || value < 0 || value > MV_MOUNT_MODE_MAX)
        {
          g_autofree char *shown = written != NULL ? g_strdup (written)
                                                   : g_strdup_printf ("%" G_GINT64_FORMAT, value);

          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: %s is not a mode (0 to 07777, which is %d)",
                       field, shown, MV_MOUNT_MODE_MAX);
          return FALSE;
        }
      *out = (guint32) value;
      return TRUE;
    }
  return mv_json_wrong_type (node, field, "an integer or a string of octal digits", error);
}

static gboolean
parse_mount (const MvJson *node, guint index, MvSpec *spec, GError **error)
{
  static const char *const known[] = {
    "type", "source", "target", "read_only", "content", "mode", "size_bytes", NULL
  };
  /* Messages name each member with the mount's index. */
  g_autofree char *where = g_strdup_printf ("mounts[%u]", index);
  g_autofree char *type_field = g_strconcat (where, ".type", NULL);
  g_autofree char *source_field = g_strconcat (where, ".source", NULL);
  g_autofree char *target_field = g_strconcat (where, ".target", NULL);
  g_autofree char *ro_field = g_strconcat (where, ".read_only", NULL);
  g_autofree char *content_field = g_strconcat (where, ".content", NULL);
  g_autofree char *mode_field = g_strconcat (where, ".mode", NULL);
  g_autofree char *size_field = g_strconcat (where, ".size_bytes", NULL);
  g_autoptr(MvMount) mount = NULL;
  const MvJson *field;
  const char *text = NULL;
  MvMountType type;

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, where, "an object", error);
  if (!mv_json_reject_unknown_members (node, where, known, error))
    return FALSE;

  if ((field = mv_json_member (node, "type")) == NULL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: required (file, tmpfs, volume or directory)", type_field);
      return FALSE;
    }
  if (!mv_json_read_string (field, type_field, &text, error))
    return FALSE;
  if (!mv_mount_type_from_string (text, &type))
    {
      g_autofree char *shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: \"%s\" is not one of file, tmpfs, volume, directory", type_field, shown);
      return FALSE;
    }
  /* The type first: the default mode is the type's. */
  mount = mv_mount_new (type);

  if ((field = mv_json_member (node, "source")) != NULL)
    {
      if (!mv_json_read_string (field, source_field, &text, error))
        return FALSE;
      if (*text != '\0')
        mount->source = g_strdup (text);
    }
  if ((field = mv_json_member (node, "target")) != NULL)
    {
      if (!mv_json_read_string (field, target_field, &text, error))
        return FALSE;
      mount->target = g_strdup (text);
    }
  if ((field = mv_json_member (node, "read_only")) != NULL &&
      !mv_json_read_bool (field, ro_field, &mount->read_only, error))
    return FALSE;
  if ((field = mv_json_member (node, "content")) != NULL)
    {
      if (!mv_json_read_string (field, content_field, &text, error) ||
          !(mount->content = decode_base64 (text, content_field, error)))
        return FALSE;
    }
  else if (type == MV_MOUNT_FILE)
    mount->content = g_bytes_new (NULL, 0);   /* an empty file */
  if ((field = mv_json_member (node, "mode")) != NULL &&
      !parse_mode (field, mode_field, &mount->mode, error))
    return FALSE;
  if ((field = mv_json_member (node, "size_bytes")) != NULL)
    {
      gint64 size;

      if (!read_ranged (field, size_field, G_MAXINT64, 0, MV_MEMORY_MAX_BYTES, &size, error))
        return FALSE;
      mount->size_bytes = (guint64) size;
    }
  g_ptr_array_add (spec->mounts, g_steal_pointer (&mount));
  return TRUE;
}

static gboolean
parse_mounts (const MvJson *node, MvSpec *spec, GError **error)
{

  if (!mv_json_is_array (node))
    return mv_json_wrong_type (node, "mounts", "an array", error);
  mv_json_each (element, node)
    if (!parse_mount (element, element->index, spec, error))
      return FALSE;
  return TRUE;
}

static gboolean
read_port (const MvJson *node, const char *field, guint32 *out, GError **error)
{
  gint64 port;

  if (!read_ranged (node, field, G_MAXUINT32, 1, MV_HEALTH_PORT_MAX, &port, error))
    return FALSE;
  *out = (guint32) port;
  return TRUE;
}

static gboolean
parse_health_http (const MvJson *node, MvHealthCheck *check, GError **error)
{
  static const char *const known[] = { "port", "path", NULL };
  const MvJson *field;

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, "health_check.http", "an object", error);
  if (!mv_json_reject_unknown_members (node, "health_check.http", known, error))
    return FALSE;
  if ((field = mv_json_member (node, "port")) == NULL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "health_check.http.port: required");
      return FALSE;
    }
  if (!read_port (field, "health_check.http.port", &check->port, error))
    return FALSE;
  if ((field = mv_json_member (node, "path")) != NULL)
    {
      const char *path = NULL;

      if (!mv_json_read_string (field, "health_check.http.path", &path, error))
        return FALSE;
      g_free (check->http_path);
      check->http_path = g_strdup (path);
    }
  return TRUE;
}

/* The times and retries, each read as a guint32 and judged by validation. */
static gboolean
read_health_number (const MvJson *object, const char *name, gint64 min, gint64 max,
                    guint32 *out, GError **error)
{
  const MvJson *node = mv_json_member (object, name);
  g_autofree char *field = g_strconcat ("health_check.", name, NULL);
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!read_ranged (node, field, G_MAXUINT32, min, max, &value, error))
    return FALSE;
  *out = (guint32) value;
  return TRUE;
}

static gboolean
parse_health_check (const MvJson *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = {
    "exec", "tcp", "http", "interval_seconds", "timeout_seconds", "retries",
    "start_period_seconds", "disabled", NULL
  };
  static const char *const kinds[] = { "exec", "tcp", "http" };
  g_autoptr(MvHealthCheck) check = NULL;
  const char *kind = NULL;
  const MvJson *field;

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, "health_check", "an object", error);
  if (!mv_json_reject_unknown_members (node, "health_check", known, error))
    return FALSE;

  for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      if (mv_json_member (node, kinds[i]) == NULL)
        continue;
      if (kind != NULL)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "health_check: both %s and %s are given; a check is one of exec, tcp, http",
                       kind, kinds[i]);
          return FALSE;
        }
      kind = kinds[i];
      check = mv_health_check_new ((MvHealthCheckKind) i);
    }
  if (check == NULL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "health_check: one of exec, tcp, http is required");
      return FALSE;
    }

  switch (check->kind)
    {
    case MV_HEALTH_CHECK_EXEC:
      if (!read_string_vector (mv_json_member (node, "exec"), "health_check.exec", &check->exec,
                               error))
        return FALSE;
      break;
    case MV_HEALTH_CHECK_TCP:
      if (!read_port (mv_json_member (node, "tcp"), "health_check.tcp", &check->port, error))
        return FALSE;
      break;
    case MV_HEALTH_CHECK_HTTP:
      check->http_path = g_strdup ("/");
      if (!parse_health_http (mv_json_member (node, "http"), check, error))
        return FALSE;
      break;
    }

  if (!read_health_number (node, "interval_seconds", 1, MV_HEALTH_INTERVAL_MAX_SECONDS,
                           &check->interval_seconds, error) ||
      !read_health_number (node, "timeout_seconds", 1, MV_HEALTH_INTERVAL_MAX_SECONDS,
                           &check->timeout_seconds, error) ||
      !read_health_number (node, "retries", 1, MV_HEALTH_RETRIES_MAX, &check->retries, error) ||
      !read_health_number (node, "start_period_seconds", 0, MV_HEALTH_START_PERIOD_MAX_SECONDS,
                           &check->start_period_seconds, error))
    return FALSE;
  if ((field = mv_json_member (node, "disabled")) != NULL &&
      !mv_json_read_bool (field, "health_check.disabled", &check->disabled, error))
    return FALSE;

  g_clear_pointer (&spec->health_check, mv_health_check_free);
  spec->health_check = g_steal_pointer (&check);
  return TRUE;
}

static const char *const spec_fields[] = {
  "id", "name", "hypervisor_type", "hypervisor_version", "kernel", "initrd",
  "kernel_args", "cpu_millicores", "max_vcpus", "cpu_affinity", "cpu_topology", "pci_devices", "gpu", "memory_bytes",
  "max_memory_bytes", "disks", "readiness", "network_name", "static_ip",
  "hostname", "ssh_keys", "user_data", "metadata", "firewall", "ports", "restart",
  "standby_after_seconds", "sleep_after_idle_seconds", "labels",
  "remove_on_exit", "cmd", "env", "user", "working_dir", "init_mode", "start_mode", "mounts",
  "health_check", "image", "image_digest", "kernel_name", "disk_bytes",
  "disk_bytes_per_second", "disk_iops", "upload_bytes_per_second",
  "download_bytes_per_second", NULL
};

MvSpec *
mv_spec_from_node (const MvJson *node, GError **error)
{
  g_autoptr(MvSpec) spec = mv_spec_new ();
  const MvJson *field;

  g_return_val_if_fail (node != NULL, NULL);

  if (!mv_json_is_object (node))
    {
      mv_json_wrong_type (node, "spec", "an object", error);
      return NULL;
    }
  if (!mv_json_reject_unknown_members (node, NULL, spec_fields, error))
    return NULL;

  /* Empty strings of optional fields mean "the default", as absent ones
   * do; keeping one spelling makes equal specs compare equal. */
  if (!mv_json_read_string_member (node, "id", TRUE, &spec->id, error) ||
      !mv_json_read_string_member (node, "name", FALSE, &spec->name, error) ||
      !mv_json_read_string_member (node, "hypervisor_type", TRUE, &spec->hypervisor_type,
                                   error) ||
      !mv_json_read_string_member (node, "hypervisor_version", TRUE,
                                   &spec->hypervisor_version, error) ||
      !mv_json_read_string_member (node, "kernel", FALSE, &spec->kernel, error) ||
      !mv_json_read_string_member (node, "initrd", TRUE, &spec->initrd, error) ||
      !mv_json_read_string_member (node, "kernel_args", TRUE, &spec->kernel_args, error) ||
      !read_uint32_member (node, "cpu_millicores", &spec->cpu_millicores, error) ||
      !read_uint32_member (node, "max_vcpus", &spec->max_vcpus, error) ||
      !read_uint64_member (node, "memory_bytes", &spec->memory_bytes, error) ||
      !read_uint64_member (node, "max_memory_bytes", &spec->max_memory_bytes, error))
    return NULL;

  /* "auto" is the documented name of the default type. */
  if (g_strcmp0 (spec->hypervisor_type, "auto") == 0)
    g_clear_pointer (&spec->hypervisor_type, g_free);

  if ((field = mv_json_member (node, "cpu_affinity")) != NULL &&
      !parse_cpu_affinity (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "cpu_topology")) != NULL &&
      !parse_cpu_topology (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "pci_devices")) != NULL &&
      !parse_pci_devices (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "gpu")) != NULL && !parse_gpu (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "disks")) != NULL && !parse_disks (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "readiness")) != NULL &&
      !parse_readiness (field, spec, error))
    return NULL;

  if (!mv_json_read_string_member (node, "network_name", TRUE, &spec->network_name, error) ||
      !mv_json_read_string_member (node, "static_ip", TRUE, &spec->static_ip, error) ||
      !mv_json_read_string_member (node, "hostname", TRUE, &spec->hostname, error))
    return NULL;

  if ((field = mv_json_member (node, "ssh_keys")) != NULL && !parse_ssh_keys (field, spec, error))
    return NULL;
  if (!mv_json_read_string_member (node, "user_data", TRUE, &spec->user_data, error))
    return NULL;
  if ((field = mv_json_member (node, "metadata")) != NULL &&
      !read_string_map (field, "metadata", spec->metadata, error))
    return NULL;
  if ((field = mv_json_member (node, "firewall")) != NULL && !parse_firewall (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "ports")) != NULL && !parse_ports (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "restart")) != NULL && !parse_restart (field, spec, error))
    return NULL;
  if (!parse_standby (node, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "labels")) != NULL &&
      !read_string_map (field, "labels", spec->labels, error))
    return NULL;
  if ((field = mv_json_member (node, "remove_on_exit")) != NULL &&
      !mv_json_read_bool (field, "remove_on_exit", &spec->remove_on_exit, error))
    return NULL;

  if ((field = mv_json_member (node, "cmd")) != NULL &&
      !read_string_vector (field, "cmd", &spec->cmd, error))
    return NULL;
  if ((field = mv_json_member (node, "env")) != NULL &&
      !read_string_map (field, "env", spec->env, error))
    return NULL;
  if (!mv_json_read_string_member (node, "user", TRUE, &spec->user, error) ||
      !mv_json_read_string_member (node, "working_dir", TRUE, &spec->working_dir, error))
    return NULL;
  if ((field = mv_json_member (node, "init_mode")) != NULL &&
      !parse_init_mode (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "start_mode")) != NULL &&
      !parse_start_mode (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "mounts")) != NULL && !parse_mounts (field, spec, error))
    return NULL;
  if ((field = mv_json_member (node, "health_check")) != NULL &&
      !parse_health_check (field, spec, error))
    return NULL;

  if (!mv_json_read_string_member (node, "image", TRUE, &spec->image, error) ||
      !mv_json_read_string_member (node, "image_digest", TRUE, &spec->image_digest, error) ||
      !mv_json_read_string_member (node, "kernel_name", TRUE, &spec->kernel_name, error) ||
      !read_uint64_member (node, "disk_bytes", &spec->disk_bytes, error) ||
      !read_uint64_member (node, "disk_bytes_per_second", &spec->disk_bytes_per_second, error) ||
      !read_uint64_member (node, "disk_iops", &spec->disk_iops, error) ||
      !read_uint64_member (node, "upload_bytes_per_second", &spec->upload_bytes_per_second,
                           error) ||
      !read_uint64_member (node, "download_bytes_per_second",
                           &spec->download_bytes_per_second, error))
    return NULL;

  return g_steal_pointer (&spec);
}

static const MvJsonLimits spec_limits = {
  .max_bytes = MV_SPEC_MAX_BYTES,
  .max_depth = MV_SPEC_MAX_DEPTH,
};

MvSpec *
mv_spec_from_json (const char *json, GError **error)
{
  g_autoptr(MvJsonDoc) doc = NULL;

  g_return_val_if_fail (json != NULL, NULL);

  doc = mv_json_read (json, -1, &spec_limits, "spec", error);
  if (doc == NULL)
    return NULL;
  return mv_spec_from_node (mv_json_doc_root (doc), error);
}

gboolean
mv_spec_json_check_size (const char *json, GError **error)
{
  g_return_val_if_fail (json != NULL, FALSE);

  if (strnlen (json, MV_SPEC_MAX_BYTES + 1) <= MV_SPEC_MAX_BYTES)
    return TRUE;
  /* Refused on its size alone, with the reader's own message. */
  return mv_json_check (json, -1, &spec_limits, "spec", error);
}

char *
mv_spec_json_peek_name (const char *json)
{
  g_autoptr (MvJsonDoc) doc = mv_json_read (json, -1, &spec_limits, "spec", NULL);
  const MvJson *root = doc ? mv_json_doc_root (doc) : NULL;
  const MvJson *name = root && mv_json_is_object (root) ? mv_json_member (root, "name") : NULL;
  const char *text = name && name->kind == MV_JSON_STRING ? name->string : NULL;

  return text && mv_name_validate ("name", text, NULL) ? g_strdup (text) : NULL;
}

/* ---- writing ---- */

/* Signed image URLs carry a fresh signature in their query each time;
 * the location is what identifies the image. */
static char *
strip_url_query (const char *location)
{
  if (location == NULL || strstr (location, "://") == NULL)
    return g_strdup (location);
  return mv_url_strip_query (location);
}

static void
put_mount (MvJsonOut *out, const MvMount *mount)
{
  char mode[8];

  mv_json_out_begin_object (out);
  mv_json_out_string_member (out, "type", mv_mount_type_to_string (mount->type));
  mv_json_out_optional_string (out, "source", mount->source);
  mv_json_out_optional_string (out, "target", mount->target);
  mv_json_out_boolean_member (out, "read_only", mount->read_only);
  if (mount->type == MV_MOUNT_FILE || mount->content != NULL)
    {
      gsize len = 0;
      const guchar *data = mount->content != NULL ? g_bytes_get_data (mount->content, &len)
                                                  : NULL;
      g_autofree char *content = len > 0 ? g_base64_encode (data, len) : g_strdup ("");

      mv_json_out_string_member (out, "content", content);
    }
  /* Modes read as octal, so they are written as octal. */
  if (mount->type == MV_MOUNT_FILE || mount->type == MV_MOUNT_TMPFS || mount->mode != 0)
    {
      g_snprintf (mode, sizeof mode, "%04o", (guint) mount->mode);
      mv_json_out_string_member (out, "mode", mode);
    }
  if (mount->size_bytes != 0)
    mv_json_out_int_member (out, "size_bytes", (gint64) mount->size_bytes);
  mv_json_out_end_object (out);
}

static void
put_health_check (MvJsonOut *out, const MvHealthCheck *check)
{
  mv_json_out_begin_object (out);
  switch (check->kind)
    {
    case MV_HEALTH_CHECK_EXEC:
      mv_json_out_name (out, "exec");
      mv_json_out_strv (out, check->exec);
      break;
    case MV_HEALTH_CHECK_TCP:
      mv_json_out_int_member (out, "tcp", check->port);
      break;
    case MV_HEALTH_CHECK_HTTP:
      mv_json_out_name (out, "http");
      mv_json_out_begin_object (out);
      mv_json_out_int_member (out, "port", check->port);
      mv_json_out_optional_string (out, "path", check->http_path);
      mv_json_out_end_object (out);
      break;
    }
  mv_json_out_int_member (out, "interval_seconds", check->interval_seconds);
  mv_json_out_int_member (out, "timeout_seconds", check->timeout_seconds);
  mv_json_out_int_member (out, "retries", check->retries);
  mv_json_out_int_member (out, "start_period_seconds", check->start_period_seconds);
  mv_json_out_boolean_member (out, "disabled", check->disabled);
  mv_json_out_end_object (out);
}

/* Only what is set, so that the document and fingerprint of a spec
 * without a workload are what they were before these fields existed.
 * File contents are like configuration files, not secrets: kept either
 * way. */
static void
put_workload (MvJsonOut *out, const MvSpec *spec)
{
  if (spec->cmd != NULL)
    {
      mv_json_out_name (out, "cmd");
      mv_json_out_strv (out, spec->cmd);
    }
  if (g_hash_table_size (spec->env) > 0)
    {
      mv_json_out_name (out, "env");
      mv_json_out_string_map (out, spec->env, NULL);
    }
  mv_json_out_optional_string (out, "user", spec->user);
  mv_json_out_optional_string (out, "working_dir", spec->working_dir);
  if (spec->init_mode != MV_INIT_MODE_AUTO)
    mv_json_out_string_member (out, "init_mode", mv_init_mode_to_string (spec->init_mode));
  if (spec->start_mode != MV_START_MODE_AUTO)
    mv_json_out_string_member (out, "start_mode", mv_start_mode_to_string (spec->start_mode));
  if (spec->mounts->len > 0)
    {
      mv_json_out_name (out, "mounts");
      mv_json_out_begin_array (out);
      for (guint i = 0; i < spec->mounts->len; i++)
        put_mount (out, g_ptr_array_index (spec->mounts, i));
      mv_json_out_end_array (out);
    }
  if (spec->health_check != NULL)
    {
      mv_json_out_name (out, "health_check");
      put_health_check (out, spec->health_check);
    }
}

/* A location as written, or without its query string when @strip. */
static void
put_location (MvJsonOut *out, const char *name, const char *location, gboolean strip)
{
  g_autofree char *stripped = strip ? strip_url_query (location) : NULL;

  mv_json_out_optional_string (out, name, strip ? stripped : location);
}

/* Only what is set, as the workload is. A signed URL's query string is
 * left out of the fingerprint (a retry with a fresh signature is the same
 * create, seed 000) and out of a spec shown without its secrets (its
 * token is one). */
static void
put_image_and_disks (MvJsonOut *out, const MvSpec *spec, gboolean strip)
{
  put_location (out, "image", spec->image, strip);
  mv_json_out_optional_string (out, "image_digest", spec->image_digest);
  mv_json_out_optional_string (out, "kernel_name", spec->kernel_name);
  if (spec->disk_bytes > 0)
    mv_json_out_int_member (out, "disk_bytes", (gint64) spec->disk_bytes);
  if (spec->disk_bytes_per_second > 0)
    mv_json_out_int_member (out, "disk_bytes_per_second", (gint64) spec->disk_bytes_per_second);
  if (spec->disk_iops > 0)
    mv_json_out_int_member (out, "disk_iops", (gint64) spec->disk_iops);
  if (spec->upload_bytes_per_second > 0)
    mv_json_out_int_member (out, "upload_bytes_per_second",
                            (gint64) spec->upload_bytes_per_second);
  if (spec->download_bytes_per_second > 0)
    mv_json_out_int_member (out, "download_bytes_per_second",
                            (gint64) spec->download_bytes_per_second);
}

static void
put_cpu_affinity (MvJsonOut *out, const MvSpec *spec)
{
  mv_json_out_begin_array (out);
  for (guint i = 0; i < spec->cpu_affinity->len; i++)
    {
      const MvCpuAffinity *affinity = g_ptr_array_index (spec->cpu_affinity, i);

      mv_json_out_begin_object (out);
      mv_json_out_int_member (out, "vcpu", affinity->vcpu);
      mv_json_out_name (out, "host_cpus");
      mv_json_out_begin_array (out);
      for (guint j = 0; j < affinity->host_cpus->len; j++)
        mv_json_out_int (out, g_array_index (affinity->host_cpus, guint32, j));
      mv_json_out_end_array (out);
      mv_json_out_end_object (out);
    }
  mv_json_out_end_array (out);
}

static void
put_spec (MvJsonOut *out, const MvSpec *spec, gboolean with_secrets, MvSpecCanonFlags flags)
{
  gboolean strip = (flags & MV_SPEC_CANON_STRIP_QUERY) != 0;
  g_autofree char *readiness = mv_readiness_to_string (spec->readiness, spec->readiness_text);

  mv_json_out_begin_object (out);
  if (!(flags & MV_SPEC_CANON_NO_ID_LABELS))
    mv_json_out_optional_string (out, "id", spec->id);
  mv_json_out_optional_string (out, "name", spec->name);
  mv_json_out_optional_string (out, "hypervisor_type", spec->hypervisor_type);
  mv_json_out_optional_string (out, "hypervisor_version", spec->hypervisor_version);
  put_location (out, "kernel", spec->kernel, strip);
  put_location (out, "initrd", spec->initrd, strip);
  mv_json_out_optional_string (out, "kernel_args", spec->kernel_args);
  mv_json_out_int_member (out, "cpu_millicores", spec->cpu_millicores);
  mv_json_out_int_member (out, "max_vcpus", spec->max_vcpus);
  /* Only when set, so that a spec without it keeps its fingerprint. */
  if (spec->cpu_affinity->len > 0)
    {
      mv_json_out_name (out, "cpu_affinity");
      put_cpu_affinity (out, spec);
    }
  if (spec->cpu_topology)
    {
      mv_json_out_name (out, "cpu_topology");
      mv_json_out_begin_object (out);
      mv_json_out_int_member (out, "threads_per_core", spec->cpu_topology->threads_per_core);
      mv_json_out_int_member (out, "cores_per_die", spec->cpu_topology->cores_per_die);
      mv_json_out_int_member (out, "dies_per_package", spec->cpu_topology->dies_per_package);
      mv_json_out_int_member (out, "packages", spec->cpu_topology->packages);
      mv_json_out_end_object (out);
    }
  if (spec->pci_devices->len > 0)
    {
      mv_json_out_name (out, "pci_devices");
      mv_json_out_string_array (out, spec->pci_devices, NULL);
    }
  if (spec->gpu)
    {
      mv_json_out_name (out, "gpu");
      mv_json_out_begin_object (out);
      mv_json_out_string_member (out, "profile", spec->gpu->profile);
      mv_json_out_string_member (out, "mediated_device_uuid", spec->gpu->mediated_device_uuid);
      mv_json_out_end_object (out);
    }
  mv_json_out_int_member (out, "memory_bytes", (gint64) spec->memory_bytes);
  mv_json_out_int_member (out, "max_memory_bytes", (gint64) spec->max_memory_bytes);

  mv_json_out_name (out, "disks");
  mv_json_out_begin_array (out);
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);

      mv_json_out_begin_object (out);
      put_location (out, "path", disk->path, strip);
      mv_json_out_boolean_member (out, "read_only", disk->read_only);
      if (disk->root)
        mv_json_out_boolean_member (out, "root", TRUE);
      mv_json_out_end_object (out);
    }
  mv_json_out_end_array (out);

  mv_json_out_string_member (out, "readiness", readiness);

  mv_json_out_optional_string (out, "network_name", spec->network_name);
  mv_json_out_optional_string (out, "static_ip", spec->static_ip);
  if (!(flags & MV_SPEC_CANON_NO_GUEST_METADATA))
    {
      mv_json_out_optional_string (out, "hostname", spec->hostname);
      /* Without its secrets, each stands as MV_SPEC_REDACTED, which Update
       * refuses: a shown spec sent back cannot wipe them. */
      if (with_secrets || spec->ssh_keys->len > 0)
        {
          mv_json_out_name (out, "ssh_keys");
          mv_json_out_string_array (out, spec->ssh_keys, with_secrets ? NULL : MV_SPEC_REDACTED);
        }
      if (spec->user_data)
        mv_json_out_string_member (out, "user_data",
                                   with_secrets ? spec->user_data : MV_SPEC_REDACTED);
      mv_json_out_name (out, "metadata");
      mv_json_out_string_map (out, spec->metadata, with_secrets ? NULL : MV_SPEC_REDACTED);
    }
  mv_json_out_name (out, "firewall");
  mv_json_out_array (out, spec->firewall);
  /* Only when set, so that a spec without ports keeps its fingerprint. */
  if (spec->ports->len > 0)
    {
      mv_json_out_name (out, "ports");
      mv_json_out_begin_array (out);
      for (guint i = 0; i < spec->ports->len; i++)
        mv_port_mapping_write (out, g_ptr_array_index (spec->ports, i));
      mv_json_out_end_array (out);
    }

  mv_json_out_name (out, "restart");
  mv_json_out_begin_object (out);
  mv_json_out_string_member (out, "mode", mv_restart_mode_to_string (spec->restart_mode));
  mv_json_out_int_member (out, "max_retries", spec->restart_max_retries);
  mv_json_out_end_object (out);

  if (!(flags & MV_SPEC_CANON_NO_STANDBY))
    mv_json_out_int_member (out, "standby_after_seconds", spec->standby_after_seconds);
  if (!(flags & MV_SPEC_CANON_NO_ID_LABELS))
    {
      mv_json_out_name (out, "labels");
      mv_json_out_string_map (out, spec->labels, NULL);
    }
  mv_json_out_boolean_member (out, "remove_on_exit", spec->remove_on_exit);

  put_workload (out, spec);
  put_image_and_disks (out, spec, strip || !with_secrets);
  mv_json_out_end_object (out);
}

JsonNode *
mv_spec_to_node (const MvSpec *spec, gboolean with_secrets)
{
  MvJsonOut out;
  JsonNode *node;

  g_return_val_if_fail (spec != NULL, NULL);
  mv_json_out_init (&out, MV_JSON_OUT_TREE);
  put_spec (&out, spec, with_secrets, 0);
  node = mv_json_out_steal_node (&out);
  mv_json_out_clear (&out);
  return node;
}

static char *
spec_to_text (const MvSpec *spec, gboolean with_secrets, MvSpecCanonFlags flags)
{
  MvJsonOut out;
  char *text;

  mv_json_out_init (&out, MV_JSON_OUT_TEXT);
  put_spec (&out, spec, with_secrets, flags);
  text = mv_json_out_steal_text (&out);
  mv_json_out_clear (&out);
  return text;
}

char *
mv_spec_to_json (const MvSpec *spec, gboolean with_secrets)
{
  g_return_val_if_fail (spec != NULL, NULL);
  return spec_to_text (spec, with_secrets, 0);
}

char *
mv_spec_canonical_json (const MvSpec *spec, MvSpecCanonFlags flags)
{
  return spec_to_text (spec, TRUE, flags);
}

gsize
mv_spec_canonical_size (const MvSpec *spec, MvSpecCanonFlags flags)
{
  MvJsonOut out;
  gsize size;

  mv_json_out_init (&out, MV_JSON_OUT_COUNT);
  put_spec (&out, spec, TRUE, flags);
  size = mv_json_out_size (&out);
  mv_json_out_clear (&out);
  return size;
}
