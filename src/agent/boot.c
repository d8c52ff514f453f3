/* PID 1's own work: the initramfs's file systems and modules, finding
 * the agent channel, the root disk under an overlay, the MOUNTs, the
 * power button, and handing PID 1 over to systemd. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#define NEW_ROOT   "/mnt/microvmd/root"
#define LOWER_DIR  "/mnt/microvmd/lower"
#define RW_DIR     "/mnt/microvmd/rw"
/* Ports, disks and the vsock device appear a little after their driver
 * loads; under TCG it can take a few seconds. */
#define DEVICE_WAIT_MS 8000

static void
mount_one (const char *source, const char *target, const char *type, unsigned long flags,
           const char *options)
{
  mkdir (target, 0755);
  if (mount (source, target, type, flags, options) < 0 && errno != EBUSY)
    agent_log ("mount %s on %s: %s", type, target, strerror (errno));
}

static void
load_modules (void)
{
  struct utsname u;
  char dir[512], list[600], line[1024], path[1600];
  unsigned loaded = 0, present = 0;
  FILE *f;

  uname (&u);
  snprintf (dir, sizeof dir, "/lib/modules/%s", u.release);
  snprintf (list, sizeof list, "%s/microvmd.load", dir);
  f = fopen (list, "re");
  if (!f)
    {
      agent_log ("modules: no %s (%s); none loaded", list, strerror (errno));
      return;
    }
  while (fgets (line, sizeof line, f))
    {
      int fd;

      line[strcspn (line, "\r\n")] = '\0';
      if (!line[0] || line[0] == '#')
        continue;
      snprintf (path, sizeof path, "%s/%s", dir, line);
      fd = open (path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        {
          agent_log ("modules: %s: %s", path, strerror (errno));
          continue;
        }
      if (syscall (SYS_finit_module, fd, "", 0) == 0)
        loaded++;
      else if (errno == EEXIST)
        present++;
      else
        agent_log ("modules: %s: %s", line, strerror (errno));
      close (fd);
    }
  fclose (f);
  agent_log ("modules: %u loaded, %u already there", loaded, present);
}

void
boot_early (void)
{
  int fd;

  mount_one ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  mount_one ("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  mount_one ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  mount_one ("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=0620,gid=5,ptmxmode=0666");
  mount_one ("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
  fd = open ("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0)
    agent.log_fd = fd;
  agent_log ("microvmd-agent %s starting as PID 1", AGENT_VERSION);
  load_modules ();
}

/* ---- the channel ---- */

static bool
find_serial_port (char *path, size_t size)
{
  DIR *d = opendir ("/sys/class/virtio-ports");
  struct dirent *de;
  bool found = false;

  if (!d)
    return false;
  while (!found && (de = readdir (d)))
    {
      char name_path[512], name[128] = "";
      FILE *f;

      if (de->d_name[0] == '.')
        continue;
      snprintf (name_path, sizeof name_path, "/sys/class/virtio-ports/%s/name", de->d_name);
      f = fopen (name_path, "re");
      if (!f)
        continue;
      if (fgets (name, sizeof name, f))
        name[strcspn (name, "\n")] = '\0';
      fclose (f);
      if (strcmp (name, AGENT_CHANNEL_NAME) == 0 &&
          (size_t) snprintf (path, size, "/dev/%s", de->d_name) < size)
        found = true;
    }
  closedir (d);
  return found;
}

/* A virtio device of this id is present (19: vsock). */
static bool
have_virtio_device (const char *id)
{
  DIR *d = opendir ("/sys/bus/virtio/devices");
  struct dirent *de;
  bool found = false;

  if (!d)
    return false;
  while (!found && (de = readdir (d)))
    {
      char path[512], value[32] = "";
      FILE *f;

      if (de->d_name[0] == '.')
        continue;
      snprintf (path, sizeof path, "/sys/bus/virtio/devices/%s/device", de->d_name);
      f = fopen (path, "re");
      if (!f)
        continue;
      if (fgets (value, sizeof value, f))
        value[strcspn (value, "\n")] = '\0';
      fclose (f);
      found = strcmp (value, id) == 0;
    }
  closedir (d);
  return found;
}

static bool
listen_vsock (void)
{
  struct sockaddr_vm addr = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
                              .svm_port = AGENT_VSOCK_PORT };
  int fd = socket (AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return false;
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 16) < 0)
    {
      agent_log ("vsock port %d: %s", AGENT_VSOCK_PORT, strerror (errno));
      close (fd);
      return false;
    }
  agent.listen_fd = fd;
  agent_log ("channel: vsock port %d", AGENT_VSOCK_PORT);
  return true;
}

bool
boot_open_channel (bool wait_for_ports)
{
  int64_t deadline = now_ms () + (wait_for_ports ? DEVICE_WAIT_MS : 0);

  for (;;)
    {
      if (find_serial_port (agent.serial_path, sizeof agent.serial_path))
        {
          agent.serial_fd = open (agent.serial_path, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
          if (agent.serial_fd >= 0)
            {
              agent.serial_hup = true;   /* the loop sees whether a host is there */
              agent_log ("channel: %s (%s)", agent.serial_path, AGENT_CHANNEL_NAME);
              return true;
            }
          agent_log ("%s: %s", agent.serial_path, strerror (errno));
        }
      /* 0x0013: a virtio vsock device; without one the named port may
       * still be on its way. */
      if (have_virtio_device ("0x0013") && listen_vsock ())
        return true;
      if (now_ms () >= deadline)
        break;
      usleep (100 * 1000);
    }
  if (listen_vsock ())
    return true;
  agent_log ("channel: neither a virtio-serial port named %s nor vsock", AGENT_CHANNEL_NAME);
  return false;
}

/* ---- the root ---- */

static bool
wait_for_path (const char *path)
{
  int64_t deadline = now_ms () + DEVICE_WAIT_MS;

  while (access (path, F_OK) < 0)
    {
      if (now_ms () >= deadline)
        return false;
      usleep (50 * 1000);
    }
  return true;
}

/* ext4 first, then every block file system the kernel offers. */
static bool
mount_root_device (const char *device, char *error, size_t size)
{
  char line[128];
  FILE *f;
  int err;

  if (mount (device, LOWER_DIR, "ext4", MS_RDONLY, NULL) == 0)
    return true;
  err = errno;
  f = fopen ("/proc/filesystems", "re");
  while (f && fgets (line, sizeof line, f))
    {
      char *type = line;

      line[strcspn (line, "\n")] = '\0';
      if (strncmp (line, "nodev", 5) == 0)
        continue;
      while (*type == ' ' || *type == '\t')
        type++;
      if (strcmp (type, "ext4") == 0 || !type[0])
        continue;
      if (mount (device, LOWER_DIR, type, MS_RDONLY, NULL) == 0)
        {
          fclose (f);
          agent_log ("root: %s is %s", device, type);
          return true;
        }
    }
  if (f)
    fclose (f);
  snprintf (error, size, "root: %s: cannot mount it read-only (ext4: %s)", device, strerror (err));
  return false;
}

static bool
copy_self (const char *target)
{
  char buf[65536];
  int in = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC), out;
  ssize_t n;

  if (in < 0)
    return false;
  out = open (target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0)
    {
      close (in);
      return false;
    }
  while ((n = read (in, buf, sizeof buf)) > 0)
    if (write (out, buf, (size_t) n) != n)
      {
        n = -1;
        break;
      }
  close (in);
  if (fchmod (out, 0755) < 0)
    n = -1;
  if (close (out) < 0)
    n = -1;
  return n == 0;
}

/* Where the root's changes go: the overlay disk, which keeps them from
 * one boot to the next, or memory. The disk's upper and work directories
 * are made at its first boot. */
static bool
mount_upper (const Config *config, char *error, size_t size)
{
  if (config->overlay)
    {
      if (!wait_for_path (config->overlay))
        {
          snprintf (error, size, "root: %s: the overlay disk is not in the guest", config->overlay);
          return false;
        }
      if (mount (config->overlay, RW_DIR, "ext4", MS_NOATIME, NULL) < 0)
        {
          snprintf (error, size, "root: the overlay disk %s: %s", config->overlay, strerror (errno));
          return false;
        }
    }
  else if (mount ("tmpfs", RW_DIR, "tmpfs", 0, "mode=0755") < 0)
    {
      snprintf (error, size, "root: the overlay's tmpfs: %s", strerror (errno));
      return false;
    }
  if ((mkdir (RW_DIR "/upper", 0755) < 0 && errno != EEXIST) ||
      (mkdir (RW_DIR "/work", 0755) < 0 && errno != EEXIST))
    {
      snprintf (error, size, "root: the overlay's directories: %s", strerror (errno));
      return false;
    }
  return true;
}

bool
boot_setup_root (const Config *config, char *error, size_t size)
{
  static const char *const moved[] = { "/dev", "/proc", "/sys", "/run" };
  char path[256];

  if (!wait_for_path (config->root))
    {
      snprintf (error, size, "root: %s: no such device in the guest", config->root);
      return false;
    }
  mkdir ("/mnt", 0755);
  mkdir ("/mnt/microvmd", 0755);
  mkdir (LOWER_DIR, 0755);
  mkdir (RW_DIR, 0755);
  mkdir (NEW_ROOT, 0755);
  if (!mount_root_device (config->root, error, size))
    return false;
  if (!mount_upper (config, error, size))
    return false;
  if (mount ("overlay", NEW_ROOT, "overlay", 0,
             "lowerdir=" LOWER_DIR ",upperdir=" RW_DIR "/upper,workdir=" RW_DIR "/work") < 0)
    {
      snprintf (error, size, "root: overlay: %s", strerror (errno));
      return false;
    }
  /* While /proc is still where it was; /run moves into the new root with
   * the copy in it. */
  mkdir (AGENT_STATE_DIR, 0755);
  if (!copy_self (AGENT_STATE_DIR "/microvmd-agent"))
    {
      snprintf (error, size, "root: copying the agent to %s: %s", AGENT_STATE_DIR, strerror (errno));
      return false;
    }
  for (size_t i = 0; i < sizeof moved / sizeof *moved; i++)
    {
      snprintf (path, sizeof path, NEW_ROOT "%s", moved[i]);
      mkdir (path, 0755);
      if (mount (moved[i], path, NULL, MS_MOVE, NULL) < 0)
        {
          snprintf (error, size, "root: moving %s: %s", moved[i], strerror (errno));
          return false;
        }
    }
  /* As switch_root does: the new root is moved onto / and entered. */
  if (chdir (NEW_ROOT) < 0 || mount (NEW_ROOT, "/", NULL, MS_MOVE, NULL) < 0 ||
      chroot (".") < 0 || chdir ("/") < 0)
    {
      snprintf (error, size, "root: switching into it: %s", strerror (errno));
      return false;
    }
  if (access ("/dev/pts/ptmx", F_OK) < 0)
    mount_one ("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=0620,gid=5,ptmxmode=0666");
  agent_log ("root: %s read-only under %s", config->root,
             config->overlay ? config->overlay : "a tmpfs overlay");
  return true;
}

/* An absolute path with no "." or ".." in it. */
static bool
target_ok (const char *target)
{
  if (target[0] != '/')
    return false;
  for (const char *p = target; *p;)
    {
      size_t len;

      while (*p == '/')
        p++;
      len = strcspn (p, "/");
      if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
        return false;
      p += len;
    }
  return strlen (target) > 1;
}

static bool
apply_mount (const MvAgentField *outer, char *error, size_t size)
{
  MvAgentFields fields;
  MvAgentField f, content = { .len = 0, .value = (const uint8_t *) "" };
  char type[16] = "", target[4096] = "", source[256] = "", options[128];
  uint32_t mode = 0, read_only = 0;
  uint64_t bytes = 0;

  mv_agent_fields_init (&fields, outer->value, outer->len);
  while (mv_agent_fields_next (&fields, &f) > 0)
    switch (f.tag)
      {
      case MV_AGENT_F_MOUNT_TYPE: mv_agent_field_str (&f, type, sizeof type); break;
      case MV_AGENT_F_TARGET: mv_agent_field_str (&f, target, sizeof target); break;
      case MV_AGENT_F_SOURCE: mv_agent_field_str (&f, source, sizeof source); break;
      case MV_AGENT_F_CONTENT: content = f; break;
      case MV_AGENT_F_MODE: mv_agent_field_u32 (&f, &mode); break;
      case MV_AGENT_F_SIZE: mv_agent_field_u64 (&f, &bytes); break;
      case MV_AGENT_F_READ_ONLY: mv_agent_field_u32 (&f, &read_only); break;
      default: break;
      }
  if (!target_ok (target))
    {
      snprintf (error, size, "mount: \"%s\": not an absolute path without . or ..", target);
      return false;
    }
  if (!mkdir_parents (target, 0755))
    {
      snprintf (error, size, "mount: %s: creating its parents: %s", target, strerror (errno));
      return false;
    }
  if (strcmp (type, "file") == 0)
    {
      if (!write_file_atomic (target, content.value, content.len, mode ? mode & 07777 : 0644))
        {
          snprintf (error, size, "mount: %s: %s", target, strerror (errno));
          return false;
        }
      /* A file is made read-only by a bind mount of itself: a bind
       * takes MS_RDONLY only when it is remounted. */
      if (read_only &&
          (mount (target, target, NULL, MS_BIND, NULL) < 0 ||
           mount (NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0))
        {
          snprintf (error, size, "mount: %s: making it read-only: %s", target, strerror (errno));
          return false;
        }
      agent_log ("mount: file %s (%u bytes%s)", target, content.len, read_only ? ", read-only" : "");
      return true;
    }
  if (strcmp (type, "tmpfs") == 0)
    {
      if (bytes)
        snprintf (options, sizeof options, "mode=%o,size=%llu", mode ? mode & 07777 : 01777,
                  (unsigned long long) bytes);
      else
        snprintf (options, sizeof options, "mode=%o", mode ? mode & 07777 : 01777);
      mkdir (target, 0755);
      /* A read-only tmpfs stays empty: it is what was asked for. */
      if (mount ("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0),
                 options) < 0)
        {
          snprintf (error, size, "mount: tmpfs on %s: %s", target, strerror (errno));
          return false;
        }
      agent_log ("mount: tmpfs %s (%s%s)", target, options, read_only ? ",ro" : "");
      return true;
    }
  if (strcmp (type, "directory") == 0)
    {
      if (!source[0])
        {
          snprintf (error, size, "mount: %s: a directory mount without a virtio-fs tag", target);
          return false;
        }
      mkdir (target, 0755);
      if (mount (source, target, "virtiofs", MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0),
                 NULL) < 0)
        {
          snprintf (error, size, "mount: %s: virtiofs %s: %s", target, source, strerror (errno));
          return false;
        }
      agent_log ("mount: virtiofs %s on %s%s", source, target, read_only ? " (read-only)" : "");
      return true;
    }
  if (strcmp (type, "volume") == 0)
    {
      /* A volume is an ext4 disk; its device appears once virtio-blk
       * has probed it. */
      if (strncmp (source, "/dev/", 5) != 0 || !wait_for_path (source))
        {
          snprintf (error, size, "mount: volume on %s: no device %s", target, source);
          return false;
        }
      mkdir (target, 0755);
      unsigned long flags = MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0);
      int ok = mount (source, target, "ext4", flags, NULL) == 0;
      /* A volume whose last writer ended without unmounting it has a
       * journal to replay, which a read-only disk cannot: it is read as
       * the last clean state. */
      if (!ok && read_only && errno == EROFS &&
          mount (source, target, "ext4", flags, "noload") == 0)
        {
          agent_log ("mount: volume %s was not cleanly unmounted; read without its journal",
                     source);
          ok = 1;
        }
      if (!ok)
        {
          snprintf (error, size, "mount: volume %s on %s: %s", source, target, strerror (errno));
          return false;
        }
      agent_log ("mount: volume %s on %s%s", source, target, read_only ? " (read-only)" : "");
      return true;
    }
  snprintf (error, size, "mount: %s: type \"%s\" is not file, tmpfs, directory or volume",
            target, type);
  return false;
}

/* Before the guest ends: each volume is unmounted (or, if something
 * still holds it, made read-only), so that the next machine finds its
 * journal clean. */
void
boot_release_volumes (const Config *config)
{
  MvAgentFields fields, inner;
  MvAgentField f, g;

  mv_agent_fields_init (&fields, config->raw, config->raw_len);
  while (mv_agent_fields_next (&fields, &f) > 0)
    {
      char type[16] = "", target[4096] = "";

      if (f.tag != MV_AGENT_F_MOUNT)
        continue;
      mv_agent_fields_init (&inner, f.value, f.len);
      while (mv_agent_fields_next (&inner, &g) > 0)
        if (g.tag == MV_AGENT_F_MOUNT_TYPE)
          mv_agent_field_str (&g, type, sizeof type);
        else if (g.tag == MV_AGENT_F_TARGET)
          mv_agent_field_str (&g, target, sizeof target);
      if (strcmp (type, "volume") != 0 || !target_ok (target))
        continue;
      if (umount (target) == 0)
        continue;
      if (mount (NULL, target, NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0)
        agent_log ("volume %s: neither unmounted nor made read-only: %s", target,
                   strerror (errno));
    }
}

bool
boot_apply_mounts (const Config *config, char *error, size_t size)
{
  MvAgentFields fields;
  MvAgentField f;

  mv_agent_fields_init (&fields, config->raw, config->raw_len);
  while (mv_agent_fields_next (&fields, &f) > 0)
    if (f.tag == MV_AGENT_F_MOUNT && !apply_mount (&f, error, size))
      return false;
  return true;
}

/* ---- the power button ---- */

void
boot_open_power_buttons (void)
{
  DIR *d = opendir ("/sys/class/input");
  struct dirent *de;

  if (!d)
    return;
  while ((de = readdir (d)) && agent.n_buttons < sizeof agent.button_fds / sizeof *agent.button_fds)
    {
      char path[512], name[128] = "";
      FILE *f;
      DIR *sub;
      struct dirent *ev;

      if (strncmp (de->d_name, "input", 5) != 0)
        continue;
      snprintf (path, sizeof path, "/sys/class/input/%s/name", de->d_name);
      f = fopen (path, "re");
      if (!f)
        continue;
      if (fgets (name, sizeof name, f))
        name[strcspn (name, "\n")] = '\0';
      fclose (f);
      if (strcmp (name, "Power Button") != 0)
        continue;
      snprintf (path, sizeof path, "/sys/class/input/%s", de->d_name);
      sub = opendir (path);
      while (sub && (ev = readdir (sub)))
        if (strncmp (ev->d_name, "event", 5) == 0)
          {
            char dev[300];
            int fd;

            snprintf (dev, sizeof dev, "/dev/input/%s", ev->d_name);
            fd = open (dev, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0)
              {
                agent.button_fds[agent.n_buttons++] = fd;
                agent_log ("power button: %s", dev);
              }
            break;
          }
      if (sub)
        closedir (sub);
    }
  closedir (d);
}

/* ---- systemd ---- */

/* Started with sysinit.target's first jobs (no default dependencies), so
 * that the host hears the guest before the rest of the boot is done; what
 * it says goes to the console too, as PID 1's did. */
static const char service_unit[] =
  "# Written by microvmd-agent at boot.\n"
  "[Unit]\n"
  "Description=microvmd guest agent\n"
  "DefaultDependencies=no\n"
  "\n"
  "[Service]\n"
  "ExecStart=" AGENT_STATE_DIR "/microvmd-agent --service\n"
  "Restart=always\n"
  "RestartSec=1\n"
  "StandardError=journal+console\n"
  "\n"
  "[Install]\n"
  "WantedBy=sysinit.target\n";

bool
boot_handoff_to_systemd (const Config *config, char *error, size_t size)
{
  const char *init = config->argv.len > 0 ? config->argv.items[0] : "/sbin/init";
  char *const default_argv[] = { (char *) "/sbin/init", NULL };
  sigset_t none;

  if (access (init, X_OK) < 0)
    {
      snprintf (error, size, "init: %s: %s", init, strerror (errno));
      return false;
    }
  if (!mkdir_parents ("/run/systemd/system/sysinit.target.wants/x", 0755) ||
      !write_file_atomic ("/run/systemd/system/microvmd-agent.service", service_unit,
                          sizeof service_unit - 1, 0644) ||
      (symlink ("../microvmd-agent.service",
                "/run/systemd/system/sysinit.target.wants/microvmd-agent.service") < 0 &&
       errno != EEXIST))
    {
      snprintf (error, size, "systemd: writing the agent's unit under /run/systemd/system: %s",
                strerror (errno));
      return false;
    }
  agent_log ("handing PID 1 over to %s", init);
  for (size_t i = agent.n_sessions; i-- > 0;)
    session_close (agent.sessions[i]);
  if (agent.serial_fd >= 0)
    close (agent.serial_fd);
  if (agent.listen_fd >= 0)
    close (agent.listen_fd);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  signal (SIGPIPE, SIG_DFL);
  execv (init, config->argv.len > 0 ? config->argv.items : default_argv);
  snprintf (error, size, "init: %s: %s", init, strerror (errno));
  agent_log ("%s", error);
  agent_end_guest ();
}
