/* The image store: container images pulled, verified, unpacked into an
 * ext4 disk image and cached by digest under <state>/images/ (docs/images.md).
 * Functions that block say so and are meant for worker threads; the store
 * itself is thread-safe, and concurrent pulls of one reference share one
 * pull. Errors are MV_ERROR: NOT_FOUND (unknown image or tag),
 * UNAVAILABLE (the registry cannot be reached), INVALID_ARGUMENT (a
 * malformed reference), FAILED (a blob that does not match its digest, or
 * a tool that failed), UNSUPPORTED (no linux/amd64 image),
 * RESOURCE_EXHAUSTED (over the size limit). */
#pragma once
#include "core/image-config.h"
#include "core/image-ref.h"
#include "core/host/images.h"

#include <gio/gio.h>

#define MV_IMAGES_DIR_NAME        "images"
#define MV_IMAGE_ROOTFS_NAME      "rootfs.ext4"
#define MV_IMAGE_CONFIG_NAME      "config.json"
#define MV_IMAGE_MANIFEST_NAME    "manifest.json"
#define MV_IMAGE_RECORD_NAME      "image.json"
#define MV_IMAGE_RECORD_FORMAT    1
#define MV_IMAGE_STAGING_PREFIX   ".staging-"
#define MV_IMAGE_DEFAULT_MAX_SIZE (G_GUINT64_CONSTANT (8) << 30)
/* References an image's record keeps, the latest ones (archive URLs
 * without their query strings). */
#define MV_IMAGE_REFERENCES_MAX   64

typedef struct _MvImageStore MvImageStore;

typedef struct {
  char          *digest;       /* "sha256:<hex>": the manifest's, as the source names it */
  char          *dir;          /* <state>/images/<hex> */
  char          *rootfs;       /* dir/rootfs.ext4, read-only */
  char         **references;   /* the references it was pulled by */
  guint64        size;         /* bytes the layers unpacked to */
  guint64        disk_size;    /* apparent size of rootfs.ext4 */
  char          *created;      /* the image config's, RFC 3339, or NULL */
  gint64         pulled;       /* Unix time, seconds */
  MvImageConfig *config;
} MvImage;

void mv_image_free (MvImage *image);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvImage, mv_image_free)

typedef struct {
  const char * const *insecure_hosts;  /* registries spoken to in plain HTTP beside loopback */
  guint64             max_size;        /* unpacked bytes; 0 is MV_IMAGE_DEFAULT_MAX_SIZE */
} MvImageStoreOptions;

/* Creates <@state_dir>/images if needed. Cheap otherwise. */
MvImageStore *mv_image_store_new (const char *state_dir, const MvImageStoreOptions *options, GError **error);
void          mv_image_store_free (MvImageStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvImageStore, mv_image_store_free)

/* Blocks: the image @reference names, pulled and built if its digest is
 * not cached yet. Only resolving the reference to a digest touches the
 * source when it is. */
MvImage      *mv_image_store_pull (MvImageStore *store, const char *reference,
                                   GCancellable *cancellable, GError **error);
/* The same, telling @progress (may be NULL) how much of the pull is
 * done as it goes. */
MvImage      *mv_image_store_pull_with_progress (MvImageStore *store, const char *reference,
                                                 MvPullProgressFunc progress, gpointer progress_data,
                                                 GCancellable *cancellable, GError **error);
/* The registries spoken to in plain HTTP beside loopback. */
const char * const *mv_image_store_insecure_hosts (MvImageStore *store);
/* Blocks (reads a few small files): the cached image @digest, or NOT_FOUND. */
MvImage      *mv_image_store_lookup (MvImageStore *store, const char *digest, GError **error);
/* Blocks (reads the cache's records): the image last pulled by
 * @reference, or the one its digest names; NOT_FOUND if the host has
 * none. What pull policies "missing" and "never" start from. */
MvImage      *mv_image_store_find (MvImageStore *store, const char *reference, GError **error);
/* Blocks: every cached image, as MvImage. */
GPtrArray    *mv_image_store_list (MvImageStore *store, GError **error);
/* Blocks: removes the cached image @digest (NOT_FOUND if none). Whether
 * a machine still uses it is the caller's to decide. */
gboolean      mv_image_store_remove (MvImageStore *store, const char *digest, GError **error);
/* Blocks: removes every cached image whose digest is not in @keep;
 * *@removed (may be NULL) counts them. */
gboolean      mv_image_store_prune (MvImageStore *store, const char * const *keep,
                                    guint *removed, GError **error);
/* Blocks: deletes what a crashed or failed pull or remove left behind. */
gboolean      mv_image_store_sweep (MvImageStore *store, GError **error);
/* How many pulls fetched and built an image (not served from the cache). */
guint         mv_image_store_get_build_count (MvImageStore *store);
