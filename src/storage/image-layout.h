/* Reading an OCI image layout (index.json, blobs/sha256/...) that skopeo
 * wrote, every blob read checked against the digest that names it, so a
 * layout changed on disk after the copy is refused. Blocks. */
#pragma once
#include <glib.h>

#define MV_IMAGE_MANIFEST_MAX  (4 * 1024 * 1024)
#define MV_IMAGE_LAYERS_MAX    256

typedef struct {
  char      *manifest_digest;   /* "sha256:<hex>" */
  GBytes    *manifest;          /* the manifest as stored */
  GBytes    *config;            /* the image config as stored */
  GPtrArray *layers;            /* paths of the layer blobs, base first; each already verified */
  guint64    layers_size;       /* their size as the manifest says */
} MvOciImage;

/* Reads the image tagged @ref_name in the layout @dir; an index entry may
 * name an image index, from which the linux/amd64 image is taken
 * (MV_ERROR_UNSUPPORTED when it has none). A blob whose sha256 is not the
 * one its descriptor names is MV_ERROR_FAILED naming the digest. */
MvOciImage *mv_oci_layout_read (const char *dir, const char *ref_name, GError **error);
void        mv_oci_image_free (MvOciImage *image);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvOciImage, mv_oci_image_free)

/* From an image index or manifest as a registry serves it (@raw), the
 * digest of the linux/amd64 image manifest: @raw's own digest for a
 * manifest, the entry's for an index (MV_ERROR_UNSUPPORTED without one). */
char *mv_oci_image_digest_of (GBytes *raw, GError **error);

/* "sha256:<hex>" of @path's contents. */
char *mv_sha256_file (const char *path, GError **error);
