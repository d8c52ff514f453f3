/* The org.microvmd1.Network objects, at /org/microvmd1/network/<encoded
 * id>, and Manager.CreateNetwork and ListNetworks. A view of the network
 * store and of the machines whose specs name each network. Main thread
 * only. */
#pragma once
#include "service.h"
#include "storage/networks.h"

typedef struct _MvNetworkObjects MvNetworkObjects;

MvNetworkObjects *mv_network_objects_new (MvBusService *service, MvNetworkStore *store,
                                          const MvNetworkHooks *hooks);
void              mv_network_objects_free (MvNetworkObjects *objects);
/* Serves the objects of the networks there are now, known as they are. */
int               mv_network_objects_register (MvNetworkObjects *objects);
/* A machine was defined, changed or removed: Machines is looked at again
 * once this main loop turn is over. */
void              mv_network_objects_machines_changed (MvNetworkObjects *objects);
/* Manager.CreateNetwork(s spec_json) → o; @userdata is the service. */
int               mv_network_objects_method_create (sd_bus_message *m, void *userdata,
                                                    sd_bus_error *error);
/* Manager.ListNetworks() → a(sso); @userdata is the service. */
int               mv_network_objects_method_list (sd_bus_message *m, void *userdata,
                                                  sd_bus_error *error);
/* Manager.LookupHost(s network, s name) → as and LookupAddr(s network,
 * s address) → as; @userdata is the service. */
int               mv_network_objects_method_lookup_host (sd_bus_message *m, void *userdata,
                                                         sd_bus_error *error);
int               mv_network_objects_method_lookup_addr (sd_bus_message *m, void *userdata,
                                                         sd_bus_error *error);
char             *mv_network_object_path (const char *id);
