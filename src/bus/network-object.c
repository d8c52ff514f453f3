/* org.microvmd1.Network: one object per network. Create and Delete run
 * the network store in worker threads (its writes fsync) and reply from
 * the main thread; Machines follows the machines' specs, announced at
 * most once per main loop turn and only when it differs from what was
 * announced. */
#include "network-object.h"
#include "core/errors.h"
#include "core/ipam.h"
#include "names.h"
#include "polkit.h"

#include <errno.h>
#include <string.h>

struct _MvNetworkObjects {
  MvBusService   *service;
  MvNetworkStore *store;
  const MvNetworkHooks *hooks;   /* may be NULL */
  GHashTable     *announced;     /* id → the Machines IDs as last announced */
  guint           refresh_id;
};

char *
mv_network_object_path (const char *id)
{
  char *path = NULL;

  if (sd_bus_path_encode (MV_NETWORK_PREFIX, id, &path) < 0)
    g_abort ();
  return path;
}

/* ---- who names a network ---- */

/* The machines whose specs name @name (MvMachine*, by name). */
static GPtrArray *
machines_on (MvNetworkObjects *objects, const char *name)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_list (mv_bus_service_reconciler (objects->service));
  GPtrArray *on = g_ptr_array_new ();

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];

      if (g_strcmp0 (machine->config->spec->network_name, name) == 0)
        g_ptr_array_add (on, machine);
    }
  return on;
}

static char *
machines_text (MvNetworkObjects *objects, const char *name)
{
  g_autoptr (GPtrArray) on = machines_on (objects, name);
  GString *text = g_string_new (NULL);

  for (guint i = 0; i < on->len; i++)
    g_string_append_printf (text, "%s ", ((MvMachine *) on->pdata[i])->id);
  return g_string_free (text, FALSE);
}

/* ---- properties ---- */

/* The network at @path, a copy; NULL if there is none (or it went). */
static MvNetworkSpec *
network_at (MvNetworkObjects *objects, const char *path)
{
  g_autofree char *id = NULL;
  g_autoptr (MvNetworkSpec) network = NULL;

  if (sd_bus_path_decode (path, MV_NETWORK_PREFIX, &id) <= 0 || !id)
    return NULL;
  network = mv_network_store_find (objects->store, id);
  if (network == NULL || g_strcmp0 (network->id, id) != 0)
    return NULL;
  return g_steal_pointer (&network);
}

static int
network_find (sd_bus *bus, const char *path, const char *interface, void *userdata,
              void **found, sd_bus_error *error)
{
  MvNetworkObjects *objects = userdata;
  g_autoptr (MvNetworkSpec) network = network_at (objects, path);

  if (network == NULL)
    return 0;
  *found = objects;
  return 1;
}

static int
network_enumerate (sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                   sd_bus_error *error)
{
  MvNetworkObjects *objects = userdata;
  g_autoptr (GPtrArray) networks = mv_network_store_list (objects->store);
  char **list = calloc (networks->len + 1, sizeof (char *));

  if (!list)
    return -ENOMEM;
  for (guint i = 0; i < networks->len; i++)
    {
      g_autofree char *path = mv_network_object_path (((MvNetworkSpec *) networks->pdata[i])->id);

      list[i] = strdup (path);
    }
  *nodes = list;
  return 1;
}

static int
get_property (sd_bus *bus, const char *path, const char *interface, const char *property,
              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvNetworkObjects *objects = userdata;
  g_autoptr (MvNetworkSpec) network = network_at (objects, path);
  g_autoptr (GPtrArray) on = NULL;
  int r;

  if (network == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The network was deleted");
  if (g_str_equal (property, "Id"))
    return sd_bus_message_append (reply, "s", network->id);
  if (g_str_equal (property, "Name"))
    return sd_bus_message_append (reply, "s", network->name);
  if (g_str_equal (property, "Subnet"))
    {
      g_autofree char *subnet = mv_network_subnet_to_string (network);

      return sd_bus_message_append (reply, "s", subnet);
    }
  if (g_str_equal (property, "Gateway"))
    {
      g_autofree char *gateway = mv_ipv4_to_string (network->gateway);

      return sd_bus_message_append (reply, "s", gateway);
    }
  if (g_str_equal (property, "Bridge"))
    {
      g_autofree char *bridge = mv_network_bridge_name (network->id);

      return sd_bus_message_append (reply, "s", bridge);
    }
  if (g_str_equal (property, "MTU"))
    return sd_bus_message_append (reply, "u", (uint32_t) network->mtu);
  if (g_str_equal (property, "NAT"))
    return sd_bus_message_append (reply, "b", network->nat);
  if (g_str_equal (property, "CreatedAt"))
    return sd_bus_message_append (reply, "t", (guint64) network->created_at);

  on = machines_on (objects, network->name);
  r = sd_bus_message_open_container (reply, 'a', "o");
  for (guint i = 0; r >= 0 && i < on->len; i++)
    r = sd_bus_message_append (reply, "o", mv_bus_view (objects->service, on->pdata[i])->path);
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

/* ---- Delete and CreateNetwork ---- */

typedef struct {
  MvNetworkObjects *objects;
  sd_bus_message   *call;
  MvNetworkSpec    *network;
} NetworkCall;

static void
network_call_free (NetworkCall *nc)
{
  g_clear_pointer (&nc->call, sd_bus_message_unref);
  mv_network_spec_free (nc->network);
  g_free (nc);
}

/* The task's own call: polkit frees the one it was given once the
 * authorized function returns. */
static NetworkCall *
network_call_take (NetworkCall *nc, sd_bus_message *call)
{
  NetworkCall *taken = g_new0 (NetworkCall, 1);

  taken->objects = nc->objects;
  taken->network = g_steal_pointer (&nc->network);
  taken->call = sd_bus_message_ref (call);
  return taken;
}

static void
announce_added (MvNetworkObjects *objects, const MvNetworkSpec *network)
{
  g_autofree char *path = mv_network_object_path (network->id);

  g_hash_table_insert (objects->announced, g_strdup (network->id),
                       machines_text (objects, network->name));
  sd_bus_emit_object_added (mv_bus_service_bus (objects->service), path);
}

static void
delete_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  NetworkCall *nc = task_data;
  GError *error = NULL;

  if (mv_network_store_delete (nc->objects->store, nc->network->id, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
on_deleted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  NetworkCall *nc = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      g_warning ("Network %s (%s) could not be deleted: %s", nc->network->name, nc->network->id,
                 error->message);
      /* Still there (or half there, swept at the next start): shown again. */
      if (!g_error_matches (error, MV_ERROR, MV_ERROR_NOT_FOUND))
        {
          g_autoptr (MvNetworkSpec) still = mv_network_store_find (nc->objects->store,
                                                                   nc->network->id);

          if (still != NULL)
            announce_added (nc->objects, still);
        }
      mv_bus_reply_gerror (nc->call, error);
      return;
    }
  g_message ("Network %s (%s) deleted", nc->network->name, nc->network->id);
  if (nc->objects->hooks && nc->objects->hooks->deleted)
    nc->objects->hooks->deleted (nc->network, nc->objects->hooks->data);
  sd_bus_reply_method_return (nc->call, NULL);
}

static void
do_delete (sd_bus_message *call, gboolean root, gpointer user_data)
{
  NetworkCall *nc = user_data;
  MvNetworkObjects *objects = nc->objects;
  g_autoptr (GPtrArray) on = NULL;
  g_autofree char *path = mv_network_object_path (nc->network->id);
  g_autoptr (MvNetworkSpec) now = mv_network_store_find (objects->store, nc->network->id);

  if (now == NULL)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "Network %s was deleted",
                                  nc->network->name);
      return;
    }
  on = machines_on (objects, nc->network->name);
  if (on->len > 0)
    {
      g_autoptr (GString) names = g_string_new (NULL);

      for (guint i = 0; i < on->len; i++)
        g_string_append_printf (names, "%s%s", i ? ", " : "",
                                ((MvMachine *) on->pdata[i])->config->spec->name);
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_STATE,
                                  "Network %s is named by the spec of %s %s: change or delete "
                                  "%s first", nc->network->name,
                                  on->len > 1 ? "the machines" : "the machine", names->str,
                                  on->len > 1 ? "them" : "it");
      return;
    }
  /* Announced while the object can still be found. */
  sd_bus_emit_object_removed (mv_bus_service_bus (objects->service), path);
  g_hash_table_remove (objects->announced, nc->network->id);

  mv_bus_run_in_thread (delete_in_thread, network_call_take (nc, call), (GDestroyNotify) network_call_free, on_deleted);
}

static int
method_delete (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvNetworkObjects *objects = userdata;
  MvNetworkSpec *network = network_at (objects, sd_bus_message_get_path (m));
  NetworkCall *nc;

  if (network == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "The network was deleted");
  const char *details[] = {
    "network", network->name,
    "network_id", network->id,
    "verb", "delete",
    NULL,
  };
  nc = g_new0 (NetworkCall, 1);
  nc->objects = objects;
  nc->network = network;
  mv_polkit_check (m, MV_ACTION_NETWORK_DELETE, details, do_delete, nc,
                   (GDestroyNotify) network_call_free);
  return 1;
}

static void
create_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  NetworkCall *nc = task_data;
  GError *error = NULL;
  MvNetworkSpec *network = mv_network_store_create (nc->objects->store, nc->network, &error);

  if (network == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, network, (GDestroyNotify) mv_network_spec_free);
}

static void
on_created (GObject *source, GAsyncResult *result, gpointer user_data)
{
  NetworkCall *nc = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  g_autoptr (MvNetworkSpec) network = g_task_propagate_pointer (G_TASK (result), &error);
  g_autofree char *path = NULL;
  g_autofree char *subnet = NULL;

  if (network == NULL)
    {
      mv_bus_reply_gerror (nc->call, error);
      return;
    }
  subnet = mv_network_subnet_to_string (network);
  g_message ("Network %s (%s) created, %s", network->name, network->id, subnet);
  announce_added (nc->objects, network);
  if (nc->objects->hooks && nc->objects->hooks->created)
    nc->objects->hooks->created (network, nc->objects->hooks->data);
  path = mv_network_object_path (network->id);
  sd_bus_reply_method_return (nc->call, "o", path);
}

static void
do_create (sd_bus_message *call, gboolean root, gpointer user_data)
{
  NetworkCall *nc = user_data;
  g_autoptr (GError) error = NULL;
  const char *json = NULL;

  if (sd_bus_message_read (call, "s", &json) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (s)");
      return;
    }
  nc->network = mv_network_spec_from_json (json, &error);
  if (nc->network == NULL)
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  mv_bus_run_in_thread (create_in_thread, network_call_take (nc, call), (GDestroyNotify) network_call_free, on_created);
}

int
mv_network_objects_method_create (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvNetworkObjects *objects = mv_bus_service_networks (userdata);
  const char *json = NULL;
  g_autofree char *name = NULL;
  NetworkCall *nc;
  int r = sd_bus_message_read (m, "s", &json);

  if (r < 0)
    return r;
  if (objects == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_UNSUPPORTED, "This host keeps no networks");
  if (strlen (json) > MV_NETWORK_SPEC_MAX_BYTES)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "spec: %zu bytes, more than the limit of %d", strlen (json),
                              MV_NETWORK_SPEC_MAX_BYTES);
  sd_bus_message_rewind (m, TRUE);
  name = mv_spec_json_peek_name (json);
  const char *details[] = {
    "network", name ? name : "",
    "verb", "create",
    NULL,
  };
  nc = g_new0 (NetworkCall, 1);
  nc->objects = objects;
  mv_polkit_check (m, MV_ACTION_NETWORK_CREATE, details, do_create, nc,
                   (GDestroyNotify) network_call_free);
  return 1;
}

int
mv_network_objects_method_list (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvNetworkObjects *objects = mv_bus_service_networks (userdata);
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (GPtrArray) networks = NULL;
  int r;

  networks = objects ? mv_network_store_list (objects->store)
                     : g_ptr_array_new_with_free_func ((GDestroyNotify) mv_network_spec_free);
  r = sd_bus_message_new_method_return (m, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "(sso)");
  for (guint i = 0; r >= 0 && i < networks->len; i++)
    {
      MvNetworkSpec *network = networks->pdata[i];
      g_autofree char *path = mv_network_object_path (network->id);

      r = sd_bus_message_append (reply, "(sso)", network->id, network->name, path);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

/* ---- names ---- */

static int
reply_strings (sd_bus_message *m, GPtrArray *strings)
{
  g_autoptr (sd_bus_message) reply = NULL;
  int r = sd_bus_message_new_method_return (m, &reply);

  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "s");
  for (guint i = 0; r >= 0 && i < strings->len; i++)
    r = sd_bus_message_append (reply, "s", (const char *) strings->pdata[i]);
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

static int
lookup (sd_bus_message *m, void *userdata, sd_bus_error *error, gboolean host)
{
  MvNetworkObjects *objects = mv_bus_service_networks (userdata);
  MvReconciler *rec = mv_bus_service_reconciler (userdata);
  g_autoptr (MvNetworkSpec) network = NULL;
  g_autoptr (GPtrArray) found = NULL;
  const char *which, *what;
  guint32 address;
  int r;

  r = sd_bus_message_read (m, "ss", &which, &what);
  if (r < 0)
    return r;
  network = objects ? mv_network_store_find (objects->store, which) : NULL;
  if (!network)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "network: no network called %s",
                              which);
  if (!host && !mv_ipv4_parse (what, &address))
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "address: %s is not an IPv4 address", what);
  found = host ? mv_reconciler_lookup_host (rec, network->name, what)
               : mv_reconciler_lookup_addr (rec, network->name, what);
  return reply_strings (m, found);
}

int
mv_network_objects_method_lookup_host (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return lookup (m, userdata, error, TRUE);
}

int
mv_network_objects_method_lookup_addr (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return lookup (m, userdata, error, FALSE);
}

/* ---- announcing ---- */

static gboolean
on_refresh (gpointer user_data)
{
  MvNetworkObjects *objects = user_data;
  g_autoptr (GPtrArray) networks = mv_network_store_list (objects->store);

  objects->refresh_id = 0;
  for (guint i = 0; i < networks->len; i++)
    {
      MvNetworkSpec *network = networks->pdata[i];
      const char *before = g_hash_table_lookup (objects->announced, network->id);
      g_autofree char *now = NULL;
      g_autofree char *path = NULL;

      if (before == NULL)
        continue;   /* not announced yet: its InterfacesAdded carries all */
      now = machines_text (objects, network->name);
      if (g_str_equal (before, now))
        continue;
      path = mv_network_object_path (network->id);
      sd_bus_emit_properties_changed (mv_bus_service_bus (objects->service), path,
                                      MV_NETWORK_IFACE, "Machines", NULL);
      g_hash_table_insert (objects->announced, g_strdup (network->id), g_steal_pointer (&now));
    }
  return G_SOURCE_REMOVE;
}

void
mv_network_objects_machines_changed (MvNetworkObjects *objects)
{
  if (objects != NULL && objects->refresh_id == 0)
    objects->refresh_id = g_idle_add (on_refresh, objects);
}

static const sd_bus_vtable network_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Id", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Name", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Subnet", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Gateway", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Bridge", "s", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("MTU", "u", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("NAT", "b", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Machines", "ao", get_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_METHOD_WITH_ARGS ("Delete", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_delete,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_VTABLE_END
};

int
mv_network_objects_register (MvNetworkObjects *objects)
{
  sd_bus *bus = mv_bus_service_bus (objects->service);
  g_autoptr (GPtrArray) networks = mv_network_store_list (objects->store);
  int r = sd_bus_add_fallback_vtable (bus, NULL, MV_NETWORK_PREFIX, MV_NETWORK_IFACE,
                                      network_vtable, network_find, objects);

  if (r >= 0)
    r = sd_bus_add_node_enumerator (bus, NULL, MV_NETWORK_PREFIX, network_enumerate, objects);
  for (guint i = 0; r >= 0 && i < networks->len; i++)
    {
      MvNetworkSpec *network = networks->pdata[i];

      g_hash_table_insert (objects->announced, g_strdup (network->id),
                           machines_text (objects, network->name));
    }
  return r;
}

MvNetworkObjects *
mv_network_objects_new (MvBusService *service, MvNetworkStore *store,
                        const MvNetworkHooks *hooks)
{
  MvNetworkObjects *objects = g_new0 (MvNetworkObjects, 1);

  objects->service = service;
  objects->store = store;
  objects->hooks = hooks;
  objects->announced = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return objects;
}

void
mv_network_objects_free (MvNetworkObjects *objects)
{
  if (objects == NULL)
    return;
  g_clear_handle_id (&objects->refresh_id, g_source_remove);
  g_hash_table_unref (objects->announced);
  g_free (objects);
}
