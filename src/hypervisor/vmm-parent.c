/* The VMM's parent (vmm-parent.h). */
#include "vmm-parent.h"
#include "process.h"
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define VMM_PARENT_NAME  "microvmd-vmm-parent"
/* The pid's argument: the flag and room for any pid. */
#define VMM_FLAG         "--vmm="
#define VMM_ARG_SIZE     (sizeof VMM_FLAG + 12)

const char *
mv_vmm_parent_path (void)
{
  static const char *path;
  static gsize once;

  if (g_once_init_enter (&once))
    {
      g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);

      if (exe && g_str_has_prefix (exe, MV_BUILD_ROOT "/"))
        path = MV_BUILD_ROOT "/src/hypervisor/" VMM_PARENT_NAME;
      else
        path = MV_LIBEXECDIR "/" VMM_PARENT_NAME;
      g_once_init_leave (&once, 1);
    }
  return path;
}

char **
mv_vmm_parent_argv (const MvVmmParent *parent)
{
  GPtrArray *argv = g_ptr_array_new ();
  const MvConsoleFds *c = &parent->console;
  char *vmm = g_malloc0 (VMM_ARG_SIZE);

  memcpy (vmm, VMM_FLAG, strlen (VMM_FLAG));
  g_ptr_array_add (argv, g_strdup (mv_vmm_parent_path ()));
  g_ptr_array_add (argv, vmm);
  g_ptr_array_add (argv, g_strdup_printf ("--dir-fd=%d", parent->dir_fd));
  if (c->held_end >= 0)
    g_ptr_array_add (argv, g_strdup_printf ("--console=%d,%d,%d", c->held_end, c->log,
                                            c->listener));
  if (parent->jailed)
    {
      const MvGrants *g = &parent->grants;

      g_ptr_array_add (argv, g_strdup_printf ("--uid=%u", (unsigned) g->uid));
      g_ptr_array_add (argv, g_strdup_printf ("--runtime-fd=%d", g->runtime_fd));
      for (guint i = 0; i < g->n_granted; i++)
        g_ptr_array_add (argv, g_strdup_printf ("--grant=%d", g->granted[i]));
      for (guint i = 0; i < g->n_taps; i++)
        g_ptr_array_add (argv, g_strconcat ("--tap=", g->taps[i].name, NULL));
    }
  g_ptr_array_add (argv, NULL);
  return (char **) g_ptr_array_free (argv, FALSE);
}

/* Writes @value in decimal at @buf, which holds at least 12 bytes, and
 * returns the length; what snprintf would do, but async-signal-safe. */
static size_t
format_decimal (char *buf, unsigned int value)
{
  char digits[12];
  size_t n = 0, len = 0;

  do
    digits[n++] = (char) ('0' + value % 10);
  while ((value /= 10) != 0);
  while (n > 0)
    buf[len++] = digits[--n];
  return len;
}

void
mv_vmm_parent_set_vmm (char **argv, pid_t vmm)
{
  char *arg = argv[1];
  size_t len = strlen (VMM_FLAG);

  len += format_decimal (arg + len, (unsigned int) vmm);
  arg[len] = '\0';
}

/* ---- in the program ---- */

static gboolean
parse_number (const char *text, guint64 max, guint64 *value)
{
  return g_ascii_string_to_unsigned (text, 10, 0, max, value, NULL);
}

/* A descriptor this process has. */
static gboolean
parse_fd (const char *text, int *fd)
{
  guint64 value;

  if (!parse_number (text, G_MAXINT, &value) || fcntl ((int) value, F_GETFD) < 0)
    return FALSE;
  *fd = (int) value;
  return TRUE;
}

gboolean
mv_vmm_parent_parse (char **argv, MvVmmParent *parent, int *granted, MvTapName *taps,
                     char **why)
{
  MvGrants *g = &parent->grants;
  gboolean console = FALSE, uid = FALSE, runtime = FALSE;

  *parent = (MvVmmParent) { .dir_fd = -1, .console = MV_CONSOLE_FDS_INIT };
  g->runtime_fd = -1;
  g->granted = granted;
  g->taps = taps;
  for (char **arg = argv + 1; *arg; arg++)
    {
      const char *value = strchr (*arg, '=');
      g_autofree char *flag = value ? g_strndup (*arg, value - *arg) : g_strdup (*arg);
      gboolean ok = value != NULL;
      guint64 number = 0;

      if (value)
        value++;
      if (!ok)
        ;
      else if (g_str_equal (flag, "--vmm"))
        {
          ok = !parent->vmm && parse_number (value, G_MAXINT, &number) && number > 0;
          parent->vmm = (pid_t) number;
        }
      else if (g_str_equal (flag, "--dir-fd"))
        ok = parent->dir_fd < 0 && parse_fd (value, &parent->dir_fd);
      else if (g_str_equal (flag, "--console"))
        {
          g_auto (GStrv) fds = g_strsplit (value, ",", -1);

          ok = !console && g_strv_length (fds) == 3 &&
               parse_fd (fds[0], &parent->console.held_end) &&
               parse_fd (fds[1], &parent->console.log) &&
               parse_fd (fds[2], &parent->console.listener);
          console = TRUE;
        }
      else if (g_str_equal (flag, "--uid"))
        {
          ok = !uid && parse_number (value, G_MAXUINT32 - 1, &number);
          g->uid = (uid_t) number;
          uid = TRUE;
        }
      else if (g_str_equal (flag, "--runtime-fd"))
        {
          ok = !runtime && parse_fd (value, &g->runtime_fd);
          runtime = TRUE;
        }
      else if (g_str_equal (flag, "--grant"))
        ok = g->n_granted < MV_VMM_PARENT_MAX_GRANTS && parse_fd (value, &granted[g->n_granted++]);
      else if (g_str_equal (flag, "--tap"))
        {
          ok = g->n_taps < MV_VMM_PARENT_MAX_GRANTS && *value &&
               strlen (value) < MV_TAP_NAME_SIZE;
          if (ok)
            g_strlcpy (taps[g->n_taps++].name, value, MV_TAP_NAME_SIZE);
        }
      else
        ok = FALSE;
      if (!ok)
        {
          *why = g_strdup_printf ("%s: not an argument of " VMM_PARENT_NAME, *arg);
          return FALSE;
        }
    }
  parent->jailed = uid;
  if (!parent->vmm || parent->dir_fd < 0 || uid != runtime ||
      (!uid && (g->n_granted || g->n_taps)))
    {
      *why = g_strdup ("--vmm and --dir-fd are needed, and --uid goes with --runtime-fd, "
                       "which --grant and --tap need");
      return FALSE;
    }
  return TRUE;
}

/* ---- its work ---- */

static int
pidfd_open (pid_t pid)
{
  return (int) syscall (SYS_pidfd_open, pid, 0);
}

void
mv_vmm_parent_run (const MvVmmParent *parent)
{
  MvConsoleFds console = parent->console;
  char text[16];
  size_t len;
  int status;

  /* The VMM's end went with what was not kept. */
  console.vmm_end = -1;
  if (console.held_end >= 0)
    {
      int pidfd = pidfd_open (parent->vmm);
      mv_console_hold (&console, pidfd);
      if (pidfd >= 0)
        close (pidfd);
    }

  while (waitpid (parent->vmm, &status, 0) < 0)
    if (errno != EINTR)
      _exit (1);
  /* Before the end is written: whoever sees it sees the grants gone. */
  if (parent->jailed)
    mv_grants_release (&parent->grants);
  len = format_decimal (text, (unsigned int) status);
  text[len++] = '\n';
  /* Descriptor 0 is the file: whoever cleans the directory up before the
   * VMM's end is written removes it, and then the rename fails and
   * leaves nothing behind. */
  if (write (0, text, len) != (ssize_t) len || fsync (0) < 0)
    _exit (1);
  renameat (parent->dir_fd, MV_VMM_EXIT_TEMP_NAME, parent->dir_fd, MV_VMM_EXIT_NAME);
  _exit (0);
}
