/* Real guests (the project's test guest under QEMU/TCG) driven through the
 * runtime adapter, as the daemon drives them. */
#include "hv-test.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define BOOT_CONFIG "[lifecycle]\nboot-timeout-seconds=90\nstop-timeout-seconds=30\n"

typedef struct {
  gboolean  fired;
  guint     calls;
  char     *machine_id;
  gboolean  has_exit_code;
  int       exit_code;
  char     *reason;
} ExitRecord;

static void
on_vmm_exit (const char *machine_id, gboolean has_exit_code, int exit_code, const char *reason,
         gpointer user_data)
{
  ExitRecord *record = user_data;

  record->calls++;
  record->fired = TRUE;
  g_free (record->machine_id);
  record->machine_id = g_strdup (machine_id);
  record->has_exit_code = has_exit_code;
  record->exit_code = exit_code;
  g_free (record->reason);
  record->reason = g_strdup (reason);
}

static void
exit_record_clear (ExitRecord *record)
{
  g_free (record->machine_id);
  g_free (record->reason);
}

static gboolean
on_timeout (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the main loop until @record fires or @timeout_s passes. */
static gboolean
wait_for_exit (ExitRecord *record, guint timeout_s)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add_seconds (timeout_s, on_timeout, &timed_out);

  while (!record->fired && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  /* Let anything that would (wrongly) come after the first call come. */
  for (int i = 0; i < 10; i++)
    g_main_context_iteration (NULL, FALSE);
  return record->fired;
}

static JsonObject *
start_guest (MvRuntime *rt, const MvRuntimeRequest *req)
{
  g_autoptr (GError) error = NULL;
  JsonObject *identity = rt->start (rt, req, &error);

  g_assert_no_error (error);
  g_assert_nonnull (identity);
  g_assert_cmpstr (json_object_get_string_member (identity, "type"), ==, "qemu");
  g_assert_cmpstr (json_object_get_string_member (identity, "version"), !=, "");
  g_assert_true (hv_test_pid_alive (hv_test_identity_pid (identity)));
  return identity;
}

/* The counter stands still for @seconds. */
static void
assert_counter_still (const char *console, guint seconds)
{
  gint64 before = hv_test_last_counter (console, 0);
  goffset size = hv_test_file_size (console);

  g_usleep (seconds * G_USEC_PER_SEC);
  g_assert_cmpint (hv_test_last_counter (console, 0), ==, before);
  g_assert_cmpint (hv_test_file_size (console), ==, size);
}

/* The counter goes past @value within @timeout_s. */
static gint64
wait_counter_above (const char *console, goffset offset, gint64 value, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      gint64 now = hv_test_last_counter (console, offset);
      if (now > value)
        return now;
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (100 * 1000);
    }
}

static JsonObject *
identity_with_start_time (JsonObject *identity, gint64 start_time)
{
  JsonObject *copy = json_object_new ();

  json_object_set_int_member (copy, "pid", json_object_get_int_member (identity, "pid"));
  json_object_set_int_member (copy, "start_time", start_time);
  json_object_set_string_member (copy, "socket", json_object_get_string_member (identity, "socket"));
  return copy;
}

static void
copy_truncated (const char *from_dir, const char *to_dir, const char *name, gsize max)
{
  g_autofree char *from = g_build_filename (from_dir, name, NULL);
  g_autofree char *to = g_build_filename (to_dir, name, NULL);
  g_autofree char *contents = NULL;
  gsize length;

  g_assert_true (g_file_get_contents (from, &contents, &length, NULL));
  g_assert_true (g_file_set_contents (to, contents, MIN (length, max), NULL));
}

/* One guest through its whole life: start once its console says it is
 * ready (the agent's readiness is the agent suite's: tests/integration/
 * test-agent.c), pause,
 * resume, save, restore, adoption by a fresh runtime, a wrong identity
 * left alone, a graceful stop seen by the watch. */
static void
test_lifecycle (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *state_dir = hv_test_make_dir ();
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *listing = NULL;
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_autoptr (MvRuntime) rt2 = NULL;
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_CONSOLE, "MICROVMD-GUEST-READY", NULL);
  g_autoptr (JsonObject) identity = NULL;
  g_autoptr (JsonObject) restored = NULL;
  g_autoptr (JsonObject) wrong = NULL;
  MvRuntimeRequest req = { .machine_id = "life", .spec = spec, .runtime_dir = dir };
  ExitRecord record = { 0 };
  gint64 paused_at, saved_at, after_restore;
  goffset restore_offset;
  MvRuntimeUsage usage = { 0 };
  guint watch_id;
  int pid;

  g_assert_no_error (error);

  /* start: the console says ready, so the guest has booted. */
  identity = start_guest (rt, &req);
  req.vmm = identity;
  pid = hv_test_identity_pid (identity);
  g_assert_true (hv_test_wait_file_has (console, 0, "MICROVMD-GUEST-READY", 10));
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_RUNNING);
  g_assert_true (rt->usage (rt, &req, &usage, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (usage.cpu_ns, >, 0);
  /* A booted guest has touched memory of its own. */
  g_assert_cmpuint (usage.memory_bytes, >, 16 * 1024 * 1024);

  /* What the backend says it can do, it does; what microvm cannot, it
   * refuses as unsupported: hotplug is for machines started with room
   * to grow (on q35), which this one is not. */
  {
    MvStarter *starter = mv_hypervisor_runtime_starter (rt);
    MvCapabilities caps = starter->capabilities (starter);
    const char *socket_path = json_object_get_string_member (identity, "socket");
    g_autoptr (MvHypervisor) hv = starter->connect (starter, socket_path, &error);
    MvVmInfo info;

    g_assert_no_error (error);
    g_assert_true (caps.snapshot);
    g_assert_true (caps.pause);
    g_assert_true (caps.hotplug_memory);
    g_assert_true (caps.hotplug_cpu);
    g_assert_true (hv->vm_info (hv, &info, &error));
    g_assert_no_error (error);
    g_assert_cmpint (info.state, ==, MV_VM_STATE_RUNNING);
    g_assert_true (info.has_memory_bytes);
    g_assert_cmpuint (info.memory_bytes, ==, spec->memory_bytes);
    g_assert_false (hv->resize_vm_memory (hv, spec->memory_bytes + (2 << 20), &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
    g_clear_error (&error);
    g_assert_false (hv->resize_vm_cpu (hv, 2, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
    g_clear_error (&error);
  }

  /* pause: the counter stops; resume: it goes on. */
  wait_counter_above (console, 0, 0, 10);
  g_assert_true (rt->pause (rt, &req, &error));
  g_assert_no_error (error);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_PAUSED);
  g_usleep (300 * 1000);   /* what was on its way out */
  paused_at = hv_test_last_counter (console, 0);
  assert_counter_still (console, 3);
  g_assert_true (rt->resume (rt, &req, &error));
  g_assert_no_error (error);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_RUNNING);
  wait_counter_above (console, 0, paused_at, 5);

  /* save: the VMM ends, its sockets go, the state is on disk. */
  g_assert_true (rt->save (rt, &req, state_dir, &error));
  g_assert_no_error (error);
  g_assert_false (hv_test_pid_alive (pid));
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_GONE);
  listing = hv_test_list_dir (dir);
  g_assert_cmpstr (listing, ==, "console.log vmm.log");
  g_clear_pointer (&listing, g_free);
  listing = hv_test_list_dir (state_dir);
  g_assert_nonnull (strstr (listing, "vm-spec.json"));
  g_clear_pointer (&listing, g_free);
  saved_at = hv_test_last_counter (console, 0);
  g_assert_cmpint (saved_at, >, paused_at);

  /* A restore from damaged state fails, leaves no VMM, keeps the files. */
  {
    g_autofree char *bad_dir = hv_test_make_dir ();
    g_autofree char *bad_socket = g_build_filename (dir, "qmp.sock", NULL);
    g_autoptr (GPtrArray) left = NULL;
    g_autofree char *bad_listing = NULL;
    JsonObject *none;

    copy_truncated (state_dir, bad_dir, "vm-spec.json", G_MAXSIZE);
    copy_truncated (state_dir, bad_dir, "qemu.state", 1 << 20);
    none = rt->restore (rt, &req, bad_dir, &error);
    g_assert_null (none);
    g_assert_nonnull (error);
    g_test_message ("damaged restore: %s", error->message);
    g_clear_error (&error);
    left = mv_process_find_by_socket (bad_socket);
    g_assert_cmpuint (left->len, ==, 0);
    listing = hv_test_list_dir (dir);
    g_assert_cmpstr (listing, ==, "console.log vmm.log");
    g_clear_pointer (&listing, g_free);
    bad_listing = hv_test_list_dir (bad_dir);
    g_assert_cmpstr (bad_listing, ==, "qemu.state vm-spec.json");
    hv_test_remove_tree (bad_dir);
  }

  /* restore: a new VMM, and the counter goes on from where it was. */
  restore_offset = hv_test_file_size (console);
  restored = rt->restore (rt, &req, state_dir, &error);
  g_assert_no_error (error);
  g_assert_nonnull (restored);
  g_assert_cmpint (hv_test_identity_pid (restored), !=, pid);
  req.vmm = restored;
  pid = hv_test_identity_pid (restored);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_RUNNING);
  after_restore = wait_counter_above (console, restore_offset, saved_at - 1, 10);
  g_assert_cmpint (hv_test_first_counter (console, restore_offset), >=, saved_at);
  g_assert_cmpint (after_restore, >=, saved_at);
  g_assert_false (hv_test_wait_file_has (console, restore_offset, "MICROVMD-GUEST-READY", 0));
  /* The state stays for another restore if this one were lost. */
  listing = hv_test_list_dir (state_dir);
  g_assert_nonnull (strstr (listing, "vm-spec.json"));

  /* A daemon restart: a fresh runtime given the recorded identity. */
  g_clear_pointer (&rt, mv_hypervisor_runtime_free);
  rt2 = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_assert_no_error (error);
  g_assert_cmpint (rt2->probe (rt2, &req), ==, MV_VMM_RUNNING);

  /* An identity whose start time is not the process's is not ours: it is
   * not attached and nothing is signalled. */
  wrong = identity_with_start_time (restored, json_object_get_int_member (restored, "start_time") + 1);
  {
    MvRuntimeRequest wrong_req = { .machine_id = "life", .spec = spec, .runtime_dir = dir,
                                   .vmm = wrong };
    MvRuntimeUsage ns;

    g_assert_cmpint (rt2->probe (rt2, &wrong_req), ==, MV_VMM_GONE);
    g_assert_false (rt2->pause (rt2, &wrong_req, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
    g_clear_error (&error);
    g_assert_false (rt2->usage (rt2, &wrong_req, &ns, &error));
    g_clear_error (&error);
    g_assert_false (rt2->stop (rt2, &wrong_req, TRUE, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_CONFLICT);
    g_clear_error (&error);
  }
  g_assert_true (hv_test_pid_alive (pid));
  g_assert_cmpint (rt2->probe (rt2, &req), ==, MV_VMM_RUNNING);

  /* The fresh runtime watches the adopted VMM and stops it gracefully:
   * the guest powers off through the power button, the watch says so. */
  watch_id = rt2->watch (rt2, "life", restored, on_vmm_exit, &record);
  g_assert_cmpuint (watch_id, >, 0);
  g_assert_true (rt2->stop (rt2, &req, FALSE, &error));
  g_assert_no_error (error);
  g_assert_false (hv_test_pid_alive (pid));
  g_assert_true (hv_test_wait_file_has (console, restore_offset, "MICROVMD-POWEROFF acpi", 0));
  g_assert_true (wait_for_exit (&record, 10));
  g_assert_cmpuint (record.calls, ==, 1);
  g_assert_cmpstr (record.machine_id, ==, "life");
  g_assert_true (record.has_exit_code);
  g_assert_cmpint (record.exit_code, ==, 0);
  g_assert_cmpstr (record.reason, ==, "the guest powered off");
  rt2->unwatch (rt2, watch_id);   /* after the call: harmless */
  g_clear_pointer (&listing, g_free);
  listing = hv_test_list_dir (dir);
  g_assert_cmpstr (listing, ==, "console.log vmm.log");

  g_assert_true (rt2->destroy (rt2, &req, &error));
  g_clear_pointer (&listing, g_free);
  listing = hv_test_list_dir (dir);
  g_assert_cmpstr (listing, ==, "");

  exit_record_clear (&record);
  hv_test_remove_tree (dir);
  hv_test_remove_tree (state_dir);
}

static void
block_free (MvBlock *block)
{
  g_free (block->path);
  g_free (block);
}

/* One disk of the daemon's own (an overlay), a fresh 1 MiB file at @path. */
static GPtrArray *
one_overlay (const char *path)
{
  GPtrArray *blocks = g_ptr_array_new_with_free_func ((GDestroyNotify) block_free);
  MvBlock *block = g_new0 (MvBlock, 1);

  g_assert_true (g_file_set_contents (path, "", 0, NULL));
  g_assert_cmpint (truncate (path, 1 << 20), ==, 0);
  block->role = MV_BLOCK_OVERLAY;
  block->path = g_strdup (path);
  g_ptr_array_add (blocks, block);
  return blocks;
}

/* Whether process @pid holds @path open. */
static gboolean
holds_open (int pid, const char *path)
{
  g_autofree char *fd_dir = g_strdup_printf ("/proc/%d/fd", pid);
  g_autoptr (GDir) dir = g_dir_open (fd_dir, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    {
      g_autofree char *link = g_build_filename (fd_dir, name, NULL);
      g_autofree char *target = g_file_read_link (link, NULL);

      if (g_strcmp0 (target, path) == 0)
        return TRUE;
    }
  return FALSE;
}

/* snapshot keeps the VMM: the guest is left paused, runs on when
 * resumed, and the state, restored into another machine's directory
 * with another disk, runs as a second guest beside the first. */
static void
test_snapshot_and_fork (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *fork_dir = hv_test_make_dir ();
  g_autofree char *disks = hv_test_make_dir ();
  g_autofree char *state_dir = hv_test_make_dir ();
  g_autofree char *paused_state = hv_test_make_dir ();
  g_autofree char *again_state = hv_test_make_dir ();
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *fork_console = g_build_filename (fork_dir, "console.log", NULL);
  g_autofree char *disk = g_build_filename (disks, "a.img", NULL);
  g_autofree char *fork_disk = g_build_filename (disks, "b.img", NULL);
  g_autofree char *listing = NULL;
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_CONSOLE, "MICROVMD-GUEST-READY", NULL);
  g_autoptr (GPtrArray) blocks = one_overlay (disk);
  g_autoptr (GPtrArray) fork_blocks = one_overlay (fork_disk);
  g_autoptr (JsonObject) identity = NULL;
  g_autoptr (JsonObject) forked = NULL;
  MvRuntimeRequest req = { .machine_id = "origin", .spec = spec, .runtime_dir = dir,
                           .blocks = blocks };
  MvRuntimeRequest fork_req = { .machine_id = "fork", .spec = spec, .runtime_dir = fork_dir,
                                .blocks = fork_blocks };
  gint64 snapshot_at, resumed_at;
  int pid, fork_pid;

  g_assert_no_error (error);
  g_assert_nonnull (rt->snapshot);
  identity = start_guest (rt, &req);
  req.vmm = identity;
  pid = hv_test_identity_pid (identity);
  g_assert_true (holds_open (pid, disk));
  wait_counter_above (console, 0, 1, 15);

  /* snapshot of a running guest: the state is written, the VMM stays,
   * the guest is paused and stands still. */
  g_assert_true (rt->snapshot (rt, &req, state_dir, &error));
  g_assert_no_error (error);
  g_assert_true (hv_test_pid_alive (pid));
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_PAUSED);
  listing = hv_test_list_dir (state_dir);
  g_assert_cmpstr (listing, ==, "qemu.state vm-spec.json");
  g_clear_pointer (&listing, g_free);
  g_usleep (300 * 1000);   /* what was on its way out */
  snapshot_at = hv_test_last_counter (console, 0);
  assert_counter_still (console, 2);

  /* resume brings it back from QEMU's postmigrate, disks and all. */
  g_assert_true (rt->resume (rt, &req, &error));
  g_assert_no_error (error);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_RUNNING);
  resumed_at = wait_counter_above (console, 0, snapshot_at, 10);
  g_assert_cmpint (resumed_at, >, snapshot_at);

  /* A paused guest is snapshotted as it is, twice over, and stays paused. */
  g_assert_true (rt->pause (rt, &req, &error));
  g_assert_no_error (error);
  g_assert_true (rt->snapshot (rt, &req, paused_state, &error));
  g_assert_no_error (error);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_PAUSED);
  {
    gboolean ok = rt->snapshot (rt, &req, again_state, &error);
    g_assert_no_error (error);
    g_assert_true (ok);
  }
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_PAUSED);
  listing = hv_test_list_dir (again_state);
  g_assert_cmpstr (listing, ==, "qemu.state vm-spec.json");
  g_clear_pointer (&listing, g_free);
  g_assert_true (rt->resume (rt, &req, &error));
  g_assert_no_error (error);
  resumed_at = wait_counter_above (console, 0, hv_test_last_counter (console, 0), 10);

  /* The first state restored as another machine: its own directory,
   * console and disk, while the first guest runs on. */
  forked = rt->restore (rt, &fork_req, state_dir, &error);
  g_assert_no_error (error);
  g_assert_nonnull (forked);
  fork_req.vmm = forked;
  fork_pid = hv_test_identity_pid (forked);
  g_assert_cmpint (fork_pid, !=, pid);
  g_assert_cmpstr (json_object_get_string_member (forked, "socket"), !=,
                   json_object_get_string_member (identity, "socket"));
  g_assert_true (g_str_has_prefix (json_object_get_string_member (forked, "socket"), fork_dir));
  g_assert_cmpint (rt->probe (rt, &fork_req), ==, MV_VMM_RUNNING);
  g_assert_true (holds_open (fork_pid, fork_disk));
  g_assert_false (holds_open (fork_pid, disk));
  wait_counter_above (fork_console, 0, snapshot_at, 10);
  g_assert_cmpint (hv_test_first_counter (fork_console, 0), >=, snapshot_at);
  g_assert_false (hv_test_wait_file_has (fork_console, 0, "MICROVMD-GUEST-READY", 0));
  wait_counter_above (console, 0, resumed_at, 10);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_RUNNING);

  /* A state with one disk given two is refused before any VMM runs. */
  {
    g_autoptr (GPtrArray) two = g_ptr_array_new ();
    g_autofree char *other_dir = hv_test_make_dir ();
    MvRuntimeRequest two_req = { .machine_id = "two", .spec = spec, .runtime_dir = other_dir,
                                 .blocks = two };
    JsonObject *none;

    g_ptr_array_add (two, fork_blocks->pdata[0]);
    g_ptr_array_add (two, fork_blocks->pdata[0]);
    none = rt->restore (rt, &two_req, state_dir, &error);
    g_assert_null (none);
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "disks: the snapshot's guest has 1 disks"));
    g_clear_error (&error);
    listing = hv_test_list_dir (other_dir);
    g_assert_cmpstr (listing, ==, "");
    g_clear_pointer (&listing, g_free);
    hv_test_remove_tree (other_dir);
  }

  g_assert_true (rt->stop (rt, &fork_req, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (rt->stop (rt, &req, TRUE, &error));
  g_assert_no_error (error);
  g_assert_false (hv_test_pid_alive (pid));
  g_assert_false (hv_test_pid_alive (fork_pid));

  for (guint i = 0; i < 2; i++)
    {
      const char *d = i == 0 ? dir : fork_dir;
      MvRuntimeRequest *r = i == 0 ? &req : &fork_req;
      g_assert_true (rt->destroy (rt, r, &error));
      g_assert_no_error (error);
      hv_test_remove_tree (d);
    }
  hv_test_remove_tree (disks);
  hv_test_remove_tree (state_dir);
  hv_test_remove_tree (paused_state);
  hv_test_remove_tree (again_state);
}

/* A guest that powers off by itself: readiness console:TEXT, and the
 * watch reports a clean end. */
static void
test_guest_poweroff (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *listing = NULL;
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_CONSOLE, "MICROVMD-COUNTER 1",
                                                "console=ttyS0 reboot=t panic=-1 "
                                                "microvmd.poweroff_after=4");
  g_autoptr (JsonObject) identity = NULL;
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  MvRuntimeRequest req = { .machine_id = "off", .spec = spec, .runtime_dir = dir };
  ExitRecord record = { 0 };
  guint watch_id;

  g_assert_no_error (error);
  identity = start_guest (rt, &req);
  /* Start returned once the text was there. */
  g_assert_true (hv_test_wait_file_has (console, 0, "MICROVMD-COUNTER 1", 0));
  watch_id = rt->watch (rt, "off", identity, on_vmm_exit, &record);
  g_assert_true (wait_for_exit (&record, 30));
  g_assert_cmpuint (record.calls, ==, 1);
  g_assert_true (record.has_exit_code);
  g_assert_cmpint (record.exit_code, ==, 0);
  g_assert_cmpstr (record.reason, ==, "the guest powered off");
  g_assert_true (hv_test_wait_file_has (console, 0, "MICROVMD-POWEROFF timer", 0));
  rt->unwatch (rt, watch_id);

  /* stop of a VMM that is gone: TRUE, sockets cleared. */
  req.vmm = identity;
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_GONE);
  g_assert_true (rt->stop (rt, &req, FALSE, &error));
  g_assert_no_error (error);
  listing = hv_test_list_dir (dir);
  g_assert_cmpstr (listing, ==, "console.log vmm.log");

  exit_record_clear (&record);
  hv_test_remove_tree (dir);
}

/* kill -9 of the VMM: the watch fires at once, not clean. */
static void
test_vmm_killed (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *listing = NULL;
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_VMM, NULL, NULL);
  g_autoptr (JsonObject) identity = NULL;
  MvRuntimeRequest req = { .machine_id = "killed", .spec = spec, .runtime_dir = dir };
  ExitRecord record = { 0 };
  gint64 killed_at;
  int pid;

  g_assert_no_error (error);
  identity = start_guest (rt, &req);
  req.vmm = identity;
  pid = hv_test_identity_pid (identity);
  g_assert_cmpint (rt->probe (rt, &req), ==, MV_VMM_RUNNING);
  rt->watch (rt, "killed", identity, on_vmm_exit, &record);
  /* Let the watch settle on the events channel. */
  for (int i = 0; i < 10; i++)
    g_main_context_iteration (NULL, FALSE);

  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  killed_at = g_get_monotonic_time ();
  g_assert_true (wait_for_exit (&record, 10));
  g_assert_cmpint (g_get_monotonic_time () - killed_at, <, 3 * G_USEC_PER_SEC);
  g_assert_cmpuint (record.calls, ==, 1);
  g_assert_false (record.has_exit_code);
  /* Its parent, which only reaps it, wrote down how it ended. */
  g_assert_nonnull (strstr (record.reason, "killed by signal 9"));

  /* A watch on a VMM that is already gone fires too, once. */
  exit_record_clear (&record);
  memset (&record, 0, sizeof record);
  rt->watch (rt, "killed", identity, on_vmm_exit, &record);
  g_assert_true (wait_for_exit (&record, 5));
  g_assert_cmpuint (record.calls, ==, 1);
  g_assert_false (record.has_exit_code);

  g_assert_true (rt->stop (rt, &req, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (rt->destroy (rt, &req, &error));
  g_assert_no_error (error);
  listing = hv_test_list_dir (dir);
  g_assert_cmpstr (listing, ==, "");

  exit_record_clear (&record);
  hv_test_remove_tree (dir);
}

/* unwatch before the end: the callback never comes. A start whose
 * identity was never recorded: stop finds the VMM by its socket. */
static void
test_unwatch_and_unrecorded_stop (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *socket_path = g_build_filename (dir, "qmp.sock", NULL);
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_VMM, NULL, NULL);
  g_autoptr (JsonObject) identity = NULL;
  g_autoptr (GPtrArray) left = NULL;
  MvRuntimeRequest req = { .machine_id = "lost", .spec = spec, .runtime_dir = dir };
  ExitRecord record = { 0 };
  guint watch_id;
  int pid;

  g_assert_no_error (error);
  identity = start_guest (rt, &req);
  pid = hv_test_identity_pid (identity);
  watch_id = rt->watch (rt, "lost", identity, on_vmm_exit, &record);
  rt->unwatch (rt, watch_id);

  /* req.vmm stays NULL: as if the daemon died before recording it. */
  g_assert_true (rt->stop (rt, &req, FALSE, &error));
  g_assert_no_error (error);
  g_assert_false (hv_test_pid_alive (pid));
  left = mv_process_find_by_socket (socket_path);
  g_assert_cmpuint (left->len, ==, 0);
  g_assert_false (wait_for_exit (&record, 2));
  g_assert_cmpuint (record.calls, ==, 0);

  hv_test_remove_tree (dir);
}

/* A guest that panics on boot: Start fails with the console quoted and
 * leaves no VMM. */
static void
test_boot_failure (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *socket_path = g_build_filename (dir, "qmp.sock", NULL);
  g_autofree char *listing = NULL;
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime (BOOT_CONFIG, &error);
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *contents = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_CONSOLE, "MICROVMD-GUEST-READY",
                                                "console=ttyS0 reboot=t panic=-1 microvmd.panic");
  g_autoptr (GPtrArray) left = NULL;
  MvRuntimeRequest req = { .machine_id = "panic", .spec = spec, .runtime_dir = dir };
  JsonObject *identity;

  g_assert_no_error (error);
  identity = rt->start (rt, &req, &error);
  g_assert_null (identity);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_test_message ("start failed: %s", error->message);
  g_assert_nonnull (strstr (error->message, "readiness console:MICROVMD-GUEST-READY"));
  g_assert_nonnull (strstr (error->message, "console"));
  /* The guest panicked on purpose; the console's last line is quoted. */
  g_assert_true (hv_test_wait_file_has (console, 0, "MICROVMD-PANIC", 0));
  g_assert_true (g_file_get_contents (console, &contents, NULL, NULL));
  lines = g_strsplit (g_strchomp (contents), "\n", -1);
  g_assert_nonnull (strstr (error->message, g_strchomp (lines[g_strv_length (lines) - 1])));
  left = mv_process_find_by_socket (socket_path);
  g_assert_cmpuint (left->len, ==, 0);
  listing = hv_test_list_dir (dir);
  g_assert_cmpstr (listing, ==, "console.log vmm.log");

  hv_test_remove_tree (dir);
}

/* A guest that never shows the readiness text fails within the boot
 * timeout, quoting the console. */
static void
test_boot_timeout (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *socket_path = g_build_filename (dir, "qmp.sock", NULL);
  g_autoptr (MvRuntime) rt = hv_test_qemu_runtime ("[lifecycle]\nboot-timeout-seconds=3\n", &error);
  g_autoptr (MvSpec) spec = hv_test_guest_spec (MV_READINESS_CONSOLE, "NEVER-PRINTED", NULL);
  g_autoptr (GPtrArray) left = NULL;
  MvRuntimeRequest req = { .machine_id = "slow", .spec = spec, .runtime_dir = dir };
  JsonObject *identity;

  g_assert_no_error (error);
  identity = rt->start (rt, &req, &error);
  g_assert_null (identity);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "within 3 s"));
  g_assert_nonnull (strstr (error->message, "console:NEVER-PRINTED"));
  g_assert_nonnull (strstr (error->message, "The console's last lines"));
  left = mv_process_find_by_socket (socket_path);
  g_assert_cmpuint (left->len, ==, 0);

  hv_test_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hypervisor/qemu/lifecycle", test_lifecycle);
  g_test_add_func ("/hypervisor/qemu/snapshot-and-fork", test_snapshot_and_fork);
  g_test_add_func ("/hypervisor/qemu/guest-poweroff", test_guest_poweroff);
  g_test_add_func ("/hypervisor/qemu/vmm-killed", test_vmm_killed);
  g_test_add_func ("/hypervisor/qemu/unwatch-and-unrecorded-stop", test_unwatch_and_unrecorded_stop);
  g_test_add_func ("/hypervisor/qemu/boot-failure", test_boot_failure);
  g_test_add_func ("/hypervisor/qemu/boot-timeout", test_boot_timeout);
  return g_test_run ();
}
