/* A guest's disks in the order it sees them. Pure. */
#include "storage.h"
#include "images.h"

void
mv_block_free (MvBlock *block)
{
  if (block == NULL)
    return;
  g_free (block->path);
  g_free (block);
}

static void
add (GPtrArray *blocks, MvBlockRole role, guint index, const char *path, gboolean read_only)
{
  MvBlock *block = g_new0 (MvBlock, 1);

  block->role = role;
  block->index = index;
  block->path = g_strdup (path);
  block->read_only = read_only;
  g_ptr_array_add (blocks, block);
}

GPtrArray *
mv_spec_blocks (const MvSpec *spec)
{
  GPtrArray *blocks = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_block_free);

  g_return_val_if_fail (spec != NULL, blocks);

  if (spec->image != NULL)
    add (blocks, MV_BLOCK_IMAGE, 0, NULL, TRUE);
  if (mv_spec_overlay_bytes (spec) > 0)
    add (blocks, MV_BLOCK_OVERLAY, 0, NULL, FALSE);
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);

      add (blocks, MV_BLOCK_DISK, i, disk->path, disk->read_only);
    }
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = g_ptr_array_index (spec->mounts, i);

      if (mount->type == MV_MOUNT_VOLUME)
        add (blocks, MV_BLOCK_VOLUME, i, NULL, mount->read_only);
    }
  return blocks;
}

char *
mv_block_device (guint position)
{
  g_return_val_if_fail (position < MV_BLOCK_DEVICES_MAX, NULL);
  return g_strdup_printf ("/dev/vd%c", 'a' + position);
}

gint
mv_blocks_find (GPtrArray *blocks, MvBlockRole role, guint index)
{
  for (guint i = 0; i < blocks->len; i++)
    {
      const MvBlock *block = g_ptr_array_index (blocks, i);

      if (block->role == role &&
          ((role != MV_BLOCK_DISK && role != MV_BLOCK_VOLUME) || block->index == index))
        return (gint) i;
    }
  return -1;
}

/* ---- pull policies (images.h) ---- */

static const char *const pull_policy_names[] = { "missing", "always", "never" };

gboolean
mv_pull_policy_from_string (const char *text, MvPullPolicy *policy)
{
  if (text == NULL || *text == '\0')
    {
      *policy = MV_PULL_MISSING;
      return TRUE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (pull_policy_names); i++)
    if (g_strcmp0 (text, pull_policy_names[i]) == 0)
      {
        *policy = (MvPullPolicy) i;
        return TRUE;
      }
  return FALSE;
}

const char *
mv_pull_policy_to_string (MvPullPolicy policy)
{
  g_return_val_if_fail ((guint) policy < G_N_ELEMENTS (pull_policy_names), NULL);
  return pull_policy_names[policy];
}
