/* The wall around every VMM (src/hypervisor/jail.h), through the daemon,
 * for real QEMU under TCG and both test VMMs: each runs as a user of its
 * own with no capabilities and NoNewPrivs (QEMU also under its seccomp
 * filter), in a mount namespace where the host's secrets, the state
 * directory and other machines are not there; host paths outside the
 * allowed directories are refused at create; runtime files are 0600
 * whatever the daemon's umask; what a start granted is taken back. */
#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

static char *guest_kernel;
static char *guest_initrd;

typedef struct {
  const char *type;
  char       *config;
} Case;

static const char lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=30\n"
  "stop-timeout-seconds=10\n"
  "standby-min-seconds=1\n";

/* What status.json records of a machine's VMM. */
typedef struct {
  int    pid;
  gint64 uid;
  gint64 gid;
} Identity;

static void
case_setup (Fixture *f, gconstpointer data)
{
  fixture_setup (f, ((const Case *) data)->config);
}

static void
case_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static char *
spec_of (const Case *c, const char *name, const char *kernel, const char *extra)
{
  return guest_spec_json (c->type, name, kernel ? kernel : guest_kernel, guest_initrd, extra);
}

static char *
machine_id (Fixture *f, const char *path)
{
  return client_get_string (f->client, path, "Id");
}

static Identity
identity_of (Fixture *f, const char *path)
{
  g_autofree char *id = machine_id (f, path);
  g_autofree char *file = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                            "status.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  Identity identity = { 0, -1, -1 };
  JsonObject *vmm;

  g_assert_true (json_parser_load_from_file (parser, file, NULL));
  vmm = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                       "vmm");
  g_assert_nonnull (vmm);
  identity.pid = (int) json_object_get_int_member (vmm, "pid");
  identity.uid = json_object_get_int_member_with_default (vmm, "uid", -1);
  identity.gid = json_object_get_int_member_with_default (vmm, "gid", -1);
  return identity;
}

/* The value of @key in /proc/@pid/status. */
static char *
proc_status (int pid, const char *key)
{
  g_autofree char *file = g_strdup_printf ("/proc/%d/status", pid);
  g_autofree char *text = NULL;
  g_autofree char *needle = g_strdup_printf ("\n%s:", key);
  const char *p;

  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  p = strstr (text, needle);
  g_assert_nonnull (p);
  p += strlen (needle);
  while (*p == ' ' || *p == '\t')
    p++;
  return g_strndup (p, strcspn (p, "\n"));
}

static char *
ns_of (int pid)
{
  g_autofree char *link = g_strdup_printf ("/proc/%d/ns/mnt", pid);
  char *ns = g_file_read_link (link, NULL);

  g_assert_nonnull (ns);
  return ns;
}

/* Runs @argv inside the VMM's mount namespace as its user, as a VMM that
 * was taken over would; returns the exit status. */
static int
run_as_vmm (Fixture *f, const Identity *vmm, const char *const *argv)
{
  g_autoptr (GPtrArray) full = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL, *err = NULL;
  int status;

  g_ptr_array_add (full, g_strdup ("nsenter"));
  g_ptr_array_add (full, g_strdup_printf ("--target=%d", vmm->pid));
  g_ptr_array_add (full, g_strdup ("--mount"));
  g_ptr_array_add (full, g_strdup ("--"));
  g_ptr_array_add (full, g_strdup ("/usr/bin/setpriv"));
  g_ptr_array_add (full, g_strdup_printf ("--reuid=%" G_GINT64_FORMAT, vmm->uid));
  g_ptr_array_add (full, g_strdup_printf ("--regid=%" G_GINT64_FORMAT, vmm->gid));
  g_ptr_array_add (full, g_strdup ("--clear-groups"));
  for (guint i = 0; argv[i]; i++)
    g_ptr_array_add (full, g_strdup (argv[i]));
  g_ptr_array_add (full, NULL);
  status = mv_test_env_run (f->env, (const char *const *) full->pdata, &out, &err);
  {
    g_autofree char *command = g_strjoinv (" ", (char **) argv);
    g_test_message ("as VMM %d: %s -> %d %s", vmm->pid, command, status, err ? err : "");
  }
  return status;
}

static gboolean
vmm_sees (Fixture *f, const Identity *vmm, const char *path)
{
  const char *argv[] = { "/usr/bin/test", "-e", path, NULL };

  return run_as_vmm (f, vmm, argv) == 0;
}

static gboolean
vmm_reads (Fixture *f, const Identity *vmm, const char *path)
{
  const char *argv[] = { "/usr/bin/head", "-c", "1", path, NULL };

  return run_as_vmm (f, vmm, argv) == 0;
}

static gboolean
vmm_writes (Fixture *f, const Identity *vmm, const char *path)
{
  const char *argv[] = { "/usr/bin/dd", "if=/dev/zero", "count=1", "bs=1", "conv=notrunc",
                         g_strdup_printf ("of=%s", path), NULL };
  gboolean ok = run_as_vmm (f, vmm, argv) == 0;

  g_free ((char *) argv[5]);
  return ok;
}

/* Whether @pid has @path open. */
static gboolean
holds_file (int pid, const char *path)
{
  g_autofree char *fds = g_strdup_printf ("/proc/%d/fd", pid);
  g_autoptr (GDir) d = g_dir_open (fds, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *link = g_build_filename (fds, name, NULL);
      g_autofree char *target = g_file_read_link (link, NULL);

      if (g_strcmp0 (target, path) == 0)
        return TRUE;
    }
  return FALSE;
}

static void
assert_walled (const Case *c, const Identity *vmm)
{
  g_autofree char *uid = g_strdup_printf ("%" G_GINT64_FORMAT, vmm->uid);
  g_autofree char *uids = proc_status (vmm->pid, "Uid");
  g_autofree char *gids = proc_status (vmm->pid, "Gid");
  g_auto (GStrv) u = g_strsplit_set (uids, " \t", -1);
  g_auto (GStrv) g = g_strsplit_set (gids, " \t", -1);
  const char *zero_caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };

  g_assert_cmpint (vmm->uid, >, 0);
  g_assert_cmpint (vmm->gid, >, 0);
  /* Real, effective, saved and file system IDs, all of them. */
  g_assert_cmpuint (g_strv_length (u), ==, 4);
  for (guint i = 0; i < 4; i++)
    {
      g_assert_cmpint (g_ascii_strtoll (u[i], NULL, 10), ==, vmm->uid);
      g_assert_cmpint (g_ascii_strtoll (g[i], NULL, 10), ==, vmm->gid);
    }
  for (guint i = 0; i < G_N_ELEMENTS (zero_caps); i++)
    {
      g_autofree char *caps = proc_status (vmm->pid, zero_caps[i]);
      g_assert_cmpstr (caps, ==, "0000000000000000");
    }
  {
    g_autofree char *nnp = proc_status (vmm->pid, "NoNewPrivs");
    g_autofree char *groups = proc_status (vmm->pid, "Groups");
    g_assert_cmpstr (nnp, ==, "1");
    g_assert_cmpstr (groups, ==, "");
  }
  if (g_str_equal (c->type, "qemu"))
    {
      g_autofree char *seccomp = proc_status (vmm->pid, "Seccomp");
      g_assert_cmpstr (seccomp, ==, "2");
    }
}

/* The VMM's parent is the small program (microvmd-vmm-parent), not a
 * fork of the daemon that keeps the daemon's memory: root, but with
 * CAP_FOWNER alone (these machines have no TAP), and no way to more. */
static void
assert_vmm_parent (const Identity *vmm)
{
  g_autofree char *ppid = proc_status (vmm->pid, "PPid");
  int parent = atoi (ppid);
  g_autofree char *exe_link = g_strdup_printf ("/proc/%d/exe", parent);
  g_autofree char *exe = g_file_read_link (exe_link, NULL);
  g_autofree char *built = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src",
                                             "hypervisor", "microvmd-vmm-parent", NULL);
  g_autofree char *uids = proc_status (parent, "Uid");
  g_autofree char *caps = proc_status (parent, "CapEff");
  g_autofree char *bounding = proc_status (parent, "CapBnd");
  g_autofree char *nnp = proc_status (parent, "NoNewPrivs");

  g_assert_cmpstr (exe, ==, built);
  g_assert_true (g_str_has_prefix (uids, "0\t"));
  g_assert_cmpstr (caps, ==, "0000000000000008");
  g_assert_cmpstr (bounding, ==, "0000000000000008");
  g_assert_cmpstr (nnp, ==, "1");
}

/* Two machines: each VMM its own user, no privileges, its own mount
 * namespace in which the other's runtime directory, the state directory
 * and the host's secrets are not there. */
static void
test_wall (Fixture *f, gconstpointer data)
{
  const Case *c = data;
  g_autofree char *spec_a = spec_of (c, "wall-a", NULL, NULL);
  g_autofree char *spec_b = spec_of (c, "wall-b", NULL, NULL);
  g_autofree char *a = client_create_ok (f->client, spec_a);
  g_autofree char *b = client_create_ok (f->client, spec_b);
  g_autofree char *dir_a = NULL, *dir_b = NULL, *console_a = NULL, *ns_a = NULL, *ns_b = NULL;
  g_autofree char *ns_self = ns_of (getpid ());
  g_autofree char *id_b = NULL, *record_b = NULL, *lease = NULL;
  Identity vmm_a, vmm_b;
  struct stat st;
  int fd;

  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");
  vmm_a = identity_of (f, a);
  vmm_b = identity_of (f, b);
  assert_walled (c, &vmm_a);
  assert_walled (c, &vmm_b);
  assert_vmm_parent (&vmm_a);
  g_assert_cmpint (vmm_a.uid, !=, vmm_b.uid);
  g_assert_cmpint (vmm_a.gid, !=, vmm_b.gid);

  ns_a = ns_of (vmm_a.pid);
  ns_b = ns_of (vmm_b.pid);
  g_assert_cmpstr (ns_a, !=, ns_self);
  g_assert_cmpstr (ns_a, !=, ns_b);

  dir_a = fixture_runtime_file (f, a, ".");
  dir_b = fixture_runtime_file (f, b, ".");
  console_a = fixture_runtime_file (f, a, "console.log");
  id_b = machine_id (f, b);
  record_b = g_build_filename (mv_test_env_state_dir (f->env), "machines", id_b, "config.json",
                               NULL);
  /* What it needs is there... */
  g_assert_true (vmm_sees (f, &vmm_a, console_a));
  g_assert_true (vmm_reads (f, &vmm_a, guest_kernel));
  /* ...and nothing else. */
  g_assert_false (vmm_sees (f, &vmm_a, dir_b));
  g_assert_false (vmm_sees (f, &vmm_a, mv_test_env_state_dir (f->env)));
  g_assert_false (vmm_sees (f, &vmm_a, record_b));
  g_assert_false (vmm_sees (f, &vmm_a, "/etc/shadow"));
  g_assert_false (vmm_reads (f, &vmm_a, "/etc/shadow"));
  g_assert_false (vmm_sees (f, &vmm_a, mv_test_env_config_path (f->env)));
  g_assert_false (vmm_sees (f, &vmm_a, "/root"));
  /* The kernel is shown read-only. */
  g_assert_false (vmm_writes (f, &vmm_a, guest_kernel));
  /* Its own processes only. */
  {
    g_autofree char *other = g_strdup_printf ("/proc/%d", vmm_b.pid);
    g_autofree char *daemon = g_strdup_printf ("/proc/%d", mv_test_env_daemon_pid (f->env));
    g_assert_false (vmm_sees (f, &vmm_a, other));
    g_assert_false (vmm_sees (f, &vmm_a, daemon));
  }

  /* Its runtime directory is its group's while it runs, root's after. */
  g_assert_cmpint (g_stat (dir_a, &st), ==, 0);
  g_assert_cmpuint (st.st_uid, ==, 0);
  g_assert_cmpuint (st.st_gid, ==, (guint) vmm_a.gid);
  g_assert_cmpuint (st.st_mode & 0007, ==, 0);

  client_call_ok (f->client, a, "Stop");
  g_assert_cmpint (g_stat (dir_a, &st), ==, 0);
  g_assert_cmpuint (st.st_uid, ==, 0);
  g_assert_cmpuint (st.st_gid, ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0700);
  /* Its UID is free again: nobody holds the lease. */
  lease = g_strdup_printf ("%s/%" G_GINT64_FORMAT ".lock", MV_UID_LEASE_DIR, vmm_a.uid);
  fd = open (lease, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_EX | LOCK_NB), ==, 0);
  close (fd);

  /* Adoption after a daemon restart finds the walled-in VMM, and Stop
   * ends it. */
  mv_test_env_stop_daemon (f->env, SIGKILL);
  mv_test_env_start_daemon (f->env, NULL);
  {
    g_autofree char *state = client_get_string (f->client, b, "State");
    Identity again = identity_of (f, b);
    g_assert_cmpstr (state, ==, "Running");
    g_assert_cmpint (again.pid, ==, vmm_b.pid);
    g_assert_cmpint (again.uid, ==, vmm_b.uid);
  }
  client_call_ok (f->client, b, "Stop");
  g_assert_cmpint (kill (vmm_b.pid, 0), <, 0);
}

/* Host files a machine may not have are refused at create, naming the
 * field, and nothing is left of the machine. */
static void
test_hostile_paths (Fixture *f, gconstpointer data)
{
  const Case *c = data;
  const char *images = mv_test_env_images_dir (f->env);
  g_autofree char *link = g_build_filename (images, "shadow-link", NULL);
  g_autofree char *device = g_build_filename (images, "loop0", NULL);
  g_autofree char *proc_link = g_build_filename (images, "mem-link", NULL);
  g_autofree char *known = NULL, *record = NULL;
  g_autofree char *known_path = NULL;
  struct {
    const char *field;
    char       *spec;
  } cases[8];
  guint n = 0;

  g_assert_cmpint (symlink ("/etc/shadow", link), ==, 0);
  g_assert_cmpint (symlink ("/proc/self/mem", proc_link), ==, 0);
  g_assert_cmpint (mknod (device, S_IFBLK | 0600, makedev (7, 0)), ==, 0);

  /* One machine, to aim at its records. */
  known = spec_of (c, "known", NULL, NULL);
  known_path = client_create_ok (f->client, known);
  {
    g_autofree char *id = machine_id (f, known_path);
    record = g_build_filename (mv_test_env_state_dir (f->env), "machines", id, "config.json",
                               NULL);
  }

  cases[n].field = "kernel";
  cases[n++].spec = spec_of (c, "bad", "/etc/shadow", NULL);
  cases[n].field = "disks[0].path";
  cases[n++].spec = spec_of (c, "bad", NULL, "\"disks\":[{\"path\":\"/etc/shadow\"}]");
  cases[n].field = "kernel";
  cases[n++].spec = spec_of (c, "bad", "/proc/self/mem", NULL);
  cases[n].field = "kernel";
  cases[n++].spec = spec_of (c, "bad", link, NULL);
  cases[n].field = "kernel";
  cases[n++].spec = spec_of (c, "bad", proc_link, NULL);
  cases[n].field = "disks[0].path";
  cases[n++].spec = g_strdup_printf ("{\"name\":\"bad\",\"hypervisor_type\":\"%s\","
                                     "\"kernel\":\"%s\",\"disks\":[{\"path\":\"%s\"}]}",
                                     c->type, guest_kernel, device);
  cases[n].field = "initrd";
  cases[n++].spec = g_strdup_printf ("{\"name\":\"bad\",\"hypervisor_type\":\"%s\","
                                     "\"kernel\":\"%s\",\"initrd\":\"%s\"}", c->type,
                                     guest_kernel, record);
  cases[n].field = "disks[1].path";
  cases[n++].spec = g_strdup_printf ("{\"name\":\"bad\",\"hypervisor_type\":\"%s\","
                                     "\"kernel\":\"%s\",\"disks\":[{\"path\":\"%s\","
                                     "\"read_only\":true},{\"path\":\"%s\"}]}", c->type,
                                     guest_kernel, guest_initrd, link);

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *err = NULL, *msg = NULL, *path = NULL;
      g_autofree char *prefix = g_strconcat (cases[i].field, ": ", NULL);

      path = client_create (f->client, cases[i].spec, 0, &err, &msg);
      g_test_message ("%s", msg ? msg : "(created)");
      g_assert_null (path);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (msg, prefix));
      g_free (cases[i].spec);
    }
  /* Only the one machine there was. */
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
}

/* With umask 0 in the daemon, what lies in a machine's runtime directory
 * is 0600 (directories and sockets the owner's alone); a writable disk the
 * VMM does not own is written through an ACL entry that Stop takes back,
 * and a kernel only root may read is shown to it read-only. */
static void
test_modes_and_grants (Fixture *f, gconstpointer data)
{
  const Case *c = data;
  const char *images = mv_test_env_images_dir (f->env);
  g_autofree char *disk = g_build_filename (images, "disk.img", NULL);
  g_autofree char *kernel = g_build_filename (images, "vmlinuz-root-only", NULL);
  g_autofree char *contents = NULL;
  g_autofree char *extra = g_strdup_printf ("\"disks\":[{\"path\":\"%s\"}]", disk);
  g_autofree char *spec = NULL, *path = NULL, *dir = NULL;
  g_autoptr (GDir) d = NULL;
  gsize length;
  const char *name;
  Identity vmm;
  struct stat st;
  char acl[256];
  mode_t saved;

  g_assert_true (g_file_get_contents (guest_kernel, &contents, &length, NULL));
  g_assert_true (g_file_set_contents_full (kernel, contents, length, G_FILE_SET_CONTENTS_NONE,
                                           0600, NULL));
  g_assert_true (g_file_set_contents_full (disk, "", 0, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
  g_assert_cmpint (truncate (disk, 1 << 20), ==, 0);

  mv_test_env_stop_daemon (f->env, SIGTERM);
  saved = umask (0);
  mv_test_env_start_daemon (f->env, NULL);
  umask (saved);

  spec = spec_of (c, "modes", kernel, extra);
  path = client_create_ok (f->client, spec);
  client_call_ok (f->client, path, "Start");
  vmm = identity_of (f, path);
  assert_walled (c, &vmm);

  dir = fixture_runtime_file (f, path, ".");
  d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)))
    {
      g_autofree char *file = g_build_filename (dir, name, NULL);

      g_assert_cmpint (lstat (file, &st), ==, 0);
      g_test_message ("%s %o %u", name, st.st_mode, st.st_uid);
      if (S_ISREG (st.st_mode))
        g_assert_cmpuint (st.st_mode & 07777, ==, 0600);
      else
        g_assert_cmpuint (st.st_mode & 0077, ==, 0);
    }

  if (g_str_equal (c->type, "qemu"))
    {
      /* QEMU has the disk as a descriptor the daemon opened: it is not
       * in its root at all, and the file is untouched. */
      g_assert_true (holds_file (vmm.pid, disk));
      g_assert_false (vmm_sees (f, &vmm, disk));
      g_assert_cmpint (getxattr (disk, "system.posix_acl_access", acl, sizeof acl), <, 0);
    }
  else
    {
      /* The VMM opens it by path: it may write it through an ACL entry
       * while it runs. */
      g_assert_cmpint (getxattr (disk, "system.posix_acl_access", acl, sizeof acl), >, 0);
      g_assert_true (vmm_writes (f, &vmm, disk));
    }
  g_assert_false (vmm_writes (f, &vmm, kernel));
  g_assert_true (vmm_reads (f, &vmm, kernel));

  client_call_ok (f->client, path, "Stop");
  g_assert_cmpint (getxattr (disk, "system.posix_acl_access", acl, sizeof acl), <, 0);
  g_assert_cmpint (errno, ==, ENODATA);
  g_assert_cmpint (g_stat (disk, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0600);
  g_assert_cmpint (g_stat (kernel, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0600);
  g_assert_cmpuint (st.st_uid, ==, 0);
}

/* A frozen guest is written by the walled-in VMM into the state
 * directory and is root's once it is there; the guest comes back. */
static void
test_standby (Fixture *f, gconstpointer data)
{
  const Case *c = data;
  g_autofree char *spec = spec_of (c, "frozen", NULL, NULL);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = machine_id (f, path);
  g_autofree char *saved = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                             MV_SAVED_STATE_NAME, NULL);
  g_autoptr (GDir) d = NULL;
  const char *name;
  struct stat st;
  guint files = 0;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Standby");
  d = g_dir_open (saved, 0, NULL);
  g_assert_nonnull (d);
  g_assert_cmpint (g_stat (saved, &st), ==, 0);
  g_assert_cmpuint (st.st_uid, ==, 0);
  while ((name = g_dir_read_name (d)))
    {
      g_autofree char *file = g_build_filename (saved, name, NULL);

      g_assert_cmpint (lstat (file, &st), ==, 0);
      g_assert_cmpuint (st.st_uid, ==, 0);
      g_assert_cmpuint (st.st_mode & 0077, ==, 0);
      files++;
    }
  g_assert_cmpuint (files, >, 0);
  client_call_ok (f->client, path, "Start");
  {
    Identity vmm = identity_of (f, path);
    assert_walled (c, &vmm);
  }
}

/* [sandbox] enabled=false, for measurement: the VMM runs as root. */
static void
test_sandbox_off (Fixture *f, gconstpointer data)
{
  const Case *c = data;
  g_autofree char *config = g_strconcat (c->config, "[sandbox]\nenabled=false\n", NULL);
  g_autofree char *spec = spec_of (c, "open", NULL, NULL);
  g_autofree char *path = NULL;
  Identity vmm;

  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_write_config (f->env, config);
  mv_test_env_start_daemon (f->env, NULL);
  path = client_create_ok (f->client, spec);
  client_call_ok (f->client, path, "Start");
  vmm = identity_of (f, path);
  g_assert_cmpint (vmm.uid, ==, -1);
  {
    g_autofree char *uids = proc_status (vmm.pid, "Uid");
    g_assert_true (g_str_has_prefix (uids, "0"));
  }
}

static Case cases[] = {
  { "qemu", NULL },
  { "cloud-hypervisor", NULL },
  { "firecracker", NULL },
};

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  guest_kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  guest_initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Case *c = &cases[i];

      c->config = guest_config (c->type, lifecycle_config);
#define ADD(name, fn)                                                                     \
      do {                                                                                \
        g_autofree char *test_path = g_strdup_printf ("/isolation/%s/%s", c->type, name);  \
        g_test_add (test_path, Fixture, c, case_setup, fn, case_teardown);               \
      } while (0)
      ADD ("wall", test_wall);
      ADD ("hostile-paths", test_hostile_paths);
      ADD ("modes-and-grants", test_modes_and_grants);
      ADD ("standby", test_standby);
      ADD ("sandbox-off", test_sandbox_off);
#undef ADD
    }
  int status = g_test_run ();
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_free (cases[i].config);
  g_free (guest_kernel);
  g_free (guest_initrd);
  return status;
}
