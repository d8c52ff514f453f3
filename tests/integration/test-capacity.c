/* Capacity and admission through the daemon, on the test runtime: the
 * capacity [resources] says, read back; what could never start refused at
 * create and by CheckResources; starts that do not fit refused with the
 * exact numbers and nothing changed; standby gives back what a machine
 * held and its wake is admitted again; two starts at once never share
 * the last slot; GetUsage counts it all. */
#include "bus-client.h"
#include "names.h"

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* 2 CPUs × 1.5 = 3 vCPUs; (2 GiB − 512 MiB) × 1 = 1.5 GiB. */
static const char config[] =
  "[resources]\n"
  "host-cpus=2\n"
  "host-memory-bytes=2147483648\n"
  "reserved-memory-bytes=536870912\n"
  "cpu-overcommit=1.5\n"
  "memory-overcommit=1.0\n";

#define ALLOCATABLE_MEMORY G_GUINT64_CONSTANT (1610612736)

/* Cold: no warm template is built behind these starts to hold room
 * while it boots (but in /capacity/give-way). */
static char *
spec (const char *name, guint millicores, guint64 memory)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                          "\"kernel\":\"/boot/vmlinuz\",\"cpu_millicores\":%u,"
                          "\"memory_bytes\":%" G_GUINT64_FORMAT ",\"start_mode\":\"cold\"}",
                          name, millicores, memory);
}

static char *
create (Fixture *f, const char *name, guint millicores, guint64 memory)
{
  g_autofree char *json = spec (name, millicores, memory);

  return client_create_ok (f->client, json);
}

/* Reads a{sv} into a table of its members' text forms: "u 3", "t 7",
 * "d 1.5"; containers as "a". */
static GHashTable *
read_dict (sd_bus_message *m)
{
  GHashTable *dict = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  const char *key;

  g_assert_cmpint (sd_bus_message_enter_container (m, 'a', "{sv}"), >=, 0);
  while (sd_bus_message_enter_container (m, 'e', "sv") > 0)
    {
      const char *contents = NULL;
      char type;

      g_assert_cmpint (sd_bus_message_read (m, "s", &key), >=, 0);
      g_assert_cmpint (sd_bus_message_peek_type (m, &type, &contents), >, 0);
      g_assert_cmpint (sd_bus_message_enter_container (m, 'v', contents), >=, 0);
      if (g_str_equal (contents, "u"))
        {
          uint32_t u;
          g_assert_cmpint (sd_bus_message_read (m, "u", &u), >=, 0);
          g_hash_table_insert (dict, g_strdup (key), g_strdup_printf ("u %u", u));
        }
      else if (g_str_equal (contents, "t"))
        {
          uint64_t t;
          g_assert_cmpint (sd_bus_message_read (m, "t", &t), >=, 0);
          g_hash_table_insert (dict, g_strdup (key), g_strdup_printf ("t %" G_GUINT64_FORMAT, t));
        }
      else if (g_str_equal (contents, "d"))
        {
          double d;
          g_assert_cmpint (sd_bus_message_read (m, "d", &d), >=, 0);
          g_hash_table_insert (dict, g_strdup (key), g_strdup_printf ("d %g", d));
        }
      else if (g_str_equal (contents, "a{su}"))
        {
          GString *text = g_string_new ("");
          uint32_t n;
          const char *name;

          g_assert_cmpint (sd_bus_message_enter_container (m, 'a', "{su}"), >=, 0);
          while (sd_bus_message_read (m, "{su}", &name, &n) > 0)
            g_string_append_printf (text, "%s=%u ", name, n);
          g_assert_cmpint (sd_bus_message_exit_container (m), >=, 0);
          g_hash_table_insert (dict, g_strdup (key), g_string_free (text, FALSE));
        }
      else if (g_str_equal (contents, "a(sssout)"))
        {
          GString *text = g_string_new ("");
          const char *id, *name, *state, *path;
          uint32_t vcpus;
          uint64_t memory;

          g_assert_cmpint (sd_bus_message_enter_container (m, 'a', "(sssout)"), >=, 0);
          while (sd_bus_message_read (m, "(sssout)", &id, &name, &state, &path, &vcpus,
                                      &memory) > 0)
            {
              g_assert_true (g_str_has_prefix (path, MV_MACHINE_PREFIX));
              g_string_append_printf (text, "%s:%s:%u:%" G_GUINT64_FORMAT " ", name, state, vcpus,
                                      memory);
            }
          g_assert_cmpint (sd_bus_message_exit_container (m), >=, 0);
          g_hash_table_insert (dict, g_strdup (key), g_string_free (text, FALSE));
        }
      else
        {
          g_assert_cmpint (sd_bus_message_skip (m, contents), >=, 0);
          g_hash_table_insert (dict, g_strdup (key), g_strdup ("a"));
        }
      g_assert_cmpint (sd_bus_message_exit_container (m), >=, 0);
      g_assert_cmpint (sd_bus_message_exit_container (m), >=, 0);
    }
  g_assert_cmpint (sd_bus_message_exit_container (m), >=, 0);
  return dict;
}

static GHashTable *
get_usage (Fixture *f)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "GetUsage", NULL, NULL, NULL);

  g_assert_nonnull (reply);
  return read_dict (reply);
}

static void
assert_member (GHashTable *dict, const char *key, const char *text)
{
  g_assert_cmpstr (g_hash_table_lookup (dict, key), ==, text);
}

static void
test_capacity_read_back (Fixture *f, gconstpointer data)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (GHashTable) capacity = NULL;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "Capacity", &error, &reply, "a{sv}"),
                   >=, 0);
  sd_bus_error_free (&error);
  capacity = read_dict (reply);
  assert_member (capacity, "host_vcpus", "u 2");
  assert_member (capacity, "host_memory_bytes", "t 2147483648");
  assert_member (capacity, "reserved_memory_bytes", "t 536870912");
  assert_member (capacity, "cpu_overcommit", "d 1.5");
  assert_member (capacity, "memory_overcommit", "d 1");
  assert_member (capacity, "allocatable_vcpus", "u 3");
  assert_member (capacity, "allocatable_memory_bytes", "t 1610612736");
}

static gboolean
check_resources (Fixture *f, guint vcpus, guint64 memory, char **error_name, char **message)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "CheckResources", error_name, message, "ut",
                                                  vcpus, memory);
  int fits = -1;

  if (!reply)
    return FALSE;
  g_assert_cmpint (sd_bus_message_read (reply, "b", &fits), >=, 0);
  return fits;
}

static void
test_never_fits (Fixture *f, gconstpointer data)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *json = NULL, *path = NULL;

  /* Three vCPUs are allocatable, but never to one machine on two CPUs. */
  g_assert_false (check_resources (f, 3, 256 * MiB, &err, &msg));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (msg, ==, "cpu_millicores: 3 vCPUs is more than this host's 2 CPUs");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  g_assert_false (check_resources (f, 1, ALLOCATABLE_MEMORY + 2 * MiB, &err, &msg));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_true (g_str_has_prefix (msg, "memory_bytes: 1612709888 (1.5 GiB) is more than this "
                                        "host's memory for machines, 1610612736 (1.5 GiB)"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  g_assert_true (check_resources (f, 2, ALLOCATABLE_MEMORY, &err, &msg));
  g_assert_null (err);

  /* Create refuses what CheckResources does, and records nothing. */
  json = spec ("big", 2500, 256 * MiB);
  path = client_create (f->client, json, 0, &err, &msg);
  g_assert_null (path);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (msg, ==, "cpu_millicores: 3 vCPUs is more than this host's 2 CPUs");
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);

  /* An update to a size that could never start is refused; the machine
   * keeps its own. */
  g_autofree char *small = create (f, "small", 1000, 256 * MiB);
  g_autofree char *bigger = spec ("small", 1000, 2 * G_GUINT64_CONSTANT (1) << 30);
  g_autofree char *uerr = NULL, *umsg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, small, MV_MACHINE_IFACE, "Update",
                                                  &uerr, &umsg, "s", bigger);
  g_assert_null (reply);
  g_assert_cmpstr (uerr, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_true (g_str_has_prefix (umsg, "memory_bytes: "));
  g_assert_cmpuint (client_get_u64 (f->client, small, "MemoryBytes"), ==, 256 * MiB);
}

static void
test_admission (Fixture *f, gconstpointer data)
{
  g_autofree char *a = create (f, "a", 1000, 512 * MiB);
  g_autofree char *b = create (f, "b", 1000, 512 * MiB);
  g_autofree char *c = create (f, "c", 1000, 512 * MiB);
  g_autofree char *d = create (f, "d", 1000, 256 * MiB);
  g_autofree char *err = NULL, *msg = NULL, *state = NULL;
  g_autoptr (GHashTable) usage = NULL;

  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");
  client_call_ok (f->client, c, "Start");
  g_assert_false (check_resources (f, 1, 256 * MiB, NULL, NULL));

  /* Everything is held: d does not fit, and stays as it was. */
  err = client_machine_call (f->client, d, "Start", &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_cmpstr (msg, ==, "Not enough room on this host for machine d: "
                            "vCPUs: it wants 1, machines hold 3 of 3 allocatable; "
                            "memory: it wants 268435456 bytes, machines hold 1610612736 of "
                            "1610612736 allocatable");
  state = client_get_string (f->client, d, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  g_assert_cmpuint (client_get_u64 (f->client, d, "StartedAt"), ==, 0);

  usage = get_usage (f);
  assert_member (usage, "held_vcpus", "u 3");
  assert_member (usage, "held_memory_bytes", "t 1610612736");
  assert_member (usage, "machines", "a:Running:1:536870912 b:Running:1:536870912 "
                                    "c:Running:1:536870912 ");
  assert_member (usage, "by_state", "Stopped=1 Starting=0 Running=3 Paused=0 Standby=0 "
                                    "Stopping=0 Restarting=0 Failed=0 ");
  assert_member (usage, "by_health", "starting=0 healthy=0 unhealthy=0 ");
  g_assert_cmpstr (g_hash_table_lookup (usage, "capacity"), ==, "a");

  /* microvmctl usage says the same. */
  {
    g_autofree char *ctl = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                             "microvmctl", NULL);
    g_autofree char *out = NULL, *cerr = NULL;

    g_assert_cmpint (mv_test_env_run (f->env, (const char *const[]) { ctl, "usage", NULL },
                                      &out, &cerr), ==, 0);
    g_assert_nonnull (strstr (out, "Host:        2 CPUs, 2G memory, 512M reserved\n"));
    g_assert_nonnull (strstr (out, "Overcommit:  CPU 1.5, memory 1\n"));
    g_assert_nonnull (strstr (out, "Held:        3 of 3 vCPUs, 1.5G of 1.5G memory\n"));
    g_assert_nonnull (strstr (out, "Machines:    Stopped 1, Running 3\n"));
    g_assert_true (g_regex_match_simple ("\\nb +Running +1 +512M\\n", out, 0, 0));
  }

  /* Paused still holds. */
  client_call_ok (f->client, c, "Pause");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  err = client_machine_call (f->client, d, "Start", &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);

  /* On standby a machine holds nothing: d fits now. */
  client_call_ok (f->client, a, "Standby");
  g_clear_pointer (&state, g_free);
  state = client_get_string (f->client, a, "State");
  g_assert_cmpstr (state, ==, "Standby");
  g_clear_pointer (&usage, g_hash_table_unref);
  usage = get_usage (f);
  assert_member (usage, "held_vcpus", "u 2");
  assert_member (usage, "held_memory_bytes", "t 1073741824");
  client_call_ok (f->client, d, "Start");

  /* Its wake is admitted as any start is: now it does not fit... */
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  err = client_machine_call (f->client, a, "Start", &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_cmpstr (msg, ==, "Not enough room on this host for machine a: "
                            "vCPUs: it wants 1, machines hold 3 of 3 allocatable; "
                            "memory: it wants 536870912 bytes, machines hold 1342177280 of "
                            "1610612736 allocatable");
  g_clear_pointer (&state, g_free);
  state = client_get_string (f->client, a, "State");
  g_assert_cmpstr (state, ==, "Standby");

  /* ...and once d is stopped, it does. */
  client_call_ok (f->client, d, "Stop");
  client_call_ok (f->client, a, "Start");
  g_clear_pointer (&state, g_free);
  state = client_get_string (f->client, a, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_clear_pointer (&usage, g_hash_table_unref);
  usage = get_usage (f);
  assert_member (usage, "machines", "a:Running:1:536870912 b:Running:1:536870912 "
                                    "c:Paused:1:536870912 ");
}

typedef struct {
  int   done;
  char *error_name;
} Pending;

static int
on_reply (sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
  Pending *p = userdata;

  p->done = 1;
  if (sd_bus_message_is_method_error (m, NULL))
    p->error_name = g_strdup (sd_bus_message_get_error (m)->name);
  return 0;
}

/* Waits for the answers to two calls for the last slot: one of them is
 * refused for want of room. */
static void
one_refused (Fixture *f, Pending *px, Pending *py)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  while ((!px->done || !py->done) && g_get_monotonic_time () < deadline)
    if (sd_bus_process (f->client->bus, NULL) == 0)
      sd_bus_wait (f->client->bus, 100000);
  g_assert_true (px->done && py->done);
  g_assert_true ((px->error_name == NULL) != (py->error_name == NULL));
  g_assert_cmpstr (px->error_name ? px->error_name : py->error_name, ==,
                   MV_BUS_ERROR_RESOURCE_EXHAUSTED);
}

static void
test_last_slot (Fixture *f, gconstpointer data)
{
  g_autofree char *a = create (f, "a", 2000, 256 * MiB);
  g_autofree char *x = create (f, "x", 1000, 256 * MiB);
  g_autofree char *y = create (f, "y", 1000, 256 * MiB);
  g_autofree char *sx = NULL, *sy = NULL;
  Pending px = { 0 }, py = { 0 };

  client_call_ok (f->client, a, "Start");
  /* One vCPU is left; both ask for it before either is answered. */
  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, NULL, MV_BUS_NAME, x,
                                             MV_MACHINE_IFACE, "Start", on_reply, &px, NULL),
                   >=, 0);
  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, NULL, MV_BUS_NAME, y,
                                             MV_MACHINE_IFACE, "Start", on_reply, &py, NULL),
                   >=, 0);
  one_refused (f, &px, &py);
  sx = client_get_string (f->client, x, "State");
  sy = client_get_string (f->client, y, "State");
  g_assert_cmpstr (px.error_name ? sx : sy, ==, "Stopped");
  g_assert_cmpstr (px.error_name ? sy : sx, ==, "Running");
  g_free (px.error_name);
  g_free (py.error_name);
}

static char *
machine_path (Fixture *f, const char *name)
{
  g_autoptr (sd_bus_message) r = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                              "GetMachine", NULL, NULL, "s", name);
  const char *path = NULL;

  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "o", &path), >, 0);
  return g_strdup (path);
}

/* Two creates that start, both asked for before either is answered:
 * the first is admitted before its records are on disk, and the second,
 * asked meanwhile, counts it. */
static void
test_last_slot_create (Fixture *f, gconstpointer data)
{
  g_autofree char *a = create (f, "a", 2000, 256 * MiB);
  g_autofree char *jx = spec ("x", 1000, 256 * MiB), *jy = spec ("y", 1000, 256 * MiB);
  g_autofree char *sx = NULL, *sy = NULL, *x = NULL, *y = NULL;
  g_autoptr (GHashTable) usage = NULL;
  Pending px = { 0 }, py = { 0 };

  client_call_ok (f->client, a, "Start");
  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, NULL, MV_BUS_NAME, MV_MANAGER_PATH,
                                             MV_MANAGER_IFACE, "CreateMachine", on_reply, &px,
                                             "st", jx, (uint64_t) MV_CREATE_START),
                   >=, 0);
  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, NULL, MV_BUS_NAME, MV_MANAGER_PATH,
                                             MV_MANAGER_IFACE, "CreateMachine", on_reply, &py,
                                             "st", jy, (uint64_t) MV_CREATE_START),
                   >=, 0);
  one_refused (f, &px, &py);
  /* The one refused is made, and left stopped, as a start refused later is. */
  x = machine_path (f, "x");
  y = machine_path (f, "y");
  sx = client_get_string (f->client, x, "State");
  sy = client_get_string (f->client, y, "State");
  g_assert_cmpstr (px.error_name ? sx : sy, ==, "Stopped");
  g_assert_cmpstr (px.error_name ? sy : sx, ==, "Running");
  usage = get_usage (f);
  assert_member (usage, "held_vcpus", "u 3");
  g_free (px.error_name);
  g_free (py.error_name);
}

/* A template the daemon builds behind a start uses room nobody asked
 * for: a start that needs that room makes it give way, and starts once
 * it has; one that would not fit even then is refused, saying what the
 * template holds. a's template boots for a minute here, holding 1 vCPU
 * and 512 MiB while it does. */
static void
test_give_way (Fixture *f, gconstpointer data)
{
  g_autofree char *a = client_create_ok (f->client,
    "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
    "\"memory_bytes\":536870912,\"kernel_args\":\"test.template-delay-ms=60000\"}");
  g_autofree char *b = create (f, "b", 1000, 512 * MiB);
  g_autofree char *c = create (f, "c", 1000, 512 * MiB);
  g_autofree char *big = create (f, "big", 2000, 256 * MiB);
  g_autofree char *err = NULL, *msg = NULL, *state = NULL;
  g_autoptr (GHashTable) usage = NULL;

  client_call_ok (f->client, a, "Start");
  /* b fits beside a and its template. */
  client_call_ok (f->client, b, "Start");
  err = client_machine_call (f->client, big, "Start", &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_cmpstr (msg, ==, "Not enough room on this host for machine big: "
                            "vCPUs: it wants 2, machines hold 2 of 3 allocatable; "
                            "memory: it wants 268435456 bytes, machines hold 1073741824 of "
                            "1610612736 allocatable; warm templates being built hold 1 vCPUs "
                            "and 536870912 bytes besides");

  /* c fits once the template is gone, and starts then; CheckResources
   * says so beforehand. */
  g_assert_true (check_resources (f, 1, 512 * MiB, NULL, NULL));
  client_call_ok (f->client, c, "Start");
  state = client_get_string (f->client, c, "State");
  g_assert_cmpstr (state, ==, "Running");
  usage = get_usage (f);
  assert_member (usage, "held_vcpus", "u 3");
  assert_member (usage, "machines", "a:Running:1:536870912 b:Running:1:536870912 "
                                    "c:Running:1:536870912 ");
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);
}

/* Bad [resources] stop the daemon at startup, naming the key and the limit. */
static void
test_bad_config (void)
{
  static const struct {
    const char *text;
    const char *message;
  } rows[] = {
    { "[resources]\ncpu-overcommit=0.5\n", "[resources] cpu-overcommit: 0.5 is not from 1 to 64" },
    { "[resources]\nmemory-overcommit=0\n", "[resources] memory-overcommit: 0 is not from 1 to 64" },
    { "[resources]\nhost-memory-bytes=1073741824\nreserved-memory-bytes=1073741824\n",
      "[resources] reserved-memory-bytes: 1073741824 (1 GiB) is not below the host's memory of "
      "1073741824 (1 GiB)" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    mv_test_env_assert_config_refused (rows[i].text, rows[i].message);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/capacity/read-back", Fixture, config, fixture_setup, test_capacity_read_back,
              fixture_teardown);
  g_test_add ("/capacity/never-fits", Fixture, config, fixture_setup, test_never_fits,
              fixture_teardown);
  g_test_add ("/capacity/admission", Fixture, config, fixture_setup, test_admission,
              fixture_teardown);
  g_test_add ("/capacity/last-slot", Fixture, config, fixture_setup, test_last_slot,
              fixture_teardown);
  g_test_add ("/capacity/last-slot-create", Fixture, config, fixture_setup, test_last_slot_create,
              fixture_teardown);
  g_test_add ("/capacity/give-way", Fixture, config, fixture_setup, test_give_way,
              fixture_teardown);
  g_test_add_func ("/capacity/bad-config", test_bad_config);
  return g_test_run ();
}
