/* Main loop, logging and small helpers of the test VMMs. */
#include "fake-vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static GMainLoop *loop;
static int exit_code;

int
fake_vmm_run (void)
{
  loop = g_main_loop_new (NULL, FALSE);
  g_main_loop_run (loop);
  g_clear_pointer (&loop, g_main_loop_unref);
  return exit_code;
}

void
fake_vmm_exit (int code)
{
  exit_code = code;
  if (loop)
    g_main_loop_quit (loop);
}

char *
fake_os_error_text (int errnum)
{
  return g_strdup_printf ("%s (os error %d)", g_strerror (errnum), errnum);
}

static const struct {
  const char *name;
  int         level;
} levels[] = {
  { "off", 0 }, { "error", 1 }, { "warning", 2 }, { "warn", 2 }, { "info", 3 },
  { "debug", 4 }, { "trace", 5 },
};

static int
level_of (const char *name, int fallback)
{
  for (gsize i = 0; i < G_N_ELEMENTS (levels); i++)
    if (g_ascii_strcasecmp (name, levels[i].name) == 0)
      return levels[i].level;
  return fallback;
}

void
fake_log_init (FakeLog *log, FakeLogPrefix prefix, gpointer data, const char *level)
{
  log->prefix = prefix;
  log->data = data;
  log->level = level_of (level, 2);
  log->fd = -1;
}

void
fake_log_clear (FakeLog *log)
{
  if (log->fd >= 0)
    close (log->fd);
  log->fd = -1;
}

void
fake_log_set_path (FakeLog *log, const char *path)
{
  int fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

  if (fd < 0)
    return;
  fake_log_clear (log);
  log->fd = fd;
}

void
fake_log_set_level (FakeLog *log, const char *level)
{
  log->level = level_of (level, log->level);
}

static void
log_line (FakeLog *log, const char *name, int level, const char *format, va_list args)
{
  g_autofree char *prefix = NULL;
  g_autofree char *message = NULL;
  g_autofree char *line = NULL;

  if (level > log->level)
    return;
  prefix = log->prefix (name, log->data);
  message = g_strdup_vprintf (format, args);
  line = g_strdup_printf ("%s %s\n", prefix, message);
  fake_write_all (log->fd >= 0 ? log->fd : STDERR_FILENO, line, strlen (line));
}

#define LOG_FUNCTION(func, name, level)                          \
  void                                                           \
  func (FakeLog *log, const char *format, ...)                   \
  {                                                              \
    va_list args;                                                \
    va_start (args, format);                                     \
    log_line (log, name, level, format, args);                   \
    va_end (args);                                               \
  }

LOG_FUNCTION (fake_log_error, "ERROR", 1)
LOG_FUNCTION (fake_log_warning, "WARN", 2)
LOG_FUNCTION (fake_log_info, "INFO", 3)
LOG_FUNCTION (fake_log_debug, "DEBUG", 4)

char *
fake_cmdline_get (const char *cmdline, const char *key)
{
  g_auto (GStrv) words = g_strsplit_set (cmdline ? cmdline : "", " \t\n", -1);
  gsize key_len = strlen (key);
  char *value = NULL;

  for (char **w = words; *w; w++)
    {
      if (strncmp (*w, key, key_len) != 0)
        continue;
      if ((*w)[key_len] == '\0')
        {
          g_free (value);
          value = g_strdup ("");
        }
      else if ((*w)[key_len] == '=')
        {
          g_free (value);
          value = g_strdup (*w + key_len + 1);
        }
    }
  return value;
}

gboolean
fake_cmdline_has (const char *cmdline, const char *key)
{
  g_autofree char *value = fake_cmdline_get (cmdline, key);

  return value != NULL;
}

static void
add_option (GHashTable *options, const char *item)
{
  const char *eq = strchr (item, '=');

  if (eq)
    g_hash_table_replace (options, g_strstrip (g_strndup (item, eq - item)),
                          g_strstrip (g_strdup (eq + 1)));
  else
    g_hash_table_replace (options, g_strstrip (g_strdup (item)), NULL);
}

GHashTable *
fake_parse_options (const char *text)
{
  GHashTable *options = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr (GString) item = g_string_new (NULL);
  int depth = 0;

  for (const char *p = text; *p; p++)
    {
      if (*p == '[')
        depth++;
      else if (*p == ']')
        depth--;
      if (*p == ',' && depth == 0)
        {
          add_option (options, item->str);
          g_string_truncate (item, 0);
        }
      else
        g_string_append_c (item, *p);
    }
  if (item->len > 0)
    add_option (options, item->str);
  return options;
}

gboolean
fake_write_all (int fd, const void *data, gsize len)
{
  const char *p = data;
  struct stat st;
  gboolean is_socket = fstat (fd, &st) == 0 && S_ISSOCK (st.st_mode);

  while (len > 0)
    {
      ssize_t n = is_socket ? send (fd, p, len, MSG_NOSIGNAL) : write (fd, p, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      p += n;
      len -= n;
    }
  return TRUE;
}

gboolean
fake_read_file (const char *path, char **contents, gsize *length, int *errnum)
{
  g_autoptr (GString) data = g_string_new (NULL);
  char buf[65536];
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    {
      *errnum = errno;
      return FALSE;
    }
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          *errnum = errno;
          close (fd);
          return FALSE;
        }
      if (n == 0)
        break;
      g_string_append_len (data, buf, n);
    }
  close (fd);
  *length = data->len;
  *contents = g_string_free (g_steal_pointer (&data), FALSE);
  return TRUE;
}

const char *
fake_vmm_version (const char *argv0, const char *fallback)
{
  const char *env = g_getenv ("MICROVMD_FAKE_VERSION");
  const char *dash = argv0 ? strrchr (argv0, '-') : NULL;

  if (env)
    return env;
  if (dash && g_ascii_isdigit (dash[1]) && strspn (dash + 1, "0123456789.") == strlen (dash + 1))
    return dash + 1;
  return fallback;
}
