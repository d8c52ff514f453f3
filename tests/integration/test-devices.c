/* Host devices through the daemon (the spec's pci_devices and gpu), read
 * from a sysfs tree of the test's own ($MICROVMD_TEST_HOST_ROOT): no
 * device here can be passed through, so the tree stands for a host with an
 * IOMMU. Every refusal at create (and again at start, once a device was
 * rebound), Firecracker's Unsupported, the devices on the wire of the test
 * VMM that stands for Cloud Hypervisor, QEMU's command line as the QEMU
 * that cannot open them quotes it, one machine holding a device until it
 * stops, and no standby or snapshot of such a machine. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define UUID "7c4f3a4e-2b1d-4c55-9d3a-0f6b8e1d2c3a"

typedef struct {
  Fixture  f;
  char    *root;
} DevFixture;

static char *guest_kernel, *guest_initrd;

static const char lifecycle[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=20\n"
  "stop-timeout-seconds=2\n";

/* @path below the tree, its directories made. */
static char *
tree_path (DevFixture *df, const char *path)
{
  char *full = g_build_filename (df->root, path, NULL);
  g_autofree char *dir = g_path_get_dirname (full);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  return full;
}

static void
tree_link (DevFixture *df, const char *path, const char *target)
{
  g_autofree char *full = tree_path (df, path);

  g_unlink (full);
  g_assert_cmpint (symlink (target, full), ==, 0);
}

/* PCI device @address bound to @driver (NULL: none), in IOMMU group
 * @group (NULL: none), as sysfs has it. */
static void
add_pci (DevFixture *df, const char *address, const char *driver, const char *group)
{
  g_autofree char *dir = g_build_filename ("sys/bus/pci/devices", address, NULL);
  g_autofree char *marker = g_build_filename (dir, "vendor", NULL);
  g_autofree char *file = tree_path (df, marker);

  g_assert_true (g_file_set_contents (file, "0x10de\n", -1, NULL));
  if (driver)
    {
      g_autofree char *link = g_build_filename (dir, "driver", NULL);
      g_autofree char *target = g_build_filename ("../../../../bus/pci/drivers", driver, NULL);
      tree_link (df, link, target);
    }
  if (group)
    {
      g_autofree char *link = g_build_filename (dir, "iommu_group", NULL);
      g_autofree char *target = g_build_filename ("../../../../kernel/iommu_groups", group, NULL);
      g_autofree char *member = g_build_filename ("sys/kernel/iommu_groups", group, "devices",
                                                  address, NULL);
      g_autofree char *back = g_build_filename ("../../../../bus/pci/devices", address, NULL);

      tree_link (df, link, target);
      tree_link (df, member, back);
    }
}

/* Rebinds @address to @driver, as a host administrator would. */
static void
rebind (DevFixture *df, const char *address, const char *driver)
{
  g_autofree char *link = g_build_filename ("sys/bus/pci/devices", address, "driver", NULL);
  g_autofree char *target = g_build_filename ("../../../../bus/pci/drivers", driver, NULL);

  tree_link (df, link, target);
}

/* The host: 0000:01:00.0 alone in group 12; 0000:02:00.0 bound to a host
 * driver; 0000:03:00.0 sharing group 14 with a device of a host driver;
 * 0000:04:00.0 and .1 both in group 15; 0000:05:00.0 in no group; a
 * mediated device of type nvidia-35 in group 16. */
static void
make_host (DevFixture *df)
{
  add_pci (df, "0000:01:00.0", "vfio-pci", "12");
  add_pci (df, "0000:02:00.0", "nvidia", "13");
  add_pci (df, "0000:03:00.0", "vfio-pci", "14");
  add_pci (df, "0000:03:00.1", "snd_hda_intel", "14");
  add_pci (df, "0000:04:00.0", "vfio-pci", "15");
  add_pci (df, "0000:04:00.1", "vfio-pci", "15");
  add_pci (df, "0000:05:00.0", "vfio-pci", NULL);
  tree_link (df, "sys/bus/mdev/devices/" UUID "/mdev_type",
             "../../../../devices/pci0000:00/0000:00:02.0/mdev_supported_types/nvidia-35");
  tree_link (df, "sys/bus/mdev/devices/" UUID "/iommu_group",
             "../../../../kernel/iommu_groups/16");
  /* The VFIO nodes, character devices with /dev/null's numbers. */
  for (guint i = 0; i < 6; i++)
    {
      static const char *const nodes[] = { "vfio", "12", "13", "14", "15", "16" };
      g_autofree char *rel = g_build_filename ("dev/vfio", nodes[i], NULL);
      g_autofree char *node = tree_path (df, rel);

      g_assert_cmpint (mknod (node, S_IFCHR | 0600, makedev (1, 3)), ==, 0);
    }
}

static void
setup (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  g_autofree char *config = guest_config (data, lifecycle);

  f->env = mv_test_env_new ();
  df->root = g_build_filename (mv_test_env_dir (f->env), "host", NULL);
  make_host (df);
  mv_test_env_write_config (f->env, config);
  g_setenv ("MICROVMD_TEST_HOST_ROOT", df->root, TRUE);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_TEST_HOST_ROOT");
  f->client = client_new (f->env);
}

/* The daemon started again on the same host tree. */
static void
restart (DevFixture *df, int signal)
{
  mv_test_env_stop_daemon (df->f.env, signal);
  g_setenv ("MICROVMD_TEST_HOST_ROOT", df->root, TRUE);
  mv_test_env_start_daemon (df->f.env, NULL);
  g_unsetenv ("MICROVMD_TEST_HOST_ROOT");
}

static void
teardown (DevFixture *df, gconstpointer data)
{
  client_delete_all (df->f.client);
  fixture_teardown (&df->f, data);
  g_free (df->root);
}

static char *
spec_of (const char *type, const char *name, const char *devices)
{
  return guest_spec_json (type, name, guest_kernel, guest_initrd, devices);
}

/* CreateMachine refuses @devices with @error saying @words, and records
 * nothing. */
static void
assert_refused (Fixture *f, const char *type, const char *devices, const char *error,
                const char *words)
{
  g_autofree char *spec = spec_of (type, "refused", devices);
  g_autofree char *err = NULL, *message = NULL;
  g_autofree char *path = client_create (f->client, spec, 0, &err, &message);

  g_assert_null (path);
  g_assert_cmpstr (err, ==, error);
  if (!strstr (message, words))
    g_error ("'%s' does not say '%s'", message, words);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

/* The Manager's HypervisorCapabilities for @type, as " name name ... ". */
static char *
capabilities_of (Fixture *f, const char *type)
{
  g_autoptr (sd_bus_message) r = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  sd_bus_error error = SD_BUS_ERROR_NULL;
  const char *name;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "HypervisorCapabilities", &error, &r,
                                        "a{sas}"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (r, 'a', "{sas}"), >, 0);
  while (sd_bus_message_enter_container (r, 'e', "sas") > 0)
    {
      g_auto (GStrv) names = NULL;

      g_assert_cmpint (sd_bus_message_read (r, "s", &name), >, 0);
      g_assert_cmpint (sd_bus_message_read_strv (r, &names), >, 0);
      if (g_str_equal (name, type))
        {
          g_string_append_c (out, ' ');
          for (guint i = 0; names[i]; i++)
            g_string_append_printf (out, "%s ", names[i]);
        }
      g_assert_cmpint (sd_bus_message_exit_container (r), >, 0);
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
test_refusals (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  const char *type = data;
  static const struct {
    const char *devices;
    const char *words;
  } cases[] = {
    { "\"pci_devices\":[\"01:00.0\"]", "pci_devices[0]: \"01:00.0\" is not a PCI address" },
    { "\"pci_devices\":[\"0000:01:00.0\",\"0000:01:00.0\"]",
      "pci_devices[1]: 0000:01:00.0 is listed already (pci_devices[0])" },
    { "\"pci_devices\":[\"0000:01:20.0\"]", "pci_devices[0]: \"0000:01:20.0\" is not a PCI address" },
    { "\"pci_devices\":[\"0000:01:00.0\",\"0000:02:00.0\",\"0000:03:00.0\",\"0000:04:00.0\","
      "\"0000:04:00.1\",\"0000:05:00.0\",\"0000:06:00.0\",\"0000:07:00.0\",\"0000:08:00.0\"]",
      "pci_devices: 9 devices, more than the limit of 8" },
    { "\"gpu\":{\"profile\":\"nvidia-35\"}", "gpu.mediated_device_uuid: required" },
    { "\"gpu\":{\"profile\":\"../x\",\"mediated_device_uuid\":\"" UUID "\"}",
      "gpu.profile: \"../x\" is not a mediated device type's name" },
    { "\"gpu\":{\"profile\":\"nvidia-35\",\"mediated_device_uuid\":\"not-a-uuid\"}",
      "gpu.mediated_device_uuid: \"not-a-uuid\" is not a UUID in lower case" },
    { "\"pci_devices\":[\"0000:01:00.0\"],\"standby_after_seconds\":600",
      "standby_after_seconds: a machine with passed-through devices cannot be put on standby" },
  };
  static const struct {
    const char *devices;
    const char *words;
  } host_cases[] = {
    { "\"pci_devices\":[\"0000:09:00.0\"]", "pci_devices[0]: this host has no PCI device 0000:09:00.0" },
    { "\"pci_devices\":[\"0000:02:00.0\"]",
      "pci_devices[0]: 0000:02:00.0 is bound to nvidia, not vfio-pci" },
    { "\"pci_devices\":[\"0000:03:00.0\"]",
      "pci_devices[0]: IOMMU group 14 also holds 0000:03:00.1, bound to snd_hda_intel" },
    { "\"pci_devices\":[\"0000:04:00.0\"]",
      "pci_devices[0]: IOMMU group 15 also holds 0000:04:00.1, which the spec does not list" },
    { "\"pci_devices\":[\"0000:05:00.0\"]", "pci_devices[0]: 0000:05:00.0 is in no IOMMU group" },
    { "\"gpu\":{\"profile\":\"nvidia-36\",\"mediated_device_uuid\":\"" UUID "\"}",
      "gpu.profile: mediated device " UUID " is of type nvidia-35, not nvidia-36" },
    { "\"gpu\":{\"profile\":\"nvidia-35\",\"mediated_device_uuid\":"
      "\"00000000-0000-4000-8000-000000000000\"}",
      "gpu.mediated_device_uuid: this host has no mediated device" },
  };

  g_autofree char *caps = capabilities_of (f, type);

  /* The Manager says what each hypervisor passes through and takes. */
  g_test_message ("%s:%s", type, caps);
  g_assert_nonnull (strstr (caps, " cpu-threads "));
  g_assert_true (!strstr (caps, " device-passthrough ") == g_str_equal (type, "firecracker"));
  g_assert_true (!strstr (caps, " hotplug-devices ") == g_str_equal (type, "firecracker"));
  g_assert_true (!strstr (caps, " cpu-packages ") == g_str_equal (type, "firecracker"));
  g_assert_true (!!strstr (caps, " cpu-dies ") == g_str_equal (type, "cloud-hypervisor"));
  g_assert_true (!!strstr (caps, " snapshot "));

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_refused (f, type, cases[i].devices, MV_BUS_ERROR_INVALID_ARGUMENT, cases[i].words);
  if (g_str_equal (type, "firecracker"))
    {
      assert_refused (f, type, "\"pci_devices\":[\"0000:01:00.0\"]", MV_BUS_ERROR_UNSUPPORTED,
                      "pci_devices: firecracker cannot pass host devices through");
      assert_refused (f, type, "\"gpu\":{\"profile\":\"nvidia-35\",\"mediated_device_uuid\":\""
                      UUID "\"}", MV_BUS_ERROR_UNSUPPORTED,
                      "gpu: firecracker cannot pass host devices through");
      return;
    }
  for (guint i = 0; i < G_N_ELEMENTS (host_cases); i++)
    assert_refused (f, type, host_cases[i].devices, MV_BUS_ERROR_INVALID_ARGUMENT,
                    host_cases[i].words);
}

/* The VMM's vm.info: its config's devices, as "id=path" joined by
 * spaces. */
static char *
chv_devices (Fixture *f, const char *path)
{
  g_autofree char *api = fixture_runtime_file (f, path, "api.sock");
  g_autofree char *body = http_get_unix (api, "/api/v1/vm.info");
  g_autoptr (JsonNode) node = json_from_string (body, NULL);
  g_autoptr (GString) out = g_string_new ("");
  JsonArray *devices;

  g_assert_nonnull (node);
  devices = json_object_get_array_member (
    json_object_get_object_member (json_node_get_object (node), "config"), "devices");
  for (guint i = 0; devices && i < json_array_get_length (devices); i++)
    {
      JsonObject *d = json_array_get_object_element (devices, i);
      g_string_append_printf (out, "%s%s=%s", out->len ? " " : "",
                              json_object_get_string_member (d, "id"),
                              json_object_get_string_member (d, "path"));
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static char *
machine_call (Fixture *f, const char *path, const char *member, char **message)
{
  return client_machine_call (f->client, path, member, message);
}

/* Cloud Hypervisor is given each device by its sysfs directory; one
 * machine holds a device from its start until it stops; such a machine
 * is neither put on standby nor snapshotted; a device rebound to a host
 * driver after the spec was accepted is refused at the next start. */
static void
test_chv (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  const char *type = data;
  g_autofree char *first = NULL, *second = NULL, *spec = NULL, *devices = NULL, *want = NULL;
  g_autofree char *err = NULL, *message = NULL, *state = NULL;

  spec = spec_of (type, "first", "\"pci_devices\":[\"0000:01:00.0\",\"0000:04:00.0\","
                  "\"0000:04:00.1\"],\"gpu\":{\"profile\":\"nvidia-35\","
                  "\"mediated_device_uuid\":\"" UUID "\"}");
  first = client_create_ok (f->client, spec);
  client_call_ok (f->client, first, "Start");
  devices = chv_devices (f, first);
  want = g_strdup_printf ("pci-0000-01-00.0=%s/sys/bus/pci/devices/0000:01:00.0 "
                          "pci-0000-04-00.0=%s/sys/bus/pci/devices/0000:04:00.0 "
                          "pci-0000-04-00.1=%s/sys/bus/pci/devices/0000:04:00.1 "
                          "gpu-" UUID "=%s/sys/bus/mdev/devices/" UUID,
                          df->root, df->root, df->root, df->root);
  g_assert_cmpstr (devices, ==, want);
  /* Behind its wall, the VMM has the groups' VFIO nodes, its own, and
   * the devices' sysfs directories. */
  {
    g_autofree char *id = client_get_string (f->client, first, "Id");
    GPid vmm = process_with (id);
    static const char *const nodes[] = { "vfio", "12", "15", "16" };
    g_autofree char *sysfs = g_strdup_printf ("/proc/%d/root%s/sys/bus/pci/devices/0000:01:00.0",
                                              (int) vmm, df->root);
    g_autofree char *other = g_strdup_printf ("/proc/%d/root/dev/vfio/13", (int) vmm);
    GStatBuf st;

    for (guint i = 0; i < G_N_ELEMENTS (nodes); i++)
      {
        g_autofree char *node = g_strdup_printf ("/proc/%d/root/dev/vfio/%s", (int) vmm, nodes[i]);

        g_assert_cmpint (g_stat (node, &st), ==, 0);
        g_assert_true (S_ISCHR (st.st_mode));
        g_assert_cmpuint (st.st_uid, !=, 0);
        g_assert_cmpuint (st.st_mode & 0077, ==, 0);
      }
    g_assert_cmpint (g_stat (other, &st), !=, 0);
    g_assert_true (g_file_test (sysfs, G_FILE_TEST_IS_DIR));
    /* It may lock the guest's memory, which VFIO pins, and 1 GiB more;
     * a daemon that cannot raise its limit that far (no CAP_SYS_RESOURCE
     * and a lower hard limit, as the daemon started here inherits from
     * this test) gives as much as it may, and says so. */
    {
      g_autofree char *limits_file = g_strdup_printf ("/proc/%d/limits", (int) vmm);
      g_autofree char *limits = NULL, *status = NULL, *want_limit = NULL;
      guint64 wanted = 1342177280, given = wanted;
      struct rlimit own;
      const char *cap_eff;

      g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
      cap_eff = strstr (status, "CapEff:");
      g_assert_nonnull (cap_eff);
      g_assert_cmpint (getrlimit (RLIMIT_MEMLOCK, &own), ==, 0);
      if (!(g_ascii_strtoull (cap_eff + strlen ("CapEff:"), NULL, 16) & (1ull << 24)) &&
          own.rlim_max != RLIM_INFINITY && own.rlim_max < wanted)
        {
          g_autofree char *log = mv_test_env_read_daemon_log (f->env);

          given = own.rlim_max;
          g_assert_nonnull (strstr (log, "that VFIO pins for its host devices: give microvmd a "
                                         "higher LimitMEMLOCK"));
        }
      want_limit = g_strdup_printf ("Max locked memory         %-21" G_GUINT64_FORMAT "%-21"
                                    G_GUINT64_FORMAT "bytes", given, given);

      g_assert_true (g_file_get_contents (limits_file, &limits, NULL, NULL));
      if (!strstr (limits, want_limit))
        g_error ("%s has no '%s':\n%s", limits_file, want_limit, limits);
    }
  }

  /* Its devices are its own while it runs. */
  g_free (spec);
  spec = spec_of (type, "second", "\"pci_devices\":[\"0000:01:00.0\"]");
  second = client_create_ok (f->client, spec);
  err = machine_call (f, second, "Start", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_CONFLICT);
  g_assert_nonnull (strstr (message, "pci_devices[0]: 0000:01:00.0 is passed through to "
                                     "machine first"));
  state = client_get_string (f->client, second, "State");
  g_assert_cmpstr (state, !=, "Running");

  /* Nothing of it can be frozen. */
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  err = machine_call (f, first, "Standby", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (message, "passed-through devices (pci_devices, gpu) cannot be "
                                     "frozen"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  {
    g_autoptr (sd_bus_message) r = client_call (f->client, first, MV_MACHINE_IFACE,
                                                "CreateSnapshot", &err, &message, "s", "snap");
    g_assert_null (r);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
    g_assert_nonnull (strstr (message, "cannot be snapshotted"));
  }

  /* Stopped, it gives the device up. */
  client_call_ok (f->client, first, "Stop");
  client_call_ok (f->client, second, "Start");
  client_call_ok (f->client, second, "Stop");

  /* Rebound to a host driver since: the next start says so. */
  rebind (df, "0000:01:00.0", "nvidia");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  err = machine_call (f, second, "Start", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (message, "0000:01:00.0 is bound to nvidia, not vfio-pci"));
}

/* The member @member of @path's spec, as JSON; NULL if it has none. */
static char *
spec_member (Fixture *f, const char *path, const char *member)
{
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "GetSpec",
                                              NULL, NULL, NULL);
  g_autoptr (JsonNode) node = NULL;
  JsonObject *spec;
  const char *json = NULL;

  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "s", &json), >, 0);
  node = json_from_string (json, NULL);
  g_assert_nonnull (node);
  spec = json_node_get_object (node);
  if (!json_object_has_member (spec, member))
    return NULL;
  return json_to_string (json_object_get_member (spec, member), FALSE);
}

/* Update of @path with its spec's @member set to @value (JSON); the
 * D-Bus error's name, or NULL. */
static char *
update_member (Fixture *f, const char *path, const char *member, const char *value,
               char **message)
{
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "GetSpec",
                                              NULL, NULL, NULL);
  g_autoptr (sd_bus_message) u = NULL;
  g_autoptr (JsonNode) node = NULL;
  g_autofree char *text = NULL;
  const char *json = NULL;
  char *err = NULL;

  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "s", &json), >, 0);
  node = json_from_string (json, NULL);
  json_object_set_member (json_node_get_object (node), member, json_from_string (value, NULL));
  text = json_to_string (node, FALSE);
  u = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &err, message, "s", text);
  return err;
}

static void
assert_running (Fixture *f, const char *path)
{
  g_autofree char *state = client_get_string (f->client, path, "State");

  g_assert_cmpstr (state, ==, "Running");
}

/* Whether @node is in the root of the VMM behind @path. */
static gboolean
vmm_has (Fixture *f, const char *path, const char *node)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *in_root = g_strdup_printf ("/proc/%d/root%s", (int) process_with (id), node);

  return g_file_test (in_root, G_FILE_TEST_EXISTS);
}

/* A machine "plain" with no device, and in @other_spec the spec of
 * "other", which passes 0000:01:00.0 through. */
static char *
create_plain (Fixture *f, const char *type, char **other_spec)
{
  g_autofree char *spec = spec_of (type, "plain", NULL);

  *other_spec = spec_of (type, "other", "\"pci_devices\":[\"0000:01:00.0\"]");
  return client_create_ok (f->client, spec);
}

/* Devices added to a running machine are plugged into its guest with
 * vm.add-device, each given to its VMM as at boot; a device another
 * running machine holds is refused; those the VMM refuses are taken out
 * of the spec again, and out of its sandbox; a device is not taken away
 * from a running guest. */
static void
test_chv_hot_add (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  g_autofree char *other_spec = NULL;
  g_autofree char *path = create_plain (f, data, &other_spec);
  g_autofree char *other = NULL, *err = NULL, *message = NULL, *devices = NULL, *want = NULL;
  g_autofree char *member = NULL, *sysfs = NULL;
  guint64 generation;

  client_call_ok (f->client, path, "Start");
  other = client_create_ok (f->client, other_spec);
  client_call_ok (f->client, other, "Start");

  /* Held by the other machine. */
  err = update_member (f, path, "pci_devices", "[\"0000:01:00.0\"]", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_CONFLICT);
  g_assert_nonnull (strstr (message, "pci_devices[0]: 0000:01:00.0 is passed through to "
                                     "machine other"));
  g_assert_null (spec_member (f, path, "pci_devices"));
  client_call_ok (f->client, other, "Stop");

  /* Group 15's node opens to nobody but root now: the VMM is given the
   * first device, and refuses the next two. */
  {
    g_autofree char *node = g_build_filename (df->root, "dev/vfio/15", NULL);
    g_assert_cmpint (g_unlink (node), ==, 0);
    g_assert_cmpint (mknod (node, S_IFCHR | 0600, makedev (1, 1)), ==, 0);
  }
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  generation = client_get_u64 (f->client, path, "DesiredGeneration");
  err = update_member (f, path, "pci_devices",
                       "[\"0000:01:00.0\",\"0000:04:00.0\",\"0000:04:00.1\"]", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
  g_test_message ("%s", message);
  g_assert_nonnull (strstr (message, "1 of the devices added were plugged in"));
  g_assert_nonnull (strstr (message, "Failed to open the VFIO group"));
  member = spec_member (f, path, "pci_devices");
  g_assert_cmpstr (member, ==, "[\"0000:01:00.0\"]");
  g_assert_cmpuint (client_get_u64 (f->client, path, "DesiredGeneration"), ==, generation + 2);
  devices = chv_devices (f, path);
  want = g_strdup_printf ("pci-0000-01-00.0=%s/sys/bus/pci/devices/0000:01:00.0", df->root);
  g_assert_cmpstr (devices, ==, want);
  sysfs = g_strdup_printf ("%s/sys/bus/pci/devices/0000:01:00.0", df->root);
  g_assert_true (vmm_has (f, path, "/dev/vfio/12"));
  g_assert_true (vmm_has (f, path, "/dev/vfio/vfio"));
  g_assert_true (vmm_has (f, path, sysfs));
  g_free (sysfs);
  sysfs = g_strdup_printf ("%s/sys/bus/pci/devices/0000:04:00.0", df->root);
  g_assert_false (vmm_has (f, path, "/dev/vfio/15"));
  g_assert_false (vmm_has (f, path, sysfs));

  /* The GPU, on its own. */
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  err = update_member (f, path, "gpu", "{\"profile\":\"nvidia-35\",\"mediated_device_uuid\":\""
                       UUID "\"}", &message);
  g_assert_null (err);
  g_free (devices);
  g_free (want);
  devices = chv_devices (f, path);
  want = g_strdup_printf ("pci-0000-01-00.0=%s/sys/bus/pci/devices/0000:01:00.0 "
                          "gpu-" UUID "=%s/sys/bus/mdev/devices/" UUID, df->root, df->root);
  g_assert_cmpstr (devices, ==, want);
  g_assert_true (vmm_has (f, path, "/dev/vfio/16"));
  assert_running (f, path);

  /* A device is not taken from a running guest. */
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  err = update_member (f, path, "pci_devices", "[]", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_free (member);
  member = spec_member (f, path, "pci_devices");
  g_assert_cmpstr (member, ==, "[\"0000:01:00.0\"]");

  /* It boots with them next time. */
  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  g_free (devices);
  devices = chv_devices (f, path);
  g_assert_cmpstr (devices, ==, want);
}

/* A daemon killed once a hot-add is recorded, before the VMM is asked:
 * after a restart the spec has the device and the machine holds it, the
 * phase is cleared, the guest runs on without it and has it from its
 * next start. */
static void
test_chv_hot_add_killed (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  g_autofree char *other_spec = NULL;
  g_autofree char *path = create_plain (f, data, &other_spec);
  g_autofree char *other = client_create_ok (f->client, other_spec);
  g_autofree char *err = NULL, *message = NULL, *member = NULL, *phase = NULL;
  g_autofree char *devices = NULL, *want = NULL;

  client_call_ok (f->client, path, "Start");
  g_setenv ("MICROVMD_FAULT_POINT", "add-devices:recorded", TRUE);
  restart (df, SIGTERM);
  g_unsetenv ("MICROVMD_FAULT_POINT");
  err = update_member (f, path, "pci_devices", "[\"0000:01:00.0\"]", &message);
  g_assert_nonnull (err);
  mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
  restart (df, SIGKILL);

  member = spec_member (f, path, "pci_devices");
  g_assert_cmpstr (member, ==, "[\"0000:01:00.0\"]");
  assert_running (f, path);
  phase = client_get_string (f->client, path, "Phase");
  g_assert_cmpstr (phase, ==, "");
  devices = chv_devices (f, path);
  g_assert_cmpstr (devices, ==, "");
  /* Held: no other machine starts with it. */
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  err = client_machine_call (f->client, other, "Start", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_CONFLICT);
  g_clear_pointer (&devices, g_free);
  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  devices = chv_devices (f, path);
  want = g_strdup_printf ("pci-0000-01-00.0=%s/sys/bus/pci/devices/0000:01:00.0", df->root);
  g_assert_cmpstr (devices, ==, want);
}

/* QEMU is given each device as vfio-pci by its sysfs directory, on q35;
 * no device here is real, and the QEMU that cannot open it quotes the
 * option it was given. */
static void
test_qemu (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  g_autofree char *spec = spec_of ("qemu", "vfio", "\"pci_devices\":[\"0000:01:00.0\"]");
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *err = NULL, *message = NULL, *log = NULL, *want = NULL;
  g_autofree char *vmm_log = fixture_runtime_file (f, path, "vmm.log");

  err = machine_call (f, path, "Start", &message);
  g_assert_nonnull (err);
  g_test_message ("%s", message);
  log = mv_test_env_read_daemon_log (f->env);
  want = g_strdup_printf ("-device vfio-pci,sysfsdev=%s/sys/bus/pci/devices/0000:01:00.0,"
                          "id=pci-0000-01-00.0,bus=hostport0", df->root);
  if (!strstr (message, want) && !strstr (log, want))
    g_error ("neither the answer '%s' nor the daemon's log quotes %s", message, want);
}

/* On q35, QEMU has a root port for each slot a device may take, and a
 * device added to a running guest goes to its slot's with device_add; no
 * device here is real, and QEMU's refusal comes back, the spec and the
 * sandbox as they were. A guest on microvm has no PCI to plug into. */
static void
test_qemu_hot_add (DevFixture *df, gconstpointer data)
{
  Fixture *f = &df->f;
  g_autofree char *spec = spec_of ("qemu", "roomy", "\"max_vcpus\":2");
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *small_spec = spec_of ("qemu", "small", NULL);
  g_autofree char *small = client_create_ok (f->client, small_spec);
  g_autofree char *err = NULL, *message = NULL, *cmdline = NULL, *file = NULL, *id = NULL;
  g_autofree char *sysfs = g_strdup_printf ("%s/sys/bus/pci/devices/0000:01:00.0", df->root);
  gsize len = 0;

  client_call_ok (f->client, path, "Start");
  id = client_get_string (f->client, path, "Id");
  file = g_strdup_printf ("/proc/%d/cmdline", (int) process_with (id));
  g_assert_true (g_file_get_contents (file, &cmdline, &len, NULL));
  for (gsize i = 0; i + 1 < len; i++)
    if (cmdline[i] == '\0')
      cmdline[i] = ' ';
  for (guint slot = 0; slot < 9; slot++)
    {
      g_autofree char *port = g_strdup_printf (" pcie-root-port,id=hostport%u,chassis=%u ", slot,
                                               slot + 1);
      if (!strstr (cmdline, port))
        g_error ("QEMU's command line has no '%s': %s", port, cmdline);
    }
  g_assert_null (strstr (cmdline, " pcie-root-port,id=hostport9,"));

  err = update_member (f, path, "pci_devices", "[\"0000:01:00.0\"]", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
  g_test_message ("%s", message);
  g_assert_nonnull (strstr (message, "0 of the devices added were plugged in"));
  g_assert_nonnull (strstr (message, "QMP device_add"));
  g_assert_null (spec_member (f, path, "pci_devices"));
  g_assert_false (vmm_has (f, path, "/dev/vfio/12"));
  g_assert_false (vmm_has (f, path, sysfs));
  assert_running (f, path);

  client_call_ok (f->client, small, "Start");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  err = update_member (f, small, "pci_devices", "[\"0000:01:00.0\"]", &message);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (message, "microvm machine, which has no PCI"));
  g_assert_null (spec_member (f, small, "pci_devices"));
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  guest_kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  guest_initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);
#define ADD(name, type, fn) \
  g_test_add ("/devices/" type "/" name, DevFixture, type, setup, fn, teardown)
  ADD ("refusals", "cloud-hypervisor", test_refusals);
  ADD ("refusals", "firecracker", test_refusals);
  ADD ("refusals", "qemu", test_refusals);
  ADD ("held-and-on-the-wire", "cloud-hypervisor", test_chv);
  ADD ("command-line", "qemu", test_qemu);
  ADD ("hot-add", "cloud-hypervisor", test_chv_hot_add);
  ADD ("hot-add-killed", "cloud-hypervisor", test_chv_hot_add_killed);
  ADD ("hot-add", "qemu", test_qemu_hot_add);
#undef ADD
  return g_test_run ();
}
