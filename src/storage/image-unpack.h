/* Applies image layers (tar, gzip or zstd tar) to a root directory, as
 * the OCI image spec says: in order, with whiteouts. Every name is looked
 * up inside the root (openat2 RESOLVE_IN_ROOT), so neither "..", an
 * absolute path nor a symbolic link planted by an earlier entry reaches
 * outside it. Blocks. */
#pragma once
#include <glib.h>

typedef struct {
  guint64 max_bytes;   /* refuse once the layers would unpack to more */
  guint64 bytes;       /* what they unpacked to so far (file data, plus a block per entry) */
  guint64 entries;     /* files, directories and links written */
} MvUnpackBudget;

/* Applies the layer in the file @layer_path to the directory @root_fd.
 * A layer that escapes the root, is malformed or goes over @budget is
 * refused (MV_ERROR_INVALID_ARGUMENT, or MV_ERROR_RESOURCE_EXHAUSTED for
 * the budget); the root is then in some partial state and is discarded
 * by the caller. Devices and FIFOs are skipped. */
gboolean mv_unpack_layer (int root_fd, const char *layer_path, MvUnpackBudget *budget, GError **error);
