#include "capacity.h"
#include "errors.h"
#include "text.h"

#include <math.h>

MvCapacity
mv_capacity_default (MvResources host)
{
  return (MvCapacity) {
    .host = host,
    .cpu_overcommit = MV_CPU_OVERCOMMIT_DEFAULT,
    .memory_overcommit = MV_MEMORY_OVERCOMMIT_DEFAULT,
    .admission = TRUE,
  };
}

gboolean
mv_capacity_is_limited (const MvCapacity *capacity)
{
  return capacity->admission && capacity->host.vcpus != 0 && capacity->host.memory_bytes != 0;
}

static gboolean
check_factor (const char *key, double value, GError **error)
{
  if (isfinite (value) && value >= 1.0 && value <= MV_OVERCOMMIT_MAX)
    return TRUE;
  return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                       "[resources] %s: %g is not from 1 to %g (1 gives each vCPU or byte "
                       "what the host has; below 1 would leave part of the host unused)",
                       key, value, MV_OVERCOMMIT_MAX);
}

gboolean
mv_capacity_validate (const MvCapacity *capacity, GError **error)
{
  if (!check_factor ("cpu-overcommit", capacity->cpu_overcommit, error) ||
      !check_factor ("memory-overcommit", capacity->memory_overcommit, error))
    return FALSE;
  if (capacity->host.memory_bytes != 0 &&
      capacity->reserved_memory_bytes >= capacity->host.memory_bytes)
    {
      g_autofree char *reserved = mv_text_bytes (capacity->reserved_memory_bytes);
      g_autofree char *host = mv_text_bytes (capacity->host.memory_bytes);

      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                           "[resources] reserved-memory-bytes: %s is not below the host's "
                           "memory of %s", reserved, host);
    }
  return TRUE;
}

/* @amount times @factor, rounded down; a product a rounding error puts
 * just below a whole number (100 × 1.15) is that number. */
static guint64
scale (guint64 amount, double factor, guint64 max)
{
  long double product;

  if (factor == 1.0)
    return MIN (amount, max);
  product = (long double) amount * factor;
  product += product * 1e-12L;
  /* Positive: the conversion rounds down. */
  return product >= (long double) max ? max : (guint64) product;
}

MvResources
mv_capacity_allocatable (const MvCapacity *capacity)
{
  guint64 memory;

  if (!mv_capacity_is_limited (capacity))
    return (MvResources) { G_MAXUINT, G_MAXUINT64 };
  memory = capacity->host.memory_bytes > capacity->reserved_memory_bytes
             ? capacity->host.memory_bytes - capacity->reserved_memory_bytes
             : 0;
  return (MvResources) {
    .vcpus = (guint) scale (capacity->host.vcpus, capacity->cpu_overcommit, G_MAXUINT),
    .memory_bytes = scale (memory, capacity->memory_overcommit, G_MAXUINT64),
  };
}

gboolean
mv_capacity_check_ever (const MvCapacity *capacity, const MvResources *wanted, GError **error)
{
  MvResources allocatable = mv_capacity_allocatable (capacity);

  if (!mv_capacity_is_limited (capacity))
    return TRUE;
  if (wanted->vcpus > capacity->host.vcpus)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "cpu_millicores: %u vCPUs is more than this host's %u CPUs",
                         wanted->vcpus, capacity->host.vcpus);
  if (wanted->memory_bytes > allocatable.memory_bytes)
    {
      g_autofree char *want = mv_text_bytes (wanted->memory_bytes);
      g_autofree char *limit = mv_text_bytes (allocatable.memory_bytes);

      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                           "memory_bytes: %s is more than this host's memory for machines, %s "
                           "([resources] reserved-memory-bytes and memory-overcommit)",
                           want, limit);
    }
  return TRUE;
}

static gboolean
fits (guint64 wanted, guint64 held, guint64 allocatable)
{
  return held <= allocatable && wanted <= allocatable - held;
}

gboolean
mv_capacity_fits (const MvCapacity *capacity, const MvResources *wanted, const MvResources *held)
{
  MvResources allocatable = mv_capacity_allocatable (capacity);

  if (!mv_capacity_is_limited (capacity))
    return TRUE;
  return fits (wanted->vcpus, held->vcpus, allocatable.vcpus) &&
         fits (wanted->memory_bytes, held->memory_bytes, allocatable.memory_bytes);
}

gboolean
mv_capacity_refuse (const MvCapacity *capacity, const char *machine_name,
                    const MvResources *wanted, const MvResources *held,
                    const MvResources *templates, GError **error)
{
  MvResources allocatable = mv_capacity_allocatable (capacity);
  g_autofree char *besides = NULL;

  if (templates && templates->vcpus != 0)
    besides = g_strdup_printf ("; warm templates being built hold %u vCPUs and %"
                               G_GUINT64_FORMAT " bytes besides",
                               templates->vcpus, templates->memory_bytes);
  /* Both resources, whichever is short: the caller sees how far off it is. */
  return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                       "Not enough room on this host for machine %s: "
                       "vCPUs: it wants %u, machines hold %u of %u allocatable; "
                       "memory: it wants %" G_GUINT64_FORMAT " bytes, machines hold %"
                       G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " allocatable%s",
                       machine_name, wanted->vcpus, held->vcpus, allocatable.vcpus,
                       wanted->memory_bytes, held->memory_bytes, allocatable.memory_bytes,
                       besides ? besides : "");
}

void
mv_resources_add (MvResources *sum, const MvResources *r)
{
  sum->vcpus = r->vcpus > G_MAXUINT - sum->vcpus ? G_MAXUINT : sum->vcpus + r->vcpus;
  sum->memory_bytes = r->memory_bytes > G_MAXUINT64 - sum->memory_bytes
                        ? G_MAXUINT64
                        : sum->memory_bytes + r->memory_bytes;
}

void
mv_resources_take (MvResources *from, const MvResources *r)
{
  from->vcpus -= MIN (r->vcpus, from->vcpus);
  from->memory_bytes -= MIN (r->memory_bytes, from->memory_bytes);
}
