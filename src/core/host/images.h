/* Images: where the images machines boot from come from (src/storage/
 * fills it in over the image store; tests use a fake). Contract: check is
 * cheap and may run on the main thread; ensure blocks and is called from
 * worker threads, any number at once (two ensures of one reference share
 * one pull). */
#pragma once
#include "core/image-config.h"

#include <gio/gio.h>

typedef enum {
  MV_PULL_MISSING,   /* pull unless the host has an image of that reference (default) */
  MV_PULL_ALWAYS,    /* ask the source what the reference names now */
  MV_PULL_NEVER,     /* only what the host has: NOT_FOUND otherwise */
} MvPullPolicy;

/* "missing", "always", "never"; "" is missing. FALSE for anything else. */
gboolean    mv_pull_policy_from_string (const char *text, MvPullPolicy *policy);
const char *mv_pull_policy_to_string (MvPullPolicy policy);

/* Bytes of the pull fetched so far and in all (0 while unknown); called
 * from the pulling thread. */
typedef void (*MvPullProgressFunc) (guint64 done, guint64 total, gpointer user_data);

typedef struct _MvImages MvImages;

struct _MvImages {
  gpointer data;

  /* Refuses a reference this host cannot pull from (MV_ERROR_INVALID_ARGUMENT
   * naming "image"): its syntax, plain HTTP to a registry not allowed it. */
  gboolean  (*check) (MvImages *images, const char *reference, GError **error);
  /* Blocks: the image @reference names, as @policy says; its digest, and
   * its config in *@config. MV_ERROR as the image store says (NOT_FOUND,
   * UNAVAILABLE, FAILED for a tampered blob, UNSUPPORTED for another
   * architecture; G_IO_ERROR_CANCELLED once @cancellable is). */
  char     *(*ensure) (MvImages *images, const char *reference, MvPullPolicy policy,
                       MvPullProgressFunc progress, gpointer progress_data,
                       GCancellable *cancellable, MvImageConfig **config, GError **error);
};
