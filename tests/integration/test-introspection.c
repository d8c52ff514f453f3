/* The running daemon's interfaces match the files in introspection/, member by
 * member and signature by signature: the XML is the API. */
#include "bus-client.h"
#include "names.h"

#include <gio/gio.h>

typedef GDBusInterfaceInfo GDBusInterfaceInfoRef;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (GDBusInterfaceInfoRef, g_dbus_interface_info_unref)

static GDBusInterfaceInfo *
load_file_interface (const char *iface)
{
  g_autofree char *path = g_strdup_printf ("%s/introspection/%s.xml",
                                           g_getenv ("MICROVMD_SOURCE_DIR"), iface);
  g_autofree char *xml = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GDBusNodeInfo) node = NULL;

  g_assert_true (g_file_get_contents (path, &xml, NULL, &error));
  node = g_dbus_node_info_new_for_xml (xml, &error);
  g_assert_no_error (error);
  GDBusInterfaceInfo *info = g_dbus_node_info_lookup_interface (node, iface);
  g_assert_nonnull (info);
  return g_dbus_interface_info_ref (info);
}

static GDBusInterfaceInfo *
load_live_interface (Fixture *f, const char *path, const char *iface)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, path,
                                                  "org.freedesktop.DBus.Introspectable",
                                                  "Introspect", NULL, NULL, NULL);
  const char *xml = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GDBusNodeInfo) node = NULL;

  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_read (reply, "s", &xml), >=, 0);
  node = g_dbus_node_info_new_for_xml (xml, &error);
  g_assert_no_error (error);
  GDBusInterfaceInfo *info = g_dbus_node_info_lookup_interface (node, iface);
  g_assert_nonnull (info);
  return g_dbus_interface_info_ref (info);
}

static char *
args_signature (GDBusArgInfo **args)
{
  GString *s = g_string_new ("");
  for (guint i = 0; args && args[i]; i++)
    g_string_append_printf (s, "%s:%s;", args[i]->name, args[i]->signature);
  return g_string_free (s, FALSE);
}

static GPtrArray *
describe (GDBusInterfaceInfo *info)
{
  GPtrArray *members = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; info->methods && info->methods[i]; i++)
    {
      g_autofree char *in = args_signature (info->methods[i]->in_args);
      g_autofree char *out = args_signature (info->methods[i]->out_args);
      g_ptr_array_add (members, g_strdup_printf ("method %s (%s) -> (%s)",
                                                 info->methods[i]->name, in, out));
    }
  for (guint i = 0; info->signals && info->signals[i]; i++)
    {
      g_autofree char *args = args_signature (info->signals[i]->args);
      g_ptr_array_add (members, g_strdup_printf ("signal %s (%s)", info->signals[i]->name, args));
    }
  for (guint i = 0; info->properties && info->properties[i]; i++)
    {
      GDBusPropertyInfo *p = info->properties[i];
      g_ptr_array_add (members, g_strdup_printf ("property %s %s %s", p->name, p->signature,
                                                 p->flags & G_DBUS_PROPERTY_INFO_FLAGS_WRITABLE ? "rw" : "r"));
    }
  return members;
}

static void
assert_same (GDBusInterfaceInfo *file, GDBusInterfaceInfo *live)
{
  g_autoptr (GPtrArray) want = describe (file);
  g_autoptr (GPtrArray) got = describe (live);
  g_autoptr (GString) diff = g_string_new ("");

  for (guint i = 0; i < want->len; i++)
    if (!g_ptr_array_find_with_equal_func (got, want->pdata[i], g_str_equal, NULL))
      g_string_append_printf (diff, "  only in the XML:    %s\n", (char *) want->pdata[i]);
  for (guint i = 0; i < got->len; i++)
    if (!g_ptr_array_find_with_equal_func (want, got->pdata[i], g_str_equal, NULL))
      g_string_append_printf (diff, "  only in the daemon: %s\n", (char *) got->pdata[i]);
  if (diff->len)
    g_error ("%s differs:\n%s", file->name, diff->str);
  g_assert_cmpuint (want->len, >, 0);
}

static void
test_manager (Fixture *f, gconstpointer data)
{
  g_autoptr (GDBusInterfaceInfoRef) file = load_file_interface (MV_MANAGER_IFACE);
  g_autoptr (GDBusInterfaceInfoRef) live = load_live_interface (f, MV_MANAGER_PATH, MV_MANAGER_IFACE);
  assert_same (file, live);
}

static void
test_machine (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client,
    "{\"name\":\"i\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}", 0, NULL, NULL);
  g_autoptr (GDBusInterfaceInfoRef) file = load_file_interface (MV_MACHINE_IFACE);
  g_autoptr (GDBusInterfaceInfoRef) live = load_live_interface (f, path, MV_MACHINE_IFACE);
  assert_same (file, live);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/introspection/manager", Fixture, NULL, fixture_setup, test_manager, fixture_teardown);
  g_test_add ("/introspection/machine", Fixture, NULL, fixture_setup, test_machine, fixture_teardown);
  return g_test_run ();
}
