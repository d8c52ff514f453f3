/* A container registry for tests: Debian's docker-registry on a loopback
 * port, images built with umoci from busybox and pushed with skopeo, and
 * a proxy in front of it that passes its answers on slowly, for pulls
 * that must last. Every function asserts. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _MvTestRegistry MvTestRegistry;

/* Runs @cmd (a shell-free command line) to completion; fails the test
 * unless it succeeds. */
void            mv_test_run_command          (const char *cmd);
/* A TCP port on 127.0.0.1 that nothing listens on now. */
guint           mv_test_free_port            (void);

/* Starts a registry keeping its blobs under @dir. */
MvTestRegistry *mv_test_registry_new         (const char *dir);
void            mv_test_registry_free        (MvTestRegistry *registry);
guint           mv_test_registry_port        (MvTestRegistry *registry);
/* Starts (once) a proxy to the registry passing at most
 * @bytes_per_second from it to its clients; its port. */
guint           mv_test_registry_slow_port   (MvTestRegistry *registry, guint bytes_per_second);
/* Copies the OCI layout image @layout_ref ("oci:DIR:TAG") to the registry
 * as @name_tag ("test/busybox:1"); returns "127.0.0.1:PORT/@name_tag". */
char           *mv_test_registry_push        (MvTestRegistry *registry, const char *layout_ref,
                                              const char *name_tag);

/* Builds, in a new OCI layout @layout, tagged "1", a busybox root file
 * system with sh, ls, cat and echo, entrypoint /bin/sh, user 1000:1000,
 * working directory /tmp and PATH=/bin; @extra_bytes > 0 adds a file
 * /filler of that many random bytes, which no compression shrinks. */
void            mv_test_build_busybox_image  (const char *layout, const char *scratch_dir,
                                              guint64 extra_bytes);
/* The same busybox image with @layer_bytes (> 0) of random data as a
 * second layer of its own: the file /filler, which no compression
 * shrinks. */
void            mv_test_build_layered_image  (const char *layout, const char *scratch_dir,
                                              guint64 layer_bytes);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvTestRegistry, mv_test_registry_free)

G_END_DECLS
