/* The qemu backend: qemu-system-x86_64 -M microvm, driven over QMP.
 *
 * A machine with room to grow (more vCPUs or memory than it boots with)
 * runs on q35 instead, which microvm cannot stand in for: vCPUs are
 * hot-added through ACPI (device_add of what query-hotpluggable-cpus
 * offers) and memory through a virtio-mem device whose requested-size a
 * resize sets. Its devices are then the PCI variants of microvm's
 * virtio-mmio ones.
 *
 * Every VMM serves two QMP monitors: the API socket, which each operation
 * connects to for its own exchange, and an events socket beside it, which
 * the watcher keeps open to learn why the VMM ends (QEMU serves one client
 * per monitor, so a watcher on the API socket would block every call).
 *
 * QEMU has no option that pins vCPU threads: the daemon pins them from
 * outside, by the thread IDs query-cpus-fast gives for each cpu-index. A
 * guest with pinned vCPUs starts paused (-S), is pinned, then let run, so
 * that no vCPU runs a moment unpinned; a restored one is pinned while its
 * state loads paused; vCPUs a resize adds are pinned once they are there
 * (hv_pin_vcpus). Under TCG each vCPU has a thread of its own only with
 * thread=multi, which such a guest is given. */
#include "qemu.h"
#include "host-devices.h"
#include "host-cpus.h"
#include "jail.h"
#include "qmp.h"
#include "core/json-util.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SOCKET_NAME          "qmp.sock"
#define EVENTS_SOCKET_NAME   "qmp-events.sock"
#define STATE_FILE_NAME      "qemu.state"
#define SNAPSHOT_FD_NAME     "microvmd-snapshot"

#define SERVE_TIMEOUT_MS     10000     /* from exec to the QMP socket */
#define CONNECT_TIMEOUT_MS   5000
#define COMMAND_TIMEOUT_MS   10000
#define MIGRATE_TIMEOUT_MS   (10 * 60 * 1000)
#define POLL_INTERVAL_US     (50 * 1000)
/* How often a guest's state being written or read is looked at: it is
 * waited for by whoever asked (a snapshot, a wake from standby), and a
 * query costs QEMU a fraction of a millisecond. */
#define STATE_POLL_US        (5 * 1000)

/* Under TCG, microvm's guests hang at TSC calibration in about half the
 * boots unless the kernel is told the TSC's rate (DESIGN §5). */
#define TCG_TSC_ARG          "tsc_early_khz=2000000"
/* QEMU's own seccomp filter, for a VMM behind the wall: no obsolete
 * calls, no set*id, no fork or exec, no scheduler or resource changes. */
#define SANDBOX_OPTION       "on,obsolete=deny,elevateprivileges=deny,spawn=deny," \
                             "resourcecontrol=deny"
#define DEFAULT_KERNEL_ARGS  "console=ttyS0 reboot=t panic=-1"
/* Memory a virtio-mem device adds stays offline unless the kernel onlines
 * hot-added memory itself (Debian's leaves it offline by default). */
#define MEMORY_ONLINE_ARG    "memhp_default_state=online"

/* q35's hot-add devices, by the ids this backend gives them. */
#define HOTMEM_DEVICE_ID     "hotmem0"
#define HOTMEM_QOM_PATH      "/machine/peripheral/" HOTMEM_DEVICE_ID
#define HOTPLUG_CPU_ID_FMT   "cpu-hot%u"
/* The root port of a host device's slot (MvVmDevice). */
#define DEVICE_PORT_ID_FMT   "hostport%u"
/* How long a guest under TCG may take to plug or unplug memory blocks,
 * or to take a vCPU away. */
#define RESIZE_TIMEOUT_MS    30000

typedef struct {
  MvStarter  starter;
  char      *binary_option;   /* as configured */
  char      *binary;          /* resolved; NULL: not installed */
  char      *accel;           /* "kvm" or "tcg" */
  char      *accel_why;
  char      *default_args;
  GMutex     lock;
  char      *version;         /* cached; under lock */
  MvVersionCache *versions;   /* the version across restarts */
} QemuStarter;

typedef struct {
  MvHypervisor  hv;
  char         *socket_path;
} QemuHypervisor;

typedef struct {
  MvVmEvents  events;
  GString    *buffer;
} QemuEvents;

static char *
sibling_path (const char *socket_path, const char *name)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);

  return g_build_filename (dir, name, NULL);
}

/* QEMU option values end at a comma; a comma inside one is doubled. */
static char *
opt_value (const char *value)
{
  g_auto (GStrv) parts = g_strsplit (value, ",", -1);

  return g_strjoinv (",,", parts);
}

/* ---- acceleration ---- */

static gboolean
cpu_has_virtualization (const char *cpuinfo)
{
  g_autofree char *contents = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (cpuinfo, &contents, NULL, NULL))
    return FALSE;
  lines = g_strsplit (contents, "\n", -1);
  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) words = NULL;

      if (!g_str_has_prefix (*line, "flags"))
        continue;
      words = g_strsplit_set (*line, " \t:", -1);
      return g_strv_contains ((const char *const *) words, "vmx") ||
             g_strv_contains ((const char *const *) words, "svm");
    }
  return FALSE;
}

const char *
mv_qemu_pick_accel (const char *sysfs_module_dir, const char *cpuinfo, const char *kvm_device,
                    char **why)
{
  g_autofree char *pvm = g_build_filename (sysfs_module_dir, "kvm_pvm", NULL);
  int fd = g_open (kvm_device, O_RDWR | O_CLOEXEC, 0);

  if (fd < 0)
    {
      int saved = errno;
      *why = g_strdup_printf ("%s cannot be opened (%s)", kvm_device, g_strerror (saved));
      return "tcg";
    }
  close (fd);
  if (g_file_test (pvm, G_FILE_TEST_IS_DIR))
    {
      *why = g_strdup_printf ("%s is a PVM-based nested KVM (%s is loaded), on which stock "
                              "guest kernels hang", kvm_device, pvm);
      return "tcg";
    }
  if (!cpu_has_virtualization (cpuinfo))
    {
      *why = g_strdup_printf ("the CPU has neither vmx nor svm (%s), so %s is not hardware "
                              "virtualization", cpuinfo, kvm_device);
      return "tcg";
    }
  *why = g_strdup_printf ("%s is usable and the CPU has hardware virtualization", kvm_device);
  return "kvm";
}

/* ---- QMP helpers ---- */

static MvQmp *
qmp_connect (const char *socket_path, GError **error)
{
  return mv_qmp_connect (socket_path, CONNECT_TIMEOUT_MS, error);
}

static const char *
query_status (MvQmp *qmp, GError **error)
{
  g_autoptr (JsonNode) ret = mv_qmp_execute (qmp, "query-status", NULL, COMMAND_TIMEOUT_MS, error);
  JsonObject *o;

  if (!ret)
    return NULL;
  o = JSON_NODE_HOLDS_OBJECT (ret) ? json_node_get_object (ret) : NULL;
  /* Runtime states are static strings in QEMU; intern ours to keep them. */
  return g_intern_string (o ? json_object_get_string_member_with_default (o, "status", "unknown")
                            : "unknown");
}

static gboolean
run_command (const char *socket_path, const char *command, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (socket_path, error);
  g_autoptr (JsonNode) ret = NULL;

  if (!qmp)
    return FALSE;
  ret = mv_qmp_execute (qmp, command, NULL, COMMAND_TIMEOUT_MS, error);
  return ret != NULL;
}

/* ---- the running guest ---- */

static QemuHypervisor *
hv_self (MvHypervisor *hv)
{
  return (QemuHypervisor *) hv;
}

static gboolean
hv_quit (MvHypervisor *hv, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (hv_self (hv)->socket_path, error);
  g_autoptr (JsonNode) ret = NULL;
  g_autoptr (GError) local = NULL;

  if (!qmp)
    return FALSE;
  /* QEMU may close the monitor before it replies: that is the quit. */
  ret = mv_qmp_execute (qmp, "quit", NULL, COMMAND_TIMEOUT_MS, &local);
  if (!ret && !g_error_matches (local, MV_ERROR, MV_ERROR_UNAVAILABLE))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

static gboolean
hv_shutdown_vm (MvHypervisor *hv, GError **error)
{
  return run_command (hv_self (hv)->socket_path, "system_powerdown", error);
}

static gboolean
hv_pause_vm (MvHypervisor *hv, GError **error)
{
  return run_command (hv_self (hv)->socket_path, "stop", error);
}

static gboolean
hv_resume_vm (MvHypervisor *hv, GError **error)
{
  return run_command (hv_self (hv)->socket_path, "cont", error);
}

static MvVmState
status_to_state (const char *status)
{
  if (g_str_equal (status, "running"))
    return MV_VM_STATE_RUNNING;
  if (g_str_equal (status, "shutdown") || g_str_equal (status, "guest-panicked") ||
      g_str_equal (status, "internal-error"))
    return MV_VM_STATE_STOPPED;
  /* paused, prelaunch, inmigrate, postmigrate, suspended, ...: the vCPUs
   * do not run but the guest is there. */
  return MV_VM_STATE_PAUSED;
}

static gboolean
hv_vm_info (MvHypervisor *hv, MvVmInfo *info, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (hv_self (hv)->socket_path, error);
  g_autoptr (JsonNode) memory = NULL;
  const char *status;

  if (!qmp || !(status = query_status (qmp, error)))
    return FALSE;
  memset (info, 0, sizeof *info);
  info->state = status_to_state (status);
  memory = mv_qmp_execute (qmp, "query-memory-size-summary", NULL, COMMAND_TIMEOUT_MS, NULL);
  if (memory && JSON_NODE_HOLDS_OBJECT (memory))
    {
      JsonObject *o = json_node_get_object (memory);
      info->has_memory_bytes = TRUE;
      info->memory_bytes = (guint64) json_object_get_int_member_with_default (o, "base-memory", 0) +
                           (guint64) json_object_get_int_member_with_default (o, "plugged-memory", 0);
    }
  return TRUE;
}

static JsonNode *
qom_get (MvQmp *qmp, const char *path, const char *property, GError **error)
{
  g_autoptr (JsonObject) args = json_object_new ();

  json_object_set_string_member (args, "path", path);
  json_object_set_string_member (args, "property", property);
  return mv_qmp_execute (qmp, "qom-get", args, COMMAND_TIMEOUT_MS, error);
}

/* Whether the guest runs on q35 rather than microvm. */
static gboolean
machine_is_q35 (MvQmp *qmp, gboolean *q35, GError **error)
{
  g_autoptr (JsonNode) type = qom_get (qmp, "/machine", "type", error);

  if (!type)
    return FALSE;
  *q35 = JSON_NODE_HOLDS_VALUE (type) && json_node_get_value_type (type) == G_TYPE_STRING &&
         strstr (json_node_get_string (type), "q35") != NULL;
  return TRUE;
}

static gboolean
qom_get_uint (MvQmp *qmp, const char *path, const char *property, guint64 *value,
              GError **error)
{
  g_autoptr (JsonNode) ret = qom_get (qmp, path, property, error);

  if (!ret)
    return FALSE;
  if (!JSON_NODE_HOLDS_VALUE (ret) || json_node_get_value_type (ret) != G_TYPE_INT64)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "QMP qom-get %s %s: not a number", path,
                   property);
      return FALSE;
    }
  *value = (guint64) json_node_get_int (ret);
  return TRUE;
}

static gboolean
wait_migration (MvQmp *qmp, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) MIGRATE_TIMEOUT_MS * 1000;

  for (;;)
    {
      g_autoptr (JsonNode) ret = mv_qmp_execute (qmp, "query-migrate", NULL, COMMAND_TIMEOUT_MS,
                                                 error);
      JsonObject *o;
      const char *status;

      if (!ret)
        return FALSE;
      o = JSON_NODE_HOLDS_OBJECT (ret) ? json_node_get_object (ret) : NULL;
      status = o ? json_object_get_string_member_with_default (o, "status", "") : "";
      if (g_str_equal (status, "completed"))
        return TRUE;
      if (g_str_equal (status, "failed") || g_str_equal (status, "cancelled"))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Writing the guest's state failed: %s",
                       json_object_get_string_member_with_default (o, "error-desc", status));
          return FALSE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "Writing the guest's state did not finish within %d s",
                       MIGRATE_TIMEOUT_MS / 1000);
          return FALSE;
        }
      g_usleep (STATE_POLL_US);
    }
}

/* The state goes straight from QEMU into a file we opened (migrate to a
 * passed fd): "completed" then means every byte is in the file, which an
 * exec: helper process does not promise. */
static gboolean
hv_snapshot_vm (MvHypervisor *hv, const char *dest_dir, GError **error)
{
  g_autofree char *path = g_build_filename (dest_dir, STATE_FILE_NAME, NULL);
  g_autoptr (MvQmp) qmp = qmp_connect (hv_self (hv)->socket_path, error);
  g_autoptr (JsonObject) getfd = json_object_new ();
  g_autoptr (JsonObject) migrate = json_object_new ();
  g_autoptr (JsonNode) ret = NULL;
  g_autoptr (JsonNode) ret2 = NULL;
  const char *status;
  gboolean ok, q35;
  int fd;

  if (!qmp || !machine_is_q35 (qmp, &q35, error))
    return FALSE;
  /* Its hot-added vCPUs and memory are not on the command line a restore
   * would rebuild the machine from. */
  if (q35)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "The qemu backend cannot snapshot a machine with room to grow (max_vcpus, "
                   "max_memory_bytes): it runs on q35, whose hot-added vCPUs and memory a "
                   "restore cannot rebuild; stop it instead");
      return FALSE;
    }
  if (!(status = query_status (qmp, error)))
    return FALSE;
  /* Paused since its last snapshot and not resumed: QEMU will not write
   * the state again until the guest has run, so it runs for the moment
   * between the two commands. */
  if (g_str_equal (status, "postmigrate"))
    {
      g_autoptr (JsonNode) cont = mv_qmp_execute (qmp, "cont", NULL, COMMAND_TIMEOUT_MS, error);
      g_autoptr (JsonNode) stop = cont ? mv_qmp_execute (qmp, "stop", NULL, COMMAND_TIMEOUT_MS,
                                                         error) : NULL;

      if (!stop || !(status = query_status (qmp, error)))
        return FALSE;
    }
  if (!g_str_equal (status, "paused"))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "The guest must be paused for a snapshot; it is %s", status);
      return FALSE;
    }
  fd = g_open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not create %s: %s", path,
                   g_strerror (saved));
      return FALSE;
    }
  json_object_set_string_member (getfd, "fdname", SNAPSHOT_FD_NAME);
  json_object_set_string_member (migrate, "uri", "fd:" SNAPSHOT_FD_NAME);
  ok = (ret = mv_qmp_execute_with_fd (qmp, "getfd", getfd, fd, COMMAND_TIMEOUT_MS, error)) &&
       (ret2 = mv_qmp_execute (qmp, "migrate", migrate, COMMAND_TIMEOUT_MS, error)) &&
       wait_migration (qmp, error);
  if (ok && fsync (fd) < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not write %s: %s", path,
                   g_strerror (saved));
      ok = FALSE;
    }
  close (fd);
  if (!ok)
    g_unlink (path);
  return ok;
}

/* ---- resizing (q35 machines) ---- */

/* Only q35 machines (those started with room to grow) can be resized. */
static gboolean
check_resizable (MvQmp *qmp, const char *what, GError **error)
{
  gboolean q35;

  if (!machine_is_q35 (qmp, &q35, error))
    return FALSE;
  if (q35)
    return TRUE;
  g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
               "%s: the guest was started without room to grow (max_vcpus, max_memory_bytes), "
               "on the microvm machine, which has no hotplug", what);
  return FALSE;
}

static gboolean
wait_memory_size (MvQmp *qmp, guint64 requested, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) RESIZE_TIMEOUT_MS * 1000;
  guint64 size = 0;

  for (;;)
    {
      if (!qom_get_uint (qmp, HOTMEM_QOM_PATH, "size", &size, error))
        return FALSE;
      if (size == requested)
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "memory_bytes: the guest took %" G_GUINT64_FORMAT " MiB of the %"
                       G_GUINT64_FORMAT " MiB asked for its added memory within %d s",
                       size >> 20, requested >> 20, RESIZE_TIMEOUT_MS / 1000);
          return FALSE;
        }
      g_usleep (POLL_INTERVAL_US);
    }
}

/* @bytes is the whole memory: what it holds beyond the boot memory is the
 * virtio-mem device's, whose guest driver plugs or unplugs 2 MiB blocks
 * until the device's size reaches its requested size. */
static gboolean
hv_resize_vm_memory (MvHypervisor *hv, guint64 bytes, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (hv_self (hv)->socket_path, error);
  g_autoptr (JsonNode) summary = NULL;
  g_autoptr (JsonNode) device = NULL;
  g_autoptr (JsonObject) args = json_object_new ();
  g_autoptr (JsonNode) ret = NULL;
  g_autoptr (GError) local = NULL;
  guint64 boot, room;

  if (!qmp || !check_resizable (qmp, "memory_bytes", error))
    return FALSE;
  summary = mv_qmp_execute (qmp, "query-memory-size-summary", NULL, COMMAND_TIMEOUT_MS, error);
  if (!summary)
    return FALSE;
  boot = JSON_NODE_HOLDS_OBJECT (summary)
    ? (guint64) json_object_get_int_member_with_default (json_node_get_object (summary),
                                                         "base-memory", 0)
    : 0;
  /* No virtio-mem device: the machine has room for vCPUs only. */
  if (!qom_get_uint (qmp, "/objects/" HOTMEM_DEVICE_ID "-ram", "size", &room, &local))
    room = 0;
  if (!mv_check_memory_resize (bytes, boot, room, error))
    return FALSE;
  json_object_set_string_member (args, "path", HOTMEM_QOM_PATH);
  json_object_set_string_member (args, "property", "requested-size");
  json_object_set_int_member (args, "value", (gint64) (bytes - boot));
  ret = mv_qmp_execute (qmp, "qom-set", args, COMMAND_TIMEOUT_MS, error);
  return ret && wait_memory_size (qmp, bytes - boot, error);
}

/* The vCPUs, as query-hotpluggable-cpus lists them: @plugged those there
 * now, @free the slots still empty (their props, to device_add). */
static gboolean
list_cpus (MvQmp *qmp, GPtrArray *plugged, GPtrArray *free_slots, GError **error)
{
  g_autoptr (JsonNode) ret = mv_qmp_execute (qmp, "query-hotpluggable-cpus", NULL,
                                             COMMAND_TIMEOUT_MS, error);
  JsonArray *cpus;

  if (!ret)
    return FALSE;
  if (!JSON_NODE_HOLDS_ARRAY (ret))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "QMP query-hotpluggable-cpus: not a list");
      return FALSE;
    }
  cpus = json_node_get_array (ret);
  /* QEMU lists the last slot first: walk it backwards to fill in order. */
  for (guint i = json_array_get_length (cpus); i-- > 0;)
    {
      JsonObject *cpu = json_array_get_object_element (cpus, i);

      if (!cpu)
        continue;
      g_ptr_array_add (json_object_has_member (cpu, "qom-path") ? plugged : free_slots,
                       json_object_ref (cpu));
    }
  return TRUE;
}

static gboolean
add_cpu (MvQmp *qmp, JsonObject *slot, guint index, GError **error)
{
  g_autoptr (JsonObject) args = json_object_new ();
  g_autofree char *id = g_strdup_printf (HOTPLUG_CPU_ID_FMT, index);
  JsonObject *props = mv_json_get_object (slot, "props");
  g_autoptr (JsonNode) ret = NULL;
  g_autoptr (GList) names = props ? json_object_get_members (props) : NULL;

  json_object_set_string_member (args, "driver",
                                 json_object_get_string_member_with_default (slot, "type", ""));
  json_object_set_string_member (args, "id", id);
  for (GList *l = names; l; l = l->next)
    json_object_set_member (args, l->data, json_object_dup_member (props, l->data));
  ret = mv_qmp_execute (qmp, "device_add", args, COMMAND_TIMEOUT_MS, error);
  return ret != NULL;
}

/* Asks the guest to give the vCPU @id back (ACPI eject) and waits until
 * it has. */
static gboolean
remove_cpu (MvQmp *qmp, const char *id, GError **error)
{
  g_autoptr (JsonObject) args = json_object_new ();
  g_autofree char *path = g_strconcat ("/machine/peripheral/", id, NULL);
  g_autoptr (JsonNode) ret = NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64) RESIZE_TIMEOUT_MS * 1000;

  json_object_set_string_member (args, "id", id);
  ret = mv_qmp_execute (qmp, "device_del", args, COMMAND_TIMEOUT_MS, error);
  if (!ret)
    return FALSE;
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      g_autoptr (JsonNode) type = qom_get (qmp, path, "type", &local);

      if (!type)
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "vcpus: the guest did not give back a vCPU within %d s",
                       RESIZE_TIMEOUT_MS / 1000);
          return FALSE;
        }
      g_usleep (POLL_INTERVAL_US);
    }
}

/* Under TCG, QEMU (7.2) gives each vCPU thread a translation context
 * that it never takes back, and aborts when a vCPU that was removed is
 * plugged again; with one thread for all vCPUs it aborts on the removal
 * itself. So only a guest under KVM gives vCPUs back. */
static gboolean
check_cpu_removable (MvQmp *qmp, GError **error)
{
  g_autoptr (JsonNode) ret = mv_qmp_execute (qmp, "query-kvm", NULL, COMMAND_TIMEOUT_MS, error);
  JsonObject *kvm = ret && JSON_NODE_HOLDS_OBJECT (ret) ? json_node_get_object (ret) : NULL;

  if (!ret)
    return FALSE;
  if (kvm && json_object_get_boolean_member_with_default (kvm, "enabled", FALSE))
    return TRUE;
  return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                       "vcpus: a QEMU guest under TCG cannot give vCPUs back (QEMU would abort "
                       "when they are added again); stop the machine and start it with fewer");
}

/* vCPUs come and go one at a time: added into the free slots, taken
 * away newest first, and only those a resize added (the boot vCPUs
 * stay). The guest's agent brings an added vCPU online. */
static gboolean
hv_resize_vm_cpu (MvHypervisor *hv, guint count, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (hv_self (hv)->socket_path, error);
  g_autoptr (GPtrArray) plugged = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  g_autoptr (GPtrArray) free_slots = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);

  if (!qmp || !check_resizable (qmp, "vcpus", error) ||
      !list_cpus (qmp, plugged, free_slots, error))
    return FALSE;
  if (count > plugged->len + free_slots->len)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "vcpus: %u is above the machine's maximum of %u", count,
                   plugged->len + free_slots->len);
      return FALSE;
    }
  for (guint i = plugged->len; i < count; i++)
    if (!add_cpu (qmp, free_slots->pdata[i - plugged->len], i, error))
      return FALSE;
  /* Refused before any is taken if a boot vCPU would have to go. */
  for (guint i = plugged->len; i-- > count;)
    {
      g_autofree char *path = g_strdup_printf ("/machine/peripheral/" HOTPLUG_CPU_ID_FMT, i);
      g_autoptr (GError) local = NULL;
      g_autoptr (JsonNode) type = qom_get (qmp, path, "type", &local);

      if (!type)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                       "vcpus: %u is below the vCPUs the guest booted with", count);
          return FALSE;
        }
    }
  if (count < plugged->len && !check_cpu_removable (qmp, error))
    return FALSE;
  for (guint i = plugged->len; i-- > count;)
    {
      g_autofree char *id = g_strdup_printf (HOTPLUG_CPU_ID_FMT, i);

      if (!remove_cpu (qmp, id, error))
        return FALSE;
    }
  return TRUE;
}

/* cpu-index -> thread-id of each vCPU the guest has now. */
static GHashTable *
vcpu_threads (MvQmp *qmp, GError **error)
{
  g_autoptr (JsonNode) ret = mv_qmp_execute (qmp, "query-cpus-fast", NULL, COMMAND_TIMEOUT_MS,
                                             error);
  g_autoptr (GHashTable) threads = g_hash_table_new (g_direct_hash, g_direct_equal);
  JsonArray *cpus;

  if (!ret)
    return NULL;
  if (!JSON_NODE_HOLDS_ARRAY (ret))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "QMP query-cpus-fast: not a list");
      return NULL;
    }
  cpus = json_node_get_array (ret);
  for (guint i = 0; i < json_array_get_length (cpus); i++)
    {
      JsonObject *cpu = json_array_get_object_element (cpus, i);

      if (!cpu || !json_object_has_member (cpu, "cpu-index") ||
          !json_object_has_member (cpu, "thread-id"))
        continue;
      g_hash_table_insert (threads, GUINT_TO_POINTER ((guint) mv_json_get_uint (cpu, "cpu-index")),
                           GINT_TO_POINTER ((gint) mv_json_get_uint (cpu, "thread-id")));
    }
  return g_steal_pointer (&threads);
}

static gboolean
pin_vcpus (const char *socket_path, int vmm_pid, const GPtrArray *affinity, GError **error)
{
  g_autoptr (MvQmp) qmp = NULL;
  g_autoptr (GHashTable) threads = NULL;
  GHashTableIter iter;
  gpointer index, tid;

  if (!affinity || affinity->len == 0)
    return TRUE;
  if (!(qmp = qmp_connect (socket_path, error)) || !(threads = vcpu_threads (qmp, error)))
    return FALSE;
  /* Pinning a thread that runs more than one vCPU (single-threaded TCG)
   * would pin them all alike: refused before anything is pinned. */
  g_hash_table_iter_init (&iter, threads);
  while (g_hash_table_iter_next (&iter, &index, &tid))
    for (guint i = 0; i < affinity->len; i++)
      {
        const MvCpuAffinity *a = affinity->pdata[i];
        GHashTableIter other;
        gpointer other_index, other_tid;

        if (a->vcpu != GPOINTER_TO_UINT (index))
          continue;
        g_hash_table_iter_init (&other, threads);
        while (g_hash_table_iter_next (&other, &other_index, &other_tid))
          if (other_tid == tid && other_index != index)
            return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                                 "cpu_affinity[%u]: vCPUs %u and %u run on one thread of this "
                                 "QEMU (thread %d), which cannot be pinned for one alone", i,
                                 a->vcpu, GPOINTER_TO_UINT (other_index), GPOINTER_TO_INT (tid));
      }
  for (guint i = 0; i < affinity->len; i++)
    {
      const MvCpuAffinity *a = affinity->pdata[i];
      gpointer found;

      /* A vCPU a resize has not added yet. */
      if (!g_hash_table_lookup_extended (threads, GUINT_TO_POINTER (a->vcpu), NULL, &found))
        continue;
      if (!mv_host_cpus_pin_thread (vmm_pid, GPOINTER_TO_INT (found), a->host_cpus, error))
        {
          g_prefix_error (error, "cpu_affinity[%u]: vCPU %u: ", i, a->vcpu);
          return FALSE;
        }
    }
  return TRUE;
}

/* ---- host devices (q35 machines) ---- */

static gboolean
hv_add_device (MvHypervisor *hv, const MvVmDevice *device, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (hv_self (hv)->socket_path, error);
  g_autoptr (JsonObject) args = json_object_new ();
  g_autofree char *port = g_strdup_printf (DEVICE_PORT_ID_FMT, device->slot);
  g_autoptr (JsonNode) ret = NULL;
  gboolean q35;

  if (!qmp || !machine_is_q35 (qmp, &q35, error))
    return FALSE;
  if (!q35)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: the guest booted on the microvm "
                         "machine, which has no PCI; it is given host devices when it boots "
                         "with them", device->id);
  json_object_set_string_member (args, "driver", "vfio-pci");
  json_object_set_string_member (args, "sysfsdev", device->path);
  json_object_set_string_member (args, "id", device->id);
  json_object_set_string_member (args, "bus", port);
  ret = mv_qmp_execute (qmp, "device_add", args, COMMAND_TIMEOUT_MS, error);
  return ret != NULL;
}

static gboolean
hv_pin_vcpus (MvHypervisor *hv, int vmm_pid, const GPtrArray *affinity, GError **error)
{
  return pin_vcpus (hv_self (hv)->socket_path, vmm_pid, affinity, error);
}

static void
hv_free (MvHypervisor *hv)
{
  g_free (hv_self (hv)->socket_path);
  g_free (hv);
}

static MvHypervisor *
hypervisor_new (const char *socket_path)
{
  QemuHypervisor *self = g_new0 (QemuHypervisor, 1);

  self->socket_path = g_strdup (socket_path);
  self->hv.data = self;
  /* QEMU cannot end the guest and keep running: both end the VMM. */
  self->hv.destroy_vm = hv_quit;
  self->hv.shutdown = hv_quit;
  self->hv.shutdown_vm = hv_shutdown_vm;
  self->hv.vm_info = hv_vm_info;
  self->hv.pause_vm = hv_pause_vm;
  self->hv.resume_vm = hv_resume_vm;
  self->hv.snapshot_vm = hv_snapshot_vm;
  self->hv.resize_vm_memory = hv_resize_vm_memory;
  self->hv.resize_vm_cpu = hv_resize_vm_cpu;
  self->hv.pin_vcpus = hv_pin_vcpus;
  self->hv.add_device = hv_add_device;
  self->hv.free = hv_free;
  return &self->hv;
}

/* ---- the starter ---- */

static QemuStarter *
self_of (MvStarter *starter)
{
  return (QemuStarter *) starter;
}

static char *
read_version (const char *binary)
{
  const char *argv[] = { binary, "--version", NULL };
  g_autofree char *out = NULL;
  const char *p;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                     NULL, &status, NULL) || !g_spawn_check_wait_status (status, NULL))
    return NULL;
  /* "QEMU emulator version 7.2.22 (Debian ...)" */
  p = strstr (out, "version ");
  if (!p)
    return NULL;
  p += strlen ("version ");
  return g_strndup (p, strcspn (p, " \n("));
}

static const char *
qemu_version (MvStarter *starter)
{
  QemuStarter *self = self_of (starter);
  const char *version;

  g_mutex_lock (&self->lock);
  if (!self->version && self->binary)
    self->version = mv_version_cache_get (self->versions, self->binary, read_version);
  version = self->version;
  g_mutex_unlock (&self->lock);
  return version;
}

static const char *
qemu_default_kernel_args (MvStarter *starter)
{
  return self_of (starter)->default_args;
}

static gboolean
qemu_power_off_ends_vm (MvStarter *starter)
{
  return TRUE;
}

static gboolean
qemu_check (MvStarter *starter, const char *socket_path, const MvVmSpec *spec, GError **error)
{
  QemuStarter *self = self_of (starter);
  g_autofree char *events = sibling_path (socket_path, EVENTS_SOCKET_NAME);

  if (!self->binary)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "[qemu] binary: %s is not installed or not executable "
                   "(install qemu-system-x86 or set binary in microvmd.conf)",
                   self->binary_option);
      return FALSE;
    }
  return mv_check_socket_path ("socket", socket_path, error) &&
         mv_check_socket_path ("socket", events, error);
}

/* Room to grow: the machine is q35, with its hot-add devices. */
static gboolean
spec_has_room (const MvVmSpec *spec)
{
  return spec->cpu.max_count > spec->cpu.count || spec->memory.hotplug_bytes > 0;
}

/* q35 rather than microvm: room to grow, or host devices, which need a
 * PCI bus. */
static gboolean
spec_on_q35 (const MvVmSpec *spec)
{
  return spec_has_room (spec) || spec->devices->len > 0;
}

/* -device's option for a host device, on its slot's root port. */
static char *
vfio_device_option (const MvVmDevice *device)
{
  g_autofree char *path = opt_value (device->path);

  return g_strdup_printf ("vfio-pci,sysfsdev=%s,id=%s,bus=" DEVICE_PORT_ID_FMT, path, device->id,
                          device->slot);
}

/* A virtio device's name on the machine's transport: "virtio-blk" is
 * virtio-blk-device on microvm's virtio-mmio, virtio-blk-pci on q35. */
static const char *
device_suffix (const MvVmSpec *spec)
{
  return spec_on_q35 (spec) ? "pci" : "device";
}

static char *
kernel_args (QemuStarter *self, const MvVmSpec *spec)
{
  const char *args = spec->boot.kernel_args;
  g_autoptr (GString) line = NULL;

  if (!args || !*args)
    args = self->default_args;
  line = g_string_new (args);
  if (g_str_equal (self->accel, "tcg") && !strstr (args, "tsc_early_khz="))
    g_string_append (line, " " TCG_TSC_ARG);
  if (spec->memory.hotplug_bytes > 0 && !strstr (args, "memhp_default_state="))
    g_string_append (line, " " MEMORY_ONLINE_ARG);
  return g_string_free (g_steal_pointer (&line), FALSE);
}

static void
add (GPtrArray *argv, const char *arg)
{
  g_ptr_array_add (argv, g_strdup (arg));
}

static void
add_printf (GPtrArray *argv, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
add_printf (GPtrArray *argv, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_ptr_array_add (argv, g_strdup_vprintf (format, args));
  va_end (args);
}

/* What the walled-in VMM needs of the host: the kernel and initrd shown
 * read-only (QEMU reads them by path), its devices. Disks go as
 * descriptors, see add_disks(). */
static gboolean
furnish_jail (QemuStarter *self, const MvVmSpec *spec, GError **error)
{
  MvJail *jail = spec->jail;

  if (!mv_jail_show_binary (jail, self->binary, error) ||
      !mv_jail_show_host_file (jail, "kernel", spec->boot.kernel_path, FALSE, error) ||
      (spec->boot.initrd_path && *spec->boot.initrd_path &&
       !mv_jail_show_host_file (jail, "initrd", spec->boot.initrd_path, FALSE, error)))
    return FALSE;
  if (g_str_equal (self->accel, "kvm") && !mv_jail_add_device (jail, "/dev/kvm", error))
    return FALSE;
  return mv_host_devices_give (jail, spec->devices, error);
}

/* Attaches to the TAP @name, which must exist (the network layer made
 * it), as QEMU would itself: no packet information, with the virtio-net
 * header. */
static int
open_tap (const char *name, GError **error)
{
  struct ifreq ifr = { 0 };
  int fd, saved;

  if (strlen (name) >= sizeof ifr.ifr_name)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "network: TAP name %s is too long",
                   name);
      return -1;
    }
  fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    {
      saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not open /dev/net/tun: %s",
                   g_strerror (saved));
      return -1;
    }
  memcpy (ifr.ifr_name, name, strlen (name));
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (ioctl (fd, TUNSETIFF, &ifr) < 0)
    {
      saved = errno;
      close (fd);
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "network: could not attach to TAP %s: %s",
                   name, g_strerror (saved));
      return -1;
    }
  return fd;
}

/* A walled-in QEMU gets each disk as a descriptor the daemon opened,
 * through an fd set (-add-fd; /dev/fdset/N): it needs no path to it. */
static gboolean
add_disks (GPtrArray *argv, const MvVmSpec *spec, const char *bus, GError **error)
{
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *disk = spec->disks->pdata[i];
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);
      g_autofree char *path = NULL;
      int fd;

      if (spec->jail)
        {
          fd = (disk->own ? mv_jail_open_own_file : mv_jail_open_host_file) (spec->jail, field, disk->path, !disk->read_only, error);
          if (fd < 0)
            return FALSE;
          mv_jail_pass_fd (spec->jail, fd);
          add (argv, "-add-fd");
          add_printf (argv, "fd=%d,set=%u,opaque=disk%u", fd, i + 1, i);
          path = g_strdup_printf ("/dev/fdset/%u", i + 1);
        }
      else
        path = opt_value (disk->path);
      g_autoptr (GString) throttle = g_string_new ("");

      /* QEMU's block throttling: reads and writes together, per second. */
      if (disk->rate_limit_bytes_per_second)
        g_string_append_printf (throttle, ",throttling.bps-total=%" G_GUINT64_FORMAT,
                                disk->rate_limit_bytes_per_second);
      if (disk->rate_limit_iops)
        g_string_append_printf (throttle, ",throttling.iops-total=%" G_GUINT64_FORMAT,
                                disk->rate_limit_iops);
      add (argv, "-drive");
      /* auto-read-only=off: QEMU asks the fd set for the mode it needs at
       * once instead of trying read-only first. */
      add_printf (argv, "id=disk%u,file=%s,format=raw,if=none%s%s%s", i, path,
                  spec->jail ? ",auto-read-only=off" : "", disk->read_only ? ",readonly=on" : "",
                  throttle->str);
      add (argv, "-device");
      add_printf (argv, "virtio-blk-%s,drive=disk%u", bus, i);
    }
  return TRUE;
}

/* The command line for @spec; @incoming (may be NULL) is a migration
 * source, and the guest then waits, paused, for a "cont". */
static GPtrArray *
build_argv (QemuStarter *self, const char *socket_path, const MvVmSpec *spec,
            const char *incoming, GError **error)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *events = sibling_path (socket_path, EVENTS_SOCKET_NAME);
  g_autofree char *qmp_path = opt_value (socket_path);
  g_autofree char *events_path = opt_value (events);
  g_autofree char *append = kernel_args (self, spec);
  gboolean q35 = spec_on_q35 (spec);
  gboolean pinned = spec->cpu.affinity->len > 0;
  const char *bus = device_suffix (spec);

  add (argv, self->binary);
  add (argv, "-name");
  add (argv, "microvmd");
  add (argv, "-M");
  /* virtiofsd reads and writes the guest's buffers: the guest's memory is
   * a memfd shared with it. */
  add_printf (argv, "%s%s", q35 ? "q35" : "microvm",
              spec->shares->len > 0 ? ",memory-backend=mem" : "");
  add (argv, "-accel");
  /* A thread per vCPU, so that each can be pinned on its own. */
  if (pinned && g_str_equal (self->accel, "tcg"))
    add (argv, "tcg,thread=multi");
  else
    add (argv, self->accel);
  add (argv, "-cpu");
  /* The stock TCG model: the Debian cloud kernel boots fastest on it. It
   * says it is AMD's, whose threads TCG cannot describe (it lacks
   * topoext): a guest with more than one thread per core is told it runs
   * on Intel's, whose CPUID leaf 0xB describes them. */
  if (g_str_equal (self->accel, "kvm"))
    add (argv, "host");
  else if (spec->cpu.topology.threads_per_core > 1)
    add (argv, "qemu64,vendor=GenuineIntel");
  else
    add (argv, "qemu64");
  add (argv, "-smp");
  {
    g_autoptr (GString) smp = g_string_new (NULL);
    const MvCpuTopology *t = &spec->cpu.topology;

    g_string_printf (smp, "%u", spec->cpu.count);
    if (spec->cpu.max_count > spec->cpu.count)
      g_string_append_printf (smp, ",maxcpus=%u", spec->cpu.max_count);
    if (t->threads_per_core)
      g_string_append_printf (smp, ",sockets=%u,dies=%u,cores=%u,threads=%u", t->packages,
                              t->dies_per_package, t->cores_per_die, t->threads_per_core);
    add (argv, smp->str);
  }
  add (argv, "-m");
  if (spec->memory.hotplug_bytes > 0)
    add_printf (argv, "%" G_GUINT64_FORMAT "M,maxmem=%" G_GUINT64_FORMAT "M",
                spec->memory.size_bytes >> 20,
                (spec->memory.size_bytes + spec->memory.hotplug_bytes) >> 20);
  else
    add_printf (argv, "%" G_GUINT64_FORMAT "M", spec->memory.size_bytes >> 20);
  if (spec->shares->len > 0)
    {
      /* microvm's virtio-mmio devices are legacy (version 1) by default,
       * which virtiofsd's vhost-user library refuses. */
      if (!q35)
        {
          add (argv, "-global");
          add (argv, "virtio-mmio.force-legacy=false");
        }
      add (argv, "-object");
      add_printf (argv, "memory-backend-memfd,id=mem,size=%" G_GUINT64_FORMAT "M,share=on",
                  spec->memory.size_bytes >> 20);
    }
  if (spec->memory.hotplug_bytes > 0)
    {
      /* All of it set aside, none plugged: a resize sets requested-size.
       * Shared like the boot memory when virtiofsd must see it. */
      add (argv, "-object");
      add_printf (argv, "%s,id=" HOTMEM_DEVICE_ID "-ram,size=%" G_GUINT64_FORMAT "M%s",
                  spec->shares->len > 0 ? "memory-backend-memfd" : "memory-backend-ram",
                  spec->memory.hotplug_bytes >> 20, spec->shares->len > 0 ? ",share=on" : "");
      add (argv, "-device");
      add_printf (argv, "virtio-mem-pci,id=" HOTMEM_DEVICE_ID ",memdev=" HOTMEM_DEVICE_ID "-ram,"
                  "block-size=%" G_GUINT64_FORMAT "M,requested-size=0",
                  MV_MEMORY_RESIZE_STEP_BYTES >> 20);
    }
  /* A root port for each slot of a host device, those it boots with and
   * those added later (PCI Express hotplug is a root port's, not the
   * root complex's); each device by its sysfs directory, PCI and
   * mediated alike. */
  if (q35)
    for (guint slot = 0; slot < MV_VM_DEVICE_SLOTS; slot++)
      {
        add (argv, "-device");
        add_printf (argv, "pcie-root-port,id=" DEVICE_PORT_ID_FMT ",chassis=%u", slot, slot + 1);
      }
  for (guint i = 0; i < spec->devices->len; i++)
    {
      add (argv, "-device");
      g_ptr_array_add (argv, vfio_device_option (spec->devices->pdata[i]));
    }
  add (argv, "-nodefaults");
  add (argv, "-no-user-config");
  add (argv, "-nographic");
  /* A guest reset (reboot, panic with panic=-1) ends the VMM. */
  add (argv, "-no-reboot");
  if (spec->jail)
    {
      if (!furnish_jail (self, spec, error))
        return NULL;
      add (argv, "-sandbox");
      add (argv, SANDBOX_OPTION);
    }

  add (argv, "-kernel");
  add (argv, spec->boot.kernel_path);
  if (spec->boot.initrd_path && *spec->boot.initrd_path)
    {
      add (argv, "-initrd");
      add (argv, spec->boot.initrd_path);
    }
  add (argv, "-append");
  add (argv, append);

  /* The serial console is QEMU's stdin and stdout, which the VMM's
   * parent holds (console.h). */
  if (spec->console.path)
    {
      add (argv, "-chardev");
      add (argv, "stdio,id=console,signal=off");
      add (argv, "-serial");
      add (argv, "chardev:console");
    }

  if (spec->agent.kind == MV_AGENT_CHANNEL_SERIAL)
    {
      g_autofree char *agent = opt_value (spec->agent.socket_path);
      add (argv, "-device");
      add_printf (argv, "virtio-serial-%s,id=vserial0", bus);
      add (argv, "-chardev");
      add_printf (argv, "socket,id=agent,path=%s,server=on,wait=off", agent);
      add (argv, "-device");
      add (argv, "virtserialport,chardev=agent,name=" MV_AGENT_PORT_NAME);
    }

  if (!add_disks (argv, spec, bus, error))
    return NULL;

  for (guint i = 0; i < spec->shares->len; i++)
    {
      MvShareConfig *share = spec->shares->pdata[i];
      g_autofree char *path = opt_value (share->socket_path);
      g_autofree char *tag = opt_value (share->tag);

      add (argv, "-chardev");
      add_printf (argv, "socket,id=fs%u,path=%s", i, path);
      add (argv, "-device");
      add_printf (argv, "vhost-user-fs-%s,chardev=fs%u,tag=%s", bus, i, tag);
    }

  for (guint i = 0; i < spec->nets->len; i++)
    {
      MvNetConfig *net = spec->nets->pdata[i];

      add (argv, "-netdev");
      /* A walled-in QEMU may not attach to a TAP itself (the TAP belongs
       * to root): the daemon attaches and passes the descriptor. */
      if (spec->jail)
        {
          int fd = open_tap (net->tap_device, error);

          if (fd < 0)
            return NULL;
          add_printf (argv, "tap,id=net%u,fd=%d", i,
                      mv_jail_pass_fd (spec->jail, mv_jail_take_fd (spec->jail, fd)));
        }
      else
        add_printf (argv, "tap,id=net%u,ifname=%s,script=no,downscript=no", i, net->tap_device);
      add (argv, "-device");
      add_printf (argv, "virtio-net-%s,netdev=net%u%s%s", bus, i, net->mac ? ",mac=" : "",
                  net->mac ? net->mac : "");
    }

  add (argv, "-chardev");
  add_printf (argv, "socket,id=qmp,path=%s,server=on,wait=off", qmp_path);
  add (argv, "-mon");
  add (argv, "chardev=qmp,mode=control");
  add (argv, "-chardev");
  add_printf (argv, "socket,id=qmp-events,path=%s,server=on,wait=off", events_path);
  add (argv, "-mon");
  add (argv, "chardev=qmp-events,mode=control");

  if (incoming)
    {
      add (argv, "-S");
      add (argv, "-incoming");
      add (argv, incoming);
    }
  else if (pinned)
    /* Paused until its vCPUs are pinned (qemu_start_vm). */
    add (argv, "-S");
  g_ptr_array_add (argv, NULL);
  return g_steal_pointer (&argv);
}

/* @state (may be NULL) is a saved guest's state file to take the guest
 * from: a walled-in QEMU reads it from a descriptor the daemon opened
 * (it may neither see the file nor spawn a helper), another through cat. */
static MvHypervisor *
launch (QemuStarter *self, const char *socket_path, const MvVmSpec *spec, const char *state,
        MvProcess **vmm, GError **error)
{
  g_autoptr (GPtrArray) argv = NULL;
  g_autofree char *dir = g_path_get_dirname (socket_path);
  g_autofree char *incoming = NULL;

  if (!mv_vm_spec_check (spec, dir, error) || !qemu_check (&self->starter, socket_path, spec, error))
    return NULL;
  if (state && spec->jail)
    {
      int fd = open (state, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

      if (fd < 0)
        {
          int saved = errno;
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not open %s: %s", state,
                       g_strerror (saved));
          return NULL;
        }
      incoming = g_strdup_printf ("fd:%d",
                                  mv_jail_pass_fd (spec->jail, mv_jail_take_fd (spec->jail, fd)));
    }
  else if (state)
    {
      g_autofree char *quoted = g_shell_quote (state);
      incoming = g_strconcat ("exec:cat ", quoted, NULL);
    }
  argv = build_argv (self, socket_path, spec, incoming, error);
  if (!argv)
    return NULL;
  MvProcessOptions options = { .jail = spec->jail, .console_log = spec->console.path,
                               .cgroup = spec->cgroup,
                               .memlock_bytes = mv_vm_spec_memlock_bytes (spec) };
  *vmm = mv_process_start_with (socket_path, (const char *const *) argv->pdata, &options,
                                SERVE_TIMEOUT_MS, error);
  if (!*vmm)
    return NULL;
  return hypervisor_new (socket_path);
}

/* Ends a VMM that came up but cannot go on. */
static void
give_up (MvProcess **vmm)
{
  if (*vmm && !mv_process_wait (*vmm, 0))
    mv_process_kill (*vmm, NULL);
  g_clear_pointer (vmm, mv_process_free);
}

static MvHypervisor *
qemu_start_vm (MvStarter *starter, const char *socket_path, const MvVmSpec *spec, MvProcess **vmm,
               GError **error)
{
  g_autoptr (MvHypervisor) hv = launch (self_of (starter), socket_path, spec, NULL, vmm, error);

  if (!hv || spec->cpu.affinity->len == 0)
    return g_steal_pointer (&hv);
  /* It waits, paused, for its vCPUs to be pinned. */
  if (!pin_vcpus (socket_path, (*vmm)->pid, spec->cpu.affinity, error) ||
      !run_command (socket_path, "cont", error))
    {
      give_up (vmm);
      return NULL;
    }
  return g_steal_pointer (&hv);
}

/* Waits for the incoming state to be loaded: QEMU then sits "paused"
 * (started with -S); a failed load ends it. */
static gboolean
wait_incoming (const char *socket_path, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) MIGRATE_TIMEOUT_MS * 1000;
  g_autoptr (MvQmp) qmp = qmp_connect (socket_path, error);

  if (!qmp)
    return FALSE;
  for (;;)
    {
      const char *status = query_status (qmp, error);

      if (!status)
        return FALSE;
      if (g_str_equal (status, "paused"))
        return TRUE;
      if (!g_str_equal (status, "inmigrate") && !g_str_equal (status, "prelaunch"))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "Restoring the guest's state left it %s rather than paused", status);
          return FALSE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "Restoring the guest's state did not finish within %d s",
                       MIGRATE_TIMEOUT_MS / 1000);
          return FALSE;
        }
      g_usleep (STATE_POLL_US);
    }
}

static MvHypervisor *
qemu_restore_vm (MvStarter *starter, const char *socket_path, const char *snapshot_dir,
                 const MvRestoreSpec *rspec, MvProcess **vmm, GError **error)
{
  QemuStarter *self = self_of (starter);
  g_autofree char *state = g_build_filename (snapshot_dir, STATE_FILE_NAME, NULL);
  g_autoptr (MvVmSpec) spec = mv_snapshot_vm_spec_load (snapshot_dir, error);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (MvProcess) process = NULL;

  if (!spec)
    return NULL;
  if (!g_file_test (state, G_FILE_TEST_IS_REGULAR))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "The snapshot in %s has no guest state (%s)", snapshot_dir, STATE_FILE_NAME);
      return NULL;
    }
  if (rspec->console.path)
    {
      g_free (spec->console.path);
      spec->console.path = g_strdup (rspec->console.path);
    }
  if (rspec->agent_socket && spec->agent.kind != MV_AGENT_CHANNEL_NONE)
    {
      g_free (spec->agent.socket_path);
      spec->agent.socket_path = g_strdup (rspec->agent_socket);
    }
  if (rspec->tap_device && spec->nets->len > 0)
    {
      MvNetConfig *net = spec->nets->pdata[0];
      g_free (net->tap_device);
      net->tap_device = g_strdup (rspec->tap_device);
    }
  if (rspec->mac && spec->nets->len > 0)
    {
      MvNetConfig *net = spec->nets->pdata[0];
      g_free (net->mac);
      net->mac = g_strdup (rspec->mac);
    }
  /* The command line names the disks; the state only their devices. */
  if (!mv_restore_spec_check_disks (rspec, spec->disks->len, error))
    return NULL;
  for (guint i = 0; rspec->disks && i < rspec->disks->len; i++)
    {
      MvDiskConfig *disk = spec->disks->pdata[i];
      const MvDiskConfig *given = rspec->disks->pdata[i];

      g_free (disk->path);
      disk->path = g_strdup (given->path);
      disk->own = given->own;
    }
  spec->jail = rspec->jail;
  spec->cgroup = rspec->cgroup;
  g_ptr_array_unref (spec->cpu.affinity);
  spec->cpu.affinity = mv_cpu_affinity_list_copy (rspec->cpu_affinity);

  hv = launch (self, socket_path, spec, state, &process, error);
  if (!hv)
    return NULL;
  if (!wait_incoming (socket_path, error))
    {
      if (!mv_process_wait (process, 1000))
        mv_process_kill (process, NULL);
      else if (error)
        {
          /* QEMU ends when it cannot load the state; its log says why. */
          g_clear_error (error);
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "The VMM ended while restoring the guest's state from %s", snapshot_dir);
        }
      return NULL;
    }
  /* Pinned as the machine is now, before the caller lets it run. */
  if (!pin_vcpus (socket_path, process->pid, rspec->cpu_affinity, error))
    {
      give_up (&process);
      return NULL;
    }
  *vmm = g_steal_pointer (&process);
  return g_steal_pointer (&hv);
}

static MvHypervisor *
qemu_connect (MvStarter *starter, const char *socket_path, GError **error)
{
  g_autoptr (MvQmp) qmp = qmp_connect (socket_path, error);

  if (!qmp)
    return NULL;
  return hypervisor_new (socket_path);
}

static MvCapabilities
qemu_capabilities (MvStarter *starter)
{
  /* Hotplug is there for the machines started with room to grow (q35);
   * the others run on microvm, which has no PCI, so no hotplug and no
   * passthrough, and their resize is refused. vsock needs a host module
   * these hosts lack, so the agent uses virtio-serial. */
  return (MvCapabilities) {
    .snapshot = TRUE,
    .hotplug_memory = TRUE,
    .hotplug_cpu = TRUE,
    .cpu_affinity = TRUE,
    /* microvm has no dies. */
    .cpu_topology = MV_CPU_TOPOLOGIES_NO_DIES,
    .gpu_passthrough = TRUE,   /* vfio-pci, on q35 */
    .hotplug_devices = TRUE,   /* on q35 */
    .pause = TRUE,
    .disk_rate_limit = TRUE,
    .net_rate_limit = FALSE,
    .virtio_fs = TRUE,
  };
}

/* ---- events ---- */

static MvVmEnd
end_from_reason (const char *reason)
{
  if (g_str_equal (reason, "guest-shutdown"))
    return MV_VM_END_GUEST_POWEROFF;
  if (g_str_equal (reason, "guest-reset") || g_str_equal (reason, "guest-panic"))
    return MV_VM_END_GUEST_RESET;
  if (g_str_equal (reason, "host-qmp-quit") || g_str_equal (reason, "host-qmp-system-reset") ||
      g_str_equal (reason, "host-ui"))
    return MV_VM_END_HOST_REQUEST;
  if (g_str_equal (reason, "host-signal"))
    return MV_VM_END_HOST_SIGNAL;
  return MV_VM_END_UNKNOWN;
}

static gboolean
events_read (MvVmEvents *events, MvVmEnd *end)
{
  QemuEvents *self = (QemuEvents *) events;

  for (;;)
    {
      char chunk[4096];
      ssize_t n = read (events->fd, chunk, sizeof chunk);
      char *newline;

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return TRUE;
      if (n <= 0)
        return FALSE;
      g_string_append_len (self->buffer, chunk, n);
      while ((newline = memchr (self->buffer->str, '\n', self->buffer->len)))
        {
          gsize length = newline - self->buffer->str;
          g_autoptr (JsonObject) message = mv_qmp_parse_line (self->buffer->str, length);
          JsonObject *data;

          g_string_erase (self->buffer, 0, length + 1);
          if (!message ||
              g_strcmp0 (json_object_get_string_member_with_default (message, "event", ""),
                         "SHUTDOWN") != 0)
            continue;
          data = mv_json_get_object (message, "data");
          *end = end_from_reason (data ? json_object_get_string_member_with_default (data, "reason", "")
                                       : "");
        }
    }
}

static void
events_free (MvVmEvents *events)
{
  QemuEvents *self = (QemuEvents *) events;

  if (events->fd >= 0)
    close (events->fd);
  g_string_free (self->buffer, TRUE);
  g_free (self);
}

/* How long opening the events socket may wait for a full backlog. */
#define EVENTS_CONNECT_MS 200

static MvVmEvents *
qemu_open_events (MvStarter *starter, const char *socket_path, GError **error)
{
  g_autofree char *path = sibling_path (socket_path, EVENTS_SOCKET_NAME);
  static const char negotiate[] = "{\"execute\":\"qmp_capabilities\"}\n";
  g_autoptr (GError) local = NULL;
  QemuEvents *self;
  int fd;

  if (!mv_check_socket_path ("socket", path, error))
    return NULL;
  /* This runs on the main loop: a QEMU that hangs with its listen backlog
   * full holds it up for EVENTS_CONNECT_MS at most, not until it answers. */
  fd = mv_unix_connect (path, EVENTS_CONNECT_MS, &local);
  if (fd < 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "QMP events %s: %s", path,
                   local->message);
      return NULL;
    }
  /* The negotiation is sent unasked: QEMU reads it after its greeting,
   * and events flow from then on. */
  if (send (fd, negotiate, strlen (negotiate), MSG_NOSIGNAL) < 0 ||
      !g_unix_set_fd_nonblocking (fd, TRUE, NULL))
    {
      int saved = errno;
      close (fd);
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "QMP events %s: %s", path,
                   g_strerror (saved));
      return NULL;
    }
  self = g_new0 (QemuEvents, 1);
  self->buffer = g_string_new (NULL);
  self->events.fd = fd;
  self->events.data = self;
  self->events.read = events_read;
  self->events.free = events_free;
  return &self->events;
}

static void
qemu_cleanup (MvStarter *starter, const char *socket_path)
{
  g_autofree char *events = sibling_path (socket_path, EVENTS_SOCKET_NAME);

  g_unlink (socket_path);
  g_unlink (events);
}

static void
qemu_free (MvStarter *starter)
{
  QemuStarter *self = self_of (starter);

  g_free (self->binary_option);
  g_free (self->binary);
  mv_version_cache_unref (self->versions);
  g_free (self->accel);
  g_free (self->accel_why);
  g_free (self->default_args);
  g_free (self->version);
  g_mutex_clear (&self->lock);
  g_free (self);
}

static char *
resolve_binary (const char *binary)
{
  if (strchr (binary, '/'))
    return g_file_test (binary, G_FILE_TEST_IS_REGULAR) && g_access (binary, X_OK) == 0
      ? g_strdup (binary) : NULL;
  return g_find_program_in_path (binary);
}

MvStarter *
mv_qemu_starter_new (const MvQemuOptions *options, GError **error)
{
  const char *binary = options && options->binary && *options->binary ? options->binary
                                                                       : MV_QEMU_DEFAULT_BINARY;
  const char *accel = options && options->accel && *options->accel ? options->accel : "auto";
  QemuStarter *self;

  if (!g_str_equal (accel, "kvm") && !g_str_equal (accel, "tcg") && !g_str_equal (accel, "auto"))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "[qemu] accel: %s is not one of kvm, tcg, auto", accel);
      return NULL;
    }

  self = g_new0 (QemuStarter, 1);
  g_mutex_init (&self->lock);
  self->binary_option = g_strdup (binary);
  self->binary = resolve_binary (binary);
  self->versions = options && options->versions ? mv_version_cache_ref (options->versions) : NULL;
  if (g_str_equal (accel, "auto"))
    {
      self->accel = g_strdup (mv_qemu_pick_accel ("/sys/module", "/proc/cpuinfo", "/dev/kvm",
                                                  &self->accel_why));
    }
  else
    {
      self->accel = g_strdup (accel);
      self->accel_why = g_strdup ("set in the configuration ([qemu] accel)");
    }
  g_message ("qemu: guests run under %s: %s", self->accel, self->accel_why);
  self->default_args = g_str_equal (self->accel, "tcg")
    ? g_strdup (DEFAULT_KERNEL_ARGS " " TCG_TSC_ARG) : g_strdup (DEFAULT_KERNEL_ARGS);

  self->starter.type = MV_QEMU_TYPE;
  self->starter.socket_name = SOCKET_NAME;
  self->starter.data = self;
  self->starter.version = qemu_version;
  self->starter.default_kernel_args = qemu_default_kernel_args;
  self->starter.power_off_ends_vm = qemu_power_off_ends_vm;
  self->starter.check = qemu_check;
  self->starter.start_vm = qemu_start_vm;
  self->starter.restore_vm = qemu_restore_vm;
  self->starter.connect = qemu_connect;
  self->starter.capabilities = qemu_capabilities;
  self->starter.open_events = qemu_open_events;
  self->starter.cleanup = qemu_cleanup;
  self->starter.free = qemu_free;
  return &self->starter;
}

const char *
mv_qemu_starter_binary (MvStarter *starter)
{
  return self_of (starter)->binary;
}

const char *
mv_qemu_starter_accel (MvStarter *starter, const char **why)
{
  if (why)
    *why = self_of (starter)->accel_why;
  return self_of (starter)->accel;
}
