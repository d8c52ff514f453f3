/* What a start finds in its machine's runtime directory: a VMM that an
 * interrupted start left serving the socket there, unrecorded, is ended
 * before the new one starts, unless the directory was made for this
 * start (where no process can be at work). Against the Firecracker test
 * VMM. */
#include "vmm-fixture.h"
#include "hypervisor/runtime.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <signal.h>

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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/leftovers/left-vmm-ended", VmmFixture, NULL, vmm_fixture_setup,
              test_left_vmm_ended, vmm_fixture_teardown);
  return g_test_run ();
}
