/* org.microvmd1.Snapshot: one object per snapshot in the reconciler's
 * table, and the methods that make and use them on the manager and the
 * machines. Every call is authorized first; what it asks is checked again
 * once it is, since the table may have changed meanwhile. */
#include "snapshot-object.h"
#include "bus-util.h"
#include "machine-object.h"
#include "core/errors.h"
#include "names.h"
#include "polkit.h"

#include <errno.h>
#include <string.h>

char *
mv_snapshot_object_path (const char *id)
{
  char *path = NULL;

  if (sd_bus_path_encode (MV_SNAPSHOT_PREFIX, id, &path) < 0)
    g_abort ();
  return path;
}

static const MvSnapshot *
snapshot_at (MvBusService *service, const char *path)
{
  g_autofree char *id = NULL;

  if (sd_bus_path_decode (path, MV_SNAPSHOT_PREFIX, &id) <= 0 || !id)
    return NULL;
  return mv_reconciler_lookup_snapshot (mv_bus_service_reconciler (service), id);
}

static int
snapshot_find (sd_bus *bus, const char *path, const char *interface, void *userdata,
               void **found, sd_bus_error *error)
{
  if (!snapshot_at (userdata, path))
    return 0;
  *found = userdata;
  return 1;
}

static int
snapshot_enumerate (sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                    sd_bus_error *error)
{
  g_autoptr (GPtrArray) list = mv_reconciler_list_snapshots (mv_bus_service_reconciler (userdata));
  char **paths = calloc (list->len + 1, sizeof (char *));

  if (!paths)
    return -ENOMEM;
  for (guint i = 0; i < list->len; i++)
    paths[i] = mv_snapshot_object_path (((const MvSnapshot *) list->pdata[i])->id);
  *nodes = paths;
  return 1;
}

static int
get_property (sd_bus *bus, const char *path, const char *interface, const char *property,
              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  const MvSnapshot *s = snapshot_at (userdata, path);

  if (!s)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The snapshot was deleted");
  if (g_str_equal (property, "Id"))
    return sd_bus_message_append (reply, "s", s->id);
  if (g_str_equal (property, "Name"))
    return sd_bus_message_append (reply, "s", s->name);
  if (g_str_equal (property, "MachineId"))
    return sd_bus_message_append (reply, "s", s->machine_id);
  if (g_str_equal (property, "MachineName"))
    return sd_bus_message_append (reply, "s", s->machine_name);
  if (g_str_equal (property, "Kind"))
    return sd_bus_message_append (reply, "s", mv_snapshot_kind_to_string (s->kind));
  if (g_str_equal (property, "HypervisorType"))
    return sd_bus_message_append (reply, "s", s->hypervisor_type ? s->hypervisor_type : "");
  if (g_str_equal (property, "HypervisorVersion"))
    return sd_bus_message_append (reply, "s", s->hypervisor_version ? s->hypervisor_version : "");
  if (g_str_equal (property, "VCPUs"))
    return sd_bus_message_append (reply, "u", s->vcpus);
  if (g_str_equal (property, "MemoryBytes"))
    return sd_bus_message_append (reply, "t", s->memory_bytes);
  if (g_str_equal (property, "ImageDigest"))
    return sd_bus_message_append (reply, "s", s->image_digest ? s->image_digest : "");
  if (g_str_equal (property, "SizeBytes"))
    return sd_bus_message_append (reply, "t", s->size_bytes);
  if (g_str_equal (property, "CreatedAt"))
    return sd_bus_message_append (reply, "t", (guint64) s->created_at);
  if (g_str_equal (property, "Spec"))
    {
      g_autofree char *json = mv_spec_to_json (s->spec, FALSE);

      return sd_bus_message_append (reply, "s", json);
    }
  return sd_bus_error_setf (error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "No property %s", property);
}

/* ---- calls ---- */

typedef struct {
  MvBusService   *service;
  sd_bus_message *call;        /* set once authorized */
  gboolean        root;
  char           *snapshot_id;
  char           *machine_id;
} SnapshotCall;

static void
snapshot_call_free (SnapshotCall *sc)
{
  g_clear_pointer (&sc->call, sd_bus_message_unref);
  g_free (sc->snapshot_id);
  g_free (sc->machine_id);
  g_free (sc);
}

static SnapshotCall *
snapshot_call_new (MvBusService *service, const char *snapshot_id, const char *machine_id)
{
  SnapshotCall *sc = g_new0 (SnapshotCall, 1);

  sc->service = service;
  sc->snapshot_id = g_strdup (snapshot_id);
  sc->machine_id = g_strdup (machine_id);
  return sc;
}

/* The call's own copy, kept until the operation ends: polkit frees the
 * one it was given once the authorized function returns. */
static SnapshotCall *
snapshot_call_take (SnapshotCall *sc, sd_bus_message *call, gboolean root)
{
  SnapshotCall *taken = snapshot_call_new (sc->service, sc->snapshot_id, sc->machine_id);

  taken->call = sd_bus_message_ref (call);
  taken->root = root;
  return taken;
}

static MvReconciler *
reconciler_of (SnapshotCall *sc)
{
  return mv_bus_service_reconciler (sc->service);
}

static void
authorize (sd_bus_message *m, const char *action, const char *verb, const char *machine_name,
           const char *machine_id, const char *snapshot_name, MvAuthorizedFunc func,
           SnapshotCall *sc)
{
  const char *details[] = {
    "machine", machine_name ? machine_name : "",
    "machine_id", machine_id ? machine_id : "",
    "snapshot", snapshot_name ? snapshot_name : "",
    "verb", verb,
    NULL,
  };

  mv_polkit_check (m, action, details, func, sc, (GDestroyNotify) snapshot_call_free);
}

/* Machine.CreateSnapshot */

static void
on_snapshot_taken (const MvSnapshot *snapshot, const GError *error, gpointer user_data)
{
  SnapshotCall *sc = user_data;

  if (!snapshot)
    mv_bus_reply_gerror (sc->call, error);
  else
    {
      g_autofree char *path = mv_snapshot_object_path (snapshot->id);

      sd_bus_reply_method_return (sc->call, "o", path);
    }
  snapshot_call_free (sc);
}

static void
do_create_snapshot (sd_bus_message *call, gboolean root, gpointer user_data)
{
  SnapshotCall *sc = user_data;
  MvReconciler *rec = reconciler_of (sc);
  MvMachine *machine = mv_reconciler_lookup (rec, sc->machine_id);
  g_autoptr (GError) error = NULL;
  SnapshotCall *taken;
  const char *name = NULL;

  if (!machine)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "Machine %s was deleted",
                                  sc->machine_id);
      return;
    }
  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "s", &name) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (s)");
      return;
    }
  taken = snapshot_call_take (sc, call, root);
  if (!mv_reconciler_create_snapshot (rec, machine, name, on_snapshot_taken, taken, &error))
    {
      mv_bus_reply_gerror (call, error);
      snapshot_call_free (taken);
    }
}

int
mv_snapshot_method_create (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  MvMachineView *view = machine->view;
  const char *name = NULL;
  int r = sd_bus_message_read (m, "s", &name);

  if (r < 0)
    return r;
  if (strlen (name) > MV_NAME_MAX_BYTES)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "name: %zu bytes, more than the limit of %d", strlen (name),
                              MV_NAME_MAX_BYTES);
  authorize (m, MV_ACTION_SNAPSHOT_CREATE, "create", machine->config->spec->name, machine->id,
             name, do_create_snapshot, snapshot_call_new (view->service, NULL, machine->id));
  return 1;
}

/* Snapshot.Restore */

static void
on_restored (MvMachine *machine, const GError *error, gpointer user_data)
{
  SnapshotCall *sc = user_data;

  if (!machine)
    mv_bus_reply_gerror (sc->call, error);
  else if (machine->config->desired == MV_DESIRED_RUNNING)
    mv_bus_wait (mv_bus_view (sc->service, machine), sc->call, MV_REPLY_EMPTY, sc->root);
  else
    sd_bus_reply_method_return (sc->call, NULL);
  snapshot_call_free (sc);
}

static void
do_restore (sd_bus_message *call, gboolean root, gpointer user_data)
{
  SnapshotCall *sc = user_data;
  g_autoptr (GError) error = NULL;
  SnapshotCall *taken = snapshot_call_take (sc, call, root);

  if (!mv_reconciler_restore_snapshot (reconciler_of (sc), sc->snapshot_id, on_restored, taken,
                                       &error))
    {
      mv_bus_reply_gerror (call, error);
      snapshot_call_free (taken);
    }
}

static int
method_restore (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const MvSnapshot *snapshot = snapshot_at (userdata, sd_bus_message_get_path (m));

  if (!snapshot)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The snapshot was deleted");
  authorize (m, MV_ACTION_SNAPSHOT_RESTORE, "restore", snapshot->machine_name,
             snapshot->machine_id, snapshot->name, do_restore,
             snapshot_call_new (userdata, snapshot->id, snapshot->machine_id));
  return 1;
}

/* Snapshot.Delete */

static void
on_deleted (MvMachine *machine, const GError *error, gpointer user_data)
{
  SnapshotCall *sc = user_data;

  if (error)
    mv_bus_reply_gerror (sc->call, error);
  else
    sd_bus_reply_method_return (sc->call, NULL);
  snapshot_call_free (sc);
}

static void
do_delete (sd_bus_message *call, gboolean root, gpointer user_data)
{
  SnapshotCall *sc = user_data;
  g_autoptr (GError) error = NULL;
  SnapshotCall *taken = snapshot_call_take (sc, call, root);

  if (!mv_reconciler_delete_snapshot (reconciler_of (sc), sc->snapshot_id, on_deleted, taken,
                                      &error))
    {
      mv_bus_reply_gerror (call, error);
      snapshot_call_free (taken);
    }
}

static int
method_delete (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const MvSnapshot *snapshot = snapshot_at (userdata, sd_bus_message_get_path (m));

  if (!snapshot)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The snapshot was deleted");
  authorize (m, MV_ACTION_SNAPSHOT_DELETE, "delete", snapshot->machine_name, snapshot->machine_id,
             snapshot->name, do_delete, snapshot_call_new (userdata, snapshot->id, NULL));
  return 1;
}

/* Snapshot.Fork and Manager.ForkMachine */

static void
on_forked (MvMachine *machine, gboolean existed, const GError *error, gpointer user_data)
{
  SnapshotCall *sc = user_data;

  if (!machine)
    mv_bus_reply_gerror (sc->call, error);
  else
    sd_bus_reply_method_return (sc->call, "o", mv_bus_view (sc->service, machine)->path);
  snapshot_call_free (sc);
}

static void
do_fork (sd_bus_message *call, gboolean root, gpointer user_data)
{
  SnapshotCall *sc = user_data;
  MvReconciler *rec = reconciler_of (sc);
  const char *source = NULL, *json = NULL;
  SnapshotCall *taken;
  MvMachine *machine;

  sd_bus_message_rewind (call, TRUE);
  if (sc->snapshot_id)
    {
      if (sd_bus_message_read (call, "s", &json) < 0)
        {
          sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (s)");
          return;
        }
      taken = snapshot_call_take (sc, call, root);
      mv_reconciler_fork_snapshot (rec, sc->snapshot_id, json, on_forked, taken);
      return;
    }
  if (sd_bus_message_read (call, "ss", &source, &json) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (ss)");
      return;
    }
  machine = mv_reconciler_lookup (rec, sc->machine_id);
  if (!machine)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "Machine %s was deleted", source);
      return;
    }
  taken = snapshot_call_take (sc, call, root);
  mv_reconciler_fork_machine (rec, machine, json, on_forked, taken);
}

/* The fork's name, for polkit's prompt, and its size, refused before
 * anyone is asked. */
static gboolean
check_fork_json (const char *json, char **name, sd_bus_error *error)
{
  if (strlen (json) > MV_FORK_SPEC_MAX_BYTES)
    {
      sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "spec: %zu bytes, more than the limit of %d", strlen (json),
                         MV_FORK_SPEC_MAX_BYTES);
      return FALSE;
    }
  *name = mv_spec_json_peek_name (json);
  return TRUE;
}

static int
method_fork (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const MvSnapshot *snapshot = snapshot_at (userdata, sd_bus_message_get_path (m));
  g_autofree char *name = NULL;
  const char *json = NULL;
  int r = sd_bus_message_read (m, "s", &json);

  if (r < 0)
    return r;
  if (!snapshot)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The snapshot was deleted");
  if (!check_fork_json (json, &name, error))
    return -EINVAL;
  authorize (m, MV_ACTION_MACHINE_CREATE, "create", name, NULL, snapshot->name, do_fork,
             snapshot_call_new (userdata, snapshot->id, NULL));
  return 1;
}

int
mv_snapshot_method_fork_machine (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvBusService *service = userdata;
  const char *source = NULL, *json = NULL;
  g_autofree char *name = NULL;
  MvMachine *machine;
  int r = sd_bus_message_read (m, "ss", &source, &json);

  if (r < 0)
    return r;
  machine = mv_reconciler_find (mv_bus_service_reconciler (service), source);
  if (!machine)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No machine called %s", source);
  if (!check_fork_json (json, &name, error))
    return -EINVAL;
  authorize (m, MV_ACTION_MACHINE_CREATE, "create", name, NULL, NULL, do_fork,
             snapshot_call_new (service, NULL, machine->id));
  return 1;
}

/* Manager.ListSnapshots and GetSnapshot */

int
mv_snapshot_method_list (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  g_autoptr (GPtrArray) list = mv_reconciler_list_snapshots (mv_bus_service_reconciler (userdata));
  g_autoptr (sd_bus_message) reply = NULL;
  int r = sd_bus_message_new_method_return (m, &reply);

  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "(ssso)");
  for (guint i = 0; r >= 0 && i < list->len; i++)
    {
      const MvSnapshot *s = list->pdata[i];
      g_autofree char *path = mv_snapshot_object_path (s->id);

      r = sd_bus_message_append (reply, "(ssso)", s->id, s->name, s->machine_name, path);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

int
mv_snapshot_method_get (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const char *name_or_id = NULL;
  const MvSnapshot *snapshot;
  g_autofree char *path = NULL;
  int r = sd_bus_message_read (m, "s", &name_or_id);

  if (r < 0)
    return r;
  snapshot = mv_reconciler_find_snapshot (mv_bus_service_reconciler (userdata), name_or_id);
  if (!snapshot)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No snapshot called %s", name_or_id);
  path = mv_snapshot_object_path (snapshot->id);
  return sd_bus_reply_method_return (m, "o", path);
}

/* ---- the objects ---- */

void
mv_snapshot_objects_added (MvBusService *service, const MvSnapshot *snapshot)
{
  g_autofree char *path = mv_snapshot_object_path (snapshot->id);

  sd_bus_emit_object_added (mv_bus_service_bus (service), path);
}

void
mv_snapshot_objects_removed (MvBusService *service, const MvSnapshot *snapshot)
{
  g_autofree char *path = mv_snapshot_object_path (snapshot->id);

  /* Sent while it can be found no more: its interfaces are named from the
   * vtable, which needs no object. */
  sd_bus_emit_object_removed (mv_bus_service_bus (service), path);
}

static const sd_bus_vtable snapshot_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Id", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Name", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("MachineId", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("MachineName", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Kind", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("HypervisorType", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("HypervisorVersion", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("VCPUs", "u", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("MemoryBytes", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("ImageDigest", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("SizeBytes", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Spec", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_METHOD_WITH_ARGS ("Restore", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_restore,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Fork", SD_BUS_ARGS ("s", spec_json), SD_BUS_RESULT ("o", machine),
                           method_fork, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Delete", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_delete,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_VTABLE_END
};

int
mv_snapshot_objects_register (MvBusService *service)
{
  sd_bus *bus = mv_bus_service_bus (service);
  int r = sd_bus_add_fallback_vtable (bus, NULL, MV_SNAPSHOT_PREFIX, MV_SNAPSHOT_IFACE,
                                      snapshot_vtable, snapshot_find, service);

  if (r >= 0)
    r = sd_bus_add_node_enumerator (bus, NULL, MV_SNAPSHOT_PREFIX, snapshot_enumerate, service);
  return r;
}
