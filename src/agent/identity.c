/* REIDENTIFY: a guest restored from a frozen state, maybe another
 * machine's, takes the identity of the machine it now is (hostname,
 * interface, metadata) and mixes the host's entropy into its kernel's
 * random number generator, which then reseeds: every copy of one frozen
 * guest would otherwise go on with the same random state. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG _IO ('R', 0x07)   /* Linux 4.17 */
#endif

static const struct {
  unsigned    bit;
  const char *name;
} changed_names[] = {
  { CHANGED_ENTROPY, "entropy" },
  { CHANGED_HOSTNAME, "hostname" },
  { CHANGED_METADATA, "metadata" },
  { CHANGED_MAC, "mac" },
  { CHANGED_MTU, "mtu" },
  { CHANGED_ADDRESS, "address" },
  { CHANGED_ROUTE, "route" },
  { CHANGED_DNS, "dns" },
};

/* Credits the bytes in full: the host's getrandom() is a CSPRNG's. */
static bool
entropy_mix (const uint8_t *bytes, size_t len, unsigned *changed, char *error, size_t size)
{
  struct rand_pool_info *info;
  int fd;
  bool ok;

  if (len < MV_AGENT_ENTROPY_MIN_BYTES || len > MV_AGENT_ENTROPY_MAX_BYTES)
    {
      snprintf (error, size, "ENTROPY: %zu bytes, not %u to %u", len, MV_AGENT_ENTROPY_MIN_BYTES,
                MV_AGENT_ENTROPY_MAX_BYTES);
      return false;
    }
  if (agent.mode == MODE_TEST)
    return true;   /* the test mode leaves the host's kernel alone */
  fd = open ("/dev/urandom", O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    {
      snprintf (error, size, "entropy: /dev/urandom: %s", strerror (errno));
      return false;
    }
  info = calloc (1, sizeof *info + len);
  if (!info)
    abort ();
  info->entropy_count = (int) (len * 8);
  info->buf_size = (int) len;
  memcpy (info->buf, bytes, len);
  ok = ioctl (fd, RNDADDENTROPY, info) == 0;
  if (!ok)
    snprintf (error, size, "entropy: RNDADDENTROPY: %s", strerror (errno));
  /* What is mixed in counts for the output only once the generator
   * takes a new key from the pool. */
  if (ok && ioctl (fd, RNDRESEEDCRNG) < 0)
    {
      snprintf (error, size, "entropy: RNDRESEEDCRNG: %s", strerror (errno));
      ok = false;
    }
  explicit_bzero (info, sizeof *info + len);
  free (info);
  close (fd);
  if (ok)
    *changed |= CHANGED_ENTROPY;
  return ok;
}

/* Keeps the first failure's message; the parts after it are still
 * applied, as they do not depend on it. */
static void
note_failure (char *message, size_t size, const char *part)
{
  size_t len = strlen (message);

  if (len == 0)
    snprintf (message, size, "%s", part);
  else if (len + 2 < size)
    snprintf (message + len, size - len, "; %s", part);
}

static void
send_reidentified (Session *s, unsigned changed, const char *message)
{
  mv_agent_buf_begin (&s->out, MV_AGENT_REIDENTIFIED, 0);
  for (size_t i = 0; i < sizeof changed_names / sizeof changed_names[0]; i++)
    if (changed & changed_names[i].bit)
      mv_agent_buf_put_str (&s->out, MV_AGENT_F_CHANGED, changed_names[i].name);
  if (message[0])
    mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, message);
  mv_agent_buf_end (&s->out);
}

void
identity_apply (Session *s, const MvAgentFrame *frame)
{
  char message[1024] = "", error[512];
  unsigned changed = 0;
  MvAgentField f;

  if (mv_agent_frame_find (frame, MV_AGENT_F_ENTROPY, &f) &&
      !entropy_mix (f.value, f.len, &changed, error, sizeof error))
    note_failure (message, sizeof message, error);
  if (!metadata_apply (frame->payload, frame->payload_len, &changed, error, sizeof error))
    note_failure (message, sizeof message, error);
  if (mv_agent_frame_find (frame, MV_AGENT_F_NET, &f))
    {
      NetConfig net = { 0 };

      if (!config_parse_net (&f, &net, error, sizeof error) ||
          !network_reidentify (&net, &agent.config.net, &changed, error, sizeof error))
        {
          note_failure (message, sizeof message, error);
          net_config_clear (&net);
        }
      else
        {
          /* The next REIDENTIFY finds the interface by what it is now. */
          net_config_clear (&agent.config.net);
          agent.config.net = net;
        }
    }
  {
    char list[128] = "";
    size_t len = 0;

    for (size_t i = 0; i < sizeof changed_names / sizeof changed_names[0]; i++)
      if ((changed & changed_names[i].bit) && len < sizeof list)
        len += (size_t) snprintf (list + len, sizeof list - len, "%s%s", len ? " " : "",
                                  changed_names[i].name);
    agent_log ("REIDENTIFY: changed %s%s%s", len ? list : "nothing", message[0] ? "; failed: " : "",
               message);
  }
  send_reidentified (s, changed, message);
}
