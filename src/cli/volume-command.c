/* microvmctl volume: create, list and remove volumes
 * (org.microvmd1.Volume). */
#include <stdio.h>
#include <string.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "microvmctl.h"
#include "names.h"
#include "properties.h"
#include "table.h"
#include "terminal-text.h"


static int
volume_list (MvCtl *ctl)
{
  g_autoptr(GPtrArray) volumes = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  int status = mv_read_objects (ctl, MV_VOLUME_IFACE, _("the volumes"), volumes);

  if (status != MV_EXIT_OK)
    return status;
  if (ctl->names)
    {
      /* For scripts and shell completion: nothing else, not even a header. */
      for (guint i = 0; i < volumes->len; i++)
        {
          g_autofree char *name = mv_terminal_text (mv_properties_get_string (volumes->pdata[i],
                                                                              "Name"), -1);
          printf ("%s\n", name);
        }
      return MV_EXIT_OK;
    }
  if (ctl->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();
      g_autoptr(JsonNode) root = NULL;
      g_autoptr(JsonGenerator) generator = json_generator_new ();
      g_autofree char *text = NULL;

      json_builder_begin_array (builder);
      for (guint i = 0; i < volumes->len; i++)
        {
          GPtrArray *props = volumes->pdata[i];
          const MvProperty *attached = mv_properties_lookup (props, "AttachedTo");

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "id");
          json_builder_add_string_value (builder, mv_properties_get_string (props, "Id"));
          json_builder_set_member_name (builder, "name");
          json_builder_add_string_value (builder, mv_properties_get_string (props, "Name"));
          json_builder_set_member_name (builder, "size_bytes");
          json_builder_add_int_value (builder, mv_properties_get_int (props, "SizeBytes"));
          json_builder_set_member_name (builder, "attached_to");
          json_builder_add_value (builder, attached && attached->value
                                           ? json_node_copy (attached->value)
                                           : json_node_new (JSON_NODE_ARRAY));
          json_builder_set_member_name (builder, "held_by");
          json_builder_add_string_value (builder, mv_properties_get_string (props, "HeldBy"));
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
      return MV_EXIT_OK;
    }

  g_autoptr(MvTable) table = mv_table_new (_("NAME"), _("SIZE"), _("MACHINES"), _("HELD"), NULL);
  mv_table_set_align_right (table, 1);
  for (guint i = 0; i < volumes->len; i++)
    {
      GPtrArray *props = volumes->pdata[i];
      const MvProperty *attached = mv_properties_lookup (props, "AttachedTo");
      guint n = attached && attached->value && JSON_NODE_HOLDS_ARRAY (attached->value)
                ? json_array_get_length (json_node_get_array (attached->value)) : 0;
      g_autofree char *name = mv_terminal_text (mv_properties_get_string (props, "Name"), -1);
      g_autofree char *size = mv_format_bytes ((guint64) mv_properties_get_int (props, "SizeBytes"));
      g_autofree char *count = g_strdup_printf ("%u", n);
      const char *held = mv_properties_get_string (props, "HeldBy");

      mv_table_add_row (table, name, size, count,
                        held && g_strcmp0 (held, "/") != 0 ? _("yes") : "-", NULL);
    }
  mv_table_print (table, stdout);
  return MV_EXIT_OK;
}

static int
volume_create (MvCtl *ctl, const char *name, const char *size_text)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *spec = NULL;
  guint64 size = 0;
  int r;

  if (!mv_parse_size (size_text, &size))
    return mv_usage_error (_("'%s' is not a size: give bytes, or a number with K, M, G or T"),
                           size_text);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, name);
  json_builder_set_member_name (builder, "size_bytes");
  json_builder_add_int_value (builder, (gint64) MIN (size, (guint64) G_MAXINT64));
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  spec = json_to_string (root, FALSE);

  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateVolume", ctl->timeout_usec,
               &error, NULL, "s", spec);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

static int
volume_remove (MvCtl *ctl, const char *name)
{
  g_autoptr(GPtrArray) volumes = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  int status = mv_read_objects (ctl, MV_VOLUME_IFACE, _("the volumes"), volumes);
  const char *path = NULL;
  int r;

  if (status != MV_EXIT_OK)
    return status;
  for (guint i = 0; i < volumes->len; i++)
    if (g_strcmp0 (mv_properties_get_string (volumes->pdata[i], "Name"), name) == 0 ||
        g_strcmp0 (mv_properties_get_string (volumes->pdata[i], "Id"), name) == 0)
      path = mv_properties_get_string (volumes->pdata[i], "path");
  if (path == NULL)
    {
      g_autofree char *shown = mv_terminal_text (name, -1);

      return mv_fail (_("no volume called %s"), shown);
    }
  r = mv_call (ctl, path, MV_VOLUME_IFACE, "Delete", ctl->timeout_usec, &error, NULL, NULL);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}

int
mv_cmd_volume (MvCtl *ctl, const char *method, int argc, char **argv)
{
  if (g_str_equal (argv[0], "list") && argc == 1)
    return volume_list (ctl);
  if (ctl->names)
    return mv_usage_error (_("volume: --names is only for volume list"));
  if (g_str_equal (argv[0], "create") && argc == 3)
    return volume_create (ctl, argv[1], argv[2]);
  if ((g_str_equal (argv[0], "rm") || g_str_equal (argv[0], "delete")) && argc == 2)
    return volume_remove (ctl, argv[1]);
  return mv_usage_error (_("volume: expected create NAME SIZE, list, or rm NAME"));
}
