/* microvmctl network: create, list and remove networks
 * (org.microvmd1.Network). */
#include <stdio.h>
#include <string.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "microvmctl.h"
#include "names.h"
#include "properties.h"
#include "table.h"
#include "terminal-text.h"


static gboolean
get_bool (GPtrArray *props, const char *name)
{
  const MvProperty *prop = mv_properties_lookup (props, name);

  return prop && prop->value && JSON_NODE_HOLDS_VALUE (prop->value) &&
         json_node_get_value_type (prop->value) == G_TYPE_BOOLEAN &&
         json_node_get_boolean (prop->value);
}

static guint
count_machines (GPtrArray *props)
{
  const MvProperty *machines = mv_properties_lookup (props, "Machines");

  if (!machines || !machines->value || !JSON_NODE_HOLDS_ARRAY (machines->value))
    return 0;
  return json_array_get_length (json_node_get_array (machines->value));
}

static void
print_json (GPtrArray *networks)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;
  static const struct {
    const char *key, *property;
  } strings[] = {
    { "id", "Id" }, { "name", "Name" }, { "subnet", "Subnet" }, { "gateway", "Gateway" },
    { "bridge", "Bridge" },
  };

  json_builder_begin_array (builder);
  for (guint i = 0; i < networks->len; i++)
    {
      GPtrArray *props = networks->pdata[i];
      const MvProperty *machines = mv_properties_lookup (props, "Machines");

      json_builder_begin_object (builder);
      for (gsize k = 0; k < G_N_ELEMENTS (strings); k++)
        {
          json_builder_set_member_name (builder, strings[k].key);
          json_builder_add_string_value (builder,
                                         mv_properties_get_string (props, strings[k].property));
        }
      json_builder_set_member_name (builder, "nat");
      json_builder_add_boolean_value (builder, get_bool (props, "NAT"));
      json_builder_set_member_name (builder, "mtu");
      json_builder_add_int_value (builder, mv_properties_get_int (props, "MTU"));
      json_builder_set_member_name (builder, "machines");
      json_builder_add_value (builder, machines && machines->value
                                       ? json_node_copy (machines->value)
                                       : json_node_new (JSON_NODE_ARRAY));
      json_builder_set_member_name (builder, "path");
      json_builder_add_string_value (builder, mv_properties_get_string (props, "path"));
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
  root = json_builder_get_root (builder);
  json_generator_set_pretty (generator, TRUE);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  printf ("%s\n", text);
}

static int
network_list (MvCtl *ctl)
{
  g_autoptr(GPtrArray) networks = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  int status = mv_read_objects (ctl, MV_NETWORK_IFACE, _("the networks"), networks);

  if (status != MV_EXIT_OK)
    return status;
  if (ctl->names)
    {
      /* For scripts and shell completion: nothing else, not even a header. */
      for (guint i = 0; i < networks->len; i++)
        {
          g_autofree char *name = mv_terminal_text (mv_properties_get_string (networks->pdata[i],
                                                                              "Name"), -1);
          printf ("%s\n", name);
        }
      return MV_EXIT_OK;
    }
  if (ctl->json)
    {
      print_json (networks);
      return MV_EXIT_OK;
    }

  g_autoptr(MvTable) table = mv_table_new (_("NAME"), _("SUBNET"), _("GATEWAY"), _("NAT"),
                                           _("MTU"), _("BRIDGE"), _("MACHINES"), NULL);
  mv_table_set_align_right (table, 4);
  mv_table_set_align_right (table, 6);
  for (guint i = 0; i < networks->len; i++)
    {
      GPtrArray *props = networks->pdata[i];
      g_autofree char *name = mv_terminal_text (mv_properties_get_string (props, "Name"), -1);
      g_autofree char *mtu = g_strdup_printf ("%" G_GINT64_FORMAT,
                                              mv_properties_get_int (props, "MTU"));
      g_autofree char *count = g_strdup_printf ("%u", count_machines (props));

      mv_table_add_row (table, name, mv_properties_get_string (props, "Subnet"),
                        mv_properties_get_string (props, "Gateway"),
                        get_bool (props, "NAT") ? _("yes") : _("no"), mtu,
                        mv_properties_get_string (props, "Bridge"), count, NULL);
    }
  mv_table_print (table, stdout);
  return MV_EXIT_OK;
}

static int
network_create (MvCtl *ctl, const char *name, const char *subnet)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *spec = NULL;
  guint64 mtu = 0;
  int r;

  /* The daemon checks the range and says so; here only that it is a number. */
  if (ctl->mtu != NULL && !g_ascii_string_to_unsigned (ctl->mtu, 10, 0, G_MAXINT32, &mtu, NULL))
    return mv_usage_error (_("invalid --mtu '%s': expected a number of bytes"), ctl->mtu);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, name);
  json_builder_set_member_name (builder, "subnet");
  json_builder_add_string_value (builder, subnet);
  if (ctl->gateway != NULL)
    {
      json_builder_set_member_name (builder, "gateway");
      json_builder_add_string_value (builder, ctl->gateway);
    }
  if (ctl->no_nat)
    {
      json_builder_set_member_name (builder, "nat");
      json_builder_add_boolean_value (builder, FALSE);
    }
  if (ctl->mtu != NULL)
    {
      json_builder_set_member_name (builder, "mtu");
      json_builder_add_int_value (builder, (gint64) mtu);
    }
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  spec = json_to_string (root, FALSE);

  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateNetwork", ctl->timeout_usec,
               &error, NULL, "s", spec);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

static int
network_remove (MvCtl *ctl, const char *name)
{
  g_autoptr(GPtrArray) networks = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  int status = mv_read_objects (ctl, MV_NETWORK_IFACE, _("the networks"), networks);
  const char *path = NULL;
  int r;

  if (status != MV_EXIT_OK)
    return status;
  for (guint i = 0; i < networks->len; i++)
    if (g_strcmp0 (mv_properties_get_string (networks->pdata[i], "Name"), name) == 0 ||
        g_strcmp0 (mv_properties_get_string (networks->pdata[i], "Id"), name) == 0)
      path = mv_properties_get_string (networks->pdata[i], "path");
  if (path == NULL)
    {
      g_autofree char *shown = mv_terminal_text (name, -1);

      return mv_fail (_("no network called %s"), shown);
    }
  r = mv_call (ctl, path, MV_NETWORK_IFACE, "Delete", ctl->timeout_usec, &error, NULL, NULL);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

int
mv_cmd_network (MvCtl *ctl, const char *method, int argc, char **argv)
{
  gboolean create_options = ctl->gateway != NULL || ctl->no_nat || ctl->mtu != NULL;

  if (g_str_equal (argv[0], "create") && argc == 3)
    {
      if (ctl->names)
        return mv_usage_error (_("network: --names is only for network list"));
      return network_create (ctl, argv[1], argv[2]);
    }
  if (create_options)
    return mv_usage_error (_("network: --gateway, --no-nat and --mtu are only for network create"));
  if (g_str_equal (argv[0], "list") && argc == 1)
    return network_list (ctl);
  if (ctl->names)
    return mv_usage_error (_("network: --names is only for network list"));
  if ((g_str_equal (argv[0], "rm") || g_str_equal (argv[0], "delete")) && argc == 2)
    return network_remove (ctl, argv[1]);
  return mv_usage_error (_("network: expected create NAME SUBNET, list, or rm NAME"));
}
