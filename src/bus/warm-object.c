/* org.microvmd1.WarmImage: one object per warm template in the
 * reconciler's table, and Manager.BuildWarmImage, which builds one ahead
 * of the first start that would. */
#include "warm-object.h"
#include "bus-util.h"
#include "manager-object.h"
#include "core/errors.h"
#include "names.h"

#include <errno.h>
#include <string.h>

char *
mv_warm_object_path (const char *key)
{
  char *path = NULL;

  if (sd_bus_path_encode (MV_WARM_IMAGE_PREFIX, key, &path) < 0)
    g_abort ();
  return path;
}

static const MvSnapshot *
template_at (MvBusService *service, const char *path)
{
  g_autofree char *key = NULL;

  if (sd_bus_path_decode (path, MV_WARM_IMAGE_PREFIX, &key) <= 0 || !key)
    return NULL;
  return mv_reconciler_lookup_warm (mv_bus_service_reconciler (service), key);
}

static int
warm_find (sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
           sd_bus_error *error)
{
  if (!template_at (userdata, path))
    return 0;
  *found = userdata;
  return 1;
}

static int
warm_enumerate (sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                sd_bus_error *error)
{
  g_autoptr (GPtrArray) list = mv_reconciler_list_warm (mv_bus_service_reconciler (userdata));
  char **paths = calloc (list->len + 1, sizeof (char *));

  if (!paths)
    return -ENOMEM;
  for (guint i = 0; i < list->len; i++)
    paths[i] = mv_warm_object_path (((const MvSnapshot *) list->pdata[i])->id);
  *nodes = paths;
  return 1;
}

static int
get_property (sd_bus *bus, const char *path, const char *interface, const char *property,
              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  const MvSnapshot *t = template_at (userdata, path);

  if (!t)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The warm template was removed");
  if (g_str_equal (property, "Key"))
    return sd_bus_message_append (reply, "s", t->id);
  if (g_str_equal (property, "HypervisorType"))
    return sd_bus_message_append (reply, "s", t->hypervisor_type ? t->hypervisor_type : "");
  if (g_str_equal (property, "HypervisorVersion"))
    return sd_bus_message_append (reply, "s", t->hypervisor_version ? t->hypervisor_version : "");
  if (g_str_equal (property, "VCPUs"))
    return sd_bus_message_append (reply, "u", t->vcpus);
  if (g_str_equal (property, "MemoryBytes"))
    return sd_bus_message_append (reply, "t", t->memory_bytes);
  if (g_str_equal (property, "ImageDigest"))
    return sd_bus_message_append (reply, "s", t->image_digest ? t->image_digest : "");
  if (g_str_equal (property, "SizeBytes"))
    return sd_bus_message_append (reply, "t", t->size_bytes);
  if (g_str_equal (property, "CreatedAt"))
    return sd_bus_message_append (reply, "t", (guint64) t->created_at);
  if (g_str_equal (property, "Spec"))
    {
      g_autofree char *json = mv_spec_to_json (t->spec, FALSE);

      return sd_bus_message_append (reply, "s", json);
    }
  return sd_bus_error_setf (error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "No property %s", property);
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The machines started from the template: their overlay disks and first
 * guests were its. */
static int
get_used_by (sd_bus *bus, const char *path, const char *interface, const char *property,
             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  const MvSnapshot *t = template_at (userdata, path);
  g_autoptr (GPtrArray) machines = NULL;
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  int r;

  if (!t)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The warm template was removed");
  machines = mv_reconciler_list (mv_bus_service_reconciler (userdata));
  for (guint i = 0; i < machines->len; i++)
    {
      const MvMachine *machine = machines->pdata[i];

      if (!machine->gone && g_strcmp0 (machine->status->warm_template, t->id) == 0)
        g_ptr_array_add (paths, mv_machine_object_path (machine->id));
    }
  g_ptr_array_sort (paths, compare_strings);
  r = sd_bus_message_open_container (reply, 'a', "o");
  for (guint i = 0; r >= 0 && i < paths->len; i++)
    r = sd_bus_message_append (reply, "o", paths->pdata[i]);
  return r < 0 ? r : sd_bus_message_close_container (reply);
}

void
mv_warm_objects_used_by_changed (MvBusService *service, const char *key)
{
  g_autofree char *path = NULL;

  if (!mv_reconciler_lookup_warm (mv_bus_service_reconciler (service), key))
    return;
  path = mv_warm_object_path (key);
  sd_bus_emit_properties_changed (mv_bus_service_bus (service), path, MV_WARM_IMAGE_IFACE,
                                  "UsedBy", NULL);
}

/* ---- Manager.BuildWarmImage ---- */

static void
on_built (const char *key, const GError *error, gpointer data)
{
  g_autoptr (sd_bus_message) call = data;
  g_autofree char *path = NULL;

  if (error)
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  path = mv_warm_object_path (key);
  sd_bus_reply_method_return (call, "o", path);
}

static void
do_build (sd_bus_message *call, gboolean root, gpointer user_data)
{
  MvBusService *service = user_data;
  const char *json = NULL;
  g_autoptr (GError) error = NULL;
  MvSpec *spec;

  if (sd_bus_message_read (call, "s", &json) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (s)");
      return;
    }
  spec = mv_spec_from_json (json, &error);
  if (!spec)
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  mv_reconciler_build_warm_image (mv_bus_service_reconciler (service), spec, on_built,
                                  sd_bus_message_ref (call));
}

int
mv_warm_method_build (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  /* Building a template boots a guest, as creating a machine does. */
  return mv_manager_authorize_spec_call (m, "build-warm-image", do_build, userdata, error);
}

/* ---- the objects ---- */

void
mv_warm_objects_added (MvBusService *service, const MvSnapshot *template)
{
  g_autofree char *path = mv_warm_object_path (template->id);

  sd_bus_emit_object_added (mv_bus_service_bus (service), path);
}

void
mv_warm_objects_removed (MvBusService *service, const MvSnapshot *template)
{
  g_autofree char *path = mv_warm_object_path (template->id);

  sd_bus_emit_object_removed (mv_bus_service_bus (service), path);
}

static const sd_bus_vtable warm_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Key", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("HypervisorType", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("HypervisorVersion", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("VCPUs", "u", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("MemoryBytes", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("ImageDigest", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("SizeBytes", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Spec", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  /* Every machine started from the template, thousands of them maybe: a
   * change names the property without its value, and whoever wants the
   * list asks for it. */
  SD_BUS_PROPERTY ("UsedBy", "ao", get_used_by, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
  SD_BUS_VTABLE_END
};

int
mv_warm_objects_register (MvBusService *service)
{
  sd_bus *bus = mv_bus_service_bus (service);
  int r = sd_bus_add_fallback_vtable (bus, NULL, MV_WARM_IMAGE_PREFIX, MV_WARM_IMAGE_IFACE,
                                      warm_vtable, warm_find, service);

  if (r >= 0)
    r = sd_bus_add_node_enumerator (bus, NULL, MV_WARM_IMAGE_PREFIX, warm_enumerate, service);
  return r;
}
