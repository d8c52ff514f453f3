/* A machine's disks for a start (core/host/storage.h prepare_disks): the
 * image it is pinned to, its overlay disk, the spec's disks; and the
 * host's images (core/host/images.h) over the image store. */
#include "storage-private.h"
#include "tool.h"
#include "util/fault.h"
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- images ---- */

static gboolean
images_check (MvImages *images, const char *reference, GError **error)
{
  MvImageStore *store = images->data;
  g_autoptr (MvImageRef) ref = mv_image_ref_parse (reference, mv_image_store_insecure_hosts (store),
                                                   error);
  return ref != NULL;
}

static char *
images_ensure (MvImages *images, const char *reference, MvPullPolicy policy,
               MvPullProgressFunc progress, gpointer progress_data, GCancellable *cancellable,
               MvImageConfig **config, GError **error)
{
  MvImageStore *store = images->data;
  g_autoptr (MvImage) image = NULL;
  g_autoptr (GError) local = NULL;

  if (policy != MV_PULL_ALWAYS)
    {
      image = mv_image_store_find (store, reference, &local);
      if (image == NULL && (policy == MV_PULL_NEVER ||
                            !g_error_matches (local, MV_ERROR, MV_ERROR_NOT_FOUND)))
        {
          if (policy == MV_PULL_NEVER && g_error_matches (local, MV_ERROR, MV_ERROR_NOT_FOUND))
            g_prefix_error (&local, "pull policy never: ");
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
    }
  if (image == NULL)
    image = mv_image_store_pull_with_progress (store, reference, progress, progress_data,
                                               cancellable, error);
  if (image == NULL)
    return NULL;
  if (config != NULL)
    *config = mv_image_config_copy (image->config);
  return g_strdup (image->digest);
}

MvImages *
mv_host_images_new (MvImageStore *store)
{
  MvImages *images = g_new0 (MvImages, 1);

  images->data = store;
  images->check = images_check;
  images->ensure = images_ensure;
  return images;
}

void
mv_host_images_free (MvImages *images)
{
  g_free (images);
}

/* ---- the image a machine is pinned to ---- */

/* The cached image @spec is pinned to; pulled again if the host no
 * longer has it: a registry's by its digest, another source's by its
 * reference, which must still name that digest. */
static MvImage *
pinned_image (MvImageStore *store, const MvSpec *spec, GCancellable *cancellable, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (MvImageRef) ref = NULL;
  g_autofree char *pinned = NULL;
  MvImage *image;

  if (spec->image_digest == NULL)
    return mv_error_set (error, MV_ERROR_FAILED, "image: no digest was pinned at create"), NULL;
  image = mv_image_store_lookup (store, spec->image_digest, &local);
  if (image != NULL || !g_error_matches (local, MV_ERROR, MV_ERROR_NOT_FOUND))
    return image ? image : (g_propagate_error (error, g_steal_pointer (&local)), NULL);

  ref = mv_image_ref_parse (spec->image, mv_image_store_insecure_hosts (store), error);
  if (ref == NULL)
    return NULL;
  pinned = ref->kind == MV_IMAGE_REF_REGISTRY
           ? g_strdup_printf ("%s/%s@%s", ref->host, ref->repository, spec->image_digest)
           : g_strdup (spec->image);
  image = mv_image_store_pull (store, pinned, cancellable, error);
  if (image != NULL && g_strcmp0 (image->digest, spec->image_digest) != 0)
    {
      mv_error_set (error, MV_ERROR_NOT_FOUND, "image: %s names %s now, not %s, which the "
                    "machine is pinned to and this host no longer has", spec->image,
                    image->digest, spec->image_digest);
      g_clear_pointer (&image, mv_image_free);
    }
  return image;
}

/* ---- the overlay disk ---- */


static gboolean
format_overlay (const char *path, guint64 bytes, GCancellable *cancellable, GError **error)
{
  const char *argv[] = { "mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-L", "microvmd-rw",
                         path, NULL };
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);

  if (fd < 0)
    return mv_set_errno_error (error, errno, "disk_bytes: cannot create %s", path);
  /* Sparse: the guest's writes are what it takes of the host's disk. */
  if (ftruncate (fd, (off_t) bytes) < 0)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "disk_bytes: cannot size %s", path);
    }
  close (fd);
  return mv_run_tool ("disk_bytes", argv, NULL, cancellable, NULL, error);
}

/* e2fsck -fy: resize2fs grows only a file system checked since it was
 * last mounted, and a guest that powered off left its journal to be
 * replayed. Exit codes 1 and 2 say it fixed what it found. */
static gboolean
check_overlay (const char *path, GCancellable *cancellable, GError **error)
{
  const char *argv[] = { "e2fsck", "-f", "-y", path, NULL };
  g_autoptr (GSubprocess) proc = NULL;
  g_autoptr (GError) local = NULL;
  g_autofree char *out = NULL;

  proc = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE,
                            &local);
  if (proc == NULL)
    return mv_error_set (error, MV_ERROR_FAILED, "disk_bytes: cannot run e2fsck: %s",
                         local->message);
  if (!g_subprocess_communicate_utf8 (proc, NULL, cancellable, &out, NULL, error))
    return FALSE;
  if (!g_subprocess_get_if_exited (proc) || g_subprocess_get_exit_status (proc) > 2)
    return mv_error_set (error, MV_ERROR_FAILED, "disk_bytes: e2fsck found %s damaged beyond "
                         "what it repairs: %s", path, out ? g_strstrip (out) : "");
  return TRUE;
}

static gboolean
grow_overlay (const char *path, guint64 bytes, GCancellable *cancellable, GError **error)
{
  g_autofree char *size = g_strdup_printf ("%" G_GUINT64_FORMAT "K", bytes / 1024);
  const char *argv[] = { "resize2fs", path, size, NULL };

  if (!check_overlay (path, cancellable, error))
    return FALSE;
  if (truncate (path, (off_t) bytes) < 0)
    return mv_set_errno_error (error, errno, "disk_bytes: cannot grow %s", path);
  return mv_run_tool ("disk_bytes", argv, NULL, cancellable, NULL, error);
}

/* The machine's overlay disk, made whole under another name and renamed
 * into place at its first start, grown at a start that asks for more. */
static char *
ready_overlay (const char *path_in, const char *partial, const MvRuntimeRequest *req,
               guint64 bytes, GError **error)
{
  g_autofree char *path = g_strdup (path_in);
  GStatBuf st;

  if (g_lstat (path, &st) == 0)
    {
      if (!S_ISREG (st.st_mode))
        return mv_error_set (error, MV_ERROR_FAILED, "disk_bytes: %s is not a file", path), NULL;
      if ((guint64) st.st_size < bytes && !grow_overlay (path, bytes, req->cancellable, error))
        return NULL;
      mv_fault_point ("overlay", "grown");
      return g_steal_pointer (&path);
    }
  if (errno != ENOENT)
    return mv_set_errno_error (error, errno, "disk_bytes: %s", path), NULL;
  if (!format_overlay (partial, bytes, req->cancellable, error))
    {
      g_unlink (partial);
      return NULL;
    }
  mv_fault_point ("overlay", "formatted");
  if (!mv_rename_durably (partial, path, error))
    {
      g_unlink (partial);
      return NULL;
    }
  return g_steal_pointer (&path);
}

/* The disks of @req's guest, its overlay disk at @overlay. */
static GPtrArray *
prepare_disks (MvStorage *storage, const MvRuntimeRequest *req, const char *overlay,
               const char *partial, GError **error)
{
  MvStorageData *data = storage->data;
  g_autoptr (GPtrArray) blocks = mv_spec_blocks (req->spec);

  /* What a start that crashed while it made the disk left. */
  if (g_unlink (partial) < 0 && errno != ENOENT)
    return mv_set_errno_error (error, errno, "Cannot remove %s", partial), NULL;

  for (guint i = 0; i < blocks->len; i++)
    {
      MvBlock *block = blocks->pdata[i];

      switch (block->role)
        {
        case MV_BLOCK_IMAGE:
          {
            g_autoptr (MvImage) image = pinned_image (data->images, req->spec, req->cancellable,
                                                      error);
            if (image == NULL)
              return NULL;
            block->path = g_strdup (image->rootfs);
          }
          break;
        case MV_BLOCK_OVERLAY:
          block->path = ready_overlay (overlay, partial, req, mv_spec_overlay_bytes (req->spec),
                                       error);
          if (block->path == NULL)
            return NULL;
          break;
        case MV_BLOCK_DISK:
          break;
        case MV_BLOCK_VOLUME:
          {
            const MvMount *mount = g_ptr_array_index (req->spec->mounts, block->index);
            g_autoptr (GError) local = NULL;

            /* The daemon's own file: not held to [paths] allowed-directories. */
            if (data->volumes == NULL)
              return mv_error_set (error, MV_ERROR_UNSUPPORTED, "mounts[%u].source: this host "
                                   "keeps no volumes", block->index), NULL;
            block->path = data->volumes->disk_path (data->volumes, mount->source, &local);
            if (block->path == NULL)
              return mv_error_set (error, MV_ERROR_NOT_FOUND, "mounts[%u].source: %s",
                                   block->index, local->message), NULL;
          }
          break;
        }
    }
  return g_steal_pointer (&blocks);
}

GPtrArray *
mv_storage_prepare_disks (MvStorage *storage, const MvRuntimeRequest *req, GError **error)
{
  g_autofree char *overlay = mv_storage_path (storage, req->machine_id, MV_OVERLAY_NAME);
  g_autofree char *partial = mv_storage_path (storage, req->machine_id, MV_OVERLAY_PARTIAL_NAME);

  return prepare_disks (storage, req, overlay, partial, error);
}

GPtrArray *
mv_storage_prepare_template_disks (MvStorage *storage, const MvRuntimeRequest *req,
                                   const char *overlay, GError **error)
{
  g_autofree char *partial = g_strconcat (overlay, ".partial", NULL);

  return prepare_disks (storage, req, overlay, partial, error);
}

gboolean
mv_storage_remove_disks (MvStorage *storage, const char *machine_id, GError **error)
{
  g_autofree char *path = mv_storage_path (storage, machine_id, MV_OVERLAY_NAME);
  g_autofree char *partial = mv_storage_path (storage, machine_id, MV_OVERLAY_PARTIAL_NAME);

  if (g_unlink (partial) < 0 && errno != ENOENT)
    return mv_set_errno_error (error, errno, "Cannot remove %s", partial);
  if (g_unlink (path) < 0 && errno != ENOENT)
    return mv_set_errno_error (error, errno, "Cannot remove %s", path);
  return TRUE;
}
