/* The workload's stdout and stderr: two pipes whose reading ends the
 * loop copies, as they come, to the console and to every host whose HELLO
 * asked for them (WANT_OUTPUT) as OUTPUT frames. The workload never waits
 * on a host: while none has asked, its output is held here up to
 * MV_AGENT_OUTPUT_PENDING_BYTES; a host that does not read has its share
 * dropped once its session holds AGENT_OUT_HIGH_BYTES. Either way what is
 * dropped is counted, and the next OUTPUT says how much (DROPPED). */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One read from a pipe: what one OUTPUT frame carries at most. */
#define OUTPUT_CHUNK_BYTES  (16u * 1024)
/* A record of the held output: stream (1 byte), length (4, host order). */
#define RECORD_HEADER_BYTES 5

static int      read_fd[3] = { -1, -1, -1 };   /* [1] stdout, [2] stderr */
static int      read_pidx[3] = { -1, -1, -1 };
static uint8_t *held;                          /* records, for the next host that asks */
static size_t   held_len;
static uint64_t held_dropped;                  /* dropped since the last record held */

bool
output_open (int child_fds[3], char *error, size_t size)
{
  int p[2];

  child_fds[0] = -1;
  for (int stream = 1; stream <= 2; stream++)
    {
      if (pipe2 (p, O_CLOEXEC) < 0)
        {
          snprintf (error, size, "pipe for the workload's output: %s", strerror (errno));
          if (stream == 2)
            {
              close (child_fds[1]);
              close (read_fd[1]);
              read_fd[1] = -1;
            }
          return false;
        }
      read_fd[stream] = p[0];
      child_fds[stream] = p[1];
      set_nonblock_cloexec (p[0]);
    }
  return true;
}

static void
put_output (MvAgentBuf *out, uint32_t stream, const uint8_t *data, size_t len, uint64_t dropped)
{
  mv_agent_buf_begin (out, MV_AGENT_OUTPUT, 0);
  mv_agent_buf_put_u32 (out, MV_AGENT_F_STREAM, stream);
  mv_agent_buf_put (out, MV_AGENT_F_BYTES, data, len);
  if (dropped > 0)
    mv_agent_buf_put_u64 (out, MV_AGENT_F_DROPPED, dropped);
  mv_agent_buf_end (out);
}

static void
hold (uint32_t stream, const uint8_t *data, size_t len)
{
  uint32_t record_len = (uint32_t) len;

  if (held_len + RECORD_HEADER_BYTES + len > MV_AGENT_OUTPUT_PENDING_BYTES)
    {
      held_dropped += len;
      return;
    }
  if (!held)
    {
      held = malloc (MV_AGENT_OUTPUT_PENDING_BYTES);
      if (!held)
        abort ();
    }
  /* A drop before this record is told with it; one after the last is
   * told with what comes live (output_session_greeted). */
  if (held_dropped > 0)
    {
      /* Noted as an empty record of stream 0 that carries the count. */
      uint8_t note[RECORD_HEADER_BYTES + 8];

      if (held_len + sizeof note + RECORD_HEADER_BYTES + len > MV_AGENT_OUTPUT_PENDING_BYTES)
        {
          held_dropped += len;
          return;
        }
      note[0] = 0;
      record_len = 8;
      memcpy (note + 1, &record_len, 4);
      memcpy (note + RECORD_HEADER_BYTES, &held_dropped, 8);
      memcpy (held + held_len, note, sizeof note);
      held_len += sizeof note;
      held_dropped = 0;
      record_len = (uint32_t) len;
    }
  held[held_len] = (uint8_t) stream;
  memcpy (held + held_len + 1, &record_len, 4);
  memcpy (held + held_len + RECORD_HEADER_BYTES, data, len);
  held_len += RECORD_HEADER_BYTES + len;
}

/* What one read gave: to the console, and on to the hosts. */
static void
deliver (uint32_t stream, const uint8_t *data, size_t len)
{
  bool wanted = false;
  size_t left = len;
  const uint8_t *p = data;

  /* The console is where the workload's output always went. */
  while (left > 0)
    {
      ssize_t n = write (agent.log_fd, p, left);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      p += n;
      left -= (size_t) n;
    }
  for (size_t i = 0; i < agent.n_sessions; i++)
    {
      Session *s = agent.sessions[i];

      if (!s->want_output)
        continue;
      wanted = true;
      if (s->out.len >= AGENT_OUT_HIGH_BYTES)
        {
          s->output_dropped += len;
          continue;
        }
      put_output (&s->out, stream, data, len, s->output_dropped);
      s->output_dropped = 0;
    }
  if (!wanted)
    hold (stream, data, len);
}

void
output_session_greeted (Session *s)
{
  size_t at = 0;
  uint64_t dropped = 0;

  if (s->want_output)
    return;
  s->want_output = true;
  while (at < held_len)
    {
      uint8_t stream = held[at];
      uint32_t len;

      memcpy (&len, held + at + 1, 4);
      if (stream == 0)
        memcpy (&dropped, held + at + RECORD_HEADER_BYTES, 8);
      else
        {
          put_output (&s->out, stream, held + at + RECORD_HEADER_BYTES, len, dropped);
          dropped = 0;
        }
      at += RECORD_HEADER_BYTES + len;
    }
  s->output_dropped = dropped + held_dropped;
  held_len = 0;
  held_dropped = 0;
}

static bool
read_stream (int stream)
{
  uint8_t chunk[OUTPUT_CHUNK_BYTES];
  ssize_t n;

  if (read_fd[stream] < 0)
    return false;
  n = read (read_fd[stream], chunk, sizeof chunk);
  if (n < 0 && errno == EINTR)
    return true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return false;
  if (n <= 0)
    {
      /* The workload and whatever it left behind have closed it. */
      close (read_fd[stream]);
      read_fd[stream] = -1;
      return false;
    }
  deliver ((uint32_t) stream, chunk, (size_t) n);
  return true;
}

void
output_drain (void)
{
  bool more;

  /* Round by round, so that neither stream starves the other. */
  do
    {
      more = false;
      for (int stream = 1; stream <= 2; stream++)
        more |= read_stream (stream);
    }
  while (more);
  /* A drop no output followed is told on its own. */
  for (size_t i = 0; i < agent.n_sessions; i++)
    {
      Session *s = agent.sessions[i];

      if (s->want_output && s->output_dropped > 0 && s->out.len < AGENT_OUT_HIGH_BYTES)
        {
          put_output (&s->out, MV_AGENT_STREAM_STDOUT, NULL, 0, s->output_dropped);
          s->output_dropped = 0;
        }
    }
}

size_t
output_poll_add (struct pollfd *fds, size_t n)
{
  for (int stream = 1; stream <= 2; stream++)
    {
      read_pidx[stream] = -1;
      if (read_fd[stream] < 0)
        continue;
      read_pidx[stream] = (int) n;
      fds[n++] = (struct pollfd) { .fd = read_fd[stream], .events = POLLIN };
    }
  return n;
}

void
output_poll_dispatch (struct pollfd *fds)
{
  for (int stream = 1; stream <= 2; stream++)
    {
      /* One read each per round: a flood does not keep the loop from the
       * sessions. */
      if (read_pidx[stream] >= 0 && fds[read_pidx[stream]].revents)
        read_stream (stream);
    }
}
