/* Sessions: frames in and out of one host connection, HELLO, CONFIG and
 * the workload's EXIT. */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The tags whose values are fields themselves. */
static const uint8_t nested_tags[] = { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK, MV_AGENT_F_NET };

static const char *
state_name (AgentState state)
{
  switch (state)
    {
    case STATE_UNCONFIGURED: return "unconfigured";
    case STATE_TEMPLATE: return "template";
    case STATE_RUNNING: return "running";
    case STATE_EXITED: return "exited";
    default: return "unknown";
    }
}

Session *
session_new (int fd, bool serial)
{
  Session *s = calloc (1, sizeof *s);

  if (!s)
    abort ();
  s->fd = fd;
  s->serial = serial;
  s->pidx = -1;
  mv_agent_buf_init (&s->out);
  agent.sessions[agent.n_sessions++] = s;
  return s;
}

/* The parser starts over and what the session started ends. */
void
session_reset (Session *s)
{
  exec_session_closed (s);
  free (s->in);
  s->in = NULL;
  s->in_len = 0;
  mv_agent_buf_clear (&s->out);
  s->hello = false;
  s->want_output = false;
  s->output_dropped = 0;
}

void
session_close (Session *s)
{
  size_t i;

  session_reset (s);
  if (!s->serial)
    close (s->fd);
  for (i = 0; i < agent.n_sessions && agent.sessions[i] != s; i++)
    ;
  if (i < agent.n_sessions)
    agent.sessions[i] = agent.sessions[--agent.n_sessions];
  free (s);
  if (agent.mode == MODE_TEST)
    agent.quit = true;
}

/* A peer that breaks the protocol loses its session. On the serial port
 * the port stays open: the parser starts over. */
static void
session_fail (Session *s, const char *why)
{
  agent_log ("session ended: %s", why);
  if (s->serial)
    session_reset (s);
  else
    session_close (s);
}

void
session_send_hello (Session *s)
{
  MvAgentBuf *b = &s->out;

  mv_agent_buf_begin (b, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (b, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  mv_agent_buf_put_str (b, MV_AGENT_F_AGENT_VERSION, AGENT_VERSION);
  mv_agent_buf_put_u64 (b, MV_AGENT_F_INSTANCE, agent.instance);
  mv_agent_buf_put_str (b, MV_AGENT_F_STATE, state_name (agent.state));
  if (agent.state == STATE_EXITED)
    {
      char message[64];
      int status = agent.workload_status;

      if (WIFSIGNALED (status))
        {
          mv_agent_buf_put_u32 (b, MV_AGENT_F_SIGNAL, (uint32_t) WTERMSIG (status));
          snprintf (message, sizeof message, "killed by signal %d", WTERMSIG (status));
        }
      else
        {
          mv_agent_buf_put_u32 (b, MV_AGENT_F_EXIT_CODE, (uint32_t) WEXITSTATUS (status));
          snprintf (message, sizeof message, "exited with status %d", WEXITSTATUS (status));
        }
      mv_agent_buf_put_str (b, MV_AGENT_F_MESSAGE, message);
    }
  mv_agent_buf_end (b);
}

static void
send_exit (Session *s)
{
  int status = agent.workload_status;

  mv_agent_buf_begin (&s->out, MV_AGENT_EXIT, 0);
  if (WIFSIGNALED (status))
    mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_SIGNAL, (uint32_t) WTERMSIG (status));
  else
    mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_EXIT_CODE, (uint32_t) WEXITSTATUS (status));
  mv_agent_buf_end (&s->out);
}

void
sessions_broadcast_exit (void)
{
  for (size_t i = 0; i < agent.n_sessions; i++)
    send_exit (agent.sessions[i]);
}

void
sessions_broadcast_health (void)
{
  for (size_t i = 0; i < agent.n_sessions; i++)
    if (agent.sessions[i]->hello)
      health_put (&agent.sessions[i]->out);
}

static void
send_simple (Session *s, uint8_t type, const char *message)
{
  mv_agent_buf_begin (&s->out, type, 0);
  if (message)
    mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, message);
  mv_agent_buf_end (&s->out);
}

/* ---- CONFIG ---- */

static bool
take_str (const MvAgentField *f, char **out, const char *name, char *error, size_t size)
{
  char *value = mv_agent_field_strdup (f);

  if (!value)
    {
      snprintf (error, size, "CONFIG: %s holds a NUL byte", name);
      return false;
    }
  free (*out);
  *out = value;
  return true;
}

static bool
take_list (const MvAgentField *f, StrList *list, const char *name, char *error, size_t size)
{
  char *value = NULL;

  if (!take_str (f, &value, name, error, size))
    return false;
  strlist_add (list, value);
  free (value);
  return true;
}

static bool
take_u32 (const MvAgentField *f, uint32_t *out, const char *name, char *error, size_t size)
{
  if (mv_agent_field_u32 (f, out))
    return true;
  snprintf (error, size, "CONFIG: %s is not a u32", name);
  return false;
}

static bool
parse_health (const MvAgentField *outer, HealthCheck *hc, char *error, size_t size)
{
  MvAgentFields fields;
  MvAgentField f;
  bool ok = true;

  hc->configured = true;
  mv_agent_fields_init (&fields, outer->value, outer->len);
  while (ok && mv_agent_fields_next (&fields, &f) > 0)
    switch (f.tag)
      {
      case MV_AGENT_F_ARGV: ok = take_list (&f, &hc->argv, "HEALTH_CHECK ARGV", error, size); break;
      case MV_AGENT_F_PORT: ok = take_u32 (&f, &hc->port, "PORT", error, size); break;
      case MV_AGENT_F_PATH: ok = take_str (&f, &hc->path, "PATH", error, size); break;
      case MV_AGENT_F_INTERVAL: ok = take_u32 (&f, &hc->interval, "INTERVAL", error, size); break;
      case MV_AGENT_F_TIMEOUT: ok = take_u32 (&f, &hc->timeout, "TIMEOUT", error, size); break;
      case MV_AGENT_F_RETRIES: ok = take_u32 (&f, &hc->retries, "RETRIES", error, size); break;
      case MV_AGENT_F_START_PERIOD: ok = take_u32 (&f, &hc->start_period, "START_PERIOD", error, size); break;
      default: break;
      }
  if (ok && hc->argv.len == 0 && (hc->port == 0 || hc->port > 65535))
    {
      snprintf (error, size, "CONFIG: a HEALTH_CHECK with neither ARGV nor a PORT of 1-65535");
      ok = false;
    }
  return ok;
}

void
net_config_clear (NetConfig *net)
{
  free (net->mac);
  free (net->address);
  free (net->gateway);
  strlist_free (&net->dns);
  memset (net, 0, sizeof *net);
}

bool
config_parse_net (const MvAgentField *outer, NetConfig *net, char *error, size_t size)
{
  MvAgentFields fields;
  MvAgentField f;
  bool ok = true;

  net->configured = true;
  mv_agent_fields_init (&fields, outer->value, outer->len);
  while (ok && mv_agent_fields_next (&fields, &f) > 0)
    switch (f.tag)
      {
      case MV_AGENT_F_MAC: ok = take_str (&f, &net->mac, "NET MAC", error, size); break;
      case MV_AGENT_F_ADDRESS: ok = take_str (&f, &net->address, "NET ADDRESS", error, size); break;
      case MV_AGENT_F_GATEWAY: ok = take_str (&f, &net->gateway, "NET GATEWAY", error, size); break;
      case MV_AGENT_F_MTU: ok = take_u32 (&f, &net->mtu, "NET MTU", error, size); break;
      case MV_AGENT_F_DNS: ok = take_list (&f, &net->dns, "NET DNS", error, size); break;
      default: break;
      }
  if (ok && (!net->mac || !net->address))
    {
      snprintf (error, size, "NET: without its MAC or ADDRESS");
      ok = false;
    }
  return ok;
}

bool
config_parse (const uint8_t *data, size_t len, Config *c, char *error, size_t size)
{
  MvAgentFields fields;
  MvAgentField f;
  bool ok = true;

  if (!mv_agent_fields_valid (data, len, nested_tags, sizeof nested_tags))
    {
      snprintf (error, size, "CONFIG: its fields are not whole");
      return false;
    }
  c->raw = malloc (len ? len : 1);
  if (!c->raw)
    abort ();
  memcpy (c->raw, data, len);
  c->raw_len = len;
  snprintf (c->init_mode, sizeof c->init_mode, "exec");
  snprintf (c->end, sizeof c->end, "poweroff");
  mv_agent_fields_init (&fields, data, len);
  while (ok && mv_agent_fields_next (&fields, &f) > 0)
    switch (f.tag)
      {
      case MV_AGENT_F_INIT_MODE:
        if (!mv_agent_field_str (&f, c->init_mode, sizeof c->init_mode) ||
            (strcmp (c->init_mode, "exec") != 0 && strcmp (c->init_mode, "systemd") != 0))
          {
            snprintf (error, size, "CONFIG: INIT_MODE is neither \"exec\" nor \"systemd\"");
            ok = false;
          }
        break;
      case MV_AGENT_F_END:
        if (!mv_agent_field_str (&f, c->end, sizeof c->end) ||
            (strcmp (c->end, "poweroff") != 0 && strcmp (c->end, "reboot") != 0))
          {
            snprintf (error, size, "CONFIG: END is neither \"poweroff\" nor \"reboot\"");
            snprintf (c->end, sizeof c->end, "poweroff");
            ok = false;
          }
        break;
      case MV_AGENT_F_TEMPLATE:
        {
          uint32_t value = 0;

          ok = take_u32 (&f, &value, "TEMPLATE", error, size);
          c->template_boot = value != 0;
        }
        break;
      case MV_AGENT_F_ROOT: ok = take_str (&f, &c->root, "ROOT", error, size); break;
      case MV_AGENT_F_OVERLAY: ok = take_str (&f, &c->overlay, "OVERLAY", error, size); break;
      case MV_AGENT_F_HOSTNAME: ok = take_str (&f, &c->hostname, "HOSTNAME", error, size); break;
      case MV_AGENT_F_SSH_KEY: ok = take_list (&f, &c->keys, "SSH_KEY", error, size); break;
      case MV_AGENT_F_DOCUMENT: ok = take_str (&f, &c->document, "DOCUMENT", error, size); break;
      case MV_AGENT_F_ARGV: ok = take_list (&f, &c->argv, "ARGV", error, size); break;
      case MV_AGENT_F_ENV: ok = take_list (&f, &c->env, "ENV", error, size); break;
      case MV_AGENT_F_WORKDIR: ok = take_str (&f, &c->workdir, "WORKDIR", error, size); break;
      case MV_AGENT_F_USER: ok = take_str (&f, &c->user, "USER", error, size); break;
      case MV_AGENT_F_HEALTH_CHECK: ok = parse_health (&f, &c->health, error, size); break;
      case MV_AGENT_F_NET: ok = config_parse_net (&f, &c->net, error, size); break;
      default: break;   /* MOUNTs are made from the raw fields; unknown tags are skipped */
      }
  return ok;
}

static void
config_clear (Config *c)
{
  free (c->raw);
  free (c->root);
  free (c->overlay);
  free (c->hostname);
  strlist_free (&c->keys);
  free (c->document);
  strlist_free (&c->argv);
  strlist_free (&c->env);
  free (c->workdir);
  free (c->user);
  strlist_free (&c->health.argv);
  free (c->health.path);
  net_config_clear (&c->net);
  memset (c, 0, sizeof *c);
}

static bool
same_str (const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp (a, b) == 0);
}

/* The configuration of a machine restored from a template: its root was
 * set up when the template booted, so it must name the same disks. */
static bool
check_after_template (const Config *c, const char *root, const char *overlay, char *error,
                      size_t size)
{
  if (c->template_boot)
    snprintf (error, size, "CONFIG: TEMPLATE again, in a guest restored from a template");
  else if (strcmp (c->init_mode, "exec") != 0)
    snprintf (error, size, "CONFIG: INIT_MODE %s in a guest restored from a template, "
              "which boots in exec mode", c->init_mode);
  else if (!same_str (c->root, root))
    snprintf (error, size, "CONFIG: ROOT %s differs from the template's %s",
              c->root ? c->root : "(none)", root ? root : "(none)");
  else if (!same_str (c->overlay, overlay))
    snprintf (error, size, "CONFIG: OVERLAY %s differs from the template's %s",
              c->overlay ? c->overlay : "(none)", overlay ? overlay : "(none)");
  else
    return true;
  return false;
}

/* FAILED, then the guest ends: there is nothing it can run. */
static void
config_failed (Session *from, const char *message)
{
  agent_log ("setup failed: %s", message);
  if (from)
    send_simple (from, MV_AGENT_FAILED, message);
  agent.end_now = true;
}

static pid_t
start_workload (const MvUser *user, char *error, size_t size)
{
  Config *c = &agent.config;
  StrList env = { 0 };
  char path[4096];
  int child[3];
  pid_t pid;

  exec_build_env (user, &c->env, &env);
  if (exec_resolve (c->argv.items[0], strlist_env (&env, "PATH"), path, sizeof path,
                    error, size) != 0)
    {
      strlist_free (&env);
      return -1;
    }
  /* Through the agent rather than straight to the console: the host
   * keeps it too (output.c). */
  if (!output_open (child, error, size))
    {
      strlist_free (&env);
      return -1;
    }
  pid = spawn_process (path, c->argv.items, env.items, user, c->workdir,
                       child[0], child[1], child[2], NULL, error, size);
  close (child[1]);
  close (child[2]);
  strlist_free (&env);
  return pid;
}

void
agent_apply_config (Session *from, const MvAgentFrame *frame)
{
  Config *c = &agent.config;
  bool restored = agent.state == STATE_TEMPLATE;
  char *template_root = NULL, *template_overlay = NULL;
  char error[512] = "";
  bool ok;
  MvUser user;

  if (restored)
    {
      template_root = c->root ? strdup (c->root) : NULL;
      template_overlay = c->overlay ? strdup (c->overlay) : NULL;
      config_clear (c);
    }
  ok = config_parse (frame->payload, frame->payload_len, c, error, sizeof error) &&
       (!restored || check_after_template (c, template_root, template_overlay, error, sizeof error));
  free (template_root);
  free (template_overlay);
  if (ok && c->template_boot && strcmp (c->init_mode, "exec") != 0)
    {
      snprintf (error, sizeof error, "CONFIG: a TEMPLATE boots in exec mode, not %s", c->init_mode);
      ok = false;
    }
  if (!ok)
    {
      config_failed (from, error);
      return;
    }
  agent.have_config = true;
  if (agent.mode == MODE_PID1 && c->root && !restored && !boot_setup_root (c, error, sizeof error))
    {
      config_failed (from, error);
      return;
    }
  /* A template is a booted guest with no identity, mounts or workload of
   * its own: it is frozen as it is now, and every machine restored from
   * it sends the CONFIG that gives it the rest, after its REIDENTIFY. */
  if (c->template_boot)
    {
      agent.state = STATE_TEMPLATE;
      agent_log ("template: set up; the next CONFIG gives the rest");
      send_simple (from, MV_AGENT_READY, NULL);
      return;
    }
  if (agent.mode == MODE_PID1)
    {
      if (!boot_apply_mounts (c, error, sizeof error) ||
          (c->net.configured && !network_apply (&c->net, error, sizeof error)))
        {
          config_failed (from, error);
          return;
        }
    }
  if (!metadata_apply (c->raw, c->raw_len, NULL, error, sizeof error))
    {
      config_failed (from, error);
      return;
    }
  if (agent.mode == MODE_PID1 && strcmp (c->init_mode, "systemd") == 0)
    {
      if (!state_save (c))
        {
          config_failed (from, "could not save the state for the service under /run/microvmd");
          return;
        }
      boot_handoff_to_systemd (c, error, sizeof error);
      config_failed (from, error);
      return;
    }

  /* Everything is looked up before anything starts, so that a mistake is
   * a FAILED the host can show rather than a workload that dies. */
  if (!agent_user_lookup (c->user, &user, error, sizeof error))
    {
      config_failed (from, error);
      return;
    }
  if (c->argv.len > 0)
    {
      pid_t pid = start_workload (&user, error, sizeof error);

      if (pid < 0)
        {
          config_failed (from, error);
          return;
        }
      agent.workload_pid = pid;
      agent_log ("workload started: %s (pid %ld)", c->argv.items[0], (long) pid);
    }
  else
    agent_log ("no workload");
  agent.state = STATE_RUNNING;
  if (c->health.configured)
    health_start (&c->health, &user, &c->env);
  send_simple (from, MV_AGENT_READY, NULL);
}

/* ---- frames in ---- */

static bool
session_alive (const Session *s)
{
  for (size_t i = 0; i < agent.n_sessions; i++)
    if (agent.sessions[i] == s)
      return true;
  return false;
}

static void
handle_frame (Session *s, const MvAgentFrame *frame)
{
  switch (frame->type)
    {
    case MV_AGENT_HELLO:
      {
        uint32_t version = 0, want_output = 0;

        mv_agent_frame_u32 (frame, MV_AGENT_F_VERSION, &version);
        mv_agent_frame_u32 (frame, MV_AGENT_F_WANT_OUTPUT, &want_output);
        if (version != MV_AGENT_PROTOCOL_VERSION)
          agent_log ("host speaks protocol version %u; this agent speaks %d",
                     version, MV_AGENT_PROTOCOL_VERSION);
        s->hello = true;
        session_send_hello (s);
        /* What the workload wrote comes before the news of its end. */
        if (want_output)
          output_session_greeted (s);
        if (agent.state == STATE_EXITED)
          send_exit (s);
        else
          health_put (&s->out);
      }
      break;
    case MV_AGENT_CONFIG:
      if (agent.state != STATE_TEMPLATE &&
          (agent.have_config || agent.state != STATE_UNCONFIGURED))
        agent_log ("CONFIG again: ignored (only the first counts, or the first after a template's)");
      else
        agent_apply_config (s, frame);
      break;
    case MV_AGENT_EXIT_ACK:
      if (agent.state == STATE_EXITED)
        agent.end_now = true;
      break;
    case MV_AGENT_METADATA:
      {
        char error[256];

        if (!metadata_apply (frame->payload, frame->payload_len, NULL, error, sizeof error))
          agent_log ("METADATA: %s", error);
      }
      break;
    case MV_AGENT_REIDENTIFY:
      identity_apply (s, frame);
      break;
    case MV_AGENT_POWEROFF:
      agent_log ("POWEROFF from the host");
      agent_poweroff ();
      break;
    case MV_AGENT_PING:
      {
        MvAgentField f = { .len = 0, .value = NULL };

        mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &f);
        mv_agent_buf_begin (&s->out, MV_AGENT_PONG, 0);
        mv_agent_buf_put (&s->out, MV_AGENT_F_BYTES, f.value, f.len);
        mv_agent_buf_end (&s->out);
      }
      break;
    case MV_AGENT_EXEC:
      exec_start (s, frame);
      break;
    case MV_AGENT_DATA:
    case MV_AGENT_EOF:
    case MV_AGENT_WINDOW:
    case MV_AGENT_SIGNAL:
    case MV_AGENT_RESIZE:
      exec_frame (s, frame);
      break;
    default:
      agent_log ("frame type %u (%s) ignored", frame->type, mv_agent_type_name (frame->type));
      break;
    }
}

void
session_handle_input (Session *s)
{
  for (;;)
    {
      size_t want;
      ssize_t n;
      MvAgentFrame frame;
      const char *why = NULL;
      long used;

      if (!s->in)
        {
          s->in = malloc (MV_AGENT_FRAME_MAX_BYTES);
          if (!s->in)
            abort ();
        }
      /* One frame at a time: read what the frame in hand still needs, so
       * that what follows it stays in the kernel's buffer. */
      want = MV_AGENT_FRAME_HEADER_BYTES > s->in_len ? MV_AGENT_FRAME_HEADER_BYTES - s->in_len : 0;
      if (s->in_len >= 4)
        {
          used = mv_agent_frame_parse (s->in, s->in_len, &frame, &why);
          if (used < 0)
            {
              session_fail (s, why);
              return;
            }
          if (used == 0)
            {
              uint32_t body = ((uint32_t) s->in[0] << 24) | ((uint32_t) s->in[1] << 16) |
                              ((uint32_t) s->in[2] << 8) | s->in[3];
              want = 4 + (size_t) body - s->in_len;
            }
          else
            {
              if (!mv_agent_fields_valid (frame.payload, frame.payload_len,
                                          nested_tags, sizeof nested_tags))
                {
                  session_fail (s, "a frame whose fields are not whole");
                  return;
                }
              handle_frame (s, &frame);
              /* A frame may end its session (a bad one), or reset it. */
              if (!session_alive (s) || s->in == NULL)
                return;
              s->in_len = 0;
              if (agent.end_now || s->out.len >= AGENT_OUT_HIGH_BYTES)
                return;
              continue;
            }
        }
      else
        want = 4 - s->in_len;

      n = read (s->fd, s->in + s->in_len, want);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      if (n <= 0)
        {
          if (s->serial)
            {
              /* Nothing to read and no error: the host went away. */
              agent.serial_hup = true;
              session_close (s);
            }
          else
            {
              if (n < 0)
                agent_log ("session: read: %s", strerror (errno));
              session_close (s);
            }
          return;
        }
      s->in_len += (size_t) n;
    }
}

bool
session_flush (Session *s)
{
  while (s->out.len > 0)
    {
      ssize_t n = write (s->fd, s->out.data, s->out.len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return true;
      if (n <= 0)
        {
          agent_log ("session: write: %s", strerror (errno));
          if (s->serial)
            agent.serial_hup = true;
          session_close (s);
          return false;
        }
      mv_agent_buf_consume (&s->out, (size_t) n);
    }
  return true;
}
