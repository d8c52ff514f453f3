/* sd-bus glue shared by the daemon's bus objects. */
#pragma once
#include <gio/gio.h>
#include <systemd/sd-bus.h>

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus, sd_bus_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_slot, sd_bus_slot_unref)

/* Attaches @bus to the thread-default main context: the bus is processed
 * whenever its fd is ready or its timeout expires. */
GSource *mv_bus_source_attach (sd_bus *bus);

/* Fills @ret from a GError of the MV_ERROR domain (or any other) and
 * returns the negative errno sd-bus handlers return. */
int      mv_bus_error_from_gerror (sd_bus_error *ret, const GError *error);
/* Replies to @call with @error; used for calls answered asynchronously. */
void     mv_bus_reply_gerror (sd_bus_message *call, const GError *error);
/* Runs @func on a worker thread with @data as the task's data, then
 * @done on the calling (main) thread, and only then @free (@data) there
 * too: @data may hold sd-bus objects, which the main thread alone may let
 * go of. @func must not touch @data once it has returned the task. */
void     mv_bus_run_in_thread (GTaskThreadFunc func, gpointer data, GDestroyNotify free,
                               GAsyncReadyCallback done);
/* Registers the org.microvmd1.Error.* names with errno values. */
void     mv_bus_errors_register (void);
