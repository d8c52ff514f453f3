/* microvmctl snapshot and fork: machines frozen to disk, listed, shown,
 * restored, forked and deleted (org.microvmd1.Snapshot), and a machine
 * copied as it runs (Manager.ForkMachine). */
#include <stdio.h>
#include <string.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "microvmctl.h"
#include "names.h"
#include "properties.h"
#include "spec-override.h"
#include "table.h"
#include "terminal-text.h"

#define DBUS_PROPERTIES_IFACE     "org.freedesktop.DBus.Properties"

/* A snapshot's object path by its name or ID; the daemon's NotFound if
 * there is none. */
static int
resolve_snapshot (MvCtl *ctl, const char *name_or_id, char **path)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  const char *p = NULL;
  int r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetSnapshot", 0, &error, &reply,
                   "s", name_or_id);

  if (r >= 0)
    r = sd_bus_message_read (reply, "o", &p);
  if (r < 0)
    return mv_fail_bus (&error, r);
  *path = g_strdup (p);
  return MV_EXIT_OK;
}

/* Which snapshots `list MACHINE` shows: those taken of the machine that
 * has that name or ID now, or, when none has, of one that had it. */
typedef struct {
  char *machine_id;      /* the machine's, when it exists */
  const char *given;
} MachineFilter;

static int
machine_filter_init (MvCtl *ctl, const char *name_or_id, MachineFilter *filter)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  const char *path = NULL;
  int r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetMachine", 0, &error, &reply,
                   "s", name_or_id);

  filter->given = name_or_id;
  filter->machine_id = NULL;
  if (r < 0 && sd_bus_error_has_name (&error, MV_BUS_ERROR_NOT_FOUND))
    return MV_EXIT_OK;
  if (r >= 0)
    r = sd_bus_message_read (reply, "o", &path);
  if (r >= 0)
    r = sd_bus_get_property_string (ctl->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id",
                                    &error, &filter->machine_id);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

static gboolean
machine_filter_matches (const MachineFilter *filter, GPtrArray *props)
{
  const char *id = mv_properties_get_string (props, "MachineId");

  if (filter->machine_id != NULL)
    return g_str_equal (id, filter->machine_id);
  return g_str_equal (id, filter->given) ||
         g_str_equal (mv_properties_get_string (props, "MachineName"), filter->given);
}

/* Every property but the spec, which show prints, in snake_case. */
static void
print_json (GPtrArray *snapshots)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_array (builder);
  for (guint i = 0; i < snapshots->len; i++)
    {
      GPtrArray *props = snapshots->pdata[i];

      json_builder_begin_object (builder);
      for (guint k = 0; k < props->len; k++)
        {
          const MvProperty *prop = props->pdata[k];
          g_autofree char *key = NULL;

          if (g_str_equal (prop->name, "Spec") || prop->value == NULL)
            continue;
          key = mv_json_key_from_property (prop->name);
          json_builder_set_member_name (builder, key);
          json_builder_add_value (builder, json_node_copy (prop->value));
        }
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
  root = json_builder_get_root (builder);
  mv_print_json (root);
}

static void
print_table (GPtrArray *snapshots)
{
  g_autoptr(MvTable) table = mv_table_new (_("NAME"), _("KIND"), _("MACHINE"), _("HYPERVISOR"),
                                           _("SIZE"), _("CREATED"), NULL);

  mv_table_set_align_right (table, 4);
  for (guint i = 0; i < snapshots->len; i++)
    {
      GPtrArray *props = snapshots->pdata[i];
      const MvProperty *created = mv_properties_lookup (props, "CreatedAt");
      g_autofree char *name = mv_terminal_text (mv_properties_get_string (props, "Name"), -1);
      g_autofree char *kind = mv_terminal_text (mv_properties_get_string (props, "Kind"), -1);
      g_autofree char *machine = mv_terminal_text (mv_properties_get_string (props, "MachineName"),
                                                   -1);
      g_autofree char *hypervisor = mv_terminal_text (mv_properties_get_string (props,
                                                                                "HypervisorType"),
                                                      -1);
      g_autofree char *size = mv_format_bytes ((guint64) mv_properties_get_int (props,
                                                                                "SizeBytes"));
      g_autofree char *when = created ? mv_property_format (created) : NULL;

      mv_table_add_row (table, name, kind, machine[0] ? machine : NULL,
                        hypervisor[0] ? hypervisor : NULL, size, when, NULL);
    }
  mv_table_print (table, stdout);
}

static int
snapshot_list (MvCtl *ctl, const char *machine)
{
  g_autoptr(GPtrArray) snapshots = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  MachineFilter filter = { NULL, NULL };
  int status = MV_EXIT_OK;

  if (machine != NULL)
    status = machine_filter_init (ctl, machine, &filter);
  if (status == MV_EXIT_OK)
    status = mv_read_objects (ctl, MV_SNAPSHOT_IFACE, _("the snapshots"), snapshots);
  for (guint i = snapshots->len; machine != NULL && i > 0; i--)
    if (!machine_filter_matches (&filter, snapshots->pdata[i - 1]))
      g_ptr_array_remove_index (snapshots, i - 1);
  g_free (filter.machine_id);
  if (status != MV_EXIT_OK)
    return status;

  if (ctl->names)
    {
      /* For scripts and shell completion: nothing else, not even a header. */
      for (guint i = 0; i < snapshots->len; i++)
        {
          g_autofree char *name = mv_terminal_text (mv_properties_get_string (snapshots->pdata[i],
                                                                              "Name"), -1);
          printf ("%s\n", name);
        }
    }
  else if (ctl->json)
    print_json (snapshots);
  else
    print_table (snapshots);
  return MV_EXIT_OK;
}

static int
snapshot_show (MvCtl *ctl, const char *name)
{
  g_autoptr(GPtrArray) props = mv_properties_new ();
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL;
  int status = resolve_snapshot (ctl, name, &path);
  int r;

  if (status != MV_EXIT_OK)
    return status;
  r = mv_call (ctl, path, DBUS_PROPERTIES_IFACE, "GetAll", 0, &error, &reply, "s",
               MV_SNAPSHOT_IFACE);
  if (r < 0)
    return mv_fail_bus (&error, r);
  r = mv_properties_read (reply, props);
  if (r < 0)
    return mv_fail (_("Failed to parse the properties of %s: %s"), path, g_strerror (-r));
  mv_print_properties (ctl, path, props);
  return MV_EXIT_OK;
}

static int
snapshot_create (MvCtl *ctl, const char *machine, const char *name)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *machine_path = NULL, *taken = NULL, *id = NULL;
  const char *path = NULL;
  int status = mv_resolve_machine (ctl, machine, &machine_path);
  int r;

  if (status != MV_EXIT_OK)
    return status;
  /* A memory snapshot writes the guest's memory: as long as a start. */
  r = mv_call (ctl, machine_path, MV_MACHINE_IFACE, "CreateSnapshot", ctl->timeout_usec, &error,
               &reply, "s", name ? name : "");
  if (r >= 0)
    r = sd_bus_message_read (reply, "o", &path);
  if (r < 0)
    return mv_fail_bus (&error, r);

  /* It is taken; if its name cannot be read, say where it is rather than
   * fail a snapshot that worked. */
  sd_bus_get_property_string (ctl->bus, MV_BUS_NAME, path, MV_SNAPSHOT_IFACE, "Name", NULL,
                              &taken);
  sd_bus_get_property_string (ctl->bus, MV_BUS_NAME, path, MV_SNAPSHOT_IFACE, "Id", NULL, &id);
  if (ctl->json)
    {
      g_autoptr(JsonObject) object = json_object_new ();
      g_autoptr(JsonNode) root = json_node_alloc ();
      g_autofree char *text = NULL;

      if (id != NULL)
        json_object_set_string_member (object, "id", id);
      else
        json_object_set_null_member (object, "id");
      if (taken != NULL)
        json_object_set_string_member (object, "name", taken);
      else
        json_object_set_null_member (object, "name");
      json_object_set_string_member (object, "path", path);
      json_node_init_object (root, object);
      text = json_to_string (root, TRUE);
      printf ("%s\n", text);
    }
  else
    {
      g_autofree char *shown = mv_terminal_text (taken ? taken : path, -1);

      printf ("%s\n", shown);
    }
  return MV_EXIT_OK;
}

/* Restore and Delete: no arguments, nothing to print. */
static int
snapshot_call (MvCtl *ctl, const char *name, const char *method)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  int status = resolve_snapshot (ctl, name, &path);
  int r;

  if (status != MV_EXIT_OK)
    return status;
  r = mv_call (ctl, path, MV_SNAPSHOT_IFACE, method, ctl->timeout_usec, &error, NULL, NULL);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

/* The spec_json of a fork called NEW_NAME, from --set; a usage error,
 * before any call, if an option is malformed. */
static int
fork_spec (MvCtl *ctl, const char *new_name, char **json)
{
  g_autoptr(GError) error = NULL;

  *json = mv_spec_overrides_build (new_name, ctl->sets, &error);
  if (*json == NULL)
    return mv_usage_error ("%s", error->message);
  return MV_EXIT_OK;
}

/* Fork and ForkMachine reply once the copy is Running (or Stopped, from a
 * disk): the new machine's path, printed as create prints it. */
static int
print_fork_reply (MvCtl *ctl, int r, sd_bus_error *error, sd_bus_message *reply)
{
  const char *path = NULL;

  if (r >= 0)
    r = sd_bus_message_read (reply, "o", &path);
  if (r < 0)
    return mv_fail_bus (error, r);
  mv_print_created_machine (ctl, path);
  return MV_EXIT_OK;
}

static int
snapshot_fork (MvCtl *ctl, const char *name, const char *new_name)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *json = NULL, *path = NULL;
  int status = fork_spec (ctl, new_name, &json);
  int r;

  if (status == MV_EXIT_OK)
    status = resolve_snapshot (ctl, name, &path);
  if (status != MV_EXIT_OK)
    return status;
  r = mv_call (ctl, path, MV_SNAPSHOT_IFACE, "Fork", ctl->timeout_usec, &error, &reply, "s",
               json);
  return print_fork_reply (ctl, r, &error, reply);
}

int
mv_cmd_snapshot (MvCtl *ctl, const char *method, int argc, char **argv)
{
  const char *verb = argv[0];

  if (g_str_equal (verb, "list") && argc <= 2)
    {
      if (ctl->sets->len > 0)
        return mv_usage_error (_("snapshot: --set is only for snapshot fork"));
      /* Reading is open to everyone: no password is ever asked. */
      ctl->want_agent = FALSE;
      return snapshot_list (ctl, argc == 2 ? argv[1] : NULL);
    }
  if (ctl->names)
    return mv_usage_error (_("snapshot: --names is only for snapshot list"));
  if (g_str_equal (verb, "fork") && argc == 3)
    return snapshot_fork (ctl, argv[1], argv[2]);
  if (ctl->sets->len > 0)
    return mv_usage_error (_("snapshot: --set is only for snapshot fork"));
  if (g_str_equal (verb, "create") && (argc == 2 || argc == 3))
    return snapshot_create (ctl, argv[1], argc == 3 ? argv[2] : NULL);
  if (g_str_equal (verb, "show") && argc == 2)
    {
      ctl->want_agent = FALSE;
      return snapshot_show (ctl, argv[1]);
    }
  if (g_str_equal (verb, "restore") && argc == 2)
    return snapshot_call (ctl, argv[1], "Restore");
  if ((g_str_equal (verb, "rm") || g_str_equal (verb, "delete")) && argc == 2)
    return snapshot_call (ctl, argv[1], "Delete");
  return mv_usage_error (_("snapshot: expected create MACHINE [NAME], list [MACHINE], show NAME, "
                           "restore NAME, fork NAME NEWNAME or rm NAME"));
}

int
mv_cmd_fork (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *json = NULL;
  int status = fork_spec (ctl, argv[1], &json);
  int r;

  if (status != MV_EXIT_OK)
    return status;
  /* The daemon finds the machine by its name or ID, and says if it is not. */
  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ForkMachine", ctl->timeout_usec, &error,
               &reply, "ss", argv[0], json);
  return print_fork_reply (ctl, r, &error, reply);
}
