/* org.microvmd1.Volume: one object per volume. Create and Delete run the
 * volume store in worker threads and reply from the main thread;
 * AttachedTo and HeldBy follow the machines, announced at most once per
 * main loop turn and only when they differ from what was announced. */
#include "volume-object.h"
#include "core/errors.h"
#include "names.h"
#include "polkit.h"

#include <errno.h>
#include <string.h>

struct _MvVolumeObjects {
  MvBusService  *service;
  MvVolumeStore *store;
  GHashTable    *announced;     /* id → "AttachedTo paths\nHeldBy path", as last announced */
  guint          refresh_id;
};

char *
mv_volume_object_path (const char *id)
{
  char *path = NULL;

  if (sd_bus_path_encode (MV_VOLUME_PREFIX, id, &path) < 0)
    g_abort ();
  return path;
}

/* ---- who mounts a volume ---- */

static const MvMount *
mounted_by (MvMachine *machine, const char *name)
{
  const MvSpec *spec = machine->config->spec;

  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = g_ptr_array_index (spec->mounts, i);

      if (mount->type == MV_MOUNT_VOLUME && g_strcmp0 (mount->source, name) == 0)
        return mount;
    }
  return NULL;
}

/* The machines whose specs mount @name (MvMachine*, by name). */
static GPtrArray *
attached_to (MvVolumeObjects *objects, const char *name)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_list (mv_bus_service_reconciler (objects->service));
  GPtrArray *attached = g_ptr_array_new ();

  for (guint i = 0; i < machines->len; i++)
    if (mounted_by (machines->pdata[i], name) != NULL)
      g_ptr_array_add (attached, machines->pdata[i]);
  return attached;
}

/* The machine holding @name writable while it holds reservations. */
static MvMachine *
held_by (GPtrArray *attached, const char *name)
{
  for (guint i = 0; i < attached->len; i++)
    {
      MvMachine *machine = attached->pdata[i];

      if (!mounted_by (machine, name)->read_only &&
          mv_state_holds_reservations (machine->status->state))
        return machine;
    }
  return NULL;
}

static char *
holders_text (MvVolumeObjects *objects, const char *name)
{
  g_autoptr (GPtrArray) attached = attached_to (objects, name);
  MvMachine *holder = held_by (attached, name);
  GString *text = g_string_new (NULL);

  for (guint i = 0; i < attached->len; i++)
    g_string_append_printf (text, "%s ", ((MvMachine *) attached->pdata[i])->id);
  g_string_append_printf (text, "\n%s", holder ? holder->id : "");
  return g_string_free (text, FALSE);
}

/* ---- properties ---- */

static int
volume_find (sd_bus *bus, const char *path, const char *interface, void *userdata,
             void **found, sd_bus_error *error)
{
  MvVolumeObjects *objects = userdata;
  g_autofree char *id = NULL;
  g_autoptr (MvVolume) volume = NULL;

  if (sd_bus_path_decode (path, MV_VOLUME_PREFIX, &id) <= 0 || !id)
    return 0;
  volume = mv_volume_store_find (objects->store, id);
  if (volume == NULL || g_strcmp0 (volume->id, id) != 0)
    return 0;
  *found = objects;
  return 1;
}

static int
volume_enumerate (sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                  sd_bus_error *error)
{
  MvVolumeObjects *objects = userdata;
  g_autoptr (GPtrArray) volumes = mv_volume_store_list (objects->store);
  char **list = calloc (volumes->len + 1, sizeof (char *));

  if (!list)
    return -ENOMEM;
  for (guint i = 0; i < volumes->len; i++)
    {
      g_autofree char *path = mv_volume_object_path (((MvVolume *) volumes->pdata[i])->id);

      list[i] = strdup (path);
    }
  *nodes = list;
  return 1;
}

/* The volume at @path, a copy; NULL (with -ENOENT) if it went meanwhile. */
static MvVolume *
volume_at (MvVolumeObjects *objects, const char *path)
{
  g_autofree char *id = NULL;

  if (sd_bus_path_decode (path, MV_VOLUME_PREFIX, &id) <= 0 || !id)
    return NULL;
  return mv_volume_store_find (objects->store, id);
}

static int
get_property (sd_bus *bus, const char *path, const char *interface, const char *property,
              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvVolumeObjects *objects = userdata;
  g_autoptr (MvVolume) volume = volume_at (objects, path);
  g_autoptr (GPtrArray) attached = NULL;
  MvMachine *holder;
  int r;

  if (volume == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The volume was deleted");
  if (g_str_equal (property, "Id"))
    return sd_bus_message_append (reply, "s", volume->id);
  if (g_str_equal (property, "Name"))
    return sd_bus_message_append (reply, "s", volume->name);
  if (g_str_equal (property, "SizeBytes"))
    return sd_bus_message_append (reply, "t", volume->size_bytes);
  if (g_str_equal (property, "CreatedAt"))
    return sd_bus_message_append (reply, "t", (guint64) volume->created_at);

  attached = attached_to (objects, volume->name);
  if (g_str_equal (property, "HeldBy"))
    {
      holder = held_by (attached, volume->name);
      if (holder == NULL)
        return sd_bus_message_append (reply, "o", "/");
      return sd_bus_message_append (reply, "o", mv_bus_view (objects->service, holder)->path);
    }
  r = sd_bus_message_open_container (reply, 'a', "o");
  for (guint i = 0; r >= 0 && i < attached->len; i++)
    r = sd_bus_message_append (reply, "o", mv_bus_view (objects->service, attached->pdata[i])->path);
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

/* ---- Delete ---- */

typedef struct {
  MvVolumeObjects *objects;
  sd_bus_message  *call;
  MvVolume        *volume;
  guint64          size_bytes;
} VolumeCall;

static void
volume_call_free (VolumeCall *vc)
{
  g_clear_pointer (&vc->call, sd_bus_message_unref);
  mv_volume_free (vc->volume);
  g_free (vc);
}

/* The task's own call: polkit frees the one it was given once the
 * authorized function returns. */
static VolumeCall *
volume_call_take (VolumeCall *vc, sd_bus_message *call)
{
  VolumeCall *taken = g_new0 (VolumeCall, 1);

  taken->objects = vc->objects;
  taken->volume = g_steal_pointer (&vc->volume);
  taken->call = sd_bus_message_ref (call);
  return taken;
}

static void
announce_added (MvVolumeObjects *objects, const char *id, const char *name)
{
  g_autofree char *path = mv_volume_object_path (id);

  g_hash_table_insert (objects->announced, g_strdup (id), holders_text (objects, name));
  sd_bus_emit_object_added (mv_bus_service_bus (objects->service), path);
}

static void
delete_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  VolumeCall *vc = task_data;
  GError *error = NULL;

  if (mv_volume_store_delete (vc->objects->store, vc->volume->id, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
on_deleted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  VolumeCall *vc = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      g_warning ("Volume %s (%s) could not be deleted: %s", vc->volume->name, vc->volume->id,
                 error->message);
      /* Still there (or half there, swept at the next start): shown again. */
      if (!g_error_matches (error, MV_ERROR, MV_ERROR_NOT_FOUND))
        {
          g_autoptr (MvVolume) still = mv_volume_store_find (vc->objects->store, vc->volume->id);

          if (still != NULL)
            announce_added (vc->objects, still->id, still->name);
        }
      mv_bus_reply_gerror (vc->call, error);
      return;
    }
  g_message ("Volume %s (%s) deleted", vc->volume->name, vc->volume->id);
  sd_bus_reply_method_return (vc->call, NULL);
}

static void
do_delete (sd_bus_message *call, gboolean root, gpointer user_data)
{
  VolumeCall *vc = user_data;
  MvVolumeObjects *objects = vc->objects;
  g_autoptr (GPtrArray) attached = NULL;
  g_autofree char *path = mv_volume_object_path (vc->volume->id);
  g_autoptr (MvVolume) now = mv_volume_store_find (objects->store, vc->volume->id);

  if (now == NULL)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "Volume %s was deleted",
                                  vc->volume->name);
      return;
    }
  attached = attached_to (objects, vc->volume->name);
  if (attached->len > 0)
    {
      MvMachine *machine = attached->pdata[0];

      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_STATE,
                                  "Volume %s is mounted by machine %s%s: change or delete the "
                                  "machine first", vc->volume->name, machine->config->spec->name,
                                  attached->len > 1 ? " and others" : "");
      return;
    }
  /* Announced while the object can still be found. */
  sd_bus_emit_object_removed (mv_bus_service_bus (objects->service), path);
  g_hash_table_remove (objects->announced, vc->volume->id);

  mv_bus_run_in_thread (delete_in_thread, volume_call_take (vc, call), (GDestroyNotify) volume_call_free, on_deleted);
}

static int
method_delete (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvVolumeObjects *objects = userdata;
  VolumeCall *vc;
  MvVolume *volume = volume_at (objects, sd_bus_message_get_path (m));

  if (volume == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The volume was deleted");
  const char *details[] = {
    "volume", volume->name,
    "volume_id", volume->id,
    "verb", "delete",
    NULL,
  };
  vc = g_new0 (VolumeCall, 1);
  vc->objects = objects;
  vc->volume = volume;
  mv_polkit_check (m, MV_ACTION_VOLUME_DELETE, details, do_delete, vc,
                   (GDestroyNotify) volume_call_free);
  return 1;
}

/* ---- CreateVolume ---- */

static void
create_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  VolumeCall *vc = task_data;
  GError *error = NULL;
  MvVolume *volume = mv_volume_store_create (vc->objects->store, vc->volume->name,
                                             vc->volume->size_bytes, &error);

  if (volume == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, volume, (GDestroyNotify) mv_volume_free);
}

static void
on_created (GObject *source, GAsyncResult *result, gpointer user_data)
{
  VolumeCall *vc = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  g_autoptr (MvVolume) volume = g_task_propagate_pointer (G_TASK (result), &error);
  g_autofree char *path = NULL;

  if (volume == NULL)
    {
      mv_bus_reply_gerror (vc->call, error);
      return;
    }
  g_message ("Volume %s (%s) created, %" G_GUINT64_FORMAT " bytes", volume->name, volume->id,
             volume->size_bytes);
  announce_added (vc->objects, volume->id, volume->name);
  path = mv_volume_object_path (volume->id);
  sd_bus_reply_method_return (vc->call, "o", path);
}

static void
do_create (sd_bus_message *call, gboolean root, gpointer user_data)
{
  VolumeCall *vc = user_data;
  g_autoptr (GError) error = NULL;
  const char *json = NULL;

  if (sd_bus_message_read (call, "s", &json) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (s)");
      return;
    }
  vc->volume = mv_volume_spec_from_json (json, &error);
  if (vc->volume == NULL)
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  mv_bus_run_in_thread (create_in_thread, volume_call_take (vc, call), (GDestroyNotify) volume_call_free, on_created);
}

int
mv_volume_objects_method_create (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvVolumeObjects *objects = mv_bus_service_volumes (userdata);
  const char *json = NULL;
  g_autofree char *name = NULL;
  VolumeCall *vc;
  int r = sd_bus_message_read (m, "s", &json);

  if (r < 0)
    return r;
  if (objects == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_UNSUPPORTED, "This host keeps no volumes");
  if (strlen (json) > MV_VOLUME_SPEC_MAX_BYTES)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "spec: %zu bytes, more than the limit of %d", strlen (json),
                              MV_VOLUME_SPEC_MAX_BYTES);
  sd_bus_message_rewind (m, TRUE);
  name = mv_spec_json_peek_name (json);
  const char *details[] = {
    "volume", name ? name : "",
    "verb", "create",
    NULL,
  };
  vc = g_new0 (VolumeCall, 1);
  vc->objects = objects;
  mv_polkit_check (m, MV_ACTION_VOLUME_CREATE, details, do_create, vc,
                   (GDestroyNotify) volume_call_free);
  return 1;
}

/* ---- announcing ---- */

static gboolean
on_refresh (gpointer user_data)
{
  MvVolumeObjects *objects = user_data;
  g_autoptr (GPtrArray) volumes = mv_volume_store_list (objects->store);

  objects->refresh_id = 0;
  for (guint i = 0; i < volumes->len; i++)
    {
      MvVolume *volume = volumes->pdata[i];
      const char *before = g_hash_table_lookup (objects->announced, volume->id);
      g_autofree char *now = NULL;
      g_autofree char *path = NULL;
      const char *nl_before, *nl_now;

      if (before == NULL)
        continue;   /* not announced yet: its InterfacesAdded carries all */
      now = holders_text (objects, volume->name);
      if (g_str_equal (before, now))
        continue;
      path = mv_volume_object_path (volume->id);
      nl_before = strchr (before, '\n');
      nl_now = strchr (now, '\n');
      if ((nl_before - before) != (nl_now - now) || strncmp (before, now, nl_now - now) != 0)
        sd_bus_emit_properties_changed (mv_bus_service_bus (objects->service), path,
                                        MV_VOLUME_IFACE, "AttachedTo", NULL);
      if (!g_str_equal (nl_before, nl_now))
        sd_bus_emit_properties_changed (mv_bus_service_bus (objects->service), path,
                                        MV_VOLUME_IFACE, "HeldBy", NULL);
      g_hash_table_insert (objects->announced, g_strdup (volume->id), g_steal_pointer (&now));
    }
  return G_SOURCE_REMOVE;
}

void
mv_volume_objects_machines_changed (MvVolumeObjects *objects)
{
  if (objects != NULL && objects->refresh_id == 0)
    objects->refresh_id = g_idle_add (on_refresh, objects);
}

static const sd_bus_vtable volume_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Id", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Name", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("SizeBytes", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("AttachedTo", "ao", get_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("HeldBy", "o", get_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_METHOD_WITH_ARGS ("Delete", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_delete,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_VTABLE_END
};

int
mv_volume_objects_register (MvVolumeObjects *objects)
{
  sd_bus *bus = mv_bus_service_bus (objects->service);
  g_autoptr (GPtrArray) volumes = mv_volume_store_list (objects->store);
  int r = sd_bus_add_fallback_vtable (bus, NULL, MV_VOLUME_PREFIX, MV_VOLUME_IFACE,
                                      volume_vtable, volume_find, objects);

  if (r >= 0)
    r = sd_bus_add_node_enumerator (bus, NULL, MV_VOLUME_PREFIX, volume_enumerate, objects);
  for (guint i = 0; r >= 0 && i < volumes->len; i++)
    {
      MvVolume *volume = volumes->pdata[i];

      g_hash_table_insert (objects->announced, g_strdup (volume->id),
                           holders_text (objects, volume->name));
    }
  return r;
}

MvVolumeObjects *
mv_volume_objects_new (MvBusService *service, MvVolumeStore *store)
{
  MvVolumeObjects *objects = g_new0 (MvVolumeObjects, 1);

  objects->service = service;
  objects->store = store;
  objects->announced = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return objects;
}

void
mv_volume_objects_free (MvVolumeObjects *objects)
{
  if (objects == NULL)
    return;
  g_clear_handle_id (&objects->refresh_id, g_source_remove);
  g_hash_table_unref (objects->announced);
  g_free (objects);
}
