#include "config.h"

#include <locale.h>

#include <glib/gi18n.h>

#include "daemon.h"

int
main (int argc, char **argv)
{
  /* Messages in the user's language; numbers stay in the C locale, since
   * the daemon writes them into records and VMM command lines. */
  setlocale (LC_ALL, "");
  setlocale (LC_NUMERIC, "C");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  return mv_daemon_main (argc, argv, NULL);
}
