#include "image-layout.h"
#include "core/image-ref.h"
#include "core/errors.h"
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#define MT_OCI_INDEX     "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST   "application/vnd.docker.distribution.manifest.list.v2+json"
#define REF_NAME         "org.opencontainers.image.ref.name"

/* json-glib before 1.8 has no _with_default for these. */
static JsonArray *
member_array (JsonObject *obj, const char *name, JsonArray *fallback)
{
  JsonNode *node = json_object_get_member (obj, name);

  return node && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : fallback;
}

static JsonObject *
member_object (JsonObject *obj, const char *name, JsonObject *fallback)
{
  JsonNode *node = json_object_get_member (obj, name);

  return node && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : fallback;
}

void
mv_oci_image_free (MvOciImage *image)
{
  if (image == NULL)
    return;
  g_free (image->manifest_digest);
  g_clear_pointer (&image->manifest, g_bytes_unref);
  g_clear_pointer (&image->config, g_bytes_unref);
  g_clear_pointer (&image->layers, g_ptr_array_unref);
  g_free (image);
}

char *
mv_sha256_file (const char *path, GError **error)
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree guchar *buf = g_malloc (256 * 1024);
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;

  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot open %s", path), NULL;
  while ((n = read (fd, buf, 256 * 1024)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;

          close (fd);
          return mv_set_errno_error (error, errsv, "Cannot read %s", path), NULL;
        }
      g_checksum_update (sum, buf, n);
    }
  close (fd);
  return g_strconcat ("sha256:", g_checksum_get_string (sum), NULL);
}

static char *
sha256_bytes (GBytes *bytes)
{
  g_autofree char *hex = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);

  return g_strconcat ("sha256:", hex, NULL);
}

static gboolean
tampered (GError **error, const char *digest, const char *got)
{
  return mv_error_set (error, MV_ERROR_FAILED, "image: the blob %s does not match its digest (it hashes to %s)",
                       digest, got);
}

static char *
blob_path (const char *dir, const char *digest)
{
  return g_build_filename (dir, "blobs", "sha256", digest + strlen ("sha256:"), NULL);
}

/* A small blob (manifest, index, config) read whole and verified. */
static GBytes *
read_small_blob (const char *dir, const char *digest, GError **error)
{
  g_autofree char *path = blob_path (dir, digest);
  g_autofree char *data = NULL;
  g_autofree char *got = NULL;
  g_autoptr (GBytes) bytes = NULL;
  gsize len;

  if (!mv_file_read_bounded (path, MV_IMAGE_MANIFEST_MAX, digest, &data, &len, error))
    return NULL;
  bytes = g_bytes_new_take (g_steal_pointer (&data), len);
  got = sha256_bytes (bytes);
  if (!g_str_equal (got, digest))
    return tampered (error, digest, got), NULL;
  return g_steal_pointer (&bytes);
}

static JsonObject *
parse_object (JsonParser *parser, GBytes *bytes, const char *what, GError **error)
{
  g_autoptr (GError) local = NULL;
  JsonNode *root;

  if (!json_parser_load_from_data (parser, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), &local))
    return mv_error_set (error, MV_ERROR_FAILED, "image: %s: %s", what, local->message), NULL;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return mv_error_set (error, MV_ERROR_FAILED, "image: %s is not a JSON object", what), NULL;
  return json_node_get_object (root);
}

/* A descriptor's digest, checked, or NULL. */
static const char *
descriptor_digest (JsonObject *desc, const char *what, GError **error)
{
  const char *digest = json_object_get_string_member_with_default (desc, "digest", NULL);

  if (!mv_image_digest_is_valid (digest))
    return mv_error_set (error, MV_ERROR_FAILED, "image: %s has no sha256 digest", what), NULL;
  return digest;
}

static gboolean
is_index (JsonObject *obj, JsonObject *desc)
{
  const char *mt = json_object_get_string_member_with_default (desc ? desc : obj, "mediaType", "");

  return g_str_equal (mt, MT_OCI_INDEX) || g_str_equal (mt, MT_DOCKER_LIST) ||
         (desc == NULL && json_object_has_member (obj, "manifests") && !json_object_has_member (obj, "layers"));
}

/* The linux/amd64 entry of an index's "manifests", or NULL. */
static JsonObject *
amd64_entry (JsonObject *index, GError **error)
{
  JsonArray *list = member_array (index, "manifests", NULL);

  for (guint i = 0; list && i < json_array_get_length (list); i++)
    {
      JsonObject *m = json_array_get_object_element (list, i);
      JsonObject *platform = m ? member_object (m, "platform", NULL) : NULL;

      if (platform != NULL &&
          g_strcmp0 (json_object_get_string_member_with_default (platform, "os", NULL), "linux") == 0 &&
          g_strcmp0 (json_object_get_string_member_with_default (platform, "architecture", NULL), "amd64") == 0)
        return m;
    }
  mv_error_set (error, MV_ERROR_UNSUPPORTED, "image: it has no linux/amd64 image");
  return NULL;
}

char *
mv_oci_image_digest_of (GBytes *raw, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *obj = parse_object (parser, raw, "the manifest", error);
  JsonObject *entry;

  if (obj == NULL)
    return NULL;
  if (!is_index (obj, NULL))
    return sha256_bytes (raw);
  entry = amd64_entry (obj, error);
  if (entry == NULL)
    return NULL;
  return g_strdup (descriptor_digest (entry, "the linux/amd64 entry", error));
}

MvOciImage *
mv_oci_layout_read (const char *dir, const char *ref_name, GError **error)
{
  g_autoptr (MvOciImage) image = g_new0 (MvOciImage, 1);
  g_autoptr (JsonParser) index_parser = json_parser_new ();
  g_autoptr (JsonParser) manifest_parser = json_parser_new ();
  g_autoptr (JsonParser) config_parser = json_parser_new ();
  g_autofree char *index_path = g_build_filename (dir, "index.json", NULL);
  g_autofree char *data = NULL;
  g_autoptr (GBytes) index_bytes = NULL;
  JsonObject *index, *desc = NULL, *manifest, *config_desc;
  JsonArray *list, *layers;
  const char *digest;
  gsize len;

  if (!mv_file_read_bounded (index_path, MV_IMAGE_MANIFEST_MAX, "index.json", &data, &len, error))
    return NULL;
  index_bytes = g_bytes_new_take (g_steal_pointer (&data), len);
  index = parse_object (index_parser, index_bytes, "index.json", error);
  if (index == NULL)
    return NULL;
  list = member_array (index, "manifests", NULL);
  for (guint i = 0; list && i < json_array_get_length (list); i++)
    {
      JsonObject *m = json_array_get_object_element (list, i);
      JsonObject *ann = m ? member_object (m, "annotations", NULL) : NULL;

      if (ann && g_strcmp0 (json_object_get_string_member_with_default (ann, REF_NAME, NULL), ref_name) == 0)
        desc = m;
    }
  if (desc == NULL)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "image: the layout %s has no image \"%s\"", dir, ref_name), NULL;

  digest = descriptor_digest (desc, "the index entry", error);
  if (digest == NULL || !(image->manifest = read_small_blob (dir, digest, error)))
    return NULL;
  manifest = parse_object (manifest_parser, image->manifest, "the manifest", error);
  if (manifest == NULL)
    return NULL;
  if (is_index (manifest, desc))
    {
      JsonObject *entry = amd64_entry (manifest, error);

      if (entry == NULL || (digest = descriptor_digest (entry, "the linux/amd64 entry", error)) == NULL)
        return NULL;
      g_clear_pointer (&image->manifest, g_bytes_unref);
      if (!(image->manifest = read_small_blob (dir, digest, error)))
        return NULL;
      manifest = parse_object (manifest_parser, image->manifest, "the manifest", error);
      if (manifest == NULL)
        return NULL;
    }
  image->manifest_digest = g_strdup (digest);

  config_desc = member_object (manifest, "config", NULL);
  if (config_desc == NULL)
    return mv_error_set (error, MV_ERROR_FAILED, "image: the manifest names no config"), NULL;
  digest = descriptor_digest (config_desc, "the config", error);
  if (digest == NULL || !(image->config = read_small_blob (dir, digest, error)))
    return NULL;

  layers = member_array (manifest, "layers", NULL);
  if (layers == NULL)
    return mv_error_set (error, MV_ERROR_FAILED, "image: the manifest has no layers"), NULL;
  if (json_array_get_length (layers) > MV_IMAGE_LAYERS_MAX)
    return mv_error_set (error, MV_ERROR_FAILED, "image: it has more than %d layers", MV_IMAGE_LAYERS_MAX), NULL;
  image->layers = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < json_array_get_length (layers); i++)
    {
      JsonObject *layer = json_array_get_object_element (layers, i);
      g_autofree char *path = NULL;
      g_autofree char *got = NULL;

      if (layer == NULL || (digest = descriptor_digest (layer, "a layer", error)) == NULL)
        return NULL;
      image->layers_size += MAX (json_object_get_int_member_with_default (layer, "size", 0), 0);
      path = blob_path (dir, digest);
      got = mv_sha256_file (path, error);
      if (got == NULL)
        return NULL;
      if (!g_str_equal (got, digest))
        return tampered (error, digest, got), NULL;
      g_ptr_array_add (image->layers, g_steal_pointer (&path));
    }
  return g_steal_pointer (&image);
}
