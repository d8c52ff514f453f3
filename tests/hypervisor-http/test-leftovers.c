/* What a start finds in its machine's runtime directory: a VMM that an
 * interrupted start left serving the socket there, unrecorded, is ended
 * before the new one starts, unless the directory was made for this
 * start (where no process can be at work); a virtiofsd left serving one
 * of its shares is ended with the share's directory. Against the
 * Firecracker test VMM, and a shell standing in for virtiofsd. */
#include "vmm-fixture.h"
#include "hypervisor/runtime.h"
#include "hypervisor/shares.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <sys/wait.h>

static MvSpec *
guest_spec (VmmFixture *fixture)
{
  MvSpec *spec = mv_spec_new ();

  spec->name = g_strdup ("guest");
  spec->kernel = g_strdup (fixture->kernel);
  spec->kernel_args = g_strdup ("console=ttyS0 microvmd.boot_ms=20");
  spec->readiness = MV_READINESS_VMM;
  spec->memory_bytes = 128 << 20;
  return spec;
}

static JsonObject *
start (MvRuntime *rt, MvRuntimeRequest *req)
{
  g_autoptr (GError) error = NULL;
  JsonObject *vmm = rt->start (rt, req, &error);

  g_assert_no_error (error);
  g_assert_nonnull (vmm);
  return vmm;
}

static void
test_left_vmm_ended (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvRuntime) rt = mv_hypervisor_runtime_new (vmm_fixture_starter ("firecracker"),
                                                        NULL, 10, 5);
  g_autoptr (MvSpec) spec = guest_spec (fixture);
  MvRuntimeRequest req = { .machine_id = "m", .spec = spec, .runtime_dir = fixture->vm_dir,
                           .runtime_dir_new = TRUE };
  g_autoptr (JsonObject) left_identity = NULL;
  g_autoptr (MvProcess) left = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (GPtrArray) serving = NULL;
  g_autoptr (GError) error = NULL;

  /* A start whose record was never written: its VMM serves on. */
  left_identity = start (rt, &req);
  left = mv_process_attach_recorded (left_identity);
  g_assert_nonnull (left);

  /* The next start, in the directory as it was left. */
  req.runtime_dir_new = FALSE;
  req.vmm = start (rt, &req);
  vmm = mv_process_attach_recorded (req.vmm);
  g_assert_nonnull (vmm);
  g_assert_cmpint (vmm->pid, !=, left->pid);
  g_assert_true (mv_process_wait (left, 5000));
  serving = mv_process_find_by_socket (fixture->socket_path);
  g_assert_cmpuint (serving->len, ==, 1);
  g_assert_cmpint (((MvProcess *) serving->pdata[0])->pid, ==, vmm->pid);

  g_assert_true (rt->stop (rt, &req, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (rt->destroy (rt, &req, &error));
  g_assert_no_error (error);
  g_clear_pointer (&req.vmm, json_object_unref);
}

/* A process that names the share's socket as virtiofsd does, left by a
 * start that recorded no shares: ended, and the share's directory goes. */
static void
test_left_virtiofsd_ended (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *socket = mv_shares_socket_path (fixture->vm_dir, 0);
  g_autofree char *share_dir = g_path_get_dirname (socket);
  g_autofree char *option = g_strconcat ("--socket-path=", socket, NULL);
  const char *argv[] = { "/bin/sh", "-c", "while :; do sleep 1; done", option, NULL };
  g_autoptr (GError) error = NULL;
  GPid pid;

  g_assert_cmpint (g_mkdir (share_dir, 0700), ==, 0);
  g_assert_true (g_spawn_async (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                NULL, &pid, &error));
  g_assert_no_error (error);

  g_assert_true (mv_shares_end (fixture->vm_dir, NULL, &error));
  g_assert_no_error (error);
  /* Ended by the walk: a zombie of this test's, to be reaped. */
  for (guint i = 0; waitpid (pid, NULL, WNOHANG) != pid; i++)
    {
      g_assert_cmpuint (i, <, 50);
      g_usleep (100 * 1000);
    }
  g_assert_false (g_file_test (share_dir, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/leftovers/left-vmm-ended", VmmFixture, NULL, vmm_fixture_setup,
              test_left_vmm_ended, vmm_fixture_teardown);
  g_test_add ("/leftovers/left-virtiofsd-ended", VmmFixture, NULL, vmm_fixture_setup,
              test_left_virtiofsd_ended, vmm_fixture_teardown);
  return g_test_run ();
}
