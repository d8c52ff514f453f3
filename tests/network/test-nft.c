/* MvNft against the kernel's nftables, with real traffic.
 *
 * The test process moves into a network namespace of its own at start
 * (the "host"; the machine's own namespace is never touched) and builds:
 *
 *   client ns  10.78.0.2 --veth-- 10.78.0.1  host  bridge 10.77.0.1 --veth-- 10.77.0.2  guest ns
 *
 * with forwarding on in the host. The "guest" runs nc servers; the client
 * reaches them only through what MvNft publishes, and through the host's
 * forward path, where the machine's firewall rules apply; the host itself
 * connects through its output path. The wake log is read from NFLOG with
 * libnetfilter_log. The two other namespaces are named mvnft-PID-guest and
 * mvnft-PID-client, deleted at the end (and, for processes that are gone,
 * at the next start). */
#include "network/nft.h"
#include "core/errors.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libnetfilter_log/libnetfilter_log.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR    "/run/netns"
#define NS_PREFIX    "mvnft-"
#define BRIDGE       "mvtbr0"
#define HOST_BRIDGE_ADDRESS "10.77.0.1"
#define GUEST_TEXT   "10.77.0.2"
#define GUEST        0x0a4d0002u   /* 10.77.0.2 */
#define HOST_OUTSIDE_TEXT "10.78.0.1"
#define HOST_OUTSIDE 0x0a4e0001u   /* 10.78.0.1, the host's address towards the client */
#define CLIENT_TEXT  "10.78.0.2"
#define CLIENT       0x0a4e0002u
#define WAKE_GROUP   7
#define MACHINE      "m-1"

static char *guest_ns;
static char *client_ns;
static char *scratch_dir;

/* ----- commands ----- */

static int
run_argv (const char *const *argv,
          char             **out)
{
  g_autoptr (GError) error = NULL;
  int status;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | (out == NULL ? G_SPAWN_STDOUT_TO_DEV_NULL : 0),
                     NULL, NULL, out, NULL, &status, &error))
    g_error ("cannot run %s: %s", argv[0], error->message);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* Runs the NULL-terminated command in @ns (NULL: the test's own
 * namespace) and returns its exit status. */
static int G_GNUC_NULL_TERMINATED
run_in (const char *ns,
        ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  va_list args;
  const char *arg;

  if (ns != NULL)
    {
      g_ptr_array_add (argv, (gpointer) "ip");
      g_ptr_array_add (argv, (gpointer) "netns");
      g_ptr_array_add (argv, (gpointer) "exec");
      g_ptr_array_add (argv, (gpointer) ns);
    }
  va_start (args, ns);
  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);
  return run_argv ((const char *const *) argv->pdata, NULL);
}

#define must(ns, ...) g_assert_cmpint (run_in (ns, __VA_ARGS__, NULL), ==, 0)

static void
write_proc (const char *path,
            const char *value)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, value, strlen (value)), ==, (gssize) strlen (value));
  close (fd);
}

/* ----- the namespaces ----- */

/* Deletes the namespaces of test processes that are gone. */
static void
sweep_stale_namespaces (void)
{
  g_autoptr (GDir) dir = g_dir_open (NETNS_DIR, 0, NULL);
  const char *name;

  if (dir == NULL)
    return;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      guint64 pid;
      char *end;

      if (!g_str_has_prefix (name, NS_PREFIX))
        continue;
      pid = g_ascii_strtoull (name + strlen (NS_PREFIX), &end, 10);
      if (pid == 0 || *end != '-' || kill ((pid_t) pid, 0) == 0 || errno != ESRCH)
        continue;
      run_in (NULL, "ip", "netns", "delete", name, NULL);
    }
}

static void
add_peer_namespace (const char *ns,
                    const char *host_link,
                    const char *peer_link,
                    const char *peer_cidr,
                    const char *gateway)
{
  must (NULL, "ip", "netns", "add", ns);
  must (NULL, "ip", "link", "add", host_link, "type", "veth", "peer", "name", peer_link);
  must (NULL, "ip", "link", "set", peer_link, "netns", ns);
  must (ns, "ip", "link", "set", "lo", "up");
  must (ns, "ip", "addr", "add", peer_cidr, "dev", peer_link);
  must (ns, "ip", "link", "set", peer_link, "up");
  must (ns, "ip", "route", "add", "default", "via", gateway);
}

static void
build_topology (void)
{
  must (NULL, "ip", "link", "set", "lo", "up");
  must (NULL, "ip", "link", "add", BRIDGE, "type", "bridge");
  must (NULL, "ip", "addr", "add", HOST_BRIDGE_ADDRESS "/24", "dev", BRIDGE);
  must (NULL, "ip", "link", "set", BRIDGE, "up");
  add_peer_namespace (guest_ns, "mvtg0", "mvtg1", GUEST_TEXT "/24", HOST_BRIDGE_ADDRESS);
  must (NULL, "ip", "link", "set", "mvtg0", "master", BRIDGE);
  must (NULL, "ip", "link", "set", "mvtg0", "up");
  add_peer_namespace (client_ns, "mvtc0", "mvtc1", CLIENT_TEXT "/24", HOST_OUTSIDE_TEXT);
  must (NULL, "ip", "addr", "add", HOST_OUTSIDE_TEXT "/24", "dev", "mvtc0");
  must (NULL, "ip", "link", "set", "mvtc0", "up");
  /* /proc/sys/net is the reading process's namespace's. */
  write_proc ("/proc/sys/net/ipv4/ip_forward", "1");
}

/* ----- servers and clients ----- */

typedef struct {
  GPid  pid;
  char *output;   /* where its stdout and stderr go */
} Server;

/* A server dies with the test, also when an assertion aborts it. */
static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Starts `nc ARGS...` in @ns (NULL: the host) and waits until a socket of @protocol
 * ("-tln" or "-uln" for ss) listens on @port there. */
static Server *
server_start (const char  *ns,
              const char  *ss_kind,
              guint        port,
              const char **nc_args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autofree char *filter = g_strdup_printf ("sport = :%u", port);
  Server *server = g_new0 (Server, 1);
  int fd;

  server->output = g_strdup_printf ("%s/server-%u.out", scratch_dir, port);
  fd = open (server->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  g_assert_cmpint (fd, >=, 0);
  if (ns != NULL)
    for (const char *const *a = (const char *const[]) { "ip", "netns", "exec", ns, NULL }; *a != NULL; a++)
      g_ptr_array_add (argv, g_strdup (*a));
  g_ptr_array_add (argv, g_strdup ("nc"));
  for (const char **a = nc_args; *a != NULL; a++)
    g_ptr_array_add (argv, g_strdup (*a));
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async_with_pipes_and_fds (NULL, (const char *const *) argv->pdata, NULL,
                                         G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                                         die_with_parent, NULL, -1, fd, fd, NULL, NULL, 0,
                                         &server->pid, NULL, NULL, NULL, &error))
    g_error ("cannot start nc: %s", error->message);
  close (fd);

  for (int i = 0; i < 100; i++)
    {
      const char *in_ns[] = { "ip", "netns", "exec", ns, "ss", "-H", ss_kind, filter, NULL };
      const char *here[] = { "ss", "-H", ss_kind, filter, NULL };
      g_autofree char *out = NULL;

      g_assert_cmpint (run_argv (ns != NULL ? in_ns : here, &out), ==, 0);
      if (out != NULL && *g_strstrip (out) != '\0')
        return server;
      g_usleep (20 * 1000);
    }
  g_error ("nc did not listen on %u in %s", port, ns);
  return NULL;
}

static void
server_stop (Server *server)
{
  int status;

  kill (server->pid, SIGTERM);
  g_assert_cmpint (waitpid (server->pid, &status, 0), ==, server->pid);
  g_unlink (server->output);
  g_free (server->output);
  g_free (server);
}

static char *
server_output (Server *server)
{
  char *text = NULL;

  g_assert_true (g_file_get_contents (server->output, &text, NULL, NULL));
  return text;
}

/* A TCP connection from @ns (NULL: the host itself) to @address:@port
 * is made within a second. */
static gboolean
tcp_connects (const char *ns,
              const char *address,
              guint       port)
{
  g_autofree char *port_text = g_strdup_printf ("%u", port);

  return run_in (ns, "nc", "-z", "-w", "1", address, port_text, NULL) == 0;
}

/* Sends @word to @address:@port over UDP from @ns. */
static void
udp_send (const char *ns,
          const char *address,
          guint       port,
          const char *word)
{
  g_autofree char *port_text = g_strdup_printf ("%u", port);
  g_autofree char *script = g_strdup_printf ("echo %s | nc -u -w 1 %s %s", word, address, port_text);

  run_in (ns, "sh", "-c", script, NULL);
}

/* ----- the table as nft lists it ----- */

/* "chain comment" for every rule of the table that has a comment. */
static GStrv
table_rules (void)
{
  const char *argv[] = { "nft", "-j", "list", "table", "inet", MV_NFT_TABLE, NULL };
  g_autofree char *out = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GStrvBuilder) rules = g_strv_builder_new ();
  JsonArray *items;

  g_assert_cmpint (run_argv (argv, &out), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  items = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "nftables");
  for (guint i = 0; i < json_array_get_length (items); i++)
    {
      JsonObject *item = json_array_get_object_element (items, i);
      JsonObject *rule;

      if (!json_object_has_member (item, "rule"))
        continue;
      rule = json_object_get_object_member (item, "rule");
      if (json_object_has_member (rule, "comment"))
        {
          g_autofree char *entry = g_strdup_printf ("%s %s", json_object_get_string_member (rule, "chain"),
                                                    json_object_get_string_member (rule, "comment"));

          g_strv_builder_add (rules, entry);
        }
    }
  return g_strv_builder_end (rules);
}

static guint
count_rules (const char *chain,
             const char *comment)
{
  g_auto (GStrv) rules = table_rules ();
  g_autofree char *wanted = g_strdup_printf ("%s %s", chain, comment);
  guint n = 0;

  for (guint i = 0; rules[i] != NULL; i++)
    if ((chain == NULL && g_str_has_suffix (rules[i], comment) &&
         rules[i][strlen (rules[i]) - strlen (comment) - 1] == ' ') ||
        (chain != NULL && strcmp (rules[i], wanted) == 0))
      n++;
  return n;
}

static char *
table_text (void)
{
  const char *argv[] = { "nft", "list", "table", "inet", MV_NFT_TABLE, NULL };
  char *out = NULL;

  g_assert_cmpint (run_argv (argv, &out), ==, 0);
  return out;
}

/* ----- NFLOG ----- */

typedef struct {
  struct nflog_handle   *handle;
  struct nflog_g_handle *group;
  GPtrArray             *seen;     /* "PREFIX DADDR" of each message */
} WakeLog;

static int
on_log (struct nflog_g_handle *group,
        struct nfgenmsg       *message,
        struct nflog_data     *data,
        void                  *user_data)
{
  WakeLog *log = user_data;
  char *payload = NULL;
  int length = nflog_get_payload (data, &payload);
  const char *prefix = nflog_get_prefix (data);
  char daddr[INET_ADDRSTRLEN] = "?";

  if (length >= (int) sizeof (struct iphdr))
    inet_ntop (AF_INET, &((struct iphdr *) payload)->daddr, daddr, sizeof daddr);
  g_ptr_array_add (log->seen, g_strdup_printf ("%s %s", prefix != NULL ? prefix : "", daddr));
  return 0;
}

static WakeLog *
wake_log_open (void)
{
  WakeLog *log = g_new0 (WakeLog, 1);

  log->seen = g_ptr_array_new_with_free_func (g_free);
  log->handle = nflog_open ();
  g_assert_nonnull (log->handle);
  log->group = nflog_bind_group (log->handle, WAKE_GROUP);
  g_assert_nonnull (log->group);
  g_assert_cmpint (nflog_set_mode (log->group, NFULNL_COPY_PACKET, 128), ==, 0);
  nflog_callback_register (log->group, on_log, log);
  return log;
}

/* Reads messages for up to @timeout_ms or until one is "@wanted". */
static gboolean
wake_log_wait (WakeLog    *log,
               const char *wanted,
               int         timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + timeout_ms * 1000;
  char buffer[4096];

  for (;;)
    {
      struct pollfd pfd = { .fd = nflog_fd (log->handle), .events = POLLIN };
      int left = (int) ((deadline - g_get_monotonic_time ()) / 1000);
      gssize n;

      for (guint i = 0; i < log->seen->len; i++)
        if (wanted != NULL && strcmp (g_ptr_array_index (log->seen, i), wanted) == 0)
          return TRUE;
      if (left <= 0 || poll (&pfd, 1, left) <= 0)
        return FALSE;
      n = recv (pfd.fd, buffer, sizeof buffer, 0);
      g_assert_cmpint (n, >, 0);
      nflog_handle_packet (log->handle, buffer, (int) n);
    }
}

static void
wake_log_close (WakeLog *log)
{
  nflog_unbind_group (log->group);
  nflog_close (log->handle);
  g_ptr_array_unref (log->seen);
  g_free (log);
}

/* ----- helpers on MvNft ----- */

static MvNft *
new_nft (void)
{
  g_autoptr (GError) error = NULL;
  MvNft *nft = mv_nft_new (WAKE_GROUP, &error);

  g_assert_no_error (error);
  g_assert_nonnull (nft);
  return nft;
}

static void
remove_all (MvNft *nft)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_nft_remove_all (nft, &error));
  g_assert_no_error (error);
}

static void
apply (MvNft              *nft,
       const MvNftMachine *machine)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_nft_apply_machine (nft, machine, &error));
  g_assert_no_error (error);
}

static MvNftMachine
machine_with (const MvNftPort *ports,
              guint            n_ports,
              const MvNftRule *rules,
              guint            n_rules)
{
  return (MvNftMachine) {
    .machine_id = MACHINE, .address = GUEST, .bridge = BRIDGE,
    .ports = ports, .n_ports = n_ports, .rules = rules, .n_rules = n_rules,
  };
}

static const char *tcp_server_args[] = { "-k", "-l", "80", NULL };

/* ----- tests ----- */

static void
test_tcp_port_and_firewall (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  Server *server = server_start (guest_ns, "-tln", 80, tcp_server_args);
  MvNftPort ports[] = {
    { .host_address = 0, .host_port = 8080, .guest_port = 80, .protocol = MV_NFT_TCP },
    { .host_address = HOST_OUTSIDE, .host_port = 8081, .guest_port = 80, .protocol = MV_NFT_TCP },
  };
  MvNftRule deny_port[] = { { .allow = FALSE, .protocol = MV_NFT_TCP, .port_min = 80, .port_max = 80 } };
  MvNftRule deny_elsewhere[] = {
    { .allow = FALSE, .protocol = MV_NFT_TCP, .port_min = 70, .port_max = 90,
      .source = 0xc0a83200u /* 192.168.50.0 */, .source_prefix = 24 },
  };
  MvNftRule allow_client_first[] = {
    { .allow = TRUE, .protocol = MV_NFT_TCP, .port_min = 80, .port_max = 80,
      .source = CLIENT, .source_prefix = 32 },
    { .allow = FALSE, .protocol = MV_NFT_ANY },
  };
  MvNftRule deny_first[] = {
    { .allow = FALSE, .protocol = MV_NFT_ANY, .source = 0x0a4e0000u, .source_prefix = 16 },
    { .allow = TRUE, .protocol = MV_NFT_TCP },
  };
  const char *loopback_args[] = { "-k", "-l", "127.0.0.1", "8080", NULL };
  Server *loopback;
  MvNftMachine machine;

  /* Nothing published yet: the host itself has nothing on the port. */
  g_assert_false (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));

  machine = machine_with (ports, G_N_ELEMENTS (ports), NULL, 0);
  apply (nft, &machine);
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8081));
  /* From the host itself, to any of its addresses, or to the one given. */
  g_assert_true (tcp_connects (NULL, HOST_OUTSIDE_TEXT, 8080));
  g_assert_true (tcp_connects (NULL, HOST_BRIDGE_ADDRESS, 8080));
  g_assert_true (tcp_connects (NULL, HOST_OUTSIDE_TEXT, 8081));
  /* A port published on one address only is not on the others. */
  g_assert_false (tcp_connects (NULL, HOST_BRIDGE_ADDRESS, 8081));
  /* The host's own loopback service on the same port stays its own. */
  loopback = server_start (NULL, "-tln", 8080, loopback_args);
  g_assert_true (tcp_connects (NULL, "127.0.0.1", 8080));
  server_stop (loopback);

  machine = machine_with (ports, G_N_ELEMENTS (ports), deny_port, G_N_ELEMENTS (deny_port));
  apply (nft, &machine);
  g_assert_false (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));
  g_assert_false (tcp_connects (client_ns, GUEST_TEXT, 80));

  machine = machine_with (ports, G_N_ELEMENTS (ports), NULL, 0);
  apply (nft, &machine);
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));

  machine = machine_with (ports, G_N_ELEMENTS (ports), deny_elsewhere, G_N_ELEMENTS (deny_elsewhere));
  apply (nft, &machine);
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));

  /* The first rule that matches decides. */
  machine = machine_with (ports, G_N_ELEMENTS (ports), allow_client_first, G_N_ELEMENTS (allow_client_first));
  apply (nft, &machine);
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));
  machine = machine_with (ports, G_N_ELEMENTS (ports), deny_first, G_N_ELEMENTS (deny_first));
  apply (nft, &machine);
  g_assert_false (tcp_connects (client_ns, GUEST_TEXT, 80));

  server_stop (server);
  remove_all (nft);
}

static void
test_udp_port (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  const char *args[] = { "-u", "-l", "53", NULL };
  Server *server = server_start (guest_ns, "-uln", 53, args);
  MvNftPort ports[] = { { .host_port = 5353, .guest_port = 53, .protocol = MV_NFT_UDP } };
  MvNftMachine machine = machine_with (ports, G_N_ELEMENTS (ports), NULL, 0);
  g_autofree char *before = NULL;
  gboolean arrived = FALSE;

  udp_send (client_ns, HOST_OUTSIDE_TEXT, 5353, "early");
  before = server_output (server);
  g_assert_null (strstr (before, "early"));

  apply (nft, &machine);
  /* UDP has no handshake: send until the word arrives, a few times. */
  for (int i = 0; i < 3 && !arrived; i++)
    {
      g_autofree char *after = NULL;

      udp_send (client_ns, HOST_OUTSIDE_TEXT, 5353, "published");
      after = server_output (server);
      arrived = strstr (after, "published") != NULL;
    }
  g_assert_true (arrived);

  server_stop (server);
  remove_all (nft);
}

static void
test_wake_log (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  Server *server = server_start (guest_ns, "-tln", 80, tcp_server_args);
  MvNftPort ports[] = { { .host_port = 8080, .guest_port = 80, .protocol = MV_NFT_TCP } };
  MvNftMachine machine = machine_with (ports, G_N_ELEMENTS (ports), NULL, 0);
  WakeLog *log = wake_log_open ();

  machine.sleeping = TRUE;
  apply (nft, &machine);
  /* Let through while logged: the connection is made. */
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));
  g_assert_true (wake_log_wait (log, MACHINE " " GUEST_TEXT, 2000));
  g_ptr_array_set_size (log->seen, 0);
  g_assert_true (tcp_connects (NULL, HOST_BRIDGE_ADDRESS, 8080));
  g_assert_true (wake_log_wait (log, MACHINE " " GUEST_TEXT, 2000));
  g_ptr_array_set_size (log->seen, 0);
  g_assert_true (tcp_connects (client_ns, GUEST_TEXT, 80));
  g_assert_true (wake_log_wait (log, MACHINE " " GUEST_TEXT, 2000));

  /* Awake: nothing is logged, the port stays. */
  machine.sleeping = FALSE;
  apply (nft, &machine);
  g_ptr_array_set_size (log->seen, 0);
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));
  g_assert_false (wake_log_wait (log, NULL, 300));
  g_assert_cmpuint (log->seen->len, ==, 0);

  wake_log_close (log);
  server_stop (server);
  remove_all (nft);
}

static void
test_remove_and_list (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  g_autoptr (MvNft) again = NULL;
  g_autoptr (GPtrArray) machines = NULL, networks = NULL;
  g_autoptr (GError) error = NULL;
  MvNftPort ports[] = { { .host_port = 8080, .guest_port = 80, .protocol = MV_NFT_TCP } };
  MvNftRule rules[] = { { .allow = FALSE, .protocol = MV_NFT_ICMP } };
  MvNftMachine first = machine_with (ports, G_N_ELEMENTS (ports), rules, G_N_ELEMENTS (rules));
  MvNftMachine second = {
    .machine_id = "m_2", .address = GUEST + 1, .bridge = BRIDGE, .sleeping = TRUE,
  };

  first.sleeping = TRUE;
  apply (nft, &first);
  apply (nft, &second);
  g_assert_true (mv_nft_apply_network (nft, "net-a", BRIDGE, 0x0a4d0000u, 24, TRUE, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_rules ("nat-prerouting", "mv:" MACHINE), ==, 1);
  g_assert_cmpuint (count_rules ("nat-output", "mv:" MACHINE), ==, 1);
  g_assert_cmpuint (count_rules ("machines", "mv:" MACHINE), ==, 1);
  g_assert_cmpuint (count_rules ("wake", "mv:" MACHINE), ==, 1);

  /* A new MvNft (a restarted daemon) keeps the rules and finds them. */
  again = new_nft ();
  g_clear_pointer (&nft, mv_nft_free);
  machines = mv_nft_list_machines (again, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (machines->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (machines, 0), ==, MACHINE);
  g_assert_cmpstr (g_ptr_array_index (machines, 1), ==, "m_2");
  networks = mv_nft_list_networks (again, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (networks->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (networks, 0), ==, "net-a");
  g_assert_cmpuint (count_rules (NULL, "mv:" MACHINE), ==, 4);

  g_assert_true (mv_nft_remove_machine (again, MACHINE, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_rules (NULL, "mv:" MACHINE), ==, 0);
  g_assert_cmpuint (count_rules (NULL, "mv:m_2"), ==, 1);
  g_assert_true (mv_nft_remove_machine (again, MACHINE, &error));
  g_assert_no_error (error);
  g_clear_pointer (&machines, g_ptr_array_unref);
  machines = mv_nft_list_machines (again, &error);
  g_assert_cmpuint (machines->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (machines, 0), ==, "m_2");

  g_assert_true (mv_nft_remove_network (again, "net-a", &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_rules (NULL, "mvnet:net-a"), ==, 0);
  g_clear_pointer (&networks, g_ptr_array_unref);
  networks = mv_nft_list_networks (again, &error);
  g_assert_cmpuint (networks->len, ==, 0);

  remove_all (again);
  g_assert_cmpint (run_in (NULL, "sh", "-c", "nft list table inet " MV_NFT_TABLE " 2>/dev/null", NULL), !=, 0);
  /* Removing a table that is not there succeeds. */
  remove_all (again);
}

static void
test_refused_keeps_rules (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  g_autoptr (GError) error = NULL;
  Server *server = server_start (guest_ns, "-tln", 80, tcp_server_args);
  MvNftPort old_ports[] = { { .host_port = 8080, .guest_port = 80, .protocol = MV_NFT_TCP } };
  MvNftPort new_ports[] = { { .host_port = 9090, .guest_port = 80, .protocol = MV_NFT_TCP } };
  MvNftMachine machine = machine_with (old_ports, G_N_ELEMENTS (old_ports), NULL, 0);
  g_autofree char *text = NULL;

  apply (nft, &machine);
  /* Without the wake chain, nftables refuses a sleeping machine's rules. */
  must (NULL, "nft", "delete chain inet " MV_NFT_TABLE " wake");
  machine = machine_with (new_ports, G_N_ELEMENTS (new_ports), NULL, 0);
  machine.sleeping = TRUE;
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "No such file or directory"));

  text = table_text ();
  g_assert_nonnull (strstr (text, "dport 8080"));
  g_assert_null (strstr (text, "dport 9090"));
  g_assert_true (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 8080));
  g_assert_false (tcp_connects (client_ns, HOST_OUTSIDE_TEXT, 9090));

  server_stop (server);
  remove_all (nft);
}

/* The address the client's server saw the guest's connection come from. */
static char *
guest_seen_from (void)
{
  const char *args[] = { "-n", "-v", "-l", "9000", NULL };
  Server *server = server_start (client_ns, "-tln", 9000, args);
  char *seen = NULL;

  g_assert_true (tcp_connects (guest_ns, CLIENT_TEXT, 9000));
  /* nc says whom it accepted as it does; wait for it to have said so. */
  for (int i = 0; i < 50 && (seen == NULL || strstr (seen, "Connection received") == NULL); i++)
    {
      g_free (seen);
      g_usleep (20 * 1000);
      seen = server_output (server);
    }
  server_stop (server);
  return seen;
}

static void
test_masquerade (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  g_autoptr (GError) error = NULL;
  g_autofree char *masqueraded = NULL, *plain = NULL;

  g_assert_true (mv_nft_apply_network (nft, "nat-net", BRIDGE, 0x0a4d0000u, 24, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (mv_nft_apply_network (nft, "flat-net", "mvtother0", 0x0a590000u, 24, FALSE, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_rules ("nat-postrouting", "mvnet:nat-net"), ==, 1);
  g_assert_cmpuint (count_rules ("nat-postrouting", "mvnet:flat-net"), ==, 0);
  g_assert_cmpuint (count_rules ("networks", "mvnet:flat-net"), ==, 2);
  masqueraded = guest_seen_from ();
  g_assert_nonnull (strstr (masqueraded, HOST_OUTSIDE_TEXT));
  g_assert_null (strstr (masqueraded, GUEST_TEXT));

  /* Applied again without NAT, the masquerade goes. */
  g_assert_true (mv_nft_apply_network (nft, "nat-net", BRIDGE, 0x0a4d0000u, 24, FALSE, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_rules ("nat-postrouting", "mvnet:nat-net"), ==, 0);
  g_assert_cmpuint (count_rules ("networks", "mvnet:nat-net"), ==, 2);
  plain = guest_seen_from ();
  g_assert_nonnull (strstr (plain, GUEST_TEXT));

  remove_all (nft);
}

typedef struct {
  MvNft *nft;
  guint  index;
} Applier;

static gpointer
apply_repeatedly (gpointer user_data)
{
  Applier *applier = user_data;
  g_autofree char *id = g_strdup_printf ("t%u", applier->index);
  MvNftPort ports[] = { { .host_port = 10000 + applier->index, .guest_port = 80, .protocol = MV_NFT_TCP } };

  for (guint round = 0; round < 10; round++)
    {
      MvNftMachine machine = {
        .machine_id = id, .address = GUEST + 10 + applier->index, .bridge = BRIDGE,
        .ports = ports, .n_ports = 1, .sleeping = round % 2 == 0,
      };

      apply (applier->nft, &machine);
    }
  return NULL;
}

/* One MvNft from several threads at once. */
static void
test_threads (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  g_autoptr (GPtrArray) machines = NULL;
  g_autoptr (GError) error = NULL;
  Applier appliers[4];
  GThread *threads[G_N_ELEMENTS (appliers)];

  for (guint i = 0; i < G_N_ELEMENTS (appliers); i++)
    {
      appliers[i] = (Applier) { .nft = nft, .index = i };
      threads[i] = g_thread_new ("apply", apply_repeatedly, &appliers[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (appliers); i++)
    g_thread_join (threads[i]);

  machines = mv_nft_list_machines (nft, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (machines->len, ==, G_N_ELEMENTS (appliers));
  /* Each machine's last apply, and nothing of the ones before: two DNAT
   * rules, awake. */
  for (guint i = 0; i < G_N_ELEMENTS (appliers); i++)
    {
      g_autofree char *tag = g_strdup_printf ("mv:t%u", i);

      g_assert_cmpuint (count_rules (NULL, tag), ==, 2);
      g_assert_cmpuint (count_rules ("wake", tag), ==, 0);
    }
  remove_all (nft);
}

static void
test_invalid_input (void)
{
  g_autoptr (MvNft) nft = new_nft ();
  MvNftPort zero_port[] = { { .host_port = 0, .guest_port = 80, .protocol = MV_NFT_TCP } };
  MvNftPort any_port[] = { { .host_port = 80, .guest_port = 80, .protocol = MV_NFT_ANY } };
  MvNftRule icmp_ports[] = { { .protocol = MV_NFT_ICMP, .port_min = 1, .port_max = 2 } };
  MvNftRule backwards[] = { { .protocol = MV_NFT_TCP, .port_min = 90, .port_max = 80 } };
  MvNftRule long_prefix[] = { { .protocol = MV_NFT_ANY, .source = CLIENT, .source_prefix = 33 } };
  g_autofree char *long_id = g_strnfill (MV_NFT_ID_MAX + 1, 'a');
  const char *bad_ids[] = { "", "a b", "x\";flush ruleset;\"", "m/1", long_id };
  const char *bad_bridges[] = { "br0\" accept", "a-bridge-name-too-long", "" };
  MvNftMachine machine;
  g_autoptr (GPtrArray) machines = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) rules = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (bad_ids); i++)
    {
      machine = machine_with (NULL, 0, NULL, 0);
      machine.machine_id = bad_ids[i];
      g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_false (mv_nft_remove_machine (nft, bad_ids[i], &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_false (mv_nft_apply_network (nft, bad_ids[i], BRIDGE, 0x0a4d0000u, 24, TRUE, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad_bridges); i++)
    {
      machine = machine_with (NULL, 0, NULL, 0);
      machine.bridge = bad_bridges[i];
      g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_false (mv_nft_apply_network (nft, "n", bad_bridges[i], 0x0a4d0000u, 24, TRUE, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
    }

  machine = machine_with (zero_port, 1, NULL, 0);
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  machine = machine_with (any_port, 1, NULL, 0);
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  machine = machine_with (NULL, 0, icmp_ports, 1);
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  machine = machine_with (NULL, 0, backwards, 1);
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  machine = machine_with (NULL, 0, long_prefix, 1);
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  machine = machine_with (NULL, 0, NULL, 0);
  machine.address = 0;
  g_assert_false (mv_nft_apply_machine (nft, &machine, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (mv_nft_new (65536, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  /* Nothing reached the table. */
  machines = mv_nft_list_machines (nft, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (machines->len, ==, 0);
  rules = table_rules ();
  g_assert_cmpuint (g_strv_length (rules), ==, 0);

  remove_all (nft);
}

int
main (int    argc,
      char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  if (getuid () != 0)
    {
      g_printerr ("test-nft needs root: it makes network namespaces\n");
      return 77;
    }
  if (unshare (CLONE_NEWNET) != 0)
    g_error ("unshare (CLONE_NEWNET): %s", g_strerror (errno));

  sweep_stale_namespaces ();
  guest_ns = g_strdup_printf (NS_PREFIX "%d-guest", (int) getpid ());
  client_ns = g_strdup_printf (NS_PREFIX "%d-client", (int) getpid ());
  scratch_dir = g_dir_make_tmp ("test-nft-XXXXXX", NULL);
  g_assert_nonnull (scratch_dir);
  build_topology ();

  g_test_add_func ("/nft/tcp-port-and-firewall", test_tcp_port_and_firewall);
  g_test_add_func ("/nft/udp-port", test_udp_port);
  g_test_add_func ("/nft/wake-log", test_wake_log);
  g_test_add_func ("/nft/remove-and-list", test_remove_and_list);
  g_test_add_func ("/nft/refused-keeps-rules", test_refused_keeps_rules);
  g_test_add_func ("/nft/masquerade", test_masquerade);
  g_test_add_func ("/nft/threads", test_threads);
  g_test_add_func ("/nft/invalid-input", test_invalid_input);
  status = g_test_run ();

  run_in (NULL, "ip", "netns", "delete", guest_ns, NULL);
  run_in (NULL, "ip", "netns", "delete", client_ns, NULL);
  g_rmdir (scratch_dir);
  return status;
}
