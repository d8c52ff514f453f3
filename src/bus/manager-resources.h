/* What the host offers machines and what they hold of it (seed 002,
 * Capacity and Usage): Manager.Capacity, Manager.CheckResources and
 * Manager.GetUsage. Reads, open to every local user. */
#pragma once
#include "service.h"

/* The Capacity property, a{sv}. */
int mv_manager_get_capacity (sd_bus *bus, const char *path, const char *interface,
                             const char *property, sd_bus_message *reply, void *userdata,
                             sd_bus_error *error);
/* CheckResources(u vcpus, t memory_bytes) → b fits_now. */
int mv_manager_method_check_resources (sd_bus_message *m, void *userdata, sd_bus_error *error);
/* GetUsage() → a{sv} usage. */
int mv_manager_method_get_usage (sd_bus_message *m, void *userdata, sd_bus_error *error);
