/* Machine.Exec and Machine.Wait: what is asked of the guest itself, and
 * who waits for how a machine's run ends or for its health. */
#include "machine-guest.h"
#include "core/errors.h"
#include "names.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define EXEC_ARGS_MAX        256
#define EXEC_ARGV_MAX_BYTES  (128 * 1024)
#define EXEC_ENV_MAX         256
#define EXEC_ENV_MAX_BYTES   (128 * 1024)
#define EXEC_USER_MAX_BYTES  256
#define EXEC_TTY_SIZE_MAX    1000
/* Waits held on one machine at once: Wait is open to everyone. */
#define WAITS_MAX            256

/* ---- Exec ---- */

typedef struct {
  GPtrArray *argv;          /* char*, NULL-terminated */
  GPtrArray *env;           /* "KEY=VALUE", NULL-terminated */
  char      *user;
  char      *working_dir;
  gboolean   tty;
  guint      rows, columns;
} ExecArgs;

static void
exec_args_clear (ExecArgs *args)
{
  g_clear_pointer (&args->argv, g_ptr_array_unref);
  g_clear_pointer (&args->env, g_ptr_array_unref);
  g_clear_pointer (&args->user, g_free);
  g_clear_pointer (&args->working_dir, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecArgs, exec_args_clear)

static gboolean
invalid (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid (GError **error, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (MV_ERROR, MV_ERROR_INVALID_ARGUMENT, format, args));
  va_end (args);
  return FALSE;
}

static gboolean
env_key_valid (const char *key)
{
  if (!g_ascii_isalpha (*key) && *key != '_')
    return FALSE;
  for (const char *p = key; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '_')
      return FALSE;
  return TRUE;
}

static gboolean
read_strings (sd_bus_message *m, ExecArgs *args, GError **error)
{
  gsize total = 0;
  const char *s;
  int r;

  if (sd_bus_message_enter_container (m, 'a', "s") < 0)
    return invalid (error, "argv: expected an array of strings");
  while ((r = sd_bus_message_read (m, "s", &s)) > 0)
    {
      if (args->argv->len >= EXEC_ARGS_MAX)
        return invalid (error, "argv: more than %d arguments", EXEC_ARGS_MAX);
      total += strlen (s) + 1;
      if (total > EXEC_ARGV_MAX_BYTES)
        return invalid (error, "argv: over %d bytes together", EXEC_ARGV_MAX_BYTES);
      if (args->argv->len == 0 && !*s)
        return invalid (error, "argv[0]: empty");
      g_ptr_array_add (args->argv, g_strdup (s));
    }
  if (r < 0 || sd_bus_message_exit_container (m) < 0)
    return invalid (error, "argv: expected an array of strings");
  if (args->argv->len == 0)
    return invalid (error, "argv: empty; name a command to run");
  return TRUE;
}

static gboolean
read_env (sd_bus_message *m, ExecArgs *args, GError **error)
{
  gsize total = 0;
  const char *key, *value;
  int r;

  if (sd_bus_message_enter_container (m, 'a', "{ss}") < 0)
    return invalid (error, "env: expected a{ss}");
  while ((r = sd_bus_message_read (m, "{ss}", &key, &value)) > 0)
    {
      if (args->env->len >= EXEC_ENV_MAX)
        return invalid (error, "env: more than %d variables", EXEC_ENV_MAX);
      if (!env_key_valid (key))
        return invalid (error, "env: '%s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", key);
      total += strlen (key) + strlen (value) + 2;
      if (total > EXEC_ENV_MAX_BYTES)
        return invalid (error, "env: over %d bytes together", EXEC_ENV_MAX_BYTES);
      g_ptr_array_add (args->env, g_strconcat (key, "=", value, NULL));
    }
  if (r < 0 || sd_bus_message_exit_container (m) < 0)
    return invalid (error, "env: expected a{ss}");
  return TRUE;
}

static gboolean
read_option (sd_bus_message *m, const char *key, ExecArgs *args, GError **error)
{
  const char *s = NULL;
  uint32_t u = 0;
  int b = 0;

  if (strcmp (key, "tty") == 0)
    {
      if (sd_bus_message_read (m, "v", "b", &b) < 0)
        return invalid (error, "options: tty must be a boolean (b)");
      args->tty = b;
    }
  else if (strcmp (key, "rows") == 0 || strcmp (key, "columns") == 0)
    {
      if (sd_bus_message_read (m, "v", "u", &u) < 0 || u == 0 || u > EXEC_TTY_SIZE_MAX)
        return invalid (error, "options: %s must be a number (u) from 1 to %d", key,
                        EXEC_TTY_SIZE_MAX);
      *(key[0] == 'r' ? &args->rows : &args->columns) = u;
    }
  else if (strcmp (key, "user") == 0)
    {
      if (sd_bus_message_read (m, "v", "s", &s) < 0 || !*s ||
          strlen (s) > EXEC_USER_MAX_BYTES || strpbrk (s, " \t\n/"))
        return invalid (error, "options: user must be a user, uid, user:group or uid:gid of at "
                        "most %d bytes", EXEC_USER_MAX_BYTES);
      args->user = g_strdup (s);
    }
  else if (strcmp (key, "working_dir") == 0)
    {
      if (sd_bus_message_read (m, "v", "s", &s) < 0 || !g_path_is_absolute (s) ||
          strlen (s) > MV_PATH_MAX_BYTES)
        return invalid (error, "options: working_dir must be an absolute path of at most %d "
                        "bytes", MV_PATH_MAX_BYTES);
      args->working_dir = g_strdup (s);
    }
  else
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "options: '%s' is not an option of Exec (tty, rows, columns, user, "
                   "working_dir)", key);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_options (sd_bus_message *m, ExecArgs *args, GError **error)
{
  const char *key;
  int r;

  if (sd_bus_message_enter_container (m, 'a', "{sv}") < 0)
    return invalid (error, "options: expected a{sv}");
  while ((r = sd_bus_message_enter_container (m, 'e', "sv")) > 0)
    {
      if (sd_bus_message_read (m, "s", &key) < 0 || !read_option (m, key, args, error))
        return error && *error ? FALSE : invalid (error, "options: expected a{sv}");
      if (sd_bus_message_exit_container (m) < 0)
        return invalid (error, "options: expected a{sv}");
    }
  if (r < 0 || sd_bus_message_exit_container (m) < 0)
    return invalid (error, "options: expected a{sv}");
  return TRUE;
}

static gboolean
read_exec_args (sd_bus_message *m, ExecArgs *args, GError **error)
{
  args->argv = g_ptr_array_new_with_free_func (g_free);
  args->env = g_ptr_array_new_with_free_func (g_free);
  if (!read_strings (m, args, error) || !read_env (m, args, error) ||
      !read_options (m, args, error))
    return FALSE;
  g_ptr_array_add (args->argv, NULL);
  g_ptr_array_add (args->env, NULL);
  return TRUE;
}

static void
do_exec (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  g_auto (ExecArgs) args = { 0 };
  g_autoptr (GError) error = NULL;
  int fds[4] = { -1, -1, -1, -1 };

  sd_bus_message_rewind (call, TRUE);
  if (!read_exec_args (call, &args, &error))
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  MvRuntimeExec exec = {
    .argv = (const char *const *) args.argv->pdata,
    .env = (const char *const *) args.env->pdata,
    .user = args.user,
    .working_dir = args.working_dir,
    .tty = args.tty,
    .rows = args.rows,
    .columns = args.columns,
  };
  if (!mv_reconciler_exec (machine, &exec, fds, &error))
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  mv_machine_log (machine, G_LOG_LEVEL_INFO, "Running %s in the guest for %s",
                  (const char *) args.argv->pdata[0], sd_bus_message_get_sender (call));
  /* sd-bus sends duplicates: ours are closed either way. */
  sd_bus_reply_method_return (call, "hhhh", fds[0], fds[1], fds[2], fds[3]);
  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

int
mv_machine_method_exec (sd_bus_message *m, MvMachine *machine, MvMachineAuthorize authorize,
                        sd_bus_error *error)
{
  g_auto (ExecArgs) args = { 0 };
  g_autoptr (GError) local = NULL;

  /* Refused before anyone is asked; read again once authorized. */
  if (!read_exec_args (m, &args, &local))
    return mv_bus_error_from_gerror (error, local);
  sd_bus_message_rewind (m, TRUE);
  return authorize (machine, m, MV_ACTION_MACHINE_EXEC, "exec", do_exec);
}

/* ---- Wait ---- */

typedef enum { WAIT_STOPPED, WAIT_HEALTHY } WaitCondition;

typedef struct {
  sd_bus_message *call;
  WaitCondition   condition;
  gboolean        next_stop;
  gboolean        seen_active;   /* the machine was starting or running since the call */
} StateWaiter;

static void
state_waiter_free (StateWaiter *w)
{
  sd_bus_message_unref (w->call);
  g_free (w);
}

/* Ended: stopped, failed, or waiting to be restarted after an end. */
static gboolean
has_ended (MvState state)
{
  return state == MV_STATE_STOPPED || state == MV_STATE_FAILED || state == MV_STATE_RESTARTING;
}

static gboolean
has_health_check (MvMachine *machine)
{
  const MvHealthCheck *check = machine->config->spec->health_check;

  return check && !check->disabled;
}

static void
reply_result (sd_bus_message *call, MvMachine *machine)
{
  g_autoptr (sd_bus_message) reply = NULL;
  MvStatus *status = machine->status;
  const char *state = mv_state_to_string (status->state);

  if (sd_bus_message_new_method_return (call, &reply) < 0 ||
      sd_bus_message_open_container (reply, 'a', "{sv}") < 0 ||
      sd_bus_message_append (reply, "{sv}", "state", "s", state) < 0 ||
      (status->has_exit_code &&
       sd_bus_message_append (reply, "{sv}", "exit_code", "i", (int32_t) status->exit_code) < 0) ||
      (status->state_error && *status->state_error &&
       sd_bus_message_append (reply, "{sv}", "error", "s", status->state_error) < 0) ||
      (machine->health &&
       sd_bus_message_append (reply, "{sv}", "health", "s", machine->health) < 0) ||
      sd_bus_message_close_container (reply) < 0)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_FAILED, "Could not build the reply");
      return;
    }
  sd_bus_send (NULL, reply, NULL);
}

/* Whether @w is answered now; if so, it has been. */
static gboolean
try_answer (MvMachine *machine, StateWaiter *w)
{
  MvState state = machine->status->state;

  if (!has_ended (state))
    w->seen_active = TRUE;
  switch (w->condition)
    {
    case WAIT_STOPPED:
      if (!has_ended (state) || (w->next_stop && !w->seen_active))
        return FALSE;
      reply_result (w->call, machine);
      return TRUE;
    case WAIT_HEALTHY:
      if (g_strcmp0 (machine->health, "healthy") == 0 && state == MV_STATE_RUNNING)
        {
          reply_result (w->call, machine);
          return TRUE;
        }
      if (has_ended (state) && w->seen_active)
        {
          sd_bus_reply_method_errorf (w->call, MV_BUS_ERROR_INVALID_STATE,
                                      "Machine %s is %s: it stopped before it was healthy",
                                      machine->config->spec->name, mv_state_to_string (state));
          return TRUE;
        }
      return FALSE;
    }
  return FALSE;
}

void
mv_machine_waits_changed (MvMachineView *view, guint props)
{
  GList *l = view->state_waiters.head;

  if (!(props & (MV_PROP_STATE | MV_PROP_GUEST)))
    return;
  while (l)
    {
      GList *next = l->next;

      if (try_answer (view->machine, l->data))
        {
          state_waiter_free (l->data);
          g_queue_delete_link (&view->state_waiters, l);
        }
      l = next;
    }
}

void
mv_machine_waits_removed (MvMachineView *view)
{
  MvMachine *machine = view->machine;
  StateWaiter *w;

  while ((w = g_queue_pop_head (&view->state_waiters)))
    {
      /* Deleted as it stopped: that stop is the answer. */
      if (w->condition == WAIT_STOPPED && has_ended (machine->status->state) &&
          (!w->next_stop || w->seen_active))
        reply_result (w->call, machine);
      else
        sd_bus_reply_method_errorf (w->call, MV_BUS_ERROR_NOT_FOUND,
                                    "Machine %s was deleted before it %s", machine->id,
                                    w->condition == WAIT_STOPPED ? "stopped" : "was healthy");
      state_waiter_free (w);
    }
}

void
mv_machine_waits_clear (MvMachineView *view)
{
  g_queue_clear_full (&view->state_waiters, (GDestroyNotify) state_waiter_free);
}

static int
read_wait_options (sd_bus_message *m, MvMachine *machine, StateWaiter *w, sd_bus_error *error)
{
  const char *key, *id;
  int r, b;

  r = sd_bus_message_enter_container (m, 'a', "{sv}");
  if (r < 0)
    return r;
  while ((r = sd_bus_message_enter_container (m, 'e', "sv")) > 0)
    {
      if ((r = sd_bus_message_read (m, "s", &key)) < 0)
        return r;
      if (strcmp (key, "id") == 0)
        {
          if (sd_bus_message_read (m, "v", "s", &id) < 0)
            return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                                      "options: id must be a string (s)");
          if (strcmp (id, machine->id) != 0)
            return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND,
                                      "Machine %s is not the machine %s: that one is gone",
                                      machine->config->spec->name, id);
        }
      else if (strcmp (key, "next_stop") == 0)
        {
          if (sd_bus_message_read (m, "v", "b", &b) < 0)
            return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                                      "options: next_stop must be a boolean (b)");
          w->next_stop = b;
        }
      else
        return sd_bus_error_setf (error, MV_BUS_ERROR_UNSUPPORTED,
                                  "options: '%s' is not an option of Wait (id, next_stop)", key);
      if ((r = sd_bus_message_exit_container (m)) < 0)
        return r;
    }
  if (r < 0)
    return r;
  return sd_bus_message_exit_container (m);
}

int
mv_machine_method_wait (sd_bus_message *m, MvMachine *machine, sd_bus_error *error)
{
  g_autofree StateWaiter *w = g_new0 (StateWaiter, 1);
  MvMachineView *view = machine->view;
  const char *condition;
  int r;

  if ((r = sd_bus_message_read (m, "s", &condition)) < 0)
    return r;
  if (strcmp (condition, "stopped") == 0)
    w->condition = WAIT_STOPPED;
  else if (strcmp (condition, "healthy") == 0)
    w->condition = WAIT_HEALTHY;
  else
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "condition: '%s' is not one of stopped, healthy", condition);
  if ((r = read_wait_options (m, machine, w, error)) < 0)
    return r;
  if (g_queue_get_length (&view->state_waiters) >= WAITS_MAX)
    return sd_bus_error_setf (error, MV_BUS_ERROR_RESOURCE_EXHAUSTED,
                              "Machine %s has %d Waits already, the most it holds",
                              machine->config->spec->name, WAITS_MAX);
  if (w->condition == WAIT_HEALTHY && !has_health_check (machine))
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_STATE,
                              "Machine %s has no health check to wait for",
                              machine->config->spec->name);
  w->call = sd_bus_message_ref (m);
  if (try_answer (machine, w))
    {
      sd_bus_message_unref (w->call);
      return 1;
    }
  g_queue_push_tail (&view->state_waiters, g_steal_pointer (&w));
  return 1;
}
