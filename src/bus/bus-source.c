/* An sd-bus connection as a GSource: the fd is polled with the events
 * sd-bus asks for at each iteration, and its timeout — an absolute
 * CLOCK_MONOTONIC time in µs — becomes the source's relative timeout. */
#include "bus-util.h"

typedef struct {
  GSource  source;
  sd_bus  *bus;
  gpointer fd_tag;
  int      events;     /* what fd_tag polls for now */
} MvBusSource;

static gboolean
bus_source_prepare (GSource *source, gint *timeout)
{
  MvBusSource *self = (MvBusSource *) source;
  uint64_t until = UINT64_MAX;
  int events;

  /* POLLOUT comes and goes with the write queue, so ask every time; but
   * change the poll only when it differs, since a change wakes the main
   * context, which would prepare again, and spin. */
  events = sd_bus_get_events (self->bus);
  if (events < 0)
    events = 0;
  if (events != self->events)
    {
      g_source_modify_unix_fd (source, self->fd_tag, events);
      self->events = events;
    }

  *timeout = -1;
  if (sd_bus_get_timeout (self->bus, &until) < 0 || until == UINT64_MAX)
    return FALSE;

  gint64 now = g_get_monotonic_time ();
  if (until <= (uint64_t) now)
    {
      *timeout = 0;
      return TRUE;
    }
  /* Round up, or we would wake just before the deadline and spin. */
  uint64_t ms = (until - (uint64_t) now + 999) / 1000;
  *timeout = ms > G_MAXINT ? G_MAXINT : (gint) ms;
  return FALSE;
}

static gboolean
bus_source_check (GSource *source)
{
  MvBusSource *self = (MvBusSource *) source;
  uint64_t until = UINT64_MAX;

  if (g_source_query_unix_fd (source, self->fd_tag) != 0)
    return TRUE;
  if (sd_bus_get_timeout (self->bus, &until) >= 0 && until != UINT64_MAX)
    return until <= (uint64_t) g_get_monotonic_time ();
  return FALSE;
}

static gboolean
bus_source_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  MvBusSource *self = (MvBusSource *) source;
  int r;

  while ((r = sd_bus_process (self->bus, NULL)) > 0)
    ;
  if (r < 0)
    {
      g_warning ("Bus connection failed: %s", g_strerror (-r));
      if (callback)
        return callback (user_data);
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
bus_source_finalize (GSource *source)
{
  MvBusSource *self = (MvBusSource *) source;
  sd_bus_unref (self->bus);
}

static GSourceFuncs bus_source_funcs = {
  .prepare = bus_source_prepare,
  .check = bus_source_check,
  .dispatch = bus_source_dispatch,
  .finalize = bus_source_finalize,
};

GSource *
mv_bus_source_attach (sd_bus *bus)
{
  GSource *source = g_source_new (&bus_source_funcs, sizeof (MvBusSource));
  MvBusSource *self = (MvBusSource *) source;

  self->bus = sd_bus_ref (bus);
  self->fd_tag = g_source_add_unix_fd (source, sd_bus_get_fd (bus), G_IO_IN);
  self->events = G_IO_IN;
  g_source_set_name (source, "sd-bus");
  /* GLib takes a source's fds out of the poll while it dispatches one that
   * may not recurse, and putting them back wakes the main context: every
   * dispatch would cost an idle turn of the loop. Nothing here runs the
   * loop from inside a dispatch. */
  g_source_set_can_recurse (source, TRUE);
  g_source_attach (source, NULL);
  return source;
}
