/* The VMM's parent, for as long as the VMM lives (process.c): it holds
 * the guest's console if the VMM has one (console.h), reaps the VMM,
 * takes back what the VMM's wall gave it (grants.h), and writes the VMM's
 * wait status beside its socket (MV_VMM_EXIT_NAME) for whoever watches
 * the VMM, which is not its parent and could not learn how it ended
 * otherwise.
 *
 * It is a program of its own, microvmd-vmm-parent, that the fork which
 * made the VMM execs at once: a fork of the daemon that stayed as long as
 * the VMM would keep, copy on write, the daemon's memory as it was at the
 * fork, and come to hold a copy of every page the daemon writes after.
 * Should the exec fail, the fork does the same work itself
 * (mv_vmm_parent_run()).
 *
 * Its command line, built by the daemon before the fork:
 *
 *   --vmm=PID            the VMM, its child
 *   --dir-fd=FD          the directory of the VMM's socket, where the wait
 *                        status goes (MV_VMM_EXIT_NAME), written whole
 *                        through a file beside it, open as descriptor 0
 *   --console=H,L,S      the console's held end, log and listening socket
 *   --uid=UID            a walled-in VMM's user ...
 *   --runtime-fd=FD      ... its runtime directory, given back to root
 *   --grant=FD           a file with an ACL entry of UID (repeated)
 *   --tap=NAME           a TAP device UID owns (repeated)
 *
 * Every descriptor named is inherited. No path is: nothing but the pid
 * ties it to its machine, so that nobody who looks for a machine's
 * processes by their command line takes it for the VMM. */
#pragma once
#include "console.h"
#include "grants.h"

#include <glib.h>
#include <sys/types.h>

/* At most this many granted files, and as many TAP devices. */
#define MV_VMM_PARENT_MAX_GRANTS  64

typedef struct {
  pid_t         vmm;
  int           dir_fd;
  MvConsoleFds  console;    /* held_end, log, listener; all -1 without one */
  gboolean      jailed;
  MvGrants      grants;     /* if @jailed */
} MvVmmParent;

/* The program: the one built in this build tree if the running binary is
 * one of the tree's, else the installed one. */
const char  *mv_vmm_parent_path (void);

/* Its command line for @parent, the VMM's pid left to
 * mv_vmm_parent_set_vmm(); NULL-terminated. */
char       **mv_vmm_parent_argv (const MvVmmParent *parent);
/* In the fork, async-signal-safe: writes @vmm into @argv. */
void         mv_vmm_parent_set_vmm (char **argv, pid_t vmm);

/* In the program: reads its command line into @parent, whose grants point
 * into @granted and @taps (MV_VMM_PARENT_MAX_GRANTS each). FALSE with
 * *@why set if it is not one mv_vmm_parent_argv() makes. */
gboolean     mv_vmm_parent_parse (char **argv, MvVmmParent *parent, int *granted,
                                  MvTapName *taps, char **why);

/* Serves the console until the VMM ends, reaps it, gives back its grants,
 * writes its wait status, and exits. Async-signal-safe: it may run in a
 * fork of a threaded process. */
G_GNUC_NORETURN
void         mv_vmm_parent_run (const MvVmmParent *parent);
