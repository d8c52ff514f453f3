/* Machine.Resize through the daemon, on the test VMMs that stand in for
 * Cloud Hypervisor and Firecracker: the guest's new size as the VMM has
 * it, recorded in the spec for the next start; sizes refused before
 * anything changes (bounds, steps, state, vCPUs on Firecracker); room on
 * the host admitted for the larger size; and a resize the guest does not
 * take, after which the machine holds the larger until it next starts. */
#include "bus-client.h"
#include "names.h"

#include <json-glib/json-glib.h>
#include <string.h>

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* 2 CPUs and 640 MiB, exactly: 2 vCPUs and 640 MiB may be held. */
static const char resources[] =
  "[resources]\n"
  "host-cpus=2\n"
  "host-memory-bytes=671088640\n"
  "cpu-overcommit=1.0\n"
  "reserved-memory-bytes=0\n"
  "memory-overcommit=1.0\n"
  "[lifecycle]\n"
  "boot-timeout-seconds=20\n"
  "stop-timeout-seconds=2\n";

static char *kernel, *initrd;

typedef struct {
  const char *type;
  char       *config;
} ResizeCase;

static void
setup (Fixture *f, gconstpointer data)
{
  const ResizeCase *c = data;
  fixture_setup (f, c->config);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* A machine of 1 vCPU and 256 MiB with room for 2 and 512 MiB, readiness
 * @readiness, with @kernel_args. */
static char *
create (Fixture *f, const ResizeCase *c, const char *name, const char *readiness,
        const char *kernel_args)
{
  /* Firecracker adds no vCPUs: a spec asking for room to is refused. */
  g_autofree char *json = g_strdup_printf (
    "{\"name\":\"%s\",\"hypervisor_type\":\"%s\",\"kernel\":\"%s\",\"initrd\":\"%s\","
    "\"cpu_millicores\":1000,\"max_vcpus\":%d,\"memory_bytes\":268435456,"
    "\"max_memory_bytes\":536870912,\"readiness\":\"%s\",\"kernel_args\":\"%s\"}",
    name, c->type, kernel, initrd, g_str_equal (c->type, "firecracker") ? 1 : 2, readiness,
    kernel_args);

  return client_create_ok (f->client, json);
}

/* Resize; NULL on success, else the error's name (and *@msg). */
static char *
resize (Fixture *f, const char *path, guint32 vcpus, guint64 memory, char **msg)
{
  char *err = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "Resize",
                                                  &err, msg, "ut", vcpus, memory);
  return reply ? NULL : err;
}

static void
assert_refused (Fixture *f, const char *path, guint32 vcpus, guint64 memory, const char *error,
                const char *words)
{
  g_autofree char *msg = NULL;
  g_autofree char *err = resize (f, path, vcpus, memory, &msg);
  guint64 generation = client_get_u64 (f->client, path, "SpecificationGeneration");

  g_assert_cmpstr (err, ==, error);
  if (!strstr (msg, words))
    g_error ("'%s' does not say '%s'", msg, words);
  /* Nothing changed. */
  g_assert_cmpuint (client_get_u64 (f->client, path, "SpecificationGeneration"), ==, generation);
}

/* The VMM's own idea of the guest: vCPUs and memory, from its API. */
static void
vmm_size (Fixture *f, const ResizeCase *c, const char *path, guint64 *vcpus, guint64 *memory)
{
  g_autofree char *socket_path = fixture_runtime_file (f, path, "api.sock");
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *body = NULL;
  JsonObject *root;

  if (g_str_equal (c->type, "cloud-hypervisor"))
    {
      JsonObject *config, *memory_config;

      body = http_get_unix (socket_path, "/api/v1/vm.info");
      g_assert_true (json_parser_load_from_data (parser, body, -1, NULL));
      root = json_node_get_object (json_parser_get_root (parser));
      config = json_object_get_object_member (root, "config");
      memory_config = json_object_get_object_member (config, "memory");
      *vcpus = json_object_get_int_member (json_object_get_object_member (config, "cpus"),
                                           "boot_vcpus");
      *memory = json_object_get_int_member (memory_config, "size") +
                json_object_get_int_member_with_default (memory_config, "hotplugged_size", 0);
    }
  else
    {
      g_autoptr (JsonParser) hotplug_parser = json_parser_new ();
      JsonObject *machine_config;

      body = http_get_unix (socket_path, "/vm/config");
      g_assert_true (json_parser_load_from_data (parser, body, -1, NULL));
      root = json_node_get_object (json_parser_get_root (parser));
      machine_config = json_object_get_object_member (root, "machine-config");
      *vcpus = json_object_get_int_member (machine_config, "vcpu_count");
      *memory = json_object_get_int_member (machine_config, "mem_size_mib") * MiB;
      /* A guest that boots with all it may have has no hotplug device. */
      if (json_object_has_member (root, "memory-hotplug") &&
          !json_object_get_null_member (root, "memory-hotplug"))
        {
          g_autofree char *hotplug_body = http_get_unix (socket_path, "/hotplug/memory");

          g_assert_true (json_parser_load_from_data (hotplug_parser, hotplug_body, -1, NULL));
          *memory += json_object_get_int_member (json_node_get_object (
                       json_parser_get_root (hotplug_parser)), "plugged_size_mib") * MiB;
        }
    }
}

static void
test_resize (Fixture *f, gconstpointer data)
{
  const ResizeCase *c = data;
  gboolean cpus = g_str_equal (c->type, "cloud-hypervisor");
  g_autofree char *path = create (f, c, "grower", "console:MICROVMD-GUEST-READY",
                                  "console=ttyS0 microvmd.boot_ms=20");
  guint32 vcpus = cpus ? 2 : 1;
  guint64 have_vcpus, have_memory;

  /* Not running: nothing to resize. */
  assert_refused (f, path, 1, 512 * MiB, MV_BUS_ERROR_INVALID_STATE, "only a running machine");
  client_call_ok (f->client, path, "Start");

  /* Outside the maximums, or off the 2 MiB step. */
  assert_refused (f, path, 3, 256 * MiB, MV_BUS_ERROR_INVALID_ARGUMENT,
                  cpus ? "vcpus: 3 is outside 1 to 2" : "vcpus: 3 is outside 1 to 1");
  assert_refused (f, path, 1, 768 * MiB, MV_BUS_ERROR_INVALID_ARGUMENT, "max_memory_bytes");
  assert_refused (f, path, 1, 300 * MiB + 1, MV_BUS_ERROR_INVALID_ARGUMENT, "2097152-byte steps");
  if (!cpus)
    /* Firecracker adds no vCPUs: refused before the memory is touched. */
    assert_refused (f, path, 2, 512 * MiB, MV_BUS_ERROR_INVALID_ARGUMENT, "vcpus: 2 is outside 1 to 1");

  g_assert_null (resize (f, path, vcpus, 512 * MiB, NULL));
  vmm_size (f, c, path, &have_vcpus, &have_memory);
  g_assert_cmpuint (have_vcpus, ==, vcpus);
  g_assert_cmpuint (have_memory, ==, 512 * MiB);
  g_assert_cmpuint (client_get_u32 (f->client, path, "VCPUs"), ==, vcpus);
  g_assert_cmpuint (client_get_u64 (f->client, path, "MemoryBytes"), ==, 512 * MiB);

  /* And back down: virtio-mem gives memory back. */
  g_assert_null (resize (f, path, vcpus, 384 * MiB, NULL));
  vmm_size (f, c, path, &have_vcpus, &have_memory);
  g_assert_cmpuint (have_memory, ==, 384 * MiB);

  /* The next start keeps the new size. */
  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  vmm_size (f, c, path, &have_vcpus, &have_memory);
  g_assert_cmpuint (have_vcpus, ==, vcpus);
  g_assert_cmpuint (have_memory, ==, 384 * MiB);
  client_call_ok (f->client, path, "Stop");
}

static void
test_room (Fixture *f, gconstpointer data)
{
  const ResizeCase *c = data;
  g_autofree char *a = create (f, c, "a", "vmm", "console=ttyS0 microvmd.boot_ms=20");
  g_autofree char *b = create (f, c, "b", "vmm", "console=ttyS0 microvmd.boot_ms=20");

  gboolean cpus = g_str_equal (c->type, "cloud-hypervisor");
  guint32 vcpus = cpus ? 2 : 1;
  guint64 memory = cpus ? 256 * MiB : 512 * MiB;

  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");
  /* Both host CPUs, or 512 of the 640 MiB, are held: A cannot grow, and
   * the numbers say why. */
  assert_refused (f, a, vcpus, memory, MV_BUS_ERROR_RESOURCE_EXHAUSTED,
                  cpus ? "vCPUs: it wants 2, machines hold 1 of 2 allocatable"
                       : "memory: it wants 536870912 bytes, machines hold 268435456 of 671088640 "
                         "allocatable");
  client_call_ok (f->client, b, "Stop");
  g_assert_null (resize (f, a, vcpus, memory, NULL));
  /* Now A holds what B needs. */
  {
    g_autofree char *msg = NULL;
    g_autofree char *err = client_machine_call (f->client, b, "Start", &msg);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  }
}

/* Manager.GetUsage's held_memory_bytes. */
static guint64
held_memory (Fixture *f)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "GetUsage", NULL, NULL, "");
  guint64 held = G_MAXUINT64;
  const char *key;

  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "{sv}"), >, 0);
  while (sd_bus_message_enter_container (reply, 'e', "sv") > 0)
    {
      g_assert_cmpint (sd_bus_message_read (reply, "s", &key), >, 0);
      if (g_str_equal (key, "held_memory_bytes"))
        g_assert_cmpint (sd_bus_message_read (reply, "v", "t", &held), >, 0);
      else
        g_assert_cmpint (sd_bus_message_skip (reply, "v"), >=, 0);
      g_assert_cmpint (sd_bus_message_exit_container (reply), >=, 0);
    }
  return held;
}

static void
test_guest_does_not_take_it (Fixture *f, gconstpointer data)
{
  const ResizeCase *c = data;
  /* Running as soon as its VMM runs, while its guest still boots for a
   * minute: the memory it is offered is not plugged. */
  g_autofree char *path = create (f, c, "slow", "vmm", "console=ttyS0 microvmd.boot_ms=60000");
  g_autofree char *msg = NULL;
  g_autofree char *err = NULL;

  client_call_ok (f->client, path, "Start");
  err = resize (f, path, 1, 512 * MiB, &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
  g_assert_nonnull (strstr (msg, "plugged"));
  /* It holds the larger of the two meanwhile. */
  g_assert_cmpuint (held_memory (f), ==, 512 * MiB);
  /* The spec has the new size for the next start, which takes it. */
  g_assert_cmpuint (client_get_u64 (f->client, path, "MemoryBytes"), ==, 512 * MiB);
  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  {
    guint64 have_vcpus, have_memory;

    vmm_size (f, c, path, &have_vcpus, &have_memory);
    g_assert_cmpuint (have_memory, ==, 512 * MiB);
  }
  client_call_ok (f->client, path, "Stop");
}

static ResizeCase cases[] = {
  { "cloud-hypervisor", NULL },
  { "firecracker", NULL },
};

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      ResizeCase *c = &cases[i];
      g_autofree char *resize_path = g_strdup_printf ("/resize/%s/resize", c->type);
      g_autofree char *room_path = g_strdup_printf ("/resize/%s/room", c->type);
      g_autofree char *slow_path = g_strdup_printf ("/resize/%s/guest-does-not-take-it", c->type);

      c->config = guest_config (c->type, resources);
      g_test_add (resize_path, Fixture, c, setup, test_resize, teardown);
      g_test_add (room_path, Fixture, c, setup, test_room, teardown);
      if (g_str_equal (c->type, "firecracker"))
        g_test_add (slow_path, Fixture, c, setup, test_guest_does_not_take_it, teardown);
    }
  int status = g_test_run ();
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_free (cases[i].config);
  g_free (kernel);
  g_free (initrd);
  return status;
}
