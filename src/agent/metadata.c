/* The guest's identity: hostname, SSH keys and the metadata document,
 * written under the state directory; and the CONFIG saved there for the
 * agent that runs as systemd's service. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool
state_path (char *out, size_t size, const char *name)
{
  return (size_t) snprintf (out, size, "%s/%s", agent.state_dir, name) < size;
}

static bool
write_state_file (const char *name, const void *data, size_t len, mode_t mode,
                  char *error, size_t size)
{
  char path[4096];

  if (mkdir (agent.state_dir, 0755) < 0 && errno != EEXIST)
    {
      snprintf (error, size, "%s: %s", agent.state_dir, strerror (errno));
      return false;
    }
  if (!state_path (path, sizeof path, name) || !write_file_atomic (path, data, len, mode))
    {
      snprintf (error, size, "%s/%s: %s", agent.state_dir, name, strerror (errno));
      return false;
    }
  return true;
}

static uint8_t *read_whole (const char *path, size_t max, size_t *len);

/* Whether the state file @name holds @data already. */
static bool
state_file_holds (const char *name, const void *data, size_t len)
{
  char path[4096];
  uint8_t *have;
  size_t have_len = 0;
  bool same;

  if (!state_path (path, sizeof path, name))
    return false;
  /* One byte more than @data: a longer file does not fit, and differs. */
  have = read_whole (path, len + 1, &have_len);
  same = have && have_len == len && memcmp (have, data, len) == 0;
  free (have);
  return same;
}

/* Writes the state file @name unless it holds @data already; *@changed
 * gets @bit if it was written. */
static bool
update_state_file (const char *name, const void *data, size_t len, mode_t mode,
                   unsigned *changed, unsigned bit, char *error, size_t size)
{
  if (state_file_holds (name, data, len))
    return true;
  if (!write_state_file (name, data, len, mode, error, size))
    return false;
  if (changed)
    *changed |= bit;
  return true;
}

static bool
hostname_is (const char *hostname)
{
  char have[HOST_NAME_MAX + 1] = "";

  if (agent.mode == MODE_TEST)
    return true;   /* the test mode leaves the host's name alone */
  return gethostname (have, sizeof have) == 0 && strcmp (have, hostname) == 0;
}

bool
metadata_apply (const uint8_t *data, size_t len, unsigned *changed, char *error, size_t size)
{
  MvAgentFields fields;
  MvAgentField f;
  char hostname[256] = "";
  const uint8_t *document = (const uint8_t *) "{}";
  size_t document_len = 2;
  uint8_t *keys = NULL;
  size_t keys_len = 0;
  bool have_hostname = false, ok = true;
  unsigned before = changed ? *changed : 0;

  mv_agent_fields_init (&fields, data, len);
  while (ok && mv_agent_fields_next (&fields, &f) > 0)
    switch (f.tag)
      {
      case MV_AGENT_F_HOSTNAME:
        if (!mv_agent_field_str (&f, hostname, 65) || !hostname[0])
          {
            snprintf (error, size, "HOSTNAME: empty, over 64 bytes, or with a NUL byte");
            ok = false;
          }
        have_hostname = true;
        break;
      case MV_AGENT_F_SSH_KEY:
        /* One key per line: a key must not bring lines of its own. */
        if (memchr (f.value, '\n', f.len) || memchr (f.value, '\r', f.len) ||
            memchr (f.value, '\0', f.len))
          {
            snprintf (error, size, "SSH_KEY: a key holding a line break or a NUL byte");
            ok = false;
            break;
          }
        {
          uint8_t *grown = realloc (keys, keys_len + f.len + 1);

          if (!grown)
            abort ();
          keys = grown;
          memcpy (keys + keys_len, f.value, f.len);
          keys_len += f.len;
          keys[keys_len++] = '\n';
        }
        break;
      case MV_AGENT_F_DOCUMENT:
        document = f.value;
        document_len = f.len;
        break;
      default:
        break;
      }
  /* What the guest has already is left as it is: a guest restored from
   * its own frozen state is told what it knows. */
  if (ok && have_hostname)
    {
      char line[80];
      int n = snprintf (line, sizeof line, "%s\n", hostname);

      if (!hostname_is (hostname))
        {
          if (sethostname (hostname, strlen (hostname)) < 0)
            {
              snprintf (error, size, "sethostname %s: %s", hostname, strerror (errno));
              ok = false;
            }
          else if (changed)
            *changed |= CHANGED_HOSTNAME;
        }
      ok = ok && update_state_file ("hostname", line, (size_t) n, 0644, changed,
                                    CHANGED_HOSTNAME, error, size);
    }
  ok = ok && update_state_file ("ssh-authorized-keys", keys ? keys : (const uint8_t *) "",
                                keys_len, 0644, changed, CHANGED_METADATA, error, size);
  ok = ok && update_state_file ("metadata.json", document, document_len, 0600, changed,
                                CHANGED_METADATA, error, size);
  free (keys);
  if (ok && (!changed || *changed != before))
    agent_log ("metadata written to %s", agent.state_dir);
  return ok;
}

char *
metadata_document (void)
{
  char path[4096];
  size_t len = 0;
  uint8_t *data;

  if (!state_path (path, sizeof path, "metadata.json") ||
      !(data = read_whole (path, MV_AGENT_FRAME_MAX_BYTES, &len)))
    return NULL;
  /* read_whole() read less than its maximum: there is room. */
  data[len] = '\0';
  return (char *) data;
}

bool
state_save (const Config *config)
{
  char error[256];

  if (!write_state_file ("config", config->raw, config->raw_len, 0600, error, sizeof error))
    {
      agent_log ("%s", error);
      return false;
    }
  return true;
}

static uint8_t *
read_whole (const char *path, size_t max, size_t *len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  uint8_t *data;
  size_t have = 0;

  if (fd < 0)
    return NULL;
  data = malloc (max);
  if (!data)
    abort ();
  for (;;)
    {
      ssize_t n = read (fd, data + have, max - have);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 || (n > 0 && have + (size_t) n == max))
        {
          free (data);
          close (fd);
          return NULL;
        }
      if (n == 0)
        break;
      have += (size_t) n;
    }
  close (fd);
  *len = have;
  return data;
}

bool
state_load (Config *config)
{
  char path[4096], error[256];
  uint8_t *data;
  size_t len = 0;
  bool ok;

  if (!state_path (path, sizeof path, "config"))
    return false;
  data = read_whole (path, MV_AGENT_FRAME_MAX_BYTES, &len);
  if (!data)
    return false;
  ok = config_parse (data, len, config, error, sizeof error);
  if (!ok)
    agent_log ("%s: %s", path, error);
  free (data);
  return ok;
}

int
authorized_keys_print (const char *state_dir)
{
  char path[4096];
  uint8_t *data;
  size_t len = 0, off = 0;

  if ((size_t) snprintf (path, sizeof path, "%s/ssh-authorized-keys", state_dir) >= sizeof path)
    return 1;
  data = read_whole (path, 1024 * 1024, &len);
  if (!data)
    return errno == ENOENT ? 0 : 1;
  while (off < len)
    {
      ssize_t n = write (STDOUT_FILENO, data + off, len - off);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          free (data);
          return 1;
        }
      off += (size_t) n;
    }
  free (data);
  return 0;
}
