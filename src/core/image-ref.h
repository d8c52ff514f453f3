/* Image references: where an image comes from, parsed and checked before
 * anything is fetched. Pure. Three forms:
 *   host[:port]/repo[:tag]  or  host[:port]/repo@sha256:<64 hex>
 *     a registry; the host is never implied, the tag defaults to "latest";
 *   oci:/abs/path/to/layout[:tag]
 *     an OCI layout directory on this host;
 *   http(s)://host/path
 *     an OCI archive (a tar of an OCI layout) to download. */
#pragma once
#include <glib.h>

#define MV_IMAGE_REF_MAX      1024   /* a whole reference, in bytes */
#define MV_IMAGE_NAME_MAX     255    /* host and repository of a registry reference */
#define MV_IMAGE_TAG_MAX      128
#define MV_IMAGE_URL_MAX      2048

typedef enum {
  MV_IMAGE_REF_REGISTRY,
  MV_IMAGE_REF_LAYOUT,
  MV_IMAGE_REF_ARCHIVE,
} MvImageRefKind;

typedef struct {
  MvImageRefKind kind;
  char    *text;        /* as given */
  char    *host;        /* registry and archive: host[:port] ("[::1]:5000") */
  char    *repository;  /* registry: "test/busybox" */
  char    *tag;         /* registry and layout; NULL when a digest is named or a layout has none */
  char    *digest;      /* registry: "sha256:<hex>" or NULL */
  char    *path;        /* layout: the directory */
  char    *url;         /* archive */
  gboolean plain_http;  /* registry and archive: no TLS */
} MvImageRef;

/* Parses @text (MV_ERROR_INVALID_ARGUMENT saying what is wrong). Loopback
 * hosts (127.0.0.0/8, [::1], localhost) and those in @insecure_hosts
 * (host or host:port, may be NULL) are spoken to in plain HTTP, others
 * over TLS; an http:// archive URL to any other host is refused. */
MvImageRef *mv_image_ref_parse (const char *text, const char * const *insecure_hosts, GError **error);
void        mv_image_ref_free (MvImageRef *ref);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvImageRef, mv_image_ref_free)

/* Whether @digest is "sha256:" and 64 lowercase hex digits. */
gboolean    mv_image_digest_is_valid (const char *digest);

/* @url without its query string and fragment, for a fingerprint that
 * does not keep a signed URL's token. */
char       *mv_url_strip_query (const char *url);
