/* microvmd with the test runtime ("test" hypervisor type) in front of the
 * built-in ones: the daemon's own code, with a runtime that boots nothing,
 * and host devices read below $MICROVMD_TEST_HOST_ROOT when it is set. */
#include "daemon/daemon.h"
#include "hypervisor/host-devices.h"
#include "test-runtime.h"

/* A machine is migrating while a file named by its ID exists in the
 * directory $MICROVMD_TEST_MIGRATING_DIR. */
static gboolean
test_migration_guard (const char *machine_id, gpointer user_data)
{
  const char *dir = user_data;
  g_autofree char *path = g_build_filename (dir, machine_id, NULL);

  return g_file_test (path, G_FILE_TEST_EXISTS);
}

static void
setup (MvDaemon *daemon)
{
  const char *dir = g_getenv ("MICROVMD_TEST_MIGRATING_DIR");

  if (dir)
    mv_daemon_set_migration_guard (daemon, test_migration_guard, (gpointer) dir);
}

int
main (int argc, char **argv)
{
  MvRuntime *runtimes[] = { mv_test_runtime_new (), NULL };
  int status;

  /* Host devices are read below a tree of the test's own. */
  mv_host_devices_set_root (g_getenv ("MICROVMD_TEST_HOST_ROOT"));
  mv_daemon_set_setup_func (setup);
  status = mv_daemon_main (argc, argv, runtimes);

  g_free (runtimes[0]);
  return status;
}
