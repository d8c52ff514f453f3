/* The commands of microvmctl. Each returns an exit status and has printed
 * whatever went wrong. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include <glib/gi18n.h>

#include "env-assignment.h"
#include "exec-relay.h"
#include "exec-status.h"
#include "label-filter.h"
#include "microvmctl.h"
#include "names.h"
#include "properties.h"
#include "table.h"
#include "terminal-text.h"
#include "wait-result.h"

/* Standard freedesktop interfaces, not microvmd names. */
#define DBUS_PROPERTIES_IFACE     "org.freedesktop.DBus.Properties"
#define DBUS_OBJECT_MANAGER_IFACE "org.freedesktop.DBus.ObjectManager"

/* CreateMachine's flag that starts the new machine (org.microvmd1.Manager.xml). */

/* How much of an ID the table shows; enough to tell machines apart. */
#define SHORT_ID_LENGTH 12

typedef struct {
  char *path;
  GPtrArray *props;   /* MvProperty */
} MachineInfo;

static void
machine_info_free (gpointer data)
{
  MachineInfo *info = data;

  g_free (info->path);
  g_ptr_array_unref (info->props);
  g_free (info);
}

static MachineInfo *
machine_info_new (const char *path)
{
  MachineInfo *info = g_new0 (MachineInfo, 1);

  info->path = g_strdup (path);
  info->props = mv_properties_new ();
  return info;
}

static int
fail_parse (int r)
{
  return mv_fail (_("Failed to parse the reply from microvmd: %s"), g_strerror (-r));
}

void
mv_print_json (JsonNode *root)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_pretty (generator, TRUE);
  json_generator_set_indent (generator, 2);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  printf ("%s\n", text);
}

/* Whether @name_or_id names the record at @path: a record lives in a
 * directory named after its machine's ID. */
static gboolean
record_path_names (const char *path, const char *name_or_id)
{
  g_auto(GStrv) parts = g_strsplit (path, "/", -1);

  return g_strv_contains ((const char *const *) parts, name_or_id);
}

/* A machine that is not found may be one whose record the daemon could
 * not read at start (Manager.InvalidRecords): say so, where and why,
 * rather than only that it does not exist. Returns FALSE if there is
 * nothing to say, and the plain error is printed instead. */
static gboolean
explain_not_found (MvCtl *ctl, const char *name_or_id, const sd_bus_error *not_found)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autoptr(GPtrArray) others = g_ptr_array_new_with_free_func (g_free);
  const char *path, *reason;
  int r;

  r = sd_bus_get_property (ctl->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                           "InvalidRecords", &error, &reply, "a(ss)");
  if (r < 0 || sd_bus_message_enter_container (reply, SD_BUS_TYPE_ARRAY, "(ss)") < 0)
    return FALSE;

  while ((r = sd_bus_message_read (reply, "(ss)", &path, &reason)) > 0)
    {
      if (record_path_names (path, name_or_id))
        {
          mv_fail ("The record of machine %s is invalid, so microvmd does not serve it: %s: %s",
                   name_or_id, path, reason);
          return TRUE;
        }
      g_ptr_array_add (others, g_strdup_printf ("%s: %s", path, reason));
    }
  if (r < 0 || others->len == 0)
    return FALSE;

  /* A record that cannot be read has no name to match: it may be this one. */
  mv_fail_bus (not_found, -ENOENT);
  mv_fail ("microvmd found %u invalid record%s at start; %s may be %s:", others->len,
           others->len == 1 ? "" : "s", name_or_id, others->len == 1 ? "it" : "one of them");
  for (guint i = 0; i < others->len; i++)
    {
      g_autofree char *shown = mv_terminal_text (g_ptr_array_index (others, i), -1);
      fprintf (stderr, "  %s\n", shown);
    }
  return TRUE;
}

int
mv_resolve_machine (MvCtl *ctl, const char *name_or_id, char **path)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  const char *p;
  int r;

  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetMachine", 0,
               &error, &reply, "s", name_or_id);
  if (r < 0 && sd_bus_error_has_name (&error, MV_BUS_ERROR_NOT_FOUND) &&
      explain_not_found (ctl, name_or_id, &error))
    return MV_EXIT_FAILURE;
  if (r < 0)
    return mv_fail_bus (&error, r);

  r = sd_bus_message_read (reply, "o", &p);
  if (r < 0)
    return fail_parse (r);

  *path = g_strdup (p);
  return MV_EXIT_OK;
}

/* The whole spec with its secrets, for a caller polkit lets read them
 * without asking (root, or org.microvmd1.machine.read-secrets granted);
 * NULL for others, who get the Spec property with its placeholders. */
static char *
spec_with_secrets (MvCtl *ctl, const char *path)
{
  g_autoptr(sd_bus_message) m = NULL, reply = NULL;
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  const char *spec = NULL;

  if (mv_new_call (ctl, path, MV_MACHINE_IFACE, "GetSpec", &error, &m) < 0 ||
      sd_bus_message_set_allow_interactive_authorization (m, 0) < 0 ||
      sd_bus_call (ctl->bus, m, 0, &error, &reply) < 0 ||
      sd_bus_message_read (reply, "s", &spec) < 0)
    return NULL;
  return g_strdup (spec);
}

static int
get_machine_properties (MvCtl *ctl, const char *path, gboolean secrets, sd_bus_error *error,
                        GPtrArray *props)
{
  g_autofree char *full_spec = NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  int r;

  r = mv_call (ctl, path, DBUS_PROPERTIES_IFACE, "GetAll", 0,
               error, &reply, "s", MV_MACHINE_IFACE);
  if (r < 0)
    return r;

  r = mv_properties_read (reply, props);
  if (r < 0)
    return sd_bus_error_set_errnof (error, r, _("Failed to parse the properties of %s: %s"),
                                    path, g_strerror (-r));

  /* The spec is not among them (it can be large): it is read by itself. */
  if (secrets && (full_spec = spec_with_secrets (ctl, path)))
    {
      mv_properties_add_string (props, "Spec", full_spec);
      return 0;
    }
  g_autoptr(sd_bus_message) spec_reply = NULL;
  const char *spec = NULL;
  r = mv_call (ctl, path, DBUS_PROPERTIES_IFACE, "Get", 0, error, &spec_reply, "ss",
               MV_MACHINE_IFACE, "Spec");
  if (r < 0)
    return r;
  r = sd_bus_message_read (spec_reply, "v", "s", &spec);
  if (r < 0)
    return sd_bus_error_set_errnof (error, r, _("Failed to parse the spec of %s: %s"), path,
                                    g_strerror (-r));
  mv_properties_add_string (props, "Spec", spec);
  return 0;
}

int
mv_read_spec (const char *file, char **out)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *text = NULL;
  const char *what = g_str_equal (file, "-") ? _("standard input") : file;
  gsize length = 0;

  if (g_str_equal (file, "-"))
    {
      GString *buffer = g_string_new (NULL);
      char chunk[4096];
      size_t n;

      while ((n = fread (chunk, 1, sizeof chunk, stdin)) > 0)
        g_string_append_len (buffer, chunk, n);
      if (ferror (stdin))
        {
          g_string_free (buffer, TRUE);
          return mv_fail (_("Failed to read the spec from standard input: %s"), g_strerror (errno));
        }
      length = buffer->len;
      text = g_string_free (buffer, FALSE);
    }
  else if (!g_file_get_contents (file, &text, &length, &error))
    {
      return mv_fail (_("Failed to read the spec: %s"), error->message);
    }

  if (!g_utf8_validate (text, length, NULL))
    return mv_fail (_("%s: the spec is not valid UTF-8 text"), what);

  if (!json_parser_load_from_data (parser, text, length, &error))
    {
      /* json-glib calls in-memory input "<data>"; say which file it was. */
      const char *message = error->message;

      if (g_str_has_prefix (message, "<data>:"))
        return mv_fail ("%s:%s", what, message + strlen ("<data>:"));
      return mv_fail ("%s: %s", what, message);
    }

  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return mv_fail (_("%s: the spec must be a JSON object"), what);

  *out = g_steal_pointer (&text);
  return MV_EXIT_OK;
}

/* The properties of every machine in one round trip, through the manager's
 * ObjectManager. */
static int
read_managed_objects (sd_bus_message *reply, GPtrArray *machines)
{
  int r;

  r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_ARRAY, "{oa{sa{sv}}}");
  if (r < 0)
    return r;

  while ((r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_DICT_ENTRY, "oa{sa{sv}}")) > 0)
    {
      const char *path;

      r = sd_bus_message_read_basic (reply, SD_BUS_TYPE_OBJECT_PATH, &path);
      if (r < 0)
        return r;

      r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_ARRAY, "{sa{sv}}");
      if (r < 0)
        return r;

      while ((r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_DICT_ENTRY, "sa{sv}")) > 0)
        {
          const char *interface;

          r = sd_bus_message_read_basic (reply, SD_BUS_TYPE_STRING, &interface);
          if (r < 0)
            return r;

          if (g_str_equal (interface, MV_MACHINE_IFACE))
            {
              MachineInfo *info = machine_info_new (path);

              g_ptr_array_add (machines, info);
              r = mv_properties_read (reply, info->props);
            }
          else
            {
              r = sd_bus_message_skip (reply, "a{sv}");
            }
          if (r < 0)
            return r;

          r = sd_bus_message_exit_container (reply);
          if (r < 0)
            return r;
        }
      if (r < 0)
        return r;

      r = sd_bus_message_exit_container (reply);
      if (r < 0)
        return r;
      r = sd_bus_message_exit_container (reply);
      if (r < 0)
        return r;
    }
  if (r < 0)
    return r;

  return sd_bus_message_exit_container (reply);
}

/* For a daemon without ObjectManager: ListMachines, then each machine's
 * properties. */
static int
list_machines_one_by_one (MvCtl *ctl, GPtrArray *machines)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  const char *id, *name, *state, *path;
  int r;

  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ListMachines", 0,
               &error, &reply, NULL);
  if (r < 0)
    return mv_fail_bus (&error, r);

  r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_ARRAY, "(ssso)");
  if (r < 0)
    return fail_parse (r);

  while ((r = sd_bus_message_read (reply, "(ssso)", &id, &name, &state, &path)) > 0)
    {
      g_auto(sd_bus_error) get_error = SD_BUS_ERROR_NULL;
      MachineInfo *info = machine_info_new (path);

      r = get_machine_properties (ctl, path, FALSE, &get_error, info->props);
      if (r < 0)
        {
          machine_info_free (info);
          /* Deleted since it was listed. */
          if (sd_bus_error_has_names (&get_error, SD_BUS_ERROR_UNKNOWN_OBJECT,
                                      MV_BUS_ERROR_NOT_FOUND))
            continue;
          return mv_fail_bus (&get_error, r);
        }
      g_ptr_array_add (machines, info);
    }
  if (r < 0)
    return fail_parse (r);

  return MV_EXIT_OK;
}

/* One object of GetManagedObjects' reply: its properties are added to
 * @objects if it has @interface. */
static int
read_managed_object (sd_bus_message *reply, const char *interface, GPtrArray *objects)
{
  const char *path;
  int r = sd_bus_message_read (reply, "o", &path);

  if (r >= 0)
    r = sd_bus_message_enter_container (reply, 'a', "{sa{sv}}");
  while (r >= 0 && (r = sd_bus_message_enter_container (reply, 'e', "sa{sv}")) > 0)
    {
      const char *name;

      r = sd_bus_message_read (reply, "s", &name);
      if (r >= 0 && g_str_equal (name, interface))
        {
          GPtrArray *props = mv_properties_new ();

          mv_properties_add_string (props, "path", path);
          g_ptr_array_add (objects, props);
          r = mv_properties_read (reply, props);
        }
      else if (r >= 0)
        r = sd_bus_message_skip (reply, "a{sv}");
      if (r >= 0)
        r = sd_bus_message_exit_container (reply);
    }
  if (r >= 0)
    r = sd_bus_message_exit_container (reply);
  return r;
}

static gint
properties_by_name (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (mv_properties_get_string (*(GPtrArray **) a, "Name"),
                    mv_properties_get_string (*(GPtrArray **) b, "Name"));
}

int
mv_read_objects (MvCtl *ctl, const char *interface, const char *what, GPtrArray *objects)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  int r = mv_call (ctl, MV_MANAGER_PATH, "org.freedesktop.DBus.ObjectManager",
                   "GetManagedObjects", 0, &error, &reply, NULL);

  if (r < 0)
    return mv_fail_bus (&error, r);
  r = sd_bus_message_enter_container (reply, 'a', "{oa{sa{sv}}}");
  while (r >= 0 && (r = sd_bus_message_enter_container (reply, 'e', "oa{sa{sv}}")) > 0)
    {
      r = read_managed_object (reply, interface, objects);
      if (r >= 0)
        r = sd_bus_message_exit_container (reply);
    }
  if (r < 0)
    return mv_fail (_("cannot read %s: %s"), what, g_strerror (-r));
  g_ptr_array_sort (objects, properties_by_name);
  return MV_EXIT_OK;
}

static int
compare_by_name (gconstpointer a, gconstpointer b)
{
  const MachineInfo *x = *(const MachineInfo *const *) a;
  const MachineInfo *y = *(const MachineInfo *const *) b;

  return g_strcmp0 (mv_properties_get_string (x->props, "Name"),
                    mv_properties_get_string (y->props, "Name"));
}

static void
print_machines_json (GPtrArray *machines)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_array (builder);
  for (guint i = 0; i < machines->len; i++)
    {
      MachineInfo *info = g_ptr_array_index (machines, i);

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "id");
      json_builder_add_string_value (builder, mv_properties_get_string (info->props, "Id"));
      json_builder_set_member_name (builder, "name");
      json_builder_add_string_value (builder, mv_properties_get_string (info->props, "Name"));
      json_builder_set_member_name (builder, "state");
      json_builder_add_string_value (builder, mv_properties_get_string (info->props, "State"));
      json_builder_set_member_name (builder, "vcpus");
      json_builder_add_int_value (builder, mv_properties_get_int (info->props, "VCPUs"));
      json_builder_set_member_name (builder, "memory_bytes");
      json_builder_add_int_value (builder, mv_properties_get_int (info->props, "MemoryBytes"));
      json_builder_set_member_name (builder, "hypervisor");
      json_builder_add_string_value (builder, mv_properties_get_string (info->props, "Hypervisor"));
      json_builder_set_member_name (builder, "address");
      json_builder_add_string_value (builder, mv_properties_get_string (info->props, "Address"));
      json_builder_set_member_name (builder, "path");
      json_builder_add_string_value (builder, info->path);
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);

  root = json_builder_get_root (builder);
  mv_print_json (root);
}

static void
print_machines_table (GPtrArray *machines)
{
  g_autoptr(MvTable) table = NULL;

  if (machines->len == 0)
    {
      printf (_("No machines.\n"));
      return;
    }

  table = mv_table_new ("ID", "NAME", "STATE", "VCPUS", "MEMORY", "HYPERVISOR", "ADDRESS", NULL);
  mv_table_set_align_right (table, 3);
  mv_table_set_align_right (table, 4);

  for (guint i = 0; i < machines->len; i++)
    {
      MachineInfo *info = g_ptr_array_index (machines, i);
      g_autofree char *id = g_strndup (mv_properties_get_string (info->props, "Id"), SHORT_ID_LENGTH);
      g_autofree char *vcpus = g_strdup_printf ("%" G_GINT64_FORMAT,
                                                mv_properties_get_int (info->props, "VCPUs"));
      g_autofree char *memory = mv_format_bytes ((guint64) mv_properties_get_int (info->props, "MemoryBytes"));

      g_autofree char *name = mv_terminal_text (mv_properties_get_string (info->props, "Name"), -1);
      g_autofree char *state = mv_terminal_text (mv_properties_get_string (info->props, "State"), -1);
      g_autofree char *hypervisor = mv_terminal_text (mv_properties_get_string (info->props, "Hypervisor"), -1);
      const char *address = mv_properties_get_string (info->props, "Address");

      mv_table_add_row (table, id, name, state, vcpus, memory, hypervisor,
                        address && *address ? address : "-");
    }
  mv_table_print (table, stdout);
}

int
mv_cmd_list (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr(GPtrArray) machines = g_ptr_array_new_with_free_func (machine_info_free);
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  int r;

  r = mv_call (ctl, MV_MANAGER_PATH, DBUS_OBJECT_MANAGER_IFACE, "GetManagedObjects", 0,
               &error, &reply, NULL);
  if (r >= 0)
    {
      r = read_managed_objects (reply, machines);
      if (r < 0)
        return fail_parse (r);
    }
  else if (sd_bus_error_has_names (&error, SD_BUS_ERROR_UNKNOWN_METHOD,
                                   SD_BUS_ERROR_UNKNOWN_INTERFACE,
                                   SD_BUS_ERROR_UNKNOWN_OBJECT))
    {
      int status = list_machines_one_by_one (ctl, machines);
      if (status != MV_EXIT_OK)
        return status;
    }
  else
    {
      return mv_fail_bus (&error, r);
    }

  for (guint i = machines->len; i > 0; i--)
    {
      MachineInfo *info = g_ptr_array_index (machines, i - 1);
      const MvProperty *labels = mv_properties_lookup (info->props, "Labels");
      JsonObject *object = labels != NULL && labels->value != NULL && JSON_NODE_HOLDS_OBJECT (labels->value)
                           ? json_node_get_object (labels->value) : NULL;

      if (!mv_labels_match (object, ctl->labels))
        g_ptr_array_remove_index (machines, i - 1);
    }

  g_ptr_array_sort (machines, compare_by_name);

  if (ctl->names)
    {
      /* For scripts and shell completion: nothing else, not even a header. */
      for (guint i = 0; i < machines->len; i++)
        {
          MachineInfo *info = g_ptr_array_index (machines, i);
          g_autofree char *name = mv_terminal_text (mv_properties_get_string (info->props, "Name"), -1);

          printf ("%s\n", name);
        }
    }
  else if (ctl->json)
    print_machines_json (machines);
  else
    print_machines_table (machines);
  return MV_EXIT_OK;
}

/* Spec is JSON text on the bus; --json embeds it as the object it is. */
static JsonNode *
parse_spec_node (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();

  if (text[0] == '\0' || !json_parser_load_from_data (parser, text, -1, NULL) ||
      json_parser_get_root (parser) == NULL)
    return NULL;
  return json_node_copy (json_parser_get_root (parser));
}

static void
print_properties_json (const char *path, GPtrArray *props)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autoptr(JsonNode) root = json_node_alloc ();

  for (guint i = 0; i < props->len; i++)
    {
      const MvProperty *prop = g_ptr_array_index (props, i);
      g_autofree char *key = mv_json_key_from_property (prop->name);
      JsonNode *value = NULL;

      if (g_str_equal (prop->name, "Spec"))
        value = parse_spec_node (mv_properties_get_string (props, "Spec"));
      if (value == NULL)
        value = json_node_copy (prop->value);
      json_object_set_member (object, key, value);
    }
  json_object_set_string_member (object, "path", path);

  json_node_init_object (root, object);
  mv_print_json (root);
}

static void
print_properties_text (GPtrArray *props)
{
  const char *spec = NULL;
  int width = 0;

  for (guint i = 0; i < props->len; i++)
    {
      const MvProperty *prop = g_ptr_array_index (props, i);
      width = MAX (width, (int) strlen (prop->name) + 1);
    }

  for (guint i = 0; i < props->len; i++)
    {
      const MvProperty *prop = g_ptr_array_index (props, i);
      g_autofree char *key = NULL;
      g_autofree char *value = NULL;

      if (g_str_equal (prop->name, "Spec"))
        {
          spec = mv_properties_get_string (props, "Spec");
          continue;
        }
      g_autofree char *formatted = NULL;

      key = g_strconcat (prop->name, ":", NULL);
      formatted = mv_property_format (prop);
      /* StateError, Health, AgentVersion and others come from the guest. */
      value = mv_terminal_text (formatted, -1);
      printf ("%-*s %s\n", width, key, value);
    }

  /* The spec goes last: it is long and spans lines. */
  if (spec != NULL)
    {
      g_autoptr(JsonNode) node = parse_spec_node (spec);
      g_autoptr(JsonGenerator) generator = json_generator_new ();
      g_autofree char *text = NULL;
      g_auto(GStrv) lines = NULL;

      if (node == NULL)
        {
          g_autofree char *shown = mv_terminal_text (spec, -1);

          printf ("Spec: %s\n", spec[0] != '\0' ? shown : "-");
          return;
        }

      json_generator_set_pretty (generator, TRUE);
      json_generator_set_indent (generator, 2);
      json_generator_set_root (generator, node);
      text = json_generator_to_data (generator, NULL);
      lines = g_strsplit (text, "\n", -1);

      printf ("Spec:\n");
      for (guint i = 0; lines[i] != NULL; i++)
        {
          g_autofree char *shown = mv_terminal_text (lines[i], -1);

          printf ("  %s\n", shown);
        }
    }
}

void
mv_print_properties (MvCtl *ctl, const char *path, GPtrArray *props)
{
  if (ctl->json)
    print_properties_json (path, props);
  else
    print_properties_text (props);
}

int
mv_cmd_show (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr(GPtrArray) props = mv_properties_new ();
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  int status, r;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = get_machine_properties (ctl, path, TRUE, &error, props);
  if (r < 0)
    return mv_fail_bus (&error, r);

  mv_print_properties (ctl, path, props);
  return MV_EXIT_OK;
}

void
mv_print_created_machine (MvCtl *ctl, const char *path)
{
  g_autoptr(GPtrArray) props = mv_properties_new ();
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  const char *id = NULL, *name = NULL;
  int r;

  /* The machine exists now; if its properties cannot be read, say where it
   * is rather than fail a create that worked. */
  r = get_machine_properties (ctl, path, FALSE, &error, props);
  if (r >= 0)
    {
      id = mv_properties_get_string (props, "Id");
      name = mv_properties_get_string (props, "Name");
    }

  if (ctl->json)
    {
      g_autoptr(JsonObject) object = json_object_new ();
      g_autoptr(JsonNode) root = json_node_alloc ();

      if (id != NULL)
        json_object_set_string_member (object, "id", id);
      else
        json_object_set_null_member (object, "id");
      if (name != NULL)
        json_object_set_string_member (object, "name", name);
      else
        json_object_set_null_member (object, "name");
      json_object_set_string_member (object, "path", path);
      json_node_init_object (root, object);
      mv_print_json (root);
    }
  else if (id != NULL)
    printf (_("Created machine %s (%s).\n"), name, id);
  else
    printf (_("Created machine at %s.\n"), path);
}

int
mv_cmd_create (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *spec = NULL;
  const char *path;
  int status, r;

  guint64 flags = ctl->start ? MV_CREATE_START : 0;

  /* The image's pull policy, as CreateMachine's flags say it. */
  if (g_strcmp0 (ctl->policy, "always") == 0)
    flags |= MV_CREATE_PULL_ALWAYS;
  else if (g_strcmp0 (ctl->policy, "never") == 0)
    flags |= MV_CREATE_PULL_NEVER;
  else if (ctl->policy && !g_str_equal (ctl->policy, "missing"))
    return mv_usage_error (_("--policy: '%s' is not one of missing, always, never"), ctl->policy);
  status = mv_read_spec (ctl->file, &spec);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateMachine", ctl->timeout_usec,
               &error, &reply, "st", spec, flags);
  if (r < 0)
    return mv_fail_bus (&error, r);

  r = sd_bus_message_read (reply, "o", &path);
  if (r < 0)
    return fail_parse (r);

  mv_print_created_machine (ctl, path);
  return MV_EXIT_OK;
}

/* Start, Stop, Pause, Resume and Restart: no arguments, and a reply only
 * once the machine got there, which may take a while. */
int
mv_cmd_lifecycle (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  int status, r;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, method, ctl->timeout_usec, &error, NULL, NULL);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

int
mv_cmd_delete (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  int status, r;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, "Delete", ctl->timeout_usec,
               &error, NULL, "b", (int) ctl->force);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

int
mv_cmd_update (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *spec = NULL;
  g_autofree char *path = NULL;
  int status, r;

  status = mv_read_spec (ctl->file, &spec);
  if (status != MV_EXIT_OK)
    return status;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, "Update", ctl->timeout_usec,
               &error, NULL, "s", spec);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

int
mv_cmd_rename (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  int status, r;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, "Rename", ctl->timeout_usec,
               &error, NULL, "s", argv[1]);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

int
mv_cmd_set_desired (MvCtl *ctl, const char *method, int argc, char **argv)
{
  static const char *const states[] = { "running", "paused", "stopped", NULL };
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  int status, r;

  if (!g_strv_contains (states, argv[1]))
    return mv_usage_error (_("unknown state '%s': expected running, paused or stopped"), argv[1]);

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, "SetDesiredState", ctl->timeout_usec,
               &error, NULL, "s", argv[1]);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

/* Appends exec's -e assignments as a{ss}; a later one of a key wins. */
static int
append_env (sd_bus_message *m, GPtrArray *env)
{
  int r;

  r = sd_bus_message_open_container (m, SD_BUS_TYPE_ARRAY, "{ss}");
  if (r < 0)
    return r;

  for (guint i = 0; env != NULL && i < env->len; i++)
    {
      g_autofree char *key = NULL, *value = NULL;
      gboolean overridden = FALSE;

      /* Checked when the options were parsed. */
      if (!mv_env_assignment_parse (g_ptr_array_index (env, i), &key, &value))
        g_assert_not_reached ();

      for (guint j = i + 1; j < env->len && !overridden; j++)
        {
          g_autofree char *later_key = NULL, *later_value = NULL;

          if (mv_env_assignment_parse (g_ptr_array_index (env, j), &later_key, &later_value))
            overridden = g_str_equal (key, later_key);
        }
      if (overridden)
        continue;

      r = sd_bus_message_append (m, "{ss}", key, value);
      if (r < 0)
        return r;
    }

  return sd_bus_message_close_container (m);
}

static int
append_exec_options (sd_bus_message *m, MvCtl *ctl, gboolean tty)
{
  struct winsize size;
  int r;

  r = sd_bus_message_open_container (m, SD_BUS_TYPE_ARRAY, "{sv}");
  if (r < 0)
    return r;

  r = sd_bus_message_append (m, "{sv}", "tty", "b", (int) tty);
  if (r >= 0 && tty &&
      (ioctl (STDOUT_FILENO, TIOCGWINSZ, &size) == 0 || ioctl (STDIN_FILENO, TIOCGWINSZ, &size) == 0) &&
      size.ws_row > 0 && size.ws_col > 0)
    r = sd_bus_message_append (m, "{sv}{sv}",
                               "rows", "u", (uint32_t) size.ws_row,
                               "columns", "u", (uint32_t) size.ws_col);
  if (r >= 0 && ctl->user != NULL)
    r = sd_bus_message_append (m, "{sv}", "user", "s", ctl->user);
  if (r >= 0 && ctl->workdir != NULL)
    r = sd_bus_message_append (m, "{sv}", "working_dir", "s", ctl->workdir);
  if (r < 0)
    return r;

  return sd_bus_message_close_container (m);
}

/* The descriptors of Exec's reply are the message's; the relay gets
 * copies of its own. */
static int
read_exec_fds (sd_bus_message *reply, MvExecFds *fds)
{
  int received[4];
  int *copies[] = { &fds->stdin_fd, &fds->stdout_fd, &fds->stderr_fd, &fds->status_fd };
  int r;

  r = sd_bus_message_read (reply, "hhhh", &received[0], &received[1], &received[2], &received[3]);
  if (r < 0)
    return r;

  for (gsize i = 0; i < G_N_ELEMENTS (copies); i++)
    {
      *copies[i] = fcntl (received[i], F_DUPFD_CLOEXEC, 3);
      if (*copies[i] < 0)
        {
          r = -errno;
          for (gsize j = 0; j < i; j++)
            close (*copies[j]);
          return r;
        }
    }
  return 0;
}

/* Runs ARGV in the machine and relays it. Failures of microvmctl's own
 * exit with 255, as an error status line does, so that they are not taken
 * for the command's exit status. */
static int
run_exec (MvCtl *ctl, const char *machine, char **argv, gboolean tty)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) m = NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL;
  MvExecFds fds = { -1, -1, -1, -1 };
  int status, r;

  status = mv_resolve_machine (ctl, machine, &path);
  if (status != MV_EXIT_OK)
    return MV_EXIT_EXEC_ERROR;

  r = mv_new_call (ctl, path, MV_MACHINE_IFACE, "Exec", &error, &m);
  if (r >= 0)
    r = sd_bus_message_append_strv (m, argv);
  if (r >= 0)
    r = append_env (m, ctl->env);
  if (r >= 0)
    r = append_exec_options (m, ctl, tty);
  if (r < 0 && !sd_bus_error_is_set (&error))
    sd_bus_error_set_errno (&error, r);
  if (r >= 0)
    r = sd_bus_call (ctl->bus, m, ctl->timeout_usec, &error, &reply);
  if (r < 0)
    {
      mv_fail_bus (&error, r);
      return MV_EXIT_EXEC_ERROR;
    }

  r = read_exec_fds (reply, &fds);
  if (r < 0)
    {
      fail_parse (r);
      return MV_EXIT_EXEC_ERROR;
    }
  g_clear_pointer (&reply, sd_bus_message_unref);

  /* Its password prompt is over; the terminal is the command's now. */
  g_clear_pointer (&ctl->agent, mv_polkit_agent_close);

  if (tty && fds.stderr_fd >= 0)
    {
      close (fds.stderr_fd);
      fds.stderr_fd = -1;
    }

  return mv_exec_relay (&fds, tty && isatty (STDIN_FILENO));
}

int
mv_cmd_exec (MvCtl *ctl, const char *method, int argc, char **argv)
{
  gboolean tty;

  switch (ctl->tty)
    {
    case MV_TTY_YES:
      tty = TRUE;
      break;
    case MV_TTY_NO:
      tty = FALSE;
      break;
    case MV_TTY_AUTO:
    default:
      tty = isatty (STDIN_FILENO) && isatty (STDOUT_FILENO);
      break;
    }

  return run_exec (ctl, argv[0], argv + 1, tty);
}

int
mv_cmd_shell (MvCtl *ctl, const char *method, int argc, char **argv)
{
  char *shell_argv[] = { (char *) "/bin/sh", (char *) "-l", NULL };

  return run_exec (ctl, argv[0], shell_argv, isatty (STDIN_FILENO));
}

int
mv_cmd_wait (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr(GPtrArray) result = mv_properties_new ();
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) m = NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL;
  const char *condition = ctl->healthy ? "healthy" : "stopped";
  /* A machine may run for days; --timeout still bounds it when given. */
  guint64 timeout_usec = ctl->timeout_given ? ctl->timeout_usec : G_MAXUINT64;
  int status, r;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_new_call (ctl, path, MV_MACHINE_IFACE, "Wait", &error, &m);
  if (r >= 0)
    r = sd_bus_message_append (m, "s", condition);
  if (r >= 0)
    r = sd_bus_message_open_container (m, SD_BUS_TYPE_ARRAY, "{sv}");
  if (r >= 0 && ctl->wait_id != NULL)
    r = sd_bus_message_append (m, "{sv}", "id", "s", ctl->wait_id);
  if (r >= 0 && ctl->next_stop)
    r = sd_bus_message_append (m, "{sv}", "next_stop", "b", 1);
  if (r >= 0)
    r = sd_bus_message_close_container (m);
  if (r < 0 && !sd_bus_error_is_set (&error))
    sd_bus_error_set_errno (&error, r);
  if (r >= 0)
    r = sd_bus_call (ctl->bus, m, timeout_usec, &error, &reply);
  if (r < 0)
    return mv_fail_bus (&error, r);

  r = mv_properties_read (reply, result);
  if (r < 0)
    return fail_parse (r);

  if (ctl->json)
    {
      g_autoptr(JsonNode) root = mv_wait_result_to_json (result);
      mv_print_json (root);
    }
  else
    {
      g_autofree char *text = mv_wait_result_format_text (result);
      g_autofree char *shown = mv_terminal_text (text, -1);

      printf ("%s\n", shown);
    }
  return mv_wait_result_exit_status (condition, result);
}

/* "64M", "1G", "1073741824": bytes, with K, M, G, T as powers of 1024. */
gboolean
mv_parse_size (const char *text, guint64 *out)
{
  static const char suffixes[] = "KMGT";
  guint64 value = 0;
  char *end = NULL;
  const char *s;

  if (!g_ascii_isdigit (text[0]))
    return FALSE;
  value = g_ascii_strtoull (text, &end, 10);
  if (end == text)
    return FALSE;
  if (*end != '\0')
    {
      if (end[1] != '\0' && !(g_ascii_toupper (end[1]) == 'I' && end[2] == 'B' && end[3] == '\0') &&
          !(g_ascii_toupper (end[1]) == 'B' && end[2] == '\0'))
        return FALSE;
      s = strchr (suffixes, g_ascii_toupper (*end));
      if (s == NULL || *end == '\0')
        return FALSE;
      for (gsize i = 0; i <= (gsize) (s - suffixes); i++)
        {
          if (value > G_MAXUINT64 / 1024)
            return FALSE;
          value *= 1024;
        }
    }
  *out = value;
  return TRUE;
}

