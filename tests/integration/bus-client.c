#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <string.h>
#include <unistd.h>

static void
recorded_signal_free (RecordedSignal *s)
{
  g_free (s->path);
  g_free (s->member);
  g_free (s->args);
  g_free (s->interfaces);
  g_free (s);
}

static int
on_signal (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  Client *client = userdata;
  RecordedSignal *s = g_new0 (RecordedSignal, 1);
  const char *member = sd_bus_message_get_member (m);

  s->path = g_strdup (sd_bus_message_get_path (m));
  if (g_str_equal (member, "PropertiesChanged"))
    {
      const char *iface = NULL;
      g_autoptr (GString) names = g_string_new ("PropertiesChanged:");
      sd_bus_message_read (m, "s", &iface);
      sd_bus_message_enter_container (m, 'a', "{sv}");
      while (sd_bus_message_enter_container (m, 'e', "sv") > 0)
        {
          const char *name = NULL;
          sd_bus_message_read (m, "s", &name);
          g_string_append_printf (names, "%s,", name);
          sd_bus_message_skip (m, "v");
          sd_bus_message_exit_container (m);
        }
      sd_bus_message_exit_container (m);
      /* Invalidated properties count as changed too. */
      char **inval = NULL;
      if (sd_bus_message_read_strv (m, &inval) >= 0)
        for (char **p = inval; p && *p; p++)
          g_string_append_printf (names, "%s,", *p);
      g_strfreev (inval);
      s->member = g_string_free (g_steal_pointer (&names), FALSE);
    }
  else if (g_str_equal (member, "StateChanged"))
    {
      const char *a = NULL, *b = NULL, *c = NULL;
      sd_bus_message_read (m, "sss", &a, &b, &c);
      s->member = g_strdup (member);
      s->args = g_strdup_printf ("%s<-%s:%s", a, b, c);
    }
  else
    {
      s->member = g_strdup (member);
      if (g_str_equal (member, "InterfacesAdded") || g_str_equal (member, "InterfacesRemoved") ||
          g_str_equal (member, "MachineNew") || g_str_equal (member, "MachineRemoved"))
        {
          const char *obj = NULL, *id = NULL;
          if (member[0] == 'I')
            sd_bus_message_read (m, "o", &obj);
          else
            sd_bus_message_read (m, "so", &id, &obj);
          s->args = g_strdup (obj);
          if (g_str_equal (member, "InterfacesRemoved"))
            {
              char **names = NULL;
              if (sd_bus_message_read_strv (m, &names) >= 0)
                {
                  g_autofree char *joined = names ? g_strjoinv (",", names) : g_strdup ("");
                  s->interfaces = g_strconcat (joined, ",", NULL);
                }
              g_strfreev (names);
            }
        }
    }
  g_ptr_array_add (client->signals, s);
  return 0;
}

Client *
client_new (MvTestEnv *env)
{
  Client *client = g_new0 (Client, 1);

  client->bus = mv_test_env_open_bus (env);
  client->signals = g_ptr_array_new_with_free_func ((GDestroyNotify) recorded_signal_free);
  g_assert_cmpint (sd_bus_match_signal (client->bus, NULL, MV_BUS_NAME, NULL, NULL, NULL,
                                        on_signal, client), >=, 0);
  return client;
}

void
client_free (Client *client)
{
  sd_bus_flush_close_unref (client->bus);
  g_ptr_array_unref (client->signals);
  g_free (client);
}

gboolean
client_wait (Client *client, gboolean (*pred) (Client *, gpointer), gpointer data, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;

  for (;;)
    {
      if (pred && pred (client, data))
        return TRUE;
      gint64 now = g_get_monotonic_time ();
      if (now >= deadline)
        return pred == NULL;
      int r = sd_bus_process (client->bus, NULL);
      g_assert_cmpint (r, >=, 0);
      if (r == 0)
        sd_bus_wait (client->bus, (uint64_t) (deadline - now));
    }
}

void
client_settle (Client *client, guint ms)
{
  client_wait (client, NULL, NULL, ms);
}

sd_bus_message *
client_call (Client *client, const char *path, const char *iface, const char *member,
             char **error_name, char **error_message, const char *types, ...)
{
  g_autoptr (sd_bus_message) m = NULL;
  sd_bus_message *reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  va_list ap;
  int r;

  r = sd_bus_message_new_method_call (client->bus, &m, MV_BUS_NAME, path, iface, member);
  g_assert_cmpint (r, >=, 0);
  if (types)
    {
      va_start (ap, types);
      r = sd_bus_message_appendv (m, types, ap);
      va_end (ap);
      g_assert_cmpint (r, >=, 0);
    }
  r = sd_bus_call (client->bus, m, 30 * G_USEC_PER_SEC, &error, &reply);
  if (r < 0)
    {
      if (error_name)
        *error_name = g_strdup (error.name);
      if (error_message)
        *error_message = g_strdup (error.message);
      sd_bus_error_free (&error);
      return NULL;
    }
  return reply;
}

char *
client_create (Client *client, const char *spec_json, guint64 flags, char **error_name,
               char **error_message)
{
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "CreateMachine", error_name, error_message,
                                                  "st", spec_json, flags);
  const char *path = NULL;

  if (!reply)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >=, 0);
  return g_strdup (path);
}

static sd_bus_message *
get_property (Client *client, const char *path, const char *prop, const char *type)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message *reply = NULL;
  int r = sd_bus_get_property (client->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, prop, &error,
                               &reply, type);
  if (r < 0)
    g_error ("Get %s on %s failed: %s", prop, path, error.message);
  return reply;
}

char *
client_get_string (Client *client, const char *path, const char *prop)
{
  g_autoptr (sd_bus_message) reply = get_property (client, path, prop, "s");
  const char *s = NULL;
  g_assert_cmpint (sd_bus_message_read (reply, "s", &s), >=, 0);
  return g_strdup (s);
}

guint64
client_get_u64 (Client *client, const char *path, const char *prop)
{
  g_autoptr (sd_bus_message) reply = get_property (client, path, prop, "t");
  uint64_t v = 0;
  g_assert_cmpint (sd_bus_message_read (reply, "t", &v), >=, 0);
  return v;
}

guint32
client_get_u32 (Client *client, const char *path, const char *prop)
{
  g_autoptr (sd_bus_message) reply = get_property (client, path, prop, "u");
  uint32_t v = 0;
  g_assert_cmpint (sd_bus_message_read (reply, "u", &v), >=, 0);
  return v;
}

gint32
client_get_i32 (Client *client, const char *path, const char *prop)
{
  g_autoptr (sd_bus_message) reply = get_property (client, path, prop, "i");
  int32_t v = 0;
  g_assert_cmpint (sd_bus_message_read (reply, "i", &v), >=, 0);
  return v;
}

char *
client_machine_call (Client *client, const char *path, const char *member, char **error_message)
{
  char *error_name = NULL;
  g_autoptr (sd_bus_message) reply = client_call (client, path, MV_MACHINE_IFACE, member,
                                                  &error_name, error_message, NULL);
  return error_name;
}

guint
client_count_signals (Client *client, const char *path, const char *member_prefix)
{
  guint n = 0;

  for (guint i = 0; i < client->signals->len; i++)
    {
      RecordedSignal *s = client->signals->pdata[i];
      if ((!path || g_strcmp0 (s->path, path) == 0) && g_str_has_prefix (s->member, member_prefix))
        n++;
    }
  return n;
}

guint
client_count_removed (Client *client, const char *object_path, const char *interface)
{
  g_autofree char *item = g_strconcat (",", interface, ",", NULL);
  guint n = 0;

  for (guint i = 0; i < client->signals->len; i++)
    {
      RecordedSignal *s = client->signals->pdata[i];
      g_autofree char *listed = s->interfaces ? g_strconcat (",", s->interfaces, NULL) : NULL;

      if (g_strcmp0 (s->member, "InterfacesRemoved") == 0 && g_strcmp0 (s->args, object_path) == 0 &&
          listed && strstr (listed, item))
        n++;
    }
  return n;
}

void
client_clear_signals (Client *client)
{
  g_ptr_array_set_size (client->signals, 0);
}

guint
count_warm_templates (const char *state_dir, gboolean staged_ok)
{
  g_autofree char *dir = g_build_filename (state_dir, MV_WARM_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  while (d && (name = g_dir_read_name (d)))
    if (name[0] != '.')
      n++;
    else if (!staged_ok)
      g_error ("%s/%s: left of a build", dir, name);
  return n;
}

guint
client_count_announced (Client *client, const char *member, const char *object_path)
{
  guint n = 0;

  for (guint i = 0; i < client->signals->len; i++)
    {
      RecordedSignal *sig = client->signals->pdata[i];

      n += g_str_equal (sig->member, member) && g_strcmp0 (sig->args, object_path) == 0;
    }
  return n;
}

guint
count_machine_dirs (const char *state_dir)
{
  g_autofree char *dir = g_build_filename (state_dir, MV_MACHINES_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  while (d && g_dir_read_name (d))
    n++;
  return n;
}

void
client_call_ok (Client *client, const char *path, const char *member)
{
  g_autofree char *msg = NULL;
  g_autofree char *err = client_machine_call (client, path, member, &msg);

  if (err)
    g_error ("%s on %s: %s: %s", member, path, err, msg);
}

char *
client_create_ok (Client *client, const char *spec_json)
{
  g_autofree char *err = NULL, *msg = NULL;
  char *path = client_create (client, spec_json, 0, &err, &msg);

  if (!path)
    g_error ("CreateMachine: %s: %s", err, msg);
  return path;
}

static gboolean
state_is (Client *client, gpointer data)
{
  const char *const *want = data; /* { path, state } */
  g_autofree char *state = client_get_string (client, want[0], "State");
  return g_str_equal (state, want[1]);
}

void
client_assert_state_soon (Client *client, const char *path, const char *state, guint timeout_ms)
{
  const char *want[] = { path, state };

  if (!client_wait (client, state_is, want, timeout_ms))
    {
      g_autofree char *now = client_get_string (client, path, "State");
      g_autofree char *why = client_get_string (client, path, "StateError");
      g_error ("%s: expected State %s within %u ms, it is %s (%s)", path, state, timeout_ms,
               now, why);
    }
}

void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->env = mv_test_env_new ();
  if (data)
    mv_test_env_write_config (f->env, data);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

void
fixture_setup_netns (Fixture *f, gconstpointer data)
{
  f->env = mv_test_env_new ();
  mv_test_env_use_private_netns (f->env);
  if (data)
    mv_test_env_write_config (f->env, data);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

void
fixture_teardown (Fixture *f, gconstpointer data)
{
  client_free (f->client);
  mv_test_env_free (f->env);
}

void
client_delete_all (Client *client)
{
  g_autoptr (sd_bus_message) list = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "ListMachines", NULL, NULL, NULL);
  const char *id, *name, *state, *path;

  if (list && sd_bus_message_enter_container (list, 'a', "(ssso)") >= 0)
    while (sd_bus_message_read (list, "(ssso)", &id, &name, &state, &path) > 0)
      {
        g_autoptr (sd_bus_message) r = client_call (client, path, MV_MACHINE_IFACE, "Delete",
                                                    NULL, NULL, "b", 1);
      }
}

char *
fixture_runtime_file (Fixture *f, const char *path, const char *name)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");

  return g_build_filename (mv_test_env_runtime_dir (f->env), MV_MACHINES_DIR, id, name, NULL);
}

gboolean
client_traffic (Client *client, const char *name_or_id, guint64 sequence)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "RestoreAfterTraffic", &err, &msg, "st",
                                                  name_or_id, sequence);
  int woken = 0;

  if (!reply)
    g_error ("RestoreAfterTraffic: %s: %s", err, msg);
  g_assert_cmpint (sd_bus_message_read (reply, "b", &woken), >, 0);
  return woken;
}

char *
guest_config (const char *type, const char *more)
{
  g_autofree char *name = NULL, *binary = NULL;

  if (g_str_equal (type, "qemu"))
    return g_strconcat ("[qemu]\naccel=tcg\n", more, NULL);
  name = g_strconcat ("fake-", type, NULL);
  binary = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests", "vmm", name, NULL);
  return g_strdup_printf ("[%s]\nbinaries=%s\n%s", type, binary, more);
}

char *
guest_spec_json (const char *type, const char *name, const char *kernel, const char *initrd,
                 const char *extra)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"%s\",\"kernel\":\"%s\","
                          "\"initrd\":\"%s\",\"memory_bytes\":268435456,"
                          "\"readiness\":\"console:MICROVMD-GUEST-READY\"%s%s}",
                          name, type, kernel, initrd, extra ? "," : "", extra ? extra : "");
}

/* How many processes but this one name @needle on their command line;
 * the first found in @first (may be NULL). */
static guint
scan_processes (const char *needle, GPid *first)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  g_autofree char *self = g_strdup_printf ("%d", (int) getpid ());
  const char *entry;
  guint n = 0;

  while ((entry = g_dir_read_name (proc)))
    {
      g_autofree char *file = NULL, *cmdline = NULL;
      gsize len = 0;

      if (!g_ascii_isdigit (entry[0]) || g_str_equal (entry, self))
        continue;
      file = g_build_filename ("/proc", entry, "cmdline", NULL);
      if (!g_file_get_contents (file, &cmdline, &len, NULL) || len == 0)
        continue;
      for (gsize i = 0; i + 1 < len; i++)
        if (cmdline[i] == '\0')
          cmdline[i] = ' ';
      if (strstr (cmdline, needle) && n++ == 0 && first)
        *first = (GPid) g_ascii_strtoll (entry, NULL, 10);
    }
  return n;
}

guint
count_processes_with (const char *needle)
{
  return scan_processes (needle, NULL);
}

GPid
process_with (const char *needle)
{
  GPid pid = 0;

  if (scan_processes (needle, &pid) == 0)
    g_error ("no process names %s", needle);
  return pid;
}

/* ---- guests ---- */

char *
console_text (Fixture *f, const char *path)
{
  g_autofree char *file = fixture_runtime_file (f, path, "console.log");
  char *text = NULL;

  if (!g_file_get_contents (file, &text, NULL, NULL))
    return g_strdup ("");
  return text;
}


void
exec_result_clear (ExecResult *r)
{
  g_free (r->out);
  g_free (r->err);
  g_free (r->status);
}

/* Calls Exec; fds[0..3] are the caller's ends. */
gboolean
exec_start (Fixture *f, const char *path, const char *const *argv, int fds[4], char **error_name)
{
  g_autoptr (sd_bus_message) m = NULL, reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int r, in, out, err, status;

  r = sd_bus_message_new_method_call (f->client->bus, &m, MV_BUS_NAME, path, MV_MACHINE_IFACE,
                                      "Exec");
  g_assert_cmpint (r, >=, 0);
  g_assert_cmpint (sd_bus_message_append_strv (m, (char **) argv), >=, 0);
  g_assert_cmpint (sd_bus_message_append (m, "a{ss}", 0), >=, 0);
  g_assert_cmpint (sd_bus_message_append (m, "a{sv}", 0), >=, 0);
  r = sd_bus_call (f->client->bus, m, 30 * G_USEC_PER_SEC, &error, &reply);
  if (r < 0)
    {
      g_test_message ("Exec: %s: %s", error.name, error.message);
      if (error_name)
        *error_name = g_strdup (error.name);
      sd_bus_error_free (&error);
      return FALSE;
    }
  g_assert_cmpint (sd_bus_message_read (reply, "hhhh", &in, &out, &err, &status), >, 0);
  fds[0] = fcntl (in, F_DUPFD_CLOEXEC, 3);
  fds[1] = fcntl (out, F_DUPFD_CLOEXEC, 3);
  fds[2] = fcntl (err, F_DUPFD_CLOEXEC, 3);
  fds[3] = fcntl (status, F_DUPFD_CLOEXEC, 3);
  return TRUE;
}

char *
read_all (int fd)
{
  GString *s = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      char buf[4096];
      ssize_t n;

      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      if (poll (&p, 1, 200) <= 0)
        continue;
      n = read (fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      g_string_append_len (s, buf, n);
    }
  close (fd);
  return g_string_free (s, FALSE);
}

/* Runs @argv with @input on its stdin, to its end. */
void
exec_run (Fixture *f, const char *path, const char *const *argv, const char *input,
          ExecResult *result)
{
  int fds[4];

  g_assert_true (exec_start (f, path, argv, fds, NULL));
  if (input)
    g_assert_cmpint (write (fds[0], input, strlen (input)), ==, (gssize) strlen (input));
  close (fds[0]);
  result->out = read_all (fds[1]);
  result->err = read_all (fds[2]);
  result->status = g_strchomp (read_all (fds[3]));
  g_test_message ("exec %s: %s; stdout: %s; stderr: %s", argv[0], result->status, result->out,
                  result->err);
}

/* The standard output of @argv, which must succeed. */
char *
exec_output (Fixture *f, const char *path, const char *const *argv)
{
  g_auto (ExecResult) r = { 0 };

  exec_run (f, path, argv, NULL, &r);
  g_assert_cmpstr (r.status, ==, "exit 0");
  return g_steal_pointer (&r.out);
}


char *
http_get_unix (const char *socket_path, const char *resource)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  g_autofree char *request = g_strdup_printf ("GET %s HTTP/1.1\r\nHost: localhost\r\n"
                                              "Accept: application/json\r\n\r\n", resource);
  g_autoptr (GString) in = g_string_new (NULL);
  const char *end, *length;
  gsize want = 0;
  int fd;

  g_assert_cmpuint (strlen (socket_path), <, sizeof addr.sun_path);
  strcpy (addr.sun_path, socket_path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (fd, >=, 0);
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    g_error ("connect %s: %s", socket_path, g_strerror (errno));
  g_assert_cmpint (write (fd, request, strlen (request)), ==, (gssize) strlen (request));
  /* A VMM keeps the connection: read up to the Content-Length. */
  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      char buf[4096];
      ssize_t n;

      g_assert_cmpint (poll (&p, 1, 10000), ==, 1);
      n = read (fd, buf, sizeof buf);
      g_assert_cmpint (n, >, 0);
      g_string_append_len (in, buf, n);
      end = strstr (in->str, "\r\n\r\n");
      if (!end)
        continue;
      if (!want)
        {
          length = g_strstr_len (in->str, end - in->str, "Content-Length: ");
          g_assert_nonnull (length);
          want = (end + 4 - in->str) + g_ascii_strtoull (length + strlen ("Content-Length: "),
                                                         NULL, 10);
        }
      if (in->len >= want)
        break;
    }
  close (fd);
  g_assert_true (g_str_has_prefix (in->str, "HTTP/1.1 200"));
  return g_strndup (end + 4, want - (end + 4 - in->str));
}


guint64
stats_reply_cpu_time_ns (sd_bus_message *reply)
{
  const char *key;
  guint64 ns = 0;

  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "{sv}"), >, 0);
  while (sd_bus_message_enter_container (reply, 'e', "sv") > 0)
    {
      g_assert_cmpint (sd_bus_message_read (reply, "s", &key), >, 0);
      if (g_str_equal (key, "cpu_time_ns"))
        g_assert_cmpint (sd_bus_message_read (reply, "v", "t", &ns), >, 0);
      else
        g_assert_cmpint (sd_bus_message_skip (reply, "v"), >=, 0);
      g_assert_cmpint (sd_bus_message_exit_container (reply), >, 0);
    }
  return ns;
}

char *
cgroup_in_file (const char *path, const char *controller)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) fields = g_strsplit (*line, ":", 3);

      if (g_strv_length (fields) == 3 && g_str_equal (fields[1], controller))
        return g_strdup (fields[2]);
    }
  return NULL;
}

int
parent_in_stat_file (const char *path)
{
  g_autofree char *text = NULL;
  const char *p;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  /* "PID (COMM) S PPID": the command may hold anything but the last ')'. */
  p = strrchr (text, ')');
  g_assert_nonnull (p);
  return (int) g_ascii_strtoll (p + 4, NULL, 10);
}

guint
client_count_listed (Client *client, const char *member)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  member, &err, &msg, NULL);
  const char *a, *b, *c, *path;
  guint n = 0;

  if (!reply)
    g_error ("%s: %s: %s", member, err, msg);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ssso)"), >, 0);
  while (sd_bus_message_read (reply, "(ssso)", &a, &b, &c, &path) > 0)
    n++;
  return n;
}
