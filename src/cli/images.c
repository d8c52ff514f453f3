/* microvmctl pull and image: pulling with a progress bar, and the host's
 * cached images listed, removed and pruned. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "microvmctl.h"
#include "names.h"
#include "properties.h"
#include "table.h"
#include "terminal-text.h"

#define DBUS_OBJECT_MANAGER_IFACE "org.freedesktop.DBus.ObjectManager"
#define SHORT_DIGEST_LENGTH 12
#define BAR_WIDTH 30

/* ---- pull ---- */

typedef struct {
  const char *reference;
  gboolean    bar;          /* draw a progress bar on stderr */
  gboolean    drawn;
  gboolean    replied;
  sd_bus_message *reply;
  sd_bus_error    error;
} PullState;

static void
draw_bar (PullState *state, guint64 done, guint64 total)
{
  g_autofree char *done_text = mv_format_bytes (done);
  g_autofree char *total_text = total ? mv_format_bytes (total) : g_strdup ("?");
  guint filled = total ? (guint) (BAR_WIDTH * MIN (done, total) / total) : 0;
  char bar[BAR_WIDTH + 1];

  memset (bar, '#', filled);
  memset (bar + filled, '-', BAR_WIDTH - filled);
  bar[BAR_WIDTH] = '\0';
  fprintf (stderr, "\r[%s] %s / %s", bar, done_text, total_text);
  if (total)
    fprintf (stderr, " %3u%%", (guint) (100 * MIN (done, total) / total));
  fflush (stderr);
  state->drawn = TRUE;
}

static int
on_pull_progress (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  PullState *state = userdata;
  const char *reference = NULL;
  uint64_t done = 0, total = 0;

  if (sd_bus_message_read (m, "stt", &reference, &done, &total) < 0 ||
      !g_str_equal (reference, state->reference))
    return 0;
  if (state->bar)
    draw_bar (state, done, total);
  return 0;
}

static int
on_pull_reply (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  PullState *state = userdata;

  state->replied = TRUE;
  if (sd_bus_message_is_method_error (m, NULL))
    sd_bus_error_copy (&state->error, sd_bus_message_get_error (m));
  else
    state->reply = sd_bus_message_ref (m);
  return 0;
}

static int
image_digest_of (MvCtl *ctl, const char *path, char **digest, sd_bus_error *error)
{
  return sd_bus_get_property_string (ctl->bus, MV_BUS_NAME, path, MV_IMAGE_IFACE, "Digest", error, digest);
}

int
mv_cmd_pull (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) m = NULL;
  g_autofree char *digest = NULL;
  PullState state = { .reference = argv[0], .error = SD_BUS_ERROR_NULL };
  const char *path = NULL;
  int r;

  state.bar = isatty (STDERR_FILENO) && !ctl->json;
  r = mv_new_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "PullImage", &error, &m);
  if (r < 0)
    return mv_fail_bus (&error, r);
  r = sd_bus_match_signal (ctl->bus, NULL, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE, "PullProgress",
                           on_pull_progress, &state);
  if (r >= 0)
    r = sd_bus_message_append (m, "ss", argv[0], ctl->policy ? ctl->policy : "");
  /* Leaving (Ctrl-C ends the process) cancels the pull: the daemon
   * follows its caller. */
  if (r >= 0)
    r = sd_bus_call_async (ctl->bus, NULL, m, on_pull_reply, &state, ctl->timeout_usec);
  while (r >= 0 && !state.replied)
    {
      r = sd_bus_process (ctl->bus, NULL);
      if (r == 0)
        r = sd_bus_wait (ctl->bus, UINT64_MAX);
    }
  if (state.drawn)
    fputc ('\n', stderr);
  if (r < 0)
    return mv_fail ("%s", g_strerror (-r));
  if (sd_bus_error_is_set (&state.error))
    {
      r = mv_fail_bus (&state.error, -EIO);
      sd_bus_error_free (&state.error);
      return r;
    }
  r = sd_bus_message_read (state.reply, "o", &path);
  if (r >= 0)
    r = image_digest_of (ctl, path, &digest, &error);
  sd_bus_message_unref (state.reply);
  if (r < 0)
    return mv_fail_bus (&error, r);
  printf ("%s\n", digest);
  return MV_EXIT_OK;
}

/* ---- the images, in one round trip ---- */

typedef struct {
  char      *path;
  GPtrArray *props;
} ObjectInfo;

static void
object_info_free (gpointer data)
{
  ObjectInfo *info = data;

  g_free (info->path);
  g_ptr_array_unref (info->props);
  g_free (info);
}

/* From GetManagedObjects, the objects of @interface into @objects and
 * every machine's Name by path into @machine_names. */
static int
read_objects (sd_bus_message *reply, const char *interface_wanted, GPtrArray *objects,
              GHashTable *machine_names)
{
  int r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_ARRAY, "{oa{sa{sv}}}");

  while (r >= 0 && (r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_DICT_ENTRY, "oa{sa{sv}}")) > 0)
    {
      const char *path = NULL;

      r = sd_bus_message_read_basic (reply, SD_BUS_TYPE_OBJECT_PATH, &path);
      if (r >= 0)
        r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_ARRAY, "{sa{sv}}");
      while (r >= 0 && (r = sd_bus_message_enter_container (reply, SD_BUS_TYPE_DICT_ENTRY, "sa{sv}")) > 0)
        {
          const char *interface = NULL;

          r = sd_bus_message_read_basic (reply, SD_BUS_TYPE_STRING, &interface);
          if (r >= 0 && (g_str_equal (interface, interface_wanted) ||
                         g_str_equal (interface, MV_MACHINE_IFACE)))
            {
              ObjectInfo *info = g_new0 (ObjectInfo, 1);

              info->path = g_strdup (path);
              info->props = mv_properties_new ();
              r = mv_properties_read (reply, info->props);
              if (g_str_equal (interface, interface_wanted))
                g_ptr_array_add (objects, info);
              else
                {
                  g_hash_table_insert (machine_names, g_strdup (path),
                                       g_strdup (mv_properties_get_string (info->props, "Name")));
                  object_info_free (info);
                }
            }
          else if (r >= 0)
            r = sd_bus_message_skip (reply, "a{sv}");
          if (r >= 0)
            r = sd_bus_message_exit_container (reply);
        }
      if (r >= 0)
        r = sd_bus_message_exit_container (reply);
      if (r >= 0)
        r = sd_bus_message_exit_container (reply);
    }
  if (r < 0)
    return r;
  return sd_bus_message_exit_container (reply);
}

static int
list_objects (MvCtl *ctl, const char *interface, GPtrArray *objects, GHashTable *machine_names)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  int r = mv_call (ctl, MV_MANAGER_PATH, DBUS_OBJECT_MANAGER_IFACE, "GetManagedObjects", 0, &error, &reply,
                   NULL);

  if (r < 0)
    return mv_fail_bus (&error, r);
  r = read_objects (reply, interface, objects, machine_names);
  if (r < 0)
    return mv_fail (_("Failed to parse the reply from microvmd: %s"), g_strerror (-r));
  return MV_EXIT_OK;
}

/* The strings of an array property (as, ao). */
static GPtrArray *
strings_of (GPtrArray *props, const char *name)
{
  const MvProperty *prop = mv_properties_lookup (props, name);
  GPtrArray *strings = g_ptr_array_new ();

  if (prop && JSON_NODE_HOLDS_ARRAY (prop->value))
    {
      JsonArray *array = json_node_get_array (prop->value);

      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          const char *s = json_array_get_string_element (array, i);

          if (s)
            g_ptr_array_add (strings, (gpointer) s);
        }
    }
  return strings;
}

static char *
join_used_by (GPtrArray *props, GHashTable *machine_names)
{
  g_autoptr(GPtrArray) paths = strings_of (props, "UsedBy");
  g_autoptr(GString) text = g_string_new ("");

  for (guint i = 0; i < paths->len; i++)
    {
      const char *name = g_hash_table_lookup (machine_names, paths->pdata[i]);

      g_string_append_printf (text, "%s%s", i ? "," : "", name ? name : (char *) paths->pdata[i]);
    }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

/* "used_by": the names of the machines of an object's UsedBy. */
static void
add_used_by_json (JsonBuilder *b, GPtrArray *props, GHashTable *machine_names)
{
  g_autoptr(GPtrArray) users = strings_of (props, "UsedBy");

  json_builder_set_member_name (b, "used_by");
  json_builder_begin_array (b);
  for (guint j = 0; j < users->len; j++)
    {
      const char *name = g_hash_table_lookup (machine_names, users->pdata[j]);

      json_builder_add_string_value (b, name ? name : users->pdata[j]);
    }
  json_builder_end_array (b);
}

static void
print_json (JsonBuilder *b)
{
  g_autoptr(JsonNode) root = json_builder_get_root (b);
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  text = json_generator_to_data (gen, NULL);
  printf ("%s\n", text);
}

/* Newest first by the timestamp property @data names. */
static int
compare_newest_first (gconstpointer a, gconstpointer b, gpointer data)
{
  gint64 x = mv_properties_get_int ((*(ObjectInfo *const *) a)->props, data);
  gint64 y = mv_properties_get_int ((*(ObjectInfo *const *) b)->props, data);

  return x < y ? 1 : x > y ? -1 : 0;
}

static void
print_images_json (GPtrArray *images, GHashTable *machine_names)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_array (b);
  for (guint i = 0; i < images->len; i++)
    {
      ObjectInfo *info = images->pdata[i];
      g_autoptr(GPtrArray) refs = strings_of (info->props, "References");

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "digest");
      json_builder_add_string_value (b, mv_properties_get_string (info->props, "Digest"));
      json_builder_set_member_name (b, "references");
      json_builder_begin_array (b);
      for (guint j = 0; j < refs->len; j++)
        json_builder_add_string_value (b, refs->pdata[j]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "size_bytes");
      json_builder_add_int_value (b, mv_properties_get_int (info->props, "SizeBytes"));
      json_builder_set_member_name (b, "pulled_at");
      json_builder_add_int_value (b, mv_properties_get_int (info->props, "PulledAt"));
      add_used_by_json (b, info->props, machine_names);
      json_builder_set_member_name (b, "path");
      json_builder_add_string_value (b, info->path);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  print_json (b);
}

static void
print_images_table (GPtrArray *images, GHashTable *machine_names)
{
  g_autoptr(MvTable) table = NULL;

  if (images->len == 0)
    {
      printf (_("No images.\n"));
      return;
    }
  table = mv_table_new ("DIGEST", "REFERENCES", "SIZE", "PULLED", "USED BY", NULL);
  mv_table_set_align_right (table, 2);
  for (guint i = 0; i < images->len; i++)
    {
      ObjectInfo *info = images->pdata[i];
      const char *digest = mv_properties_get_string (info->props, "Digest");
      const char *hex = strchr (digest, ':');
      g_autofree char *short_digest = g_strndup (hex ? hex + 1 : digest, SHORT_DIGEST_LENGTH);
      g_autoptr(GPtrArray) refs = strings_of (info->props, "References");
      g_autofree char *joined = NULL;
      g_autofree char *refs_text = NULL;
      g_autofree char *size = mv_format_bytes ((guint64) mv_properties_get_int (info->props, "SizeBytes"));
      g_autoptr(GDateTime) when = g_date_time_new_from_unix_local (mv_properties_get_int (info->props, "PulledAt")
                                                                   / G_USEC_PER_SEC);
      g_autofree char *pulled = when ? g_date_time_format (when, "%Y-%m-%d %H:%M") : g_strdup ("-");
      g_autofree char *users = join_used_by (info->props, machine_names);
      g_autofree char *users_text = NULL;

      g_ptr_array_add (refs, NULL);
      joined = g_strjoinv (",", (char **) refs->pdata);
      refs_text = mv_terminal_text (*joined ? joined : "-", -1);
      users_text = mv_terminal_text (*users ? users : "-", -1);
      mv_table_add_row (table, short_digest, refs_text, size, pulled, users_text);
    }
  mv_table_print (table, stdout);
}

/* The image @what names: its digest, its Id or a prefix of it of at
 * least SHORT_DIGEST_LENGTH digits, or a reference it was pulled by. */
static ObjectInfo *
find_image (GPtrArray *images, const char *what)
{
  ObjectInfo *found = NULL;

  for (guint i = 0; i < images->len; i++)
    {
      ObjectInfo *info = images->pdata[i];
      const char *digest = mv_properties_get_string (info->props, "Digest");
      const char *id = mv_properties_get_string (info->props, "Id");
      g_autoptr(GPtrArray) refs = strings_of (info->props, "References");
      gboolean by_ref = FALSE;

      for (guint j = 0; j < refs->len; j++)
        by_ref = by_ref || g_str_equal (refs->pdata[j], what);
      if (g_str_equal (digest, what) || g_str_equal (id, what) || by_ref)
        return info;
      if (strlen (what) >= SHORT_DIGEST_LENGTH && g_str_has_prefix (id, what))
        {
          if (found != NULL)
            return NULL;
          found = info;
        }
    }
  return found;
}

int
mv_cmd_image (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr(GPtrArray) images = g_ptr_array_new_with_free_func (object_info_free);
  g_autoptr(GHashTable) machine_names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  const char *verb = argv[0];
  int status, r;

  if (g_str_equal (verb, "list") || g_str_equal (verb, "ls"))
    {
      if (argc != 1)
        return mv_usage_error (_("image list takes no arguments"));
      status = list_objects (ctl, MV_IMAGE_IFACE, images, machine_names);
      if (status != MV_EXIT_OK)
        return status;
      g_ptr_array_sort_with_data (images, compare_newest_first, (gpointer) "PulledAt");
      if (ctl->json)
        print_images_json (images, machine_names);
      else
        print_images_table (images, machine_names);
      return MV_EXIT_OK;
    }
  if (g_str_equal (verb, "rm"))
    {
      ObjectInfo *image;

      if (argc != 2)
        return mv_usage_error (_("image rm takes one DIGEST or REFERENCE"));
      status = list_objects (ctl, MV_IMAGE_IFACE, images, machine_names);
      if (status != MV_EXIT_OK)
        return status;
      image = find_image (images, argv[1]);
      if (image == NULL)
        return mv_fail (_("No image is called %s (or the prefix names more than one)"), argv[1]);
      r = mv_call (ctl, image->path, MV_IMAGE_IFACE, "Delete", ctl->timeout_usec, &error, NULL, NULL);
      if (r < 0)
        return mv_fail_bus (&error, r);
      printf ("%s\n", mv_properties_get_string (image->props, "Digest"));
      return MV_EXIT_OK;
    }
  if (g_str_equal (verb, "prune"))
    {
      g_auto(GStrv) removed = NULL;

      if (argc != 1)
        return mv_usage_error (_("image prune takes no arguments"));
      r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "PruneImages", ctl->timeout_usec, &error, &reply,
                   NULL);
      if (r < 0)
        return mv_fail_bus (&error, r);
      r = sd_bus_message_read_strv (reply, &removed);
      if (r < 0)
        return mv_fail (_("Failed to parse the reply from microvmd: %s"), g_strerror (-r));
      if (removed == NULL)
        removed = g_new0 (char *, 1);
      for (guint i = 0; removed[i]; i++)
        printf ("%s\n", removed[i]);
      if (!ctl->json)
        fprintf (stderr, g_dngettext (GETTEXT_PACKAGE, "Removed %u image.\n", "Removed %u images.\n",
                                      g_strv_length (removed)), g_strv_length (removed));
      return MV_EXIT_OK;
    }
  return mv_usage_error (_("Unknown image command %s (list, rm, prune)"), verb);
}

/* ---- warm templates ---- */

static void
print_warm_json (GPtrArray *templates, GHashTable *machine_names)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_array (b);
  for (guint i = 0; i < templates->len; i++)
    {
      ObjectInfo *info = templates->pdata[i];
      static const char *const strings[] = { "Key", "HypervisorType", "HypervisorVersion",
                                             "ImageDigest" };
      static const char *const string_members[] = { "key", "hypervisor_type",
                                                    "hypervisor_version", "image_digest" };
      static const char *const numbers[] = { "VCPUs", "MemoryBytes", "SizeBytes", "CreatedAt" };
      static const char *const number_members[] = { "vcpus", "memory_bytes", "size_bytes",
                                                    "created_at" };

      json_builder_begin_object (b);
      for (guint j = 0; j < G_N_ELEMENTS (strings); j++)
        {
          json_builder_set_member_name (b, string_members[j]);
          json_builder_add_string_value (b, mv_properties_get_string (info->props, strings[j]));
        }
      for (guint j = 0; j < G_N_ELEMENTS (numbers); j++)
        {
          json_builder_set_member_name (b, number_members[j]);
          json_builder_add_int_value (b, mv_properties_get_int (info->props, numbers[j]));
        }
      add_used_by_json (b, info->props, machine_names);
      json_builder_set_member_name (b, "path");
      json_builder_add_string_value (b, info->path);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  print_json (b);
}

static void
print_warm_table (GPtrArray *templates, GHashTable *machine_names)
{
  g_autoptr(MvTable) table = NULL;

  if (templates->len == 0)
    {
      printf (_("No warm templates.\n"));
      return;
    }
  table = mv_table_new ("KEY", "HYPERVISOR", "IMAGE", "VCPUS", "MEMORY", "SIZE", "BUILT",
                        "USED BY", NULL);
  mv_table_set_align_right (table, 3);
  mv_table_set_align_right (table, 4);
  mv_table_set_align_right (table, 5);
  for (guint i = 0; i < templates->len; i++)
    {
      ObjectInfo *info = templates->pdata[i];
      const char *key = mv_properties_get_string (info->props, "Key");
      const char *digest = mv_properties_get_string (info->props, "ImageDigest");
      const char *hex = strchr (digest, ':');
      g_autofree char *short_key = g_strndup (key, SHORT_DIGEST_LENGTH);
      g_autofree char *image = *digest ? g_strndup (hex ? hex + 1 : digest, SHORT_DIGEST_LENGTH)
                                       : g_strdup ("-");
      g_autofree char *hypervisor = g_strdup_printf (
        "%s %s", mv_properties_get_string (info->props, "HypervisorType"),
        mv_properties_get_string (info->props, "HypervisorVersion"));
      g_autofree char *hypervisor_text = mv_terminal_text (hypervisor, -1);
      g_autofree char *vcpus = g_strdup_printf ("%" G_GINT64_FORMAT,
                                                mv_properties_get_int (info->props, "VCPUs"));
      g_autofree char *memory = mv_format_bytes ((guint64) mv_properties_get_int (info->props,
                                                                                  "MemoryBytes"));
      g_autofree char *size = mv_format_bytes ((guint64) mv_properties_get_int (info->props,
                                                                                "SizeBytes"));
      g_autoptr(GDateTime) when = g_date_time_new_from_unix_local (
        mv_properties_get_int (info->props, "CreatedAt") / G_USEC_PER_SEC);
      g_autofree char *built = when ? g_date_time_format (when, "%Y-%m-%d %H:%M") : g_strdup ("-");
      g_autofree char *users = join_used_by (info->props, machine_names);
      g_autofree char *users_text = mv_terminal_text (*users ? users : "-", -1);

      mv_table_add_row (table, short_key, hypervisor_text, image, vcpus, memory, size, built,
                        users_text);
    }
  mv_table_print (table, stdout);
}

int
mv_cmd_warm (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  const char *verb = argv[0];
  int status, r;

  if (g_str_equal (verb, "list") || g_str_equal (verb, "ls"))
    {
      g_autoptr(GPtrArray) templates = g_ptr_array_new_with_free_func (object_info_free);
      g_autoptr(GHashTable) machine_names = g_hash_table_new_full (g_str_hash, g_str_equal,
                                                                   g_free, g_free);

      if (argc != 1)
        return mv_usage_error (_("warm list takes no arguments"));
      status = list_objects (ctl, MV_WARM_IMAGE_IFACE, templates, machine_names);
      if (status != MV_EXIT_OK)
        return status;
      g_ptr_array_sort_with_data (templates, compare_newest_first, (gpointer) "CreatedAt");
      if (ctl->json)
        print_warm_json (templates, machine_names);
      else
        print_warm_table (templates, machine_names);
      return MV_EXIT_OK;
    }
  if (g_str_equal (verb, "build"))
    {
      g_autoptr(sd_bus_message) reply = NULL;
      g_autofree char *spec = NULL, *key = NULL;
      const char *path = NULL;

      if (argc != 2)
        return mv_usage_error (_("warm build takes one spec file (- for standard input)"));
      status = mv_read_spec (argv[1], &spec);
      if (status != MV_EXIT_OK)
        return status;
      r = mv_call (ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "BuildWarmImage", ctl->timeout_usec,
                   &error, &reply, "s", spec);
      if (r >= 0)
        r = sd_bus_message_read (reply, "o", &path);
      if (r >= 0)
        r = sd_bus_get_property_string (ctl->bus, MV_BUS_NAME, path, MV_WARM_IMAGE_IFACE, "Key",
                                        &error, &key);
      if (r < 0)
        return mv_fail_bus (&error, r);
      printf ("%s\n", key);
      return MV_EXIT_OK;
    }
  return mv_usage_error (_("Unknown warm command %s (list, build)"), verb);
}
