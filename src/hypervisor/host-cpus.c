/* The host CPUs vCPUs may be pinned to, and pinning (host-cpus.h). */
#include "host-cpus.h"
#include "core/errors.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* ---- sets ---- */

void
mv_cpu_set_clear (MvCpuSet *set)
{
  memset (set, 0, sizeof *set);
}

void
mv_cpu_set_add (MvCpuSet *set, guint cpu)
{
  g_return_if_fail (cpu < MV_HOST_CPUS_MAX);
  set->words[cpu / 64] |= G_GUINT64_CONSTANT (1) << (cpu % 64);
}

gboolean
mv_cpu_set_has (const MvCpuSet *set, guint cpu)
{
  return cpu < MV_HOST_CPUS_MAX &&
         (set->words[cpu / 64] & (G_GUINT64_CONSTANT (1) << (cpu % 64))) != 0;
}

guint
mv_cpu_set_count (const MvCpuSet *set)
{
  guint n = 0;

  for (guint i = 0; i < G_N_ELEMENTS (set->words); i++)
    n += (guint) __builtin_popcountll (set->words[i]);
  return n;
}

void
mv_cpu_set_intersect (MvCpuSet *set, const MvCpuSet *other)
{
  for (guint i = 0; i < G_N_ELEMENTS (set->words); i++)
    set->words[i] &= other->words[i];
}

static gboolean
parse_cpu (const char **p, guint *cpu)
{
  guint64 value = 0;

  if (!g_ascii_isdigit (**p))
    return FALSE;
  while (g_ascii_isdigit (**p))
    {
      value = value * 10 + (guint64) (**p - '0');
      if (value >= MV_HOST_CPUS_MAX)
        return FALSE;
      (*p)++;
    }
  *cpu = (guint) value;
  return TRUE;
}

gboolean
mv_cpu_set_parse (MvCpuSet *set, const char *text)
{
  const char *p = text;

  mv_cpu_set_clear (set);
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p == '\0' || *p == '\n')
    return TRUE;
  for (;;)
    {
      guint first, last;

      if (!parse_cpu (&p, &first))
        return FALSE;
      last = first;
      if (*p == '-')
        {
          p++;
          if (!parse_cpu (&p, &last) || last < first)
            return FALSE;
        }
      for (guint cpu = first; cpu <= last; cpu++)
        mv_cpu_set_add (set, cpu);
      if (*p != ',')
        break;
      p++;
    }
  while (*p == ' ' || *p == '\t' || *p == '\n')
    p++;
  return *p == '\0';
}

char *
mv_cpu_set_to_string (const MvCpuSet *set)
{
  GString *text = g_string_new (NULL);

  for (guint cpu = 0; cpu < MV_HOST_CPUS_MAX; cpu++)
    {
      guint last = cpu;

      if (!mv_cpu_set_has (set, cpu))
        continue;
      while (last + 1 < MV_HOST_CPUS_MAX && mv_cpu_set_has (set, last + 1))
        last++;
      g_string_append_printf (text, "%s%u", text->len ? "," : "", cpu);
      if (last > cpu)
        g_string_append_printf (text, "-%u", last);
      cpu = last;
    }
  return g_string_free (text, FALSE);
}

/* ---- the host ---- */

static gboolean
own_affinity (pid_t tid, MvCpuSet *set, GError **error)
{
  cpu_set_t *mask = CPU_ALLOC (MV_HOST_CPUS_MAX);
  size_t size = CPU_ALLOC_SIZE (MV_HOST_CPUS_MAX);
  int saved;

  CPU_ZERO_S (size, mask);
  if (sched_getaffinity (tid, size, mask) < 0)
    {
      saved = errno;
      CPU_FREE (mask);
      return mv_error_set (error, saved == ESRCH ? MV_ERROR_INVALID_STATE : MV_ERROR_FAILED,
                           "Could not read the CPU affinity of thread %d: %s", (int) tid,
                           g_strerror (saved));
    }
  mv_cpu_set_clear (set);
  for (guint cpu = 0; cpu < MV_HOST_CPUS_MAX; cpu++)
    if (CPU_ISSET_S (cpu, size, mask))
      mv_cpu_set_add (set, cpu);
  CPU_FREE (mask);
  return TRUE;
}

gboolean
mv_host_cpus_read (const char *online_path, const char *cpuset_text, MvHostCpus *host,
                   GError **error)
{
  g_autofree char *online = NULL;
  g_autoptr (GError) local = NULL;

  if (!g_file_get_contents (online_path, &online, NULL, &local))
    return mv_error_set (error, MV_ERROR_FAILED, "Could not read the host's online CPUs: %s",
                         local->message);
  if (!mv_cpu_set_parse (&host->online, online))
    return mv_error_set (error, MV_ERROR_FAILED, "%s is not a CPU list: %s", online_path,
                         g_strstrip (online));
  /* The process's, as its main thread has it: what `taskset -p` and a
   * cpuset change set, which threads started before do not follow. */
  if (!own_affinity (getpid (), &host->allowed, error))
    return FALSE;
  mv_cpu_set_intersect (&host->allowed, &host->online);
  if (cpuset_text)
    {
      MvCpuSet cpuset;

      if (!mv_cpu_set_parse (&cpuset, cpuset_text))
        return mv_error_set (error, MV_ERROR_FAILED, "The VMMs' cpuset is not a CPU list: %s",
                             cpuset_text);
      mv_cpu_set_intersect (&host->allowed, &cpuset);
    }
  return TRUE;
}

gboolean
mv_host_cpus_check (const MvHostCpus *host, const GPtrArray *affinity, GError **error)
{
  for (guint i = 0; affinity && i < affinity->len; i++)
    {
      const MvCpuAffinity *entry = g_ptr_array_index (affinity, i);

      for (guint j = 0; j < entry->host_cpus->len; j++)
        {
          guint32 cpu = g_array_index (entry->host_cpus, guint32, j);
          g_autofree char *online = NULL;
          g_autofree char *allowed = NULL;

          if (!mv_cpu_set_has (&host->online, cpu))
            {
              online = mv_cpu_set_to_string (&host->online);
              return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                                   "cpu_affinity[%u].host_cpus: CPU %u is not an online CPU "
                                   "of this host (online: %s)", i, cpu,
                                   *online ? online : "none");
            }
          if (!mv_cpu_set_has (&host->allowed, cpu))
            {
              allowed = mv_cpu_set_to_string (&host->allowed);
              return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                                   "cpu_affinity[%u].host_cpus: CPU %u is not among the CPUs "
                                   "microvmd and its VMMs may use (%s)", i, cpu,
                                   *allowed ? allowed : "none");
            }
        }
    }
  return TRUE;
}

/* ---- threads ---- */

static gboolean
check_thread_of (pid_t pid, pid_t tid, GError **error)
{
  g_autofree char *task = g_strdup_printf ("/proc/%d/task/%d", (int) pid, (int) tid);

  if (pid <= 0 || tid <= 0 || !g_file_test (task, G_FILE_TEST_IS_DIR))
    return mv_error_set (error, MV_ERROR_INVALID_STATE,
                         "Thread %d is not a thread of the VMM (process %d)", (int) tid,
                         (int) pid);
  return TRUE;
}

gboolean
mv_host_cpus_pin_thread (pid_t pid, pid_t tid, const GArray *host_cpus, GError **error)
{
  cpu_set_t *mask;
  size_t size = CPU_ALLOC_SIZE (MV_HOST_CPUS_MAX);
  int saved;

  if (!check_thread_of (pid, tid, error))
    return FALSE;
  mask = CPU_ALLOC (MV_HOST_CPUS_MAX);
  CPU_ZERO_S (size, mask);
  for (guint i = 0; i < host_cpus->len; i++)
    {
      guint32 cpu = g_array_index (host_cpus, guint32, i);

      if (cpu < MV_HOST_CPUS_MAX)
        CPU_SET_S (cpu, size, mask);
    }
  if (sched_setaffinity (tid, size, mask) < 0)
    {
      saved = errno;
      CPU_FREE (mask);
      return mv_error_set (error, saved == ESRCH ? MV_ERROR_INVALID_STATE : MV_ERROR_FAILED,
                           "Could not pin thread %d of the VMM (process %d): %s", (int) tid,
                           (int) pid, g_strerror (saved));
    }
  CPU_FREE (mask);
  return TRUE;
}

gboolean
mv_host_cpus_thread_affinity (pid_t pid, pid_t tid, MvCpuSet *set, GError **error)
{
  return check_thread_of (pid, tid, error) && own_affinity (tid, set, error);
}
