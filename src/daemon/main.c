#include "daemon.h"

int
main (int argc, char **argv)
{
  return mv_daemon_main (argc, argv, NULL);
}
