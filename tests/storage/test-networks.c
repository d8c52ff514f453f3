/* The network records on disk: a create is whole or leaves nothing,
 * names and subnets are the host's once, addresses outlive a restart, an
 * invalid record is left alone, and what a crash leaves is swept. */
#include "core/errors.h"
#include "storage/networks.h"
#include "util/files.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

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

static char *
make_tmpdir (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("microvmd-networks-XXXXXX", &error);

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

static MvNetworkSpec *
spec (const char *json)
{
  g_autoptr (GError) error = NULL;
  MvNetworkSpec *network = mv_network_spec_from_json (json, &error);

  g_assert_no_error (error);
  return network;
}

static MvNetworkSpec *
create (MvNetworkStore *store, const char *json, GError **error)
{
  g_autoptr (MvNetworkSpec) wanted = spec (json);

  return mv_network_store_create (store, wanted, error);
}

static void
assert_mode (const char *path, guint mode)
{
  GStatBuf st;

  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, mode);
}

static void
test_store (void)
{
  g_autofree char *root = make_tmpdir ();
  g_autofree char *dir = g_build_filename (root, "networks", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) invalid = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  g_autoptr (MvNetworkStore) store = mv_network_store_open (dir, invalid, &error);
  g_autoptr (MvNetworkSpec) lan = NULL;
  g_autoptr (MvNetworkSpec) found = NULL;
  g_autoptr (GPtrArray) list = NULL;
  g_autofree char *ndir = NULL, *record = NULL, *allocations = NULL, *text = NULL;
  g_autofree char *address = NULL, *again = NULL, *holder = NULL;
  const char *machine = "0123456789abcdef0123456789abcdef";

  g_assert_no_error (error);
  g_assert_cmpuint (invalid->len, ==, 0);
  assert_mode (dir, 0700);

  lan = create (store, "{\"name\":\"lan\",\"subnet\":\"10.10.0.0/24\"}", &error);
  g_assert_no_error (error);
  g_assert_nonnull (lan->id);
  g_assert_cmpint (lan->created_at, >, 0);
  ndir = g_build_filename (dir, lan->id, NULL);
  record = g_build_filename (ndir, MV_NETWORK_RECORD_NAME, NULL);
  allocations = g_build_filename (ndir, MV_ALLOCATIONS_RECORD_NAME, NULL);
  assert_mode (ndir, 0700);
  assert_mode (record, 0600);
  assert_mode (allocations, 0600);
  g_assert_true (g_file_get_contents (record, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, "\"gateway\" : \"10.10.0.1\""));
  g_assert_cmpuint (count_entries (dir), ==, 1);

  /* A name taken, a subnet overlapping: refused, nothing new on disk. */
  g_assert_null (create (store, "{\"name\":\"lan\",\"subnet\":\"10.20.0.0/24\"}", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  g_assert_null (create (store, "{\"name\":\"big\",\"subnet\":\"10.0.0.0/8\"}", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "subnet: 10.0.0.0/8 overlaps 10.10.0.0/24 of the network lan"));
  g_clear_error (&error);
  g_assert_cmpuint (count_entries (dir), ==, 1);

  /* Addresses: written before the call returns, kept by the machine. */
  g_assert_true (mv_network_store_allocate (store, "lan", machine, NULL, &address, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (address, ==, "10.10.0.2");
  g_assert_true (mv_network_store_allocate (store, lan->id, machine, NULL, &again, &error));
  g_assert_cmpstr (again, ==, "10.10.0.2");
  g_clear_pointer (&text, g_free);
  g_assert_true (g_file_get_contents (allocations, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, machine));
  g_assert_false (mv_network_store_allocate (store, "nope", machine, NULL, &again, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_assert_true (g_str_has_prefix (error->message, "network_name: "));
  g_clear_error (&error);

  /* Opened again: the same network, the same address held. */
  g_clear_pointer (&store, mv_network_store_free);
  store = mv_network_store_open (dir, invalid, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (invalid->len, ==, 0);
  list = mv_network_store_list (store);
  g_assert_cmpuint (list->len, ==, 1);
  g_assert_cmpstr (((MvNetworkSpec *) list->pdata[0])->name, ==, "lan");
  holder = mv_network_store_instance_at (store, "lan", "10.10.0.2");
  g_assert_cmpstr (holder, ==, machine);
  g_clear_pointer (&holder, g_free);

  g_assert_true (mv_network_store_release (store, "lan", machine, &error));
  holder = mv_network_store_instance_at (store, "lan", "10.10.0.2");
  g_assert_null (holder);
  g_clear_pointer (&text, g_free);
  g_assert_true (g_file_get_contents (allocations, &text, NULL, NULL));
  g_assert_null (strstr (text, machine));

  found = mv_network_store_find (store, lan->id);
  g_assert_nonnull (found);
  g_assert_cmpstr (found->name, ==, "lan");

  /* Reconcile: a machine no longer defined gives its address back, on
   * disk; one still defined keeps its own. */
  {
    const char *gone = "fedcba9876543210fedcba9876543210";
    g_autoptr (GHashTable) live = g_hash_table_new (g_str_hash, g_str_equal);
    g_autofree char *kept = NULL, *lost = NULL, *after = NULL;
    guint released = 0;

    g_assert_true (mv_network_store_allocate (store, "lan", machine, NULL, &kept, &error));
    g_assert_true (mv_network_store_allocate (store, "lan", gone, NULL, &lost, &error));
    g_hash_table_add (live, (gpointer) machine);
    g_assert_true (mv_network_store_reconcile (store, live, &released, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (released, ==, 1);
    holder = mv_network_store_instance_at (store, "lan", lost);
    g_assert_null (holder);
    g_clear_pointer (&holder, g_free);
    holder = mv_network_store_instance_at (store, "lan", kept);
    g_assert_cmpstr (holder, ==, machine);
    g_clear_pointer (&holder, g_free);
    g_assert_true (g_file_get_contents (allocations, &after, NULL, NULL));
    g_assert_null (strstr (after, gone));
    g_assert_nonnull (strstr (after, machine));
  }

  g_assert_true (mv_network_store_delete (store, lan->id, &error));
  g_assert_no_error (error);
  g_assert_null (mv_network_store_find (store, "lan"));
  g_assert_cmpuint (count_entries (dir), ==, 0);
  g_assert_false (mv_network_store_delete (store, lan->id, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_clear_pointer (&store, mv_network_store_free);
  g_rmdir (dir);
  g_rmdir (root);
}

static void
test_bound (void)
{
  g_autofree char *root = make_tmpdir ();
  g_autofree char *dir = g_build_filename (root, "networks", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvNetworkStore) store = mv_network_store_open (dir, NULL, &error);
  g_autoptr (GPtrArray) list = NULL;

  for (guint i = 0; i < MV_NETWORKS_MAX; i++)
    {
      g_autofree char *json = g_strdup_printf ("{\"name\":\"n%u\",\"subnet\":\"10.%u.%u.0/24\"}", i,
                                               i / 256, i % 256);
      g_autoptr (MvNetworkSpec) network = create (store, json, &error);

      g_assert_no_error (error);
    }
  g_assert_null (create (store, "{\"name\":\"one-more\",\"subnet\":\"192.168.0.0/24\"}", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "256"));
  g_assert_cmpuint (count_entries (dir), ==, MV_NETWORKS_MAX);

  list = mv_network_store_list (store);
  for (guint i = 0; i < list->len; i++)
    g_assert_true (mv_network_store_delete (store, ((MvNetworkSpec *) list->pdata[i])->id, NULL));
  g_clear_pointer (&store, mv_network_store_free);
  g_rmdir (dir);
  g_rmdir (root);
}

/* Records that do not read are reported and left byte for byte; the
 * staging and deleting directories a crash left are swept; the rest of
 * the store opens. */
static void
test_startup (void)
{
  g_autofree char *root = make_tmpdir ();
  g_autofree char *dir = g_build_filename (root, "networks", NULL);
  g_autofree char *bad = g_build_filename (dir, "00000000000000000000000000000bad", NULL);
  g_autofree char *bad_record = g_build_filename (bad, MV_NETWORK_RECORD_NAME, NULL);
  g_autofree char *staging = g_build_filename (dir, ".staging-0123", NULL);
  g_autofree char *staging_record = g_build_filename (staging, MV_NETWORK_RECORD_NAME, NULL);
  g_autofree char *deleting = g_build_filename (dir, ".deleting-4567", NULL);
  g_autofree char *broken_alloc = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) invalid = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  g_autoptr (MvNetworkStore) store = NULL;
  g_autoptr (MvNetworkSpec) good = NULL;
  g_autoptr (MvNetworkSpec) other = NULL;
  g_autoptr (MvNetworkSpec) found = NULL;
  g_autofree char *text = NULL, *alloc_text = NULL;
  static const char garbage[] = "{\"format\":1,\"id\":";
  static const char twice[] = "{\"format\":1,\"allocations\":{"
    "\"0123456789abcdef0123456789abcdef\":\"10.2.0.2\","
    "\"fedcba9876543210fedcba9876543210\":\"10.2.0.2\"}}";

  store = mv_network_store_open (dir, NULL, &error);
  g_assert_no_error (error);
  good = create (store, "{\"name\":\"good\",\"subnet\":\"10.1.0.0/16\"}", &error);
  g_assert_no_error (error);
  other = create (store, "{\"name\":\"other\",\"subnet\":\"10.2.0.0/16\"}", &error);
  g_assert_no_error (error);
  g_clear_pointer (&store, mv_network_store_free);

  g_assert_cmpint (g_mkdir (bad, 0700), ==, 0);
  g_assert_true (g_file_set_contents (bad_record, garbage, -1, NULL));
  broken_alloc = g_build_filename (dir, other->id, MV_ALLOCATIONS_RECORD_NAME, NULL);
  g_assert_true (g_file_set_contents (broken_alloc, twice, -1, NULL));
  g_assert_cmpint (g_mkdir (staging, 0700), ==, 0);
  g_assert_true (g_file_set_contents (staging_record, "x", 1, NULL));
  g_assert_cmpint (g_mkdir (deleting, 0700), ==, 0);

  g_ptr_array_set_size (warnings, 0);
  store = mv_network_store_open (dir, invalid, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (warnings->len, ==, 2);
  g_assert_cmpuint (invalid->len, ==, 2);
  for (guint i = 0; i < invalid->len; i++)
    {
      MvInvalidRecord *record = invalid->pdata[i];

      g_assert_true (g_str_equal (record->path, bad_record) || g_str_equal (record->path, broken_alloc));
      if (g_str_equal (record->path, broken_alloc))
        g_assert_nonnull (strstr (record->reason, "held by machine"));
    }
  g_assert_true (g_file_get_contents (bad_record, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, garbage);
  g_assert_true (g_file_get_contents (broken_alloc, &alloc_text, NULL, NULL));
  g_assert_cmpstr (alloc_text, ==, twice);
  g_assert_false (g_file_test (staging, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (deleting, G_FILE_TEST_EXISTS));
  found = mv_network_store_find (store, "good");
  g_assert_nonnull (found);
  g_assert_null (mv_network_store_find (store, "other"));

  g_assert_true (mv_network_store_delete (store, good->id, &error));
  g_clear_pointer (&store, mv_network_store_free);
  g_autofree char *other_dir = g_build_filename (dir, other->id, NULL);
  mv_remove_tree (other_dir, NULL);
  mv_remove_tree (bad, NULL);
  g_rmdir (dir);
  g_rmdir (root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  warnings = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (capture_warnings, NULL, NULL);
  g_test_add_func ("/networks/store", test_store);
  g_test_add_func ("/networks/bound", test_bound);
  g_test_add_func ("/networks/startup", test_startup);
  return g_test_run ();
}
