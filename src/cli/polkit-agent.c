/* A polkit text agent on the caller's terminal. */
#include "polkit-agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define MV_PKTTYAGENT "/usr/bin/pkttyagent"
/* The descriptor the agent finds its notification pipe on. */
#define MV_AGENT_NOTIFY_FD 3

struct _MvPolkitAgent {
  GPid pid;
};

MvPolkitAgent *
mv_polkit_agent_open (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *notify_fd = g_strdup_printf ("%d", MV_AGENT_NOTIFY_FD);
  const char *argv[] = { MV_PKTTYAGENT, "--notify-fd", notify_fd, "--fallback", NULL };
  int pipe_fds[2];
  int target_fd = MV_AGENT_NOTIFY_FD;
  MvPolkitAgent *agent;
  GPid pid;
  char c;

  if (!isatty (STDIN_FILENO))
    return NULL;
  if (!g_file_test (MV_PKTTYAGENT, G_FILE_TEST_IS_EXECUTABLE))
    return NULL;
  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return NULL;

  if (!g_spawn_async_with_pipes_and_fds (NULL, argv, NULL,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_CHILD_INHERITS_STDIN,
                                         NULL, NULL,
                                         -1, -1, -1,
                                         &pipe_fds[1], &target_fd, 1,
                                         &pid, NULL, NULL, NULL, &error))
    {
      close (pipe_fds[0]);
      close (pipe_fds[1]);
      return NULL;
    }
  close (pipe_fds[1]);

  /* The agent closes its end once it is registered, or dies trying; either
   * way the read ends. */
  while (read (pipe_fds[0], &c, 1) < 0 && errno == EINTR)
    ;
  close (pipe_fds[0]);

  agent = g_new0 (MvPolkitAgent, 1);
  agent->pid = pid;
  return agent;
}

void
mv_polkit_agent_close (MvPolkitAgent *agent)
{
  if (agent == NULL)
    return;

  kill (agent->pid, SIGTERM);
  kill (agent->pid, SIGCONT);
  while (waitpid (agent->pid, NULL, 0) < 0 && errno == EINTR)
    ;
  g_spawn_close_pid (agent->pid);
  g_free (agent);
}
