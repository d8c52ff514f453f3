/* The org.microvmd1.Volume objects, at /org/microvmd1/volume/<encoded
 * id>, and Manager.CreateVolume. A view of the volume store and of the
 * machines whose specs mount each volume. Main thread only. */
#pragma once
#include "service.h"
#include "storage/volumes.h"

typedef struct _MvVolumeObjects MvVolumeObjects;

MvVolumeObjects *mv_volume_objects_new (MvBusService *service, MvVolumeStore *store);
void             mv_volume_objects_free (MvVolumeObjects *objects);
/* Serves the objects of the volumes there are now, known as they are. */
int              mv_volume_objects_register (MvVolumeObjects *objects);
/* A machine was defined, changed or removed: AttachedTo and HeldBy are
 * looked at again once this main loop turn is over. */
void             mv_volume_objects_machines_changed (MvVolumeObjects *objects);
/* Manager.CreateVolume(s spec_json) → o; @userdata is the service. */
int              mv_volume_objects_method_create (sd_bus_message *m, void *userdata,
                                                  sd_bus_error *error);
char            *mv_volume_object_path (const char *id);
