/* The host CPUs vCPUs may be pinned to: CPU lists, the checks of a
 * spec's cpu_affinity against a host, and pinning a thread. */
#include "hypervisor/host-cpus.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void
test_parse (void)
{
  static const struct {
    const char *text;
    const char *back;     /* NULL: refused */
  } cases[] = {
    { "0-3,8\n", "0-3,8" },
    { "0", "0" },
    { "0,1,2,5-6,7", "0-2,5-7" },
    { "", "" },
    { "\n", "" },
    { " 4095 ", "4095" },
    { "0-4095", "0-4095" },
    { "4096", NULL },
    { "0-4096", NULL },
    { "3-1", NULL },
    { "0-", NULL },
    { "-1", NULL },
    { "1,,2", NULL },
    { "1,", NULL },
    { "a", NULL },
    { "1 2", NULL },
    { "99999999999999999999", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      MvCpuSet set;
      gboolean ok = mv_cpu_set_parse (&set, cases[i].text);

      if (!cases[i].back)
        {
          if (ok)
            g_error ("\"%s\" was read as a CPU list", cases[i].text);
          continue;
        }
      g_assert_true (ok);
      {
        g_autofree char *back = mv_cpu_set_to_string (&set);

        g_assert_cmpstr (back, ==, cases[i].back);
      }
    }
}

static void
test_set (void)
{
  MvCpuSet a, b;

  g_assert_true (mv_cpu_set_parse (&a, "0-7,64,4095"));
  g_assert_cmpuint (mv_cpu_set_count (&a), ==, 10);
  g_assert_true (mv_cpu_set_has (&a, 64));
  g_assert_false (mv_cpu_set_has (&a, 63));
  g_assert_false (mv_cpu_set_has (&a, 4096));
  g_assert_true (mv_cpu_set_parse (&b, "4-70"));
  mv_cpu_set_intersect (&a, &b);
  {
    g_autofree char *text = mv_cpu_set_to_string (&a);

    g_assert_cmpstr (text, ==, "4-7,64");
  }
}

static GPtrArray *
affinity (guint32 vcpu, const guint32 *cpus, guint n)
{
  GPtrArray *list = mv_cpu_affinity_list_copy (NULL);
  MvCpuAffinity *a = mv_cpu_affinity_new (vcpu);

  g_array_append_vals (a->host_cpus, cpus, n);
  g_ptr_array_add (list, a);
  return list;
}

/* Each host CPU online and allowed, or refused naming the entry, the CPU
 * and what the host has. */
static void
test_check (void)
{
  static const struct {
    guint32     cpus[3];
    guint       n;
    const char *message;   /* NULL: accepted */
  } cases[] = {
    { { 1 }, 1, NULL },
    { { 1, 2 }, 2, NULL },
    { { 0 }, 1, "cpu_affinity[1].host_cpus: CPU 0 is not among the CPUs microvmd and its VMMs "
                "may use (1-2)" },
    { { 2, 3 }, 2, "cpu_affinity[1].host_cpus: CPU 3 is not an online CPU of this host "
                   "(online: 0-2)" },
    { { 64 }, 1, "cpu_affinity[1].host_cpus: CPU 64 is not an online CPU of this host "
                 "(online: 0-2)" },
  };
  MvHostCpus host;

  g_assert_true (mv_cpu_set_parse (&host.online, "0-2"));
  g_assert_true (mv_cpu_set_parse (&host.allowed, "1-2"));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      static const guint32 first[] = { 2 };
      g_autoptr (GPtrArray) list = affinity (0, first, 1);
      g_autoptr (GPtrArray) second = affinity (1, cases[i].cpus, cases[i].n);
      g_autoptr (GError) error = NULL;

      g_ptr_array_add (list, mv_cpu_affinity_copy (second->pdata[0]));
      if (!cases[i].message)
        {
          g_assert_true (mv_host_cpus_check (&host, list, &error));
          g_assert_no_error (error);
          continue;
        }
      g_assert_false (mv_host_cpus_check (&host, list, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, cases[i].message);
    }
  /* Nothing pinned: nothing to check. */
  g_assert_true (mv_host_cpus_check (&host, NULL, NULL));
}

/* The host as the daemon reads it: the online CPUs of the file, narrowed
 * by its own affinity and the VMMs' cpuset. */
static void
test_read (void)
{
  g_autofree char *dir = g_dir_make_tmp ("host-cpus-XXXXXX", NULL);
  g_autofree char *online = g_build_filename (dir, "online", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing", NULL);
  g_autoptr (GError) error = NULL;
  MvHostCpus host;
  MvCpuSet own;

  g_assert_true (mv_host_cpus_thread_affinity (getpid (), getpid (), &own, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (online, "0-4095\n", -1, NULL));
  g_assert_true (mv_host_cpus_read (online, NULL, &host, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (mv_cpu_set_count (&host.online), ==, MV_HOST_CPUS_MAX);
  g_assert_cmpuint (mv_cpu_set_count (&host.allowed), ==, mv_cpu_set_count (&own));

  /* A cpuset that allows CPU 0 alone, or none. */
  g_assert_true (mv_host_cpus_read (online, "0", &host, &error));
  g_assert_cmpuint (mv_cpu_set_count (&host.allowed), ==, mv_cpu_set_has (&own, 0) ? 1 : 0);
  g_assert_true (mv_host_cpus_read (online, "", &host, &error));
  g_assert_cmpuint (mv_cpu_set_count (&host.allowed), ==, 0);

  g_assert_false (mv_host_cpus_read (online, "x", &host, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_false (mv_host_cpus_read (missing, NULL, &host, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_true (g_file_set_contents (online, "zero\n", -1, NULL));
  g_assert_false (mv_host_cpus_read (online, NULL, &host, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_clear_error (&error);

  g_unlink (online);
  g_rmdir (dir);
}

typedef struct {
  GMutex  lock;
  GCond   cond;
  pid_t   tid;
  gboolean done;
} Sleeper;

static gpointer
sleeper (gpointer data)
{
  Sleeper *s = data;

  g_mutex_lock (&s->lock);
  s->tid = (pid_t) syscall (SYS_gettid);
  g_cond_broadcast (&s->cond);
  while (!s->done)
    g_cond_wait (&s->cond, &s->lock);
  g_mutex_unlock (&s->lock);
  return NULL;
}

/* A thread of this process pinned to one CPU it may use, read back as the
 * kernel has it; a thread of no such process is refused. */
static void
test_pin_thread (void)
{
  Sleeper s = { 0 };
  g_autoptr (GThread) thread = NULL;
  g_autoptr (GArray) cpus = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr (GError) error = NULL;
  MvCpuSet own, got;
  guint32 last = 0;

  g_assert_true (mv_host_cpus_thread_affinity (getpid (), getpid (), &own, &error));
  for (guint32 cpu = 0; cpu < MV_HOST_CPUS_MAX; cpu++)
    if (mv_cpu_set_has (&own, cpu))
      last = cpu;
  g_array_append_val (cpus, last);

  g_mutex_init (&s.lock);
  g_cond_init (&s.cond);
  thread = g_thread_new ("sleeper", sleeper, &s);
  g_mutex_lock (&s.lock);
  while (!s.tid)
    g_cond_wait (&s.cond, &s.lock);
  g_mutex_unlock (&s.lock);

  g_assert_true (mv_host_cpus_pin_thread (getpid (), s.tid, cpus, &error));
  g_assert_no_error (error);
  g_assert_true (mv_host_cpus_thread_affinity (getpid (), s.tid, &got, &error));
  g_assert_cmpuint (mv_cpu_set_count (&got), ==, 1);
  g_assert_true (mv_cpu_set_has (&got, last));
  /* The process itself is left as it was. */
  g_assert_true (mv_host_cpus_thread_affinity (getpid (), getpid (), &got, &error));
  g_assert_cmpuint (mv_cpu_set_count (&got), ==, mv_cpu_set_count (&own));

  /* Not a thread of the process named: refused, nothing pinned. */
  g_assert_false (mv_host_cpus_pin_thread (1, s.tid, cpus, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "is not a thread of the VMM (process 1)"));
  g_clear_error (&error);

  g_mutex_lock (&s.lock);
  s.done = TRUE;
  g_cond_broadcast (&s.cond);
  g_mutex_unlock (&s.lock);
  g_thread_join (g_steal_pointer (&thread));
  g_mutex_clear (&s.lock);
  g_cond_clear (&s.cond);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/host-cpus/parse", test_parse);
  g_test_add_func ("/host-cpus/set", test_set);
  g_test_add_func ("/host-cpus/check", test_check);
  g_test_add_func ("/host-cpus/read", test_read);
  g_test_add_func ("/host-cpus/pin-thread", test_pin_thread);
  return g_test_run ();
}
