/* The simulated guest's user space (fake-shell.h). */
#include "fake-shell.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define PIPE_BYTES   (64 * 1024)
#define UNAME        "Linux %s 6.1.0-microvmd-test #1 SMP x86_64 GNU/Linux\n"

static const char passwd_text[] =
  "root:x:0:0:root:/root:/bin/sh\n"
  "tester:x:1000:1000:tester:/home/tester:/bin/sh\n";
static const char group_text[] =
  "root:x:0:\n"
  "tester:x:1000:\n"
  "extra:x:2000:tester\n";

typedef struct {
  const char *name;
  guint32     uid;
  guint32     gid;
  const char *home;
} User;

typedef struct {
  const char *name;
  guint32     gid;
  const char *member;
} Group;

static const User users[] = {
  { "root", 0, 0, "/root" },
  { "tester", 1000, 1000, "/home/tester" },
};
static const Group groups[] = {
  { "root", 0, NULL },
  { "tester", 1000, NULL },
  { "extra", 2000, "tester" },
};

static const char *const commands[] = {
  "true", "false", "echo", "cat", "env", "printenv", "id", "pwd", "hostname", "touch", "rm", "test",
  "sleep", "uname", "listen", "sh", NULL,
};

/* Directories that exist without a file in them. */
static const char *const directories[] = {
  "/", "/bin", "/etc", "/proc", "/run", "/run/microvmd", "/tmp", "/root", "/home",
  "/home/tester", NULL,
};

typedef enum { WAIT_NONE, WAIT_STDIN, WAIT_CLOCK, WAIT_SIGNAL } Wait;

struct _FakeProc {
  FakeSystem  *sys;
  GPtrArray   *script;       /* GStrv: the simple commands, in order */
  guint        next;
  char       **env;
  char        *workdir;
  FakeCreds    creds;
  gboolean     tty;

  Wait         wait;         /* what the running command waits for */
  double       wake_at;
  guint32      port;

  GByteArray  *in;
  gboolean     in_closed;
  gsize        consumed;
  GByteArray  *out[3];

  int          last_status;
  gboolean     done;
  int          status;
  int          signum;
};

/* ---- the system ---- */

static void
file_free (gpointer data)
{
  FakeFile *file = data;

  g_bytes_unref (file->content);
  g_free (file);
}

void
fake_system_put_file (FakeSystem *sys, const char *path, GBytes *content, guint32 mode)
{
  FakeFile *file = g_new0 (FakeFile, 1);

  file->content = g_bytes_ref (content);
  file->mode = mode;
  g_hash_table_replace (sys->files, g_strdup (path), file);
}

static void
put_text (FakeSystem *sys, const char *path, const char *text, guint32 mode)
{
  g_autoptr (GBytes) bytes = g_bytes_new (text, strlen (text));

  fake_system_put_file (sys, path, bytes, mode);
}

void
fake_system_init (FakeSystem *sys)
{
  memset (sys, 0, sizeof *sys);
  sys->files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, file_free);
  sys->tmpfs = g_ptr_array_new_with_free_func (g_free);
  sys->read_only = g_ptr_array_new_with_free_func (g_free);
  sys->keys = g_ptr_array_new_with_free_func (g_free);
  sys->hostname = g_strdup ("localhost");
  put_text (sys, "/etc/passwd", passwd_text, 0644);
  put_text (sys, "/etc/group", group_text, 0644);
}

void
fake_system_clear (FakeSystem *sys)
{
  g_clear_pointer (&sys->files, g_hash_table_unref);
  g_clear_pointer (&sys->tmpfs, g_ptr_array_unref);
  g_clear_pointer (&sys->read_only, g_ptr_array_unref);
  g_clear_pointer (&sys->keys, g_ptr_array_unref);
  g_clear_pointer (&sys->hostname, g_free);
}

gboolean
fake_system_read_only (FakeSystem *sys, const char *path)
{
  for (guint i = 0; i < sys->read_only->len; i++)
    {
      const char *target = sys->read_only->pdata[i];
      size_t len = strlen (target);

      if (strncmp (path, target, len) == 0 && (path[len] == '\0' || path[len] == '/'))
        return TRUE;
    }
  return FALSE;
}

static gboolean
is_read_only_target (FakeSystem *sys, const char *target)
{
  for (guint i = 0; i < sys->read_only->len; i++)
    if (strcmp (sys->read_only->pdata[i], target) == 0)
      return TRUE;
  return FALSE;
}

/* A mount point: a tmpfs target, or a read-only file (a bind mount of
 * itself). */
static gboolean
is_mount_point (FakeSystem *sys, const char *path)
{
  for (guint i = 0; i < sys->tmpfs->len; i++)
    if (strcmp (sys->tmpfs->pdata[i], path) == 0)
      return TRUE;
  return is_read_only_target (sys, path);
}

static void
add_strings (JsonBuilder *b, const char *name, GPtrArray *strings)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (guint i = 0; strings && i < strings->len; i++)
    json_builder_add_string_value (b, strings->pdata[i]);
  json_builder_end_array (b);
}

static void
get_strings (JsonObject *o, const char *name, GPtrArray *into)
{
  JsonArray *a = json_object_has_member (o, name) ? json_object_get_array_member (o, name) : NULL;

  for (guint i = 0; a && i < json_array_get_length (a); i++)
    g_ptr_array_add (into, g_strdup (json_array_get_string_element (a, i)));
}

JsonNode *
fake_system_save (FakeSystem *sys)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  GHashTableIter iter;
  gpointer key, value;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "files");
  json_builder_begin_object (b);
  g_hash_table_iter_init (&iter, sys->files);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      FakeFile *file = value;
      gsize len;
      const guchar *data = g_bytes_get_data (file->content, &len);
      g_autofree char *b64 = g_base64_encode (data, len);

      json_builder_set_member_name (b, key);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "mode");
      json_builder_add_int_value (b, file->mode);
      json_builder_set_member_name (b, "content");
      json_builder_add_string_value (b, b64);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  add_strings (b, "tmpfs", sys->tmpfs);
  add_strings (b, "read_only", sys->read_only);
  json_builder_set_member_name (b, "root");
  json_builder_add_boolean_value (b, sys->root);
  json_builder_set_member_name (b, "hostname");
  json_builder_add_string_value (b, sys->hostname);
  add_strings (b, "keys", sys->keys);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

void
fake_system_load (FakeSystem *sys, JsonObject *state)
{
  JsonObject *files = json_object_has_member (state, "files")
                      ? json_object_get_object_member (state, "files") : NULL;
  g_autoptr (GList) paths = files ? json_object_get_members (files) : NULL;

  g_hash_table_remove_all (sys->files);
  for (GList *l = paths; l; l = l->next)
    {
      JsonObject *f = json_object_get_object_member (files, l->data);
      gsize len = 0;
      guchar *data = g_base64_decode (json_object_get_string_member_with_default (f, "content", ""),
                                      &len);
      g_autoptr (GBytes) bytes = g_bytes_new_take (data, len);

      fake_system_put_file (sys, l->data, bytes,
                            (guint32) json_object_get_int_member_with_default (f, "mode", 0644));
    }
  g_ptr_array_set_size (sys->tmpfs, 0);
  get_strings (state, "tmpfs", sys->tmpfs);
  g_ptr_array_set_size (sys->read_only, 0);
  get_strings (state, "read_only", sys->read_only);
  sys->root = json_object_get_boolean_member_with_default (state, "root", FALSE);
  g_free (sys->hostname);
  sys->hostname = g_strdup (json_object_get_string_member_with_default (state, "hostname",
                                                                        "localhost"));
  g_ptr_array_set_size (sys->keys, 0);
  get_strings (state, "keys", sys->keys);
}

/* ---- users ---- */

static gboolean
parse_id (const char *text, guint32 *id)
{
  char *end;
  guint64 n;

  if (!*text || !g_ascii_isdigit (*text))
    return FALSE;
  n = g_ascii_strtoull (text, &end, 10);
  if (*end || n > G_MAXUINT32)
    return FALSE;
  *id = (guint32) n;
  return TRUE;
}

gboolean
fake_creds_resolve (const char *spec, FakeCreds *creds, char **message)
{
  g_auto (GStrv) parts = g_strsplit (spec && *spec ? spec : "root", ":", 2);
  const User *user = NULL;
  guint32 uid;

  memset (creds, 0, sizeof *creds);
  if (parse_id (parts[0], &uid))
    {
      for (guint i = 0; i < G_N_ELEMENTS (users); i++)
        if (users[i].uid == uid)
          user = &users[i];
      creds->uid = uid;
      creds->gid = user ? user->gid : uid;
    }
  else
    {
      for (guint i = 0; i < G_N_ELEMENTS (users); i++)
        if (strcmp (users[i].name, parts[0]) == 0)
          user = &users[i];
      if (!user)
        {
          *message = g_strdup_printf ("user: %s: not in the guest's /etc/passwd", parts[0]);
          return FALSE;
        }
      creds->uid = user->uid;
      creds->gid = user->gid;
    }
  if (parts[1])
    {
      const Group *group = NULL;

      if (!parse_id (parts[1], &creds->gid))
        {
          for (guint i = 0; i < G_N_ELEMENTS (groups); i++)
            if (strcmp (groups[i].name, parts[1]) == 0)
              group = &groups[i];
          if (!group)
            {
              *message = g_strdup_printf ("group: %s: not in the guest's /etc/group", parts[1]);
              return FALSE;
            }
          creds->gid = group->gid;
        }
    }
  creds->name = g_strdup (user ? user->name : parts[0]);
  creds->home = g_strdup (user ? user->home : "/");
  creds->groups[creds->n_groups++] = creds->gid;
  for (guint i = 0; user && i < G_N_ELEMENTS (groups); i++)
    if (g_strcmp0 (groups[i].member, user->name) == 0 && groups[i].gid != creds->gid &&
        creds->n_groups < FAKE_SHELL_GROUPS_MAX)
      creds->groups[creds->n_groups++] = groups[i].gid;
  return TRUE;
}

void
fake_creds_clear (FakeCreds *creds)
{
  g_clear_pointer (&creds->name, g_free);
  g_clear_pointer (&creds->home, g_free);
}

static void
creds_copy (FakeCreds *to, const FakeCreds *from)
{
  *to = *from;
  to->name = g_strdup (from->name);
  to->home = g_strdup (from->home);
}

/* ---- commands ---- */

const char *
fake_shell_find (const char *name)
{
  const char *base = name;

  if (g_strcmp0 (name, FAKE_SHELL_AGENT_PATH) == 0)
    return FAKE_SHELL_AGENT_PATH;
  if (!name)
    return NULL;
  if (g_str_has_prefix (name, "/bin/"))
    base = name + strlen ("/bin/");
  else if (g_str_has_prefix (name, "/usr/bin/"))
    base = name + strlen ("/usr/bin/");
  else if (strchr (name, '/'))
    return NULL;
  for (guint i = 0; commands[i]; i++)
    if (strcmp (commands[i], base) == 0)
      return commands[i];
  return NULL;
}

static void
out_text (FakeProc *proc, int stream, const char *text)
{
  g_byte_array_append (proc->out[proc->tty ? 1 : stream], (const guint8 *) text, strlen (text));
}

static void G_GNUC_PRINTF (3, 4)
out_printf (FakeProc *proc, int stream, const char *format, ...)
{
  g_autofree char *text = NULL;
  va_list args;

  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  out_text (proc, stream, text);
}

static char *
full_path (FakeProc *proc, const char *path)
{
  return g_canonicalize_filename (path, proc->workdir);
}

static gboolean
path_exists (FakeSystem *sys, const char *path)
{
  GHashTableIter iter;
  gpointer key;
  g_autofree char *prefix = g_strconcat (path, "/", NULL);

  if (g_hash_table_contains (sys->files, path) || g_strv_contains (directories, path) ||
      strcmp (path, "/proc/mounts") == 0)
    return TRUE;
  if (g_str_has_prefix (path, "/bin/") && fake_shell_find (path))
    return TRUE;
  for (guint i = 0; i < sys->tmpfs->len; i++)
    if (strcmp (sys->tmpfs->pdata[i], path) == 0)
      return TRUE;
  g_hash_table_iter_init (&iter, sys->files);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_str_has_prefix (key, prefix))
      return TRUE;
  return FALSE;
}

static void
cat_file (FakeProc *proc, const char *name)
{
  g_autofree char *path = full_path (proc, name);
  FakeFile *file = g_hash_table_lookup (proc->sys->files, path);

  if (strcmp (path, "/proc/mounts") == 0)
    {
      if (proc->sys->root)
        out_text (proc, 1, "overlay / overlay rw 0 0\n");
      for (guint i = 0; i < proc->sys->tmpfs->len; i++)
        out_printf (proc, 1, "tmpfs %s tmpfs %s 0 0\n", (char *) proc->sys->tmpfs->pdata[i],
                    is_read_only_target (proc->sys, proc->sys->tmpfs->pdata[i]) ? "ro" : "rw");
      return;
    }
  if (!file)
    {
      out_printf (proc, 2, "cat: can't open '%s': No such file or directory\n", name);
      proc->last_status = 1;
      return;
    }
  g_byte_array_append (proc->out[1], g_bytes_get_data (file->content, NULL),
                       g_bytes_get_size (file->content));
}

static void
run_id (FakeProc *proc, char **argv)
{
  const FakeCreds *c = &proc->creds;
  const char *flag = argv[1] ? argv[1] : "";

  if (strcmp (flag, "-u") == 0)
    out_printf (proc, 1, "%u\n", c->uid);
  else if (strcmp (flag, "-g") == 0)
    out_printf (proc, 1, "%u\n", c->gid);
  else if (strcmp (flag, "-G") == 0)
    {
      g_autoptr (GString) line = g_string_new (NULL);

      for (guint i = 0; i < c->n_groups; i++)
        g_string_append_printf (line, "%s%u", i ? " " : "", c->groups[i]);
      out_printf (proc, 1, "%s\n", line->str);
    }
  else if (!*flag)
    out_printf (proc, 1, "uid=%u(%s) gid=%u\n", c->uid, c->name ? c->name : "", c->gid);
  else
    {
      out_printf (proc, 2, "id: unrecognized option '%s'\n", flag);
      proc->last_status = 1;
    }
}

/* A script of simple commands: words split on spaces, no quoting. */
static void
add_script (GPtrArray *script, const char *text)
{
  g_auto (GStrv) commands_text = g_strsplit (text, ";", -1);

  for (char **c = commands_text; *c; c++)
    {
      g_auto (GStrv) words = g_strsplit_set (*c, " \t\n", -1);
      g_autoptr (GPtrArray) w = g_ptr_array_new ();

      for (char **p = words; *p; p++)
        if (**p)
          g_ptr_array_add (w, g_strdup (*p));
      if (w->len == 0)
        continue;
      g_ptr_array_add (w, NULL);
      g_ptr_array_add (script, g_ptr_array_steal (w, NULL));
    }
}

/* Starts @argv; a command that finishes at once leaves wait at WAIT_NONE
 * with last_status set. */
static void
start (FakeProc *proc, char **argv)
{
  const char *name = fake_shell_find (argv[0]);
  guint argc = g_strv_length (argv);

  proc->last_status = 0;
  if (!name)
    {
      out_printf (proc, 2, "sh: %s: not found\n", argv[0]);
      proc->last_status = 127;
    }
  else if (strcmp (name, "true") == 0)
    ;
  else if (strcmp (name, "false") == 0)
    proc->last_status = 1;
  else if (strcmp (name, "echo") == 0)
    {
      g_autofree char *line = g_strjoinv (" ", argv + 1);
      out_printf (proc, 1, "%s\n", line);
    }
  else if (strcmp (name, "cat") == 0)
    {
      if (argc == 1)
        proc->wait = WAIT_STDIN;
      for (guint i = 1; i < argc; i++)
        cat_file (proc, argv[i]);
    }
  else if (strcmp (name, "printenv") == 0 || strcmp (name, "env") == 0)
    {
      /* busybox's env, without arguments, is printenv without them. */
      if (argc == 1)
        for (char **e = proc->env; *e; e++)
          out_printf (proc, 1, "%s\n", *e);
      for (guint i = 1; i < argc; i++)
        {
          const char *value = g_environ_getenv (proc->env, argv[i]);
          if (value)
            out_printf (proc, 1, "%s\n", value);
          else
            proc->last_status = 1;
        }
    }
  else if (strcmp (name, "id") == 0)
    run_id (proc, argv);
  else if (strcmp (name, "pwd") == 0)
    out_printf (proc, 1, "%s\n", proc->workdir);
  else if (strcmp (name, "hostname") == 0)
    out_printf (proc, 1, "%s\n", proc->sys->hostname);
  else if (strcmp (name, "uname") == 0)
    {
      if (argc > 1 && strcmp (argv[1], "-a") == 0)
        out_printf (proc, 1, UNAME, proc->sys->hostname);
      else
        out_text (proc, 1, "Linux\n");
    }
  else if (strcmp (name, "touch") == 0)
    for (guint i = 1; i < argc; i++)
      {
        g_autofree char *path = full_path (proc, argv[i]);

        if (fake_system_read_only (proc->sys, path))
          {
            out_printf (proc, 2, "touch: %s: Read-only file system\n", argv[i]);
            proc->last_status = 1;
          }
        else if (!g_hash_table_contains (proc->sys->files, path))
          put_text (proc->sys, path, "", 0644);
      }
  else if (strcmp (name, "rm") == 0)
    for (guint i = 1; i < argc; i++)
      {
        g_autofree char *path = full_path (proc, argv[i]);

        /* Unlinking a mount point is EBUSY; what is under a read-only
         * mount, EROFS. */
        if (is_mount_point (proc->sys, path))
          {
            out_printf (proc, 2, "rm: can't remove '%s': Device or resource busy\n", argv[i]);
            proc->last_status = 1;
          }
        else if (fake_system_read_only (proc->sys, path))
          {
            out_printf (proc, 2, "rm: can't remove '%s': Read-only file system\n", argv[i]);
            proc->last_status = 1;
          }
        else if (!g_hash_table_remove (proc->sys->files, path))
          {
            out_printf (proc, 2, "rm: can't remove '%s': No such file or directory\n", argv[i]);
            proc->last_status = 1;
          }
      }
  else if (strcmp (name, "test") == 0)
    {
      if (argc == 3 && strcmp (argv[1], "-e") == 0)
        {
          g_autofree char *path = full_path (proc, argv[2]);
          proc->last_status = path_exists (proc->sys, path) ? 0 : 1;
        }
      else
        proc->last_status = 2;
    }
  else if (strcmp (name, "sleep") == 0)
    {
      char *end = NULL;
      double seconds = argc == 2 ? g_ascii_strtod (argv[1], &end) : -1;

      if (argc != 2 || *end || seconds < 0)
        {
          out_printf (proc, 2, "sleep: invalid number '%s'\n", argc > 1 ? argv[1] : "");
          proc->last_status = 1;
        }
      else
        {
          proc->wait = WAIT_CLOCK;
          proc->wake_at = proc->sys->now + seconds;
        }
    }
  else if (strcmp (name, "listen") == 0)
    {
      guint32 port;

      if (argc != 2 || !parse_id (argv[1], &port) || port == 0 || port > 65535)
        {
          out_printf (proc, 2, "listen: bad port '%s'\n", argc > 1 ? argv[1] : "");
          proc->last_status = 1;
        }
      else
        {
          proc->wait = WAIT_SIGNAL;
          proc->port = port;
        }
    }
  else if (strcmp (name, FAKE_SHELL_AGENT_PATH) == 0)
    {
      if (argc >= 2 && strcmp (argv[1], "authorized-keys") == 0)
        for (guint i = 0; i < proc->sys->keys->len; i++)
          out_printf (proc, 1, "%s\n", (char *) proc->sys->keys->pdata[i]);
      else
        {
          out_text (proc, 2, "microvmd-agent: usage: microvmd-agent authorized-keys [USER]\n");
          proc->last_status = 2;
        }
    }
  else if (strcmp (name, "sh") == 0)
    {
      /* The script runs next, in this process. */
      if (argc >= 3 && strcmp (argv[1], "-c") == 0)
        {
          g_autoptr (GPtrArray) inner = g_ptr_array_new ();
          add_script (inner, argv[2]);
          for (guint i = 0; i < inner->len; i++)
            g_ptr_array_insert (proc->script, proc->next + i, inner->pdata[i]);
        }
      else if (argc > 1)
        {
          out_printf (proc, 2, "sh: can't open '%s': No such file or directory\n", argv[1]);
          proc->last_status = 2;
        }
    }
}

/* The running command's wait; TRUE if it moved. */
static gboolean
step_wait (FakeProc *proc)
{
  switch (proc->wait)
    {
    case WAIT_STDIN:
      {
        gsize room = proc->out[1]->len < PIPE_BYTES ? PIPE_BYTES - proc->out[1]->len : 0;
        gsize n = MIN (room, proc->in->len);

        if (n > 0)
          {
            g_byte_array_append (proc->out[1], proc->in->data, n);
            g_byte_array_remove_range (proc->in, 0, n);
            proc->consumed += n;
          }
        if (proc->in->len == 0 && proc->in_closed)
          proc->wait = WAIT_NONE;
        return n > 0 || proc->wait == WAIT_NONE;
      }
    case WAIT_CLOCK:
      if (proc->sys->now < proc->wake_at)
        return FALSE;
      proc->wait = WAIT_NONE;
      return TRUE;
    case WAIT_SIGNAL:
      return FALSE;
    case WAIT_NONE:
    default:
      return FALSE;
    }
}

gboolean
fake_proc_run (FakeProc *proc)
{
  gboolean moved = FALSE;

  while (!proc->done)
    {
      char **argv;

      if (proc->wait != WAIT_NONE)
        {
          moved |= step_wait (proc);
          if (proc->wait != WAIT_NONE)
            break;
        }
      moved = TRUE;
      if (proc->next >= proc->script->len)
        {
          proc->done = TRUE;
          proc->status = proc->last_status;
          break;
        }
      argv = proc->script->pdata[proc->next++];
      if (strcmp (argv[0], "exit") == 0)
        {
          guint32 code = (guint32) proc->last_status;

          if (argv[1] && !parse_id (argv[1], &code))
            code = 2;
          proc->done = TRUE;
          proc->status = (int) (code & 0xff);
          break;
        }
      start (proc, argv);
    }
  return moved;
}

void
fake_proc_signal (FakeProc *proc, int signum)
{
  if (proc->done || signum <= 0 || signum == SIGCHLD || signum == SIGCONT ||
      signum == SIGURG || signum == SIGWINCH)
    return;
  proc->done = TRUE;
  proc->signum = signum;
  proc->wait = WAIT_NONE;
  proc->port = 0;
}

FakeProc *
fake_proc_new (FakeSystem *sys, char **argv, char **env, const char *workdir,
               const FakeCreds *creds, gboolean tty)
{
  FakeProc *proc = g_new0 (FakeProc, 1);

  proc->sys = sys;
  proc->script = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  g_ptr_array_add (proc->script, g_strdupv (argv));
  proc->env = g_strdupv (env);
  proc->workdir = g_strdup (workdir && *workdir ? workdir : "/");
  creds_copy (&proc->creds, creds);
  proc->tty = tty;
  proc->in = g_byte_array_new ();
  for (int i = 1; i < 3; i++)
    proc->out[i] = g_byte_array_new ();
  return proc;
}

void
fake_proc_free (FakeProc *proc)
{
  if (!proc)
    return;
  g_ptr_array_unref (proc->script);
  g_strfreev (proc->env);
  g_free (proc->workdir);
  fake_creds_clear (&proc->creds);
  g_byte_array_unref (proc->in);
  for (int i = 1; i < 3; i++)
    g_byte_array_unref (proc->out[i]);
  g_free (proc);
}

GByteArray *
fake_proc_stdin (FakeProc *proc)
{
  return proc->in;
}

void
fake_proc_close_stdin (FakeProc *proc)
{
  proc->in_closed = TRUE;
}

gsize
fake_proc_take_consumed (FakeProc *proc)
{
  gsize n = proc->consumed;

  proc->consumed = 0;
  return n;
}

GByteArray *
fake_proc_output (FakeProc *proc, int stream)
{
  return proc->out[stream == 2 ? 2 : 1];
}

gboolean
fake_proc_done (FakeProc *proc)
{
  return proc->done;
}

int
fake_proc_exit_code (FakeProc *proc)
{
  return proc->status;
}

int
fake_proc_signal_number (FakeProc *proc)
{
  return proc->signum;
}

guint32
fake_proc_listening (FakeProc *proc)
{
  return proc->done || proc->wait != WAIT_SIGNAL ? 0 : proc->port;
}

/* ---- snapshots ---- */

static const char *const wait_names[] = { "none", "stdin", "clock", "signal", NULL };

JsonNode *
fake_proc_save (FakeProc *proc)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autofree char *user = g_strdup_printf ("%u:%u", proc->creds.uid, proc->creds.gid);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "script");
  json_builder_begin_array (b);
  for (guint i = 0; i < proc->script->len; i++)
    {
      json_builder_begin_array (b);
      for (char **w = proc->script->pdata[i]; *w; w++)
        json_builder_add_string_value (b, *w);
      json_builder_end_array (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "next");
  json_builder_add_int_value (b, proc->next);
  json_builder_set_member_name (b, "env");
  json_builder_begin_array (b);
  for (char **e = proc->env; *e; e++)
    json_builder_add_string_value (b, *e);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "workdir");
  json_builder_add_string_value (b, proc->workdir);
  json_builder_set_member_name (b, "user");
  json_builder_add_string_value (b, user);
  json_builder_set_member_name (b, "tty");
  json_builder_add_boolean_value (b, proc->tty);
  json_builder_set_member_name (b, "wait");
  json_builder_add_string_value (b, wait_names[proc->wait]);
  json_builder_set_member_name (b, "wake_in");
  json_builder_add_double_value (b, proc->wake_at - proc->sys->now);
  json_builder_set_member_name (b, "port");
  json_builder_add_int_value (b, proc->port);
  json_builder_set_member_name (b, "stdin_closed");
  json_builder_add_boolean_value (b, proc->in_closed);
  json_builder_set_member_name (b, "last_status");
  json_builder_add_int_value (b, proc->last_status);
  json_builder_set_member_name (b, "done");
  json_builder_add_boolean_value (b, proc->done);
  json_builder_set_member_name (b, "status");
  json_builder_add_int_value (b, proc->status);
  json_builder_set_member_name (b, "signal");
  json_builder_add_int_value (b, proc->signum);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

FakeProc *
fake_proc_load (FakeSystem *sys, JsonObject *state)
{
  JsonArray *script = json_object_get_array_member (state, "script");
  JsonArray *env = json_object_get_array_member (state, "env");
  g_autoptr (GStrvBuilder) envb = g_strv_builder_new ();
  g_auto (GStrv) envv = NULL;
  g_auto (FakeCreds) creds = { 0 };
  g_autofree char *message = NULL;
  const char *wait = json_object_get_string_member_with_default (state, "wait", "none");
  char *empty[] = { "true", NULL };
  FakeProc *proc;

  for (guint i = 0; env && i < json_array_get_length (env); i++)
    g_strv_builder_add (envb, json_array_get_string_element (env, i));
  envv = g_strv_builder_end (envb);
  if (!fake_creds_resolve (json_object_get_string_member_with_default (state, "user", "0"),
                           &creds, &message))
    fake_creds_resolve ("0", &creds, &message);
  proc = fake_proc_new (sys, empty, envv, json_object_get_string_member_with_default (state,
                                                                                      "workdir", "/"),
                        &creds, json_object_get_boolean_member_with_default (state, "tty", FALSE));
  g_ptr_array_set_size (proc->script, 0);
  for (guint i = 0; script && i < json_array_get_length (script); i++)
    {
      JsonArray *words = json_array_get_array_element (script, i);
      g_autoptr (GStrvBuilder) w = g_strv_builder_new ();

      for (guint j = 0; j < json_array_get_length (words); j++)
        g_strv_builder_add (w, json_array_get_string_element (words, j));
      g_ptr_array_add (proc->script, g_strv_builder_end (w));
    }
  proc->next = (guint) json_object_get_int_member_with_default (state, "next", 0);
  for (int i = 0; wait_names[i]; i++)
    if (strcmp (wait, wait_names[i]) == 0)
      proc->wait = i;
  proc->wake_at = sys->now + json_object_get_double_member_with_default (state, "wake_in", 0);
  proc->port = (guint32) json_object_get_int_member_with_default (state, "port", 0);
  proc->in_closed = json_object_get_boolean_member_with_default (state, "stdin_closed", TRUE);
  proc->last_status = (int) json_object_get_int_member_with_default (state, "last_status", 0);
  proc->done = json_object_get_boolean_member_with_default (state, "done", FALSE);
  proc->status = (int) json_object_get_int_member_with_default (state, "status", 0);
  proc->signum = (int) json_object_get_int_member_with_default (state, "signal", 0);
  return proc;
}
