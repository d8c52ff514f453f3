#include "core/capacity.h"
#include "core/errors.h"

#include <math.h>

#define GiB (G_GUINT64_CONSTANT (1) << 30)
#define MiB (G_GUINT64_CONSTANT (1) << 20)

static MvCapacity
capacity (guint cpus, guint64 memory, guint64 reserved, double cpu_oc, double mem_oc)
{
  return (MvCapacity) {
    .host = { cpus, memory },
    .reserved_memory_bytes = reserved,
    .cpu_overcommit = cpu_oc,
    .memory_overcommit = mem_oc,
    .admission = TRUE,
  };
}

static void
test_defaults (void)
{
  MvCapacity c = mv_capacity_default ((MvResources) { 8, 16 * GiB });

  g_assert_cmpfloat (c.cpu_overcommit, ==, 4.0);
  g_assert_cmpfloat (c.memory_overcommit, ==, 1.0);
  g_assert_cmpuint (c.reserved_memory_bytes, ==, 0);
  g_assert_true (mv_capacity_validate (&c, NULL));
}

static const struct {
  const char *what;
  guint       cpus;
  guint64     memory, reserved;
  double      cpu_oc, mem_oc;
  guint       vcpus;           /* allocatable */
  guint64     memory_bytes;
} allocatable_rows[] = {
  { "no overcommit", 8, 16 * GiB, 0, 1.0, 1.0, 8, 16 * GiB },
  { "cpu 4, reserve", 8, 16 * GiB, 2 * GiB, 4.0, 1.0, 32, 14 * GiB },
  { "memory overcommit after the reserve", 2, 10 * GiB, 2 * GiB, 1.0, 1.5, 2, 12 * GiB },
  { "fractions round down", 3, 1000, 1, 1.5, 1.5, 4, 1498 },
  { "a product just below a whole number", 100, 100, 0, 1.15, 1.15, 115, 115 },
  { "largest factor", 2, GiB, 0, 64.0, 1.0, 128, GiB },
  { "nearly all reserved", 1, GiB, GiB - MiB, 1.0, 1.0, 1, MiB },
  { "not measured: unlimited", 0, 0, 0, 4.0, 1.0, G_MAXUINT, G_MAXUINT64 },
  { "memory unknown: unlimited", 4, 0, 0, 4.0, 1.0, G_MAXUINT, G_MAXUINT64 },
};

static void
test_allocatable (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (allocatable_rows); i++)
    {
      MvCapacity c = capacity (allocatable_rows[i].cpus, allocatable_rows[i].memory,
                               allocatable_rows[i].reserved, allocatable_rows[i].cpu_oc,
                               allocatable_rows[i].mem_oc);
      MvResources a = mv_capacity_allocatable (&c);

      g_test_message ("%s", allocatable_rows[i].what);
      g_assert_cmpuint (a.vcpus, ==, allocatable_rows[i].vcpus);
      g_assert_cmpuint (a.memory_bytes, ==, allocatable_rows[i].memory_bytes);
    }
}

static const struct {
  guint64     reserved;
  double      cpu_oc, mem_oc;
  const char *message;         /* NULL: valid */
} validate_rows[] = {
  { 0, 1.0, 1.0, NULL },
  { 4 * GiB - 1, 64.0, 64.0, NULL },
  { 0, 0.5, 1.0, "[resources] cpu-overcommit: 0.5 is not from 1 to 64" },
  { 0, 1.0, 0.99, "[resources] memory-overcommit: 0.99 is not from 1 to 64" },
  { 0, 65.0, 1.0, "[resources] cpu-overcommit: 65 is not from 1 to 64" },
  { 0, 1.0, NAN, "[resources] memory-overcommit: nan is not from 1 to 64" },
  { 4 * GiB, 1.0, 1.0,
    "[resources] reserved-memory-bytes: 4294967296 (4 GiB) is not below the host's memory "
    "of 4294967296 (4 GiB)" },
  { 5 * GiB, 1.0, 1.0,
    "[resources] reserved-memory-bytes: 5368709120 (5 GiB) is not below the host's memory "
    "of 4294967296 (4 GiB)" },
};

static void
test_validate (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (validate_rows); i++)
    {
      MvCapacity c = capacity (2, 4 * GiB, validate_rows[i].reserved, validate_rows[i].cpu_oc,
                               validate_rows[i].mem_oc);
      g_autoptr (GError) error = NULL;
      gboolean ok = mv_capacity_validate (&c, &error);

      if (!validate_rows[i].message)
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          continue;
        }
      g_assert_false (ok);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (!g_str_has_prefix (error->message, validate_rows[i].message))
        g_test_fail_printf ("row %u: %s", i, error->message);
    }
}

/* A 4-CPU host with 8 GiB, 1 GiB reserved, CPU overcommitted 2: 8 vCPUs
 * and 7 GiB allocatable. */
static const struct {
  guint       vcpus;
  guint64     memory;
  const char *message;         /* NULL: could start */
} ever_rows[] = {
  { 1, 256 * MiB, NULL },
  { 4, 7 * GiB, NULL },
  { 5, 256 * MiB, "cpu_millicores: 5 vCPUs is more than this host's 4 CPUs" },
  { 1, 7 * GiB + 2 * MiB,
    "memory_bytes: 7518289920 (7.0 GiB) is more than this host's memory for machines, "
    "7516192768 (7 GiB)" },
  { 5, 8 * GiB, "cpu_millicores: 5 vCPUs" },
};

static void
test_check_ever (void)
{
  MvCapacity c = capacity (4, 8 * GiB, GiB, 2.0, 1.0);
  MvCapacity unlimited = capacity (0, 0, 0, 1.0, 1.0);

  for (guint i = 0; i < G_N_ELEMENTS (ever_rows); i++)
    {
      MvResources wanted = { ever_rows[i].vcpus, ever_rows[i].memory };
      g_autoptr (GError) error = NULL;
      gboolean ok = mv_capacity_check_ever (&c, &wanted, &error);

      g_assert_true (mv_capacity_check_ever (&unlimited, &wanted, NULL));
      if (!ever_rows[i].message)
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          continue;
        }
      g_assert_false (ok);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (!g_str_has_prefix (error->message, ever_rows[i].message))
        g_test_fail_printf ("row %u: %s", i, error->message);
    }
}

static const struct {
  guint   want_vcpus;
  guint64 want_memory;
  guint   held_vcpus;
  guint64 held_memory;
  gboolean fits;
} admit_rows[] = {
  { 1, GiB, 0, 0, TRUE },
  { 8, 7 * GiB, 0, 0, TRUE },              /* exactly all of it */
  { 1, GiB, 7, 6 * GiB, TRUE },            /* the last slot */
  { 2, GiB, 7, 6 * GiB, FALSE },           /* one vCPU short */
  { 1, GiB + 1, 7, 6 * GiB, FALSE },       /* one byte short */
  { 1, GiB, 9, 0, FALSE },                 /* held beyond allocatable already */
  { 0, 0, 8, 7 * GiB, TRUE },              /* nothing fits in nothing */
  { 1, 1, G_MAXUINT, G_MAXUINT64, FALSE }, /* no overflow */
};

static void
test_admit (void)
{
  MvCapacity c = capacity (4, 8 * GiB, GiB, 2.0, 1.0);

  for (guint i = 0; i < G_N_ELEMENTS (admit_rows); i++)
    {
      MvResources wanted = { admit_rows[i].want_vcpus, admit_rows[i].want_memory };
      MvResources held = { admit_rows[i].held_vcpus, admit_rows[i].held_memory };
      g_autoptr (GError) error = NULL;

      g_test_message ("row %u", i);
      g_assert_cmpint (mv_capacity_fits (&c, &wanted, &held), ==, admit_rows[i].fits);
      if (!admit_rows[i].fits)
        {
          g_assert_false (mv_capacity_refuse (&c, "web", &wanted, &held, NULL, &error));
          g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
        }
    }
}

/* [resources] admission=false: every row fits, nothing is refused ever. */
static void
test_admission_off (void)
{
  MvCapacity c = capacity (4, 8 * GiB, GiB, 2.0, 1.0);
  MvResources huge = { 64, 1024 * GiB };

  c.admission = FALSE;
  g_assert_false (mv_capacity_is_limited (&c));
  for (guint i = 0; i < G_N_ELEMENTS (admit_rows); i++)
    {
      MvResources wanted = { admit_rows[i].want_vcpus, admit_rows[i].want_memory };
      MvResources held = { admit_rows[i].held_vcpus, admit_rows[i].held_memory };

      g_assert_true (mv_capacity_fits (&c, &wanted, &held));
    }
  g_assert_true (mv_capacity_check_ever (&c, &huge, NULL));
  c.admission = TRUE;
  g_assert_false (mv_capacity_check_ever (&c, &huge, NULL));
}

static void
test_admit_message (void)
{
  MvCapacity c = capacity (4, 8 * GiB, GiB, 2.0, 1.0);
  MvResources wanted = { 2, GiB };
  MvResources held = { 7, 6 * GiB };
  g_autoptr (GError) error = NULL;

  g_assert_false (mv_capacity_fits (&c, &wanted, &held));
  g_assert_false (mv_capacity_refuse (&c, "web", &wanted, &held, NULL, &error));
  g_assert_cmpstr (error->message, ==,
                   "Not enough room on this host for machine web: "
                   "vCPUs: it wants 2, machines hold 7 of 8 allocatable; "
                   "memory: it wants 1073741824 bytes, machines hold 6442450944 of "
                   "7516192768 allocatable");

  /* What templates being built hold is told apart from the machines'. */
  g_clear_error (&error);
  g_assert_false (mv_capacity_refuse (&c, "web", &wanted, &held,
                                      &(MvResources) { 1, GiB / 2 }, &error));
  g_assert_true (g_str_has_suffix (error->message, " of 7516192768 allocatable; warm templates "
                                   "being built hold 1 vCPUs and 536870912 bytes besides"));
}

static void
test_resources_add (void)
{
  MvResources sum = { 1, GiB };

  mv_resources_add (&sum, &(MvResources) { 2, GiB });
  g_assert_cmpuint (sum.vcpus, ==, 3);
  g_assert_cmpuint (sum.memory_bytes, ==, 2 * GiB);
  mv_resources_add (&sum, &(MvResources) { G_MAXUINT, G_MAXUINT64 });
  g_assert_cmpuint (sum.vcpus, ==, G_MAXUINT);
  g_assert_cmpuint (sum.memory_bytes, ==, G_MAXUINT64);
}

static void
test_resources_take (void)
{
  MvResources from = { 3, 2 * GiB };

  mv_resources_take (&from, &(MvResources) { 1, GiB / 2 });
  g_assert_cmpuint (from.vcpus, ==, 2);
  g_assert_cmpuint (from.memory_bytes, ==, GiB + GiB / 2);
  /* Never below zero. */
  mv_resources_take (&from, &(MvResources) { 5, 4 * GiB });
  g_assert_cmpuint (from.vcpus, ==, 0);
  g_assert_cmpuint (from.memory_bytes, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/capacity/defaults", test_defaults);
  g_test_add_func ("/capacity/allocatable", test_allocatable);
  g_test_add_func ("/capacity/validate", test_validate);
  g_test_add_func ("/capacity/admission-off", test_admission_off);
  g_test_add_func ("/capacity/check-ever", test_check_ever);
  g_test_add_func ("/capacity/admit", test_admit);
  g_test_add_func ("/capacity/admit-message", test_admit_message);
  g_test_add_func ("/capacity/resources-add", test_resources_add);
  g_test_add_func ("/capacity/resources-take", test_resources_take);
  return g_test_run ();
}
