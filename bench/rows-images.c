/* #11: images. Three entries, each measured side by side with the tools
 * doing the same work alone, runs interleaved:
 *
 *   11-pull    a pull and unpack of a busybox image with one more layer of
 *              50 MiB of random bytes (made once per run of the benchmark
 *              with umoci, pushed to Debian's docker-registry on loopback,
 *              tests/lib/test-registry.h) by mv_image_store_pull, a fresh
 *              store on an empty state directory each time, against
 *              `skopeo copy docker://… oci:DIR:1` + `umoci raw unpack` +
 *              `mkfs.ext4 -q -d ROOT FILE SIZE` of the size the store
 *              chose. The store does more than the tools: it resolves the
 *              digest first (`skopeo inspect --raw`), hashes every blob it
 *              reads back and applies the layers itself.
 *   11-cached  the same reference pulled again from a store that has it:
 *              the store asks the registry what the reference names and
 *              answers from its cache; against `skopeo inspect --raw` alone.
 *   11-boot    create→Running through the daemon (QEMU under TCG,
 *              microvmd's kernel and initramfs, readiness by the agent,
 *              `sleep 1000000` as the workload) of a machine booted from
 *              the test image (BUILD/tests/guest/oci, cached by a first
 *              machine not counted, so each run makes its overlay disk
 *              but pulls nothing), against the same machine on the busybox
 *              root disk (BUILD/tests/guest/rootfs.ext4) given as a
 *              read-only root disk. Each machine is deleted, forced, after
 *              its run.
 *
 * --smoke runs 11-pull and 11-cached once or a few times with a 1 MiB
 * layer, and boots no guest. */
#include "bench.h"

#include "names.h"
#include "storage/image-layout.h"
#include "storage/images.h"
#include "test-registry.h"

#include <glib/gstdio.h>
#include <string.h>

#define ROW              "11"
#define LAYER_BYTES      (G_GUINT64_CONSTANT (50) << 20)
#define SMOKE_LAYER_BYTES (G_GUINT64_CONSTANT (1) << 20)
#define PULL_RUNS        5
#define CACHED_RUNS      20
#define SMOKE_CACHED_RUNS 3
#define BOOT_RUNS        6
#define IMAGE_NAME_TAG   "bench/filler:1"
/* What the agent writes to the console as it starts the workload, before
 * it sends READY (src/agent/session.c). */
#define WORKLOAD_LINE    "workload started: sleep"
/* What the store writes for itself: skopeo checks no signature. */
#define ACCEPT_ANYTHING  "{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}\n"

static const char *const tools[] = { "docker-registry", "skopeo", "umoci", "mkfs.ext4", NULL };

typedef struct {
  Bench          *bench;
  char           *dir;       /* the row's scratch directory */
  char           *policy;    /* the baseline's skopeo policy */
  MvTestRegistry *registry;
  char           *ref;       /* 127.0.0.1:PORT/bench/filler:1 */
  guint64         layer_bytes;
} Images;

/* Runs @argv to its end; fails the benchmark unless it exits 0. */
static void
run_tool (Bench *bench, const char *const *argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err,
                     &status, &error))
    bench_fail (bench, "cannot run %s: %s", argv[0], error->message);
  if (!g_spawn_check_wait_status (status, NULL))
    bench_fail (bench, "%s %s failed: %s", argv[0], argv[1], err);
}

static void
remove_dir (Bench *bench, const char *dir)
{
  const char *argv[] = { "rm", "-rf", "--", dir, NULL };

  run_tool (bench, argv);
}

static guint64
file_size (const char *path)
{
  GStatBuf st;

  return g_stat (path, &st) == 0 ? (guint64) st.st_size : 0;
}

static char *
range_note (const char *what, const BenchSamples *figure, const BenchSamples *baseline)
{
  return g_strdup_printf ("%s; spread (min–max, µs): figure %.0f–%.0f, baseline %.0f–%.0f",
                          what, bench_samples_percentile (figure, 0.001),
                          bench_samples_percentile (figure, 100),
                          bench_samples_percentile (baseline, 0.001),
                          bench_samples_percentile (baseline, 100));
}

static void
add (Bench *bench, const char *id, const char *what, BenchSamples *figure,
     const char *baseline_what, BenchSamples *baseline, const char *note)
{
  g_autofree char *full = range_note (note, figure, baseline);
  BenchResult *r = bench_report_add (bench->report, ROW, id, what, "µs", -1, figure,
                                     baseline_what, baseline);

  bench_result_set_note (r, full);
  bench_result_print (r);
}

/* ---- 11-pull and 11-cached: the store against the tools ---- */

/* The image built for the row has its two layers, the second holding at
 * least @layer_bytes. */
static void
check_layers (Bench *bench, const char *layout, guint64 layer_bytes)
{
  g_autoptr (GError) error = NULL;
  MvOciImage *image = mv_oci_layout_read (layout, "1", &error);

  if (!image)
    bench_fail (bench, "cannot read back %s: %s", layout, error->message);
  if (image->layers->len != 2 || file_size (g_ptr_array_index (image->layers, 1)) < layer_bytes)
    bench_fail (bench, "%s has %u layers, the last of %" G_GUINT64_FORMAT " bytes", layout,
                image->layers->len,
                image->layers->len ? file_size (g_ptr_array_index (image->layers, image->layers->len - 1)) : 0);
  mv_oci_image_free (image);
}

/* A fresh store on an empty state directory pulls the image: µs from
 * creating the store until the pull returned. */
static double
store_pull (Images *im, const char *state, guint64 *disk_size)
{
  Bench *bench = im->bench;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImageStore) store = NULL;
  g_autoptr (MvImage) image = NULL;
  MvImageStoreOptions options = { 0 };
  gint64 t0, t1;

  g_assert (!g_file_test (state, G_FILE_TEST_EXISTS));
  t0 = bench_now ();
  store = mv_image_store_new (state, &options, &error);
  if (store)
    image = mv_image_store_pull (store, im->ref, NULL, &error);
  t1 = bench_now ();
  if (!image)
    bench_fail (bench, "the store could not pull %s: %s", im->ref, error->message);
  if (mv_image_store_get_build_count (store) != 1 || image->size < im->layer_bytes ||
      file_size (image->rootfs) != image->disk_size)
    bench_fail (bench, "the store's pull of %s built %u images of %" G_GUINT64_FORMAT
                " bytes into a %" G_GUINT64_FORMAT "-byte disk", im->ref,
                mv_image_store_get_build_count (store), image->size, file_size (image->rootfs));
  *disk_size = image->disk_size;
  g_clear_pointer (&store, mv_image_store_free);
  remove_dir (bench, state);
  return (double) (t1 - t0);
}

/* The same by the tools alone, into a disk of @disk_size bytes. */
static double
tools_pull (Images *im, const char *work, guint64 disk_size)
{
  Bench *bench = im->bench;
  g_autofree char *source = g_strconcat ("docker://", im->ref, NULL);
  g_autofree char *layout = g_build_filename (work, "layout", NULL);
  g_autofree char *dest = g_strdup_printf ("oci:%s:1", layout);
  g_autofree char *image = g_strdup_printf ("%s:1", layout);
  g_autofree char *root = g_build_filename (work, "root", NULL);
  g_autofree char *disk = g_build_filename (work, "rootfs.ext4", NULL);
  g_autofree char *filler = g_build_filename (root, "filler", NULL);
  g_autofree char *size = g_strdup_printf ("%" G_GUINT64_FORMAT "k", disk_size / 1024);
  const char *copy[] = { "skopeo", "--policy", im->policy, "copy", "--quiet",
                         "--src-tls-verify=false", source, dest, NULL };
  const char *unpack[] = { "umoci", "raw", "unpack", "--image", image, root, NULL };
  const char *mkfs[] = { "mkfs.ext4", "-q", "-d", root, disk, size, NULL };
  gint64 t0, t1;

  g_assert (!g_file_test (work, G_FILE_TEST_EXISTS));
  g_mkdir_with_parents (work, 0700);
  t0 = bench_now ();
  run_tool (bench, copy);
  run_tool (bench, unpack);
  run_tool (bench, mkfs);
  t1 = bench_now ();
  if (file_size (filler) != im->layer_bytes || file_size (disk) != disk_size)
    bench_fail (bench, "the tools unpacked a %" G_GUINT64_FORMAT "-byte /filler into a %"
                G_GUINT64_FORMAT "-byte disk", file_size (filler), file_size (disk));
  remove_dir (bench, work);
  return (double) (t1 - t0);
}

static void
measure_pulls (Images *im)
{
  Bench *bench = im->bench;
  guint runs = bench->smoke ? 1 : PULL_RUNS;
  g_autoptr (BenchSamples) store = bench_samples_new ();
  g_autoptr (BenchSamples) baseline = bench_samples_new ();
  g_autofree char *note = NULL;
  guint64 disk_size = 0;

  for (guint i = 0; i < runs; i++)
    {
      g_autofree char *state = g_strdup_printf ("%s/store-%u", im->dir, i);
      g_autofree char *work = g_strdup_printf ("%s/tools-%u", im->dir, i);

      /* The store goes first: the tools make a disk of the size it chose. */
      bench_samples_add (store, store_pull (im, state, &disk_size));
      bench_samples_add (baseline, tools_pull (im, work, disk_size));
      g_print ("[11] pull %u of %u: %.2f s by the store, %.2f s by the tools\n", i + 1, runs,
               g_array_index (store->values, double, i) / 1e6,
               g_array_index (baseline->values, double, i) / 1e6);
    }
  note = g_strdup_printf ("busybox layer + a layer of %" G_GUINT64_FORMAT " MiB of random bytes "
                          "(gzip), docker-registry on loopback; a %" G_GUINT64_FORMAT " MiB disk "
                          "on both sides; the store also resolves the digest first, hashes every "
                          "blob and applies the layers itself",
                          im->layer_bytes >> 20, disk_size >> 20);
  add (bench, "11-pull", bench->smoke ? "pull + unpack into an ext4 disk, small image (smoke)"
                                      : "pull + unpack of a ~50 MiB image into an ext4 disk, fresh store",
       g_steal_pointer (&store),
       "skopeo copy docker://… oci:DIR + umoci raw unpack + mkfs.ext4 -d",
       g_steal_pointer (&baseline), note);
}

static void
measure_cached (Images *im)
{
  Bench *bench = im->bench;
  guint runs = bench->smoke ? SMOKE_CACHED_RUNS : CACHED_RUNS;
  g_autofree char *state = g_build_filename (im->dir, "store-cached", NULL);
  g_autofree char *source = g_strconcat ("docker://", im->ref, NULL);
  const char *inspect[] = { "skopeo", "inspect", "--raw", "--tls-verify=false", source, NULL };
  g_autoptr (BenchSamples) cached = bench_samples_new ();
  g_autoptr (BenchSamples) baseline = bench_samples_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImageStore) store = NULL;
  g_autoptr (MvImage) first = NULL;
  MvImageStoreOptions options = { 0 };

  store = mv_image_store_new (state, &options, &error);
  if (store)
    first = mv_image_store_pull (store, im->ref, NULL, &error);
  if (!first)
    bench_fail (bench, "the store could not pull %s: %s", im->ref, error->message);
  for (guint i = 0; i < runs; i++)
    {
      g_autoptr (MvImage) again = NULL;
      gint64 t0 = bench_now ();

      again = mv_image_store_pull (store, im->ref, NULL, &error);
      if (!again)
        bench_fail (bench, "the store could not pull %s again: %s", im->ref, error->message);
      bench_samples_add (cached, (double) (bench_now () - t0));
      if (!g_str_equal (again->digest, first->digest) || mv_image_store_get_build_count (store) != 1)
        bench_fail (bench, "a second pull of %s was not served from the cache (%s, %u builds)",
                    im->ref, again->digest, mv_image_store_get_build_count (store));

      t0 = bench_now ();
      run_tool (bench, inspect);
      bench_samples_add (baseline, (double) (bench_now () - t0));
    }
  g_clear_pointer (&store, mv_image_store_free);
  remove_dir (bench, state);
  add (bench, "11-cached", "second pull of the same reference, answered from the cache",
       g_steal_pointer (&cached), "skopeo inspect --raw docker://… alone",
       g_steal_pointer (&baseline),
       "the store resolves the reference at the registry (skopeo inspect --raw), finds the "
       "digest cached and reads its records; the build count is checked unchanged every run");
}

/* ---- 11-boot: through the daemon, image against bare root disk ---- */

static char *
boot_spec (Bench *bench, const char *name, const char *layout)
{
  g_autofree char *root = layout ? g_strdup_printf ("\"image\":\"oci:%s:1\"", layout)
                                 : g_strdup_printf ("\"disks\":[{\"path\":\"%s\",\"read_only\":true,"
                                                    "\"root\":true}]", bench->rootfs);

  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"qemu\","
                          "\"memory_bytes\":268435456,%s,\"cmd\":[\"sleep\",\"1000000\"]}",
                          name, root);
}

/* CreateMachine with CREATE_START: µs until it returned, the machine
 * Running; then Delete, forced. */
static double
create_running (Bench *bench, const char *layout)
{
  g_autofree char *name = g_strdup_printf ("bench-i%05u", ++bench->machine_seq);
  g_autofree char *spec = boot_spec (bench, name, layout);
  g_autoptr (sd_bus_message) created = NULL;
  g_autoptr (sd_bus_message) deleted = NULL;
  g_autofree char *path = NULL, *state = NULL, *id = NULL, *overlay = NULL;
  g_autofree char *console = NULL, *text = NULL;
  const char *p = NULL;
  gint64 t0, t1;

  t0 = bench_now ();
  created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                        "CreateMachine", "st", spec, (uint64_t) MV_CREATE_START);
  t1 = bench_now ();
  if (sd_bus_message_read (created, "o", &p) < 0)
    bench_fail (bench, "CreateMachine returned no path");
  path = g_strdup (p);
  state = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "State");
  if (!g_str_equal (state, "Running"))
    bench_fail (bench, "%s is %s after CreateMachine with CREATE_START", name, state);
  id = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id");
  overlay = g_build_filename (mv_test_env_state_dir (bench->env), MV_MACHINES_DIR, id,
                              "overlay.ext4", NULL);
  if (g_file_test (overlay, G_FILE_TEST_EXISTS) != (layout != NULL))
    bench_fail (bench, "%s %s an overlay disk", name, layout ? "has no" : "has");
  console = g_build_filename (mv_test_env_runtime_dir (bench->env), MV_MACHINES_DIR, id,
                              "console.log", NULL);
  if (!g_file_get_contents (console, &text, NULL, NULL) || !strstr (text, WORKLOAD_LINE))
    bench_fail (bench, "%s was Running before its agent wrote \"%s\" to %s", name,
                WORKLOAD_LINE, console);
  deleted = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b", 1);
  return (double) (t1 - t0);
}

/* For the reading of 11-boot: µs to make a sparse 1 GiB ext4 file as
 * the storage layer makes an overlay disk (src/storage/disks.c). */
static double
format_overlay_alone (Images *im)
{
  g_autofree char *dir = g_build_filename (mv_test_env_dir (im->bench->env), "overlay-alone", NULL);
  g_autofree char *disk = g_build_filename (dir, "overlay.ext4", NULL);
  const char *argv[] = { "mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-L", "microvmd-rw",
                         disk, "1048576k", NULL };
  gint64 t0;

  g_mkdir_with_parents (dir, 0700);
  t0 = bench_now ();
  run_tool (im->bench, argv);
  t0 = bench_now () - t0;
  remove_dir (im->bench, dir);
  return (double) t0;
}

static void
measure_boots (Images *im, const char *layout)
{
  Bench *bench = im->bench;
  g_autofree char *kernel = g_build_filename (bench->agent_guest_dir, "vmlinuz", NULL);
  g_autofree char *initramfs = g_build_filename (bench->agent_guest_dir, "initramfs.img", NULL);
  g_autofree char *config = g_strdup_printf ("# row 11: images, microvmd's guest under TCG\n"
                                             "[qemu]\naccel=tcg\n"
                                             "[guest]\nkernel=%s\ninitramfs=%s\n",
                                             kernel, initramfs);
  g_autofree char *images = g_build_filename (mv_test_env_state_dir (bench->env),
                                              MV_IMAGES_DIR_NAME, NULL);
  g_autoptr (BenchSamples) image = bench_samples_new ();
  g_autoptr (BenchSamples) bare = bench_samples_new ();
  g_autofree char *note = NULL;
  double mkfs;

  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  /* Not counted: the first pulls the image into the daemon's cache, and
   * both read their files once. */
  create_running (bench, layout);
  create_running (bench, NULL);
  if (!g_file_test (images, G_FILE_TEST_IS_DIR))
    bench_fail (bench, "the daemon cached no image under %s", images);
  /* Interleaved, each side first in turn, so that the machine's drift
   * over the row falls on both alike. */
  for (guint i = 0; i < BOOT_RUNS; i++)
    {
      gboolean image_first = i % 2 == 0;

      if (image_first)
        bench_samples_add (image, create_running (bench, layout));
      bench_samples_add (bare, create_running (bench, NULL));
      if (!image_first)
        bench_samples_add (image, create_running (bench, layout));
      g_print ("[11] boot %u of %u: %.2f s from the image, %.2f s from the bare root disk\n",
               i + 1, BOOT_RUNS, g_array_index (image->values, double, i) / 1e6,
               g_array_index (bare->values, double, i) / 1e6);
    }
  bench_daemon_stop (bench);
  bench_clear_state (bench);
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
  mkfs = format_overlay_alone (im);

  note = g_strdup_printf ("microvmd's kernel + initramfs, `sleep 1000000` as the workload on both "
                          "sides; the image (the test root file system as an OCI layout) cached by "
                          "a first machine not counted, so each run makes and formats its 1 GiB "
                          "overlay disk (mkfs.ext4 of it alone, once after the runs: %.0f µs) but "
                          "pulls nothing; the image side boots two disks and an overlayfs root; "
                          "every machine deleted, forced, after its run", mkfs);
  add (bench, "11-boot", "create→Running from an image (QEMU TCG, microvm, agent ready)",
       g_steal_pointer (&image), "the same from the busybox root disk, read-only, no image",
       g_steal_pointer (&bare), note);
}

/* Why the boots cannot be measured, or NULL. */
static char *
boot_skip (Bench *bench, const char *layout)
{
  g_autofree char *qemu = g_find_program_in_path ("qemu-system-x86_64");
  g_autofree char *index = g_build_filename (layout, "index.json", NULL);
  g_autofree char *kernel = NULL, *initramfs = NULL;

  if (bench->smoke)
    return g_strdup ("smoke mode boots no real guest");
  if (!qemu)
    return g_strdup ("qemu-system-x86_64 is not installed");
  if (!bench->agent_guest_dir || !bench->rootfs)
    return g_strdup ("no agent guest given (build guest-image and test-rootfs, then "
                     "--agent-guest-dir BUILD/guest --rootfs BUILD/tests/guest/rootfs.ext4)");
  kernel = g_build_filename (bench->agent_guest_dir, "vmlinuz", NULL);
  initramfs = g_build_filename (bench->agent_guest_dir, "initramfs.img", NULL);
  if (!g_file_test (kernel, G_FILE_TEST_EXISTS) || !g_file_test (initramfs, G_FILE_TEST_EXISTS) ||
      !g_file_test (bench->rootfs, G_FILE_TEST_EXISTS) || !g_file_test (index, G_FILE_TEST_EXISTS))
    return g_strdup_printf ("the agent guest or the test image is missing (%s, %s, %s, %s)",
                            kernel, initramfs, bench->rootfs, layout);
  return NULL;
}

void
bench_row_images (Bench *bench)
{
  g_autofree char *build = g_canonicalize_filename (bench->build_dir, NULL);
  g_autofree char *layout = g_build_filename (build, "tests", "guest", "oci", NULL);
  g_autofree char *image_layout = NULL, *source = NULL, *skip = NULL, *boot_reason = NULL;
  Images im = { .bench = bench };

  for (const char *const *t = tools; *t && !skip; t++)
    {
      g_autofree char *found = g_find_program_in_path (*t);

      if (!found)
        skip = g_strdup_printf ("%s is not installed", *t);
    }
  if (skip)
    {
      bench_result_print (bench_report_add_not_measured (bench->report, ROW, "11-pull",
                                                         "pull + unpack of an image", skip));
      bench_result_print (bench_report_add_not_measured (bench->report, ROW, "11-cached",
                                                         "second pull of the same reference", skip));
    }
  else
    {
      gint64 t0 = bench_now ();

      im.dir = g_build_filename (mv_test_env_dir (bench->env), "images-row", NULL);
      im.policy = g_build_filename (im.dir, "policy.json", NULL);
      im.layer_bytes = bench->smoke ? SMOKE_LAYER_BYTES : LAYER_BYTES;
      g_mkdir_with_parents (im.dir, 0700);
      if (!g_file_set_contents (im.policy, ACCEPT_ANYTHING, -1, NULL))
        bench_fail (bench, "cannot write %s", im.policy);
      im.registry = mv_test_registry_new (im.dir);
      image_layout = g_build_filename (im.dir, "filler-oci", NULL);
      source = g_strdup_printf ("oci:%s:1", image_layout);
      mv_test_build_layered_image (image_layout, im.dir, im.layer_bytes);
      check_layers (bench, image_layout, im.layer_bytes);
      im.ref = mv_test_registry_push (im.registry, source, IMAGE_NAME_TAG);
      g_print ("[11] built and pushed %s in %.1f s\n", im.ref, (bench_now () - t0) / 1e6);

      measure_pulls (&im);
      measure_cached (&im);
      mv_test_registry_free (im.registry);
      remove_dir (bench, im.dir);
    }

  boot_reason = boot_skip (bench, layout);
  if (boot_reason)
    bench_result_print (bench_report_add_not_measured (bench->report, ROW, "11-boot",
                                                       "create→Running from an image", boot_reason));
  else
    measure_boots (&im, layout);

  g_free (im.dir);
  g_free (im.policy);
  g_free (im.ref);
}
