/* How much of the host machines may be given (seed 002, Capacity and
 * Allocatable), and the arithmetic of admission: whether a machine could
 * ever start here, and whether it fits beside what others hold now.
 * Pure. */
#pragma once
#include <glib.h>

/* An amount of the host's CPU and memory (seed 002, Resources). */
typedef struct {
  guint   vcpus;
  guint64 memory_bytes;
} MvResources;

/* [resources] in microvmd.conf. Four vCPUs may share a CPU: guests are
 * mostly idle, and a busy one only runs slower. Memory is not
 * overcommitted: a guest's memory is resident once touched, and a host
 * out of it kills VMMs. */
#define MV_CPU_OVERCOMMIT_DEFAULT     4.0
#define MV_MEMORY_OVERCOMMIT_DEFAULT  1.0
/* Beyond this, a factor is more likely a typing error than a plan. */
#define MV_OVERCOMMIT_MAX             64.0

typedef struct {
  /* What the host has: its logical CPUs and its memory. A zero in either
   * is a capacity that limits nothing (a host that was not measured). */
  MvResources host;
  guint64     reserved_memory_bytes;  /* withheld from machines altogether */
  double      cpu_overcommit;         /* vCPUs that may share each CPU */
  double      memory_overcommit;      /* scales the memory left after the reserve */
  /* FALSE: starts are not judged at all ([resources] admission=false),
   * for a host whose placement is decided elsewhere. */
  gboolean    admission;
} MvCapacity;

/* The capacity of a host with @host, before any configuration: the
 * defaults above, nothing reserved. */
MvCapacity  mv_capacity_default (MvResources host);
/* Whether @capacity limits anything: admission is on and the host was
 * measured. */
gboolean    mv_capacity_is_limited (const MvCapacity *capacity);
/* The rules a configured capacity is held to: overcommit factors from 1 to
 * MV_OVERCOMMIT_MAX, less memory reserved than the host has. The message
 * names the key of [resources] and the limit. */
gboolean    mv_capacity_validate (const MvCapacity *capacity, GError **error);
/* What machines may be given between them: the host's CPUs times
 * cpu_overcommit, and its memory less the reserve, times
 * memory_overcommit, each rounded down. G_MAXUINT and G_MAXUINT64 when
 * not limited. */
MvResources mv_capacity_allocatable (const MvCapacity *capacity);

/* MV_ERROR_INVALID_ARGUMENT unless a machine of @wanted could ever start
 * here: no more vCPUs than the host has CPUs (overcommit shares CPUs
 * between machines, it does not give one machine more than there are),
 * and no more memory than is allocatable. The message names the spec's
 * field (cpu_millicores, memory_bytes) and the limit. */
gboolean    mv_capacity_check_ever (const MvCapacity *capacity, const MvResources *wanted,
                                    GError **error);
/* Whether @wanted fits beside @held in what is allocatable. */
gboolean    mv_capacity_fits (const MvCapacity *capacity, const MvResources *wanted,
                              const MvResources *held);
/* MV_ERROR_RESOURCE_EXHAUSTED naming @machine_name and, for CPU and
 * memory, what it wants, what @held the machines hold and what is
 * allocatable, as exact numbers; @templates (may be NULL) is what warm
 * templates being built hold besides. FALSE. */
gboolean    mv_capacity_refuse (const MvCapacity *capacity, const char *machine_name,
                                const MvResources *wanted, const MvResources *held,
                                const MvResources *templates, GError **error);

/* @sum plus @r, saturating. */
void        mv_resources_add (MvResources *sum, const MvResources *r);
/* @from less @r, never below zero. */
void        mv_resources_take (MvResources *from, const MvResources *r);
