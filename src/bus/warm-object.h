/* The org.microvmd1.WarmImage objects, at /org/microvmd1/warm/<encoded
 * key>: a view of the reconciler's warm templates; and
 * Manager.BuildWarmImage. Main thread only. */
#pragma once
#include "service.h"

int   mv_warm_objects_register (MvBusService *service);
/* InterfacesAdded and InterfacesRemoved, as the reconciler reports them. */
void  mv_warm_objects_added (MvBusService *service, const MvSnapshot *template);
void  mv_warm_objects_removed (MvBusService *service, const MvSnapshot *template);
/* A machine started from the template @key, or one that did went. */
void  mv_warm_objects_used_by_changed (MvBusService *service, const char *key);
char *mv_warm_object_path (const char *key);

/* Manager.BuildWarmImage(s spec_json) → o; @userdata is the service. */
int   mv_warm_method_build (sd_bus_message *m, void *userdata, sd_bus_error *error);
