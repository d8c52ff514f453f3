/* A stand-in VMM for the console's holder: it serves nothing on its API
 * socket (a listening socket accepts connections in the kernel), and its
 * "guest" answers what is typed on its stdin, on its stdout:
 *
 *   flood N   N lines of 63 'x' and a newline, then "flood done"
 *   trickle N N 't's, a write each, 250 µs apart, as a serial port
 *             prints; then a newline and "trickle done"
 *   exit      ends the VMM
 *   other     "echo: <line>"
 *
 *   console-vmm SOCKET */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char line[4096];
  int fd;

  if (argc != 2 || strlen (argv[1]) >= sizeof addr.sun_path)
    return 2;
  strcpy (addr.sun_path, argv[1]);
  fd = socket (AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 8) < 0)
    return 1;
  setvbuf (stdout, NULL, _IOLBF, 0);
  printf ("console-vmm up\n");
  while (fgets (line, sizeof line, stdin))
    {
      line[strcspn (line, "\r\n")] = '\0';
      if (strncmp (line, "flood ", 6) == 0)
        {
          long n = strtol (line + 6, NULL, 10);
          char x[65];

          memset (x, 'x', 63);
          x[63] = '\n';
          x[64] = '\0';
          for (long i = 0; i < n; i++)
            fputs (x, stdout);
          printf ("flood done\n");
        }
      else if (strncmp (line, "trickle ", 8) == 0)
        {
          long n = strtol (line + 8, NULL, 10);

          for (long i = 0; i < n; i++)
            {
              putchar ('t');
              fflush (stdout);
              usleep (250);
            }
          printf ("\ntrickle done\n");
        }
      else if (strcmp (line, "exit") == 0)
        return 0;
      else
        printf ("echo: %s\n", line);
    }
  /* Its stdin ended: the console holder went away. */
  pause ();
  return 0;
}
