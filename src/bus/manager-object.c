/* org.microvmd1.Manager: defines machines, finds them, lists them, and
 * tells what the host offers. */
#include "manager-object.h"
#include "listing.h"
#include "manager-events.h"
#include "manager-resources.h"
#include "core/errors.h"
#include "image-object.h"
#include "machine-object.h"
#include "machine-stats.h"
#include "names.h"
#include "network-object.h"
#include "snapshot-object.h"
#include "warm-object.h"
#include "polkit.h"
#include "volume-object.h"
#include "store/store.h"

#include "config.h"


static const char *const features[] = {
  "idempotent-create",
  "async-lifecycle",
  "desired-state",
  "standby",
  "restart-policies",
  "guest-agent",
  "exec",
  "health-checks",
  "image-objects",
  "volumes",
  "networks",
  "snapshots",
  "console",
  "logs",
  "stats",
  "metrics",
  "events",
  "admission",
  NULL,
};

void
mv_manager_announce_machine (sd_bus *bus, MvMachineView *view)
{
  view->announced = TRUE;
  view->announced_state = view->machine->status->state;
  mv_machine_object_remember (view);
  sd_bus_emit_object_added (bus, view->path);
  sd_bus_emit_signal (bus, MV_MANAGER_PATH, MV_MANAGER_IFACE, "MachineNew", "so",
                      view->machine->id, view->path);
}

void
mv_manager_announce_removed (sd_bus *bus, MvMachineView *view)
{
  if (!view->announced)
    return;
  /* The object must still be found while its removal is announced. */
  sd_bus_emit_object_removed (bus, view->path);
  sd_bus_emit_signal (bus, MV_MANAGER_PATH, MV_MANAGER_IFACE, "MachineRemoved", "so",
                      view->machine->id, view->path);
  view->announced = FALSE;
}

typedef struct {
  MvBusService   *service;
  sd_bus_message *call;
  gboolean        root;
  gboolean        start;
} CreateCall;

static void
on_defined (MvMachine *machine, gboolean existed, const GError *error, gpointer user_data)
{
  CreateCall *create = user_data;

  if (!machine)
    mv_bus_reply_gerror (create->call, error);
  else if (create->start)
    mv_bus_wait (mv_bus_view (create->service, machine), create->call, MV_REPLY_PATH,
                 create->root);
  else
    sd_bus_reply_method_return (create->call, "o", mv_bus_view (create->service, machine)->path);
  sd_bus_message_unref (create->call);
  g_free (create);
}

static void
do_create (sd_bus_message *call, gboolean root, gpointer user_data)
{
  MvBusService *service = user_data;
  MvReconciler *rec = mv_bus_service_reconciler (service);
  const char *json = NULL;
  uint64_t flags = 0;
  g_autoptr (GError) error = NULL;
  MvPullPolicy policy = MV_PULL_MISSING;
  CreateCall *create;
  MvSpec *spec;

  if (sd_bus_message_read (call, "st", &json, &flags) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (st)");
      return;
    }
  if (flags & ~MV_CREATE_KNOWN_FLAGS)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_ARGUMENT,
                                  "flags: unknown bits 0x%" G_GINT64_MODIFIER "x (known: 0x%" G_GINT64_MODIFIER "x)",
                                  (guint64) (flags & ~MV_CREATE_KNOWN_FLAGS),
                                  (guint64) MV_CREATE_KNOWN_FLAGS);
      return;
    }
  if ((flags & MV_CREATE_PULL_ALWAYS) && (flags & MV_CREATE_PULL_NEVER))
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_ARGUMENT,
                                  "flags: PULL_ALWAYS (2) and PULL_NEVER (4) together");
      return;
    }
  if (flags & MV_CREATE_PULL_ALWAYS)
    policy = MV_PULL_ALWAYS;
  else if (flags & MV_CREATE_PULL_NEVER)
    policy = MV_PULL_NEVER;
  spec = mv_spec_from_json (json, &error);
  if (!spec)
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  create = g_new0 (CreateCall, 1);
  create->service = service;
  create->call = sd_bus_message_ref (call);
  create->root = root;
  create->start = (flags & MV_CREATE_START) != 0;
  mv_reconciler_define_async (rec, spec, create->start, policy, NULL, NULL, on_defined, create);
}

int
mv_manager_authorize_spec_call (sd_bus_message *m, const char *verb, MvAuthorizedFunc func,
                                gpointer userdata, sd_bus_error *error)
{
  const char *json = NULL;
  g_autoptr (GError) local = NULL;
  g_autofree char *name = NULL;
  int r = sd_bus_message_read (m, "s", &json);

  if (r < 0)
    return r;
  /* An oversized spec is refused on its size, before anyone is asked. */
  if (!mv_spec_json_check_size (json, &local))
    return mv_bus_error_from_gerror (error, local);
  sd_bus_message_rewind (m, TRUE);

  /* Only the name is read now, for polkit's rules and prompt: the spec is
   * read and checked once the caller is authorized. */
  name = mv_spec_json_peek_name (json);
  const char *details[] = {
    "machine", name ? name : "",
    "verb", verb,
    NULL,
  };
  mv_polkit_check (m, MV_ACTION_MACHINE_CREATE, details, func, userdata, NULL);
  return 1;
}

static int
method_create_machine (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_manager_authorize_spec_call (m, "create", do_create, userdata, error);
}

static int
method_get_machine (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvBusService *service = userdata;
  const char *name_or_id = NULL;
  MvMachine *machine;
  int r = sd_bus_message_read (m, "s", &name_or_id);

  if (r < 0)
    return r;
  machine = mv_reconciler_find (mv_bus_service_reconciler (service), name_or_id);
  if (!machine)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No machine called %s", name_or_id);
  return sd_bus_reply_method_return (m, "o", mv_bus_view (service, machine)->path);
}

typedef struct {
  MvBusService *service;
  char         *name_or_id;
  guint64       sequence;
} TrafficCall;

static void
traffic_call_free (TrafficCall *t)
{
  g_free (t->name_or_id);
  g_free (t);
}

static void
do_restore_after_traffic (sd_bus_message *call, gboolean root, gpointer user_data)
{
  TrafficCall *t = user_data;
  MvReconciler *rec = mv_bus_service_reconciler (t->service);
  MvMachine *machine = mv_reconciler_find (rec, t->name_or_id);
  g_autoptr (GError) error = NULL;
  gboolean waking = FALSE;

  if (!machine)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "No machine called %s",
                                  t->name_or_id);
      return;
    }
  if (!mv_reconciler_traffic (rec, machine, t->sequence, &waking, &error))
    mv_bus_reply_gerror (call, error);
  else if (waking)
    mv_bus_wait (mv_bus_view (t->service, machine), call, MV_REPLY_TRUE, root);
  else
    sd_bus_reply_method_return (call, "b", 0);
}

/* The network layer reports traffic for a machine; one on standby wakes. */
static int
method_restore_after_traffic (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvBusService *service = userdata;
  const char *name_or_id = NULL;
  uint64_t sequence = 0;
  MvMachine *machine;
  TrafficCall *t;
  int r = sd_bus_message_read (m, "st", &name_or_id, &sequence);

  if (r < 0)
    return r;
  machine = mv_reconciler_find (mv_bus_service_reconciler (service), name_or_id);
  if (!machine)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No machine called %s", name_or_id);

  const char *details[] = {
    "machine", machine->config->spec->name,
    "machine_id", machine->id,
    "verb", "restore-after-traffic",
    NULL,
  };
  t = g_new0 (TrafficCall, 1);
  t->service = service;
  t->name_or_id = g_strdup (machine->id);
  t->sequence = sequence;
  mv_polkit_check (m, MV_ACTION_MACHINE_LIFECYCLE, details, do_restore_after_traffic, t,
                   (GDestroyNotify) traffic_call_free);
  return 1;
}

static int
method_list_machines (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvBusService *service = userdata;
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  r = sd_bus_message_new_method_return (m, &reply);
  if (r >= 0)
    r = mv_listing_append (mv_bus_service_listing (service), service, reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

static int
method_get_all_stats (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_manager_method_get_all_stats (m, userdata, error);
}

static int
method_pull_image (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_image_method_pull (m, mv_bus_service_images (userdata), error);
}

static int
method_prune_images (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_image_method_prune (m, mv_bus_service_images (userdata), error);
}

static int
get_version (sd_bus *bus, const char *path, const char *interface, const char *property,
             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "s", PACKAGE_VERSION);
}

static int
get_api_version (sd_bus *bus, const char *path, const char *interface, const char *property,
                 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "u", (uint32_t) MV_API_VERSION);
}

static int
get_features (sd_bus *bus, const char *path, const char *interface, const char *property,
              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append_strv (reply, (char **) features);
}

static int
get_hypervisors (sd_bus *bus, const char *path, const char *interface, const char *property,
                 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvBusService *service = userdata;
  MvRuntimes *runtimes = mv_reconciler_host (mv_bus_service_reconciler (service))->runtimes;
  int r = sd_bus_message_open_container (reply, 'a', "(ss)");

  for (guint i = 0; r >= 0 && i < mv_runtimes_count (runtimes); i++)
    {
      MvRuntime *rt = mv_runtimes_get (runtimes, i);
      r = sd_bus_message_append (reply, "(ss)", rt->type, mv_runtimes_version (runtimes, rt));
    }
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static int
get_console_url (sd_bus *bus, const char *path, const char *interface, const char *property,
                 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "s", mv_bus_service_console_url (userdata));
}

static int
get_hypervisor_capabilities (sd_bus *bus, const char *path, const char *interface,
                             const char *property, sd_bus_message *reply, void *userdata,
                             sd_bus_error *error)
{
  MvBusService *service = userdata;
  MvRuntimes *runtimes = mv_reconciler_host (mv_bus_service_reconciler (service))->runtimes;
  int r = sd_bus_message_open_container (reply, 'a', "{sas}");

  for (guint i = 0; r >= 0 && i < mv_runtimes_count (runtimes); i++)
    {
      MvRuntime *rt = mv_runtimes_get (runtimes, i);
      static const char *const none[] = { NULL };

      r = sd_bus_message_open_container (reply, 'e', "sas");
      if (r >= 0)
        r = sd_bus_message_append (reply, "s", rt->type);
      if (r >= 0)
        r = sd_bus_message_append_strv (reply, (char **) (rt->capabilities ? rt->capabilities
                                                                           : none));
      if (r >= 0)
        r = sd_bus_message_close_container (reply);
    }
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static int
get_invalid_records (sd_bus *bus, const char *path, const char *interface, const char *property,
                     sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  GPtrArray *invalid = mv_bus_service_invalid (userdata);
  int r = sd_bus_message_open_container (reply, 'a', "(ss)");

  for (guint i = 0; r >= 0 && i < invalid->len; i++)
    {
      MvInvalidRecord *rec = invalid->pdata[i];
      r = sd_bus_message_append (reply, "(ss)", rec->path, rec->reason);
    }
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static const sd_bus_vtable manager_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("APIVersion", "u", get_api_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Features", "as", get_features, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Hypervisors", "a(ss)", get_hypervisors, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("ConsoleURL", "s", get_console_url, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("HypervisorCapabilities", "a{sas}", get_hypervisor_capabilities, 0,
                   SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("InvalidRecords", "a(ss)", get_invalid_records, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Capacity", "a{sv}", mv_manager_get_capacity, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_METHOD_WITH_ARGS ("CreateMachine", SD_BUS_ARGS ("s", spec_json, "t", flags),
                           SD_BUS_RESULT ("o", machine), method_create_machine,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetMachine", SD_BUS_ARGS ("s", name_or_id),
                           SD_BUS_RESULT ("o", machine), method_get_machine,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("ListMachines", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("a(ssso)", machines), method_list_machines,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("RestoreAfterTraffic", SD_BUS_ARGS ("s", name_or_id, "t", sequence),
                           SD_BUS_RESULT ("b", woken), method_restore_after_traffic,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("PullImage", SD_BUS_ARGS ("s", reference, "s", policy),
                           SD_BUS_RESULT ("o", image), method_pull_image,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("PruneImages", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("ao", images), method_prune_images,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("CreateVolume", SD_BUS_ARGS ("s", spec_json),
                           SD_BUS_RESULT ("o", volume), mv_volume_objects_method_create,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("CreateNetwork", SD_BUS_ARGS ("s", spec_json),
                           SD_BUS_RESULT ("o", network), mv_network_objects_method_create,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("ListNetworks", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("a(sso)", networks), mv_network_objects_method_list,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("ListSnapshots", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("a(ssso)", snapshots), mv_snapshot_method_list,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetSnapshot", SD_BUS_ARGS ("s", name_or_id),
                           SD_BUS_RESULT ("o", snapshot), mv_snapshot_method_get,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("BuildWarmImage", SD_BUS_ARGS ("s", spec_json),
                           SD_BUS_RESULT ("o", warm_image), mv_warm_method_build,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("ForkMachine", SD_BUS_ARGS ("s", source, "s", spec_json),
                           SD_BUS_RESULT ("o", machine), mv_snapshot_method_fork_machine,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("LookupHost", SD_BUS_ARGS ("s", network, "s", name),
                           SD_BUS_RESULT ("as", addresses), mv_network_objects_method_lookup_host,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("LookupAddr", SD_BUS_ARGS ("s", network, "s", address),
                           SD_BUS_RESULT ("as", names), mv_network_objects_method_lookup_addr,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetEvents", SD_BUS_ARGS ("t", since),
                           SD_BUS_RESULT ("a(ttsssssa{sv})", events), mv_manager_method_get_events,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_SIGNAL_WITH_ARGS ("Event", SD_BUS_ARGS ("t", sequence, "t", time, "s", kind,
                                                 "s", machine_id, "s", machine_name,
                                                 "s", operation_id, "s", message,
                                                 "a{sv}", details), 0),
  SD_BUS_METHOD_WITH_ARGS ("CheckResources", SD_BUS_ARGS ("u", vcpus, "t", memory_bytes),
                           SD_BUS_RESULT ("b", fits_now), mv_manager_method_check_resources,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetUsage", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("a{sv}", usage), mv_manager_method_get_usage,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetAllStats", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("a(sa{sv})", stats), method_get_all_stats,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_SIGNAL_WITH_ARGS ("MachineNew", SD_BUS_ARGS ("s", id, "o", machine), 0),
  SD_BUS_SIGNAL_WITH_ARGS ("MachineRemoved", SD_BUS_ARGS ("s", id, "o", machine), 0),
  SD_BUS_SIGNAL_WITH_ARGS ("PullProgress", SD_BUS_ARGS ("s", reference, "t", done_bytes,
                                                        "t", total_bytes), 0),
  SD_BUS_VTABLE_END
};

int
mv_manager_object_register (MvBusService *service)
{
  sd_bus *bus = mv_bus_service_bus (service);
  int r = sd_bus_add_object_vtable (bus, NULL, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                    manager_vtable, service);
  if (r >= 0)
    r = sd_bus_add_object_manager (bus, NULL, MV_MANAGER_PATH);
  return r;
}
