#include "manager-resources.h"
#include "bus-util.h"
#include "core/errors.h"
#include "names.h"
#include "reconcile/reconciler.h"

static int
append_resources (sd_bus_message *reply, const char *vcpus_key, const char *memory_key,
                  const MvResources *r)
{
  return sd_bus_message_append (reply, "{sv}{sv}", vcpus_key, "u", (uint32_t) r->vcpus,
                                memory_key, "t", (uint64_t) r->memory_bytes);
}

/* The capacity's members, within an open a{sv}. */
static int
append_capacity (sd_bus_message *reply, const MvCapacity *capacity)
{
  MvResources allocatable = mv_capacity_allocatable (capacity);
  int r;

  r = append_resources (reply, "host_vcpus", "host_memory_bytes", &capacity->host);
  if (r >= 0)
    r = sd_bus_message_append (reply, "{sv}{sv}{sv}",
                               "reserved_memory_bytes", "t",
                               (uint64_t) capacity->reserved_memory_bytes,
                               "cpu_overcommit", "d", capacity->cpu_overcommit,
                               "memory_overcommit", "d", capacity->memory_overcommit);
  if (r >= 0)
    r = sd_bus_message_append (reply, "{sv}", "admission", "b", (int) capacity->admission);
  if (r >= 0)
    r = append_resources (reply, "allocatable_vcpus", "allocatable_memory_bytes", &allocatable);
  return r;
}

int
mv_manager_get_capacity (sd_bus *bus, const char *path, const char *interface,
                         const char *property, sd_bus_message *reply, void *userdata,
                         sd_bus_error *error)
{
  const MvCapacity *capacity = mv_reconciler_capacity (mv_bus_service_reconciler (userdata));
  int r = sd_bus_message_open_container (reply, 'a', "{sv}");

  if (r >= 0)
    r = append_capacity (reply, capacity);
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

int
mv_manager_method_check_resources (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvReconciler *rec = mv_bus_service_reconciler (userdata);
  g_autoptr (GError) local = NULL;
  MvResources wanted;
  gboolean fits_now = FALSE;
  uint32_t vcpus;
  uint64_t memory;
  int r;

  r = sd_bus_message_read (m, "ut", &vcpus, &memory);
  if (r < 0)
    return r;
  if (vcpus == 0 || memory == 0)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "%s: a machine has at least one (0 given)",
                              vcpus == 0 ? "vcpus" : "memory_bytes");
  wanted = (MvResources) { vcpus, memory };
  if (!mv_reconciler_check_resources (rec, &wanted, &fits_now, &local))
    return mv_bus_error_from_gerror (error, local);
  return sd_bus_reply_method_return (m, "b", (int) fits_now);
}

/* a{su} of @names (NULL-terminated) and their @counts. */
static int
append_counts (sd_bus_message *reply, const char *key, const char *const *names,
               const guint *counts, guint n)
{
  int r = sd_bus_message_open_container (reply, 'e', "sv");

  if (r >= 0)
    r = sd_bus_message_append (reply, "s", key);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'v', "a{su}");
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "{su}");
  for (guint i = 0; r >= 0 && i < n; i++)
    r = sd_bus_message_append (reply, "{su}", names[i], (uint32_t) counts[i]);
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  return r;
}

static int
append_usage (sd_bus_message *reply, MvBusService *service, const MvUsage *usage)
{
  const char *states[MV_STATE_COUNT];
  int r;

  for (guint i = 0; i < MV_STATE_COUNT; i++)
    states[i] = mv_state_to_string (i);
  r = append_counts (reply, "by_state", states, usage->by_state, MV_STATE_COUNT);
  if (r >= 0)
    r = append_counts (reply, "by_health", mv_health_statuses, usage->by_health,
                       MV_HEALTH_STATUS_COUNT);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'e', "sv");
  if (r >= 0)
    r = sd_bus_message_append (reply, "s", "capacity");
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'v', "a{sv}");
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "{sv}");
  if (r >= 0)
    r = append_capacity (reply, &usage->capacity);
  for (guint i = 0; i < 3 && r >= 0; i++)
    r = sd_bus_message_close_container (reply);
  if (r >= 0)
    r = append_resources (reply, "held_vcpus", "held_memory_bytes", &usage->held);

  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'e', "sv");
  if (r >= 0)
    r = sd_bus_message_append (reply, "s", "machines");
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'v', "a(sssout)");
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "(sssout)");
  for (guint i = 0; r >= 0 && i < usage->holders->len; i++)
    {
      MvMachine *machine = usage->holders->pdata[i];
      MvResources held = mv_machine_held (machine);

      r = sd_bus_message_append (reply, "(sssout)", machine->id, machine->config->spec->name,
                                 mv_state_to_string (machine->status->state),
                                 mv_bus_view (service, machine)->path, (uint32_t) held.vcpus,
                                 (uint64_t) held.memory_bytes);
    }
  for (guint i = 0; i < 3 && r >= 0; i++)
    r = sd_bus_message_close_container (reply);
  return r;
}

int
mv_manager_method_get_usage (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvBusService *service = userdata;
  g_autoptr (MvUsage) usage = mv_reconciler_usage (mv_bus_service_reconciler (service));
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  r = sd_bus_message_new_method_return (m, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "{sv}");
  if (r >= 0)
    r = append_usage (reply, service, usage);
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}
