/* A VMM's scope under systemd: on a host whose PID 1 is systemd, each
 * machine's VMM and its helpers run in a transient scope unit of their
 * own, microvmd-<id>.scope in machine.slice, that systemd makes and holds
 * to the machine's limits (CPUQuota=, MemoryMax=, TasksMax=); the VMM is
 * registered with systemd-machined as a machine of class "vm", so that
 * machinectl and systemd-cgls show it beside containers and libvirt's
 * guests.
 *
 * Every call opens its own connection to the system bus and blocks: for
 * the worker threads that start VMMs, never for the main loop. */
#pragma once
#include "core/vmm-limits.h"

#include <glib.h>

#define MV_SCOPE_SLICE  "machine.slice"

/* Whether PID 1 is systemd (sd_booted()). */
gboolean mv_scope_host_has_systemd (void);

/* The scope's unit name for @machine_id: "microvmd-<id>.scope". */
char    *mv_scope_unit_name (const char *machine_id);

/* Puts @pid into @unit, which is started with @limits (and
 * @description) if it does not run yet, and waits until systemd has
 * moved it. */
gboolean mv_scope_place (const char *unit, const char *description, int pid,
                         const MvVmmLimits *limits, GError **error);

/* Sets @unit's limits anew while it runs (as a resize does); a unit that
 * is not loaded is no error. */
gboolean mv_scope_set_limits (const char *unit, const MvVmmLimits *limits, GError **error);

/* Stops @unit, ending whatever is left in it, and waits until it is
 * gone; one that is not loaded is no error. */
gboolean mv_scope_stop (const char *unit, GError **error);

/* Registers the machine named @name (a host name, which machined
 * requires; see mv_scope_machine_name()) with leader @pid, the VMM, in
 * its scope, with systemd-machined. */
gboolean mv_scope_register_machine (const char *name, const char *machine_id, int pid,
                                    GError **error);

/* The name machined knows the machine by: @name where machined takes it
 * (letters, digits, '-', '_' and '.', at most 64 bytes), else
 * "microvmd-<id>". */
char    *mv_scope_machine_name (const char *name, const char *machine_id);
