/* A test double for the firecracker binary.
 *
 * Speaks Firecracker's API (swagger firecracker.yaml, around v1.16) on the
 * Unix socket given by --api-sock, with its status codes, its
 * {"fault_message": ...} errors, its strict JSON, its before/after-boot
 * rules and its snapshot, vsock and MMDS behaviour. The guest is
 * simulated (fake-guest.c). Test code only: never installed.
 *
 * The version it reports is $MICROVMD_FAKE_VERSION (default 1.16.0), so
 * that tests can stand up several "versions" with wrapper scripts. A
 * test makes /snapshot/create fail and GET / hang through fake-control.h. */
#include "fake-control.h"
#include "fake-guest.h"
#include "fake-http.h"
#include "fake-json.h"
#include "fake-vmm.h"
#include "fake-vsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define DEFAULT_VERSION  "1.16.0"
#define SNAPSHOT_MAGIC   "FCSNAP-fake"
#define SNAPSHOT_FORMAT  "8.0.0"
#define MEM_HEADER       "FCMEM-fake\n"
#define MAX_VCPUS        32
/* Firecracker's exit code for bad arguments. */
#define USAGE_ERROR      153

#define NOT_AFTER_BOOT  "The requested operation is not supported after starting the microVM."
#define NOT_BEFORE_BOOT "The requested operation is not supported before starting the microVM."
#define DESERIALIZE     "An error occurred when deserializing the json body of a request: "

/* ---- the API's types, as Firecracker's serde derives have them ---- */

static const FakeField token_bucket_fields[] = {
  { "size", &fake_u64, TRUE }, { "one_time_burst", &fake_opt_u64 },
  { "refill_time", &fake_u64, TRUE }, { NULL } };
static const FakeType opt_token_bucket = FAKE_OPT_STRUCT_OF ("TokenBucket", token_bucket_fields);
static const FakeField rate_limiter_fields[] = {
  { "bandwidth", &opt_token_bucket }, { "ops", &opt_token_bucket }, { NULL } };
static const FakeType opt_rate_limiter = FAKE_OPT_STRUCT_OF ("RateLimiterConfig", rate_limiter_fields);

static const char *const huge_pages[] = { "None", "2M", NULL };
static const FakeType huge_pages_type = FAKE_ENUM_OF ("HugePageConfig", huge_pages);
static const FakeType opt_huge_pages_type = FAKE_OPT_ENUM_OF ("HugePageConfig", huge_pages);
static const FakeField machine_fields[] = {
  { "vcpu_count", &fake_u8, TRUE }, { "mem_size_mib", &fake_usize, TRUE },
  { "smt", &fake_bool, FALSE, "false" }, { "track_dirty_pages", &fake_bool, FALSE, "false" },
  { "huge_pages", &huge_pages_type, FALSE, "\"None\"" }, { "cpu_template", &fake_opt_str },
  { NULL } };
static const FakeType machine_config = FAKE_STRUCT_OF ("MachineConfig", machine_fields);
static const FakeField machine_patch_fields[] = {
  { "vcpu_count", &fake_opt_u8 }, { "mem_size_mib", &fake_opt_usize },
  { "smt", &fake_opt_bool }, { "track_dirty_pages", &fake_opt_bool },
  { "huge_pages", &opt_huge_pages_type }, { "cpu_template", &fake_opt_str }, { NULL } };
static const FakeType machine_patch = FAKE_STRUCT_OF ("MachineConfigUpdate", machine_patch_fields);

static const FakeField boot_source_fields[] = {
  { "kernel_image_path", &fake_str, TRUE }, { "initrd_path", &fake_opt_str },
  { "boot_args", &fake_opt_str }, { NULL } };
static const FakeType boot_source = FAKE_STRUCT_OF ("BootSourceConfig", boot_source_fields);

static const char *const cache_types[] = { "Unsafe", "Writeback", NULL };
static const FakeType cache_type = FAKE_ENUM_OF ("CacheType", cache_types);
static const char *const engines[] = { "Async", "Sync", NULL };
static const FakeType opt_engine = FAKE_OPT_ENUM_OF ("FileEngineType", engines);
static const FakeField drive_fields[] = {
  { "drive_id", &fake_str, TRUE }, { "partuuid", &fake_opt_str },
  { "is_root_device", &fake_bool, TRUE }, { "cache_type", &cache_type, FALSE, "\"Unsafe\"" },
  { "is_read_only", &fake_opt_bool }, { "path_on_host", &fake_opt_str },
  { "rate_limiter", &opt_rate_limiter }, { "io_engine", &opt_engine },
  { "socket", &fake_opt_str }, { NULL } };
static const FakeType drive = FAKE_STRUCT_OF ("BlockDeviceConfig", drive_fields);
static const FakeField drive_patch_fields[] = {
  { "drive_id", &fake_str, TRUE }, { "path_on_host", &fake_opt_str },
  { "rate_limiter", &opt_rate_limiter }, { NULL } };
static const FakeType drive_patch = FAKE_STRUCT_OF ("BlockDeviceUpdateConfig", drive_patch_fields);

static const FakeField net_fields[] = {
  { "iface_id", &fake_str, TRUE }, { "host_dev_name", &fake_str, TRUE },
  { "guest_mac", &fake_opt_str }, { "rx_rate_limiter", &opt_rate_limiter },
  { "tx_rate_limiter", &opt_rate_limiter }, { "mtu", &fake_opt_u16 }, { NULL } };
static const FakeType net = FAKE_STRUCT_OF ("NetworkInterfaceConfig", net_fields);
/* Before 1.16 an interface has no MTU, and the member is unknown. */
static const FakeField net_fields_before_mtu[] = {
  { "iface_id", &fake_str, TRUE }, { "host_dev_name", &fake_str, TRUE },
  { "guest_mac", &fake_opt_str }, { "rx_rate_limiter", &opt_rate_limiter },
  { "tx_rate_limiter", &opt_rate_limiter }, { NULL } };
static const FakeType net_before_mtu = FAKE_STRUCT_OF ("NetworkInterfaceConfig",
                                                       net_fields_before_mtu);

static const FakeField vsock_fields[] = {
  { "vsock_id", &fake_opt_str }, { "guest_cid", &fake_u32, TRUE },
  { "uds_path", &fake_str, TRUE }, { NULL } };
static const FakeType vsock_type = FAKE_STRUCT_OF ("VsockDeviceConfig", vsock_fields);

static const FakeField serial_fields[] = { { "serial_out_path", &fake_opt_str }, { NULL } };
static const FakeType serial = FAKE_STRUCT_OF ("SerialConfig", serial_fields);

static const char *const mmds_versions[] = { "V1", "V2", NULL };
static const FakeType mmds_version = FAKE_ENUM_OF ("MmdsVersion", mmds_versions);
static const FakeType str_list = FAKE_LIST_OF (&fake_str);
static const FakeField mmds_config_fields[] = {
  { "version", &mmds_version, FALSE, "\"V1\"" }, { "network_interfaces", &str_list, TRUE },
  { "ipv4_address", &fake_opt_str }, { "imds_compat", &fake_bool, FALSE, "false" }, { NULL } };
static const FakeType mmds_config = FAKE_STRUCT_OF ("MmdsConfig", mmds_config_fields);

static const char *const action_types[] = { "FlushMetrics", "InstanceStart", "SendCtrlAltDel", NULL };
static const FakeType action_type = FAKE_ENUM_OF ("ActionType", action_types);
static const FakeField action_fields[] = { { "action_type", &action_type, TRUE }, { NULL } };
static const FakeType action = FAKE_STRUCT_OF ("ActionBody", action_fields);

static const char *const vm_states[] = { "Paused", "Resumed", NULL };
static const FakeType vm_state_type = FAKE_ENUM_OF ("VmState", vm_states);
static const FakeField vm_state_fields[] = { { "state", &vm_state_type, TRUE }, { NULL } };
static const FakeType vm_state = FAKE_STRUCT_OF ("Vm", vm_state_fields);

static const char *const snapshot_types[] = { "Full", "Diff", NULL };
static const FakeType snapshot_type = FAKE_ENUM_OF ("SnapshotType", snapshot_types);
static const FakeField snapshot_create_fields[] = {
  { "snapshot_type", &snapshot_type, FALSE, "\"Full\"" }, { "snapshot_path", &fake_str, TRUE },
  { "mem_file_path", &fake_str, TRUE }, { NULL } };
static const FakeType snapshot_create = FAKE_STRUCT_OF ("CreateSnapshotParams", snapshot_create_fields);

static const char *const backend_types[] = { "File", "Uffd", NULL };
static const FakeType backend_type = FAKE_ENUM_OF ("MemBackendType", backend_types);
static const FakeField mem_backend_fields[] = {
  { "backend_type", &backend_type, TRUE }, { "backend_path", &fake_str, TRUE }, { NULL } };
static const FakeType opt_mem_backend = FAKE_OPT_STRUCT_OF ("MemBackendConfig", mem_backend_fields);
static const FakeField net_override_fields[] = {
  { "iface_id", &fake_str, TRUE }, { "host_dev_name", &fake_str, TRUE }, { NULL } };
static const FakeType net_override = FAKE_STRUCT_OF ("NetworkOverride", net_override_fields);
static const FakeType net_overrides = FAKE_LIST_OF (&net_override);
static const FakeField vsock_override_fields[] = { { "uds_path", &fake_str, TRUE }, { NULL } };
static const FakeType opt_vsock_override = FAKE_OPT_STRUCT_OF ("VsockOverride", vsock_override_fields);
static const FakeField snapshot_load_fields[] = {
  { "snapshot_path", &fake_str, TRUE }, { "mem_file_path", &fake_opt_str },
  { "mem_backend", &opt_mem_backend },
  { "enable_diff_snapshots", &fake_bool, FALSE, "false" },
  { "track_dirty_pages", &fake_bool, FALSE, "false" }, { "resume_vm", &fake_bool, FALSE, "false" },
  { "network_overrides", &net_overrides, FALSE, "[]" },
  { "vsock_override", &opt_vsock_override }, { NULL } };
static const FakeType snapshot_load = FAKE_STRUCT_OF ("LoadSnapshotConfig", snapshot_load_fields);

static const FakeField hotplug_fields[] = {
  { "total_size_mib", &fake_usize, TRUE }, { "slot_size_mib", &fake_usize, FALSE, "128" },
  { "block_size_mib", &fake_usize, FALSE, "2" }, { NULL } };
static const FakeType hotplug_config = FAKE_STRUCT_OF ("MemoryHotplugConfig", hotplug_fields);
static const FakeField hotplug_patch_fields[] = {
  { "requested_size_mib", &fake_usize, TRUE }, { NULL } };
static const FakeType hotplug_patch = FAKE_STRUCT_OF ("MemoryHotplugSizeUpdate", hotplug_patch_fields);

static const char *const levels[] = { "Off", "Trace", "Debug", "Info", "Warn", "Warning", "Error", NULL };
static const FakeType opt_level = { .kind = FAKE_ENUM, .nullable = TRUE, .name = "LevelFilter",
                                    .variants = levels, .any_case = TRUE };
static const FakeField logger_fields[] = {
  { "log_path", &fake_opt_str }, { "level", &opt_level }, { "show_level", &fake_opt_bool },
  { "show_log_origin", &fake_opt_bool }, { "module", &fake_opt_str }, { NULL } };
static const FakeType logger = FAKE_STRUCT_OF ("LoggerConfig", logger_fields);
static const FakeField metrics_fields[] = { { "metrics_path", &fake_str, TRUE }, { NULL } };
static const FakeType metrics = FAKE_STRUCT_OF ("MetricsConfig", metrics_fields);

/* ---- the VMM ---- */

typedef struct {
  const char     *version;
  char           *api_sock;
  char           *id;
  char           *level;
  char           *log_path;
  gint64          payload_limit;
  gint64          mmds_size_limit;
  FakeLog         log;
  FakeHttpServer *http;
  FakeControl     control;

  const char     *state;          /* "Not started", "Running", "Paused" */
  gboolean        boot_path;      /* boot-specific resources configured */
  JsonObject     *machine;
  JsonObject     *boot_source;    /* NULL until given */
  JsonArray      *drives;
  JsonArray      *nets;
  JsonObject     *vsock_cfg;
  FakeVsock      *vsock;
  char           *serial_path;
  JsonObject     *mmds_config;
  JsonNode       *mmds;           /* NULL: not initialised */
  JsonObject     *hotplug;
  FakeGuest      *guest;
} Firecracker;

typedef void (*Handler) (Firecracker *fc, const FakeRequest *request, FakeResponse *response);

static void
fault (FakeResponse *response, guint status, const char *format, ...) G_GNUC_PRINTF (3, 4);

static void
fault (FakeResponse *response, guint status, const char *format, ...)
{
  g_autoptr (JsonObject) object = json_object_new ();
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  json_object_set_string_member (object, "fault_message", message);
  json_node_set_object (node, object);
  fake_response_json (response, status, node);
}

static void
reply_object (FakeResponse *response, JsonObject *object)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, object);
  fake_response_json (response, 200, node);
}

/* The request's body checked against @type; NULL with the fault set. */
static JsonNode *
body (const FakeRequest *request, const FakeType *type, FakeResponse *response)
{
  g_autoptr (GError) error = NULL;
  gsize len;
  const char *data;
  JsonNode *node;

  if (!request->body)
    {
      fault (response, 400, "Empty request.");
      return NULL;
    }
  data = g_bytes_get_data (request->body, &len);
  node = fake_json_parse (data, len, type, &error);
  if (!node)
    fault (response, 400, DESERIALIZE "%s.", error->message);
  return node;
}

static JsonObject *
body_object (const FakeRequest *request, const FakeType *type, FakeResponse *response)
{
  g_autoptr (JsonNode) node = body (request, type, response);

  return node ? json_object_ref (json_node_get_object (node)) : NULL;
}

static gboolean
pre_boot (Firecracker *fc, FakeResponse *response)
{
  if (strcmp (fc->state, "Not started") == 0)
    return TRUE;
  fault (response, 400, NOT_AFTER_BOOT);
  return FALSE;
}

static gboolean
post_boot (Firecracker *fc, FakeResponse *response)
{
  if (strcmp (fc->state, "Not started") != 0)
    return TRUE;
  fault (response, 400, NOT_BEFORE_BOOT);
  return FALSE;
}

/* @array without the element whose @key is @id, then @item at the end. */
static JsonArray *
replace_by_id (JsonArray *array, const char *key, const char *id, JsonObject *item)
{
  JsonArray *out = json_array_new ();

  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonObject *o = json_array_get_object_element (array, i);
      if (g_strcmp0 (fake_json_str (o, key), id) != 0)
        json_array_add_object_element (out, json_object_ref (o));
    }
  json_array_add_object_element (out, json_object_ref (item));
  json_array_unref (array);
  return out;
}

static void
instance_info (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) info = json_object_new ();

  json_object_set_string_member (info, "app_name", "Firecracker");
  json_object_set_string_member (info, "id", fc->id);
  json_object_set_string_member (info, "state", fc->state);
  json_object_set_string_member (info, "vmm_version", fc->version);
  reply_object (response, info);
  /* GET / is how microvmd asks whether the VMM is still there. */
  fake_control_probe (&fc->control, response);
}

static void
get_version (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) version = json_object_new ();

  json_object_set_string_member (version, "firecracker_version", fc->version);
  reply_object (response, version);
}

static void
get_machine (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  reply_object (response, fc->machine);
}

static gboolean
check_vcpus (JsonObject *machine, FakeResponse *response)
{
  gint64 count = fake_json_int (machine, "vcpu_count");

  if (count == 0 || count > MAX_VCPUS ||
      (fake_json_bool (machine, "smt") && count > 1 && count % 2))
    {
      fault (response, 400, "Machine config error: The vCPU number is invalid! The vCPU number "
             "can only be 1 or an even number when SMT is enabled.");
      return FALSE;
    }
  return TRUE;
}

static void
put_machine (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &machine_config, response);

  if (!cfg || !pre_boot (fc, response) || !check_vcpus (cfg, response))
    return;
  if (fake_json_int (cfg, "mem_size_mib") == 0)
    {
      fault (response, 400, "Machine config error: The memory size (MiB) is invalid.");
      return;
    }
  json_object_remove_member (cfg, "cpu_template");
  g_clear_pointer (&fc->machine, json_object_unref);
  fc->machine = g_steal_pointer (&cfg);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static void
patch_machine (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &machine_patch, response);
  g_autoptr (JsonObject) updated = NULL;
  JsonObjectIter iter;
  const char *name;
  JsonNode *value;

  if (!cfg || !pre_boot (fc, response))
    return;
  updated = fake_json_object_copy (fc->machine);
  json_object_iter_init (&iter, cfg);
  while (json_object_iter_next (&iter, &name, &value))
    if (!JSON_NODE_HOLDS_NULL (value) && strcmp (name, "cpu_template") != 0)
      json_object_set_member (updated, name, json_node_copy (value));
  if (!check_vcpus (updated, response))
    return;
  g_clear_pointer (&fc->machine, json_object_unref);
  fc->machine = g_steal_pointer (&updated);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static void
put_boot_source (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &boot_source, response);
  const char *fields[] = { "kernel_image_path", "initrd_path" };

  if (!cfg || !pre_boot (fc, response))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      const char *path = fake_json_str (cfg, fields[i]);
      if (path && access (path, R_OK) != 0)
        {
          g_autofree char *text = fake_os_error_text (errno);
          fault (response, 400, "Boot source error: The %s file cannot be opened: %s",
                 i == 0 ? "kernel" : "initrd", text);
          return;
        }
    }
  g_clear_pointer (&fc->boot_source, json_object_unref);
  fc->boot_source = g_steal_pointer (&cfg);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static gboolean
valid_id (const char *id)
{
  if (!*id)
    return FALSE;
  for (; *id; id++)
    if (!g_ascii_isalnum (*id) && *id != '_')
      return FALSE;
  return TRUE;
}

static gboolean
id_matches (JsonObject *cfg, const char *key, const char *id, FakeResponse *response)
{
  if (g_strcmp0 (fake_json_str (cfg, key), id) == 0)
    return TRUE;
  fault (response, 400, "The id from the path does not match the id from the body!");
  return FALSE;
}

static void
put_drive (Firecracker *fc, const FakeRequest *request, FakeResponse *response, const char *id)
{
  g_autoptr (JsonObject) cfg = body_object (request, &drive, response);
  const char *path;
  int fd;

  if (!cfg || !pre_boot (fc, response) || !id_matches (cfg, "drive_id", id, response))
    return;
  path = fake_json_str (cfg, "path_on_host");
  fd = open (path ? path : "", (fake_json_bool (cfg, "is_read_only") ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd < 0)
    {
      g_autofree char *text = fake_os_error_text (errno);
      fault (response, 400, "Drive config error: Unable to create the virtio block device: Virtio "
             "backend error: Error manipulating the backing file: %s %s", text, path ? path : "");
      return;
    }
  close (fd);
  if (fake_json_bool (cfg, "is_root_device"))
    for (guint i = 0; i < json_array_get_length (fc->drives); i++)
      {
        JsonObject *d = json_array_get_object_element (fc->drives, i);
        if (fake_json_bool (d, "is_root_device") && g_strcmp0 (fake_json_str (d, "drive_id"), id))
          {
            fault (response, 400, "Drive config error: A root block device already exists!");
            return;
          }
      }
  fc->drives = replace_by_id (fc->drives, "drive_id", id, cfg);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static void
patch_drive (Firecracker *fc, const FakeRequest *request, FakeResponse *response, const char *id)
{
  g_autoptr (JsonObject) cfg = body_object (request, &drive_patch, response);

  if (!cfg || !post_boot (fc, response) || !id_matches (cfg, "drive_id", id, response))
    return;
  for (guint i = 0; i < json_array_get_length (fc->drives); i++)
    {
      JsonObject *d = json_array_get_object_element (fc->drives, i);
      const char *path = fake_json_str (cfg, "path_on_host");

      if (g_strcmp0 (fake_json_str (d, "drive_id"), id) != 0)
        continue;
      if (path && *path)
        json_object_set_string_member (d, "path_on_host", path);
      if (!fake_json_is_null (cfg, "rate_limiter"))
        json_object_set_member (d, "rate_limiter",
                                json_node_copy (json_object_get_member (cfg, "rate_limiter")));
      fake_response_status (response, 204);
      return;
    }
  fault (response, 400, "Drive config error: Invalid block device ID: %s", id);
}

static gboolean
takes_mtu (const Firecracker *fc)
{
  guint major = 0, minor = 0;

  return sscanf (fc->version, "%u.%u", &major, &minor) == 2 &&
         (major > 1 || (major == 1 && minor >= 16));
}

static void
put_net (Firecracker *fc, const FakeRequest *request, FakeResponse *response, const char *id)
{
  g_autoptr (JsonObject) cfg = body_object (request, takes_mtu (fc) ? &net : &net_before_mtu,
                                            response);
  const char *tap, *mac;

  if (!cfg || !pre_boot (fc, response) || !id_matches (cfg, "iface_id", id, response))
    return;
  tap = fake_json_str (cfg, "host_dev_name");
  for (guint i = 0; i < json_array_get_length (fc->nets); i++)
    {
      JsonObject *n = json_array_get_object_element (fc->nets, i);
      if (g_strcmp0 (fake_json_str (n, "host_dev_name"), tap) == 0 &&
          g_strcmp0 (fake_json_str (n, "iface_id"), id) != 0)
        {
          fault (response, 400, "Network config error: The host device name %s is already in use.",
                 tap);
          return;
        }
    }
  mac = fake_json_str (cfg, "guest_mac");
  if (mac)
    {
      guint colons = 0;
      for (const char *p = mac; *p; p++)
        colons += *p == ':';
      if (strlen (mac) != 17 || colons != 5)
        {
          fault (response, 400, DESERIALIZE "invalid value: string \"%s\", expected MacAddr.", mac);
          return;
        }
    }
  fc->nets = replace_by_id (fc->nets, "iface_id", id, cfg);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static void
patch_net (Firecracker *fc, const FakeRequest *request, FakeResponse *response, const char *id)
{
  if (post_boot (fc, response))
    fault (response, 400, "Network config error: Invalid network interface ID - not found.");
}

static void
put_vsock (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &vsock_type, response);
  FakeVsock *vsock;
  int err;

  if (!cfg || !pre_boot (fc, response))
    return;
  if (fake_json_int (cfg, "guest_cid") < 3)
    {
      fault (response, 400, "Vsock config error: Cannot create backend for vsock device: Invalid "
             "guest CID %" G_GINT64_FORMAT, fake_json_int (cfg, "guest_cid"));
      return;
    }
  /* The socket is bound now: an existing path fails. */
  vsock = fake_vsock_new (fake_json_str (cfg, "uds_path"), fake_json_int (cfg, "guest_cid"),
                          &fc->log);
  err = fake_vsock_bind (vsock);
  if (err)
    {
      g_autofree char *text = fake_os_error_text (err);
      fake_vsock_free (vsock);
      fault (response, 400, "Vsock config error: Cannot create backend for vsock device: Error "
             "binding to the host-side Unix socket: %s", text);
      return;
    }
  fake_vsock_free (fc->vsock);
  fc->vsock = vsock;
  g_clear_pointer (&fc->vsock_cfg, json_object_unref);
  fc->vsock_cfg = json_object_new ();
  json_object_set_int_member (fc->vsock_cfg, "guest_cid", fake_json_int (cfg, "guest_cid"));
  json_object_set_string_member (fc->vsock_cfg, "uds_path", fake_json_str (cfg, "uds_path"));
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static void
put_serial (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &serial, response);

  if (!cfg || !pre_boot (fc, response))
    return;
  /* Not boot-specific: a snapshot is loaded after it. */
  g_free (fc->serial_path);
  fc->serial_path = g_strdup (fake_json_str (cfg, "serial_out_path"));
  fake_response_status (response, 204);
}

static void
put_mmds_config (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &mmds_config, response);
  JsonArray *ids;

  if (!cfg || !pre_boot (fc, response))
    return;
  ids = json_object_get_array_member (cfg, "network_interfaces");
  for (guint i = 0; i < json_array_get_length (ids); i++)
    {
      const char *id = json_array_get_string_element (ids, i);
      gboolean found = FALSE;

      for (guint j = 0; j < json_array_get_length (fc->nets); j++)
        found |= g_strcmp0 (fake_json_str (json_array_get_object_element (fc->nets, j),
                                           "iface_id"), id) == 0;
      if (!found)
        {
          fault (response, 400, "MMDS config error: The list of network interface IDs provided "
                 "contains at least one ID that does not correspond to any existing network "
                 "interface.");
          return;
        }
    }
  if (json_array_get_length (ids) == 0)
    {
      fault (response, 400, "MMDS config error: The list of network interface IDs that allow "
             "forwarding MMDS requests is empty.");
      return;
    }
  if (fake_json_is_null (cfg, "ipv4_address"))
    json_object_set_string_member (cfg, "ipv4_address", "169.254.169.254");
  g_clear_pointer (&fc->mmds_config, json_object_unref);
  fc->mmds_config = g_steal_pointer (&cfg);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static gboolean
mmds_fits (Firecracker *fc, JsonNode *value, FakeResponse *response)
{
  g_autofree char *text = fake_json_text (value);

  if ((gint64) strlen (text) <= fc->mmds_size_limit)
    return TRUE;
  fault (response, 413, "MMDS limit exceeded error: The MMDS patch request doesn't fit.");
  return FALSE;
}

static void
put_mmds (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonNode) value = body (request, NULL, response);

  if (!value || !mmds_fits (fc, value, response))
    return;
  g_clear_pointer (&fc->mmds, json_node_unref);
  fc->mmds = g_steal_pointer (&value);
  fake_response_status (response, 204);
}

static void
patch_mmds (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonNode) patch = body (request, NULL, response);
  g_autoptr (JsonNode) merged = NULL;

  if (!patch)
    return;
  if (!fc->mmds)
    {
      fault (response, 400, "MMDS error: The MMDS data store is not initialized.");
      return;
    }
  merged = fake_json_merge_patch (json_node_copy (fc->mmds), patch);
  if (!mmds_fits (fc, merged, response))
    return;
  g_clear_pointer (&fc->mmds, json_node_unref);
  fc->mmds = g_steal_pointer (&merged);
  fake_response_status (response, 204);
}

static void
get_mmds (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonNode) empty = json_from_string ("{}", NULL);

  fake_response_json (response, 200, fc->mmds ? fc->mmds : empty);
}

static void
put_logger (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &logger, response);

  if (!cfg)
    return;
  if (fake_json_str (cfg, "log_path") && *fake_json_str (cfg, "log_path"))
    fake_log_set_path (&fc->log, fake_json_str (cfg, "log_path"));
  if (fake_json_str (cfg, "level"))
    fake_log_set_level (&fc->log, fake_json_str (cfg, "level"));
  fake_response_status (response, 204);
}

static void
put_metrics (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &metrics, response);

  if (cfg)
    fake_response_status (response, 204);
}

static void
put_hotplug (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &hotplug_config, response);
  gint64 total, slot, block;

  if (!cfg || !pre_boot (fc, response))
    return;
  total = fake_json_int (cfg, "total_size_mib");
  slot = fake_json_int (cfg, "slot_size_mib");
  block = fake_json_int (cfg, "block_size_mib");
  if (block < 2 || (block & (block - 1)) || slot < 128 || slot % block || total % slot)
    {
      fault (response, 400, "Memory hotplug config error: The memory hotplug configuration is "
             "invalid.");
      return;
    }
  json_object_set_int_member (cfg, "plugged_size_mib", 0);
  json_object_set_int_member (cfg, "requested_size_mib", 0);
  g_clear_pointer (&fc->hotplug, json_object_unref);
  fc->hotplug = g_steal_pointer (&cfg);
  fc->boot_path = TRUE;
  fake_response_status (response, 204);
}

static void
patch_hotplug (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &hotplug_patch, response);
  gint64 size;

  if (!cfg || !post_boot (fc, response))
    return;
  if (!fc->hotplug)
    {
      fault (response, 400, "Memory hotplug update error: The memory hotplug device was not "
             "configured.");
      return;
    }
  size = fake_json_int (cfg, "requested_size_mib");
  if (size > fake_json_int (fc->hotplug, "total_size_mib") ||
      size % fake_json_int (fc->hotplug, "block_size_mib"))
    {
      fault (response, 400, "Memory hotplug update error: Invalid requested size %" G_GINT64_FORMAT
             " MiB: it must be a multiple of the block size and at most the total size.", size);
      return;
    }
  json_object_set_int_member (fc->hotplug, "requested_size_mib", size);
  /* The guest plugs or unplugs the blocks while it runs. */
  if (fc->guest && fake_guest_is_up (fc->guest))
    json_object_set_int_member (fc->hotplug, "plugged_size_mib", size);
  fake_response_status (response, 204);
}

static void
get_hotplug (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  if (!fc->hotplug)
    {
      fault (response, 400, "Memory hotplug error: The memory hotplug device was not configured.");
      return;
    }
  reply_object (response, fc->hotplug);
}

static void
set_object_or_null (JsonObject *out, const char *name, JsonObject *value)
{
  if (value)
    json_object_set_object_member (out, name, json_object_ref (value));
  else
    json_object_set_null_member (out, name);
}

static void
get_vm_config (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) config = json_object_new ();

  json_object_set_null_member (config, "balloon");
  json_object_set_array_member (config, "drives", json_array_ref (fc->drives));
  if (fc->boot_source)
    json_object_set_object_member (config, "boot-source", json_object_ref (fc->boot_source));
  else
    json_object_set_object_member (config, "boot-source", json_object_new ());
  json_object_set_null_member (config, "cpu-config");
  json_object_set_null_member (config, "logger");
  json_object_set_object_member (config, "machine-config", json_object_ref (fc->machine));
  json_object_set_null_member (config, "metrics");
  set_object_or_null (config, "mmds-config", fc->mmds_config);
  json_object_set_array_member (config, "network-interfaces", json_array_ref (fc->nets));
  set_object_or_null (config, "vsock", fc->vsock_cfg);
  json_object_set_null_member (config, "entropy");
  set_object_or_null (config, "memory-hotplug", fc->hotplug);
  reply_object (response, config);
}

/* ---- the guest ---- */

static void
on_power_off (gpointer data, const char *why)
{
  Firecracker *fc = data;

  /* No ACPI: the guest halts, the process stays. */
  fake_log_info (&fc->log, "Guest halted (%s); the VMM stays", why);
}

static void
on_reset (gpointer data, const char *why)
{
  Firecracker *fc = data;

  /* A guest reset ends Firecracker, successfully. */
  fake_log_info (&fc->log, "Vmm is stopping.");
  fake_vmm_exit (0);
}

static int
open_console (Firecracker *fc)
{
  const char *args = fc->boot_source ? fake_json_str (fc->boot_source, "boot_args") : NULL;

  /* The serial device exists only if the kernel is told to use it. */
  if (!args || !strstr (args, "console="))
    return -1;
  if (!fc->serial_path)
    return dup (STDOUT_FILENO);
  /* Opened without truncation. */
  return open (fc->serial_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

static void
start_guest (Firecracker *fc, JsonObject *state, gboolean paused)
{
  FakeGuestHooks hooks = { on_power_off, on_reset, fc };
  const char *args = fc->boot_source ? fake_json_str (fc->boot_source, "boot_args") : NULL;

  fc->guest = fake_guest_new (args, &hooks, open_console (fc), state, fc->vsock);
  /* The serial port reads Firecracker's stdin. */
  fake_guest_take_console_input (fc->guest, STDIN_FILENO);
  if (fc->vsock)
    fake_vsock_start (fc->vsock, fc->guest);
  fake_guest_start (fc->guest, paused);
  fc->state = paused ? "Paused" : "Running";
  if (fc->hotplug && fake_json_int (fc->hotplug, "requested_size_mib") !=
                     fake_json_int (fc->hotplug, "plugged_size_mib"))
    json_object_set_int_member (fc->hotplug, "plugged_size_mib",
                                fake_json_int (fc->hotplug, "requested_size_mib"));
}

static void
ctrl_alt_del (gpointer data)
{
  fake_guest_ctrl_alt_del (data);
}

static void
put_action (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &action, response);
  const char *type;

  if (!cfg)
    return;
  type = fake_json_str (cfg, "action_type");
  if (strcmp (type, "FlushMetrics") == 0)
    fake_response_status (response, 204);
  else if (strcmp (type, "InstanceStart") == 0)
    {
      if (!pre_boot (fc, response))
        return;
      if (!fc->boot_source)
        {
          fault (response, 400, "Start microvm error: Cannot start microvm without kernel "
                 "configuration.");
          return;
        }
      start_guest (fc, NULL, FALSE);
      fake_response_status (response, 204);
    }
  else if (post_boot (fc, response))
    {
      /* The guest reacts well after the reply has left. */
      fake_response_status (response, 204);
      fake_response_after (response, ctrl_alt_del, fc->guest);
    }
}

static void
patch_vm (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &vm_state, response);
  gboolean pause;

  if (!cfg || !post_boot (fc, response))
    return;
  /* Idempotent: pausing a paused VM is fine. */
  pause = strcmp (fake_json_str (cfg, "state"), "Paused") == 0;
  fake_guest_set_paused (fc->guest, pause);
  fc->state = pause ? "Paused" : "Running";
  fake_response_status (response, 204);
}

/* ---- snapshots ---- */

static gboolean
write_file (const char *path, const char *data, gsize len, goffset size, int *errnum)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  if (fd < 0 || !fake_write_all (fd, data, len) || (size >= 0 && ftruncate (fd, size) < 0))
    {
      *errnum = errno;
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  close (fd);
  return TRUE;
}

static void
put_snapshot_create (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &snapshot_create, response);
  g_autoptr (JsonObject) state = NULL;
  g_autoptr (JsonNode) node = NULL;
  g_autofree char *nonce = NULL;
  g_autofree char *header = NULL;
  g_autofree char *text = NULL;
  int errnum = 0;

  if (!cfg || !post_boot (fc, response))
    return;
  if (strcmp (fc->state, "Paused") != 0)
    {
      fault (response, 400, "Create snapshot error: Cannot save the microVM state: The microVM "
             "must be paused before creating a snapshot.");
      return;
    }
  if (strcmp (fake_json_str (cfg, "snapshot_type"), "Diff") == 0 &&
      !fake_json_bool (fc->machine, "track_dirty_pages"))
    {
      fault (response, 400, "Create snapshot error: Diff snapshots are not allowed when dirty page "
             "tracking is disabled.");
      return;
    }
  nonce = g_strdup_printf ("%d-%" G_GINT64_FORMAT, getpid (), g_get_real_time ());
  state = json_object_new ();
  json_object_set_string_member (state, "magic", SNAPSHOT_MAGIC);
  json_object_set_string_member (state, "format", SNAPSHOT_FORMAT);
  json_object_set_string_member (state, "vmm_version", fc->version);
  json_object_set_string_member (state, "nonce", nonce);
  json_object_set_object_member (state, "machine", json_object_ref (fc->machine));
  set_object_or_null (state, "boot_source", fc->boot_source);
  json_object_set_array_member (state, "drives", json_array_ref (fc->drives));
  json_object_set_array_member (state, "nets", json_array_ref (fc->nets));
  set_object_or_null (state, "vsock", fc->vsock_cfg);
  set_object_or_null (state, "mmds_config", fc->mmds_config);
  set_object_or_null (state, "hotplug", fc->hotplug);
  json_object_set_member (state, "guest", fake_guest_snapshot_state (fc->guest));
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, state);
  text = fake_json_text (node);
  /* The memory file is as large as the guest's memory, and sparse. */
  header = g_strconcat (MEM_HEADER, nonce, "\n", NULL);
  errnum = fake_control_snapshot_error (&fc->control);
  if (errnum ||
      !write_file (fake_json_str (cfg, "mem_file_path"), header, strlen (header),
                   fake_json_int (fc->machine, "mem_size_mib") << 20, &errnum) ||
      !write_file (fake_json_str (cfg, "snapshot_path"), text, strlen (text), -1, &errnum))
    {
      g_autofree char *why = fake_os_error_text (errnum);
      fault (response, 400, "Create snapshot error: Cannot write memory file: %s", why);
      return;
    }
  /* Guest vsock connections are reset by a snapshot. */
  if (fc->vsock)
    fake_vsock_reset_all (fc->vsock);
  fake_response_status (response, 204);
}

static void
exit_after_failed_load (gpointer data)
{
  Firecracker *fc = data;

  fake_log_error (&fc->log, "Failed to load snapshot; exiting");
  fake_vmm_exit (1);
}

/* A failed load leaves Firecracker unusable: it answers, then exits. */
static void
load_failed (Firecracker *fc, FakeResponse *response, const char *format, ...) G_GNUC_PRINTF (3, 4);

static void
load_failed (Firecracker *fc, FakeResponse *response, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fault (response, 400, "Load snapshot error: Failed to restore from snapshot: %s", message);
  fake_response_after (response, exit_after_failed_load, fc);
}

static JsonObject *
read_snapshot (Firecracker *fc, const char *path, FakeResponse *response)
{
  g_autofree char *text = NULL;
  g_autoptr (JsonNode) node = NULL;
  g_autoptr (GError) error = NULL;
  const char *magic, *format;
  JsonObject *state;
  gsize len;
  int errnum;

  if (!fake_read_file (path, &text, &len, &errnum))
    {
      g_autofree char *why = fake_os_error_text (errnum);
      load_failed (fc, response, "Failed to open snapshot file: %s", why);
      return NULL;
    }
  node = fake_json_parse (text, len, NULL, &error);
  if (!node)
    {
      load_failed (fc, response, "Failed to open snapshot file: %s", error->message);
      return NULL;
    }
  state = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  magic = fake_json_str (state, "magic");
  if (!state || g_strcmp0 (magic, SNAPSHOT_MAGIC) != 0 || !fake_json_str (state, "nonce") ||
      !fake_json_obj (state, "machine"))
    {
      load_failed (fc, response, "Snapshot file is corrupted: bad magic");
      return NULL;
    }
  /* The format's major version must match. */
  format = fake_json_str (state, "format");
  if (!format || strncmp (format, SNAPSHOT_FORMAT, strcspn (SNAPSHOT_FORMAT, ".")) != 0 ||
      format[strcspn (SNAPSHOT_FORMAT, ".")] != '.')
    {
      load_failed (fc, response, "Invalid snapshot version %s", format ? format : "");
      return NULL;
    }
  return json_object_ref (state);
}

static gboolean
check_memory_file (Firecracker *fc, JsonObject *state, const char *path, FakeResponse *response)
{
  g_autofree char *expected = g_strconcat (MEM_HEADER, fake_json_str (state, "nonce"), "\n", NULL);
  g_autofree char *head = g_malloc0 (strlen (expected) + 1);
  struct stat st;
  ssize_t got;
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0 || fstat (fd, &st) < 0)
    {
      g_autofree char *why = fake_os_error_text (errno);
      if (fd >= 0)
        close (fd);
      load_failed (fc, response, "Failed to open memory backend file: %s", why);
      return FALSE;
    }
  got = read (fd, head, strlen (expected));
  close (fd);
  if (got != (ssize_t) strlen (expected) || strcmp (head, expected) != 0 ||
      st.st_size != fake_json_int (fake_json_obj (state, "machine"), "mem_size_mib") << 20)
    {
      load_failed (fc, response, "Memory file does not match the snapshot");
      return FALSE;
    }
  return TRUE;
}

static JsonObject *
object_or_null (JsonObject *state, const char *name)
{
  JsonObject *o = fake_json_obj (state, name);

  return o ? json_object_ref (o) : NULL;
}

static void
put_snapshot_load (Firecracker *fc, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &snapshot_load, response);
  g_autoptr (JsonObject) state = NULL;
  g_autoptr (JsonArray) nets = NULL;
  g_autoptr (JsonObject) vsock_cfg = NULL;
  JsonObject *backend, *override;
  JsonArray *overrides, *drives, *saved_nets;
  const char *mem_path;

  if (!cfg || !pre_boot (fc, response))
    return;
  if (fc->boot_path)
    {
      fault (response, 400, "Load snapshot error: Loading a microVM snapshot not allowed after "
             "configuring boot-specific resources.");
      return;
    }
  backend = fake_json_obj (cfg, "mem_backend");
  if ((backend == NULL) == fake_json_is_null (cfg, "mem_file_path"))
    {
      fault (response, 400, DESERIALIZE "missing field: either `mem_backend` or `mem_file_path` "
             "is required.");
      return;
    }
  mem_path = backend ? fake_json_str (backend, "backend_path") : fake_json_str (cfg, "mem_file_path");
  state = read_snapshot (fc, fake_json_str (cfg, "snapshot_path"), response);
  if (!state || !check_memory_file (fc, state, mem_path, response))
    return;

  nets = json_array_new ();
  saved_nets = fake_json_arr (state, "nets");
  for (guint i = 0; saved_nets && i < json_array_get_length (saved_nets); i++)
    json_array_add_object_element (nets, fake_json_object_copy (
                                           json_array_get_object_element (saved_nets, i)));
  overrides = json_object_get_array_member (cfg, "network_overrides");
  for (guint i = 0; i < json_array_get_length (overrides); i++)
    {
      JsonObject *o = json_array_get_object_element (overrides, i);
      JsonObject *match = NULL;

      for (guint j = 0; j < json_array_get_length (nets) && !match; j++)
        if (g_strcmp0 (fake_json_str (json_array_get_object_element (nets, j), "iface_id"),
                       fake_json_str (o, "iface_id")) == 0)
          match = json_array_get_object_element (nets, j);
      if (!match)
        {
          load_failed (fc, response, "Invalid network configuration: Network interface %s not "
                       "found in snapshot", fake_json_str (o, "iface_id"));
          return;
        }
      json_object_set_string_member (match, "host_dev_name", fake_json_str (o, "host_dev_name"));
    }
  /* Everything not overridden must exist as at snapshot time. */
  drives = fake_json_arr (state, "drives");
  for (guint i = 0; drives && i < json_array_get_length (drives); i++)
    {
      const char *path = fake_json_str (json_array_get_object_element (drives, i), "path_on_host");
      if (path && *path && !g_file_test (path, G_FILE_TEST_EXISTS))
        {
          load_failed (fc, response, "Failed to build microVM from snapshot: Error manipulating "
                       "the backing file: No such file or directory (os error 2) %s", path);
          return;
        }
    }
  override = fake_json_obj (cfg, "vsock_override");
  if (fake_json_obj (state, "vsock"))
    {
      vsock_cfg = fake_json_object_copy (fake_json_obj (state, "vsock"));
      if (override)
        json_object_set_string_member (vsock_cfg, "uds_path", fake_json_str (override, "uds_path"));
    }
  else if (override)
    {
      load_failed (fc, response, "Cannot override vsock: the snapshot has no vsock device");
      return;
    }
  if (vsock_cfg)
    {
      FakeVsock *vsock = fake_vsock_new (fake_json_str (vsock_cfg, "uds_path"),
                                         fake_json_int (vsock_cfg, "guest_cid"), &fc->log);
      int err = fake_vsock_bind (vsock);
      if (err)
        {
          g_autofree char *why = fake_os_error_text (err);
          fake_vsock_free (vsock);
          load_failed (fc, response, "Failed to build microVM from snapshot: Cannot create "
                       "backend for vsock device: Error binding to the host-side Unix socket: %s",
                       why);
          return;
        }
      fc->vsock = vsock;
    }
  g_clear_pointer (&fc->machine, json_object_unref);
  fc->machine = object_or_null (state, "machine");
  fc->boot_source = object_or_null (state, "boot_source");
  if (drives)
    {
      json_array_unref (fc->drives);
      fc->drives = json_array_ref (drives);
    }
  json_array_unref (fc->nets);
  fc->nets = g_steal_pointer (&nets);
  fc->vsock_cfg = g_steal_pointer (&vsock_cfg);
  /* The MMDS data store is not saved; its config is. */
  fc->mmds_config = object_or_null (state, "mmds_config");
  fc->hotplug = object_or_null (state, "hotplug");
  start_guest (fc, fake_json_obj (state, "guest"), !fake_json_bool (cfg, "resume_vm"));
  fake_response_status (response, 204);
}

/* ---- routing ---- */

static const struct {
  const char *method;
  const char *path;
  Handler     handler;
} routes[] = {
  { "GET", "/version", get_version },
  { "GET", "/machine-config", get_machine },
  { "PUT", "/machine-config", put_machine },
  { "PATCH", "/machine-config", patch_machine },
  { "GET", "/vm/config", get_vm_config },
  { "PUT", "/boot-source", put_boot_source },
  { "PUT", "/vsock", put_vsock },
  { "PUT", "/serial", put_serial },
  { "PUT", "/mmds/config", put_mmds_config },
  { "PUT", "/mmds", put_mmds },
  { "PATCH", "/mmds", patch_mmds },
  { "GET", "/mmds", get_mmds },
  { "PUT", "/actions", put_action },
  { "PATCH", "/vm", patch_vm },
  { "PUT", "/snapshot/create", put_snapshot_create },
  { "PUT", "/snapshot/load", put_snapshot_load },
  { "PUT", "/hotplug/memory", put_hotplug },
  { "PATCH", "/hotplug/memory", patch_hotplug },
  { "GET", "/hotplug/memory", get_hotplug },
  { "PUT", "/logger", put_logger },
  { "PUT", "/metrics", put_metrics },
};

static void
handle (const FakeRequest *request, FakeResponse *response, gpointer data)
{
  Firecracker *fc = data;
  const char *m = request->method;
  g_autofree char *path = fake_request_path (request);
  g_autofree char *key = NULL;
  g_auto (GStrv) split = g_strsplit (path, "/", -1);
  g_autoptr (GPtrArray) parts = g_ptr_array_new ();
  gsize len;

  fake_control_request (&fc->control, request);
  for (char **p = split; *p; p++)
    if (**p)
      g_ptr_array_add (parts, *p);
  if ((strcmp (m, "GET") == 0 || strcmp (m, "DELETE") == 0) && request->body)
    {
      fault (response, 400, "%s request cannot have a body.", m);
      return;
    }
  if (strcmp (path, "/") == 0 && strcmp (m, "GET") == 0)
    {
      instance_info (fc, request, response);
      return;
    }
  len = strlen (path);
  while (len > 0 && path[len - 1] == '/')
    len--;
  key = len ? g_strndup (path, len) : g_strdup ("/");
  for (gsize i = 0; i < G_N_ELEMENTS (routes); i++)
    if (strcmp (routes[i].method, m) == 0 && strcmp (routes[i].path, key) == 0)
      {
        routes[i].handler (fc, request, response);
        return;
      }
  if (parts->len == 2 && (strcmp (m, "PUT") == 0 || strcmp (m, "PATCH") == 0) &&
      (strcmp (parts->pdata[0], "drives") == 0 ||
       strcmp (parts->pdata[0], "network-interfaces") == 0))
    {
      const char *id = parts->pdata[1];
      gboolean put = strcmp (m, "PUT") == 0;

      if (!valid_id (id))
        fault (response, 400, "API Resource IDs can only contain alphanumeric characters and "
               "underscores.");
      else if (strcmp (parts->pdata[0], "drives") == 0)
        (put ? put_drive : patch_drive) (fc, request, response, id);
      else
        (put ? put_net : patch_net) (fc, request, response, id);
      return;
    }
  /* The message names only the first component of the path. */
  fault (response, 400, "Invalid request method and/or path: %s %s.", m,
         parts->len ? (const char *) parts->pdata[0] : "");
}

/* ---- the process ---- */

static char *
log_prefix (const char *level, gpointer data)
{
  Firecracker *fc = data;
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%Y-%m-%dT%H:%M:%S");

  return g_strdup_printf ("%s [%s:%s]", stamp, fc->id, level);
}

G_GNUC_NORETURN static void
die_args (const char *format, ...) G_GNUC_PRINTF (1, 2);

static void
die_args (const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fprintf (stderr, "Arguments parsing error: %s\n\nFor more information try --help.\n", message);
  exit (USAGE_ERROR);
}

static gint64
int_arg (const char *name, const char *value)
{
  gint64 n;

  if (!g_ascii_string_to_signed (value, 10, 0, G_MAXINT64, &n, NULL))
    die_args ("Invalid value for %s: %s", name, value);
  return n;
}

static const char *const value_flags[] = {
  "--api-sock", "--id", "--level", "--log-path", "--metrics-path", "--http-api-max-payload-size",
  "--mmds-size-limit", "--config-file", "--metadata", "--seccomp-filter", "--start-time-us",
  "--start-time-cpu-us", "--parent-cpu-time-us", NULL };
static const char *const bool_flags[] = {
  "--no-api", "--no-seccomp", "--boot-timer", "--show-level", "--show-log-origin", "--version",
  "--help", "--snapshot-version", NULL };

/* Firecracker's arguments; returns FALSE for --version. */
static gboolean
parse_args (Firecracker *fc, int argc, char **argv)
{
  const char *payload = NULL, *mmds = NULL;
  gboolean version = FALSE, no_api = FALSE;

  fc->api_sock = g_strdup ("/run/firecracker.socket");
  fc->id = g_strdup ("anonymous-instance");
  fc->level = g_strdup ("Warning");
  for (int i = 1; i < argc; i++)
    {
      const char *a = argv[i];

      if (g_strv_contains (bool_flags, a))
        {
          version |= strcmp (a, "--version") == 0;
          no_api |= strcmp (a, "--no-api") == 0;
          if (strcmp (a, "--help") == 0)
            {
              printf ("Usage: firecracker --api-sock PATH [--id ID] [--level LEVEL] "
                      "[--log-path PATH] [--http-api-max-payload-size BYTES] "
                      "[--mmds-size-limit BYTES] [--version]\n");
              exit (0);
            }
          continue;
        }
      if (!g_strv_contains (value_flags, a))
        die_args ("Found argument '%s' which wasn't expected, or isn't valid in this context.", a);
      if (i + 1 >= argc)
        die_args ("Found argument '%s' which requires a value, but no value was supplied", a);
      i++;
      if (strcmp (a, "--api-sock") == 0)
        g_free (fc->api_sock), fc->api_sock = g_strdup (argv[i]);
      else if (strcmp (a, "--id") == 0)
        g_free (fc->id), fc->id = g_strdup (argv[i]);
      else if (strcmp (a, "--level") == 0)
        g_free (fc->level), fc->level = g_strdup (argv[i]);
      else if (strcmp (a, "--log-path") == 0)
        g_free (fc->log_path), fc->log_path = g_strdup (argv[i]);
      else if (strcmp (a, "--http-api-max-payload-size") == 0)
        payload = argv[i];
      else if (strcmp (a, "--mmds-size-limit") == 0)
        mmds = argv[i];
    }
  fc->payload_limit = payload ? int_arg ("payload_limit", payload) : FAKE_HTTP_DEFAULT_PAYLOAD_LIMIT;
  /* The MMDS limit defaults to the payload limit. */
  fc->mmds_size_limit = mmds ? int_arg ("mmds_size_limit", mmds) : fc->payload_limit;
  if (strlen (fc->id) > 64 || !*fc->id)
    die_args ("Invalid instance ID: Invalid len for instance ID %s.", fc->id);
  for (const char *p = fc->id; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '-')
      die_args ("Invalid instance ID: Invalid len for instance ID %s.", fc->id);
  if (version)
    return FALSE;
  if (no_api)
    die_args ("--no-api is not supported by this test double");
  return TRUE;
}

static int
bind_api_socket (const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (strlen (path) >= sizeof addr.sun_path)
    {
      close (fd);
      errno = ENAMETOOLONG;
      return -1;
    }
  strcpy (addr.sun_path, path);
  /* A plain bind: an existing path, stale or not, fails. */
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 16) < 0)
    {
      int saved = errno;
      close (fd);
      errno = saved;
      return -1;
    }
  return fd;
}

static void
firecracker_clear (Firecracker *fc)
{
  fake_http_server_free (fc->http);
  fake_guest_free (fc->guest);
  fake_vsock_free (fc->vsock);
  g_clear_pointer (&fc->machine, json_object_unref);
  g_clear_pointer (&fc->boot_source, json_object_unref);
  g_clear_pointer (&fc->drives, json_array_unref);
  g_clear_pointer (&fc->nets, json_array_unref);
  g_clear_pointer (&fc->vsock_cfg, json_object_unref);
  g_clear_pointer (&fc->mmds_config, json_object_unref);
  g_clear_pointer (&fc->mmds, json_node_unref);
  g_clear_pointer (&fc->hotplug, json_object_unref);
  fake_log_clear (&fc->log);
  fake_control_clear (&fc->control);
  g_free (fc->serial_path);
  g_free (fc->api_sock);
  g_free (fc->id);
  g_free (fc->level);
  g_free (fc->log_path);
}

int
main (int argc, char **argv)
{
  Firecracker fc = { 0 };
  int listener, code;

  fc.version = fake_vmm_version (argv[0], DEFAULT_VERSION);
  if (!parse_args (&fc, argc, argv))
    {
      printf ("Firecracker v%s\n\n", fc.version);
      firecracker_clear (&fc);
      return 0;
    }
  fake_control_init (&fc.control, fc.api_sock);
  fake_log_init (&fc.log, log_prefix, &fc, fc.level);
  if (fc.log_path)
    fake_log_set_path (&fc.log, fc.log_path);
  fc.state = "Not started";
  fc.machine = json_object_new ();
  json_object_set_int_member (fc.machine, "vcpu_count", 1);
  json_object_set_int_member (fc.machine, "mem_size_mib", 128);
  json_object_set_boolean_member (fc.machine, "smt", FALSE);
  json_object_set_boolean_member (fc.machine, "track_dirty_pages", FALSE);
  json_object_set_string_member (fc.machine, "huge_pages", "None");
  fc.drives = json_array_new ();
  fc.nets = json_array_new ();
  fake_log_info (&fc.log, "Running Firecracker v%s", fc.version);

  listener = bind_api_socket (fc.api_sock);
  if (listener < 0)
    {
      g_autofree char *why = fake_os_error_text (errno);
      fprintf (stderr, "Failed to open the API socket at: %s. Check that it is not already used. "
               "%s\n", fc.api_sock, why);
      firecracker_clear (&fc);
      return 1;
    }
  /* SIGTERM is not handled by Firecracker: the default action ends it. */
  fc.http = fake_http_server_new (listener, "Firecracker API", fc.payload_limit, handle, &fc);
  code = fake_vmm_run ();
  firecracker_clear (&fc);
  return code;
}
