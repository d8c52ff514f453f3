/* The image store against real tools: Debian's docker-registry on a
 * loopback port, an image built with umoci from busybox, pushed with
 * skopeo, pulled through the store. Needs root. */
#include "storage/images.h"
#include "storage/image-layout.h"
#include "core/errors.h"
#include "util/files.h"
#include "test-registry.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

static char *tmp;
static char *registry_ref;    /* 127.0.0.1:PORT/test/busybox:1 */
static char *layout;          /* the OCI layout umoci built */
static MvTestRegistry *registry;
static char *slow_ref;        /* a big image through the slowed proxy */

static void
run (const char *cmd)
{
  mv_test_run_command (cmd);
}

static guint
free_port (void)
{
  return mv_test_free_port ();
}

static MvImageStore *
new_store (const char *name)
{
  g_autofree char *state = g_build_filename (tmp, name, NULL);
  g_autoptr (GError) error = NULL;
  MvImageStore *store = mv_image_store_new (state, NULL, &error);

  g_assert_no_error (error);
  return store;
}

static guint
count_entries (MvImageStore *store, const char *state_name)
{
  g_autofree char *dir = g_build_filename (tmp, state_name, "images", NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;
  const char *name;

  while ((name = g_dir_read_name (d)) != NULL)
    if (name[0] != '.' || g_str_has_prefix (name, MV_IMAGE_STAGING_PREFIX))
      n++;
  return n;
}

static void
test_pull (void)
{
  g_autoptr (MvImageStore) store = new_store ("state-pull");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImage) image = mv_image_store_pull (store, registry_ref, NULL, &error);
  g_autoptr (MvImage) again = NULL;
  g_autoptr (MvImage) by_digest = NULL;
  g_autoptr (GPtrArray) list = NULL;
  g_autofree char *cmd = NULL;
  g_autofree char *out = NULL;
  g_autofree char *digest_ref = NULL;
  int status;
  GStatBuf st;

  g_assert_no_error (error);
  g_assert_true (mv_image_digest_is_valid (image->digest));
  g_assert_cmpuint (mv_image_store_get_build_count (store), ==, 1);
  g_assert_cmpint (g_stat (image->rootfs, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0444);
  g_assert_cmpstr (image->config->entrypoint[0], ==, "/bin/sh");
  g_assert_cmpstr (image->config->env[0], ==, "PATH=/bin");
  g_assert_cmpstr (image->config->user, ==, "1000:1000");
  g_assert_cmpstr (image->config->working_dir, ==, "/tmp");
  g_assert_true (g_strv_contains ((const char * const *) image->references, registry_ref));

  cmd = g_strdup_printf ("debugfs -R 'stat /bin/busybox' %s", image->rootfs);
  g_assert_true (g_spawn_command_line_sync (cmd, &out, NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_nonnull (strstr (out, "Type: regular"));

  /* Cached: neither the tag nor the digest builds again. */
  again = mv_image_store_pull (store, registry_ref, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again->digest, ==, image->digest);
  digest_ref = g_strdup_printf ("%.*s@%s", (int) (strrchr (registry_ref, ':') - registry_ref), registry_ref,
                                image->digest);
  by_digest = mv_image_store_pull (store, digest_ref, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (by_digest->digest, ==, image->digest);
  g_assert_cmpuint (mv_image_store_get_build_count (store), ==, 1);
  g_assert_true (g_strv_contains ((const char * const *) by_digest->references, digest_ref));

  list = mv_image_store_list (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 1);
}

static void
test_errors (void)
{
  g_autoptr (MvImageStore) store = new_store ("state-errors");
  g_autofree char *missing = g_strdup_printf ("%.*s:missing", (int) (strrchr (registry_ref, ':') - registry_ref),
                                              registry_ref);
  g_autofree char *down = g_strdup_printf ("127.0.0.1:%u/test/busybox:1", free_port ());
  struct { const char *ref; MvError code; } cases[] = {
    { missing, MV_ERROR_NOT_FOUND },
    { down, MV_ERROR_UNAVAILABLE },
    { "busybox:1", MV_ERROR_INVALID_ARGUMENT },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MvImage) image = mv_image_store_pull (store, cases[i].ref, NULL, &error);

      g_assert_null (image);
      if (!g_error_matches (error, MV_ERROR, cases[i].code))
        g_error ("%s: expected code %d, got %s", cases[i].ref, cases[i].code, error ? error->message : "success");
    }
  g_assert_cmpuint (count_entries (store, "state-errors"), ==, 0);
}

/* The largest blob of @dir's layout, which is the layer. */
static char *
largest_blob (const char *dir)
{
  g_autofree char *blobs = g_build_filename (dir, "blobs", "sha256", NULL);
  g_autoptr (GDir) d = g_dir_open (blobs, 0, NULL);
  g_autofree char *best = NULL;
  goffset best_size = -1;
  const char *name;

  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (blobs, name, NULL);
      GStatBuf st;

      if (g_stat (path, &st) == 0 && st.st_size > best_size)
        {
          best_size = st.st_size;
          g_free (best);
          best = g_steal_pointer (&path);
        }
    }
  return g_steal_pointer (&best);
}

static void
test_tampered (void)
{
  g_autoptr (MvImageStore) store = new_store ("state-tampered");
  g_autofree char *copy = g_build_filename (tmp, "tampered", NULL);
  g_autofree char *cmd = g_strdup_printf ("cp -a %s %s", layout, copy);
  g_autofree char *ref = NULL;
  g_autofree char *blob = NULL;
  g_autofree char *digest = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImage) image = NULL;
  g_autoptr (MvOciImage) oci = NULL;
  FILE *f;

  run (cmd);
  blob = largest_blob (copy);
  digest = g_strconcat ("sha256:", strrchr (blob, '/') + 1, NULL);
  f = fopen (blob, "r+b");
  g_assert_nonnull (f);
  fseek (f, 100, SEEK_SET);
  fputc ('!', f);
  fclose (f);

  /* Our own reading refuses it, naming the blob... */
  oci = mv_oci_layout_read (copy, "1", &error);
  g_assert_null (oci);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, digest));
  g_clear_error (&error);

  /* ...and so does a pull, leaving nothing in the cache. */
  ref = g_strdup_printf ("oci:%s:1", copy);
  image = mv_image_store_pull (store, ref, NULL, &error);
  g_assert_null (image);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_cmpuint (count_entries (store, "state-tampered"), ==, 0);
}

typedef struct {
  MvImageStore *store;
  const char   *ref;
  char         *digest;
} PullJob;

static gpointer
pull_thread (gpointer data)
{
  PullJob *job = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImage) image = mv_image_store_pull (job->store, job->ref, NULL, &error);

  g_assert_no_error (error);
  job->digest = g_strdup (image->digest);
  return NULL;
}

static void
test_concurrent_and_prune (void)
{
  g_autoptr (MvImageStore) store = new_store ("state-concurrent");
  g_autofree char *layout_ref = g_strdup_printf ("oci:%s:1", layout);
  PullJob jobs[3] = { { store, layout_ref }, { store, layout_ref }, { store, layout_ref } };
  GThread *threads[3];
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImage) second = NULL;
  g_autofree char *second_layout = g_build_filename (tmp, "layout2", NULL);
  g_autofree char *cmd = NULL;
  g_autofree char *second_ref = NULL;
  g_autofree char *leftover = NULL;
  g_autoptr (GPtrArray) list = NULL;
  guint removed = 0;

  for (int i = 0; i < 3; i++)
    threads[i] = g_thread_new ("pull", pull_thread, &jobs[i]);
  for (int i = 0; i < 3; i++)
    g_thread_join (threads[i]);
  g_assert_cmpstr (jobs[0].digest, ==, jobs[1].digest);
  g_assert_cmpstr (jobs[0].digest, ==, jobs[2].digest);
  g_assert_cmpuint (mv_image_store_get_build_count (store), ==, 1);

  /* A second, different image beside it. */
  cmd = g_strdup_printf ("cp -a %s %s", layout, second_layout);
  run (cmd);
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("umoci config --image %s:1 --config.env EXTRA=1", second_layout);
  run (cmd);
  second_ref = g_strdup_printf ("oci:%s:1", second_layout);
  second = mv_image_store_pull (store, second_ref, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (second->digest, !=, jobs[0].digest);
  g_assert_cmpuint (mv_image_store_get_build_count (store), ==, 2);

  {
    const char *keep[] = { second->digest, NULL };

    g_assert_true (mv_image_store_prune (store, keep, &removed, &error));
    g_assert_no_error (error);
  }
  g_assert_cmpuint (removed, ==, 1);
  list = mv_image_store_list (store, &error);
  g_assert_cmpuint (list->len, ==, 1);
  g_assert_cmpstr (((MvImage *) list->pdata[0])->digest, ==, second->digest);
  {
    g_autoptr (MvImage) gone = mv_image_store_lookup (store, jobs[0].digest, &error);
    g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
    g_clear_error (&error);
  }

  /* What a crash left behind goes with sweep; the image stays. */
  leftover = g_build_filename (tmp, "state-concurrent", "images", MV_IMAGE_STAGING_PREFIX "crash1", "rootfs", NULL);
  g_assert_cmpint (g_mkdir_with_parents (leftover, 0700), ==, 0);
  g_assert_cmpuint (count_entries (store, "state-concurrent"), ==, 2);
  g_assert_true (mv_image_store_sweep (store, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_entries (store, "state-concurrent"), ==, 1);

  g_assert_true (mv_image_store_remove (store, second->digest, &error));
  g_assert_false (mv_image_store_remove (store, second->digest, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  for (int i = 0; i < 3; i++)
    g_free (jobs[i].digest);
}

typedef struct {
  MvImageStore *store;
  GCancellable *cancellable;
  guint         reports;
  guint64       last_done, last_total;
  gboolean      bad;           /* done went back, or past the total */
  MvImage      *image;
  GError       *error;
} Waiter;

static void
on_progress (guint64 done, guint64 total, gpointer data)
{
  Waiter *w = data;

  if ((total > 0 && done > total) || done < w->last_done)
    w->bad = TRUE;
  w->last_done = done;
  w->last_total = total;
  g_atomic_int_inc (&w->reports);
}

static gpointer
waiter_thread (gpointer data)
{
  Waiter *w = data;

  w->image = mv_image_store_pull_with_progress (w->store, slow_ref, on_progress, w, w->cancellable, &w->error);
  return NULL;
}

static void
wait_for_reports (Waiter *w)
{
  for (int i = 0; i < 200 && (g_atomic_int_get (&w->reports) == 0 || w->last_done == 0); i++)
    g_usleep (50000);
  g_assert_cmpuint (w->last_done, >, 0);
}

/* Two waiters of one pull: one leaving does not stop it for the other;
 * both get progress, the last report complete. */
static void
test_shared_cancel (void)
{
  g_autoptr (MvImageStore) store = new_store ("state-shared");
  Waiter a = { store, g_cancellable_new () }, b = { store, g_cancellable_new () };
  GThread *ta = g_thread_new ("a", waiter_thread, &a);
  GThread *tb = g_thread_new ("b", waiter_thread, &b);

  wait_for_reports (&a);
  wait_for_reports (&b);
  g_cancellable_cancel (a.cancellable);
  g_thread_join (ta);
  g_assert_error (a.error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_null (a.image);
  g_thread_join (tb);
  g_assert_no_error (b.error);
  g_assert_nonnull (b.image);
  g_assert_false (a.bad);
  g_assert_false (b.bad);
  g_assert_cmpuint (b.reports, >=, 2);
  g_assert_cmpuint (b.last_total, >, 0);
  g_assert_cmpuint (b.last_done, ==, b.last_total);
  g_assert_cmpuint (mv_image_store_get_build_count (store), ==, 1);
  g_assert_cmpuint (count_entries (store, "state-shared"), ==, 1);
  mv_image_free (b.image);
  g_clear_error (&a.error);
  g_object_unref (a.cancellable);
  g_object_unref (b.cancellable);
}

/* Every waiter leaving cancels the pull, which leaves nothing. */
static void
test_all_cancel (void)
{
  g_autoptr (MvImageStore) store = new_store ("state-all-cancel");
  Waiter a = { store, g_cancellable_new () }, b = { store, g_cancellable_new () };
  GThread *ta = g_thread_new ("a", waiter_thread, &a);
  GThread *tb = g_thread_new ("b", waiter_thread, &b);

  wait_for_reports (&a);
  g_cancellable_cancel (a.cancellable);
  g_cancellable_cancel (b.cancellable);
  g_thread_join (ta);
  g_thread_join (tb);
  g_assert_error (a.error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_error (b.error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  /* The pull's thread cleans up after itself: freeing the store waits for it. */
  g_clear_pointer (&store, mv_image_store_free);
  {
    g_autoptr (MvImageStore) again = new_store ("state-all-cancel");

    g_assert_cmpuint (count_entries (again, "state-all-cancel"), ==, 0);
  }
  g_clear_error (&a.error);
  g_clear_error (&b.error);
  g_object_unref (a.cancellable);
  g_object_unref (b.cancellable);
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *cmd = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  if (getuid () != 0)
    {
      g_print ("1..0 # SKIP needs root\n");
      return 77;
    }

  tmp = g_dir_make_tmp ("test-images-XXXXXX", &error);
  g_assert_no_error (error);
  registry = mv_test_registry_new (tmp);
  layout = g_build_filename (tmp, "layout", NULL);
  mv_test_build_busybox_image (layout, tmp, 0);
  cmd = g_strdup_printf ("oci:%s:1", layout);
  registry_ref = mv_test_registry_push (registry, cmd, "test/busybox:1");
  {
    g_autofree char *big = g_build_filename (tmp, "big", NULL);
    g_autofree char *big_ref = g_strdup_printf ("oci:%s:1", big);

    mv_test_build_busybox_image (big, tmp, 12 * 1024 * 1024);
    g_free (mv_test_registry_push (registry, big_ref, "test/big:1"));
    slow_ref = g_strdup_printf ("127.0.0.1:%u/test/big:1", mv_test_registry_slow_port (registry, 4 << 20));
  }

  g_test_add_func ("/images/pull", test_pull);
  g_test_add_func ("/images/errors", test_errors);
  g_test_add_func ("/images/tampered", test_tampered);
  g_test_add_func ("/images/concurrent-and-prune", test_concurrent_and_prune);
  g_test_add_func ("/images/shared-cancel", test_shared_cancel);
  g_test_add_func ("/images/all-cancel", test_all_cancel);
  status = g_test_run ();

  g_clear_pointer (&registry, mv_test_registry_free);
  mv_remove_tree (tmp, NULL);
  return status;
}
