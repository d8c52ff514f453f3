/* The bus side of microvmd: a view of the reconciler's machines. It
 * implements the reconciler's observer, keeps each machine object's
 * announcement state and the calls waiting on it, and serves the manager
 * and machine objects. Main thread only. */
#pragma once
#include "bus-util.h"
#include "reconcile/reconciler.h"
#include "storage/images.h"
#include "storage/networks.h"

typedef struct _MvBusService MvBusService;
typedef struct _MvImageObjects MvImageObjects;

/* What the bus keeps for one machine object. */
typedef struct {
  MvBusService *service;
  MvMachine    *machine;
  char         *path;
  GQueue        waiters;         /* calls answered when a wish is settled */
  GQueue        state_waiters;   /* Waits (machine-guest.c) */
  GQueue        held_requests;   /* lifecycle calls waiting for the one before to be written */
  guint         listed;          /* its entry in the listing (listing.c), from 1; 0: none */
  gboolean      announced;       /* InterfacesAdded went out (or it was there at start) */
  guint         dirty;           /* MvMachineProp bits not yet announced */
  guint         held_waits;      /* bits that Waits hear of once they are on disk */
  guint         flush_id;
  gboolean      warm_told;       /* its template's UsedBy was announced with it */
  MvState       announced_state;
  GHashTable   *announced_values; /* property name → its value as last announced, serialized */
} MvMachineView;

/* How a waiting call is answered once its wish is reached. */
typedef enum {
  MV_REPLY_EMPTY,
  MV_REPLY_PATH,                 /* (o) the machine's path */
  MV_REPLY_TRUE,                 /* (b) TRUE */
} MvReplyKind;

typedef struct _MvVolumeObjects MvVolumeObjects;
typedef struct _MvVolumeStore MvVolumeStore;

MvBusService *mv_bus_service_new (void);
/* Serves @store's volumes (before start); @store outlives the service. */
void          mv_bus_service_set_volumes (MvBusService *service, MvVolumeStore *store);
/* NULL: this host keeps no volumes. */
MvVolumeObjects *mv_bus_service_volumes (MvBusService *service);

typedef struct _MvNetworkObjects MvNetworkObjects;
typedef struct _MvNetworkStore MvNetworkStore;

/* Serves @store's networks (before start); @store outlives the service. */
/* Told on the main thread of a network created, or deleted, on the bus:
 * the host's side of it follows (its bridge). */
typedef struct {
  void   (*created) (const MvNetworkSpec *network, gpointer data);
  void   (*deleted) (const MvNetworkSpec *network, gpointer data);
  gpointer data;
} MvNetworkHooks;

/* @hooks (may be NULL) outlives the service. */
void          mv_bus_service_set_networks (MvBusService *service, MvNetworkStore *store,
                                           const MvNetworkHooks *hooks);
/* NULL: this host keeps no networks. */
MvNetworkObjects *mv_bus_service_networks (MvBusService *service);
typedef struct _MvEventLog MvEventLog;

/* Records machines' events in @log (before start; it outlives the
 * service) and serves them (manager-events.h). */
void          mv_bus_service_set_events (MvBusService *service, MvEventLog *log);
/* NULL: events are not recorded. */
MvEventLog   *mv_bus_service_events (MvBusService *service);
/* Where the console bridge serves (before start; NULL or "": it is off),
 * which the Manager's ConsoleURL shows. */
void          mv_bus_service_set_console_url (MvBusService *service, const char *url);
const char   *mv_bus_service_console_url (MvBusService *service);
/* Answers nothing more; the reconciler is freed before. */
void          mv_bus_service_free (MvBusService *service);
/* The observer to give the reconciler; it lives as long as @service. */
const MvObserver *mv_bus_service_observer (MvBusService *service);

/* Serves the objects on @bus for @reconciler's machines and takes the bus
 * name. @invalid: the records found invalid at startup (MvInvalidRecord*),
 * which outlive the service. */
int           mv_bus_service_start (MvBusService *service, sd_bus *bus, MvReconciler *reconciler,
                                    GPtrArray *invalid);

/* Before start: serves the images of @store as objects, pulled through
 * @images (the host's); both outlive @service. */
void          mv_bus_service_set_images (MvBusService *service, MvImageStore *store,
                                         MvImages *images);
/* NULL without an image store. */
MvImageObjects *mv_bus_service_images (MvBusService *service);

sd_bus       *mv_bus_service_bus (MvBusService *service);
typedef struct _MvListing MvListing;
MvListing    *mv_bus_service_listing (MvBusService *service);
MvReconciler *mv_bus_service_reconciler (MvBusService *service);
/* The machine of ID @id: the reconciler's, or the one whose removal is
 * being announced (the reconciler has let it go by then, but the object
 * must still be found for InterfacesRemoved to name its interface). */
MvMachine    *mv_bus_service_find_machine (MvBusService *service, const char *id);
GPtrArray    *mv_bus_service_invalid (MvBusService *service);

MvMachineView *mv_bus_view (MvBusService *service, MvMachine *machine);
/* Answers @call once what is desired of @machine now is settled, then
 * looks at the machine. A failure's detail (the console's last lines)
 * goes only to @root; others are told where to read it. */
void          mv_bus_wait (MvMachineView *view, sd_bus_message *call, MvReplyKind kind,
                           gboolean root);

/* The object path of the machine with @id. */
char         *mv_machine_object_path (const char *id);
