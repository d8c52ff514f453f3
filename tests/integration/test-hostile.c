/* What a hostile or unlucky caller found, each kept as a test: reads that
 * stay small whatever the specs hold, a forced Delete during a start that
 * never gets ready, Update keeping the hypervisor, deletion on a full
 * disk, and a daemon that loses its bus exiting with failure. */
#include "bus-client.h"
#include "names.h"
#include "util/files.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPEC_WITH(name, extra) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"" extra "}"
#define SPEC(name) SPEC_WITH (name, "")

static const char quick_resync[] = "[lifecycle]\nresync-seconds=1\n";

/* CreateMachine(@json, 0) as uid 65534 on its own connection (a child
 * process, so that no command line limits @json's size); returns the
 * error name, NULL on success. */
static char *
create_as_nobody (Fixture *f, const char *json)
{
  int fds[2];
  pid_t pid;
  char buf[256] = { 0 };
  int status = 0;

  g_assert_cmpint (pipe (fds), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      sd_bus *bus = NULL;
      sd_bus_error error = SD_BUS_ERROR_NULL;
      sd_bus_message *reply = NULL;
      const char *answer = "ok";

      close (fds[0]);
      if (setgroups (0, NULL) < 0 || setresgid (65534, 65534, 65534) < 0 ||
          setresuid (65534, 65534, 65534) < 0)
        _exit (3);
      if (sd_bus_new (&bus) < 0 || sd_bus_set_address (bus, mv_test_env_bus_address (f->env)) < 0 ||
          sd_bus_set_bus_client (bus, 1) < 0 || sd_bus_start (bus) < 0)
        _exit (4);
      if (sd_bus_call_method (bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateMachine",
                              &error, &reply, "st", json, (uint64_t) 0) < 0)
        answer = error.name ? error.name : "unknown";
      if (write (fds[1], answer, strlen (answer)) < 0)
        _exit (5);
      _exit (0);
    }
  close (fds[1]);
  while (read (fds[0], buf, sizeof buf - 1) < 0 && errno == EINTR)
    ;
  close (fds[0]);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  return g_str_equal (buf, "ok") ? NULL : g_strdup (buf);
}

/* Nothing an unauthorized caller sends is read beyond what the check
 * needs: a spec nested 100,000 deep, which used to overflow the stack
 * while its name was read for polkit, and a 30 MB one, which is refused
 * on its size before polkit is asked. The daemon serves on. */
static void
test_unauthorized_input_is_not_read (Fixture *f, gconstpointer data)
{
  GString *deep = g_string_new ("{\"a\":");
  g_autofree char *huge = NULL;
  g_autofree char *err = NULL;

  for (guint i = 0; i < 100000; i++)
    g_string_append_c (deep, '[');
  for (guint i = 0; i < 100000; i++)
    g_string_append_c (deep, ']');
  g_string_append_c (deep, '}');
  err = create_as_nobody (f, deep->str);
  g_string_free (deep, TRUE);
  g_assert_nonnull (err);

  huge = g_strnfill (30 * 1024 * 1024, ' ');
  huge[0] = '{';
  huge[30 * 1024 * 1024 - 1] = '}';
  g_clear_pointer (&err, g_free);
  err = create_as_nobody (f, huge);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);

  /* Still here, and nothing was made. */
  g_autofree char *path = client_create_ok (f->client, SPEC ("after"));
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
}

/* GetManagedObjects, which everyone may call, carries the typed properties
 * of every machine but no spec: its size does not grow with what specs
 * hold. The spec is read with Get. */
static void
test_spec_not_in_get_all (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("big", ",\"kernel_args\":\"marker-in-spec\""));
  g_autoptr (sd_bus_message) objects = client_call (f->client, MV_MANAGER_PATH,
                                                    "org.freedesktop.DBus.ObjectManager",
                                                    "GetManagedObjects", NULL, NULL, NULL);
  g_autoptr (sd_bus_message) all = client_call (f->client, path, "org.freedesktop.DBus.Properties",
                                                "GetAll", NULL, NULL, "s", MV_MACHINE_IFACE);
  g_autofree char *spec = client_get_string (f->client, path, "Spec");
  const char *name;
  gboolean saw_name = FALSE;

  g_assert_nonnull (objects);
  g_assert_nonnull (all);
  g_assert_nonnull (strstr (spec, "marker-in-spec"));

  g_assert_cmpint (sd_bus_message_enter_container (all, 'a', "{sv}"), >, 0);
  while (sd_bus_message_enter_container (all, 'e', "sv") > 0)
    {
      g_assert_cmpint (sd_bus_message_read (all, "s", &name), >, 0);
      g_assert_cmpstr (name, !=, "Spec");
      saw_name |= g_str_equal (name, "Name");
      g_assert_cmpint (sd_bus_message_skip (all, "v"), >=, 0);
      g_assert_cmpint (sd_bus_message_exit_container (all), >=, 0);
    }
  g_assert_true (saw_name);
}

/* A forced Delete while a start waits for a guest that is never ready
 * gives the start up at once; the machine goes, nothing is left. */
static void
test_force_delete_during_start (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("slow", ",\"kernel_args\":\"test.start-delay-ms=120000\""));
  g_autoptr (sd_bus_slot) slot = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autofree char *err = NULL, *msg = NULL;

  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, &slot, MV_BUS_NAME, path,
                                             MV_MACHINE_IFACE, "Start", NULL, NULL, NULL), >=, 0);
  client_assert_state_soon (f->client, path, "Starting", 5000);

  /* Within the client's call timeout, far below the start's two minutes. */
  reply = client_call (f->client, path, MV_MACHINE_IFACE, "Delete", &err, &msg, "b", 1);
  if (!reply)
    g_error ("Delete(true) during a start: %s: %s", err, msg);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);

  /* Asking again for something gone is a clean NotFound. */
  g_autofree char *again = NULL;
  g_autoptr (sd_bus_message) second = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                   "GetMachine", &again, NULL, "s", "slow");
  g_assert_null (second);
  g_assert_cmpstr (again, ==, MV_BUS_ERROR_NOT_FOUND);
}

/* Update from a spec that leaves out hypervisor_type keeps the machine on
 * the hypervisor it was created with (here QEMU, not the default). */
static void
test_update_keeps_hypervisor (Fixture *f, gconstpointer data)
{
  /* A QEMU machine's kernel must be a file under an allowed directory. */
  g_autofree char *kernel = g_build_filename (mv_test_env_images_dir (f->env), "vmlinuz", NULL);
  g_assert_true (g_file_set_contents (kernel, "kernel", -1, NULL));
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"pinned\",\"hypervisor_type\":\"qemu\","
                                           "\"kernel\":\"%s\"}", kernel);
  g_autofree char *update = g_strdup_printf ("{\"name\":\"pinned\",\"kernel\":\"%s\","
                                             "\"labels\":{\"changed\":\"yes\"}}", kernel);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *before = client_get_string (f->client, path, "Hypervisor");
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "Update",
                                                  &err, &msg, "s", update);

  if (!reply)
    g_error ("Update: %s: %s", err, msg);
  g_assert_cmpstr (before, ==, "qemu");
  g_autofree char *after = client_get_string (f->client, path, "Hypervisor");
  g_assert_cmpstr (after, ==, "qemu");
}

/* A machine bigger than the host could never run: refused at create. */
static void
test_memory_beyond_host (Fixture *f, gconstpointer data)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = client_create (f->client, SPEC_WITH ("huge", ",\"memory_bytes\":1099511627776"),
                                         0, &err, &msg);

  g_assert_null (path);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  if (!g_str_has_prefix (msg, "memory_bytes: 1099511627776 (1 TiB) is more than this host's memory"))
    g_error ("unexpected: %s", msg);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

/* ----- a full disk ----- */

static void
fill (const char *path)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  char block[4096] = { 0 };

  g_assert_cmpint (fd, >=, 0);
  while (write (fd, block, sizeof block) > 0)
    ;
  g_assert_cmpint (errno, ==, ENOSPC);
  close (fd);
}

static char *
status_on_disk (const char *state_dir, const char *id)
{
  g_autofree char *file = g_build_filename (state_dir, "machines", id, "status.json", NULL);
  char *text = NULL;

  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  return text;
}

/* With the state file system full, a create is refused and leaves
 * nothing, a Delete still works (it is how space is freed), and what a
 * machine did meanwhile reaches its status.json once there is room. */
static void
test_full_disk (Fixture *f, gconstpointer data)
{
  g_autofree char *small = g_build_filename (mv_test_env_dir (f->env), "small", NULL);
  g_autofree char *filler = g_build_filename (small, "filler", NULL);
  const char *args[] = { "--state-dir", small, NULL };
  g_autofree char *running = NULL, *stopped = NULL, *id = NULL, *vmm = NULL;

  g_assert_cmpint (g_mkdir (small, 0700), ==, 0);
  g_assert_cmpint (mount ("tmpfs", small, "tmpfs", 0, "size=512k,mode=0700"), ==, 0);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_write_config (f->env, quick_resync);
  mv_test_env_start_daemon (f->env, args);

  running = client_create_ok (f->client, SPEC ("runs"));
  stopped = client_create_ok (f->client, SPEC ("stays"));
  client_call_ok (f->client, running, "Start");
  id = client_get_string (f->client, running, "Id");
  vmm = g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id, "test-vmm.state", NULL);

  fill (filler);
  {
    g_autofree char *err = NULL;
    g_autofree char *p = client_create (f->client, SPEC ("refused"), 0, &err, NULL);
    g_assert_null (p);
    g_assert_nonnull (err);
  }
  g_assert_cmpuint (count_machine_dirs (small), ==, 2);

  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) r = client_call (f->client, stopped, MV_MACHINE_IFACE, "Delete",
                                                &err, &msg, "b", 0);
    if (!r)
      g_error ("Delete on a full disk: %s: %s", err, msg);
  }
  g_assert_cmpuint (count_machine_dirs (small), ==, 1);

  /* The VMM crashes while nothing can be written (the delete freed some
   * room: take it too). */
  g_autofree char *more = g_build_filename (small, "more", NULL);
  fill (more);
  g_assert_true (g_file_set_contents (vmm, "crashed", -1, NULL));
  client_assert_state_soon (f->client, running, "Failed", 5000);
  {
    g_autofree char *text = status_on_disk (small, id);
    g_assert_nonnull (strstr (text, "Running"));
  }

  /* Room again: the status catches up. */
  g_assert_cmpint (g_unlink (filler), ==, 0);
  g_assert_cmpint (g_unlink (more), ==, 0);
  for (guint i = 0; i < 100; i++)
    {
      g_autofree char *text = status_on_disk (small, id);
      if (strstr (text, "Failed"))
        break;
      g_assert_cmpuint (i, <, 99);
      client_settle (f->client, 100);
    }

  client_delete_all (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_assert_cmpint (umount (small), ==, 0);
  mv_test_env_start_daemon (f->env, NULL);
}

/* Starts the daemon with its record writes failed or held as @control
 * says (MICROVMD_FAULT_IO_FILE). */
static void
start_with_fault_io (Fixture *f, const char *control)
{
  g_setenv ("MICROVMD_FAULT_IO_FILE", control, TRUE);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_FAULT_IO_FILE");
}

static void
restart_with_fault_io (Fixture *f, const char *control)
{
  mv_test_env_stop_daemon (f->env, SIGTERM);
  start_with_fault_io (f, control);
}

/* A record write that fails at any step (making the temporary file,
 * writing, syncing it, renaming it into place, syncing the directory)
 * fails the call that needed it and changes nothing, except a Delete,
 * which goes on: a full disk must not keep anything from being deleted.
 * Asking again succeeds; every record left is whole. */
static void
test_failed_writes (Fixture *f, gconstpointer data)
{
  static const char *const steps[] = { "create", "write", "fsync", "rename", "dirsync" };
  g_autofree char *control = g_build_filename (mv_test_env_dir (f->env), "fault-io", NULL);

  restart_with_fault_io (f, control);

  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    {
      g_autofree char *spec = g_strdup_printf (SPEC_WITH ("%s", ""), steps[i]);
      g_autofree char *err = NULL, *msg = NULL, *path = NULL, *state = NULL;
      guint before = count_machine_dirs (mv_test_env_state_dir (f->env));

      g_test_message ("failing at %s", steps[i]);
      g_assert_true (g_file_set_contents (control, steps[i], -1, NULL));
      path = client_create (f->client, spec, 0, &err, &msg);
      g_assert_null (path);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
      g_assert_false (g_file_test (control, G_FILE_TEST_EXISTS));
      g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, before);

      path = client_create_ok (f->client, spec);
      g_assert_true (g_file_set_contents (control, steps[i], -1, NULL));
      g_clear_pointer (&err, g_free);
      err = client_machine_call (f->client, path, "Start", NULL);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
      state = client_get_string (f->client, path, "State");
      g_assert_cmpstr (state, ==, "Stopped");
      client_call_ok (f->client, path, "Start");

      g_assert_true (g_file_set_contents (control, steps[i], -1, NULL));
      g_clear_pointer (&err, g_free);
      err = client_machine_call (f->client, path, "Stop", NULL);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
      g_free (state);
      state = client_get_string (f->client, path, "State");
      g_assert_cmpstr (state, ==, "Running");
      client_call_ok (f->client, path, "Stop");

      if (i % 2 == 0)
        {
          g_autoptr (sd_bus_message) r = NULL;

          g_assert_true (g_file_set_contents (control, steps[i], -1, NULL));
          r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete", NULL, NULL, "b", 0);
          g_assert_nonnull (r);
          g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, before);
        }
    }

  /* What is left loads whole: no invalid record, each machine Stopped. */
  mv_test_env_stop_daemon (f->env, SIGKILL);
  mv_test_env_start_daemon (f->env, NULL);
  g_autoptr (sd_bus_message) invalid = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "InvalidRecords", &error, &invalid,
                                        "a(ss)"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (invalid, 'a', "(ss)"), >=, 0);
  g_assert_cmpint (sd_bus_message_at_end (invalid, FALSE), >, 0);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 2);
}

static int
note_reply (sd_bus_message *m, void *data, sd_bus_error *error)
{
  *(gboolean *) data = TRUE;
  g_assert_false (sd_bus_message_is_method_error (m, NULL));
  return 0;
}

static gboolean
replied (Client *client, gpointer data)
{
  return *(gboolean *) data;
}

/* A status write that the disk is slow to take holds back what it
 * records, not the daemon: while it waits, reads are answered, nothing of
 * the change is announced and the record on disk is as before. Once it
 * is written, Starting and Running are announced in that order and the
 * Start is answered. */
static void
test_slow_write (Fixture *f, gconstpointer data)
{
  g_autofree char *control = g_build_filename (mv_test_env_dir (f->env), "fault-io", NULL);
  g_autofree char *path = NULL, *id = NULL, *on_disk = NULL;
  g_autoptr (sd_bus_slot) slot = NULL;
  gboolean answered = FALSE;
  guint n_state = 0;

  restart_with_fault_io (f, control);
  path = client_create_ok (f->client, SPEC ("slow-disk"));
  id = client_get_string (f->client, path, "Id");
  client_settle (f->client, 100);
  client_clear_signals (f->client);

  g_assert_true (g_file_set_contents (control, "hold:fsync", -1, NULL));
  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, &slot, MV_BUS_NAME, path,
                                             MV_MACHINE_IFACE, "Start", note_reply, &answered,
                                             ""), >=, 0);
  /* Reads are answered at once however long the write takes (a blocked
   * daemon would time out these calls). */
  g_assert_cmpint (sd_bus_set_method_call_timeout (f->client->bus, 2 * G_USEC_PER_SEC), >=, 0);
  for (guint i = 0; i < 10; i++)
    {
      g_autofree char *state = client_get_string (f->client, path, "State");
      g_autofree char *phase = client_get_string (f->client, path, "Phase");
      g_autofree char *desired = client_get_string (f->client, path, "DesiredState");

      /* What is read is what is on disk. */
      g_assert_cmpstr (state, ==, "Stopped");
      g_assert_cmpstr (phase, ==, "");
      g_assert_cmpstr (desired, ==, "stopped");
      g_assert_cmpuint (client_count_listed (f->client, "ListMachines"), ==, 1);
      client_settle (f->client, 50);
    }
  g_assert_cmpint (sd_bus_set_method_call_timeout (f->client->bus, 0), >=, 0);
  g_assert_false (answered);
  g_assert_cmpuint (client_count_signals (f->client, path, "StateChanged"), ==, 0);
  g_assert_cmpuint (client_count_signals (f->client, path, "PropertiesChanged"), ==, 0);
  on_disk = status_on_disk (mv_test_env_state_dir (f->env), id);
  g_assert_nonnull (strstr (on_disk, "\"Stopped\""));

  g_assert_cmpint (g_unlink (control), ==, 0);
  g_assert_true (client_wait (f->client, replied, &answered, 10000));
  client_settle (f->client, 100);
  for (guint i = 0; i < f->client->signals->len; i++)
    {
      RecordedSignal *s = f->client->signals->pdata[i];

      if (g_strcmp0 (s->path, path) != 0 || !g_str_equal (s->member, "StateChanged"))
        continue;
      g_assert_cmpstr (s->args, ==, n_state == 0 ? "Starting<-Stopped:" : "Running<-Starting:");
      n_state++;
    }
  g_assert_cmpuint (n_state, ==, 2);
  g_free (on_disk);
  on_disk = status_on_disk (mv_test_env_state_dir (f->env), id);
  g_assert_nonnull (strstr (on_disk, "\"Running\""));
}

/* After a restart, a machine whose status.json lags its config (the
 * generation asked for is not yet recorded as observed) has that written
 * off the main loop: while the write waits for the disk the daemon
 * answers, shows what is on disk, and once the write is done shows and
 * keeps the observed generation. */
static void
test_lagging_record_written_off_loop (Fixture *f, gconstpointer data)
{
  g_autofree char *control = g_build_filename (mv_test_env_dir (f->env), "fault-io", NULL);
  g_autofree char *path = client_create_ok (f->client, SPEC ("lagging"));
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *file = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                            "status.json", NULL);
  g_autofree char *text = NULL, *lagging = NULL, *on_disk = NULL;
  g_autoptr (GRegex) observed = g_regex_new ("\"observed_generation\" : [0-9]+", 0, 0, NULL);
  guint64 desired;

  client_settle (f->client, 200);
  desired = client_get_u64 (f->client, path, "DesiredGeneration");
  g_assert_cmpuint (desired, >, 0);
  mv_test_env_stop_daemon (f->env, SIGTERM);

  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  g_assert_true (g_regex_match (observed, text, 0, NULL));
  lagging = g_regex_replace_literal (observed, text, -1, 0, "\"observed_generation\" : 0", 0,
                                     NULL);
  g_assert_true (g_file_set_contents (file, lagging, -1, NULL));

  g_assert_true (g_file_set_contents (control, "hold:fsync", -1, NULL));
  start_with_fault_io (f, control);
  /* A blocked main loop would time these out. */
  g_assert_cmpint (sd_bus_set_method_call_timeout (f->client->bus, 2 * G_USEC_PER_SEC), >=, 0);
  for (guint i = 0; i < 10; i++)
    {
      g_assert_cmpuint (client_count_listed (f->client, "ListMachines"), ==, 1);
      g_assert_cmpuint (client_get_u64 (f->client, path, "ObservedGeneration"), ==, 0);
      client_settle (f->client, 50);
    }
  g_assert_cmpint (sd_bus_set_method_call_timeout (f->client->bus, 0), >=, 0);
  /* The write was begun and is held: the file still lags. */
  on_disk = status_on_disk (mv_test_env_state_dir (f->env), id);
  g_assert_nonnull (strstr (on_disk, "\"observed_generation\" : 0"));

  g_assert_cmpint (g_unlink (control), ==, 0);
  for (guint i = 0; i < 100 && client_get_u64 (f->client, path, "ObservedGeneration") != desired;
       i++)
    client_settle (f->client, 50);
  g_assert_cmpuint (client_get_u64 (f->client, path, "ObservedGeneration"), ==, desired);
  g_free (on_disk);
  on_disk = status_on_disk (mv_test_env_state_dir (f->env), id);
  g_assert_false (strstr (on_disk, "\"observed_generation\" : 0"));
}

typedef struct {
  guint answered;
  char *error[3];
} HeldCalls;

static int
note_held_reply (sd_bus_message *m, void *data, sd_bus_error *error)
{
  HeldCalls *calls = data;
  const sd_bus_error *e = sd_bus_message_get_error (m);

  calls->error[calls->answered++] = g_strdup (e ? e->name : "");
  return 0;
}

static gboolean
three_answered (Client *client, gpointer data)
{
  return ((HeldCalls *) data)->answered == 3;
}

/* Lifecycle calls for a machine whose last change is still being written
 * wait for it, in order, and each is answered, also after one of them is
 * refused. */
static void
test_held_calls (Fixture *f, gconstpointer data)
{
  g_autofree char *control = g_build_filename (mv_test_env_dir (f->env), "fault-io", NULL);
  g_autofree char *path = NULL;
  HeldCalls calls = { 0 };
  const char *const members[] = { "Start", "Delete", "Stop" };

  restart_with_fault_io (f, control);
  path = client_create_ok (f->client, SPEC ("held"));

  g_assert_true (g_file_set_contents (control, "hold:fsync", -1, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    {
      g_autoptr (sd_bus_message) m = NULL;

      g_assert_cmpint (sd_bus_message_new_method_call (f->client->bus, &m, MV_BUS_NAME, path,
                                                       MV_MACHINE_IFACE, members[i]), >=, 0);
      if (g_str_equal (members[i], "Delete"))
        g_assert_cmpint (sd_bus_message_append (m, "b", 0), >=, 0);
      g_assert_cmpint (sd_bus_call_async (f->client->bus, NULL, m, note_held_reply, &calls, 0),
                       >=, 0);
    }
  client_settle (f->client, 300);
  g_assert_cmpuint (calls.answered, ==, 0);

  g_assert_cmpint (g_unlink (control), ==, 0);
  g_assert_true (client_wait (f->client, three_answered, &calls, 10000));
  /* The Delete came while the Start was under way: refused, and the Stop
   * after it was taken all the same. */
  g_assert_cmpstr (calls.error[0], ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_cmpstr (calls.error[1], ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_cmpstr (calls.error[2], ==, "");
  client_assert_state_soon (f->client, path, "Stopped", 5000);
  for (guint i = 0; i < 3; i++)
    g_free (calls.error[i]);
}

/* ----- losing the bus ----- */

static GPid
spawn (const char *const *argv, int *stdout_fd)
{
  g_autoptr (GError) error = NULL;
  GPid pid = 0;

  if (!g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH, NULL,
                                 NULL, &pid, NULL, stdout_fd, NULL, &error))
    g_error ("%s: %s", argv[0], error->message);
  return pid;
}

static int
wait_exit (GPid pid, guint timeout_ms)
{
  int status = 0;

  for (guint waited = 0; waited < timeout_ms; waited += 20)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);

      if (r == pid)
        return status;
      g_usleep (20 * 1000);
    }
  kill (pid, SIGKILL);
  waitpid (pid, &status, 0);
  g_error ("process %d did not exit within %u ms", pid, timeout_ms);
}

static gboolean
name_owned (const char *address)
{
  g_autoptr (sd_bus) bus = NULL;
  int r = sd_bus_new (&bus);

  if (r >= 0)
    r = sd_bus_set_address (bus, address);
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  return r >= 0 && sd_bus_call_method (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetNameOwner", NULL, NULL, "s",
                                       MV_BUS_NAME) >= 0;
}

/* A daemon dropped by its bus exits with a failure status, so that a
 * service manager's Restart=on-failure starts it again. Its own bus, so
 * that killing it harms nothing else. */
static void
test_bus_lost_is_failure (void)
{
  g_autofree char *dir = g_dir_make_tmp ("microvmd-bus-lost-XXXXXX", NULL);
  g_autofree char *socket = g_build_filename (dir, "bus", NULL);
  g_autofree char *address = g_strconcat ("unix:path=", socket, NULL);
  g_autofree char *listen = g_strconcat ("--address=", address, NULL);
  g_autofree char *bus_arg = g_strconcat ("--bus=", address, NULL);
  g_autofree char *state = g_build_filename (dir, "state", NULL);
  g_autofree char *runtime = g_build_filename (dir, "run", NULL);
  g_autofree char *config = g_build_filename (dir, "microvmd.conf", NULL);
  g_autofree char *daemon = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests",
                                              "integration", "microvmd-test", NULL);
  const char *bus_argv[] = { "dbus-daemon", "--session", "--nofork", "--nopidfile", listen, NULL };
  const char *daemon_argv[] = { daemon, bus_arg, "--state-dir", state, "--runtime-dir", runtime,
                                "--config", config, NULL };
  GPid bus, microvmd;
  int status;

  g_assert_true (g_file_set_contents (config, "", 0, NULL));
  bus = spawn (bus_argv, NULL);
  for (guint i = 0; i < 250 && !g_file_test (socket, G_FILE_TEST_EXISTS); i++)
    g_usleep (20 * 1000);
  microvmd = spawn (daemon_argv, NULL);
  for (guint i = 0; i < 500 && !name_owned (address); i++)
    g_usleep (20 * 1000);
  g_assert_true (name_owned (address));

  kill (bus, SIGKILL);
  waitpid (bus, NULL, 0);
  status = wait_exit (microvmd, 10000);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), !=, 0);

  g_autoptr (GError) error = NULL;
  g_assert_true (mv_remove_tree (dir, &error));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(name, fn) g_test_add ("/hostile/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("unauthorized-input-is-not-read", test_unauthorized_input_is_not_read);
  ADD ("spec-not-in-get-all", test_spec_not_in_get_all);
  ADD ("force-delete-during-start", test_force_delete_during_start);
  ADD ("update-keeps-hypervisor", test_update_keeps_hypervisor);
  ADD ("memory-beyond-host", test_memory_beyond_host);
  ADD ("full-disk", test_full_disk);
  ADD ("failed-writes", test_failed_writes);
  ADD ("slow-write", test_slow_write);
  ADD ("held-calls", test_held_calls);
  ADD ("lagging-record-written-off-loop", test_lagging_record_written_off_loop);
  g_test_add_func ("/hostile/bus-lost-is-failure", test_bus_lost_is_failure);
  return g_test_run ();
}
