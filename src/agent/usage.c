/* USAGE: what the guest's CPUs have done, as /proc/stat counts it, sent to
 * every greeted session every MV_AGENT_USAGE_INTERVAL_MS. */
#include "agent.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int64_t next_usage;

/* The busy and total ticks of all CPUs since boot; false if /proc/stat
 * cannot be read. */
static bool
read_cpu_ticks (uint64_t *busy, uint64_t *total)
{
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0,
                     softirq = 0, steal = 0;
  FILE *f = fopen ("/proc/stat", "re");
  int n;

  if (!f)
    return false;
  n = fscanf (f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle,
              &iowait, &irq, &softirq, &steal);
  fclose (f);
  if (n < 4)
    return false;
  *busy = user + nice + system + irq + softirq + steal;
  *total = *busy + idle + iowait;
  return true;
}

int64_t
usage_next_deadline (void)
{
  if (!next_usage)
    next_usage = now_ms () + MV_AGENT_USAGE_INTERVAL_MS;
  return next_usage;
}

void
usage_timers (void)
{
  uint64_t busy, total;
  long cpus;

  if (now_ms () < usage_next_deadline ())
    return;
  next_usage = now_ms () + MV_AGENT_USAGE_INTERVAL_MS;
  if (!read_cpu_ticks (&busy, &total))
    return;
  cpus = sysconf (_SC_NPROCESSORS_ONLN);
  for (size_t i = 0; i < agent.n_sessions; i++)
    {
      Session *s = agent.sessions[i];

      if (!s->hello)
        continue;
      mv_agent_buf_begin (&s->out, MV_AGENT_USAGE, 0);
      mv_agent_buf_put_u64 (&s->out, MV_AGENT_F_CPU_BUSY, busy);
      mv_agent_buf_put_u64 (&s->out, MV_AGENT_F_CPU_TOTAL, total);
      mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_CPUS, cpus > 0 ? (uint32_t) cpus : 1);
      mv_agent_buf_end (&s->out);
    }
}
