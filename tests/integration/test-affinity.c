/* The spec's cpu_affinity through the daemon: the body the test VMM that
 * stands in for Cloud Hypervisor is given (read back from its vm.info);
 * Firecracker refused with nothing created; host CPUs this host does not
 * have, or does not let the daemon use, refused at create and again at
 * start; and real QEMU guests under TCG whose vCPU threads are pinned as
 * asked, read back from /proc/<pid>/task/<tid>/status: at boot, through a
 * daemon restart (adopted as they are), after a standby (a restored VMM),
 * and for a vCPU a resize adds. The spec's cpu_topology: refused where
 * it does not hold the vCPUs or the hypervisor cannot show it, given to
 * the test VMMs as the real ones take it, and seen in a real QEMU guest's
 * /proc/cpuinfo. */
#include "bus-client.h"
#include "names.h"

#include <json-glib/json-glib.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Two CPUs for the host, so that a machine of two vCPUs is admitted
 * whatever this host has; the pins name CPUs this host really has. */
static const char resources[] =
  "[resources]\n"
  "host-cpus=2\n"
  "cpu-overcommit=2.0\n"
  "[lifecycle]\n"
  "boot-timeout-seconds=60\n"
  "stop-timeout-seconds=2\n";

static char *kernel, *initrd;
/* The first and last CPU this test may run on (0 and 1 on a host of two). */
static guint lo, hi;

typedef struct {
  const char *type;
  char       *config;
} AffinityCase;

static void
setup (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;

  fixture_setup (f, c->config);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* A test guest of @type with @millicores and @more JSON members (the
 * pins among them). */
static char *
spec_json (const AffinityCase *c, const char *name, guint millicores, const char *more)
{
  g_autofree char *extra = g_strdup_printf ("\"cpu_millicores\":%u,%s", millicores, more);

  return guest_spec_json (c->type, name, kernel, initrd, extra);
}

/* vCPU 0 on the last CPU, vCPU 1 on the first: crosswise, so that neither
 * is where it would be by chance. */
static char *
crosswise (void)
{
  return g_strdup_printf ("\"cpu_affinity\":[{\"vcpu\":0,\"host_cpus\":[%u]},"
                          "{\"vcpu\":1,\"host_cpus\":[%u]}]", hi, lo);
}

static guint
machines (Fixture *f)
{
  return client_count_listed (f->client, "ListMachines");
}

/* Processes serving any machine: their runtime directories are under
 * this one. */
static guint
vmms (Fixture *f)
{
  g_autofree char *dir = g_build_filename (mv_test_env_runtime_dir (f->env), MV_MACHINES_DIR,
                                           NULL);

  return count_processes_with (dir);
}

/* CreateMachine refuses @json with @error naming @words, and nothing is
 * left: no machine, no record, no VMM. */
static void
assert_create_refused (Fixture *f, const char *json, const char *error, const char *words)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = client_create (f->client, json, 0, &err, &msg);

  g_assert_null (path);
  g_assert_cmpstr (err, ==, error);
  if (!strstr (msg, words))
    g_error ("'%s' does not say '%s'", msg, words);
  g_assert_cmpuint (machines (f), ==, 0);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
  g_assert_cmpuint (vmms (f), ==, 0);
}

/* ---- the test VMMs ---- */

static JsonNode *
vm_info_affinity (Fixture *f, const char *path)
{
  g_autofree char *socket_path = fixture_runtime_file (f, path, "api.sock");
  g_autofree char *body = http_get_unix (socket_path, "/api/v1/vm.info");
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *cpus;

  g_assert_true (json_parser_load_from_data (parser, body, -1, NULL));
  cpus = json_object_get_object_member (
    json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)), "config"),
    "cpus");
  return json_node_copy (json_object_get_member (cpus, "affinity"));
}

static void
test_chv_body (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  g_autofree char *pins = crosswise ();
  g_autofree char *json = spec_json (c, "pinned", 2000, pins);
  g_autofree char *path = client_create_ok (f->client, json);
  g_autofree char *spec = client_get_string (f->client, path, "Spec");
  g_autofree char *expected = g_strdup_printf ("[{\"vcpu\":0,\"host_cpus\":[%u]},"
                                               "{\"vcpu\":1,\"host_cpus\":[%u]}]", hi, lo);
  g_autofree char *wanted = g_strconcat ("\"cpu_affinity\":", expected, NULL);
  g_autoptr (JsonNode) given = NULL;
  g_autofree char *text = NULL;

  /* Recorded as sent. */
  if (!strstr (spec, wanted))
    g_error ("the spec %s has no %s", spec, wanted);
  client_call_ok (f->client, path, "Start");
  /* The VMM was given cpus.affinity, and reports it as Cloud Hypervisor
   * does. */
  given = vm_info_affinity (f, path);
  g_assert_nonnull (given);
  text = json_to_string (given, FALSE);
  g_assert_cmpstr (text, ==, expected);
  client_call_ok (f->client, path, "Stop");
}

/* The daemon's own CPUs narrowed after the machine was created: the next
 * start is refused, naming the CPU, and goes once they are back. */
static void
test_chv_checked_at_start (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  g_autofree char *pins = g_strdup_printf ("\"cpu_affinity\":[{\"vcpu\":0,\"host_cpus\":[%u]}]",
                                           hi);
  g_autofree char *json = spec_json (c, "moved", 1000, pins);
  g_autofree char *path = client_create_ok (f->client, json);
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *words = g_strdup_printf ("cpu_affinity[0].host_cpus: CPU %u is not among the "
                                            "CPUs microvmd and its VMMs may use (%u)", hi, lo);
  GPid daemon = mv_test_env_daemon_pid (f->env);
  cpu_set_t only, all;

  if (lo == hi)
    {
      g_test_skip ("this host lets the test use one CPU only");
      return;
    }
  CPU_ZERO (&only);
  CPU_SET (lo, &only);
  g_assert_cmpint (sched_getaffinity (daemon, sizeof all, &all), ==, 0);
  g_assert_cmpint (sched_setaffinity (daemon, sizeof only, &only), ==, 0);
  err = client_machine_call (f->client, path, "Start", &msg);
  g_assert_cmpint (sched_setaffinity (daemon, sizeof all, &all), ==, 0);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  if (!strstr (msg, words))
    g_error ("'%s' does not say '%s'", msg, words);
  g_assert_cmpuint (vmms (f), ==, 0);

  /* The same create is refused while the daemon may not use the CPU. */
  {
    g_autofree char *again = spec_json (c, "moved-too", 1000, pins);

    g_assert_cmpint (sched_setaffinity (daemon, sizeof only, &only), ==, 0);
    g_clear_pointer (&err, g_free);
    g_clear_pointer (&msg, g_free);
    g_assert_null (client_create (f->client, again, 0, &err, &msg));
    g_assert_cmpint (sched_setaffinity (daemon, sizeof all, &all), ==, 0);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
    if (!strstr (msg, words))
      g_error ("'%s' does not say '%s'", msg, words);
  }

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Stop");
}

/* Every refusal at create leaves nothing behind: what the host cannot
 * pin to, what the spec's own limits forbid, and Firecracker, which
 * cannot pin at all. */
static void
test_refused (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  g_autofree char *json = NULL;

  if (g_str_equal (c->type, "firecracker"))
    {
      g_autofree char *pins = crosswise ();

      json = spec_json (c, "pinned", 2000, pins);
      assert_create_refused (f, json, MV_BUS_ERROR_UNSUPPORTED,
                             "cpu_affinity: firecracker cannot pin vCPUs to host CPUs");
      return;
    }
  /* A CPU this host does not have. */
  json = spec_json (c, "far", 1000, "\"cpu_affinity\":[{\"vcpu\":0,\"host_cpus\":[64]}]");
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_affinity[0].host_cpus: CPU 64 is not an online CPU of this host");
  g_free (json);
  /* A vCPU the machine does not have. */
  json = spec_json (c, "few", 2000, "\"cpu_affinity\":[{\"vcpu\":0,\"host_cpus\":[0]},"
                    "{\"vcpu\":2,\"host_cpus\":[0]}]");
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_affinity[1].vcpu: 2 is not one of the machine's vCPUs (0 to 1");
  g_free (json);
  json = spec_json (c, "twice", 2000, "\"cpu_affinity\":[{\"vcpu\":0,\"host_cpus\":[0,0]}]");
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_affinity[0].host_cpus: CPU 0 is listed twice");
  g_free (json);
  json = spec_json (c, "typo", 1000, "\"cpu_affinity\":[{\"vcpu\":0,\"cpus\":[0]}]");
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_affinity[0]: unknown field 'cpus'");
}

/* ---- real QEMU guests ---- */

/* One QMP exchange on the VMM's API socket, between the daemon's own:
 * the thread of each vCPU, by cpu-index. */
static GArray *
vcpu_threads (Fixture *f, const char *path)
{
  g_autofree char *socket_path = fixture_runtime_file (f, path, "qmp.sock");
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  g_autoptr (GArray) tids = g_array_new (FALSE, TRUE, sizeof (int));
  static const char commands[] = "{\"execute\":\"qmp_capabilities\"}\r\n"
                                 "{\"execute\":\"query-cpus-fast\"}\r\n";
  g_autoptr (GString) in = g_string_new (NULL);
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  guint returns = 0;
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  g_strlcpy (addr.sun_path, socket_path, sizeof addr.sun_path);
  /* The daemon may be in the middle of an exchange of its own. */
  while (connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (50 * 1000);
    }
  g_assert_cmpint (write (fd, commands, strlen (commands)), ==, (gssize) strlen (commands));
  while (returns < 2)
    {
      char buffer[4096];
      ssize_t n = read (fd, buffer, sizeof buffer);
      char *end;

      g_assert_cmpint (n, >, 0);
      g_string_append_len (in, buffer, n);
      while ((end = strstr (in->str, "\r\n")))
        {
          g_autoptr (JsonParser) parser = json_parser_new ();
          g_autofree char *line = g_strndup (in->str, end - in->str);
          JsonObject *message;

          g_string_erase (in, 0, end - in->str + 2);
          g_assert_true (json_parser_load_from_data (parser, line, -1, NULL));
          message = json_node_get_object (json_parser_get_root (parser));
          if (!json_object_has_member (message, "return"))
            continue;
          if (++returns == 2)
            {
              JsonArray *cpus = json_object_get_array_member (message, "return");

              for (guint i = 0; i < json_array_get_length (cpus); i++)
                {
                  JsonObject *cpu = json_array_get_object_element (cpus, i);
                  guint index = (guint) json_object_get_int_member (cpu, "cpu-index");
                  int tid = (int) json_object_get_int_member (cpu, "thread-id");

                  if (index >= tids->len)
                    g_array_set_size (tids, index + 1);
                  g_array_index (tids, int, index) = tid;
                }
            }
        }
    }
  close (fd);
  return g_steal_pointer (&tids);
}

/* The VMM's process, from its status record. */
static int
vmm_pid (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *file = g_build_filename (mv_test_env_state_dir (f->env), MV_MACHINES_DIR, id,
                                            "status.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *vmm;

  g_assert_true (json_parser_load_from_file (parser, file, NULL));
  vmm = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)), "vmm");
  g_assert_nonnull (vmm);
  return (int) json_object_get_int_member (vmm, "pid");
}

/* Cpus_allowed_list of thread @tid of @pid, as the kernel shows it. */
static char *
allowed_list (int pid, int tid)
{
  g_autofree char *file = g_strdup_printf ("/proc/%d/task/%d/status", pid, tid);
  g_autofree char *status = NULL;
  g_auto (GStrv) lines = NULL;

  g_assert_true (g_file_get_contents (file, &status, NULL, NULL));
  lines = g_strsplit (status, "\n", -1);
  for (char **line = lines; *line; line++)
    if (g_str_has_prefix (*line, "Cpus_allowed_list:"))
      return g_strdup (g_strstrip (*line + strlen ("Cpus_allowed_list:")));
  g_assert_not_reached ();
}

static char *
cpu_text (guint cpu)
{
  return g_strdup_printf ("%u", cpu);
}

/* vCPU @vcpu of the machine's VMM runs only on @cpu. */
static void
assert_vcpu_on (int pid, GArray *tids, guint vcpu, guint cpu)
{
  g_autofree char *list = NULL;
  g_autofree char *want = cpu_text (cpu);

  g_assert_cmpuint (vcpu, <, tids->len);
  g_assert_cmpint (g_array_index (tids, int, vcpu), >, 0);
  list = allowed_list (pid, g_array_index (tids, int, vcpu));
  g_assert_cmpstr (list, ==, want);
}

/* The VMM's main thread, which runs no vCPU, is left as it was: on what
 * the daemon, like this test, may run on. */
static void
assert_main_thread_free (int pid)
{
  g_autofree char *list = allowed_list (pid, pid);
  g_autofree char *own = allowed_list (getpid (), getpid ());

  g_assert_cmpstr (list, ==, own);
}

static void
test_qemu_pinned (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  g_autofree char *pins = crosswise ();
  g_autofree char *json = spec_json (c, "pinned", 2000, pins);
  g_autofree char *path = client_create_ok (f->client, json);
  g_autoptr (GArray) tids = NULL;
  g_autofree char *far = NULL;
  int pid, before;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  tids = vcpu_threads (f, path);
  g_assert_cmpuint (tids->len, ==, 2);
  /* Two threads, one per vCPU, each on the CPU asked for. */
  g_assert_cmpint (g_array_index (tids, int, 0), !=, g_array_index (tids, int, 1));
  assert_vcpu_on (pid, tids, 0, hi);
  assert_vcpu_on (pid, tids, 1, lo);
  assert_main_thread_free (pid);

  /* A daemon that restarts adopts the VMM as it is: the threads keep
   * their pins, which the kernel holds, and nothing is pinned anew. */
  mv_test_env_stop_daemon (f->env, SIGKILL);
  mv_test_env_start_daemon (f->env, NULL);
  client_assert_state_soon (f->client, path, "Running", 30000);
  g_assert_cmpint (vmm_pid (f, path), ==, pid);
  assert_vcpu_on (pid, tids, 0, hi);
  assert_vcpu_on (pid, tids, 1, lo);

  /* Frozen and woken: a new VMM, pinned the same before its guest goes
   * on. */
  client_call_ok (f->client, path, "Standby");
  before = pid;
  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  g_assert_cmpint (pid, !=, before);
  g_clear_pointer (&tids, g_array_unref);
  tids = vcpu_threads (f, path);
  assert_vcpu_on (pid, tids, 0, hi);
  assert_vcpu_on (pid, tids, 1, lo);
  client_call_ok (f->client, path, "Stop");

  /* A CPU this host does not have is named. */
  client_delete_all (f->client);
  far = spec_json (c, "far", 2000, "\"cpu_affinity\":[{\"vcpu\":1,\"host_cpus\":[64]}]");
  assert_create_refused (f, far, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_affinity[0].host_cpus: CPU 64 is not an online CPU");
}

/* A machine with room to grow (q35): the vCPU a resize adds is pinned as
 * it comes; the boot vCPU was pinned at start. */
static void
test_qemu_resize (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  g_autofree char *pins = g_strdup_printf ("\"max_vcpus\":2,\"cpu_affinity\":["
                                           "{\"vcpu\":0,\"host_cpus\":[%u]},"
                                           "{\"vcpu\":1,\"host_cpus\":[%u]}]", hi, lo);
  g_autofree char *json = spec_json (c, "grower", 1000, pins);
  g_autofree char *path = client_create_ok (f->client, json);
  g_autoptr (GArray) tids = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autofree char *err = NULL, *msg = NULL;
  int pid;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  tids = vcpu_threads (f, path);
  g_assert_cmpuint (tids->len, ==, 1);
  assert_vcpu_on (pid, tids, 0, hi);

  reply = client_call (f->client, path, MV_MACHINE_IFACE, "Resize", &err, &msg, "ut", 2,
                       (guint64) 268435456);
  if (!reply)
    g_error ("Resize: %s: %s", err, msg);
  g_clear_pointer (&tids, g_array_unref);
  tids = vcpu_threads (f, path);
  g_assert_cmpuint (tids->len, ==, 2);
  assert_vcpu_on (pid, tids, 0, hi);
  assert_vcpu_on (pid, tids, 1, lo);
  client_call_ok (f->client, path, "Stop");
}

/* ---- cpu_topology ---- */

#define TOPOLOGY(t, c, d, p) "\"cpu_topology\":{\"threads_per_core\":" #t ",\"cores_per_die\":" \
  #c ",\"dies_per_package\":" #d ",\"packages\":" #p "}"

/* What no hypervisor can have, and what this one cannot: refused at
 * create with nothing left. */
static void
test_topology_refused (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  g_autofree char *json = NULL;

  json = spec_json (c, "product", 2000, TOPOLOGY (2, 1, 1, 2));
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_topology: 2 threads per core × 1 cores per die × 1 dies per "
                         "package × 2 packages is 4 vCPUs, and the machine has 2");
  g_clear_pointer (&json, g_free);
  json = spec_json (c, "zero", 2000, TOPOLOGY (0, 2, 1, 1));
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_topology.threads_per_core: ");
  g_clear_pointer (&json, g_free);
  json = spec_json (c, "part", 2000, "\"cpu_topology\":{\"threads_per_core\":1,"
                    "\"cores_per_die\":2,\"dies_per_package\":1}");
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_topology.packages: required");
  g_clear_pointer (&json, g_free);
  json = spec_json (c, "sockets", 2000, "\"cpu_topology\":{\"sockets\":2}");
  assert_create_refused (f, json, MV_BUS_ERROR_INVALID_ARGUMENT,
                         "cpu_topology: unknown field 'sockets'");
  g_clear_pointer (&json, g_free);
  if (g_str_equal (c->type, "firecracker"))
    {
      json = spec_json (c, "packages", 2000, TOPOLOGY (1, 1, 1, 2));
      assert_create_refused (f, json, MV_BUS_ERROR_UNSUPPORTED,
                             "cpu_topology: firecracker shows its guest one package of one die");
    }
  if (g_str_equal (c->type, "qemu"))
    {
      json = spec_json (c, "dies", 2000, TOPOLOGY (1, 1, 2, 1));
      assert_create_refused (f, json, MV_BUS_ERROR_UNSUPPORTED,
                             "cpu_topology.dies_per_package: qemu shows its guests one die");
    }
}

/* The test VMMs are given the topology as the real ones take it: Cloud
 * Hypervisor's cpus.topology (two dies here), Firecracker's smt for two
 * threads per core. */
static void
test_topology_body (Fixture *f, gconstpointer data)
{
  const AffinityCase *c = data;
  gboolean chv = g_str_equal (c->type, "cloud-hypervisor");
  g_autofree char *json = spec_json (c, "shaped", 2000, chv ? TOPOLOGY (1, 1, 2, 1)
                                                            : TOPOLOGY (2, 1, 1, 1));
  g_autofree char *path = client_create_ok (f->client, json);
  g_autofree char *socket_path = NULL, *body = NULL, *text = NULL;
  g_autoptr (JsonNode) node = NULL;
  JsonObject *root;

  client_call_ok (f->client, path, "Start");
  socket_path = fixture_runtime_file (f, path, "api.sock");
  body = http_get_unix (socket_path, chv ? "/api/v1/vm.info" : "/vm/config");
  node = json_from_string (body, NULL);
  g_assert_nonnull (node);
  root = json_node_get_object (node);
  if (chv)
    {
      JsonObject *cpus = json_object_get_object_member (
        json_object_get_object_member (root, "config"), "cpus");

      text = json_to_string (json_object_get_member (cpus, "topology"), FALSE);
      g_assert_cmpstr (text, ==, "{\"threads_per_core\":1,\"cores_per_die\":1,"
                                 "\"dies_per_package\":2,\"packages\":1}");
    }
  else
    g_assert_true (json_object_get_boolean_member (
                     json_object_get_object_member (root, "machine-config"), "smt"));
  client_call_ok (f->client, path, "Stop");
}

/* What a real QEMU guest with microvmd's agent ([guest] of the config)
 * and @topology (two vCPUs)
 * sees in /proc/cpuinfo: its processors, packages ("physical id"s), and
 * the "siblings" and "cpu cores" every processor has. Cold: no template
 * of two vCPUs boots behind its start, beside the next machine's boot,
 * on a host of two CPUs. */
static void
guest_cpu_shape (Fixture *f, const char *name, const char *topology, guint *processors,
                 guint *packages, char **siblings, char **cores)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  g_autofree char *json = g_strdup_printf (
    "{\"name\":\"%s\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
    "\"cpu_millicores\":2000,\"readiness\":\"agent\",\"start_mode\":\"cold\","
    "\"disks\":[{\"path\":\"%s/tests/guest/rootfs.ext4\",\"read_only\":true,\"root\":true}],"
    "%s}", name, build, topology);
  g_autofree char *path = client_create_ok (f->client, json);
  const char *cpuinfo[] = { "cat", "/proc/cpuinfo", NULL };
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GHashTable) ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  *processors = 0;
  client_call_ok (f->client, path, "Start");
  text = exec_output (f, path, cpuinfo);
  g_test_message ("%s", text);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      g_auto (GStrv) kv = g_strsplit (lines[i], ":", 2);
      char **seen = NULL;

      if (!kv[0] || !kv[1])
        continue;
      g_strstrip (kv[0]);
      g_strstrip (kv[1]);
      if (g_str_equal (kv[0], "processor"))
        (*processors)++;
      else if (g_str_equal (kv[0], "physical id"))
        g_hash_table_add (ids, g_strdup (kv[1]));
      else if (g_str_equal (kv[0], "siblings"))
        seen = siblings;
      else if (g_str_equal (kv[0], "cpu cores"))
        seen = cores;
      /* The same on every processor. */
      if (seen && *seen)
        g_assert_cmpstr (*seen, ==, kv[1]);
      else if (seen)
        *seen = g_strdup (kv[1]);
    }
  *packages = g_hash_table_size (ids);
  client_call_ok (f->client, path, "Stop");
}

/* Real QEMU guests see their topology: one package of one core with two
 * threads, and two packages of one core with one thread. */
static void
test_qemu_topology (Fixture *f, gconstpointer data)
{
  g_autofree char *siblings = NULL, *cores = NULL;
  guint processors, packages;

  guest_cpu_shape (f, "threads", TOPOLOGY (2, 1, 1, 1), &processors, &packages, &siblings,
                   &cores);
  g_assert_cmpuint (processors, ==, 2);
  g_assert_cmpuint (packages, ==, 1);
  g_assert_cmpstr (siblings, ==, "2");
  g_assert_cmpstr (cores, ==, "1");

  g_clear_pointer (&siblings, g_free);
  g_clear_pointer (&cores, g_free);
  guest_cpu_shape (f, "packages", TOPOLOGY (1, 1, 1, 2), &processors, &packages, &siblings,
                   &cores);
  g_assert_cmpuint (processors, ==, 2);
  g_assert_cmpuint (packages, ==, 2);
  g_assert_cmpstr (siblings, ==, "1");
  g_assert_cmpstr (cores, ==, "1");
}

static AffinityCase cases[] = {
  { "cloud-hypervisor", NULL },
  { "firecracker", NULL },
  { "qemu", NULL },
};

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  cpu_set_t own;
  gboolean any = FALSE;

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);
  g_assert_cmpint (sched_getaffinity (0, sizeof own, &own), ==, 0);
  for (guint cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET (cpu, &own))
      {
        if (!any)
          lo = cpu;
        hi = cpu;
        any = TRUE;
      }

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      AffinityCase *c = &cases[i];
#define ADD(name, fn)                                                                   \
      do {                                                                              \
        g_autofree char *test_path = g_strdup_printf ("/affinity/%s/%s", c->type, name); \
        g_test_add (test_path, Fixture, c, setup, fn, teardown);                        \
      } while (0)

      if (g_str_equal (c->type, "qemu"))
        {
          /* microvmd's kernel and initramfs with its agent, for the
           * machines that name none. */
          g_autofree char *guest = g_strdup_printf ("%s[guest]\nkernel=%s/guest/vmlinuz\n"
                                                    "initramfs=%s/guest/initramfs.img\n",
                                                    resources, build, build);
          c->config = guest_config (c->type, guest);
        }
      else
        c->config = guest_config (c->type, resources);
      ADD ("refused", test_refused);
      ADD ("topology-refused", test_topology_refused);
      if (g_str_equal (c->type, "cloud-hypervisor"))
        {
          ADD ("body", test_chv_body);
          ADD ("topology-body", test_topology_body);
          ADD ("checked-at-start", test_chv_checked_at_start);
        }
      if (g_str_equal (c->type, "firecracker"))
        ADD ("topology-body", test_topology_body);
      if (g_str_equal (c->type, "qemu"))
        {
          ADD ("pinned", test_qemu_pinned);
          ADD ("resize", test_qemu_resize);
          ADD ("topology", test_qemu_topology);
        }
#undef ADD
    }
  int status = g_test_run ();
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_free (cases[i].config);
  g_free (kernel);
  g_free (initrd);
  return status;
}
