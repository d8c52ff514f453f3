/* microvmctl usage: what machines may be given of the host (Capacity) and
 * what they hold of it now (Manager.GetUsage). */
#include "microvmctl.h"
#include "properties.h"
#include "table.h"
#include "names.h"

#include <glib/gi18n.h>

static JsonObject *
member_object (JsonObject *usage, const char *name)
{
  JsonNode *node = json_object_get_member (usage, name);

  return node && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

static gint64
member_int (JsonObject *object, const char *name)
{
  return object && json_object_has_member (object, name)
           ? json_object_get_int_member (object, name)
           : 0;
}

/* "Running 3, Stopped 1": the counts that are not zero, or "none". */
static char *
counts_text (JsonObject *counts)
{
  GString *text = g_string_new ("");
  g_autoptr (GList) names = counts ? json_object_get_members (counts) : NULL;

  for (GList *l = names; l; l = l->next)
    {
      gint64 n = json_object_get_int_member (counts, l->data);

      if (n != 0)
        g_string_append_printf (text, "%s%s %" G_GINT64_FORMAT, text->len ? ", " : "",
                                (const char *) l->data, n);
    }
  if (text->len == 0)
    g_string_append (text, "none");
  return g_string_free (text, FALSE);
}

static void
print_usage_text (JsonObject *usage)
{
  JsonObject *capacity = member_object (usage, "capacity");
  JsonNode *machines = json_object_get_member (usage, "machines");
  g_autofree char *host_memory = mv_format_bytes (member_int (capacity, "host_memory_bytes"));
  g_autofree char *reserved = mv_format_bytes (member_int (capacity, "reserved_memory_bytes"));
  g_autofree char *allocatable = mv_format_bytes (member_int (capacity,
                                                              "allocatable_memory_bytes"));
  g_autofree char *held = mv_format_bytes (member_int (usage, "held_memory_bytes"));
  g_autofree char *states = counts_text (member_object (usage, "by_state"));
  g_autofree char *health = counts_text (member_object (usage, "by_health"));
  g_autoptr (MvTable) table = mv_table_new ("NAME", "STATE", "VCPUS", "MEMORY", NULL);

  g_print (_("Host:        %" G_GINT64_FORMAT " CPUs, %s memory, %s reserved\n"),
           member_int (capacity, "host_vcpus"), host_memory, reserved);
  g_print (_("Overcommit:  CPU %g, memory %g\n"),
           json_object_get_double_member_with_default (capacity, "cpu_overcommit", 1.0),
           json_object_get_double_member_with_default (capacity, "memory_overcommit", 1.0));
  g_print (_("Held:        %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " vCPUs, %s of %s memory\n"),
           member_int (usage, "held_vcpus"), member_int (capacity, "allocatable_vcpus"), held,
           allocatable);
  g_print (_("Machines:    %s\n"), states);
  g_print (_("Health:      %s\n"), health);

  if (!machines || !JSON_NODE_HOLDS_ARRAY (machines) ||
      json_array_get_length (json_node_get_array (machines)) == 0)
    return;
  g_print ("\n");
  mv_table_set_align_right (table, 2);
  mv_table_set_align_right (table, 3);
  for (guint i = 0; i < json_array_get_length (json_node_get_array (machines)); i++)
    {
      JsonArray *row = json_array_get_array_element (json_node_get_array (machines), i);
      g_autofree char *vcpus = NULL, *memory = NULL;

      if (!row || json_array_get_length (row) < 6)
        continue;
      vcpus = g_strdup_printf ("%" G_GINT64_FORMAT, json_array_get_int_element (row, 4));
      memory = mv_format_bytes (json_array_get_int_element (row, 5));
      mv_table_add_row (table, json_array_get_string_element (row, 1),
                        json_array_get_string_element (row, 2), vcpus, memory);
    }
  mv_table_print (table, stdout);
}

int
mv_cmd_usage (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto (sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (JsonNode) usage = NULL;
  int r;

  r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetUsage", 0, &error, &reply, NULL);
  if (r < 0)
    return mv_fail_bus (&error, r);
  r = mv_bus_read_value (reply, &usage);
  if (r < 0 || !JSON_NODE_HOLDS_OBJECT (usage))
    return mv_fail (_("could not read the usage: %s"), g_strerror (r < 0 ? -r : EBADMSG));
  if (ctl->json)
    mv_print_json (usage);
  else
    print_usage_text (json_node_get_object (usage));
  return MV_EXIT_OK;
}
