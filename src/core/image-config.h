/* What microvmd takes from an OCI image config (the blob a manifest's
 * "config" names): how to start the image's program. Pure. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "core/json-tree.h"

#define MV_IMAGE_CONFIG_MAX      (1024 * 1024)  /* bytes of config JSON read */
#define MV_IMAGE_CONFIG_MAX_DEPTH 32           /* its nesting; OCI's is a few levels */
#define MV_IMAGE_CONFIG_LIST_MAX 4096           /* entries in Entrypoint, Cmd, Env, Test */

typedef struct {
  char  **test;            /* ["CMD", "..."], ["CMD-SHELL", "..."] or ["NONE"] */
  gint64  interval_ns;     /* 0 when not set */
  gint64  timeout_ns;
  gint64  start_period_ns;
  gint64  retries;
} MvImageHealthcheck;

typedef struct {
  char  *architecture;     /* "amd64" */
  char  *os;               /* "linux" */
  char  *created;          /* RFC 3339, or NULL */
  char **entrypoint;       /* NULL when not set; never NULL-and-empty confused: empty is {NULL} */
  char **cmd;
  char **env;              /* "NAME=value" */
  char  *user;
  char  *working_dir;
  MvImageHealthcheck *healthcheck;  /* NULL when the image has none */
} MvImageConfig;

/* Parses an OCI image config; MV_ERROR_INVALID_ARGUMENT names the field
 * that is malformed. Fields microvmd does not use are ignored. */
MvImageConfig *mv_image_config_parse (const char *json, gssize length, GError **error);
void           mv_image_config_free (MvImageConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvImageConfig, mv_image_config_free)

/* The document mv_image_config_parse() reads back as @config: what a
 * machine's record keeps of the image it is pinned to. */
JsonNode      *mv_image_config_to_node (const MvImageConfig *config);
MvImageConfig *mv_image_config_from_node (const MvJson *node, GError **error);
/* NULL for NULL. */
MvImageConfig *mv_image_config_copy (const MvImageConfig *config);
