#include "hv-test.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

char *
hv_test_make_dir (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("mvhv-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

void
hv_test_remove_tree (const char *path)
{
  g_autoptr (GError) error = NULL;

  /* What a test leaves behind is not what it tests. */
  if (!mv_remove_tree (path, &error))
    g_test_message ("%s", error->message);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(char **) a, *(char **) b);
}

char *
hv_test_list_dir (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

GPtrArray *
hv_test_runtimes (const char *config_extra, GError **error)
{
  g_autoptr (GKeyFile) config = g_key_file_new ();
  const char *kernel = g_getenv ("MICROVMD_TEST_KERNEL");
  g_autofree char *guest_dir = kernel ? g_path_get_dirname (kernel) : g_strdup ("/nonexistent");
  g_autofree char *paths = config_extra && strstr (config_extra, "[paths]") ? g_strdup ("")
    : g_strdup_printf ("[paths]\nallowed-directories=%s\n", guest_dir);
  /* [paths] last: config_extra's keys belong to the groups it names. */
  g_autofree char *text = g_strconcat ("[qemu]\naccel=tcg\n", config_extra ? config_extra : "",
                                       "\n", paths, NULL);

  g_assert_true (g_key_file_load_from_data (config, text, -1, G_KEY_FILE_NONE, NULL));
  return mv_hypervisor_builtin_runtimes (config, NULL, error);
}

MvRuntime *
hv_test_qemu_runtime (const char *config_extra, GError **error)
{
  g_autoptr (GPtrArray) runtimes = hv_test_runtimes (config_extra, error);

  if (!runtimes)
    return NULL;
  g_assert_cmpuint (runtimes->len, >=, 1);
  g_assert_cmpstr (((MvRuntime *) runtimes->pdata[0])->type, ==, "qemu");
  return g_ptr_array_steal_index (runtimes, 0);
}

MvSpec *
hv_test_guest_spec (MvReadiness readiness, const char *readiness_text, const char *kernel_args)
{
  MvSpec *spec = mv_spec_new ();
  const char *kernel = g_getenv ("MICROVMD_TEST_KERNEL");
  const char *initrd = g_getenv ("MICROVMD_TEST_INITRD");

  g_assert_nonnull (kernel);
  g_assert_nonnull (initrd);
  spec->name = g_strdup ("guest");
  spec->kernel = g_strdup (kernel);
  spec->initrd = g_strdup (initrd);
  spec->kernel_args = g_strdup (kernel_args);
  spec->readiness = readiness;
  spec->readiness_text = g_strdup (readiness_text);
  return spec;
}

goffset
hv_test_file_size (const char *path)
{
  GStatBuf st;

  return g_stat (path, &st) == 0 ? st.st_size : 0;
}

static char *
read_from (const char *path, goffset offset)
{
  g_autofree char *contents = NULL;
  gsize length = 0;

  if (!g_file_get_contents (path, &contents, &length, NULL) || (gsize) offset >= length)
    return g_strdup ("");
  return g_strdup (contents + offset);
}

gboolean
hv_test_wait_file_has (const char *path, goffset offset, const char *text, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree char *contents = read_from (path, offset);

      if (strstr (contents, text))
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (100 * 1000);
    }
}

static gint64
counter (const char *path, goffset offset, gboolean last)
{
  g_autofree char *contents = read_from (path, offset);
  g_auto (GStrv) lines = g_strsplit (contents, "\n", -1);
  gint64 found = -1;

  /* Only whole lines: the last element is what follows the last newline. */
  for (char **line = lines; *line && line[1]; line++)
    {
      const char *p = strstr (*line, "MICROVMD-COUNTER ");

      if (!p)
        continue;
      found = g_ascii_strtoll (p + strlen ("MICROVMD-COUNTER "), NULL, 10);
      if (!last)
        return found;
    }
  return found;
}

gint64
hv_test_last_counter (const char *path, goffset offset)
{
  return counter (path, offset, TRUE);
}

gint64
hv_test_first_counter (const char *path, goffset offset)
{
  return counter (path, offset, FALSE);
}

int
hv_test_identity_pid (JsonObject *identity)
{
  return (int) json_object_get_int_member (identity, "pid");
}

gboolean
hv_test_pid_alive (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *contents = NULL;
  const char *p;

  if (kill (pid, 0) < 0 && errno == ESRCH)
    return FALSE;
  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return FALSE;
  p = strrchr (contents, ')');
  return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}
