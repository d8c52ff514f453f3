/* The org.microvmd1.Snapshot objects, at /org/microvmd1/snapshot/<encoded
 * id>: a view of the reconciler's snapshots; and the methods that take,
 * list and fork them on the manager and the machines. Main thread only. */
#pragma once
#include "service.h"

int   mv_snapshot_objects_register (MvBusService *service);
/* InterfacesAdded and InterfacesRemoved, as the reconciler reports them. */
void  mv_snapshot_objects_added (MvBusService *service, const MvSnapshot *snapshot);
void  mv_snapshot_objects_removed (MvBusService *service, const MvSnapshot *snapshot);
char *mv_snapshot_object_path (const char *id);

/* Machine.CreateSnapshot(s name) → o; @userdata is the machine. */
int   mv_snapshot_method_create (sd_bus_message *m, void *userdata, sd_bus_error *error);
/* Manager.ListSnapshots, GetSnapshot and ForkMachine; @userdata is the
 * service. */
int   mv_snapshot_method_list (sd_bus_message *m, void *userdata, sd_bus_error *error);
int   mv_snapshot_method_get (sd_bus_message *m, void *userdata, sd_bus_error *error);
int   mv_snapshot_method_fork_machine (sd_bus_message *m, void *userdata, sd_bus_error *error);
