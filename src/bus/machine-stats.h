/* Machine.GetStats, Machine.GetMetrics and Manager.GetAllStats: what
 * machines use of the host, now and over the last days. Open to every
 * local user. */
#pragma once
#include "service.h"

int  mv_machine_method_get_stats (sd_bus_message *m, MvMachine *machine, sd_bus_error *error);
int  mv_machine_method_get_metrics (sd_bus_message *m, MvMachine *machine, sd_bus_error *error);
int  mv_manager_method_get_all_stats (sd_bus_message *m, MvBusService *service,
                                      sd_bus_error *error);
