/* Shared set-up of the REST backend tests. */
#include "vmm-fixture.h"
#include "hypervisor/cloud-hypervisor.h"
#include "hypervisor/firecracker.h"
#include "util/files.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

char *
vmm_fixture_binary (const char *name)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  g_autofree char *program = g_strconcat ("fake-", name, NULL);

  g_assert_nonnull (build);
  return g_build_filename (build, "tests", "vmm", program, NULL);
}

char *
vmm_fixture_versioned_binary (VmmFixture *fixture, const char *name, const char *version)
{
  g_autofree char *real = vmm_fixture_binary (name);
  g_autofree char *base = g_strdup_printf ("%s-%s", name, version);
  char *path = g_build_filename (fixture->dir, base, NULL);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\nMICROVMD_FAKE_VERSION=%s exec %s \"$@\"\n",
                                             version, real);

  g_assert_true (g_file_set_contents (path, script, -1, NULL));
  g_assert_cmpint (g_chmod (path, 0755), ==, 0);
  return path;
}

void
vmm_fixture_setup (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  fixture->dir = g_dir_make_tmp ("mv-http-XXXXXX", &error);
  g_assert_no_error (error);
  fixture->vm_dir = g_build_filename (fixture->dir, "vm", NULL);
  g_assert_cmpint (g_mkdir (fixture->vm_dir, 0700), ==, 0);
  fixture->socket_path = g_build_filename (fixture->vm_dir, "api.sock", NULL);
  fixture->console_path = g_build_filename (fixture->vm_dir, "console.log", NULL);
  fixture->kernel = g_build_filename (fixture->dir, "vmlinux", NULL);
  fixture->disk = g_build_filename (fixture->dir, "disk.img", NULL);
  g_assert_true (g_file_set_contents (fixture->kernel, "not a kernel", -1, NULL));
  g_assert_true (g_file_set_contents (fixture->disk, "disk", -1, NULL));
}

void
vmm_fixture_kill (VmmFixture *fixture)
{
  g_autoptr (GPtrArray) left = mv_process_find_by_socket (fixture->socket_path);

  for (guint i = 0; i < left->len; i++)
    mv_process_kill (left->pdata[i], NULL);
  /* A VMM that ended by itself may still have its end being written. */
  mv_vmm_wait_exit_recorded (fixture->socket_path);
}

/* The test VMMs log to vmm.log in their directories; in a sanitizer build
 * that is where their own reports go (a leak shows when one exits). */
static void
assert_no_sanitizer_report (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *contents = NULL;

      if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        assert_no_sanitizer_report (path);
      else if (strcmp (name, "vmm.log") == 0 &&
               g_file_get_contents (path, &contents, NULL, NULL) &&
               (strstr (contents, "Sanitizer") || strstr (contents, "runtime error:")))
        g_error ("%s holds a sanitizer report:\n%s", path, contents);
    }
}

void
vmm_fixture_teardown (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  vmm_fixture_kill (fixture);
  assert_no_sanitizer_report (fixture->dir);
  mv_remove_tree (fixture->dir, &error);
  g_assert_no_error (error);
  g_free (fixture->dir);
  g_free (fixture->vm_dir);
  g_free (fixture->socket_path);
  g_free (fixture->console_path);
  g_free (fixture->kernel);
  g_free (fixture->disk);
}

MvVmSpec *
vmm_fixture_spec (VmmFixture *fixture)
{
  MvVmSpec *spec = mv_vm_spec_new ();

  spec->boot.kernel_path = g_strdup (fixture->kernel);
  spec->boot.kernel_args = g_strdup ("console=ttyS0 reboot=k panic=1 microvmd.boot_ms=20");
  spec->cpu.count = 1;
  spec->cpu.max_count = 2;
  spec->memory.size_bytes = 256 << 20;
  spec->memory.hotplug_bytes = 256 << 20;
  mv_vm_spec_add_disk (spec, fixture->disk, FALSE);
  mv_vm_spec_set_disk_rate_limit (spec, 10 << 20, 1000);
  mv_vm_spec_add_net (spec, "mvtap0", "52:54:00:12:34:56");
  /* The same each way, which every backend takes. */
  mv_vm_spec_set_net_limits (spec, 1400, 1 << 20, 1 << 20);
  spec->console.path = g_strdup (fixture->console_path);
  spec->agent.kind = MV_AGENT_CHANNEL_VSOCK;
  spec->agent.socket_path = g_build_filename (fixture->vm_dir, "vsock.sock", NULL);
  spec->agent.cid = 3;
  return spec;
}

gboolean
vmm_fixture_wait_console (const char *path, const char *text, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  do
    {
      g_autofree char *contents = NULL;

      if (g_file_get_contents (path, &contents, NULL, NULL) && strstr (contents, text))
        return TRUE;
      g_usleep (20 * 1000);
    }
  while (g_get_monotonic_time () < deadline);
  return FALSE;
}

int
vmm_fixture_last_counter (const char *path)
{
  g_autofree char *contents = NULL;
  const char *p;
  int last = -1;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return -1;
  for (p = contents; (p = strstr (p, "MICROVMD-COUNTER ")); p++)
    last = atoi (p + strlen ("MICROVMD-COUNTER "));
  return last;
}

MvStarter *
vmm_fixture_starter (const char *name)
{
  g_autofree char *binary = vmm_fixture_binary (name);
  g_autoptr (GError) error = NULL;
  MvStarter *starter = g_str_equal (name, "firecracker")
                         ? mv_firecracker_starter_new (binary, &error)
                         : mv_cloud_hypervisor_starter_new (binary, &error);

  g_assert_no_error (error);
  return starter;
}

MvHypervisor *
vmm_fixture_boot (VmmFixture *fixture, MvStarter *starter, MvProcess **vmm)
{
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (GError) error = NULL;
  MvHypervisor *hv = starter->start_vm (starter, fixture->socket_path, spec, vmm, &error);

  g_assert_no_error (error);
  g_assert_nonnull (hv);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-GUEST-READY",
                                           VMM_FIXTURE_CONSOLE_TIMEOUT_MS));
  return hv;
}

void
vmm_fixture_assert_state (MvHypervisor *hv, MvVmState state)
{
  g_autoptr (GError) error = NULL;
  MvVmInfo info;

  g_assert_true (hv->vm_info (hv, &info, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (mv_vm_state_to_string (info.state), ==, mv_vm_state_to_string (state));
}

void
vmm_fixture_snapshot_restore (VmmFixture *fixture, MvStarter *starter, MvHypervisor *hv,
                              MvProcess *vmm, VmmRestored *restored)
{
  g_autoptr (GError) error = NULL;

  restored->snapshot = g_build_filename (fixture->dir, "snapshot", NULL);
  restored->dir = g_build_filename (fixture->dir, "vm2", NULL);
  restored->socket_path = g_build_filename (restored->dir, "api.sock", NULL);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-COUNTER 1",
                                           VMM_FIXTURE_CONSOLE_TIMEOUT_MS));
  g_assert_cmpint (g_mkdir (restored->snapshot, 0700), ==, 0);
  g_assert_cmpint (g_mkdir (restored->dir, 0700), ==, 0);

  g_assert_true (hv->pause_vm (hv, &error));
  g_assert_no_error (error);
  restored->counter = vmm_fixture_last_counter (fixture->console_path);
  g_assert_true (hv->snapshot_vm (hv, restored->snapshot, &error));
  g_assert_no_error (error);
  g_assert_true (hv->shutdown (hv, &error));
  g_assert_no_error (error);
  g_assert_true (mv_process_wait (vmm, 5000));

  restored->spec.console.path = g_build_filename (restored->dir, "console.log", NULL);
  restored->spec.tap_device = g_strdup ("mvtap9");
  restored->spec.agent_socket = g_build_filename (restored->dir, "vsock.sock", NULL);
  restored->hv = starter->restore_vm (starter, restored->socket_path, restored->snapshot,
                                      &restored->spec, &restored->vmm, &error);
  g_assert_no_error (error);
  g_assert_nonnull (restored->hv);
  vmm_fixture_assert_state (restored->hv, MV_VM_STATE_PAUSED);
}

void
vmm_fixture_resume_restored (VmmRestored *restored)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *next = g_strdup_printf ("MICROVMD-COUNTER %d", restored->counter + 1);

  g_assert_true (restored->hv->resume_vm (restored->hv, &error));
  g_assert_no_error (error);
  g_assert_true (vmm_fixture_wait_console (restored->spec.console.path, next,
                                           VMM_FIXTURE_CONSOLE_TIMEOUT_MS));
  g_assert_true (restored->hv->shutdown (restored->hv, &error));
  g_assert_no_error (error);
  g_assert_true (mv_process_wait (restored->vmm, 5000));
}

void
vmm_restored_clear (VmmRestored *restored)
{
  g_clear_pointer (&restored->hv, mv_hypervisor_free);
  g_clear_pointer (&restored->vmm, mv_process_free);
  mv_restore_spec_clear (&restored->spec);
  g_clear_pointer (&restored->snapshot, g_free);
  g_clear_pointer (&restored->dir, g_free);
  g_clear_pointer (&restored->socket_path, g_free);
}
