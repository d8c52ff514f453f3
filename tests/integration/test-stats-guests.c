/* Stats of a real guest: microvmd's kernel, initramfs and agent in QEMU
 * under TCG. Its VMM's CPU time grows faster while the guest burns a
 * vCPU than while it idles, and GetAllStats (through microvmctl stats)
 * lists it. */
#include "bus-client.h"
#include "names.h"

#include <json-glib/json-glib.h>
#include <string.h>

static char *rootfs;
static char *config;

static guint64
cpu_time (Fixture *f, const char *path)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "GetStats",
                                                  &err, &msg, "");

  if (!reply)
    g_error ("GetStats: %s: %s", err, msg);
  return stats_reply_cpu_time_ns (reply);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static void
test_cpu_grows (Fixture *f, gconstpointer data)
{
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"burner\",\"hypervisor_type\":\"qemu\","
                                           "\"memory_bytes\":268435456,\"disks\":[{\"path\":\"%s\","
                                           "\"read_only\":true,\"root\":true}]}", rootfs);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *ctl = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL);
  const char *burn[] = { "sh", "-c", "while :; do :; done </dev/null >/dev/null 2>&1 &", NULL };
  const char *stats_argv[] = { ctl, "--json", "stats", NULL };
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_auto (ExecResult) result = { 0 };
  g_autofree char *out = NULL, *err = NULL;
  guint64 t0, t1, t2;
  JsonArray *array;
  gboolean listed = FALSE;

  client_call_ok (f->client, path, "Start");
  /* Let the boot's own work settle, then measure the guest idling. */
  g_usleep (2 * G_USEC_PER_SEC);
  t0 = cpu_time (f, path);
  g_usleep (3 * G_USEC_PER_SEC);
  t1 = cpu_time (f, path);

  exec_run (f, path, burn, NULL, &result);
  g_assert_cmpstr (result.status, ==, "exit 0");
  g_usleep (3 * G_USEC_PER_SEC);
  t2 = cpu_time (f, path);
  g_test_message ("idle: %" G_GUINT64_FORMAT " ns, burning: %" G_GUINT64_FORMAT " ns in 3 s",
                  t1 - t0, t2 - t1);
  g_assert_cmpuint (t1, >=, t0);
  /* A spinning vCPU under TCG is a host thread kept busy: well over a
   * second of CPU in three, more than idling took. */
  g_assert_cmpuint (t2 - t1, >, 1000000000);
  g_assert_cmpuint (t2 - t1, >, (t1 - t0) + 500000000);

  g_assert_cmpint (mv_test_env_run (f->env, stats_argv, &out, &err), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  array = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonObject *o = json_array_get_object_element (array, i);

      if (g_str_equal (json_object_get_string_member (o, "id"), id))
        {
          listed = TRUE;
          g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "burner");
          g_assert_cmpint (json_object_get_int_member (o, "cpu_time_ns"), >=, (gint64) t2);
          g_assert_cmpint (json_object_get_int_member (o, "resident_memory_bytes"), >, 0);
        }
    }
  g_assert_true (listed);
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  g_autofree char *kernel = NULL, *initramfs = NULL, *guest = NULL;

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
  guest = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n"
                           "[lifecycle]\nboot-timeout-seconds=60\nstop-timeout-seconds=20\n",
                           kernel, initramfs);
  config = guest_config ("qemu", guest);
  g_test_add ("/stats-guests/qemu/cpu-grows", Fixture, config, fixture_setup, test_cpu_grows,
              teardown);
  return g_test_run ();
}
