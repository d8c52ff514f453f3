/* A frozen guest restored as new machines takes each one's identity
 * (MvRuntime.reidentify_guest): microvmd's kernel, initramfs and agent
 * with the busybox root disk under QEMU/TCG, a TAP each in a network
 * namespace of the test's own (run as root). Two copies of one frozen
 * guest get their own hostname, MAC, address, MTU and default route, and
 * their agents report the host's entropy mixed in and the kernel's
 * generator reseeded (the answer's "entropy" is both ioctls done in the
 * guest). Their /dev/urandom is compared too, though that alone proves
 * little here: under TCG two copies left alone drift apart within
 * seconds, as the kernel reseeds often in its first minutes. */
#include "hv-test.h"
#include "core/errors.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define BOOT_CONFIG "[lifecycle]\nboot-timeout-seconds=90\nstop-timeout-seconds=30\n" \
                    "[sandbox]\nenabled=false\n"

/* What the runtime logged, to hear the agents' answers. */
static GPtrArray *logged;

static const char *
field_text (const GLogField *field)
{
  return field->length < 0 ? field->value : "";
}

/* Keeps "MACHINE_ID: MESSAGE" of each line a machine's log has. */
static GLogWriterOutput
capture_log (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  const char *message = NULL, *machine = NULL;

  for (gsize i = 0; i < n_fields; i++)
    if (strcmp (fields[i].key, "MESSAGE") == 0)
      message = field_text (&fields[i]);
    else if (strcmp (fields[i].key, MV_LOG_FIELD_MACHINE_ID) == 0)
      machine = field_text (&fields[i]);
  if (message && machine)
    g_ptr_array_add (logged, g_strdup_printf ("%s: %s", machine, message));
  return g_log_writer_default (level, fields, n_fields, data);
}

static void
make_tap (const char *name)
{
  struct ifreq ifr = { 0 };
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  strncpy (ifr.ifr_name, name, IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  g_assert_cmpint (ioctl (fd, TUNSETIFF, &ifr), ==, 0);
  g_assert_cmpint (ioctl (fd, TUNSETPERSIST, 1), ==, 0);
  close (fd);
}

static MvRuntime *
runtime (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *rootfs_dir = g_path_get_dirname (g_getenv ("MICROVMD_TEST_ROOTFS"));
  g_autofree char *config = g_strdup_printf ("%s[guest]\nkernel=%s\ninitramfs=%s\n"
                                             "[paths]\nallowed-directories=%s\n",
                                             BOOT_CONFIG, g_getenv ("MICROVMD_TEST_AGENT_KERNEL"),
                                             g_getenv ("MICROVMD_TEST_AGENT_INITRAMFS"),
                                             rootfs_dir);
  MvRuntime *rt = hv_test_qemu_runtime (config, &error);

  g_assert_no_error (error);
  return rt;
}

/* A machine booting microvmd's guest files from the busybox root disk. */
static MvSpec *
machine_spec (const char *name)
{
  MvSpec *spec = mv_spec_new ();
  MvDisk *disk = g_new0 (MvDisk, 1);

  spec->name = g_strdup (name);
  spec->memory_bytes = 256 * 1024 * 1024;
  spec->readiness = MV_READINESS_AGENT;
  disk->path = g_strdup (g_getenv ("MICROVMD_TEST_ROOTFS"));
  disk->read_only = TRUE;
  disk->root = TRUE;
  g_ptr_array_add (spec->disks, disk);
  return spec;
}

static MvNetworkAttachment *
attachment (const char *tap, const char *mac, const char *address, guint mtu)
{
  MvNetworkAttachment *net = g_new0 (MvNetworkAttachment, 1);

  net->network_id = g_strdup ("net");
  net->tap_device = g_strdup (tap);
  net->mac_address = g_strdup (mac);
  net->address = g_strdup (address);
  net->gateway = g_strdup ("10.9.0.1");
  net->mtu = mtu;
  return net;
}

/* Runs @command (sh -c) in @machine_id's guest, turning the main loop;
 * its stdout, and its status line in @status. */
static char *
run (MvRuntime *rt, const char *machine_id, const char *command, char **status)
{
  const char *argv[] = { "sh", "-c", command, NULL };
  MvRuntimeExec exec = { .argv = argv };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GString) line = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  gboolean out_open = TRUE, status_open = TRUE;
  int fds[4];

  g_assert_true (rt->exec (rt, machine_id, &exec, fds, &error));
  g_assert_no_error (error);
  close (fds[0]);
  close (fds[2]);
  g_unix_set_fd_nonblocking (fds[1], TRUE, NULL);
  g_unix_set_fd_nonblocking (fds[3], TRUE, NULL);
  while (out_open || status_open)
    {
      struct pollfd p[2] = { { .fd = out_open ? fds[1] : -1, .events = POLLIN },
                             { .fd = status_open ? fds[3] : -1, .events = POLLIN } };
      char chunk[4096];

      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      while (g_main_context_iteration (NULL, FALSE))
        ;
      if (poll (p, 2, 20) <= 0)
        continue;
      for (int i = 0; i < 2; i++)
        if (p[i].revents)
          {
            ssize_t n = read (p[i].fd, chunk, sizeof chunk);

            if (n < 0 && errno == EAGAIN)
              continue;
            if (n <= 0)
              *(i == 0 ? &out_open : &status_open) = FALSE;
            else
              g_string_append_len (i == 0 ? out : line, chunk, n);
          }
    }
  close (fds[1]);
  close (fds[3]);
  if (status)
    *status = g_strdup (g_strchomp (line->str));
  return g_strdup (g_strchomp (out->str));
}

static char *
run_ok (MvRuntime *rt, const char *machine_id, const char *command)
{
  g_autofree char *status = NULL;
  char *out = run (rt, machine_id, command, &status);

  g_test_message ("%s: %s -> %s [%s]", machine_id, command, out, status);
  g_assert_cmpstr (status, ==, "exit 0");
  return out;
}

/* Turns the main loop until the runtime has logged a line holding @text. */
static const char *
wait_logged (const char *text, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      for (guint i = 0; i < logged->len; i++)
        if (strstr (logged->pdata[i], text))
          return logged->pdata[i];
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (20 * 1000);
    }
}

typedef struct {
  const char          *id;
  MvSpec              *spec;
  MvNetworkAttachment *net;
  char                *dir;
  JsonObject          *vmm;
  MvRuntimeRequest     req;
} Machine;

static void
machine_init (Machine *m, const char *id, const char *tap, const char *mac, const char *address,
              guint mtu)
{
  m->id = id;
  m->spec = machine_spec (id);
  m->net = attachment (tap, mac, address, mtu);
  m->dir = hv_test_make_dir ();
  m->req = (MvRuntimeRequest) { .machine_id = id, .spec = m->spec, .runtime_dir = m->dir,
                                .network = m->net };
}

static void
machine_end (MvRuntime *rt, Machine *m)
{
  g_autoptr (GError) error = NULL;

  rt->detach_guest (rt, m->id);
  if (m->vmm)
    g_assert_true (rt->stop (rt, &m->req, TRUE, &error));
  g_assert_no_error (error);
  rt->destroy (rt, &m->req, NULL);
  hv_test_remove_tree (m->dir);
  g_free (m->dir);
  g_clear_pointer (&m->vmm, json_object_unref);
  mv_network_attachment_free (m->net);
  mv_spec_free (m->spec);
}

/* A copy of the frozen guest in @state_dir as @m, told who it is. */
static void
restore_as (MvRuntime *rt, Machine *m, const char *state_dir)
{
  g_autoptr (GError) error = NULL;

  m->vmm = rt->restore (rt, &m->req, state_dir, &error);
  g_assert_no_error (error);
  m->req.vmm = m->vmm;
  rt->attach_guest (rt, &m->req);
  g_assert_true (rt->reidentify_guest (rt, &m->req, &error));
  g_assert_no_error (error);
}

static void
assert_identity (MvRuntime *rt, Machine *m, const char *mac, const char *address, guint mtu)
{
  g_autofree char *hostname = run_ok (rt, m->id, "hostname");
  g_autofree char *iface = run_ok (rt, m->id, "ls /sys/class/net | grep -v '^lo$'");
  g_autofree char *mac_cmd = g_strdup_printf ("cat /sys/class/net/%s/address", iface);
  g_autofree char *mtu_cmd = g_strdup_printf ("cat /sys/class/net/%s/mtu", iface);
  g_autofree char *got_mac = run_ok (rt, m->id, mac_cmd);
  g_autofree char *got_mtu = run_ok (rt, m->id, mtu_cmd);
  g_autofree char *addr = run_ok (rt, m->id, "ip -4 addr show");
  g_autofree char *route = run_ok (rt, m->id, "ip route show default");
  g_autofree char *mtu_text = g_strdup_printf ("%u", mtu);
  g_autofree char *inet = g_strdup_printf ("inet %s ", address);

  g_assert_cmpstr (hostname, ==, m->id);
  g_assert_cmpstr (got_mac, ==, mac);
  g_assert_cmpstr (got_mtu, ==, mtu_text);
  g_assert_nonnull (strstr (addr, inet));
  /* The address it was frozen with is gone. */
  g_assert_null (strstr (addr, "10.9.0.11/"));
  g_assert_nonnull (strstr (route, "default via 10.9.0.1"));
}

static void
test_reidentify_copies (void)
{
  g_autoptr (MvRuntime) rt = runtime ();
  g_autoptr (GError) error = NULL;
  g_autofree char *state_dir = hv_test_make_dir ();
  g_autofree char *hostname = NULL, *random_a = NULL, *random_b = NULL;
  const char *said;
  Machine orig, a, b;

  /* The machine frozen, with its own name and address. */
  machine_init (&orig, "orig", "mvreid0", "02:00:0a:09:00:0b", "10.9.0.11/24", 1500);
  orig.vmm = rt->start (rt, &orig.req, &error);
  g_assert_no_error (error);
  orig.req.vmm = orig.vmm;
  rt->attach_guest (rt, &orig.req);
  hostname = run_ok (rt, "orig", "hostname");
  g_assert_cmpstr (hostname, ==, "orig");
  g_assert_true (rt->save (rt, &orig.req, state_dir, &error));
  g_assert_no_error (error);
  /* Its VMM is gone with the save. */
  orig.req.vmm = NULL;
  g_clear_pointer (&orig.vmm, json_object_unref);
  machine_end (rt, &orig);

  /* Two machines from it, each told its identity as soon as its agent
   * answers on the new VMM. */
  machine_init (&a, "copy-a", "mvreid1", "02:00:0a:09:00:16", "10.9.0.22/24", 1400);
  machine_init (&b, "copy-b", "mvreid2", "02:00:0a:09:00:21", "10.9.1.33/16", 1300);
  restore_as (rt, &a, state_dir);
  restore_as (rt, &b, state_dir);

  /* Each agent mixed the entropy in and reseeded (the answer's
   * "entropy" is both ioctls done), and changed all the rest but the
   * name server, which is the same gateway. */
  for (const char *const *id = (const char *const[]) { "copy-a", "copy-b", NULL }; *id; id++)
    {
      g_autofree char *text = g_strdup_printf ("%s: The restored guest took its identity", *id);

      said = wait_logged (text, 60);
      for (const char *const *what = (const char *const[]) { "entropy", "hostname", "mac", "mtu",
                                                             "address", NULL }; *what; what++)
        {
          g_autofree char *word = g_strdup_printf (" %s,", *what);
          g_autofree char *last = g_strdup_printf (" %s)", *what);

          if (!strstr (said, word) && !strstr (said, last))
            g_error ("%s does not say %s", said, *what);
        }
    }
  assert_identity (rt, &a, "02:00:0a:09:00:16", "10.9.0.22/24", 1400);
  assert_identity (rt, &b, "02:00:0a:09:00:21", "10.9.1.33/16", 1300);

  random_a = run_ok (rt, "copy-a", "head -c 32 /dev/urandom | od -An -tx1");
  random_b = run_ok (rt, "copy-b", "head -c 32 /dev/urandom | od -An -tx1");
  g_assert_cmpuint (strlen (random_a), >, 64);
  g_assert_cmpstr (random_a, !=, random_b);

  machine_end (rt, &a);
  machine_end (rt, &b);
  hv_test_remove_tree (state_dir);
}

/* What the workload of a machine started from the template records: the
 * hostname it started under and random bytes it read at once. */
#define SEEN_WORKLOAD "hostname > /run/seen; head -c 16 /dev/urandom | od -An -tx1 > /run/rand; " \
                      "exec sleep 100000"

static void
set_workload (MvSpec *spec)
{
  const char *const argv[] = { "sh", "-c", SEEN_WORKLOAD, NULL };

  g_strfreev (spec->cmd);
  spec->cmd = g_strdupv ((char **) argv);
}

/* A warm template (MvRuntimeRequest.build_template) boots the root alone:
 * none of its machine's identity, network or workload. Restored
 * (from_template) as two machines, each is told who it is before its
 * workload starts, which then sees its own hostname, address and random
 * state. */
static void
test_template_copies (void)
{
  g_autoptr (MvRuntime) rt = runtime ();
  g_autoptr (GError) error = NULL;
  g_autofree char *state_dir = hv_test_make_dir ();
  g_autofree char *hostname = NULL, *ran = NULL, *addr = NULL;
  g_autofree char *seen_a = NULL, *seen_b = NULL, *rand_a = NULL, *rand_b = NULL;
  const char *wait_seen = "while [ ! -s /run/rand ]; do sleep 0.1; done; cat /run/seen";
  Machine tmpl, a, b;

  machine_init (&tmpl, "tmpl", "mvreid0", "02:00:0a:09:00:0b", "10.9.0.11/24", 1500);
  set_workload (tmpl.spec);
  tmpl.req.build_template = TRUE;
  tmpl.vmm = rt->start (rt, &tmpl.req, &error);
  g_assert_no_error (error);
  tmpl.req.vmm = tmpl.vmm;
  rt->attach_guest (rt, &tmpl.req);
  hostname = run_ok (rt, "tmpl", "hostname");
  g_assert_cmpstr (hostname, !=, "tmpl");
  ran = run_ok (rt, "tmpl", "ls /run/seen 2>&1 || true");
  g_assert_nonnull (strstr (ran, "No such file"));
  addr = run_ok (rt, "tmpl", "ip -4 addr show");
  g_assert_null (strstr (addr, "10.9.0.11"));
  g_assert_true (rt->save (rt, &tmpl.req, state_dir, &error));
  g_assert_no_error (error);
  tmpl.req.vmm = NULL;
  g_clear_pointer (&tmpl.vmm, json_object_unref);
  machine_end (rt, &tmpl);

  machine_init (&a, "warm-a", "mvreid1", "02:00:0a:09:00:16", "10.9.0.22/24", 1400);
  machine_init (&b, "warm-b", "mvreid2", "02:00:0a:09:00:21", "10.9.1.33/16", 1300);
  for (Machine *m = &a; m; m = m == &a ? &b : NULL)
    {
      set_workload (m->spec);
      m->req.from_template = TRUE;
      m->vmm = rt->restore (rt, &m->req, state_dir, &error);
      g_assert_no_error (error);
      m->req.vmm = m->vmm;
      rt->attach_guest (rt, &m->req);
    }
  seen_a = run_ok (rt, "warm-a", wait_seen);
  seen_b = run_ok (rt, "warm-b", wait_seen);
  g_assert_cmpstr (seen_a, ==, "warm-a");
  g_assert_cmpstr (seen_b, ==, "warm-b");
  assert_identity (rt, &a, "02:00:0a:09:00:16", "10.9.0.22/24", 1400);
  assert_identity (rt, &b, "02:00:0a:09:00:21", "10.9.1.33/16", 1300);
  rand_a = run_ok (rt, "warm-a", "cat /run/rand");
  rand_b = run_ok (rt, "warm-b", "cat /run/rand");
  g_assert_cmpuint (strlen (rand_a), >, 32);
  g_assert_cmpstr (rand_a, !=, rand_b);

  machine_end (rt, &a);
  machine_end (rt, &b);
  hv_test_remove_tree (state_dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  logged = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (capture_log, NULL, NULL);
  /* The TAPs live in a network namespace of the test's own, which the
   * VMMs it starts share. */
  if (geteuid () != 0 || unshare (CLONE_NEWNET) != 0)
    {
      g_test_skip ("needs root for a network namespace of its own");
      return g_test_run ();
    }
  make_tap ("mvreid0");
  make_tap ("mvreid1");
  make_tap ("mvreid2");
  g_test_add_func ("/hypervisor/qemu/reidentify-copies", test_reidentify_copies);
  g_test_add_func ("/hypervisor/qemu/template-copies", test_template_copies);
  return g_test_run ();
}
