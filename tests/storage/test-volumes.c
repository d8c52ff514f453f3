/* Volumes: the spec CreateVolume reads, the record, and the store on
 * disk: a create is whole or leaves nothing, an invalid record is left
 * alone, and what a crash leaves is swept. Needs mkfs.ext4. */
#include "core/errors.h"
#include "core/volume.h"
#include "storage/volumes.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#define MiB (G_GUINT64_CONSTANT (1) << 20)

static GPtrArray *warnings;

static GLogWriterOutput
capture_warnings (GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                  gpointer user_data)
{
  if ((level & G_LOG_LEVEL_MASK) != G_LOG_LEVEL_WARNING)
    return g_log_writer_default (level, fields, n_fields, user_data);
  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE"))
      g_ptr_array_add (warnings, g_strdup (fields[i].value));
  return G_LOG_WRITER_HANDLED;
}

static void
assert_spec_refused (const char *json, const char *message)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvVolume) volume = mv_volume_spec_from_json (json, &error);

  g_assert_null (volume);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  if (message)
    g_assert_cmpstr (error->message, ==, message);
}

static void
test_spec (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvVolume) volume = mv_volume_spec_from_json ("{\"name\":\"data\",\"size_bytes\":16777216}",
                                                          &error);

  g_assert_no_error (error);
  g_assert_cmpstr (volume->name, ==, "data");
  g_assert_cmpuint (volume->size_bytes, ==, 16 * MiB);

  assert_spec_refused ("{\"name\":\"data\",\"size_bytes\":16777216,\"fs\":\"xfs\"}", NULL);
  assert_spec_refused ("{\"name\":\"data\",\"size_bytes\":16777215}",
                       "size_bytes: 16777215 is outside 16777216 (16 MiB) to 17592186044416 (16 TiB)");
  assert_spec_refused ("{\"name\":\"data\",\"size_bytes\":17592186044417}", NULL);
  assert_spec_refused ("{\"name\":\"data\",\"size_bytes\":-1}", NULL);
  assert_spec_refused ("{\"name\":\"data\"}", "size_bytes: missing");
  assert_spec_refused ("{\"size_bytes\":16777216}", "name: missing");
  assert_spec_refused ("{\"name\":\"no/slash\",\"size_bytes\":16777216}", NULL);
  assert_spec_refused ("{\"name\":\"data\",\"size_bytes\":16777216", NULL);
  assert_spec_refused ("[]", NULL);
  assert_spec_refused ("{\"name\":\"data\",\"name\":\"x\",\"size_bytes\":16777216}", NULL);
}

static void
test_record (void)
{
  g_autoptr (GError) error = NULL;
  MvVolume volume = { .id = (char *) "0123456789abcdef0123456789abcdef", .name = (char *) "data",
                      .size_bytes = 32 * MiB, .created_at = G_GINT64_CONSTANT (1700000000) * G_USEC_PER_SEC };
  g_autofree char *json = mv_volume_to_json (&volume);
  g_autoptr (MvVolume) back = mv_volume_from_json (json, strlen (json), &error);

  g_assert_no_error (error);
  g_assert_cmpstr (back->id, ==, volume.id);
  g_assert_cmpstr (back->name, ==, "data");
  g_assert_cmpuint (back->size_bytes, ==, 32 * MiB);
  g_assert_cmpint (back->created_at, ==, volume.created_at);
  g_assert_nonnull (strstr (json, "\"format\" : 1"));

  g_assert_null (mv_volume_from_json ("{\"format\":2}", 12, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
}

static char *
make_tmpdir (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("microvmd-volumes-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static guint
count_entries (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  while (d && g_dir_read_name (d))
    n++;
  return n;
}

static void
test_store (void)
{
  g_autofree char *root = make_tmpdir ();
  g_autofree char *dir = g_build_filename (root, "volumes", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) invalid = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  g_autoptr (MvVolumeStore) store = mv_volume_store_open (dir, invalid, &error);
  g_autoptr (MvVolume) volume = NULL;
  g_autoptr (MvVolume) again = NULL;
  g_autoptr (MvVolume) found = NULL;
  g_autoptr (GPtrArray) list = NULL;
  g_autofree char *disk = NULL;
  g_autofree char *record = NULL;
  g_autofree char *vdir = NULL;
  GStatBuf st;

  g_assert_no_error (error);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpint (g_stat (dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);

  volume = mv_volume_store_create (store, "data", 16 * MiB, &error);
  g_assert_no_error (error);
  g_assert_nonnull (volume);
  vdir = g_build_filename (dir, volume->id, NULL);
  disk = mv_volume_store_disk_path (store, volume->id);
  record = g_build_filename (vdir, MV_VOLUME_RECORD_NAME, NULL);
  g_assert_cmpint (g_stat (vdir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  g_assert_cmpint (g_stat (record, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_cmpint (g_stat (disk, &st), ==, 0);
  g_assert_cmpuint (st.st_size, ==, 16 * MiB);
  /* Sparse: far less is taken than its size. */
  g_assert_cmpuint ((guint64) st.st_blocks * 512, <, 16 * MiB);
  g_assert_cmpuint (count_entries (dir), ==, 1);

  /* A name taken: nothing new on disk. */
  again = mv_volume_store_create (store, "data", 32 * MiB, &error);
  g_assert_null (again);
  g_assert_error (error, MV_ERROR, MV_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  g_assert_cmpuint (count_entries (dir), ==, 1);

  /* Out of range: refused before anything is made. */
  g_assert_null (mv_volume_store_create (store, "big", 17 * (G_GUINT64_CONSTANT (1) << 40), &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpuint (count_entries (dir), ==, 1);

  found = mv_volume_store_find (store, "data");
  g_assert_nonnull (found);
  g_assert_cmpstr (found->id, ==, volume->id);
  g_clear_pointer (&found, mv_volume_free);
  found = mv_volume_store_find (store, volume->id);
  g_assert_nonnull (found);
  g_clear_pointer (&found, mv_volume_free);

  /* Opened again: the same volume. */
  g_clear_pointer (&store, mv_volume_store_free);
  store = mv_volume_store_open (dir, invalid, &error);
  g_assert_no_error (error);
  list = mv_volume_store_list (store);
  g_assert_cmpuint (list->len, ==, 1);
  g_assert_cmpstr (((MvVolume *) list->pdata[0])->name, ==, "data");
  g_assert_cmpuint (((MvVolume *) list->pdata[0])->size_bytes, ==, 16 * MiB);

  g_assert_true (mv_volume_store_delete (store, volume->id, &error));
  g_assert_no_error (error);
  g_assert_null (mv_volume_store_find (store, "data"));
  g_assert_false (g_file_test (vdir, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (count_entries (dir), ==, 0);
  g_assert_false (mv_volume_store_delete (store, volume->id, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_clear_pointer (&store, mv_volume_store_free);
  g_rmdir (dir);
  g_rmdir (root);
}

/* A record that does not read is reported and left byte for byte; the
 * staging and deleting directories a crash left are swept; the rest of
 * the store opens. */
static void
test_startup (void)
{
  g_autofree char *root = make_tmpdir ();
  g_autofree char *dir = g_build_filename (root, "volumes", NULL);
  g_autofree char *bad = g_build_filename (dir, "00000000000000000000000000000bad", NULL);
  g_autofree char *bad_record = g_build_filename (bad, MV_VOLUME_RECORD_NAME, NULL);
  g_autofree char *staging = g_build_filename (dir, ".staging-0123", NULL);
  g_autofree char *staging_disk = g_build_filename (staging, MV_VOLUME_DISK_NAME, NULL);
  g_autofree char *deleting = g_build_filename (dir, ".deleting-4567", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) invalid = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  g_autoptr (MvVolumeStore) store = NULL;
  g_autoptr (MvVolume) good = NULL;
  g_autoptr (MvVolume) found = NULL;
  g_autofree char *text = NULL;
  static const char garbage[] = "{\"format\":1,\"id\":";

  store = mv_volume_store_open (dir, NULL, &error);
  g_assert_no_error (error);
  good = mv_volume_store_create (store, "good", 16 * MiB, &error);
  g_assert_no_error (error);
  g_clear_pointer (&store, mv_volume_store_free);

  g_assert_cmpint (g_mkdir (bad, 0700), ==, 0);
  g_assert_true (g_file_set_contents (bad_record, garbage, -1, NULL));
  g_assert_cmpint (g_mkdir (staging, 0700), ==, 0);
  g_assert_true (g_file_set_contents (staging_disk, "x", 1, NULL));
  g_assert_cmpint (g_mkdir (deleting, 0700), ==, 0);

  store = mv_volume_store_open (dir, invalid, &error);
  g_assert_cmpuint (warnings->len, ==, 1);
  g_assert_nonnull (strstr (warnings->pdata[0], "00000000000000000000000000000bad"));
  g_assert_no_error (error);
  g_assert_cmpuint (invalid->len, ==, 1);
  g_assert_cmpstr (((MvInvalidRecord *) invalid->pdata[0])->path, ==, bad);
  g_assert_true (g_file_get_contents (bad_record, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, garbage);
  g_assert_false (g_file_test (staging, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (deleting, G_FILE_TEST_EXISTS));
  found = mv_volume_store_find (store, "good");
  g_assert_nonnull (found);

  g_assert_true (mv_volume_store_delete (store, good->id, &error));
  g_unlink (bad_record);
  g_rmdir (bad);
  g_clear_pointer (&store, mv_volume_store_free);
  g_rmdir (dir);
  g_rmdir (root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  warnings = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (capture_warnings, NULL, NULL);
  g_test_add_func ("/volumes/spec", test_spec);
  g_test_add_func ("/volumes/record", test_record);
  g_test_add_func ("/volumes/store", test_store);
  g_test_add_func ("/volumes/startup", test_startup);
  return g_test_run ();
}
