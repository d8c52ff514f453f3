/* Helpers shared by the hypervisor tests. */
#pragma once
#include <glib.h>
#include "core/spec.h"
#include "hypervisor/runtime.h"

/* A runtime directory under /tmp (short enough for sun_path); removed
 * with everything in it by hv_test_remove_tree(). */
char       *hv_test_make_dir (void);
void        hv_test_remove_tree (const char *path);
/* The names in @dir, sorted, joined by spaces; "" when empty. */
char       *hv_test_list_dir (const char *dir);

/* The built-in qemu runtime under TCG; @config_extra is appended to the
 * key file ("[qemu]\naccel=tcg\n" comes first). */
MvRuntime  *hv_test_qemu_runtime (const char *config_extra, GError **error);
GPtrArray  *hv_test_runtimes (const char *config_extra, GError **error);

/* A spec booting the test guest (from MICROVMD_TEST_KERNEL and
 * MICROVMD_TEST_INITRD), 256 MiB, one vCPU. */
MvSpec     *hv_test_guest_spec (MvReadiness readiness, const char *readiness_text,
                                const char *kernel_args);

/* Waits up to @timeout_s for @text to be in @path after @offset. */
gboolean    hv_test_wait_file_has (const char *path, goffset offset, const char *text,
                                   guint timeout_s);
/* The last "MICROVMD-COUNTER n" in @path after @offset; -1 if none. */
gint64      hv_test_last_counter (const char *path, goffset offset);
/* The first one after @offset; -1 if none. */
gint64      hv_test_first_counter (const char *path, goffset offset);
goffset     hv_test_file_size (const char *path);

int         hv_test_identity_pid (JsonObject *identity);
gboolean    hv_test_pid_alive (int pid);
