/* What the guest is told about itself: the CONFIG and METADATA frames
 * built from a machine's spec (docs/agent-protocol.md). */
#include "agent.h"
#include "core/errors.h"
#include "core/host/storage.h"
#include "core/workload.h"

#include <json-glib/json-glib.h>
#include <string.h>

const char *
mv_agent_hostname (const MvSpec *spec)
{
  return spec->hostname && *spec->hostname ? spec->hostname : spec->name;
}

static void
put_metadata (MvAgentBuf *buf, const MvSpec *spec, const GPtrArray *console_keys)
{
  g_autoptr (JsonNode) document = mv_spec_metadata_document_with_keys (spec, console_keys);
  g_autofree char *json = json_to_string (document, FALSE);
  const char *hostname = mv_agent_hostname (spec);

  if (hostname)
    mv_agent_buf_put_str (buf, MV_AGENT_F_HOSTNAME, hostname);
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    mv_agent_buf_put_str (buf, MV_AGENT_F_SSH_KEY, spec->ssh_keys->pdata[i]);
  mv_agent_buf_put_str (buf, MV_AGENT_F_DOCUMENT, json);
}

static gint
compare_keys (gconstpointer a, gconstpointer b, gpointer data)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Sorted, so that the same spec gives the same frame. */
static void
put_env (MvAgentBuf *buf, GHashTable *env)
{
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array (env, NULL);
  guint n = g_hash_table_size (env);

  g_qsort_with_data (keys, n, sizeof *keys, compare_keys, NULL);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *pair = g_strconcat (keys[i], "=", g_hash_table_lookup (env, keys[i]),
                                           NULL);
      mv_agent_buf_put_str (buf, MV_AGENT_F_ENV, pair);
    }
}

static void
put_mounts (MvAgentBuf *buf, const MvSpec *spec)
{
  GPtrArray *mounts = spec->mounts;
  g_autoptr (GPtrArray) blocks = mv_spec_blocks (spec);

  for (guint i = 0; i < mounts->len; i++)
    {
      const MvMount *mount = mounts->pdata[i];
      gsize size = 0;
      gconstpointer content;

      mv_agent_buf_open (buf, MV_AGENT_F_MOUNT);
      mv_agent_buf_put_str (buf, MV_AGENT_F_MOUNT_TYPE, mv_mount_type_to_string (mount->type));
      mv_agent_buf_put_str (buf, MV_AGENT_F_TARGET, mount->target);
      if (mount->type == MV_MOUNT_VOLUME)
        {
          /* The volume's disk is where mv_spec_blocks() puts it. */
          g_autofree char *device = mv_block_device ((guint) mv_blocks_find (blocks, MV_BLOCK_VOLUME, i));

          mv_agent_buf_put_str (buf, MV_AGENT_F_SOURCE, device);
          mv_agent_buf_put_u32 (buf, MV_AGENT_F_READ_ONLY, mount->read_only ? 1 : 0);
          mv_agent_buf_close (buf);
          continue;
        }
      mv_agent_buf_put_u32 (buf, MV_AGENT_F_MODE, mount->mode);
      mv_agent_buf_put_u32 (buf, MV_AGENT_F_READ_ONLY, mount->read_only ? 1 : 0);
      if (mount->type == MV_MOUNT_FILE)
        {
          content = mount->content ? g_bytes_get_data (mount->content, &size) : NULL;
          mv_agent_buf_put (buf, MV_AGENT_F_CONTENT, content, size);
        }
      else if (mount->type == MV_MOUNT_TMPFS)
        mv_agent_buf_put_u64 (buf, MV_AGENT_F_SIZE, mount->size_bytes);
      else
        {
          /* The VMM's vhost-user-fs device of this mount carries the tag. */
          g_autofree char *tag = mv_spec_directory_tag (spec, i);
          mv_agent_buf_put_str (buf, MV_AGENT_F_SOURCE, tag);
        }
      mv_agent_buf_close (buf);
    }
}

static void
put_health_check (MvAgentBuf *buf, const MvHealthCheck *check)
{
  if (!check || check->disabled)
    return;
  mv_agent_buf_open (buf, MV_AGENT_F_HEALTH_CHECK);
  switch (check->kind)
    {
    case MV_HEALTH_CHECK_EXEC:
      for (char **arg = check->exec; arg && *arg; arg++)
        mv_agent_buf_put_str (buf, MV_AGENT_F_ARGV, *arg);
      break;
    case MV_HEALTH_CHECK_HTTP:
      mv_agent_buf_put_str (buf, MV_AGENT_F_PATH, check->http_path ? check->http_path : "/");
      G_GNUC_FALLTHROUGH;
    case MV_HEALTH_CHECK_TCP:
      mv_agent_buf_put_u32 (buf, MV_AGENT_F_PORT, check->port);
      break;
    }
  mv_agent_buf_put_u32 (buf, MV_AGENT_F_INTERVAL, check->interval_seconds);
  mv_agent_buf_put_u32 (buf, MV_AGENT_F_TIMEOUT, check->timeout_seconds);
  mv_agent_buf_put_u32 (buf, MV_AGENT_F_RETRIES, check->retries);
  mv_agent_buf_put_u32 (buf, MV_AGENT_F_START_PERIOD, check->start_period_seconds);
  mv_agent_buf_close (buf);
}

static GBytes *
finish (MvAgentBuf *buf, const char *what, GError **error)
{
  if (!mv_agent_buf_end (buf))
    {
      mv_agent_buf_clear (buf);
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: the guest's configuration is over the agent's frame limit of %u bytes",
                   what, MV_AGENT_FRAME_MAX_BYTES);
      return NULL;
    }
  /* The builder's memory is malloc's: hand it over as it is. */
  return g_bytes_new_with_free_func (buf->data, buf->len, free, buf->data);
}

/* Where the root is and where its changes go: the devices of the image
 * (or the disk marked root) and of the overlay disk, in the guest's order
 * of its disks. */
static void
put_root (MvAgentBuf *buf, const MvSpec *spec)
{
  g_autoptr (GPtrArray) blocks = mv_spec_blocks (spec);
  const MvDisk *root = mv_spec_root_disk (spec);
  gint at = spec->image ? mv_blocks_find (blocks, MV_BLOCK_IMAGE, 0) : -1;
  gint overlay = mv_blocks_find (blocks, MV_BLOCK_OVERLAY, 0);

  for (guint i = 0; at < 0 && root && i < spec->disks->len; i++)
    if (spec->disks->pdata[i] == root)
      at = mv_blocks_find (blocks, MV_BLOCK_DISK, i);
  if (at < 0)
    return;
  {
    g_autofree char *device = mv_block_device ((guint) at);
    mv_agent_buf_put_str (buf, MV_AGENT_F_ROOT, device);
  }
  if (overlay >= 0)
    {
      g_autofree char *device = mv_block_device ((guint) overlay);
      mv_agent_buf_put_str (buf, MV_AGENT_F_OVERLAY, device);
    }
}

static void
put_network (MvAgentBuf *buf, const MvNetworkAttachment *network)
{
  if (!network)
    return;
  mv_agent_buf_open (buf, MV_AGENT_F_NET);
  mv_agent_buf_put_str (buf, MV_AGENT_F_MAC, network->mac_address);
  mv_agent_buf_put_str (buf, MV_AGENT_F_ADDRESS, network->address);
  if (network->gateway)
    {
      mv_agent_buf_put_str (buf, MV_AGENT_F_GATEWAY, network->gateway);
      mv_agent_buf_put_str (buf, MV_AGENT_F_DNS, network->gateway);
    }
  if (network->mtu)
    mv_agent_buf_put_u32 (buf, MV_AGENT_F_MTU, network->mtu);
  mv_agent_buf_close (buf);
}

GBytes *
mv_agent_config_frame (const MvSpec *spec_in, const MvImageConfig *image,
                       const MvNetworkAttachment *network, MvAgentEnd end, GError **error)
{
  g_autoptr (MvSpec) spec = mv_spec_with_image_defaults (spec_in, image);
  MvAgentBuf buf;

  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&buf, MV_AGENT_F_INIT_MODE,
                        mv_init_mode_to_string (mv_spec_effective_init_mode (spec)));
  mv_agent_buf_put_str (&buf, MV_AGENT_F_END, end == MV_AGENT_END_REBOOT ? "reboot" : "poweroff");
  put_root (&buf, spec);
  put_metadata (&buf, spec, NULL);
  for (char **arg = spec->cmd; arg && *arg; arg++)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_ARGV, *arg);
  put_env (&buf, spec->env);
  if (spec->working_dir)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_WORKDIR, spec->working_dir);
  if (spec->user)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_USER, spec->user);
  put_mounts (&buf, spec);
  put_network (&buf, network);
  put_health_check (&buf, spec->health_check);
  return finish (&buf, "spec", error);
}

GBytes *
mv_agent_template_frame (const MvSpec *spec_in, const MvImageConfig *image, MvAgentEnd end,
                         GError **error)
{
  g_autoptr (MvSpec) spec = mv_spec_with_image_defaults (spec_in, image);
  MvAgentBuf buf;

  if (mv_spec_effective_init_mode (spec) != MV_INIT_MODE_EXEC)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "init_mode: a machine whose init is systemd has no warm template");
      return NULL;
    }
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&buf, MV_AGENT_F_INIT_MODE, "exec");
  mv_agent_buf_put_str (&buf, MV_AGENT_F_END, end == MV_AGENT_END_REBOOT ? "reboot" : "poweroff");
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_TEMPLATE, 1);
  put_root (&buf, spec);
  return finish (&buf, "spec", error);
}

GBytes *
mv_agent_metadata_frame (const MvSpec *spec, const GPtrArray *console_keys, GError **error)
{
  MvAgentBuf buf;

  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_METADATA, 0);
  put_metadata (&buf, spec, console_keys);
  return finish (&buf, "metadata", error);
}

GBytes *
mv_agent_reidentify_frame (const MvSpec *spec, const MvNetworkAttachment *network,
                           const guint8 *entropy, gsize entropy_len, GError **error)
{
  MvAgentBuf buf;

  g_return_val_if_fail (entropy_len >= MV_AGENT_ENTROPY_MIN_BYTES &&
                        entropy_len <= MV_AGENT_ENTROPY_MAX_BYTES, NULL);
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_REIDENTIFY, 0);
  /* Entropy first: the agent mixes it in before anything else. */
  mv_agent_buf_put (&buf, MV_AGENT_F_ENTROPY, entropy, entropy_len);
  put_metadata (&buf, spec, NULL);
  put_network (&buf, network);
  return finish (&buf, "identity", error);
}
