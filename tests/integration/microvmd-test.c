/* microvmd with the test runtime ("test" hypervisor type) in front of the
 * built-in ones: the daemon's own code, with a runtime that boots nothing. */
#include "daemon/daemon.h"
#include "test-runtime.h"

int
main (int argc, char **argv)
{
  MvRuntime *runtimes[] = { mv_test_runtime_new (), NULL };
  int status = mv_daemon_main (argc, argv, runtimes);

  g_free (runtimes[0]);
  return status;
}
