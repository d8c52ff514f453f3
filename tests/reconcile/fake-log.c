#include "fake-log.h"

#include <stdarg.h>
#include <string.h>

struct _FakeLog {
  GMutex     lock;
  GPtrArray *entries;    /* char* */
  GPtrArray *breaches;   /* char* */
};

static GThread *main_thread;

FakeLog *
fake_log_new (void)
{
  FakeLog *log = g_new0 (FakeLog, 1);

  g_mutex_init (&log->lock);
  log->entries = g_ptr_array_new_with_free_func (g_free);
  log->breaches = g_ptr_array_new_with_free_func (g_free);
  return log;
}

void
fake_log_free (FakeLog *log)
{
  if (!log)
    return;
  g_ptr_array_unref (log->entries);
  g_ptr_array_unref (log->breaches);
  g_mutex_clear (&log->lock);
  g_free (log);
}

void
fake_log_add (FakeLog *log, const char *format, ...)
{
  va_list args;
  char *entry;

  va_start (args, format);
  entry = g_strdup_vprintf (format, args);
  va_end (args);
  g_mutex_lock (&log->lock);
  g_ptr_array_add (log->entries, entry);
  g_mutex_unlock (&log->lock);
  g_main_context_wakeup (NULL);
}

guint
fake_log_len (FakeLog *log)
{
  guint len;

  g_mutex_lock (&log->lock);
  len = log->entries->len;
  g_mutex_unlock (&log->lock);
  return len;
}

char *
fake_log_get (FakeLog *log, guint index)
{
  char *entry = NULL;

  g_mutex_lock (&log->lock);
  if (index < log->entries->len)
    entry = g_strdup (log->entries->pdata[index]);
  g_mutex_unlock (&log->lock);
  return entry;
}

static gboolean
is_call (const char *entry, const char *call)
{
  gsize n = strlen (call);

  return strncmp (entry, call, n) == 0 && (entry[n] == '\0' || entry[n] == ' ');
}

int
fake_log_find (FakeLog *log, guint from, const char *call)
{
  int found = -1;

  g_mutex_lock (&log->lock);
  for (guint i = from; i < log->entries->len && found < 0; i++)
    if (is_call (log->entries->pdata[i], call))
      found = (int) i;
  g_mutex_unlock (&log->lock);
  return found;
}

int
fake_log_rfind (FakeLog *log, int before, const char *call)
{
  int found = -1;

  g_mutex_lock (&log->lock);
  for (int i = MIN (before, (int) log->entries->len) - 1; i >= 0 && found < 0; i--)
    if (is_call (log->entries->pdata[i], call))
      found = i;
  g_mutex_unlock (&log->lock);
  return found;
}

guint
fake_log_count (FakeLog *log, const char *call)
{
  guint n = 0;

  g_mutex_lock (&log->lock);
  for (guint i = 0; i < log->entries->len; i++)
    if (is_call (log->entries->pdata[i], call))
      n++;
  g_mutex_unlock (&log->lock);
  return n;
}

static char *
join (GPtrArray *lines)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < lines->len; i++)
    g_string_append_printf (out, "  %u: %s\n", i, (const char *) lines->pdata[i]);
  return g_string_free (out, FALSE);
}

char *
fake_log_dump (FakeLog *log)
{
  char *dump;

  g_mutex_lock (&log->lock);
  dump = join (log->entries);
  g_mutex_unlock (&log->lock);
  return dump;
}

void
fake_log_breach (FakeLog *log, const char *format, ...)
{
  va_list args;
  char *breach;

  va_start (args, format);
  breach = g_strdup_vprintf (format, args);
  va_end (args);
  g_mutex_lock (&log->lock);
  g_ptr_array_add (log->breaches, breach);
  g_mutex_unlock (&log->lock);
}

char *
fake_log_breaches (FakeLog *log)
{
  char *breaches = NULL;

  g_mutex_lock (&log->lock);
  if (log->breaches->len)
    breaches = join (log->breaches);
  g_mutex_unlock (&log->lock);
  return breaches;
}

void
fake_set_main_thread (void)
{
  main_thread = g_thread_self ();
}

gboolean
fake_on_main_thread (void)
{
  return g_thread_self () == main_thread;
}

void
fake_assert_order_impl (FakeLog *log, const char *file, int line, ...)
{
  va_list args;
  const char *call;
  guint from = 0;

  va_start (args, line);
  while ((call = va_arg (args, const char *)))
    {
      int at = fake_log_find (log, from, call);

      if (at < 0)
        {
          g_autofree char *dump = fake_log_dump (log);
          g_autofree char *msg = g_strdup_printf ("'%s' not found after entry %u in:\n%s", call,
                                                  from, dump);
          va_end (args);
          g_assertion_message (G_LOG_DOMAIN, file, line, G_STRFUNC, msg);
          return;
        }
      from = (guint) at + 1;
    }
  va_end (args);
}

void
fake_hold_init (FakeHold *hold)
{
  g_mutex_init (&hold->lock);
  g_cond_init (&hold->cond);
  hold->armed = -1;
  hold->holding = FALSE;
}

void
fake_hold_clear (FakeHold *hold)
{
  g_mutex_clear (&hold->lock);
  g_cond_clear (&hold->cond);
}

void
fake_hold_arm (FakeHold *hold, int call)
{
  g_mutex_lock (&hold->lock);
  hold->armed = call;
  g_mutex_unlock (&hold->lock);
}

void
fake_hold_point (FakeHold *hold, int call)
{
  g_mutex_lock (&hold->lock);
  if (hold->armed == call)
    {
      hold->armed = -1;
      hold->holding = TRUE;
      g_main_context_wakeup (NULL);
      while (hold->holding)
        g_cond_wait (&hold->cond, &hold->lock);
    }
  g_mutex_unlock (&hold->lock);
}

gboolean
fake_hold_holding (FakeHold *hold)
{
  gboolean holding;

  g_mutex_lock (&hold->lock);
  holding = hold->holding;
  g_mutex_unlock (&hold->lock);
  return holding;
}

void
fake_hold_release (FakeHold *hold)
{
  g_mutex_lock (&hold->lock);
  hold->holding = FALSE;
  g_cond_broadcast (&hold->cond);
  g_mutex_unlock (&hold->lock);
}
