#include "images.h"
#include "image-layout.h"
#include "image-unpack.h"
#include "core/errors.h"
#include "util/files.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define POLICY_NAME        ".policy.json"
#define LAYOUT_REF         "img"
#define RECORD_MAX         (64 * 1024)
#define SKOPEO_TIMEOUT     "600s"
#define DOWNLOAD_TIMEOUT   "600"
#define DISK_MARGIN        (G_GUINT64_CONSTANT (64) << 20)

#define PROGRESS_INTERVAL_US (200 * G_TIME_SPAN_MILLISECOND)

/* One pull in progress, shared by every caller asking for its reference.
 * It runs in a thread of its own, so that any waiter may leave; it is
 * cancelled once none wants it any more. Fields under the store's lock. */
typedef struct {
  MvImageStore *store;
  MvImageRef   *ref;
  GCancellable *cancellable;   /* the pull's own */
  gboolean      done;
  char         *digest;
  GError       *error;
  guint         refs;          /* the pulling thread and every waiter */
  guint         wanting;       /* waiters that have not cancelled */
  char         *watched;       /* what grows as the pull fetches: a layout or an archive */
  guint64       done_bytes;
  guint64       total_bytes;   /* 0 while unknown */
  gint64        sampled;       /* when done_bytes was last measured (monotonic µs) */
} Flight;

struct _MvImageStore {
  char       *images_dir;
  char       *policy;
  char      **insecure_hosts;
  guint64     max_size;

  GMutex      lock;
  GCond       landed;
  GHashTable *flights;   /* reference text -> Flight */
  GHashTable *staging;   /* staging dirs of pulls in progress, which sweep leaves */
  guint       builds;
  guint       pulling;   /* pull threads and their waiters still running */
};

void
mv_image_free (MvImage *image)
{
  if (image == NULL)
    return;
  g_free (image->digest);
  g_free (image->dir);
  g_free (image->rootfs);
  g_strfreev (image->references);
  g_free (image->created);
  mv_image_config_free (image->config);
  g_free (image);
}

MvImageStore *
mv_image_store_new (const char *state_dir, const MvImageStoreOptions *options, GError **error)
{
  g_autofree char *images_dir = g_build_filename (state_dir, MV_IMAGES_DIR_NAME, NULL);
  g_autofree char *policy = g_build_filename (images_dir, POLICY_NAME, NULL);
  MvImageStore *store;

  if (g_mkdir_with_parents (images_dir, 0700) < 0)
    return mv_set_errno_error (error, errno, "Could not create %s", images_dir), NULL;
  /* Images are trusted by digest, not by signature; a policy of our own
   * keeps the host's containers policy from changing what a pull does. */
  if (!g_file_set_contents_full (policy, "{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}\n", -1,
                                 G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    return NULL;

  store = g_new0 (MvImageStore, 1);
  store->images_dir = g_steal_pointer (&images_dir);
  store->policy = g_steal_pointer (&policy);
  store->insecure_hosts = g_strdupv ((char **) (options ? options->insecure_hosts : NULL));
  store->max_size = options && options->max_size ? options->max_size : MV_IMAGE_DEFAULT_MAX_SIZE;
  g_mutex_init (&store->lock);
  g_cond_init (&store->landed);
  store->flights = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  store->staging = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return store;
}

void
mv_image_store_free (MvImageStore *store)
{
  GHashTableIter iter;
  gpointer flight;

  if (store == NULL)
    return;
  /* Pulls under way are cancelled and waited for, with their waiters,
   * and so are those nobody waits for any more. */
  g_mutex_lock (&store->lock);
  g_hash_table_iter_init (&iter, store->flights);
  while (g_hash_table_iter_next (&iter, NULL, &flight))
    g_cancellable_cancel (((Flight *) flight)->cancellable);
  while (store->pulling > 0)
    g_cond_wait (&store->landed, &store->lock);
  g_mutex_unlock (&store->lock);
  g_hash_table_unref (store->flights);
  g_hash_table_unref (store->staging);
  g_mutex_clear (&store->lock);
  g_cond_clear (&store->landed);
  g_free (store->images_dir);
  g_free (store->policy);
  g_strfreev (store->insecure_hosts);
  g_free (store);
}

guint
mv_image_store_get_build_count (MvImageStore *store)
{
  guint n;

  g_mutex_lock (&store->lock);
  n = store->builds;
  g_mutex_unlock (&store->lock);
  return n;
}

static char *
image_dir (MvImageStore *store, const char *digest)
{
  return g_build_filename (store->images_dir, digest + strlen ("sha256:"), NULL);
}

/* ---- tools ---- */

/* What a failed skopeo said, as the error a caller can act on. */
static MvError
classify_skopeo (const char *err)
{
  if (strstr (err, "Digest did not match") || strstr (err, "digest did not match"))
    return MV_ERROR_FAILED;
  if (strstr (err, "no image found in manifest list") || strstr (err, "no image found in image index") ||
      strstr (err, "choosing image instance"))
    return MV_ERROR_UNSUPPORTED;
  if (strstr (err, "manifest unknown") || strstr (err, "name unknown") || strstr (err, "not found") ||
      strstr (err, "no such file or directory") || strstr (err, "no descriptor found") ||
      strstr (err, "does not exist"))
    return MV_ERROR_NOT_FOUND;
  if (strstr (err, "connection refused") || strstr (err, "no such host") || strstr (err, "i/o timeout") ||
      strstr (err, "network is unreachable") || strstr (err, "connection reset") ||
      strstr (err, "TLS handshake timeout") || strstr (err, "503 Service Unavailable"))
    return MV_ERROR_UNAVAILABLE;
  return MV_ERROR_FAILED;
}

/* skopeo's source name for @ref, by @digest where the transport allows. */
static char *
skopeo_source (const MvImageRef *ref, const char *digest, const char *archive)
{
  switch (ref->kind)
    {
    case MV_IMAGE_REF_REGISTRY:
      if (digest != NULL)
        return g_strdup_printf ("docker://%s/%s@%s", ref->host, ref->repository, digest);
      return g_strdup_printf ("docker://%s", ref->text);
    case MV_IMAGE_REF_LAYOUT:
      return ref->tag ? g_strdup_printf ("oci:%s:%s", ref->path, ref->tag) : g_strdup_printf ("oci:%s", ref->path);
    case MV_IMAGE_REF_ARCHIVE:
    default:
      return g_strdup_printf ("oci-archive:%s", archive);
    }
}

static char *
inspect_raw (const MvImageRef *ref, const char *source, GCancellable *cancellable, GBytes **raw,
             GError **error)
{
  const char *argv[] = { "skopeo", "--command-timeout", SKOPEO_TIMEOUT, "--override-os", "linux",
                         "--override-arch", "amd64", "inspect", "--raw",
                         ref->kind == MV_IMAGE_REF_REGISTRY && ref->plain_http ? "--tls-verify=false" : source,
                         source, NULL };

  if (argv[9] == source)
    argv[10] = NULL;
  return mv_run_tool ("image", argv, classify_skopeo, cancellable, raw, error) ? (char *) source : NULL;
}

/* The bytes an image manifest's blobs take: its config and its layers;
 * 0 for anything else (an index), which says nothing of them. */
static guint64
manifest_total (GBytes *raw)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *obj, *config;
  JsonNode *root, *layers;
  guint64 total = 0;

  if (!json_parser_load_from_data (parser, g_bytes_get_data (raw, NULL), g_bytes_get_size (raw), NULL) ||
      !(root = json_parser_get_root (parser)) || !JSON_NODE_HOLDS_OBJECT (root))
    return 0;
  obj = json_node_get_object (root);
  layers = json_object_get_member (obj, "layers");
  config = json_object_has_member (obj, "config") && JSON_NODE_HOLDS_OBJECT (json_object_get_member (obj, "config"))
           ? json_object_get_object_member (obj, "config") : NULL;
  if (layers == NULL || !JSON_NODE_HOLDS_ARRAY (layers) || config == NULL)
    return 0;
  total = MAX (json_object_get_int_member_with_default (config, "size", 0), 0);
  for (guint i = 0; i < json_array_get_length (json_node_get_array (layers)); i++)
    {
      JsonNode *layer = json_array_get_element (json_node_get_array (layers), i);

      if (JSON_NODE_HOLDS_OBJECT (layer))
        total += MAX (json_object_get_int_member_with_default (json_node_get_object (layer), "size", 0), 0);
    }
  return total;
}

/* The digest of the linux/amd64 image @source names, and in *@total
 * (may be NULL) the bytes its blobs take, 0 if the source does not say. */
static char *
resolve (MvImageStore *store, const MvImageRef *ref, const char *source, guint64 *total,
         GCancellable *cancellable, GError **error)
{
  g_autoptr (GBytes) raw = NULL;
  g_autofree char *digest = NULL;

  if (!inspect_raw (ref, source, cancellable, &raw, error))
    return NULL;
  digest = mv_oci_image_digest_of (raw, error);
  if (digest == NULL || total == NULL)
    return g_steal_pointer (&digest);
  *total = manifest_total (raw);
  /* An index: the image's own manifest tells its sizes. Only a progress
   * report needs them, so a failure here costs nothing else. */
  if (*total == 0 && ref->kind == MV_IMAGE_REF_REGISTRY)
    {
      g_autofree char *by_digest = skopeo_source (ref, digest, NULL);
      g_autoptr (GBytes) manifest = NULL;

      if (inspect_raw (ref, by_digest, cancellable, &manifest, NULL))
        *total = manifest_total (manifest);
    }
  return g_steal_pointer (&digest);
}

static MvError
classify_curl (const char *err)
{
  if (strstr (err, "returned error: 404") || strstr (err, "returned error: 410"))
    return MV_ERROR_NOT_FOUND;
  if (strstr (err, "Maximum file size exceeded") || strstr (err, "maximum allowed file size"))
    return MV_ERROR_RESOURCE_EXHAUSTED;
  if (strstr (err, "Could not resolve") || strstr (err, "Failed to connect") || strstr (err, "timed out") ||
      strstr (err, "returned error: 5"))
    return MV_ERROR_UNAVAILABLE;
  return MV_ERROR_FAILED;
}

static gboolean
download (MvImageStore *store, const MvImageRef *ref, const char *dest, GCancellable *cancellable,
          GError **error)
{
  g_autofree char *max = g_strdup_printf ("%" G_GUINT64_FORMAT, store->max_size);
  const char *proto = ref->plain_http ? "=http,https" : "=https";
  const char *argv[] = { "curl", "--fail", "--silent", "--show-error", "--location", "--max-redirs", "5",
                         "--proto", proto, "--proto-redir", proto, "--max-filesize", max,
                         "--max-time", DOWNLOAD_TIMEOUT, "--output", dest, "--", ref->url, NULL };
  GStatBuf st;

  if (!mv_run_tool ("image", argv, classify_curl, cancellable, NULL, error))
    return FALSE;
  /* --max-filesize trusts a Content-Length; a server that sends none is
   * caught here, once, instead. */
  if (g_stat (dest, &st) < 0)
    return mv_set_errno_error (error, errno, "Cannot stat %s", dest);
  if ((guint64) st.st_size > store->max_size)
    return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                         "image: the archive is more than the limit of %" G_GUINT64_FORMAT " bytes", store->max_size);
  return TRUE;
}

/* ---- the record ---- */

static gboolean
write_record (const char *dir, const char *digest, const char * const *references, guint64 size,
              guint64 disk_size, const char *created, gint64 pulled, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (GDateTime) when = g_date_time_new_from_unix_utc (pulled);
  g_autofree char *pulled_text = g_date_time_format_iso8601 (when);
  g_autofree char *path = g_build_filename (dir, MV_IMAGE_RECORD_NAME, NULL);
  g_autofree char *text = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "format");
  json_builder_add_int_value (b, MV_IMAGE_RECORD_FORMAT);
  json_builder_set_member_name (b, "digest");
  json_builder_add_string_value (b, digest);
  json_builder_set_member_name (b, "references");
  json_builder_begin_array (b);
  for (const char * const *r = references; r && *r; r++)
    json_builder_add_string_value (b, *r);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "size");
  json_builder_add_int_value (b, size);
  json_builder_set_member_name (b, "disk_size");
  json_builder_add_int_value (b, disk_size);
  if (created != NULL)
    {
      json_builder_set_member_name (b, "created");
      json_builder_add_string_value (b, created);
    }
  json_builder_set_member_name (b, "pulled");
  json_builder_add_string_value (b, pulled_text);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  text = json_generator_to_data (gen, NULL);
  return g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644, error);
}

static MvImage *
load_image (MvImageStore *store, const char *digest, GError **error)
{
  g_autoptr (MvImage) image = g_new0 (MvImage, 1);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) local = NULL;
  g_autofree char *record_path = NULL;
  g_autofree char *config_path = NULL;
  g_autofree char *data = NULL;
  g_autoptr (GDateTime) pulled = NULL;
  JsonObject *obj;
  JsonNode *root;
  JsonArray *refs;
  gsize len;

  image->digest = g_strdup (digest);
  image->dir = image_dir (store, digest);
  image->rootfs = g_build_filename (image->dir, MV_IMAGE_ROOTFS_NAME, NULL);
  record_path = g_build_filename (image->dir, MV_IMAGE_RECORD_NAME, NULL);
  config_path = g_build_filename (image->dir, MV_IMAGE_CONFIG_NAME, NULL);

  if (!mv_file_read_bounded (record_path, RECORD_MAX, MV_IMAGE_RECORD_NAME, &data, &len, &local))
    {
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
        return mv_error_set (error, MV_ERROR_NOT_FOUND, "image: %s is not in the store", digest), NULL;
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  if (!json_parser_load_from_data (parser, data, len, &local) ||
      !(root = json_parser_get_root (parser)) || !JSON_NODE_HOLDS_OBJECT (root))
    return mv_error_set (error, MV_ERROR_FAILED, "image: the record %s is not a JSON object", record_path), NULL;
  obj = json_node_get_object (root);
  if (json_object_get_int_member_with_default (obj, "format", 0) != MV_IMAGE_RECORD_FORMAT ||
      g_strcmp0 (json_object_get_string_member_with_default (obj, "digest", NULL), digest) != 0)
    return mv_error_set (error, MV_ERROR_FAILED, "image: the record %s is not format %d of %s",
                         record_path, MV_IMAGE_RECORD_FORMAT, digest), NULL;
  {
    JsonNode *node = json_object_get_member (obj, "references");

    refs = node && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
  }
  {
    g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();

    for (guint i = 0; refs && i < json_array_get_length (refs); i++)
      {
        const char *r = json_array_get_string_element (refs, i);

        if (r != NULL)
          g_strv_builder_add (builder, r);
      }
    image->references = g_strv_builder_end (builder);
  }
  image->size = json_object_get_int_member_with_default (obj, "size", 0);
  image->disk_size = json_object_get_int_member_with_default (obj, "disk_size", 0);
  image->created = g_strdup (json_object_get_string_member_with_default (obj, "created", NULL));
  pulled = g_date_time_new_from_iso8601 (json_object_get_string_member_with_default (obj, "pulled", ""), NULL);
  image->pulled = pulled ? g_date_time_to_unix (pulled) : 0;

  g_clear_pointer (&data, g_free);
  if (!mv_file_read_bounded (config_path, MV_IMAGE_CONFIG_MAX, MV_IMAGE_CONFIG_NAME, &data, &len, error))
    return NULL;
  image->config = mv_image_config_parse (data, len, error);
  if (image->config == NULL)
    return NULL;
  return g_steal_pointer (&image);
}

MvImage *
mv_image_store_lookup (MvImageStore *store, const char *digest, GError **error)
{
  if (!mv_image_digest_is_valid (digest))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "image: \"%s\" is not a digest (sha256: and 64 lowercase hex digits)", digest), NULL;
  return load_image (store, digest, error);
}

/* Adds @reference to a cached image's record, under the store's lock so
 * two pulls do not lose each other's. */
/* How a reference is kept in an image's record: an archive URL without
 * its query string and fragment (a signed URL's token is a secret, and
 * every fresh signature would be another reference). */
static char *
reference_key (const MvImageRef *ref)
{
  return ref->kind == MV_IMAGE_REF_ARCHIVE ? mv_url_strip_query (ref->text) : g_strdup (ref->text);
}

/* Adds @reference to the image's record, the latest last, keeping at most
 * MV_IMAGE_REFERENCES_MAX: the oldest go. */
static MvImage *
note_reference (MvImageStore *store, const char *digest, const MvImageRef *ref, GError **error)
{
  g_autofree char *reference = reference_key (ref);
  guint n, skip;
  g_autoptr (MvImage) image = NULL;
  g_autoptr (GStrvBuilder) builder = NULL;
  g_auto (GStrv) refs = NULL;
  gboolean ok;

  g_mutex_lock (&store->lock);
  image = load_image (store, digest, error);
  if (image == NULL || g_strv_contains ((const char * const *) image->references, reference))
    {
      g_mutex_unlock (&store->lock);
      return g_steal_pointer (&image);
    }
  builder = g_strv_builder_new ();
  n = image->references ? g_strv_length (image->references) : 0;
  skip = n >= MV_IMAGE_REFERENCES_MAX ? n - MV_IMAGE_REFERENCES_MAX + 1 : 0;
  for (guint i = skip; i < n; i++)
    g_strv_builder_add (builder, image->references[i]);
  g_strv_builder_add (builder, reference);
  refs = g_strv_builder_end (builder);
  ok = write_record (image->dir, digest, (const char * const *) refs, image->size, image->disk_size,
                     image->created, image->pulled, error);
  g_mutex_unlock (&store->lock);
  if (!ok)
    return NULL;
  g_strfreev (image->references);
  image->references = g_steal_pointer (&refs);
  return g_steal_pointer (&image);
}

/* ---- building ---- */

static char *
make_staging (MvImageStore *store, GError **error)
{
  g_autofree char *tmpl = g_build_filename (store->images_dir, MV_IMAGE_STAGING_PREFIX "XXXXXX", NULL);

  if (g_mkdtemp_full (tmpl, 0700) == NULL)
    return mv_set_errno_error (error, errno, "Could not create a staging directory in %s", store->images_dir), NULL;
  g_mutex_lock (&store->lock);
  g_hash_table_add (store->staging, g_strdup (tmpl));
  g_mutex_unlock (&store->lock);
  return g_steal_pointer (&tmpl);
}

static void
drop_staging (MvImageStore *store, const char *staging)
{
  /* Failing to delete it leaves it to sweep(). */
  mv_remove_tree (staging, NULL);
  g_mutex_lock (&store->lock);
  g_hash_table_remove (store->staging, staging);
  g_mutex_unlock (&store->lock);
}

static gboolean
write_bytes (const char *dir, const char *name, GBytes *bytes, GError **error)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);

  return g_file_set_contents_full (path, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes),
                                   G_FILE_SET_CONTENTS_NONE, 0644, error);
}

static gboolean
make_disk (const char *root, const char *disk, const MvUnpackBudget *budget, guint64 *disk_size,
           GCancellable *cancellable, GError **error)
{
  /* Room for ext4's metadata and journal over what the files take. */
  guint64 size = budget->bytes + budget->bytes / 4 + DISK_MARGIN;
  guint64 inodes = budget->entries + budget->entries / 4 + 4096;
  g_autofree char *size_k = NULL;
  g_autofree char *inodes_text = NULL;
  int fd;

  size = (size + (4 << 20) - 1) / (4 << 20) * (4 << 20);
  size_k = g_strdup_printf ("%" G_GUINT64_FORMAT "k", size / 1024);
  inodes_text = g_strdup_printf ("%" G_GUINT64_FORMAT, inodes);
  fd = open (disk, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", disk);
  if (ftruncate (fd, size) < 0)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "Cannot size %s", disk);
    }
  close (fd);

  {
    const char *argv[] = { "mkfs.ext4", "-q", "-F", "-N", inodes_text, "-d", root, "-E", "root_owner=0:0",
                           disk, size_k, NULL };

    if (!mv_run_tool ("image", argv, NULL, cancellable, NULL, error))
      return FALSE;
  }
  *disk_size = size;
  return TRUE;
}

/* Fetches @ref into @staging and builds the cache entry there. */
static gboolean
build (MvImageStore *store, const MvImageRef *ref, const char *source, const char *staging,
       const char *digest, GCancellable *cancellable, GError **error)
{
  g_autofree char *layout = g_build_filename (staging, "layout", NULL);
  g_autofree char *dest = g_strdup_printf ("oci:%s:" LAYOUT_REF, layout);
  g_autofree char *root = g_build_filename (staging, "rootfs", NULL);
  g_autofree char *disk = g_build_filename (staging, MV_IMAGE_ROOTFS_NAME, NULL);
  g_autoptr (MvOciImage) oci = NULL;
  g_autoptr (MvImageConfig) config = NULL;
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *reference = reference_key (ref);
  const char *refs[] = { reference, NULL };
  MvUnpackBudget budget = { .max_bytes = store->max_size };
  guint64 disk_size = 0;
  int root_fd;
  gboolean ok = TRUE;

  {
    const char *argv[] = { "skopeo", "--command-timeout", SKOPEO_TIMEOUT, "--policy", store->policy,
                           "--override-os", "linux", "--override-arch", "amd64", "copy", "--quiet",
                           ref->kind == MV_IMAGE_REF_REGISTRY && ref->plain_http ? "--src-tls-verify=false" : source,
                           source, dest, NULL };

    if (argv[11] == source)
      argv[12] = dest, argv[13] = NULL;
    if (!mv_run_tool ("image", argv, classify_skopeo, cancellable, NULL, error))
      return FALSE;
  }

  oci = mv_oci_layout_read (layout, LAYOUT_REF, error);
  if (oci == NULL)
    return FALSE;
  if (oci->layers_size > store->max_size)
    return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                         "image: its layers are more than the limit of %" G_GUINT64_FORMAT " bytes", store->max_size);
  config = mv_image_config_parse (g_bytes_get_data (oci->config, NULL), g_bytes_get_size (oci->config), error);
  if (config == NULL)
    return FALSE;
  if ((config->os && !g_str_equal (config->os, "linux")) ||
      (config->architecture && !g_str_equal (config->architecture, "amd64")))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "image: it is for %s/%s, not linux/amd64",
                         config->os ? config->os : "?", config->architecture ? config->architecture : "?");

  if (g_mkdir (root, 0755) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", root);
  root_fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0)
    return mv_set_errno_error (error, errno, "Cannot open %s", root);
  for (guint i = 0; ok && i < oci->layers->len; i++)
    ok = !g_cancellable_set_error_if_cancelled (cancellable, error) &&
         mv_unpack_layer (root_fd, oci->layers->pdata[i], &budget, error);
  close (root_fd);

  ok = ok && make_disk (root, disk, &budget, &disk_size, cancellable, error);
  ok = ok && mv_remove_tree (root, error) && mv_remove_tree (layout, error);
  if (ok && g_chmod (disk, 0444) < 0)
    ok = mv_set_errno_error (error, errno, "Cannot change the mode of %s", disk);
  ok = ok && write_bytes (staging, MV_IMAGE_CONFIG_NAME, oci->config, error) &&
       write_bytes (staging, MV_IMAGE_MANIFEST_NAME, oci->manifest, error) &&
       write_record (staging, digest ? digest : oci->manifest_digest, refs, budget.bytes, disk_size,
                     config->created, g_date_time_to_unix (now), error);
  return ok;
}

/* Tells the flight's waiters what to measure and how much to expect. */
static void
flight_watch (Flight *flight, const char *watched, guint64 total)
{
  g_mutex_lock (&flight->store->lock);
  g_free (flight->watched);
  flight->watched = g_strdup (watched);
  if (total > 0)
    flight->total_bytes = total;
  g_mutex_unlock (&flight->store->lock);
}

/* The whole pull of one reference, without the sharing. Returns the digest. */
static char *
pull_uncached (Flight *flight, GError **error)
{
  MvImageStore *store = flight->store;
  const MvImageRef *ref = flight->ref;
  GCancellable *cancellable = flight->cancellable;
  g_autofree char *archive = NULL;
  g_autofree char *source = NULL;
  g_autofree char *digest = NULL;
  g_autofree char *staging = NULL;
  g_autofree char *layout = NULL;
  g_autofree char *final = NULL;
  g_autoptr (MvImage) cached = NULL;
  g_autoptr (GError) local = NULL;
  guint64 total = 0;

  if (ref->kind != MV_IMAGE_REF_ARCHIVE)
    {
      g_autofree char *probe = skopeo_source (ref, NULL, NULL);

      digest = resolve (store, ref, probe, &total, cancellable, error);
      if (digest == NULL)
        return NULL;
      flight_watch (flight, NULL, total);
      if ((cached = note_reference (store, digest, ref, &local)) != NULL)
        return g_steal_pointer (&digest);
      if (!g_error_matches (local, MV_ERROR, MV_ERROR_NOT_FOUND))
        return g_propagate_error (error, g_steal_pointer (&local)), NULL;
      g_clear_error (&local);
    }

  staging = make_staging (store, error);
  if (staging == NULL)
    return NULL;

  if (ref->kind == MV_IMAGE_REF_ARCHIVE)
    {
      archive = g_build_filename (staging, "archive.tar", NULL);
      source = skopeo_source (ref, NULL, archive);
      flight_watch (flight, archive, 0);
      if (!download (store, ref, archive, cancellable, error) ||
          !(digest = resolve (store, ref, source, &total, cancellable, error)))
        return drop_staging (store, staging), NULL;
      if ((cached = note_reference (store, digest, ref, NULL)) != NULL)
        return drop_staging (store, staging), g_steal_pointer (&digest);
    }
  else
    {
      source = skopeo_source (ref, ref->kind == MV_IMAGE_REF_REGISTRY ? digest : NULL, NULL);
      layout = g_build_filename (staging, "layout", NULL);
      flight_watch (flight, layout, 0);
    }

  if (!build (store, ref, source, staging, digest, cancellable, error))
    return drop_staging (store, staging), NULL;
  if (archive != NULL && g_unlink (archive) < 0)
    return mv_set_errno_error (error, errno, "Cannot remove %s", archive), drop_staging (store, staging), NULL;
  /* The last moment a cancel can still leave nothing behind. */
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return drop_staging (store, staging), NULL;

  final = image_dir (store, digest);
  if (rename (staging, final) < 0)
    {
      int errsv = errno;

      drop_staging (store, staging);
      /* Another process built it first: theirs is as good. */
      if (errsv == EEXIST || errsv == ENOTEMPTY)
        return note_reference (store, digest, ref, error) ? g_steal_pointer (&digest) : NULL;
      return mv_set_errno_error (error, errsv, "Cannot rename %s", staging), NULL;
    }
  g_mutex_lock (&store->lock);
  g_hash_table_remove (store->staging, staging);
  store->builds++;
  g_mutex_unlock (&store->lock);
  return g_steal_pointer (&digest);
}

/* The store's lock is held. */
static void
flight_unref (Flight *flight)
{
  if (--flight->refs > 0)
    return;
  mv_image_ref_free (flight->ref);
  g_object_unref (flight->cancellable);
  g_free (flight->digest);
  g_clear_error (&flight->error);
  g_free (flight->watched);
  g_free (flight);
}

static gpointer
flight_run (gpointer data)
{
  Flight *flight = data;
  MvImageStore *store = flight->store;
  g_autoptr (GError) local = NULL;
  g_autofree char *digest = pull_uncached (flight, &local);

  g_mutex_lock (&store->lock);
  /* A flight every waiter left is out of the table already, and another
   * may have taken its place. */
  if (g_hash_table_lookup (store->flights, flight->ref->text) == flight)
    g_hash_table_remove (store->flights, flight->ref->text);
  flight->done = TRUE;
  flight->digest = g_steal_pointer (&digest);
  flight->error = g_steal_pointer (&local);
  if (flight->error == NULL && flight->total_bytes == 0)
    flight->total_bytes = flight->done_bytes;
  flight->done_bytes = flight->total_bytes;
  store->pulling--;
  flight_unref (flight);
  g_cond_broadcast (&store->landed);
  g_mutex_unlock (&store->lock);
  return NULL;
}

/* Bytes under @path: a file's size, or what a directory's files take. */
static guint64
measure (const char *path)
{
  g_autoptr (GDir) dir = NULL;
  const char *name;
  guint64 bytes = 0;
  GStatBuf st;

  if (g_lstat (path, &st) < 0)
    return 0;
  if (S_ISREG (st.st_mode))
    return st.st_size;
  if (!S_ISDIR (st.st_mode) || !(dir = g_dir_open (path, 0, NULL)))
    return 0;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);

      bytes += measure (child);
    }
  return bytes;
}

/* The store's lock is held, and dropped while the files are measured:
 * how far the pull has got, never less than it was seen to be. */
static void
flight_sample (Flight *flight)
{
  MvImageStore *store = flight->store;
  gint64 now = g_get_monotonic_time ();
  g_autofree char *watched = NULL;
  guint64 bytes;

  if (flight->done || flight->watched == NULL || now - flight->sampled < PROGRESS_INTERVAL_US / 2)
    return;
  flight->sampled = now;
  watched = g_strdup (flight->watched);
  g_mutex_unlock (&store->lock);
  bytes = measure (watched);
  g_mutex_lock (&store->lock);
  if (flight->done)
    return;
  if (flight->total_bytes > 0)
    bytes = MIN (bytes, flight->total_bytes);
  flight->done_bytes = MAX (flight->done_bytes, bytes);
}

MvImage *
mv_image_store_pull_with_progress (MvImageStore *store, const char *reference,
                                   MvPullProgressFunc progress, gpointer progress_data,
                                   GCancellable *cancellable, GError **error)
{
  g_autoptr (MvImageRef) ref = mv_image_ref_parse (reference, (const char * const *) store->insecure_hosts, error);
  g_autofree char *digest = NULL;
  g_autoptr (GError) failure = NULL;
  guint64 told_done = G_MAXUINT64, told_total = G_MAXUINT64;
  gboolean left = FALSE;
  MvImage *image = NULL;
  Flight *flight;

  if (ref == NULL)
    return NULL;

  g_mutex_lock (&store->lock);
  flight = g_hash_table_lookup (store->flights, ref->text);
  if (flight == NULL)
    {
      GThread *thread;

      flight = g_new0 (Flight, 1);
      flight->store = store;
      flight->ref = g_steal_pointer (&ref);
      flight->cancellable = g_cancellable_new ();
      flight->refs = 1;
      g_hash_table_insert (store->flights, g_strdup (flight->ref->text), flight);
      store->pulling++;
      thread = g_thread_new ("image-pull", flight_run, flight);
      g_thread_unref (thread);
    }
  flight->refs++;
  flight->wanting++;
  store->pulling++;

  while (!flight->done)
    {
      if (g_cancellable_is_cancelled (cancellable))
        {
          /* The pull goes on for whoever still wants it; the last to
           * leave cancels it, and a new caller starts afresh. */
          left = TRUE;
          if (--flight->wanting == 0)
            {
              g_cancellable_cancel (flight->cancellable);
              if (g_hash_table_lookup (store->flights, flight->ref->text) == flight)
                g_hash_table_remove (store->flights, flight->ref->text);
            }
          break;
        }
      g_cond_wait_until (&store->landed, &store->lock, g_get_monotonic_time () + PROGRESS_INTERVAL_US);
      flight_sample (flight);
      if (progress != NULL && !flight->done &&
          (flight->done_bytes != told_done || flight->total_bytes != told_total))
        {
          told_done = flight->done_bytes;
          told_total = flight->total_bytes;
          g_mutex_unlock (&store->lock);
          progress (told_done, told_total, progress_data);
          g_mutex_lock (&store->lock);
        }
    }
  if (!left)
    {
      flight->wanting--;
      digest = g_strdup (flight->digest);
      if (flight->error != NULL)
        failure = g_error_copy (flight->error);
      told_done = flight->done_bytes;
      told_total = flight->total_bytes;
    }
  flight_unref (flight);
  g_mutex_unlock (&store->lock);

  if (left)
    g_cancellable_set_error_if_cancelled (cancellable, error);
  else if (failure != NULL)
    g_propagate_error (error, g_steal_pointer (&failure));
  else
    {
      if (progress != NULL)
        progress (told_done, told_total, progress_data);
      image = mv_image_store_lookup (store, digest, error);
    }
  /* Only now may the store be freed. */
  g_mutex_lock (&store->lock);
  store->pulling--;
  g_cond_broadcast (&store->landed);
  g_mutex_unlock (&store->lock);
  return image;
}

MvImage *
mv_image_store_pull (MvImageStore *store, const char *reference, GCancellable *cancellable, GError **error)
{
  return mv_image_store_pull_with_progress (store, reference, NULL, NULL, cancellable, error);
}

const char * const *
mv_image_store_insecure_hosts (MvImageStore *store)
{
  return (const char * const *) store->insecure_hosts;
}

/* ---- listing and removing ---- */

static gboolean
is_image_name (const char *name)
{
  g_autofree char *digest = g_strconcat ("sha256:", name, NULL);

  return mv_image_digest_is_valid (digest);
}

/* The names in the images directory, images or (@staging) leftovers. */
static GPtrArray *
scan (MvImageStore *store, gboolean staging, GError **error)
{
  g_autoptr (GDir) dir = g_dir_open (store->images_dir, 0, error);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (dir == NULL)
    return NULL;
  while ((name = g_dir_read_name (dir)) != NULL)
    if (staging ? g_str_has_prefix (name, MV_IMAGE_STAGING_PREFIX) : is_image_name (name))
      g_ptr_array_add (names, g_strdup (name));
  return g_steal_pointer (&names);
}

GPtrArray *
mv_image_store_list (MvImageStore *store, GError **error)
{
  g_autoptr (GPtrArray) names = scan (store, FALSE, error);
  g_autoptr (GPtrArray) images = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_image_free);

  if (names == NULL)
    return NULL;
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *digest = g_strconcat ("sha256:", (char *) names->pdata[i], NULL);
      MvImage *image = load_image (store, digest, error);

      if (image == NULL)
        return NULL;
      g_ptr_array_add (images, image);
    }
  return g_steal_pointer (&images);
}

gboolean
mv_image_store_remove (MvImageStore *store, const char *digest, GError **error)
{
  g_autofree char *dir = NULL;
  g_autofree char *aside = NULL;

  if (!mv_image_digest_is_valid (digest))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "image: \"%s\" is not a digest (sha256: and 64 lowercase hex digits)", digest);
  dir = image_dir (store, digest);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "image: %s is not in the store", digest);
  /* Moved aside whole first (onto an empty staging directory, which
   * rename replaces), so nothing finds half an image while it is deleted. */
  aside = make_staging (store, error);
  if (aside == NULL)
    return FALSE;
  if (rename (dir, aside) < 0)
    {
      int errsv = errno;

      drop_staging (store, aside);
      if (errsv == ENOENT)
        return mv_error_set (error, MV_ERROR_NOT_FOUND, "image: %s is not in the store", digest);
      return mv_set_errno_error (error, errsv, "Cannot move %s aside", dir);
    }
  drop_staging (store, aside);
  return TRUE;
}

gboolean
mv_image_store_prune (MvImageStore *store, const char * const *keep, guint *removed, GError **error)
{
  g_autoptr (GPtrArray) names = scan (store, FALSE, error);
  guint n = 0;

  if (removed != NULL)
    *removed = 0;
  if (names == NULL)
    return FALSE;
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *digest = g_strconcat ("sha256:", (char *) names->pdata[i], NULL);
      g_autoptr (GError) local = NULL;

      if (keep != NULL && g_strv_contains (keep, digest))
        continue;
      if (!mv_image_store_remove (store, digest, &local))
        {
          if (g_error_matches (local, MV_ERROR, MV_ERROR_NOT_FOUND))
            continue;
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      n++;
      if (removed != NULL)
        *removed = n;
    }
  return TRUE;
}

gboolean
mv_image_store_sweep (MvImageStore *store, GError **error)
{
  g_autoptr (GPtrArray) names = scan (store, TRUE, error);

  if (names == NULL)
    return FALSE;
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (store->images_dir, (char *) names->pdata[i], NULL);
      gboolean busy;

      g_mutex_lock (&store->lock);
      busy = g_hash_table_contains (store->staging, path);
      g_mutex_unlock (&store->lock);
      if (!busy && !mv_remove_tree (path, error))
        return FALSE;
    }
  return TRUE;
}

/* ---- finding what the host has ---- */

MvImage *
mv_image_store_find (MvImageStore *store, const char *reference, GError **error)
{
  g_autoptr (MvImageRef) ref = mv_image_ref_parse (reference, (const char * const *) store->insecure_hosts, error);
  g_autoptr (GPtrArray) images = NULL;
  g_autofree char *key = NULL;
  gint latest = -1;

  if (ref == NULL)
    return NULL;
  key = reference_key (ref);
  /* A digest names one image, whatever it was pulled by. */
  if (ref->digest != NULL)
    return mv_image_store_lookup (store, ref->digest, error);
  images = mv_image_store_list (store, error);
  if (images == NULL)
    return NULL;
  for (guint i = 0; i < images->len; i++)
    {
      MvImage *image = images->pdata[i];

      if (image->references && g_strv_contains ((const char * const *) image->references, key) &&
          (latest < 0 || image->pulled > ((MvImage *) images->pdata[latest])->pulled))
        latest = (gint) i;
    }
  if (latest < 0)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "image: %s has not been pulled on this host",
                         key), NULL;
  return g_ptr_array_steal_index (images, (guint) latest);
}
