/* Running the tools of the field (skopeo, curl, mkfs.ext4, e2fsck,
 * resize2fs) from worker threads. */
#pragma once
#include "core/errors.h"

#include <gio/gio.h>

/* Which MV_ERROR a tool's failure is, from what it printed on stderr. */
typedef MvError (*MvToolClassify) (const char *stderr_text);

/* Blocks: runs @argv; on success *@out (may be NULL) holds its stdout. On
 * failure the error's code comes from @classify (NULL: MV_ERROR_FAILED)
 * and its message, which starts with "@what: ", quotes the last line of
 * the tool's stderr. */
gboolean mv_run_tool (const char *what, const char * const *argv, MvToolClassify classify,
                      GCancellable *cancellable, GBytes **out, GError **error);
