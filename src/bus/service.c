/* The bus's view of the machines: announcements, coalesced property
 * changes, and the calls that wait for a wish to be settled. */
#include "service.h"
#include "image-object.h"
#include "listing.h"
#include "machine-guest.h"
#include "machine-logs.h"
#include "machine-object.h"
#include "manager-events.h"
#include "manager-object.h"
#include "network-object.h"
#include "snapshot-object.h"
#include "warm-object.h"
#include "volume-object.h"
#include "core/errors.h"
#include "names.h"

typedef struct {
  sd_bus_message *call;
  MvReplyKind     kind;
  gboolean        root;
  MvDesired       target;
  guint64         generation;
} MvWaiter;

struct _MvBusService {
  sd_bus       *bus;
  MvReconciler *reconciler;
  GPtrArray    *invalid;
  GHashTable   *views;           /* machine id -> MvMachineView* */
  MvObserver    observer;
  gboolean      serving;
  MvImageObjects *images;        /* NULL: no image store */
  MvVolumeObjects *volumes;      /* NULL: no volumes */
  MvNetworkObjects *networks;    /* NULL: no networks */
  MvEventLog   *events;          /* NULL: events are not recorded */
  MvMachine    *leaving;         /* whose removal is being announced */
  MvListing    *listing;         /* ListMachines' answer */
  char         *console_url;     /* the console bridge's; "" when it is off */
};

char *
mv_machine_object_path (const char *id)
{
  char *path = NULL;

  /* Only fails for lack of memory, which GLib treats as fatal anyway. */
  if (sd_bus_path_encode (MV_MACHINE_PREFIX, id, &path) < 0)
    g_abort ();
  return path;
}

static void
waiter_free (MvWaiter *waiter)
{
  sd_bus_message_unref (waiter->call);
  g_free (waiter);
}

static void
reply_ok (MvMachineView *view, MvWaiter *w)
{
  switch (w->kind)
    {
    case MV_REPLY_PATH:
      sd_bus_reply_method_return (w->call, "o", view->path);
      break;
    case MV_REPLY_TRUE:
      sd_bus_reply_method_return (w->call, "b", 1);
      break;
    case MV_REPLY_EMPTY:
      sd_bus_reply_method_return (w->call, NULL);
      break;
    }
}

/* A failure's first line is its reason; the rest quotes the console,
 * which only a caller allowed to read it may see: others are pointed to
 * GetConsoleLog, which asks for that permission. */
static void
reply_failure (MvWaiter *w, const GError *failure)
{
  const char *detail = strchr (failure->message, '\n');
  g_autoptr (GError) reason = NULL;

  if (w->root || !detail)
    {
      mv_bus_reply_gerror (w->call, failure);
      return;
    }
  reason = g_error_new (failure->domain, failure->code,
                        "%.*s (the console log, GetConsoleLog, tells more)",
                        (int) (detail - failure->message), failure->message);
  mv_bus_reply_gerror (w->call, reason);
}

/* Replies to every waiting call whose wish is settled: reached, replaced
 * by another wish, failed with @failure, or the machine gone. */
static void
settle_waiters (MvMachineView *view, const GError *failure, guint64 failed_generation)
{
  MvMachine *machine = view->machine;
  GList *l = view->waiters.head;

  while (l)
    {
      GList *next = l->next;
      MvWaiter *w = l->data;
      MvWishOutcome outcome = mv_machine_wish_outcome (machine, w->target, w->generation);
      gboolean done = TRUE;

      if (machine->gone)
        {
          if (w->target == MV_DESIRED_DESTROYED)
            reply_ok (view, w);
          else
            sd_bus_reply_method_errorf (w->call, MV_BUS_ERROR_NOT_FOUND,
                                        "Machine %s was deleted", machine->id);
        }
      else if (outcome == MV_WISH_SUPERSEDED)
        sd_bus_reply_method_errorf (w->call, MV_BUS_ERROR_INVALID_STATE,
                                    "Superseded: machine %s is now wanted %s",
                                    machine->config->spec->name,
                                    mv_desired_to_string (machine->config->desired));
      else if (failure && w->generation <= failed_generation)
        reply_failure (w, failure);
      else if (outcome == MV_WISH_REACHED)
        reply_ok (view, w);
      else
        done = FALSE;

      if (done)
        {
          waiter_free (w);
          g_queue_delete_link (&view->waiters, l);
        }
      l = next;
    }
}

static void
view_free (MvMachineView *view)
{
  g_clear_handle_id (&view->flush_id, g_source_remove);
  g_queue_clear_full (&view->waiters, (GDestroyNotify) waiter_free);
  g_queue_clear_full (&view->held_requests, mv_machine_held_request_free);
  mv_machine_waits_clear (view);
  g_clear_pointer (&view->announced_values, g_hash_table_unref);
  g_free (view->path);
  g_free (view);
}

MvMachineView *
mv_bus_view (MvBusService *service, MvMachine *machine)
{
  MvMachineView *view = machine->view;

  if (view)
    return view;
  view = g_new0 (MvMachineView, 1);
  view->service = service;
  view->machine = machine;
  view->path = mv_machine_object_path (machine->id);
  view->announced_state = machine->status->state;
  view->warm_told = machine->status->warm_template != NULL;
  g_queue_init (&view->waiters);
  g_queue_init (&view->state_waiters);
  machine->view = view;
  g_hash_table_insert (service->views, machine->id, view);
  return view;
}

void
mv_bus_wait (MvMachineView *view, sd_bus_message *call, MvReplyKind kind, gboolean root)
{
  MvWaiter *w = g_new0 (MvWaiter, 1);

  w->call = sd_bus_message_ref (call);
  w->kind = kind;
  w->root = root;
  w->target = view->machine->config->desired;
  w->generation = view->machine->config->desired_generation;
  g_queue_push_tail (&view->waiters, w);
  mv_reconciler_kick (view->machine);
}

static gboolean
on_flush (gpointer user_data)
{
  MvMachineView *view = user_data;

  view->flush_id = 0;
  /* Held until the status that says it is on disk (on_durable). */
  if (view->machine->record_writes == 0)
    mv_machine_object_flush (view);
  return G_SOURCE_REMOVE;
}

/* The observer ------------------------------------------------------------ */

static void
on_changed (MvMachine *machine, guint props, gpointer data)
{
  MvMachineView *view = mv_bus_view (data, machine);
  MvBusService *service = data;

  view->dirty |= props;
  if (props & MV_PROP_NAME)
    mv_listing_invalidate (service->listing);
  else if (props & MV_PROP_STATE)
    mv_listing_state_changed (service->listing, view);
  /* What uses an image, a network or a volume is looked at again only
   * where it can have changed: a machine's image is fixed at create, and
   * its state matters only to the volumes it mounts. */
  if (props & MV_PROP_SPEC)
    {
      mv_network_objects_machines_changed (view->service->networks);
      mv_volume_objects_machines_changed (view->service->volumes);
    }
  else if ((props & MV_PROP_STATE) && mv_spec_mounts_volumes (machine->config->spec))
    mv_volume_objects_machines_changed (view->service->volumes);
  /* Started from a template: the template is used by one more. */
  if (machine->status->warm_template && !view->warm_told)
    {
      view->warm_told = TRUE;
      mv_warm_objects_used_by_changed (service, machine->status->warm_template);
    }
  /* At once: a Wait hears of a stop even if the machine goes in the same
   * turn; but not before it is on disk. */
  if (machine->record_writes > 0)
    view->held_waits |= props;
  else
    mv_machine_waits_changed (view, props);
  /* One announcement per object per main loop turn, however many changes. */
  if (view->flush_id == 0 && view->announced)
    view->flush_id = g_idle_add (on_flush, view);
}

static void
on_durable (MvMachine *machine, gpointer data)
{
  MvMachineView *view = mv_bus_view (data, machine);
  guint held = view->held_waits;

  view->held_waits = 0;
  mv_listing_state_changed (((MvBusService *) data)->listing, view);
  mv_machine_waits_changed (view, held);
  /* What is on disk now is announced now, not in a later turn: the step
   * the write let go may be done by then (a worker writes a phase and
   * takes the step), and its state must not hide this one. */
  if (view->dirty && view->announced)
    {
      g_clear_handle_id (&view->flush_id, g_source_remove);
      mv_machine_object_flush (view);
    }
}

static void
on_added (MvMachine *machine, gpointer data)
{
  MvBusService *service = data;
  MvMachineView *view = mv_bus_view (service, machine);

  view->dirty = 0;
  mv_listing_invalidate (service->listing);
  if (service->serving)
    mv_manager_announce_machine (service->bus, view);
  if (machine->config->spec->image)
    mv_image_objects_machines_changed (service->images);
  mv_volume_objects_machines_changed (service->volumes);
  mv_network_objects_machines_changed (service->networks);
}

static void
on_settled (MvMachine *machine, const GError *failure, guint64 generation, gpointer data)
{
  MvMachineView *view = machine->view;

  if (view)
    settle_waiters (view, failure, generation);
}

static void
on_removed (MvMachine *machine, gpointer data)
{
  MvBusService *service = data;
  MvMachineView *view = mv_bus_view (service, machine);

  /* Pending changes go out first, then the removal, while the object can
   * still be found; only then is it gone for everyone. */
  g_clear_handle_id (&view->flush_id, g_source_remove);
  mv_machine_waits_changed (view, view->held_waits);
  mv_machine_object_flush (view);
  service->leaving = machine;
  mv_manager_announce_removed (service->bus, view);
  service->leaving = NULL;
  mv_listing_invalidate (service->listing);
  settle_waiters (view, NULL, 0);
  mv_machine_waits_removed (view);
  mv_machine_held_requests_gone (view);
  machine->view = NULL;
  g_hash_table_remove (service->views, machine->id);
  if (machine->config->spec->image)
    mv_image_objects_machines_changed (service->images);
  mv_volume_objects_machines_changed (service->volumes);
  mv_network_objects_machines_changed (service->networks);
  if (machine->status->warm_template)
    mv_warm_objects_used_by_changed (service, machine->status->warm_template);
}

static void
on_snapshot_added (const MvSnapshot *snapshot, gpointer data)
{
  MvBusService *service = data;

  if (service->serving)
    mv_snapshot_objects_added (service, snapshot);
}

static void
on_warm_added (const MvSnapshot *template, gpointer data)
{
  MvBusService *service = data;

  if (service->serving)
    mv_warm_objects_added (service, template);
}

static void
on_warm_removed (const MvSnapshot *template, gpointer data)
{
  MvBusService *service = data;

  if (service->serving)
    mv_warm_objects_removed (service, template);
}

static void
on_snapshot_removed (const MvSnapshot *snapshot, gpointer data)
{
  MvBusService *service = data;

  if (service->serving)
    mv_snapshot_objects_removed (service, snapshot);
}

static void
on_event (const MvEvent *event, gpointer data)
{
  MvBusService *service = data;

  if (service->events)
    mv_manager_record_event (service, service->events, event);
}

void
mv_bus_service_set_events (MvBusService *service, MvEventLog *log)
{
  service->events = log;
}

MvEventLog *
mv_bus_service_events (MvBusService *service)
{
  return service->events;
}

void
mv_bus_service_set_console_url (MvBusService *service, const char *url)
{
  g_free (service->console_url);
  service->console_url = g_strdup (url);
}

const char *
mv_bus_service_console_url (MvBusService *service)
{
  return service->console_url ? service->console_url : "";
}

MvBusService *
mv_bus_service_new (void)
{
  MvBusService *service = g_new0 (MvBusService, 1);

  service->listing = mv_listing_new ();
  service->views = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                          (GDestroyNotify) view_free);
  service->observer.changed = on_changed;
  service->observer.durable = on_durable;
  service->observer.added = on_added;
  service->observer.settled = on_settled;
  service->observer.removed = on_removed;
  service->observer.snapshot_added = on_snapshot_added;
  service->observer.snapshot_removed = on_snapshot_removed;
  service->observer.warm_added = on_warm_added;
  service->observer.warm_removed = on_warm_removed;
  service->observer.event = on_event;
  service->observer.data = service;
  return service;
}

void
mv_bus_service_free (MvBusService *service)
{
  if (!service)
    return;
  mv_machine_logs_close_all ();
  mv_listing_free (service->listing);
  mv_volume_objects_free (service->volumes);
  mv_network_objects_free (service->networks);
  g_hash_table_unref (service->views);
  mv_image_objects_free (service->images);
  g_free (service->console_url);
  g_free (service);
}

const MvObserver *
mv_bus_service_observer (MvBusService *service)
{
  return &service->observer;
}

int
mv_bus_service_start (MvBusService *service, sd_bus *bus, MvReconciler *reconciler,
                      GPtrArray *invalid)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_list (reconciler);
  int r;

  service->bus = bus;
  service->reconciler = reconciler;
  service->invalid = invalid;
  mv_bus_errors_register ();
  r = mv_manager_object_register (service);
  if (r >= 0)
    r = mv_machine_object_register (service);
  if (r >= 0 && service->images)
    r = mv_image_objects_register (service->images);
  if (r >= 0 && service->volumes)
    r = mv_volume_objects_register (service->volumes);
  if (r >= 0 && service->networks)
    r = mv_network_objects_register (service->networks);
  if (r >= 0)
    r = mv_snapshot_objects_register (service);
  if (r >= 0)
    r = mv_warm_objects_register (service);
  if (r < 0)
    return r;

  /* What recovery changed is the starting point, not news. The values a
   * loaded machine announced are not taken: with thousands of machines
   * that cost more than the loading did. Its first change announces
   * whatever the change touched, as changed; from then on only what
   * differs is. */
  for (guint i = 0; i < machines->len; i++)
    {
      MvMachineView *view = mv_bus_view (service, machines->pdata[i]);

      view->announced = TRUE;
      view->dirty = 0;
      view->announced_state = view->machine->status->state;
    }
  service->serving = TRUE;
  return sd_bus_request_name (bus, MV_BUS_NAME, 0);
}

void
mv_bus_service_set_images (MvBusService *service, MvImageStore *store, MvImages *images)
{
  g_clear_pointer (&service->images, mv_image_objects_free);
  if (store != NULL && images != NULL)
    service->images = mv_image_objects_new (service, store, images);
}

MvImageObjects *
mv_bus_service_images (MvBusService *service)
{
  return service->images;
}

void
mv_bus_service_set_volumes (MvBusService *service, MvVolumeStore *store)
{
  g_return_if_fail (service->volumes == NULL);
  service->volumes = mv_volume_objects_new (service, store);
}

MvVolumeObjects *
mv_bus_service_volumes (MvBusService *service)
{
  return service->volumes;
}

void
mv_bus_service_set_networks (MvBusService *service, MvNetworkStore *store,
                             const MvNetworkHooks *hooks)
{
  g_return_if_fail (service->networks == NULL);
  service->networks = mv_network_objects_new (service, store, hooks);
}

MvNetworkObjects *
mv_bus_service_networks (MvBusService *service)
{
  return service->networks;
}

MvListing *
mv_bus_service_listing (MvBusService *service)
{
  return service->listing;
}

sd_bus *
mv_bus_service_bus (MvBusService *service)
{
  return service->bus;
}

MvReconciler *
mv_bus_service_reconciler (MvBusService *service)
{
  return service->reconciler;
}

MvMachine *
mv_bus_service_find_machine (MvBusService *service, const char *id)
{
  MvMachine *machine = mv_reconciler_lookup (service->reconciler, id);

  if (!machine && service->leaving && g_str_equal (service->leaving->id, id))
    machine = service->leaving;
  return machine;
}

GPtrArray *
mv_bus_service_invalid (MvBusService *service)
{
  return service->invalid;
}
