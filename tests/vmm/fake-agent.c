/* The simulated guest's agent (fake-agent.h). */
#include "config.h"

#include "fake-agent.h"
#include "fake-shell.h"

#include <signal.h>
#include <string.h>

#define EXIT_ACK_WAIT_S     5.0
/* How long the guest takes to end once it has said FAILED, and for
 * systemd to start the agent anew. */
#define END_DELAY_S         0.1
#define RESTART_DELAY_S     0.1
#define HEALTH_OUTPUT_BYTES 4096
#define BASE_PATH           "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const uint8_t nested_tags[] = { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK };

typedef enum {
  STATE_UNCONFIGURED,
  STATE_TEMPLATE,       /* a warm template: the root only, until the next CONFIG */
  STATE_RUNNING,
  STATE_EXITED,
  STATE_ENDED,          /* the guest is being ended: the agent does nothing more */
} State;

static const char *const state_names[] = {
  "unconfigured", "template", "running", "exited", "ended", NULL
};

typedef struct {
  gboolean  on;
  char    **argv;         /* an exec check, or NULL */
  guint32   port;         /* a tcp or http check */
  char     *path;         /* http */
  guint32   interval;
  guint32   timeout;
  guint32   retries;
  guint32   start_period;
  double    started_at;
  gboolean  passed;       /* once: the start period is over */
  double    next_at;
  FakeProc *run;          /* the check running now */
  double    run_deadline;
  char     *status;
  guint32   streak;
  char     *output;
} Health;

typedef struct {
  FakeAgentSession *session;
  guint32           channel;
  FakeProc         *proc;
  gboolean          tty;
  guint32           window[3];
} Exec;

struct _FakeAgentSession {
  FakeAgent  *agent;       /* NULL once the agent is gone */
  MvAgentBuf  out;
  gboolean    hello;
  gboolean    want_output;  /* its HELLO had WANT_OUTPUT: it gets OUTPUT */
  gboolean    ending;
  GHashTable *execs;       /* channel -> Exec */
};

struct _FakeAgent {
  FakeAgentHooks hooks;
  FakeSystem     sys;
  GList         *sessions;
  guint          n_execs;

  State          state;
  gboolean       configured;
  /* The ROOT and OVERLAY a template booted with (NULL: none), which the
   * CONFIG of a machine restored from it must name too. */
  char          *template_root;
  char          *template_overlay;
  gboolean       systemd;
  gboolean       reboot;          /* END: reboot, else poweroff */
  FakeProc      *workload;
  GString       *console_line;
  /* The workload's output for the next host that asks: GBytes whose
   * first byte is the stream; within MV_AGENT_OUTPUT_PENDING_BYTES. Not
   * kept in a saved state: a restored guest's host has had it. */
  GPtrArray     *held;
  gsize          held_bytes;
  guint64        held_dropped;
  int            exit_code;
  int            exit_signal;
  double         exit_deadline;   /* < 0: not waiting for EXIT_ACK */
  double         end_at;          /* < 0: no end scheduled (after FAILED) */
  double         restart_at;      /* < 0: an agent listens */
  guint64        instance;        /* the agent process of the moment, as HELLO says */
  double         next_usage;      /* when USAGE is sent next; < 0: not yet known */
  Health         health;
};

/* ---- frames out ---- */

static void
send_exit_fields (MvAgentBuf *out, int code, int signum)
{
  if (signum)
    mv_agent_buf_put_u32 (out, MV_AGENT_F_SIGNAL, (guint32) signum);
  else
    mv_agent_buf_put_u32 (out, MV_AGENT_F_EXIT_CODE, (guint32) code);
}

static char *
exit_text (int code, int signum)
{
  return signum ? g_strdup_printf ("killed by signal %d", signum)
                : g_strdup_printf ("exited with status %d", code);
}

static void
send_message (FakeAgentSession *s, guint8 type, guint32 channel, const char *message)
{
  mv_agent_buf_begin (&s->out, type, channel);
  if (message)
    mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, message);
  mv_agent_buf_end (&s->out);
}

static void
send_health (FakeAgentSession *s, Health *h)
{
  mv_agent_buf_begin (&s->out, MV_AGENT_HEALTH, 0);
  mv_agent_buf_put_str (&s->out, MV_AGENT_F_HEALTH_STATUS, h->status);
  mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_FAILING_STREAK, h->streak);
  if (h->output)
    mv_agent_buf_put_str (&s->out, MV_AGENT_F_OUTPUT, h->output);
  mv_agent_buf_end (&s->out);
}

static void
send_exit (FakeAgentSession *s, FakeAgent *agent)
{
  g_autofree char *text = exit_text (agent->exit_code, agent->exit_signal);

  mv_agent_buf_begin (&s->out, MV_AGENT_EXIT, 0);
  send_exit_fields (&s->out, agent->exit_code, agent->exit_signal);
  mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, text);
  mv_agent_buf_end (&s->out);
}

static void
send_exec_exit (FakeAgentSession *s, guint32 channel, int code, int signum, const char *message)
{
  mv_agent_buf_begin (&s->out, MV_AGENT_EXEC_EXIT, channel);
  send_exit_fields (&s->out, code, signum);
  if (message)
    mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, message);
  mv_agent_buf_end (&s->out);
}

static void
send_stream (FakeAgentSession *s, guint8 type, guint32 channel, guint32 stream,
             const guint8 *data, gsize len, guint32 grant)
{
  mv_agent_buf_begin (&s->out, type, channel);
  mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_STREAM, stream);
  if (type == MV_AGENT_DATA)
    mv_agent_buf_put (&s->out, MV_AGENT_F_BYTES, data, len);
  else if (type == MV_AGENT_WINDOW)
    mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_GRANT, grant);
  mv_agent_buf_end (&s->out);
}

static void
say (FakeAgent *agent, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
say (FakeAgent *agent, const char *format, ...)
{
  g_autofree char *line = NULL;
  va_list args;

  va_start (args, format);
  line = g_strdup_vprintf (format, args);
  va_end (args);
  agent->hooks.console (agent->hooks.data, line);
}

/* ---- fields in ---- */

static char *
field_string (const MvAgentField *field)
{
  if (memchr (field->value, '\0', field->len))
    return NULL;
  return g_strndup ((const char *) field->value, field->len);
}

static guint32
field_u32 (const MvAgentField *field, guint32 fallback)
{
  guint32 value;

  return mv_agent_field_u32 (field, &value) ? value : fallback;
}

/* The fields a command is given with, in CONFIG and EXEC. */
typedef struct {
  GPtrArray *argv;
  GPtrArray *env;
  char      *workdir;
  char      *user;
  gboolean   tty;
} Command;

static void
command_init (Command *c)
{
  memset (c, 0, sizeof *c);
  c->argv = g_ptr_array_new_with_free_func (g_free);
  c->env = g_ptr_array_new_with_free_func (g_free);
}

static void
command_clear (Command *c)
{
  g_clear_pointer (&c->argv, g_ptr_array_unref);
  g_clear_pointer (&c->env, g_ptr_array_unref);
  g_clear_pointer (&c->workdir, g_free);
  g_clear_pointer (&c->user, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Command, command_clear)

/* TRUE if @field is one of a command's. */
static gboolean
command_take (Command *c, const MvAgentField *field)
{
  char *s;

  switch (field->tag)
    {
    case MV_AGENT_F_ARGV:
    case MV_AGENT_F_ENV:
      if ((s = field_string (field)))
        g_ptr_array_add (field->tag == MV_AGENT_F_ARGV ? c->argv : c->env, s);
      return TRUE;
    case MV_AGENT_F_WORKDIR:
      g_free (c->workdir);
      c->workdir = field_string (field);
      return TRUE;
    case MV_AGENT_F_USER:
      g_free (c->user);
      c->user = field_string (field);
      return TRUE;
    case MV_AGENT_F_TTY:
      c->tty = field_u32 (field, 0) != 0;
      return TRUE;
    default:
      return FALSE;
    }
}

static char **
command_argv (Command *c)
{
  g_ptr_array_add (c->argv, NULL);
  g_ptr_array_set_size (c->argv, c->argv->len - 1);
  return (char **) c->argv->pdata;
}

/* PATH, HOME and TERM under what @c sets. */
static char **
command_environ (Command *c, const FakeCreds *creds)
{
  char **env = NULL;

  env = g_environ_setenv (env, "PATH", BASE_PATH, TRUE);
  env = g_environ_setenv (env, "HOME", creds->home, TRUE);
  env = g_environ_setenv (env, "TERM", "linux", TRUE);
  for (guint i = 0; i < c->env->len; i++)
    {
      const char *kv = c->env->pdata[i];
      const char *eq = strchr (kv, '=');
      g_autofree char *key = eq ? g_strndup (kv, eq - kv) : NULL;

      if (key && *key)
        env = g_environ_setenv (env, key, eq + 1, TRUE);
    }
  return env;
}

static FakeProc *
command_start (FakeAgent *agent, Command *c, const FakeCreds *creds)
{
  g_auto (GStrv) env = command_environ (c, creds);

  return fake_proc_new (&agent->sys, command_argv (c), env, c->workdir, creds, c->tty);
}

/* ---- metadata ---- */

static void
write_keys (FakeAgent *agent)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_autoptr (GBytes) bytes = NULL;

  for (guint i = 0; i < agent->sys.keys->len; i++)
    g_string_append_printf (text, "%s\n", (char *) agent->sys.keys->pdata[i]);
  bytes = g_bytes_new (text->str, text->len);
  fake_system_put_file (&agent->sys, FAKE_SHELL_KEYS_PATH, bytes, 0644);
}

/* HOSTNAME, SSH_KEY... and DOCUMENT among @payload's fields replace what
 * the guest had. */
/* A guest restored from a template, told who it is (docs/agent-protocol.md,
 * REIDENTIFY): its hostname, and entropy for its random number generator,
 * which a simulated guest has none of; the console says what came, so
 * that tests see each guest had its own. Only a template's guest takes
 * it, as the real agent does. */
static void
reidentify (FakeAgent *agent, const MvAgentFrame *frame)
{
  MvAgentField field;

  if (agent->state != STATE_TEMPLATE)
    return;
  if (mv_agent_frame_find (frame, MV_AGENT_F_HOSTNAME, &field))
    {
      g_autofree char *name = field_string (&field);

      if (name && *name)
        {
          g_free (agent->sys.hostname);
          agent->sys.hostname = g_steal_pointer (&name);
        }
    }
  if (mv_agent_frame_find (frame, MV_AGENT_F_ENTROPY, &field))
    {
      g_autofree char *digest = g_compute_checksum_for_data (G_CHECKSUM_SHA256, field.value,
                                                             field.len);

      say (agent, "microvmd-agent: reidentified as %s, %u bytes of entropy (SHA-256 %.16s)",
           agent->sys.hostname, (guint) field.len, digest);
    }
}

static void
apply_metadata (FakeAgent *agent, const guint8 *payload, gsize len)
{
  MvAgentFields fields;
  MvAgentField field;

  g_ptr_array_set_size (agent->sys.keys, 0);
  mv_agent_fields_init (&fields, payload, len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    {
      g_autofree char *s = NULL;

      if (field.tag != MV_AGENT_F_HOSTNAME && field.tag != MV_AGENT_F_SSH_KEY &&
          field.tag != MV_AGENT_F_DOCUMENT)
        continue;
      if (!(s = field_string (&field)))
        continue;
      if (field.tag == MV_AGENT_F_HOSTNAME && *s)
        {
          g_free (agent->sys.hostname);
          agent->sys.hostname = g_steal_pointer (&s);
        }
      else if (field.tag == MV_AGENT_F_SSH_KEY)
        g_ptr_array_add (agent->sys.keys, g_steal_pointer (&s));
      else if (field.tag == MV_AGENT_F_DOCUMENT)
        {
          g_autoptr (GBytes) bytes = g_bytes_new (s, strlen (s));
          fake_system_put_file (&agent->sys, FAKE_SHELL_METADATA_PATH, bytes, 0600);
        }
    }
  write_keys (agent);
}

/* ---- the guest's end ---- */

static void
end_guest (FakeAgent *agent, gboolean reboot, const char *why)
{
  agent->state = STATE_ENDED;
  agent->end_at = -1;
  agent->exit_deadline = -1;
  agent->hooks.end (agent->hooks.data, reboot, why);
}

static void
finish_exit (FakeAgent *agent)
{
  g_autofree char *text = exit_text (agent->exit_code, agent->exit_signal);

  say (agent, "microvmd-agent: workload %s", text);
  end_guest (agent, agent->reboot, "exit");
}

static void
flush_console_line (FakeAgent *agent)
{
  if (agent->console_line->len == 0)
    return;
  say (agent, "%s", agent->console_line->str);
  g_string_truncate (agent->console_line, 0);
}

static void
send_output (FakeAgentSession *s, guint32 stream, const guint8 *data, gsize len,
             guint64 dropped)
{
  mv_agent_buf_begin (&s->out, MV_AGENT_OUTPUT, 0);
  mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_STREAM, stream);
  mv_agent_buf_put (&s->out, MV_AGENT_F_BYTES, data, len);
  if (dropped)
    mv_agent_buf_put_u64 (&s->out, MV_AGENT_F_DROPPED, dropped);
  mv_agent_buf_end (&s->out);
}

/* As the agent does: to each host that asked, else held for the next
 * one, within the bound. */
static void
deliver_output (FakeAgent *agent, guint32 stream, const guint8 *data, gsize len)
{
  gboolean wanted = FALSE;
  guint8 *record;

  for (GList *l = agent->sessions; l; l = l->next)
    {
      FakeAgentSession *s = l->data;

      if (!s->want_output || s->ending)
        continue;
      wanted = TRUE;
      send_output (s, stream, data, len, 0);
    }
  if (wanted || len == 0)
    return;
  if (agent->held_dropped || agent->held_bytes + len > MV_AGENT_OUTPUT_PENDING_BYTES)
    {
      agent->held_dropped += len;
      return;
    }
  record = g_malloc (len + 1);
  record[0] = (guint8) stream;
  memcpy (record + 1, data, len);
  g_ptr_array_add (agent->held, g_bytes_new_take (record, len + 1));
  agent->held_bytes += len;
}

static void
send_held_output (FakeAgent *agent, FakeAgentSession *s)
{
  for (guint i = 0; i < agent->held->len; i++)
    {
      gsize size;
      const guint8 *record = g_bytes_get_data (agent->held->pdata[i], &size);

      send_output (s, record[0], record + 1, size - 1, 0);
    }
  /* The held output is the oldest; what came after it was dropped. */
  if (agent->held_dropped)
    send_output (s, MV_AGENT_STREAM_STDOUT, NULL, 0, agent->held_dropped);
  g_ptr_array_set_size (agent->held, 0);
  agent->held_bytes = 0;
  agent->held_dropped = 0;
}

/* The workload's stdout and stderr go to the console, line by line, and
 * to the host. */
static void
drain_workload (FakeAgent *agent)
{
  for (int stream = 1; stream <= 2; stream++)
    {
      GByteArray *out = fake_proc_output (agent->workload, stream);

      deliver_output (agent, (guint32) stream, out->data, out->len);
      for (guint i = 0; i < out->len; i++)
        if (out->data[i] == '\n')
          flush_console_line (agent);
        else
          g_string_append_c (agent->console_line, (char) out->data[i]);
      g_byte_array_set_size (out, 0);
    }
}

static void
workload_ended (FakeAgent *agent)
{
  flush_console_line (agent);
  agent->exit_code = fake_proc_exit_code (agent->workload);
  agent->exit_signal = fake_proc_signal_number (agent->workload);
  g_clear_pointer (&agent->workload, fake_proc_free);
  agent->state = STATE_EXITED;
  agent->exit_deadline = agent->sys.now + EXIT_ACK_WAIT_S;
  for (GList *l = agent->sessions; l; l = l->next)
    if (((FakeAgentSession *) l->data)->hello)
      send_exit (l->data, agent);
}

/* ---- health ---- */

static void
health_clear (Health *h)
{
  g_clear_pointer (&h->argv, g_strfreev);
  g_clear_pointer (&h->path, g_free);
  g_clear_pointer (&h->run, fake_proc_free);
  g_clear_pointer (&h->status, g_free);
  g_clear_pointer (&h->output, g_free);
  memset (h, 0, sizeof *h);
}

static void
health_set_status (FakeAgent *agent, const char *status)
{
  Health *h = &agent->health;

  if (g_strcmp0 (h->status, status) == 0)
    return;
  g_free (h->status);
  h->status = g_strdup (status);
  for (GList *l = agent->sessions; l; l = l->next)
    if (((FakeAgentSession *) l->data)->hello)
      send_health (l->data, h);
}

static void
health_result (FakeAgent *agent, gboolean passed, const char *output)
{
  Health *h = &agent->health;

  g_free (h->output);
  h->output = g_strndup (output, HEALTH_OUTPUT_BYTES);
  h->next_at = agent->sys.now + h->interval;
  if (passed)
    {
      h->passed = TRUE;
      h->streak = 0;
      health_set_status (agent, "healthy");
      return;
    }
  /* Failures within the start period do not count; a pass ends it. */
  if (!h->passed && agent->sys.now < h->started_at + h->start_period)
    return;
  h->streak++;
  if (h->streak >= h->retries)
    health_set_status (agent, "unhealthy");
}

static gboolean
port_served (FakeAgent *agent, guint32 port)
{
  if (agent->workload && fake_proc_listening (agent->workload) == port)
    return TRUE;
  for (GList *l = agent->sessions; l; l = l->next)
    {
      GHashTableIter iter;
      gpointer value;

      g_hash_table_iter_init (&iter, ((FakeAgentSession *) l->data)->execs);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        if (fake_proc_listening (((Exec *) value)->proc) == port)
          return TRUE;
    }
  return FALSE;
}

static void
health_step (FakeAgent *agent)
{
  Health *h = &agent->health;

  if (!h->on || agent->state != STATE_RUNNING)
    return;
  if (h->run)
    {
      fake_proc_run (h->run);
      if (fake_proc_done (h->run))
        {
          g_autoptr (GString) output = g_string_new (NULL);

          for (int stream = 1; stream <= 2; stream++)
            {
              GByteArray *out = fake_proc_output (h->run, stream);
              g_string_append_len (output, (const char *) out->data, out->len);
            }
          health_result (agent, fake_proc_exit_code (h->run) == 0 && !fake_proc_signal_number (h->run),
                         output->str);
          g_clear_pointer (&h->run, fake_proc_free);
        }
      else if (agent->sys.now >= h->run_deadline)
        {
          g_autofree char *text = g_strdup_printf ("the check did not end within %u s", h->timeout);

          g_clear_pointer (&h->run, fake_proc_free);
          health_result (agent, FALSE, text);
        }
      return;
    }
  if (agent->sys.now < h->next_at)
    return;
  if (h->argv)
    {
      g_auto (FakeCreds) root = { 0 };
      g_auto (Command) c = { 0 };
      g_autofree char *message = NULL;

      command_init (&c);
      fake_creds_resolve ("root", &root, &message);
      for (char **a = h->argv; *a; a++)
        g_ptr_array_add (c.argv, g_strdup (*a));
      if (!fake_shell_find (h->argv[0]))
        {
          g_autofree char *text = g_strdup_printf ("%s: not found", h->argv[0]);
          health_result (agent, FALSE, text);
          return;
        }
      h->run = command_start (agent, &c, &root);
      h->run_deadline = agent->sys.now + h->timeout;
      health_step (agent);
      return;
    }
  if (port_served (agent, h->port))
    health_result (agent, TRUE, "");
  else
    {
      g_autofree char *text = g_strdup_printf ("connecting to 127.0.0.1:%u: Connection refused",
                                               h->port);
      health_result (agent, FALSE, text);
    }
}

static void
health_configure (FakeAgent *agent, const MvAgentField *check)
{
  Health *h = &agent->health;
  g_autoptr (GStrvBuilder) argv = g_strv_builder_new ();
  MvAgentFields fields;
  MvAgentField field;
  gboolean any_argv = FALSE;

  health_clear (h);
  h->on = TRUE;
  h->interval = h->timeout = 30;
  h->retries = 3;
  mv_agent_fields_init (&fields, check->value, check->len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    switch (field.tag)
      {
      case MV_AGENT_F_ARGV:
        {
          g_autofree char *s = field_string (&field);
          if (s)
            {
              g_strv_builder_add (argv, s);
              any_argv = TRUE;
            }
        }
        break;
      case MV_AGENT_F_PORT:
        h->port = field_u32 (&field, 0);
        break;
      case MV_AGENT_F_PATH:
        g_free (h->path);
        h->path = field_string (&field);
        break;
      case MV_AGENT_F_INTERVAL:
        h->interval = field_u32 (&field, h->interval);
        break;
      case MV_AGENT_F_TIMEOUT:
        h->timeout = field_u32 (&field, h->timeout);
        break;
      case MV_AGENT_F_RETRIES:
        h->retries = field_u32 (&field, h->retries);
        break;
      case MV_AGENT_F_START_PERIOD:
        h->start_period = field_u32 (&field, h->start_period);
        break;
      default:
        break;
      }
  if (any_argv)
    h->argv = g_strv_builder_end (argv);
  h->interval = MAX (h->interval, 1);
  h->timeout = MAX (h->timeout, 1);
  h->retries = MAX (h->retries, 1);
  h->started_at = agent->sys.now;
  h->next_at = agent->sys.now + h->interval;
  h->status = g_strdup ("starting");
}

/* ---- running what runs ---- */

static void
exec_free (gpointer data)
{
  Exec *exec = data;

  fake_proc_free (exec->proc);
  g_free (exec);
}

/* Moves @exec's I/O on as far as the windows allow; TRUE if it moved. */
static gboolean
exec_step (FakeAgent *agent, Exec *exec)
{
  FakeAgentSession *s = exec->session;
  gboolean moved = fake_proc_run (exec->proc);
  gsize consumed = fake_proc_take_consumed (exec->proc);
  int last_stream = exec->tty ? 1 : 2;

  if (consumed > 0)
    send_stream (s, MV_AGENT_WINDOW, exec->channel, MV_AGENT_STREAM_STDIN, NULL, 0,
                 (guint32) consumed);
  for (int stream = 1; stream <= last_stream; stream++)
    {
      GByteArray *out = fake_proc_output (exec->proc, stream);

      while (out->len > 0 && exec->window[stream] > 0)
        {
          gsize n = MIN (MIN (out->len, MV_AGENT_DATA_MAX_BYTES), exec->window[stream]);

          send_stream (s, MV_AGENT_DATA, exec->channel, stream, out->data, n, 0);
          g_byte_array_remove_range (out, 0, n);
          exec->window[stream] -= n;
          moved = TRUE;
        }
    }
  if (fake_proc_done (exec->proc) && fake_proc_output (exec->proc, 1)->len == 0 &&
      (exec->tty || fake_proc_output (exec->proc, 2)->len == 0))
    {
      for (int stream = 1; stream <= last_stream; stream++)
        send_stream (s, MV_AGENT_EOF, exec->channel, stream, NULL, 0, 0);
      send_exec_exit (s, exec->channel, fake_proc_exit_code (exec->proc),
                      fake_proc_signal_number (exec->proc), NULL);
      agent->n_execs--;
      g_hash_table_remove (s->execs, GUINT_TO_POINTER (exec->channel));
      moved = TRUE;
    }
  return moved;
}

static gboolean
sessions_step (FakeAgent *agent)
{
  gboolean moved = FALSE;

  for (GList *l = agent->sessions; l; l = l->next)
    {
      FakeAgentSession *s = l->data;
      g_autoptr (GList) execs = g_hash_table_get_values (s->execs);

      for (GList *e = execs; e; e = e->next)
        moved |= exec_step (agent, e->data);
    }
  return moved;
}

static void
run (FakeAgent *agent)
{
  for (int round = 0; round < 16; round++)
    {
      gboolean moved = FALSE;

      if (agent->state == STATE_ENDED)
        return;
      if (agent->workload)
        {
          moved |= fake_proc_run (agent->workload);
          drain_workload (agent);
          if (fake_proc_done (agent->workload))
            workload_ended (agent);
        }
      moved |= sessions_step (agent);
      health_step (agent);
      if (!moved)
        return;
    }
}

/* USAGE, as the agent sends it every MV_AGENT_USAGE_INTERVAL_MS: the
 * simulated guest's one CPU ticks 100 times a second, and is busy for one
 * tick in a hundred while a process of its runs. */
static void
send_usage (FakeAgent *agent)
{
  gboolean running = agent->workload != NULL;
  guint64 total = (guint64) (agent->sys.now * 100);
  guint64 busy = running ? total / 100 : 0;

  for (GList *l = agent->sessions; l; l = l->next)
    {
      FakeAgentSession *s = l->data;

      if (!s->hello || s->ending)
        continue;
      mv_agent_buf_begin (&s->out, MV_AGENT_USAGE, 0);
      mv_agent_buf_put_u64 (&s->out, MV_AGENT_F_CPU_BUSY, busy);
      mv_agent_buf_put_u64 (&s->out, MV_AGENT_F_CPU_TOTAL, total);
      mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_CPUS, 1);
      mv_agent_buf_end (&s->out);
    }
}

void
fake_agent_tick (FakeAgent *agent, double clock)
{
  agent->sys.now = clock;
  if (agent->state == STATE_ENDED)
    return;
  if (agent->next_usage <= 0)
    agent->next_usage = clock + MV_AGENT_USAGE_INTERVAL_MS / 1000.0;
  else if (clock >= agent->next_usage)
    {
      agent->next_usage = clock + MV_AGENT_USAGE_INTERVAL_MS / 1000.0;
      send_usage (agent);
    }
  if (agent->restart_at >= 0 && clock >= agent->restart_at)
    agent->restart_at = -1;
  if (agent->end_at >= 0 && clock >= agent->end_at)
    {
      end_guest (agent, agent->reboot, "failed");
      return;
    }
  if (agent->exit_deadline >= 0 && clock >= agent->exit_deadline)
    {
      finish_exit (agent);
      return;
    }
  run (agent);
}

/* ---- CONFIG ---- */

static gboolean
make_mount (FakeAgent *agent, const MvAgentField *mount, char **message)
{
  MvAgentFields fields;
  MvAgentField field;
  g_autofree char *type = NULL;
  g_autofree char *target = NULL;
  g_autofree char *source = NULL;
  g_autoptr (GBytes) content = NULL;
  guint32 mode = 0644, read_only = 0;

  mv_agent_fields_init (&fields, mount->value, mount->len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    if (field.tag == MV_AGENT_F_MOUNT_TYPE)
      {
        g_free (type);
        type = field_string (&field);
      }
    else if (field.tag == MV_AGENT_F_TARGET)
      {
        g_free (target);
        target = field_string (&field);
      }
    else if (field.tag == MV_AGENT_F_CONTENT)
      {
        g_clear_pointer (&content, g_bytes_unref);
        content = g_bytes_new (field.value, field.len);
      }
    else if (field.tag == MV_AGENT_F_MODE)
      mode = field_u32 (&field, mode);
    else if (field.tag == MV_AGENT_F_READ_ONLY)
      read_only = field_u32 (&field, 0);
    else if (field.tag == MV_AGENT_F_SOURCE)
      {
        g_free (source);
        source = field_string (&field);
      }
  if (!target || target[0] != '/')
    {
      *message = g_strdup_printf ("mount: %s: not an absolute path", target ? target : "");
      return FALSE;
    }
  if (g_strcmp0 (type, "file") == 0)
    {
      if (!content)
        content = g_bytes_new (NULL, 0);
      fake_system_put_file (&agent->sys, target, content, mode);
      if (read_only)
        g_ptr_array_add (agent->sys.read_only, g_strdup (target));
      return TRUE;
    }
  if (g_strcmp0 (type, "tmpfs") == 0)
    {
      g_ptr_array_add (agent->sys.tmpfs, g_strdup (target));
      if (read_only)
        g_ptr_array_add (agent->sys.read_only, g_strdup (target));
      return TRUE;
    }
  /* The simulated guest has no virtio-fs: the share is an empty
   * directory, mounted by its tag as the real agent does. */
  if (g_strcmp0 (type, "directory") == 0)
    {
      if (!source || !*source)
        {
          *message = g_strdup_printf ("mount: %s: a directory mount without a virtio-fs tag",
                                      target);
          return FALSE;
        }
      g_ptr_array_add (agent->sys.tmpfs, g_strdup (target));
      if (read_only)
        g_ptr_array_add (agent->sys.read_only, g_strdup (target));
      return TRUE;
    }
  *message = g_strdup_printf ("mount: %s: unknown type %s", target, type ? type : "");
  return FALSE;
}

/* The CONFIG of a machine restored from a template: its root was set up
 * when the template booted, so it must name the same disks. */
static gboolean
check_after_template (FakeAgent *agent, gboolean template_boot, const char *mode,
                      const char *root, const char *overlay, char **message)
{
  const char *template_root = agent->template_root;
  const char *template_overlay = agent->template_overlay;

  if (template_boot)
    *message = g_strdup ("CONFIG: TEMPLATE again, in a guest restored from a template");
  else if (strcmp (mode, "exec") != 0)
    *message = g_strdup_printf ("CONFIG: INIT_MODE %s in a guest restored from a template, "
                                "which boots in exec mode", mode);
  else if (g_strcmp0 (root, template_root) != 0)
    *message = g_strdup_printf ("CONFIG: ROOT %s differs from the template's %s",
                                root ? root : "(none)",
                                template_root ? template_root : "(none)");
  else if (g_strcmp0 (overlay, template_overlay) != 0)
    *message = g_strdup_printf ("CONFIG: OVERLAY %s differs from the template's %s",
                                overlay ? overlay : "(none)",
                                template_overlay ? template_overlay : "(none)");
  else
    return TRUE;
  return FALSE;
}

/* *@template_boot: the CONFIG had TEMPLATE 1, and the guest is set up as
 * a template. */
static gboolean
configure (FakeAgent *agent, FakeAgentSession *s, const MvAgentFrame *frame,
           gboolean *template_boot, char **message)
{
  g_auto (Command) c = { 0 };
  g_auto (FakeCreds) creds = { 0 };
  g_autofree char *init_mode = NULL;
  g_autofree char *root = NULL;
  g_autofree char *overlay = NULL;
  gboolean restored = agent->state == STATE_TEMPLATE;
  gboolean have_health = FALSE;
  MvAgentFields fields;
  MvAgentField field, health = { 0 };
  const char *mode;
  const char *cmd;

  command_init (&c);
  *template_boot = FALSE;
  /* END is this CONFIG's: a restored template's replaces the template's. */
  agent->reboot = FALSE;
  mv_agent_fields_init (&fields, frame->payload, frame->payload_len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    {
      g_autofree char *s_value = NULL;

      if (command_take (&c, &field))
        continue;
      switch (field.tag)
        {
        case MV_AGENT_F_INIT_MODE:
          g_free (init_mode);
          init_mode = field_string (&field);
          break;
        case MV_AGENT_F_END:
          s_value = field_string (&field);
          agent->reboot = g_strcmp0 (s_value, "reboot") == 0;
          break;
        case MV_AGENT_F_TEMPLATE:
          *template_boot = field_u32 (&field, 0) != 0;
          break;
        case MV_AGENT_F_ROOT:
          g_free (root);
          root = field_string (&field);
          break;
        case MV_AGENT_F_OVERLAY:
          g_free (overlay);
          overlay = field_string (&field);
          break;
        case MV_AGENT_F_HEALTH_CHECK:
          /* Set up below, unless this is a template. */
          health = field;
          have_health = TRUE;
          break;
        default:
          break;
        }
    }
  mode = init_mode ? init_mode : "exec";
  agent->systemd = strcmp (mode, "systemd") == 0;
  if (restored && !check_after_template (agent, *template_boot, mode, root, overlay, message))
    return FALSE;
  if (*template_boot && strcmp (mode, "exec") != 0)
    {
      *message = g_strdup_printf ("CONFIG: a TEMPLATE boots in exec mode, not %s", mode);
      return FALSE;
    }
  if (root)
    agent->sys.root = TRUE;
  /* A template holds nothing of any one machine: it has its root, and
   * none of the rest, whatever else the frame holds. */
  if (*template_boot)
    {
      agent->template_root = g_steal_pointer (&root);
      agent->template_overlay = g_steal_pointer (&overlay);
      return TRUE;
    }
  if (have_health)
    health_configure (agent, &health);
  apply_metadata (agent, frame->payload, frame->payload_len);
  mv_agent_fields_init (&fields, frame->payload, frame->payload_len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    if (field.tag == MV_AGENT_F_MOUNT && !make_mount (agent, &field, message))
      return FALSE;
  if (agent->systemd)
    return TRUE;
  if (!fake_creds_resolve (c.user, &creds, message))
    return FALSE;
  if (c.argv->len == 0)
    return TRUE;
  cmd = c.argv->pdata[0];
  if (!fake_shell_find (cmd))
    {
      *message = g_strdup_printf ("cmd: %s: not found in the guest's PATH", cmd);
      return FALSE;
    }
  agent->workload = command_start (agent, &c, &creds);
  fake_proc_close_stdin (agent->workload);
  return TRUE;
}

static void
handle_config (FakeAgent *agent, FakeAgentSession *s, const MvAgentFrame *frame)
{
  g_autofree char *message = NULL;
  gboolean template_boot;

  /* Only the first CONFIG of a boot counts, and in a template, the first
   * after its own (that of the machine restored from it). A guest that
   * said FAILED is ending, and takes none. */
  if (agent->end_at >= 0 ||
      (agent->state != STATE_TEMPLATE &&
       (agent->configured || agent->state != STATE_UNCONFIGURED)))
    return;
  agent->configured = TRUE;
  if (!configure (agent, s, frame, &template_boot, &message))
    {
      send_message (s, MV_AGENT_FAILED, 0, message);
      say (agent, "microvmd-agent: %s", message);
      agent->end_at = agent->sys.now + END_DELAY_S;
      g_clear_pointer (&agent->workload, fake_proc_free);
      return;
    }
  if (template_boot)
    {
      agent->state = STATE_TEMPLATE;
      send_message (s, MV_AGENT_READY, 0, NULL);
      return;
    }
  agent->state = STATE_RUNNING;
  if (agent->systemd)
    {
      /* The initramfs's agent execs systemd, which starts the agent anew:
       * every session of the old one closes. */
      for (GList *l = agent->sessions; l; l = l->next)
        ((FakeAgentSession *) l->data)->ending = TRUE;
      agent->restart_at = agent->sys.now + RESTART_DELAY_S;
      agent->instance++;
      return;
    }
  send_message (s, MV_AGENT_READY, 0, NULL);
  run (agent);
}

/* ---- EXEC and its channel ---- */

static gboolean
handle_exec (FakeAgent *agent, FakeAgentSession *s, const MvAgentFrame *frame)
{
  g_auto (Command) c = { 0 };
  g_auto (FakeCreds) creds = { 0 };
  g_autofree char *message = NULL;
  MvAgentFields fields;
  MvAgentField field;
  Exec *exec;

  if (frame->channel == 0 || g_hash_table_contains (s->execs, GUINT_TO_POINTER (frame->channel)))
    return FALSE;
  command_init (&c);
  mv_agent_fields_init (&fields, frame->payload, frame->payload_len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    command_take (&c, &field);
  if (agent->n_execs >= MV_AGENT_EXECS_MAX)
    {
      message = g_strdup_printf ("too many execs: at most %u run at once", MV_AGENT_EXECS_MAX);
      send_exec_exit (s, frame->channel, 125, 0, message);
      return TRUE;
    }
  if (c.argv->len == 0)
    {
      send_exec_exit (s, frame->channel, 126, 0, "no command to run");
      return TRUE;
    }
  if (!fake_creds_resolve (c.user, &creds, &message))
    {
      send_exec_exit (s, frame->channel, 126, 0, message);
      return TRUE;
    }
  if (!fake_shell_find (c.argv->pdata[0]))
    {
      message = g_strdup_printf ("%s: not found", (char *) c.argv->pdata[0]);
      send_exec_exit (s, frame->channel, 127, 0, message);
      return TRUE;
    }
  exec = g_new0 (Exec, 1);
  exec->session = s;
  exec->channel = frame->channel;
  exec->tty = c.tty;
  exec->window[1] = exec->window[2] = MV_AGENT_WINDOW_BYTES;
  exec->proc = command_start (agent, &c, &creds);
  g_hash_table_insert (s->execs, GUINT_TO_POINTER (exec->channel), exec);
  agent->n_execs++;
  run (agent);
  return TRUE;
}

static void
handle_channel (FakeAgent *agent, FakeAgentSession *s, const MvAgentFrame *frame)
{
  Exec *exec = g_hash_table_lookup (s->execs, GUINT_TO_POINTER (frame->channel));
  MvAgentField field;
  guint32 stream = 0, value = 0;

  /* What comes for an exec that has ended is dropped. */
  if (!exec)
    return;
  mv_agent_frame_u32 (frame, MV_AGENT_F_STREAM, &stream);
  switch (frame->type)
    {
    case MV_AGENT_DATA:
      if (stream == MV_AGENT_STREAM_STDIN && mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &field))
        g_byte_array_append (fake_proc_stdin (exec->proc), field.value, field.len);
      break;
    case MV_AGENT_EOF:
      if (stream == MV_AGENT_STREAM_STDIN)
        fake_proc_close_stdin (exec->proc);
      break;
    case MV_AGENT_WINDOW:
      if ((stream == 1 || stream == 2) && mv_agent_frame_u32 (frame, MV_AGENT_F_GRANT, &value))
        exec->window[stream] = (guint32) MIN ((guint64) exec->window[stream] + value, G_MAXUINT32);
      break;
    case MV_AGENT_SIGNAL:
      if (mv_agent_frame_u32 (frame, MV_AGENT_F_SIGNAL, &value))
        fake_proc_signal (exec->proc, (int) value);
      break;
    default:
      break;
    }
  run (agent);
}

/* ---- the session ---- */

static void
handle_hello (FakeAgent *agent, FakeAgentSession *s, const MvAgentFrame *frame)
{
  State state = agent->state == STATE_ENDED ? STATE_EXITED : agent->state;
  guint32 want_output = 0;

  s->hello = TRUE;
  mv_agent_buf_begin (&s->out, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  mv_agent_buf_put_str (&s->out, MV_AGENT_F_AGENT_VERSION, PACKAGE_VERSION);
  mv_agent_buf_put_u64 (&s->out, MV_AGENT_F_INSTANCE, agent->instance);
  mv_agent_buf_put_str (&s->out, MV_AGENT_F_STATE, state_names[state]);
  if (state == STATE_EXITED)
    {
      g_autofree char *text = exit_text (agent->exit_code, agent->exit_signal);

      send_exit_fields (&s->out, agent->exit_code, agent->exit_signal);
      mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, text);
    }
  mv_agent_buf_end (&s->out);
  if (agent->health.on)
    send_health (s, &agent->health);
  mv_agent_frame_u32 (frame, MV_AGENT_F_WANT_OUTPUT, &want_output);
  if (want_output && !s->want_output)
    {
      s->want_output = TRUE;
      send_held_output (agent, s);
    }
}

static void
power_off (FakeAgent *agent)
{
  /* The workload's process group gets SIGTERM, and ends. */
  if (agent->workload)
    fake_proc_signal (agent->workload, SIGTERM);
  g_clear_pointer (&agent->workload, fake_proc_free);
  /* As END says: a Firecracker guest reboots, which ends its VMM. */
  end_guest (agent, agent->reboot, "agent");
}

/* FALSE: the session ends. */
static gboolean
handle_frame (FakeAgentSession *s, const MvAgentFrame *frame)
{
  FakeAgent *agent = s->agent;
  MvAgentField field;

  if (!mv_agent_fields_valid (frame->payload, frame->payload_len, nested_tags,
                              G_N_ELEMENTS (nested_tags)))
    return FALSE;
  /* The host speaks first, and says HELLO. */
  if (!s->hello && frame->type != MV_AGENT_HELLO)
    return FALSE;
  if (agent->state == STATE_ENDED)
    return TRUE;
  switch (frame->type)
    {
    case MV_AGENT_HELLO:
      handle_hello (agent, s, frame);
      break;
    case MV_AGENT_CONFIG:
      handle_config (agent, s, frame);
      break;
    case MV_AGENT_EXIT_ACK:
      if (agent->state == STATE_EXITED && agent->exit_deadline >= 0)
        finish_exit (agent);
      break;
    case MV_AGENT_EXEC:
      return handle_exec (agent, s, frame);
    case MV_AGENT_DATA:
    case MV_AGENT_EOF:
    case MV_AGENT_WINDOW:
    case MV_AGENT_SIGNAL:
      handle_channel (agent, s, frame);
      break;
    case MV_AGENT_METADATA:
      apply_metadata (agent, frame->payload, frame->payload_len);
      break;
    case MV_AGENT_REIDENTIFY:
      reidentify (agent, frame);
      break;
    case MV_AGENT_POWEROFF:
      power_off (agent);
      break;
    case MV_AGENT_PING:
      mv_agent_buf_begin (&s->out, MV_AGENT_PONG, 0);
      if (mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &field))
        mv_agent_buf_put (&s->out, MV_AGENT_F_BYTES, field.value, field.len);
      else
        mv_agent_buf_put (&s->out, MV_AGENT_F_BYTES, NULL, 0);
      mv_agent_buf_end (&s->out);
      break;
    default:
      /* Unknown types, and the guest's own, are skipped. */
      break;
    }
  return TRUE;
}

gssize
fake_agent_session_feed (FakeAgentSession *s, const guint8 *data, gsize len)
{
  gsize taken = 0;

  while (taken < len)
    {
      MvAgentFrame frame;
      const char *why = NULL;
      long n = mv_agent_frame_parse (data + taken, len - taken, &frame, &why);

      if (n < 0)
        return -1;
      if (n == 0)
        break;
      taken += (gsize) n;
      if (!s->agent || s->ending)
        continue;
      if (!handle_frame (s, &frame))
        return -1;
    }
  return (gssize) taken;
}

FakeAgentSession *
fake_agent_session_new (FakeAgent *agent)
{
  FakeAgentSession *s = g_new0 (FakeAgentSession, 1);

  s->agent = agent;
  mv_agent_buf_init (&s->out);
  s->execs = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, exec_free);
  agent->sessions = g_list_append (agent->sessions, s);
  return s;
}

void
fake_agent_session_free (FakeAgentSession *s)
{
  if (!s)
    return;
  /* The agent kills the execs a session started when it closes. */
  if (s->agent)
    {
      s->agent->n_execs -= g_hash_table_size (s->execs);
      s->agent->sessions = g_list_remove (s->agent->sessions, s);
    }
  g_hash_table_unref (s->execs);
  mv_agent_buf_clear (&s->out);
  g_free (s);
}

MvAgentBuf *
fake_agent_session_output (FakeAgentSession *s)
{
  return &s->out;
}

gboolean
fake_agent_session_ending (FakeAgentSession *s)
{
  return s->ending || !s->agent;
}

gboolean
fake_agent_listening (FakeAgent *agent)
{
  return agent->restart_at < 0;
}

/* ---- the agent ---- */

static JsonNode *
health_save (FakeAgent *agent)
{
  Health *h = &agent->health;
  g_autoptr (JsonBuilder) b = json_builder_new ();

  if (!h->on)
    return json_node_new (JSON_NODE_NULL);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "argv");
  json_builder_begin_array (b);
  for (char **a = h->argv; a && *a; a++)
    json_builder_add_string_value (b, *a);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "port");
  json_builder_add_int_value (b, h->port);
  json_builder_set_member_name (b, "path");
  json_builder_add_string_value (b, h->path);
  json_builder_set_member_name (b, "interval");
  json_builder_add_int_value (b, h->interval);
  json_builder_set_member_name (b, "timeout");
  json_builder_add_int_value (b, h->timeout);
  json_builder_set_member_name (b, "retries");
  json_builder_add_int_value (b, h->retries);
  json_builder_set_member_name (b, "start_period");
  json_builder_add_int_value (b, h->start_period);
  json_builder_set_member_name (b, "passed");
  json_builder_add_boolean_value (b, h->passed);
  json_builder_set_member_name (b, "started_ago");
  json_builder_add_double_value (b, agent->sys.now - h->started_at);
  /* A check under way is run again after a restore. */
  json_builder_set_member_name (b, "next_in");
  json_builder_add_double_value (b, h->run ? 0 : h->next_at - agent->sys.now);
  json_builder_set_member_name (b, "status");
  json_builder_add_string_value (b, h->status);
  json_builder_set_member_name (b, "streak");
  json_builder_add_int_value (b, h->streak);
  json_builder_set_member_name (b, "output");
  json_builder_add_string_value (b, h->output);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static void
health_load (FakeAgent *agent, JsonObject *o)
{
  Health *h = &agent->health;
  JsonArray *argv = json_object_get_array_member (o, "argv");
  double now = agent->sys.now;

  h->on = TRUE;
  if (argv && json_array_get_length (argv) > 0)
    {
      g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
      for (guint i = 0; i < json_array_get_length (argv); i++)
        g_strv_builder_add (b, json_array_get_string_element (argv, i));
      h->argv = g_strv_builder_end (b);
    }
  h->port = (guint32) json_object_get_int_member_with_default (o, "port", 0);
  h->path = g_strdup (json_object_get_string_member_with_default (o, "path", NULL));
  h->interval = (guint32) json_object_get_int_member_with_default (o, "interval", 30);
  h->timeout = (guint32) json_object_get_int_member_with_default (o, "timeout", 30);
  h->retries = (guint32) json_object_get_int_member_with_default (o, "retries", 3);
  h->start_period = (guint32) json_object_get_int_member_with_default (o, "start_period", 0);
  h->started_at = now - json_object_get_double_member_with_default (o, "started_ago", 0);
  h->passed = json_object_get_boolean_member_with_default (o, "passed", FALSE);
  h->next_at = now + json_object_get_double_member_with_default (o, "next_in", 0);
  h->status = g_strdup (json_object_get_string_member_with_default (o, "status", "starting"));
  h->streak = (guint32) json_object_get_int_member_with_default (o, "streak", 0);
  h->output = g_strdup (json_object_get_string_member_with_default (o, "output", NULL));
}

static void
add_in (JsonBuilder *b, const char *name, double at, double now)
{
  json_builder_set_member_name (b, name);
  if (at >= 0)
    json_builder_add_double_value (b, at - now);
  else
    json_builder_add_null_value (b);
}

static double
get_in (JsonObject *o, const char *name, double now)
{
  JsonNode *node = json_object_get_member (o, name);

  return node && JSON_NODE_HOLDS_VALUE (node) ? now + json_node_get_double (node) : -1;
}

static void
add_string (JsonBuilder *b, const char *name, const char *value)
{
  json_builder_set_member_name (b, name);
  if (value)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

JsonNode *
fake_agent_snapshot_state (FakeAgent *agent)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  double now = agent->sys.now;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "system");
  json_builder_add_value (b, fake_system_save (&agent->sys));
  json_builder_set_member_name (b, "state");
  json_builder_add_string_value (b, state_names[agent->state]);
  json_builder_set_member_name (b, "configured");
  json_builder_add_boolean_value (b, agent->configured);
  add_string (b, "template_root", agent->template_root);
  add_string (b, "template_overlay", agent->template_overlay);
  json_builder_set_member_name (b, "systemd");
  json_builder_add_boolean_value (b, agent->systemd);
  json_builder_set_member_name (b, "reboot");
  json_builder_add_boolean_value (b, agent->reboot);
  json_builder_set_member_name (b, "workload");
  if (agent->workload)
    json_builder_add_value (b, fake_proc_save (agent->workload));
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "console_line");
  json_builder_add_string_value (b, agent->console_line->str);
  json_builder_set_member_name (b, "exit_code");
  json_builder_add_int_value (b, agent->exit_code);
  json_builder_set_member_name (b, "exit_signal");
  json_builder_add_int_value (b, agent->exit_signal);
  add_in (b, "exit_ack_in", agent->exit_deadline, now);
  add_in (b, "end_in", agent->end_at, now);
  add_in (b, "restart_in", agent->restart_at, now);
  json_builder_set_member_name (b, "health");
  json_builder_add_value (b, health_save (agent));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static void
load_state (FakeAgent *agent, JsonObject *o)
{
  const char *state = json_object_get_string_member_with_default (o, "state", "unconfigured");
  JsonNode *workload = json_object_get_member (o, "workload");
  JsonNode *health = json_object_get_member (o, "health");
  double now = agent->sys.now;

  if (json_object_has_member (o, "system"))
    fake_system_load (&agent->sys, json_object_get_object_member (o, "system"));
  for (int i = 0; state_names[i]; i++)
    if (strcmp (state, state_names[i]) == 0)
      agent->state = i;
  agent->configured = json_object_get_boolean_member_with_default (o, "configured", FALSE);
  /* A state saved before templates has neither: not a template. */
  agent->template_root =
    g_strdup (json_object_get_string_member_with_default (o, "template_root", NULL));
  agent->template_overlay =
    g_strdup (json_object_get_string_member_with_default (o, "template_overlay", NULL));
  agent->systemd = json_object_get_boolean_member_with_default (o, "systemd", FALSE);
  agent->reboot = json_object_get_boolean_member_with_default (o, "reboot", FALSE);
  if (workload && JSON_NODE_HOLDS_OBJECT (workload))
    agent->workload = fake_proc_load (&agent->sys, json_node_get_object (workload));
  g_string_assign (agent->console_line,
                   json_object_get_string_member_with_default (o, "console_line", ""));
  agent->exit_code = (int) json_object_get_int_member_with_default (o, "exit_code", 0);
  agent->exit_signal = (int) json_object_get_int_member_with_default (o, "exit_signal", 0);
  agent->exit_deadline = get_in (o, "exit_ack_in", now);
  agent->end_at = get_in (o, "end_in", now);
  agent->restart_at = get_in (o, "restart_in", now);
  if (health && JSON_NODE_HOLDS_OBJECT (health))
    health_load (agent, json_node_get_object (health));
}

FakeAgent *
fake_agent_new (const FakeAgentHooks *hooks, JsonObject *state, double clock)
{
  FakeAgent *agent = g_new0 (FakeAgent, 1);

  agent->hooks = *hooks;
  fake_system_init (&agent->sys);
  agent->sys.now = clock;
  agent->console_line = g_string_new (NULL);
  agent->held = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  agent->exit_deadline = agent->end_at = agent->restart_at = -1;
  if (state)
    load_state (agent, state);
  return agent;
}

void
fake_agent_free (FakeAgent *agent)
{
  if (!agent)
    return;
  /* Sessions still open belong to their connections; they end with them. */
  for (GList *l = agent->sessions; l; l = l->next)
    {
      FakeAgentSession *s = l->data;

      g_hash_table_remove_all (s->execs);
      s->agent = NULL;
    }
  g_list_free (agent->sessions);
  fake_proc_free (agent->workload);
  health_clear (&agent->health);
  g_free (agent->template_root);
  g_free (agent->template_overlay);
  g_string_free (agent->console_line, TRUE);
  g_ptr_array_unref (agent->held);
  fake_system_clear (&agent->sys);
  g_free (agent);
}
