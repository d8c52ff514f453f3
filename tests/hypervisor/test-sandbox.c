/* The sandbox's settings and its UID leases (hypervisor/sandbox.h): bad
 * values name the key; a UID is never leased twice while held, and is
 * free again once its lease is closed. Leases are taken in the host's
 * lease directory, as the daemon's are: run as root. */
#include "hv-test.h"
#include "hypervisor/sandbox.h"

#include <string.h>
#include <unistd.h>

static MvSandbox *
sandbox_from (const char *text, GError **error)
{
  g_autoptr (GKeyFile) config = g_key_file_new ();

  g_assert_true (g_key_file_load_from_data (config, text, -1, G_KEY_FILE_NONE, NULL));
  return mv_sandbox_new_from_config (config, error);
}

static void
test_config (void)
{
  const char *bad[] = {
    "[sandbox]\nuid-range=5\n",
    "[sandbox]\nuid-range=600000-500000\n",
    "[sandbox]\nuid-range=0-1000\n",
    "[sandbox]\nuid-range=60000-70000\n",       /* holds nobody */
    "[sandbox]\nenabled=perhaps\n",
    "[paths]\nallowed-directories=relative/dir\n",
    "[paths]\nallowed-directories=/\n",
  };
  g_autoptr (MvSandbox) defaults = mv_sandbox_new_from_config (NULL, NULL);
  g_autoptr (MvSandbox) off = sandbox_from ("[sandbox]\nenabled=false\n", NULL);

  g_assert_nonnull (defaults);
  g_assert_true (mv_sandbox_enabled (defaults));
  g_assert_true (mv_sandbox_owns_uid (defaults, MV_SANDBOX_DEFAULT_UID_FIRST));
  g_assert_true (mv_sandbox_owns_uid (defaults, MV_SANDBOX_DEFAULT_UID_LAST));
  g_assert_false (mv_sandbox_owns_uid (defaults, 1000));
  g_assert_nonnull (off);
  g_assert_false (mv_sandbox_enabled (off));
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MvSandbox) sandbox = sandbox_from (bad[i], &error);

      g_assert_null (sandbox);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_test_message ("%s", error->message);
      g_assert_true (strstr (error->message, "[sandbox]") || strstr (error->message, "[paths]"));
    }
}

static void
test_leases (void)
{
  /* A range of its own, so that running VMMs do not get in the way. */
  g_autoptr (MvSandbox) sandbox = sandbox_from ("[sandbox]\nuid-range=700000-700001\n", NULL);
  g_autoptr (GError) error = NULL;
  uid_t a = 0, b = 0, c = 0, again = 0;
  int la, lb, lc;

  if (geteuid () != 0)
    {
      g_test_skip ("leases are taken in the host's lease directory, root's");
      return;
    }
  la = mv_sandbox_lease_uid (sandbox, "machine", &a, &error);
  g_assert_no_error (error);
  lb = mv_sandbox_lease_uid (sandbox, "machine", &b, &error);
  g_assert_no_error (error);
  g_assert_cmpint (la, >=, 0);
  g_assert_cmpint (lb, >=, 0);
  g_assert_cmpuint (a, !=, b);
  g_assert_true (mv_sandbox_owns_uid (sandbox, a) && mv_sandbox_owns_uid (sandbox, b));

  lc = mv_sandbox_lease_uid (sandbox, "another", &c, &error);
  g_assert_cmpint (lc, ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
  g_clear_error (&error);

  close (la);
  lc = mv_sandbox_lease_uid (sandbox, "machine", &again, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (again, ==, a);
  close (lb);
  close (lc);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sandbox/config", test_config);
  g_test_add_func ("/sandbox/leases", test_leases);
  return g_test_run ();
}
