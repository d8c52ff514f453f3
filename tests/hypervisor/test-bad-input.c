/* Bad input to the qemu runtime: each is MV_ERROR_INVALID_ARGUMENT naming
 * the field, found before any process starts, and leaves nothing behind. */
#include "hv-test.h"
#include "hypervisor/qemu.h"

#include <glib/gstdio.h>
#include <string.h>

typedef struct {
  char *files;     /* a kernel and an initrd that exist (contents do not matter) */
  char *kernel;
  char *initrd;
  char *runtime_dir;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->files = hv_test_make_dir ();
  f->kernel = g_build_filename (f->files, "vmlinuz", NULL);
  f->initrd = g_build_filename (f->files, "initrd.img", NULL);
  g_assert_true (g_file_set_contents (f->kernel, "not a kernel", -1, NULL));
  g_assert_true (g_file_set_contents (f->initrd, "not an initrd", -1, NULL));
  f->runtime_dir = hv_test_make_dir ();
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  hv_test_remove_tree (f->files);
  hv_test_remove_tree (f->runtime_dir);
  g_free (f->files);
  g_free (f->kernel);
  g_free (f->initrd);
  g_free (f->runtime_dir);
}

/* The qemu runtime, with @extra for its [qemu] group, that lets machines
 * use the fixture's files. */
static MvRuntime *
qemu_runtime (Fixture *f, const char *extra, GError **error)
{
  g_autofree char *config = g_strdup_printf ("%s[paths]\nallowed-directories=%s\n",
                                             extra ? extra : "", f->files);

  return hv_test_qemu_runtime (config, error);
}

static MvSpec *
spec_new (Fixture *f)
{
  MvSpec *spec = mv_spec_new ();

  spec->name = g_strdup ("bad");
  spec->kernel = g_strdup (f->kernel);
  spec->initrd = g_strdup (f->initrd);
  return spec;
}

/* Starts @spec in @runtime_dir and expects the refusal to name @field. */
static void
expect_refused (MvRuntime *rt, const MvSpec *spec, const char *runtime_dir, const char *field)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *socket_path = g_build_filename (runtime_dir, "qmp.sock", NULL);
  g_autoptr (GPtrArray) left = NULL;
  g_autofree char *listing = NULL;
  MvRuntimeRequest req = { .machine_id = "bad", .spec = spec, .runtime_dir = runtime_dir };
  JsonObject *identity = rt->start (rt, &req, &error);

  g_assert_null (identity);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_test_message ("refused: %s", error->message);
  g_assert_nonnull (strstr (error->message, field));

  listing = hv_test_list_dir (runtime_dir);
  g_assert_cmpstr (listing, ==, "");
  left = mv_process_find_by_socket (socket_path);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
test_missing_kernel (Fixture *f, gconstpointer data)
{
  g_autoptr (MvRuntime) rt = qemu_runtime (f, NULL, NULL);
  g_autoptr (MvSpec) spec = spec_new (f);

  g_free (spec->kernel);
  spec->kernel = g_build_filename (f->files, "no-such-vmlinuz", NULL);
  expect_refused (rt, spec, f->runtime_dir, "kernel:");

  g_clear_pointer (&spec->kernel, g_free);
  expect_refused (rt, spec, f->runtime_dir, "kernel:");
}

static void
test_missing_initrd (Fixture *f, gconstpointer data)
{
  g_autoptr (MvRuntime) rt = qemu_runtime (f, NULL, NULL);
  g_autoptr (MvSpec) spec = spec_new (f);

  g_free (spec->initrd);
  spec->initrd = g_build_filename (f->files, "no-such-initrd", NULL);
  expect_refused (rt, spec, f->runtime_dir, "initrd:");
}

static void
test_missing_binary (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvRuntime) rt = qemu_runtime (f, "binary=/nonexistent\n", &error);
  g_autoptr (MvSpec) spec = spec_new (f);
  g_autofree char *version = NULL;

  g_assert_no_error (error);
  g_assert_null (mv_qemu_starter_binary (mv_hypervisor_runtime_starter (rt)));
  expect_refused (rt, spec, f->runtime_dir, "[qemu] binary: /nonexistent");
  version = rt->version (rt, &error);
  g_assert_null (version);
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
}

static void
test_socket_path_too_long (Fixture *f, gconstpointer data)
{
  g_autoptr (MvRuntime) rt = qemu_runtime (f, NULL, NULL);
  g_autoptr (MvSpec) spec = spec_new (f);
  g_autofree char *deep = g_strdup (f->runtime_dir);

  /* Nest directories until <dir>/qmp.sock no longer fits sun_path. */
  while (strlen (deep) + strlen ("/qmp.sock") <= MV_UNIX_PATH_MAX_BYTES)
    {
      char *next = g_build_filename (deep, "machines-0123456789", NULL);
      g_free (deep);
      deep = next;
    }
  g_assert_cmpint (g_mkdir_with_parents (deep, 0700), ==, 0);
  expect_refused (rt, spec, deep, "socket:");
}

static void
test_tap_name_too_long (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  MvQemuOptions options = { .accel = "tcg" };
  MvStarter *starter = mv_qemu_starter_new (&options, &error);
  g_autoptr (MvVmSpec) spec = mv_vm_spec_new ();
  g_autofree char *socket_path = g_build_filename (f->runtime_dir, "qmp.sock", NULL);
  g_autofree char *listing = NULL;
  g_autoptr (GPtrArray) left = NULL;
  MvProcess *vmm = NULL;
  MvHypervisor *hv;

  spec->boot.kernel_path = g_strdup (f->kernel);
  spec->boot.initrd_path = g_strdup (f->initrd);
  spec->memory.size_bytes = 256 << 20;
  mv_vm_spec_add_net (spec, "tap-0123456789ab", "52:54:00:12:34:56");   /* 16 bytes */
  hv = starter->start_vm (starter, socket_path, spec, &vmm, &error);
  g_assert_null (hv);
  g_assert_null (vmm);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "network[0].tap"));
  g_assert_nonnull (strstr (error->message, "15"));
  listing = hv_test_list_dir (f->runtime_dir);
  g_assert_cmpstr (listing, ==, "");
  left = mv_process_find_by_socket (socket_path);
  g_assert_cmpuint (left->len, ==, 0);
  starter->free (starter);
}

static void
test_bad_config (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) runtimes = hv_test_runtimes ("accel=fast\n", &error);

  g_assert_null (runtimes);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "[qemu] accel"));
  g_clear_error (&error);

  runtimes = hv_test_runtimes ("[lifecycle]\nboot-timeout-seconds=0\n", &error);
  g_assert_null (runtimes);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "[lifecycle] boot-timeout-seconds"));
  g_clear_error (&error);

  runtimes = hv_test_runtimes ("[lifecycle]\nstop-timeout-seconds=soon\n", &error);
  g_assert_null (runtimes);
  g_assert_nonnull (strstr (error->message, "[lifecycle] stop-timeout-seconds"));
  g_clear_error (&error);

  /* No configuration at all: the defaults. */
  runtimes = mv_hypervisor_builtin_runtimes (NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (runtimes->len, ==, 1);
  g_assert_cmpstr (((MvRuntime *) runtimes->pdata[0])->type, ==, "qemu");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/hypervisor/bad-input/missing-kernel", Fixture, NULL, fixture_setup,
              test_missing_kernel, fixture_teardown);
  g_test_add ("/hypervisor/bad-input/missing-initrd", Fixture, NULL, fixture_setup,
              test_missing_initrd, fixture_teardown);
  g_test_add ("/hypervisor/bad-input/missing-binary", Fixture, NULL, fixture_setup,
              test_missing_binary, fixture_teardown);
  g_test_add ("/hypervisor/bad-input/socket-path-too-long", Fixture, NULL, fixture_setup,
              test_socket_path_too_long, fixture_teardown);
  g_test_add ("/hypervisor/bad-input/tap-name-too-long", Fixture, NULL, fixture_setup,
              test_tap_name_too_long, fixture_teardown);
  g_test_add_func ("/hypervisor/bad-input/config", test_bad_config);
  return g_test_run ();
}
