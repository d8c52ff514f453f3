/* The running daemon's interfaces match the files in introspection/, member by
 * member: every argument's name, type and direction, every property's type,
 * access and change announcement, and what is deprecated. The XML is the API,
 * so any difference is reported, all of them in one failure. */
#include "bus-client.h"
#include "names.h"

#include <gio/gio.h>
#include <signal.h>

#define EMITS_CHANGED_SIGNAL "org.freedesktop.DBus.Property.EmitsChangedSignal"
#define DEPRECATED           "org.freedesktop.DBus.Deprecated"

#define FAKE_IMAGE_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A cached image as the image store records one, written while the
 * daemon is stopped, so that an Image object is served. */
static void
write_cached_image (Fixture *f)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), "images", FAKE_IMAGE_HEX, NULL);
  g_autofree char *record = g_build_filename (dir, "image.json", NULL);
  g_autofree char *config = g_build_filename (dir, "config.json", NULL);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (record,
    "{\"format\":1,\"digest\":\"sha256:" FAKE_IMAGE_HEX "\",\"references\":[\"127.0.0.1:5000/i:1\"],"
    "\"size\":1,\"disk_size\":4096,\"pulled\":\"2026-01-01T00:00:00Z\"}", -1, NULL));
  g_assert_true (g_file_set_contents (config, "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{}}",
                                      -1, NULL));
}

/* Interfaces that introspection/ declares but no object serves yet. */
static const char *const declared_only[] = { MV_SNAPSHOT_IFACE, MV_WARM_IMAGE_IFACE, NULL };

/* One thing about a member that both sides must agree on, such as
 * "argument 2" = "in t flags" or "EmitsChangedSignal" = "const". */
typedef struct {
  char *key;
  char *value;
} Facet;

typedef struct {
  char      *what;    /* "method CreateMachine", "property Id", ... */
  GPtrArray *facets;  /* Facet* */
} Member;

static void
facet_free (Facet *facet)
{
  g_free (facet->key);
  g_free (facet->value);
  g_free (facet);
}

static void
member_free (Member *member)
{
  g_free (member->what);
  g_ptr_array_unref (member->facets);
  g_free (member);
}

static Member *
member_new (const char *kind, const char *name)
{
  Member *member = g_new0 (Member, 1);
  member->what = g_strdup_printf ("%s %s", kind, name);
  member->facets = g_ptr_array_new_with_free_func ((GDestroyNotify) facet_free);
  return member;
}

static void
add_facet (Member *member, char *key, char *value)
{
  Facet *facet = g_new0 (Facet, 1);
  facet->key = key;
  facet->value = value;
  g_ptr_array_add (member->facets, facet);
}

static const char *
facet_value (Member *member, const char *key)
{
  for (guint i = 0; i < member->facets->len; i++)
    {
      Facet *facet = member->facets->pdata[i];
      if (g_str_equal (facet->key, key))
        return facet->value;
    }
  return NULL;
}

/* The D-Bus specification: a member is deprecated only if it says so. */
static void
add_deprecated (Member *member, GDBusAnnotationInfo **annotations)
{
  const char *value = g_dbus_annotation_info_lookup (annotations, DEPRECATED);
  add_facet (member, g_strdup ("Deprecated"), g_strdup (value ? value : "false"));
}

static void
add_args (Member *member, GDBusArgInfo **args, const char *direction, guint *n)
{
  for (guint i = 0; args && args[i]; i++)
    add_facet (member, g_strdup_printf ("argument %u", ++*n),
               g_strdup_printf ("%s%s%s %s", direction ? direction : "", direction ? " " : "",
                                args[i]->signature, args[i]->name ? args[i]->name : "(no name)"));
}

static const char *
access_of (GDBusPropertyInfo *property)
{
  gboolean readable = property->flags & G_DBUS_PROPERTY_INFO_FLAGS_READABLE;
  gboolean writable = property->flags & G_DBUS_PROPERTY_INFO_FLAGS_WRITABLE;
  return readable && writable ? "readwrite" : writable ? "write" : "read";
}

/* A property without the annotation takes the interface's, and "true" if
 * neither has one, as the D-Bus specification says. sd-bus writes nothing
 * for SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE, "const" for _CONST,
 * "invalidates" for _EMITS_INVALIDATION and "false" for a property with
 * none of them. */
static const char *
emits_changed_of (GDBusInterfaceInfo *info, GDBusPropertyInfo *property)
{
  const char *value = g_dbus_annotation_info_lookup (property->annotations, EMITS_CHANGED_SIGNAL);
  if (!value)
    value = g_dbus_annotation_info_lookup (info->annotations, EMITS_CHANGED_SIGNAL);
  return value ? value : "true";
}

/* Everything about @info that the XML and the daemon must agree on, one
 * Member for the interface itself and one for each of its members. */
static GPtrArray *
describe (GDBusInterfaceInfo *info)
{
  GPtrArray *members = g_ptr_array_new_with_free_func ((GDestroyNotify) member_free);
  Member *member = member_new ("interface", info->name);

  add_deprecated (member, info->annotations);
  g_ptr_array_add (members, member);

  for (guint i = 0; info->methods && info->methods[i]; i++)
    {
      GDBusMethodInfo *method = info->methods[i];
      guint n = 0;
      member = member_new ("method", method->name);
      add_args (member, method->in_args, "in", &n);
      add_args (member, method->out_args, "out", &n);
      add_deprecated (member, method->annotations);
      g_ptr_array_add (members, member);
    }
  for (guint i = 0; info->signals && info->signals[i]; i++)
    {
      GDBusSignalInfo *signal = info->signals[i];
      guint n = 0;
      member = member_new ("signal", signal->name);
      add_args (member, signal->args, NULL, &n);
      add_deprecated (member, signal->annotations);
      g_ptr_array_add (members, member);
    }
  for (guint i = 0; info->properties && info->properties[i]; i++)
    {
      GDBusPropertyInfo *property = info->properties[i];
      member = member_new ("property", property->name);
      add_facet (member, g_strdup ("type"), g_strdup (property->signature));
      add_facet (member, g_strdup ("access"), g_strdup (access_of (property)));
      add_facet (member, g_strdup ("EmitsChangedSignal"),
                 g_strdup (emits_changed_of (info, property)));
      add_deprecated (member, property->annotations);
      g_ptr_array_add (members, member);
    }
  return members;
}

static Member *
find_member (GPtrArray *members, const char *what)
{
  for (guint i = 0; i < members->len; i++)
    {
      Member *member = members->pdata[i];
      if (g_str_equal (member->what, what))
        return member;
    }
  return NULL;
}

static void
compare_facets (GString *diff, const char *iface, Member *file, Member *live)
{
  g_autoptr (GPtrArray) keys = g_ptr_array_new ();

  for (guint i = 0; i < file->facets->len; i++)
    g_ptr_array_add (keys, ((Facet *) file->facets->pdata[i])->key);
  for (guint i = 0; i < live->facets->len; i++)
    {
      const char *key = ((Facet *) live->facets->pdata[i])->key;
      if (!facet_value (file, key))
        g_ptr_array_add (keys, (gpointer) key);
    }

  for (guint i = 0; i < keys->len; i++)
    {
      const char *key = keys->pdata[i];
      const char *want = facet_value (file, key);
      const char *got = facet_value (live, key);
      if (g_strcmp0 (want, got) == 0)
        continue;
      g_autofree char *want_text = want ? g_strdup_printf ("\"%s\"", want) : g_strdup ("absent");
      g_autofree char *got_text = got ? g_strdup_printf ("\"%s\"", got) : g_strdup ("absent");
      g_string_append_printf (diff, "  %s %s: %s is %s in the XML, %s in the daemon\n",
                              iface, file->what, key, want_text, got_text);
    }
}

/* Appends to @diff, one line each, every way @live differs from @file. */
static void
compare_interface (GString *diff, GDBusInterfaceInfo *file, GDBusInterfaceInfo *live)
{
  g_autoptr (GPtrArray) want = describe (file);
  g_autoptr (GPtrArray) got = describe (live);

  for (guint i = 0; i < want->len; i++)
    {
      Member *member = want->pdata[i];
      Member *other = find_member (got, member->what);
      if (other)
        compare_facets (diff, file->name, member, other);
      else
        g_string_append_printf (diff, "  %s %s: only in the XML\n", file->name, member->what);
    }
  for (guint i = 0; i < got->len; i++)
    {
      Member *member = got->pdata[i];
      if (!find_member (want, member->what))
        g_string_append_printf (diff, "  %s %s: only in the daemon\n", file->name, member->what);
    }
}

static GDBusNodeInfo *
parse_node (const char *xml, const char *where)
{
  g_autoptr (GError) error = NULL;
  GDBusNodeInfo *node = g_dbus_node_info_new_for_xml (xml, &error);

  if (!node)
    g_error ("%s: %s", where, error->message);
  return node;
}

/* The interface declared by introspection/@file, which must be the one
 * the file is named after and the only one in it. */
static GDBusNodeInfo *
load_file (const char *dir, const char *file, GString *diff)
{
  g_autofree char *path = g_build_filename (dir, file, NULL);
  g_autofree char *xml = NULL;
  g_autofree char *iface = g_strndup (file, strlen (file) - strlen (".xml"));
  g_autoptr (GError) error = NULL;
  GDBusNodeInfo *node;
  guint n = 0;

  if (!g_file_get_contents (path, &xml, NULL, &error))
    g_error ("%s", error->message);
  node = parse_node (xml, path);
  while (node->interfaces && node->interfaces[n])
    n++;
  if (n != 1 || !g_str_equal (node->interfaces[0]->name, iface))
    g_string_append_printf (diff, "  %s: declares %u interfaces; it should declare %s alone\n",
                            file, n, iface);
  return node;
}

/* Every interface the object at @path serves, but the standard ones, is
 * compared with its file; @served collects their names. */
static void
compare_object (Fixture *f, const char *path, GHashTable *files, GHashTable *served,
                GString *diff)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, path,
                                                  "org.freedesktop.DBus.Introspectable",
                                                  "Introspect", NULL, NULL, NULL);
  const char *xml = NULL;
  g_autoptr (GDBusNodeInfo) node = NULL;

  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_read (reply, "s", &xml), >=, 0);
  node = parse_node (xml, path);

  for (guint i = 0; node->interfaces && node->interfaces[i]; i++)
    {
      GDBusInterfaceInfo *live = node->interfaces[i];
      if (g_str_has_prefix (live->name, "org.freedesktop.DBus."))
        continue;
      g_hash_table_add (served, g_strdup (live->name));
      GDBusNodeInfo *file = g_hash_table_lookup (files, live->name);
      GDBusInterfaceInfo *declared = file ? g_dbus_node_info_lookup_interface (file, live->name)
                                          : NULL;
      if (declared)
        compare_interface (diff, declared, live);
      else
        g_string_append_printf (diff, "  %s: served at %s but has no file in introspection/\n",
                                live->name, path);
    }
}

static void
test_api (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = g_build_filename (g_getenv ("MICROVMD_SOURCE_DIR"), "introspection", NULL);
  g_autoptr (GHashTable) files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                        (GDestroyNotify) g_dbus_node_info_unref);
  g_autoptr (GHashTable) served = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GString) diff = g_string_new ("");
  g_autoptr (GError) error = NULL;
  g_autoptr (GDir) listing = g_dir_open (dir, 0, &error);
  const char *file;

  g_assert_no_error (error);
  while ((file = g_dir_read_name (listing)))
    if (g_str_has_suffix (file, ".xml"))
      g_hash_table_insert (files, g_strndup (file, strlen (file) - strlen (".xml")),
                           load_file (dir, file, diff));
  g_assert_cmpuint (g_hash_table_size (files), >, 0);

  mv_test_env_stop_daemon (f->env, SIGTERM);
  write_cached_image (f);
  mv_test_env_start_daemon (f->env, NULL);

  g_autofree char *machine = client_create (f->client,
    "{\"name\":\"i\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}", 0, NULL, NULL);
  g_assert_nonnull (machine);
  compare_object (f, MV_MANAGER_PATH, files, served, diff);
  compare_object (f, machine, files, served, diff);
  {
    g_autofree char *image = NULL;

    g_assert_cmpint (sd_bus_path_encode (MV_IMAGE_PREFIX, FAKE_IMAGE_HEX, &image), >=, 0);
    compare_object (f, image, files, served, diff);
  }
  g_autoptr (sd_bus_message) volume = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                   "CreateVolume", NULL, NULL, "s",
                                                   "{\"name\":\"i\",\"size_bytes\":16777216}");
  const char *volume_path = NULL;
  g_assert_nonnull (volume);
  g_assert_cmpint (sd_bus_message_read (volume, "o", &volume_path), >=, 0);
  compare_object (f, volume_path, files, served, diff);
  g_autoptr (sd_bus_message) network = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                    "CreateNetwork", NULL, NULL, "s",
                                                    "{\"name\":\"i\",\"subnet\":\"10.1.0.0/24\"}");
  const char *network_path = NULL;
  g_assert_nonnull (network);
  g_assert_cmpint (sd_bus_message_read (network, "o", &network_path), >=, 0);
  compare_object (f, network_path, files, served, diff);

  GHashTableIter iter;
  gpointer iface;
  g_hash_table_iter_init (&iter, files);
  while (g_hash_table_iter_next (&iter, &iface, NULL))
    if (!g_hash_table_contains (served, iface) && !g_strv_contains (declared_only, iface))
      g_string_append_printf (diff, "  %s: declared in introspection/ but not served\n",
                              (char *) iface);

  if (diff->len)
    g_test_fail_printf ("The daemon differs from introspection/:\n%s", diff->str);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/introspection/api", Fixture, NULL, fixture_setup_netns, test_api, fixture_teardown);
  return g_test_run ();
}
