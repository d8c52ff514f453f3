/* The record store on a scratch directory: atomic writes, create, load,
 * save, remove, and what is left after a crash or by hand. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "core/errors.h"
#include "core/json-strict.h"
#include "core/net-rules.h"
#include "store/store.h"
#include "store-test.h"

typedef struct {
  char    *tmp;
  char    *state;
  char    *runtime;
  MvStore *store;
} Fixture;

static GPtrArray *warnings;

static void
fixture_set_up (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  fixture->tmp = g_dir_make_tmp ("test-store-XXXXXX", &error);
  g_assert_no_error (error);
  fixture->state = g_build_filename (fixture->tmp, "lib", "microvmd", NULL);
  fixture->runtime = g_build_filename (fixture->tmp, "run", "microvmd", NULL);
  fixture->store = mv_store_new (fixture->state, fixture->runtime, &error);
  g_assert_no_error (error);
  g_assert_nonnull (fixture->store);
  g_ptr_array_set_size (warnings, 0);
}

static void
fixture_tear_down (Fixture *fixture, gconstpointer data)
{
  g_clear_pointer (&fixture->store, mv_store_free);
  store_test_remove_all (fixture->tmp);
  g_clear_pointer (&fixture->tmp, g_free);
  g_clear_pointer (&fixture->state, g_free);
  g_clear_pointer (&fixture->runtime, g_free);
}

static MvConfig *
make_config (const char *name)
{
  g_autofree char *json = g_strdup_printf ("{\"name\":\"%s\",\"kernel\":\"/boot/vmlinuz\"}",
                                           name);
  g_autofree char *id = mv_id_new ();
  g_autoptr(GError) error = NULL;
  MvSpec *spec = mv_spec_from_json (json, &error);

  g_assert_no_error (error);
  return mv_config_new (id, spec, g_get_real_time ());
}

static MvConfig *
create_machine (Fixture *fixture, const char *name)
{
  g_autoptr(MvConfig) config = make_config (name);
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_store_create_machine (fixture->store, config, status, &error));
  g_assert_no_error (error);
  return g_steal_pointer (&config);
}

static GPtrArray *
new_invalid_array (void)
{
  return g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
}

static GPtrArray *
load (Fixture *fixture, GPtrArray *invalid)
{
  GPtrArray *records = mv_store_load_machines (fixture->store, invalid);

  g_assert_nonnull (records);
  for (guint i = 0; invalid != NULL && i < invalid->len; i++)
    {
      MvInvalidRecord *bad = g_ptr_array_index (invalid, i);

      g_test_message ("invalid: %s: %s", bad->path, bad->reason);
    }
  return records;
}

static char *
read_file (const char *path)
{
  g_autoptr(GError) error = NULL;
  char *contents = NULL;

  g_file_get_contents (path, &contents, NULL, &error);
  g_assert_no_error (error);
  return contents;
}

static void
write_file (const char *path, const char *contents)
{
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, contents, -1, &error);
  g_assert_no_error (error);
}

static guint
mode_of (const char *path)
{
  GStatBuf buf;

  g_assert_cmpint (g_lstat (path, &buf), ==, 0);
  return buf.st_mode & 07777;
}

static gboolean
exists (const char *path)
{
  GStatBuf buf;

  return g_lstat (path, &buf) == 0;
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Sorted names in a directory, joined by spaces. */
static char *
list_dir (const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = g_dir_open (path, 0, &error);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  g_assert_no_error (error);
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

/* Everything about a directory tree that loading must not change: each
 * entry's name, inode, mode, mtime and, for files, bytes. */
static void
snapshot_entry (GString *out, const char *path)
{
  GStatBuf buf;

  g_assert_cmpint (g_lstat (path, &buf), ==, 0);
  g_string_append_printf (out, "%s ino=%lu mode=%o mtime=%ld.%09ld size=%ld\n", path,
                          (gulong) buf.st_ino, buf.st_mode, (long) buf.st_mtim.tv_sec,
                          (long) buf.st_mtim.tv_nsec, (long) buf.st_size);
  if (S_ISREG (buf.st_mode))
    {
      g_autofree char *contents = read_file (path);

      g_string_append_printf (out, "<%s>\n", contents);
    }
  else if (S_ISDIR (buf.st_mode))
    {
      g_autofree char *listing = list_dir (path);
      g_auto(GStrv) names = g_strsplit (listing, " ", -1);

      for (guint i = 0; names[i] != NULL; i++)
        if (*names[i] != '\0')
          {
            g_autofree char *child = g_build_filename (path, names[i], NULL);

            snapshot_entry (out, child);
          }
    }
}

static char *
snapshot (const char *path)
{
  GString *out = g_string_new (NULL);

  snapshot_entry (out, path);
  return g_string_free (out, FALSE);
}

/* mv_write_file_atomic */

static void
test_atomic_write (Fixture *fixture, gconstpointer data)
{
  g_autofree char *dir = g_build_filename (fixture->tmp, "atomic", NULL);
  g_autofree char *path = g_build_filename (dir, "file.json", NULL);
  g_autofree char *contents = NULL;
  g_autofree char *listing = NULL;
  g_autoptr(GError) error = NULL;
  GStatBuf before, after;
  mode_t old_umask;

  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);

  g_assert_true (mv_write_file_atomic (path, "first", 5, &error));
  g_assert_no_error (error);
  contents = read_file (path);
  g_assert_cmpstr (contents, ==, "first");
  g_assert_cmpuint (mode_of (path), ==, 0600);
  g_assert_cmpint (g_stat (path, &before), ==, 0);

  /* The replacement is a new file renamed over the old one, never the old
   * one rewritten in place; a umask does not loosen the mode. */
  old_umask = umask (0);
  g_assert_true (mv_write_file_atomic (path, "second, longer", 14, &error));
  umask (old_umask);
  g_assert_no_error (error);
  g_clear_pointer (&contents, g_free);
  contents = read_file (path);
  g_assert_cmpstr (contents, ==, "second, longer");
  g_assert_cmpuint (mode_of (path), ==, 0600);
  g_assert_cmpint (g_stat (path, &after), ==, 0);
  g_assert_cmpuint (after.st_ino, !=, before.st_ino);

  /* Empty content is a valid file, and binary bytes go through as is. */
  g_assert_true (mv_write_file_atomic (path, "a\0b", 3, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (path, &after), ==, 0);
  g_assert_cmpint (after.st_size, ==, 3);
  g_assert_true (mv_write_file_atomic (path, "", 0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (path, &after), ==, 0);
  g_assert_cmpint (after.st_size, ==, 0);

  listing = list_dir (dir);
  g_assert_cmpstr (listing, ==, "file.json");
}

static void
test_atomic_write_failures (Fixture *fixture, gconstpointer data)
{
  g_autofree char *dir = g_build_filename (fixture->tmp, "atomic", NULL);
  g_autofree char *missing = g_build_filename (fixture->tmp, "nowhere", "file.json", NULL);
  g_autofree char *target = g_build_filename (dir, "target", NULL);
  g_autofree char *listing = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_false (mv_write_file_atomic (missing, "x", 1, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, missing));
  g_assert_nonnull (strstr (error->message, g_strerror (ENOENT)));
  g_clear_error (&error);

  /* The rename fails (the target is a directory): the temporary file
   * written so far must not stay behind. */
  g_assert_cmpint (g_mkdir_with_parents (target, 0700), ==, 0);
  g_assert_false (mv_write_file_atomic (target, "x", 1, &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, target));
  listing = list_dir (dir);
  g_assert_cmpstr (listing, ==, "target");
}

/* mv_store_new */

static void
test_new_creates_directories (Fixture *fixture, gconstpointer data)
{
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *runtime_machines = g_build_filename (fixture->runtime, "machines", NULL);
  g_autofree char *admin = g_build_filename (fixture->tmp, "admin", NULL);
  g_autofree char *admin_run = g_build_filename (fixture->tmp, "admin-run", NULL);
  g_autofree char *admin_machines = g_build_filename (admin, "machines", NULL);
  g_autoptr(MvStore) store = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_cmpuint (mode_of (fixture->state), ==, 0700);
  g_assert_cmpuint (mode_of (machines), ==, 0700);
  g_assert_cmpuint (mode_of (fixture->runtime), ==, 0700);
  g_assert_cmpuint (mode_of (runtime_machines), ==, 0700);
  g_assert_cmpstr (mv_store_state_dir (fixture->store), ==, fixture->state);
  g_assert_cmpstr (mv_store_runtime_dir (fixture->store), ==, fixture->runtime);

  /* Directories the administrator made keep their modes. */
  g_assert_cmpint (g_mkdir (admin, 0755), ==, 0);
  g_assert_cmpint (chmod (admin, 0751), ==, 0);
  g_assert_cmpint (g_mkdir (admin_run, 0755), ==, 0);
  g_assert_cmpint (chmod (admin_run, 0755), ==, 0);
  store = mv_store_new (admin, admin_run, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (mode_of (admin), ==, 0751);
  g_assert_cmpuint (mode_of (admin_run), ==, 0755);
  g_assert_cmpuint (mode_of (admin_machines), ==, 0700);
  g_clear_pointer (&store, mv_store_free);

  /* A state directory that is a file is an error, not a surprise later. */
  {
    g_autofree char *file = g_build_filename (fixture->tmp, "file", NULL);

    write_file (file, "");
    store = mv_store_new (file, admin_run, &error);
    g_assert_null (store);
    g_assert_nonnull (error);
    g_assert_nonnull (strstr (error->message, file));
  }
}

static void
test_paths (Fixture *fixture, gconstpointer data)
{
  g_autofree char *dir = mv_store_machine_dir (fixture->store, "abc");
  g_autofree char *run = mv_store_machine_runtime_dir (fixture->store, "abc");
  g_autofree char *expected_dir = g_build_filename (fixture->state, "machines", "abc", NULL);
  g_autofree char *expected_run = g_build_filename (fixture->runtime, "machines", "abc", NULL);

  g_assert_cmpstr (dir, ==, expected_dir);
  g_assert_cmpstr (run, ==, expected_run);
}

/* A runtime directory made for a start says so; one that was there
 * already (an earlier start's, whatever it left) does not. */
static void
test_runtime_dir_made (Fixture *fixture, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *run = mv_store_machine_runtime_dir (fixture->store, "abc");
  MvRecords *records = mv_store_records_new (fixture->store);
  gboolean made = FALSE;
  struct stat st;

  g_assert_true (records->make_runtime_dir (records, "abc", &made, &error));
  g_assert_no_error (error);
  g_assert_true (made);
  g_assert_cmpint (stat (run, &st), ==, 0);
  g_assert_true (S_ISDIR (st.st_mode));
  g_assert_cmpuint (st.st_mode & 0777, ==, 0700);

  g_assert_true (records->make_runtime_dir (records, "abc", &made, &error));
  g_assert_no_error (error);
  g_assert_false (made);

  /* Something else in its place is not taken for it. */
  g_assert_true (records->remove_runtime_dir (records, "abc", &error));
  g_assert_true (g_file_set_contents (run, "", 0, NULL));
  g_assert_false (records->make_runtime_dir (records, "abc", &made, &error));
  g_assert_nonnull (error);
  g_free (records);
}

/* create, load, save */

static void
assert_same_config (const MvConfig *a, const MvConfig *b)
{
  g_autoptr(JsonNode) na = mv_config_to_node (a);
  g_autoptr(JsonNode) nb = mv_config_to_node (b);
  g_autofree char *ja = json_to_string (na, TRUE);
  g_autofree char *jb = json_to_string (nb, TRUE);

  g_assert_cmpstr (ja, ==, jb);
}

static void
test_create_load (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) b = create_machine (fixture, "b");
  g_autoptr(MvConfig) a = create_machine (fixture, "a");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *dir = mv_store_machine_dir (fixture->store, a->id);
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *status_path = g_build_filename (dir, "status.json", NULL);
  g_autofree char *listing = NULL;
  g_autofree char *expected = NULL;
  MvRecord *record;

  g_assert_cmpuint (mode_of (dir), ==, 0700);
  g_assert_cmpuint (mode_of (config_path), ==, 0600);
  g_assert_cmpuint (mode_of (status_path), ==, 0600);
  listing = list_dir (dir);
  g_assert_cmpstr (listing, ==, "config.json status.json");
  g_clear_pointer (&listing, g_free);

  /* Only the two records: no staging directory stays behind. */
  listing = list_dir (machines);
  expected = strcmp (a->id, b->id) < 0 ? g_strdup_printf ("%s %s", a->id, b->id)
                                       : g_strdup_printf ("%s %s", b->id, a->id);
  g_assert_cmpstr (listing, ==, expected);

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 2);
  /* Sorted by name, whatever the IDs. */
  record = g_ptr_array_index (records, 0);
  assert_same_config (record->config, a);
  g_assert_cmpint (record->status->state, ==, MV_STATE_STOPPED);
  record = g_ptr_array_index (records, 1);
  assert_same_config (record->config, b);
  g_assert_cmpuint (warnings->len, ==, 0);
}

static void
test_create_without_status (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = make_config ("fresh");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *listing = NULL;
  MvRecord *record;

  g_assert_true (mv_store_create_machine (fixture->store, config, NULL, &error));
  g_assert_no_error (error);
  dir = mv_store_machine_dir (fixture->store, config->id);
  listing = list_dir (dir);
  g_assert_cmpstr (listing, ==, "config.json status.json");

  records = load (fixture, invalid);
  g_assert_cmpuint (records->len, ==, 1);
  record = g_ptr_array_index (records, 0);
  g_assert_cmpint (record->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpuint (record->status->observed_generation, ==, 0);
}

static void
test_create_existing (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) first = create_machine (fixture, "first");
  g_autoptr(MvConfig) second = make_config ("second");
  g_autoptr(GError) error = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;

  g_free (second->id);
  second->id = g_strdup (first->id);

  before = snapshot (machines);
  g_assert_false (mv_store_create_machine (fixture->store, second, NULL, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_ALREADY_EXISTS);
  g_assert_nonnull (strstr (error->message, first->id));
  after = snapshot (machines);
  g_assert_cmpstr (after, ==, before);
}

static void
test_create_bad_id (Fixture *fixture, gconstpointer data)
{
  const char *const ids[] = { "", "../escape", ".staging-x", "a/b", ".." };
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (ids); i++)
    {
      g_autoptr(MvConfig) config = make_config ("bad");
      g_autoptr(GError) error = NULL;
      g_autofree char *listing = NULL;

      g_free (config->id);
      config->id = g_strdup (ids[i]);
      g_assert_false (mv_store_create_machine (fixture->store, config, NULL, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_false (mv_store_remove_machine (fixture->store, ids[i], NULL));
      listing = list_dir (machines);
      g_assert_cmpstr (listing, ==, "");
    }
}

static void
test_save (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = create_machine (fixture, "saved");
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(MvConfig) unknown = make_config ("unknown");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
  g_autofree char *unknown_dir = mv_store_machine_dir (fixture->store, unknown->id);
  g_autofree char *listing = NULL;
  MvRecord *record;

  g_assert_true (mv_config_set_desired (config, MV_DESIRED_RUNNING, g_get_real_time ()));
  g_assert_true (mv_store_save_config (fixture->store, config, &error));
  g_assert_no_error (error);

  status->state = MV_STATE_RUNNING;
  status->observed_generation = config->desired_generation;
  status->phase = g_strdup ("start");
  status->operation_id = g_strdup ("op-1");
  g_assert_true (mv_store_save_status (fixture->store, config->id, status, &error));
  g_assert_no_error (error);

  listing = list_dir (dir);
  g_assert_cmpstr (listing, ==, "config.json status.json");

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 1);
  record = g_ptr_array_index (records, 0);
  assert_same_config (record->config, config);
  g_assert_cmpint (record->config->desired, ==, MV_DESIRED_RUNNING);
  g_assert_cmpint (record->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpstr (record->status->phase, ==, "start");
  g_assert_cmpstr (record->status->operation_id, ==, "op-1");
  g_assert_cmpuint (record->status->observed_generation, ==, config->desired_generation);

  /* Saving never creates a record. */
  g_assert_false (mv_store_save_config (fixture->store, unknown, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (mv_store_save_status (fixture->store, unknown->id, status, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_assert_false (exists (unknown_dir));
}

/* Invalid records */

typedef enum {
  CORRUPT_TRUNCATED_CONFIG,
  CORRUPT_EMPTY_CONFIG,
  CORRUPT_NOT_AN_OBJECT,
  CORRUPT_WRONG_TYPE,
  CORRUPT_UNKNOWN_FIELD,
  CORRUPT_NO_FORMAT,
  CORRUPT_MISSING_CONFIG,
  CORRUPT_BAD_STATE,
  CORRUPT_TRUNCATED_STATUS,
  CORRUPT_STATUS_NEWER,
  CORRUPT_ID_MISMATCH,
  CORRUPT_NOT_A_DIRECTORY,
  CORRUPT_SYMLINK,
  CORRUPT_CONFIG_SYMLINK,
  CORRUPT_DEEP_STATUS,
  CORRUPT_OVERSIZED_CONFIG,
  CORRUPT_COMMENT_CONFIG,
  CORRUPT_DUPLICATE_KEY_CONFIG,
  CORRUPT_NUL_STATUS,
  CORRUPT_SECOND_VALUE_STATUS,
} Corruption;

/* A status.json that json-glib would recurse 100,000 levels into. */
static char *
deep_status (void)
{
  GString *s = g_string_new ("{\"format\":1,\"state\":\"Stopped\",\"observed_generation\":0,"
                             "\"vmm\":{\"a\":");

  for (guint i = 0; i < 100000; i++)
    g_string_append_c (s, '[');
  for (guint i = 0; i < 100000; i++)
    g_string_append_c (s, ']');
  g_string_append (s, "}}\n");
  return g_string_free (s, FALSE);
}

/* Edits the top level of a JSON record file and writes it back. */
static void
edit_member (const char *path, const char *member, JsonNode *value /* owned */)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *json = NULL;
  JsonObject *object;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  object = json_node_get_object (json_parser_get_root (parser));
  if (value != NULL)
    json_object_set_member (object, member, value);
  else
    json_object_remove_member (object, member);
  json = json_to_string (json_parser_get_root (parser), TRUE);
  write_file (path, json);
}

static JsonNode *
string_node (const char *s)
{
  JsonNode *node = json_node_new (JSON_NODE_VALUE);

  json_node_set_string (node, s);
  return node;
}

static JsonNode *
int_node (gint64 i)
{
  JsonNode *node = json_node_new (JSON_NODE_VALUE);

  json_node_set_int (node, i);
  return node;
}

/* Spoils the machine @config in the way @corruption says; returns the path
 * the store must report. */
static char *
corrupt (Fixture *fixture, const MvConfig *config, Corruption corruption)
{
  g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *status_path = g_build_filename (dir, "status.json", NULL);

  switch (corruption)
    {
    case CORRUPT_TRUNCATED_CONFIG:
      {
        g_autofree char *contents = read_file (config_path);

        contents[strlen (contents) / 2] = '\0';
        write_file (config_path, contents);
        return g_steal_pointer (&config_path);
      }
    case CORRUPT_EMPTY_CONFIG:
      write_file (config_path, "");
      return g_steal_pointer (&config_path);
    case CORRUPT_NOT_AN_OBJECT:
      write_file (config_path, "[1, 2, 3]\n");
      return g_steal_pointer (&config_path);
    case CORRUPT_WRONG_TYPE:
      edit_member (config_path, "desired_generation", string_node ("three"));
      return g_steal_pointer (&config_path);
    case CORRUPT_UNKNOWN_FIELD:
      edit_member (config_path, "colour", string_node ("blue"));
      return g_steal_pointer (&config_path);
    case CORRUPT_NO_FORMAT:
      edit_member (config_path, "format", NULL);
      return g_steal_pointer (&config_path);
    case CORRUPT_MISSING_CONFIG:
      g_assert_cmpint (g_unlink (config_path), ==, 0);
      return g_steal_pointer (&config_path);
    case CORRUPT_BAD_STATE:
      edit_member (status_path, "state", string_node ("Flying"));
      return g_steal_pointer (&status_path);
    case CORRUPT_TRUNCATED_STATUS:
      write_file (status_path, "{\"format\": 1, \"state\": \"Runn");
      return g_steal_pointer (&status_path);
    case CORRUPT_STATUS_NEWER:
      edit_member (status_path, "format", int_node (7));
      return g_steal_pointer (&status_path);
    case CORRUPT_ID_MISMATCH:
      {
        g_autofree char *other_id = mv_id_new ();
        g_autofree char *other_dir = mv_store_machine_dir (fixture->store, other_id);

        g_assert_cmpint (g_rename (dir, other_dir), ==, 0);
        return g_steal_pointer (&other_dir);
      }
    case CORRUPT_NOT_A_DIRECTORY:
      g_assert_true (mv_store_remove_machine (fixture->store, config->id, NULL));
      write_file (dir, "{}");
      return g_steal_pointer (&dir);
    case CORRUPT_SYMLINK:
      {
        g_autofree char *elsewhere = g_build_filename (fixture->tmp, "elsewhere", NULL);

        g_assert_cmpint (g_rename (dir, elsewhere), ==, 0);
        g_assert_cmpint (symlink (elsewhere, dir), ==, 0);
        return g_steal_pointer (&dir);
      }
    case CORRUPT_CONFIG_SYMLINK:
      {
        g_autofree char *elsewhere = g_build_filename (fixture->tmp, "config.json", NULL);

        g_assert_cmpint (g_rename (config_path, elsewhere), ==, 0);
        g_assert_cmpint (symlink (elsewhere, config_path), ==, 0);
        return g_steal_pointer (&config_path);
      }
    case CORRUPT_DEEP_STATUS:
      {
        g_autofree char *deep = deep_status ();

        write_file (status_path, deep);
        return g_steal_pointer (&status_path);
      }
    case CORRUPT_OVERSIZED_CONFIG:
      {
        /* Valid JSON and a valid record but for its size. */
        g_autofree char *contents = read_file (config_path);
        g_autofree char *padding = g_strnfill (MV_RECORD_MAX_BYTES + 1, ' ');
        g_autofree char *padded = g_strconcat (contents, padding, NULL);

        write_file (config_path, padded);
        return g_steal_pointer (&config_path);
      }
    case CORRUPT_COMMENT_CONFIG:
      {
        g_autofree char *contents = read_file (config_path);
        g_autofree char *commented = g_strconcat ("/* edited by hand */\n", contents, NULL);

        write_file (config_path, commented);
        return g_steal_pointer (&config_path);
      }
    case CORRUPT_DUPLICATE_KEY_CONFIG:
      {
        g_autofree char *contents = read_file (config_path);
        g_autofree char *twice = g_strconcat ("{\"desired_state\":\"running\",", contents + 1, NULL);

        write_file (config_path, twice);
        return g_steal_pointer (&config_path);
      }
    case CORRUPT_NUL_STATUS:
      write_file (status_path, "{\"format\":1,\"state\":\"Stopped\",\"observed_generation\":0,"
                  "\"state_error\":\"a\\u0000b\"}\n");
      return g_steal_pointer (&status_path);
    case CORRUPT_SECOND_VALUE_STATUS:
      write_file (status_path, "{\"format\":1,\"state\":\"Stopped\",\"observed_generation\":0}"
                  "{\"format\":1,\"state\":\"Running\",\"observed_generation\":0}\n");
      return g_steal_pointer (&status_path);
    default:
      g_assert_not_reached ();
    }
}

static void
test_invalid_record (Fixture *fixture, gconstpointer data)
{
  Corruption corruption = GPOINTER_TO_INT (data);
  g_autoptr(MvConfig) good = create_machine (fixture, "good");
  g_autoptr(MvConfig) bad = create_machine (fixture, "bad");
  g_autoptr(MvConfig) other = create_machine (fixture, "other");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GPtrArray) again = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *bad_path = NULL;
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;
  MvInvalidRecord *reported;

  bad_path = corrupt (fixture, bad, corruption);

  /* A temp file of an interrupted write beside the damage belongs to the
   * invalid record too, and must stay. */
  if (corruption == CORRUPT_BAD_STATE)
    {
      g_autofree char *dir = mv_store_machine_dir (fixture->store, bad->id);
      g_autofree char *temp = g_build_filename (dir, ".status.json.Ab12Cd", NULL);

      write_file (temp, "{\"format\": 1, \"st");
    }

  before = snapshot (machines);
  records = load (fixture, invalid);

  g_assert_cmpuint (invalid->len, ==, 1);
  reported = g_ptr_array_index (invalid, 0);
  g_assert_cmpstr (reported->path, ==, bad_path);
  g_assert_nonnull (reported->reason);
  g_assert_cmpstr (reported->reason, !=, "");
  g_assert_true (store_test_warned_about (bad_path));

  /* The valid machines beside it load. */
  g_assert_cmpuint (records->len, ==, 2);
  assert_same_config (((MvRecord *) g_ptr_array_index (records, 0))->config, good);
  assert_same_config (((MvRecord *) g_ptr_array_index (records, 1))->config, other);

  /* Byte for byte, inode for inode, as it was; and again next start. */
  after = snapshot (machines);
  g_assert_cmpstr (after, ==, before);
  g_ptr_array_set_size (invalid, 0);
  again = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 1);
  g_assert_cmpuint (again->len, ==, 2);
  g_clear_pointer (&after, g_free);
  after = snapshot (machines);
  g_assert_cmpstr (after, ==, before);
}

static void
test_invalid_reasons (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = create_machine (fixture, "m");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autofree char *path = corrupt (fixture, config, CORRUPT_ID_MISMATCH);
  MvInvalidRecord *reported;

  records = load (fixture, invalid);
  g_assert_cmpuint (records->len, ==, 0);
  g_assert_cmpuint (invalid->len, ==, 1);
  reported = g_ptr_array_index (invalid, 0);
  g_assert_cmpstr (reported->path, ==, path);
  g_assert_nonnull (strstr (reported->reason, config->id));

  /* A NULL @invalid still logs and skips. */
  g_ptr_array_set_size (warnings, 0);
  g_clear_pointer (&records, g_ptr_array_unref);
  records = load (fixture, NULL);
  g_assert_cmpuint (records->len, ==, 0);
  g_assert_true (store_test_warned_about (path));
}

/* What a record too deep or too large is reported as: the file and the
 * limit, without the daemon ever reading it as a tree. */
static void
test_invalid_limits (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) deep = create_machine (fixture, "deep");
  g_autoptr(MvConfig) large = create_machine (fixture, "large");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autofree char *deep_path = corrupt (fixture, deep, CORRUPT_DEEP_STATUS);
  g_autofree char *large_path = corrupt (fixture, large, CORRUPT_OVERSIZED_CONFIG);
  g_autofree char *deep_reason = g_strdup_printf ("status.json: nesting depth %d is more than "
                                                  "the limit of %d", MV_RECORD_MAX_DEPTH + 1,
                                                  MV_RECORD_MAX_DEPTH);
  g_autofree char *large_reason = NULL;
  GStatBuf buf;

  g_assert_cmpint (g_stat (large_path, &buf), ==, 0);
  large_reason = g_strdup_printf ("config.json: %ld bytes is more than the limit of %d",
                                  (long) buf.st_size, MV_RECORD_MAX_BYTES);

  records = load (fixture, invalid);
  g_assert_cmpuint (records->len, ==, 0);
  g_assert_cmpuint (invalid->len, ==, 2);
  for (guint i = 0; i < invalid->len; i++)
    {
      MvInvalidRecord *reported = g_ptr_array_index (invalid, i);

      if (g_strcmp0 (reported->path, deep_path) == 0)
        g_assert_cmpstr (reported->reason, ==, deep_reason);
      else
        {
          g_assert_cmpstr (reported->path, ==, large_path);
          g_assert_cmpstr (reported->reason, ==, large_reason);
        }
    }
}

/* Records as written */

/* config.json and status.json hold one member or element per line, none
 * of them indented, and read back strictly. */
static void
test_written_without_indentation (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = create_machine (fixture, "plain");
  g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
  static const char *const files[] = { "config.json", "status.json" };

  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i], NULL);
      g_autofree char *contents = read_file (path);
      g_auto(GStrv) lines = g_strsplit (contents, "\n", -1);
      static const MvJsonLimits limits = { MV_RECORD_MAX_BYTES, MV_RECORD_MAX_DEPTH };
      g_autoptr(GError) error = NULL;

      for (guint j = 0; lines[j] != NULL; j++)
        g_assert_false (g_ascii_isspace (lines[j][0]));
      g_assert_true (mv_json_check (contents, -1, &limits, files[i], &error));
      g_assert_no_error (error);
    }
}

/* {"name":"deep","kernel":"/k","firewall":[{"a":[[...[1,1,...]...]]}]},
 * nested to the spec's own limit with @breadth elements at the bottom. */
static char *
deep_spec_json (guint breadth)
{
  GString *s = g_string_new ("{\"name\":\"deep\",\"kernel\":\"/boot/vmlinuz\",\"firewall\":[{\"a\":");
  /* The spec, the firewall and the rule take three levels. */
  guint arrays = MV_SPEC_MAX_DEPTH - 3;

  for (guint i = 0; i < arrays; i++)
    g_string_append_c (s, '[');
  for (guint i = 0; i < breadth; i++)
    g_string_append (s, i == 0 ? "1" : ",1");
  for (guint i = 0; i < arrays; i++)
    g_string_append_c (s, ']');
  g_string_append (s, "}]}");
  return g_string_free (s, FALSE);
}

/* A spec that nests as deep as the reader takes makes a record that grows
 * with its input, not with the square of its depth; the record is one the
 * reader takes back. */
static void
test_record_size_linear (Fixture *fixture, gconstpointer data)
{
  g_autofree char *json = deep_spec_json (20000);
  g_autoptr(GError) error = NULL;
  g_autoptr(MvSpec) spec = mv_spec_from_json (json, &error);
  g_autoptr(MvConfig) config = NULL;
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autofree char *id = mv_id_new ();
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL;
  g_autofree char *contents = NULL;
  static const MvJsonLimits limits = { MV_RECORD_MAX_BYTES, MV_RECORD_MAX_DEPTH };

  g_assert_no_error (error);
  config = mv_config_new (id, g_steal_pointer (&spec), g_get_real_time ());
  g_assert_true (mv_store_create_machine (fixture->store, config, status, &error));
  g_assert_no_error (error);

  dir = mv_store_machine_dir (fixture->store, config->id);
  path = g_build_filename (dir, "config.json", NULL);
  contents = read_file (path);
  g_test_message ("a spec of %" G_GSIZE_FORMAT " bytes made a config.json of %" G_GSIZE_FORMAT,
                  strlen (json), strlen (contents));
  /* Each value costs a newline and " : " at most, whatever its depth. */
  g_assert_cmpuint (strlen (contents), <=, 3 * strlen (json) + 4096);
  g_assert_true (mv_json_check (contents, -1, &limits, "config.json", &error));
  g_assert_no_error (error);
}

/* The largest firewall and the most ports a spec may have are a record
 * that loads. */
static void
test_record_deepest_valid_spec (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = make_config ("rules");
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GError) error = NULL;

  config->spec->network_name = g_strdup ("lan");
  for (guint i = 0; i < MV_FIREWALL_RULES_MAX; i++)
    {
      g_autoptr(JsonObject) rule = json_object_new ();

      json_object_set_string_member (rule, "action", "allow");
      json_object_set_string_member (rule, "protocol", "tcp");
      json_object_set_string_member (rule, "port", "65535-65535");
      json_object_set_string_member (rule, "source", "255.255.255.255/32");
      json_array_add_object_element (config->spec->firewall, g_steal_pointer (&rule));
    }
  for (guint i = 0; i < MV_PORTS_MAX; i++)
    {
      MvPortMapping *port = g_new0 (MvPortMapping, 1);

      port->host_address = 0x7f000001;
      port->host_port = (guint16) (8000 + i);
      port->guest_port = 80;
      port->protocol = MV_NET_PROTOCOL_UDP;
      g_ptr_array_add (config->spec->ports, port);
    }
  g_assert_true (mv_spec_validate (config->spec, &error));
  g_assert_no_error (error);
  g_assert_true (mv_store_create_machine (fixture->store, config, status, &error));
  g_assert_no_error (error);

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 1);
  assert_same_config (((MvRecord *) g_ptr_array_index (records, 0))->config, config);
}

/* A record the reader would not take back is never written: the create
 * fails and leaves nothing, a save fails and leaves the record as it was. */
static void
test_record_too_large_refused (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) huge = make_config ("huge");
  g_autoptr(MvConfig) saved = create_machine (fixture, "saved");
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;
  g_autofree char *listing = NULL;
  g_autofree char *saved_id = g_strdup (saved->id);

  /* The store does not validate specs; its readers' limits hold all the same. */
  huge->spec->user_data = g_strnfill (MV_RECORD_MAX_BYTES, 'u');
  g_assert_false (mv_store_create_machine (fixture->store, huge, status, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "config.json: "));
  g_assert_nonnull (strstr (error->message, "bytes is more than the limit of"));
  g_clear_error (&error);
  listing = list_dir (machines);
  g_assert_cmpstr (listing, ==, saved_id);

  before = snapshot (machines);
  saved->spec->user_data = g_strnfill (MV_RECORD_MAX_BYTES, 'u');
  g_assert_false (mv_store_save_config (fixture->store, saved, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  status->state_error = g_strnfill (MV_RECORD_MAX_BYTES, 'e');
  g_assert_false (mv_store_save_status (fixture->store, saved->id, status, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "status.json: "));
  after = snapshot (machines);
  g_assert_cmpstr (after, ==, before);
}

/* Leftovers of interrupted operations */

static void
test_leftovers_cleaned (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = create_machine (fixture, "kept");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *gone_id = mv_id_new ();
  g_autofree char *staging = g_build_filename (machines, ".staging-abc-Q1w2E3", NULL);
  g_autofree char *removing_name = g_strdup_printf (".removing-%s", gone_id);
  g_autofree char *removing = g_build_filename (machines, removing_name, NULL);
  g_autofree char *removing_metrics = g_build_filename (removing, "metrics", NULL);
  g_autofree char *gone_runtime = mv_store_machine_runtime_dir (fixture->store, gone_id);
  g_autofree char *hidden = g_build_filename (machines, ".hidden", NULL);
  g_autofree char *dotfile = g_build_filename (machines, ".keep", NULL);
  g_autofree char *staging_file = g_build_filename (machines, ".staging-file", NULL);
  g_autofree char *listing = NULL;
  g_autofree char *expected = NULL;

  /* A create that died before its rename... */
  g_assert_cmpint (g_mkdir (staging, 0700), ==, 0);
  {
    g_autofree char *file = g_build_filename (staging, "config.json", NULL);
    write_file (file, "{\"format\": 2, \"id\": \"abc\"");
  }
  /* ...a removal that died after its rename, with its runtime dir... */
  g_assert_cmpint (g_mkdir_with_parents (removing_metrics, 0700), ==, 0);
  {
    g_autofree char *status = g_build_filename (removing, "status.json", NULL);
    g_autofree char *day = g_build_filename (removing_metrics, "2026-11-29.json", NULL);
    g_autofree char *socket = g_build_filename (gone_runtime, "api.sock", NULL);

    write_file (status, "{}");
    write_file (day, "{}");
    g_assert_cmpint (g_mkdir_with_parents (gone_runtime, 0700), ==, 0);
    write_file (socket, "");
  }
  /* ...a removing dir whose name holds no ID, which must not lead the
   * runtime cleanup out of runtime/machines... */
  {
    g_autofree char *odd = g_build_filename (machines, ".removing-..", NULL);
    g_autofree char *marker = g_build_filename (fixture->runtime, "marker", NULL);

    g_assert_cmpint (g_mkdir (odd, 0700), ==, 0);
    write_file (marker, "");
  }
  /* ...and dot-entries the store does not own. */
  g_assert_cmpint (g_mkdir (hidden, 0700), ==, 0);
  write_file (dotfile, "");
  write_file (staging_file, "");

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 1);
  g_assert_cmpuint (warnings->len, ==, 0);

  g_assert_false (exists (staging));
  g_assert_false (exists (removing));
  g_assert_false (exists (gone_runtime));
  {
    g_autofree char *odd = g_build_filename (machines, ".removing-..", NULL);
    g_autofree char *marker = g_build_filename (fixture->runtime, "marker", NULL);
    g_autofree char *runtime_machines = g_build_filename (fixture->runtime, "machines", NULL);

    g_assert_false (exists (odd));
    g_assert_true (exists (marker));
    g_assert_true (exists (runtime_machines));
  }
  listing = list_dir (machines);
  expected = g_strdup_printf (".hidden .keep .staging-file %s", config->id);
  g_assert_cmpstr (listing, ==, expected);
}

typedef struct {
  char *entry;   /* its name in machines/ */
  char *path;
} BadOne;

static void
bad_one_free (BadOne *bad)
{
  g_free (bad->entry);
  g_free (bad->path);
  g_free (bad);
}

static gint
compare_bad_ids (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(BadOne *const *) a)->entry, (*(BadOne *const *) b)->entry);
}

/* Enough records that they are read on several threads: what comes back
 * is what reading them one by one gives, in the same order, and the litter
 * of interrupted writes is gone from every directory. */
static void
test_load_many (Fixture *fixture, gconstpointer data)
{
  static const Corruption kinds[] = {
    CORRUPT_TRUNCATED_CONFIG, CORRUPT_BAD_STATE, CORRUPT_ID_MISMATCH,
    CORRUPT_NOT_A_DIRECTORY, CORRUPT_DEEP_STATUS,
  };
  g_autoptr(GPtrArray) good = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_config_free);
  g_autoptr(GPtrArray) bad = g_ptr_array_new_with_free_func ((GDestroyNotify) bad_one_free);
  g_autoptr(GPtrArray) litter = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;

  for (guint i = 0; i < 300; i++)
    {
      g_autofree char *name = g_strdup_printf ("m%03u", i);
      g_autoptr(MvConfig) config = create_machine (fixture, name);

      if (i % 10 == 3)
        {
          g_autofree char *machines = g_strconcat (fixture->state, "/machines/", NULL);
          BadOne *one = g_new0 (BadOne, 1);

          one->path = corrupt (fixture, config, kinds[(i / 10) % G_N_ELEMENTS (kinds)]);
          /* The one whose ID does not match lives elsewhere. */
          one->entry = g_strndup (one->path + strlen (machines),
                                  strcspn (one->path + strlen (machines), "/"));
          g_ptr_array_add (bad, one);
          continue;
        }
      if (i % 10 == 5)
        {
          g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
          char *temp = g_build_filename (dir, ".status.json.Zz9Yy8", NULL);

          write_file (temp, "{\"format\": 1, \"st");
          g_ptr_array_add (litter, temp);
        }
      g_ptr_array_add (good, g_steal_pointer (&config));
    }

  records = load (fixture, invalid);

  g_assert_cmpuint (records->len, ==, good->len);
  for (guint i = 0; i < good->len; i++)
    assert_same_config (((MvRecord *) g_ptr_array_index (records, i))->config,
                        g_ptr_array_index (good, i));
  /* Invalid ones in the order of their directories' names, each warned of. */
  g_ptr_array_sort (bad, compare_bad_ids);
  g_assert_cmpuint (invalid->len, ==, bad->len);
  g_assert_cmpuint (warnings->len, ==, bad->len);
  for (guint i = 0; i < bad->len; i++)
    {
      MvInvalidRecord *reported = g_ptr_array_index (invalid, i);
      BadOne *one = g_ptr_array_index (bad, i);

      g_assert_cmpstr (reported->path, ==, one->path);
      g_assert_nonnull (strstr (g_ptr_array_index (warnings, i), one->path));
    }
  for (guint i = 0; i < litter->len; i++)
    g_assert_false (exists (g_ptr_array_index (litter, i)));
}

static void
test_interrupted_write (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = create_machine (fixture, "steady");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *temp = g_build_filename (dir, ".config.json.Zx81Qa", NULL);
  g_autofree char *status_temp = g_build_filename (dir, ".status.json.k3Lm0p", NULL);
  g_autofree char *old = read_file (config_path);
  g_autofree char *now = NULL;
  g_autofree char *listing = NULL;

  /* A crash between write and rename: half a new config beside the old. */
  write_file (temp, "{\n  \"format\": 2,\n  \"id\": \"");
  write_file (status_temp, "");

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 1);
  assert_same_config (((MvRecord *) g_ptr_array_index (records, 0))->config, config);
  now = read_file (config_path);
  g_assert_cmpstr (now, ==, old);

  /* The litter of a valid record is swept. */
  listing = list_dir (dir);
  g_assert_cmpstr (listing, ==, "config.json status.json");
}

/* Only a directory that holds more than its records, its litter and its
 * destroy marker is worth sweeping for what a crash left. */
static void
test_other_files (Fixture *fixture, gconstpointer data)
{
  const char *names[] = { "plain", "littered", "with-disk" };
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autoptr(MvConfig) config = create_machine (fixture, names[i]);
      g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
      g_autofree char *temp = g_build_filename (dir, ".config.json.Ab12Cd", NULL);
      g_autofree char *disk = g_build_filename (dir, "overlay.ext4", NULL);

      if (i == 1)
        write_file (temp, "{");
      if (i == 2)
        write_file (disk, "");
    }

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, G_N_ELEMENTS (names));
  for (guint i = 0; i < records->len; i++)
    {
      MvRecord *record = g_ptr_array_index (records, i);
      const char *name = record->config->spec->name;

      g_test_message ("%s", name);
      g_assert_cmpint (record->other_files, ==, g_str_equal (name, "with-disk"));
    }
}

/* Removal */

static void
test_remove (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) doomed = create_machine (fixture, "doomed");
  g_autoptr(MvConfig) survivor = create_machine (fixture, "survivor");
  g_autoptr(GPtrArray) invalid = new_invalid_array ();
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *runtime_machines = g_build_filename (fixture->runtime, "machines", NULL);
  g_autofree char *dir = mv_store_machine_dir (fixture->store, doomed->id);
  g_autofree char *metrics = g_build_filename (dir, "metrics", NULL);
  g_autofree char *run = mv_store_machine_runtime_dir (fixture->store, doomed->id);
  g_autofree char *run_sub = g_build_filename (run, "vsock", NULL);
  g_autofree char *survivor_run = mv_store_machine_runtime_dir (fixture->store, survivor->id);
  g_autofree char *listing = NULL;

  g_assert_cmpint (g_mkdir (metrics, 0700), ==, 0);
  {
    g_autofree char *day = g_build_filename (metrics, "2026-11-29.json", NULL);
    g_autofree char *log = g_build_filename (run, "console.log", NULL);
    g_autofree char *target = g_build_filename (fixture->tmp, "not-followed", NULL);
    g_autofree char *link = g_build_filename (run, "link", NULL);

    write_file (day, "{}");
    g_assert_cmpint (g_mkdir_with_parents (run_sub, 0700), ==, 0);
    write_file (log, "booted\n");
    write_file (target, "keep me");
    g_assert_cmpint (symlink (target, link), ==, 0);
  }
  g_assert_cmpint (g_mkdir_with_parents (survivor_run, 0700), ==, 0);

  g_assert_true (mv_store_remove_machine (fixture->store, doomed->id, &error));
  g_assert_no_error (error);

  g_assert_false (exists (dir));
  g_assert_false (exists (run));
  listing = list_dir (machines);
  g_assert_cmpstr (listing, ==, survivor->id);
  g_clear_pointer (&listing, g_free);
  listing = list_dir (runtime_machines);
  g_assert_cmpstr (listing, ==, survivor->id);
  {
    /* Symbolic links in the runtime dir are removed, not followed. */
    g_autofree char *target = g_build_filename (fixture->tmp, "not-followed", NULL);
    g_autofree char *kept = read_file (target);

    g_assert_cmpstr (kept, ==, "keep me");
  }

  records = load (fixture, invalid);
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 1);
  assert_same_config (((MvRecord *) g_ptr_array_index (records, 0))->config, survivor);

  /* Removing again finds nothing left to do. */
  g_assert_true (mv_store_remove_machine (fixture->store, doomed->id, &error));
  g_assert_no_error (error);

  /* The same id can be created again. */
  {
    g_autoptr(GError) create_error = NULL;

    g_assert_true (mv_store_create_machine (fixture->store, doomed, NULL, &create_error));
    g_assert_no_error (create_error);
  }
}

static void
test_remove_resumes (Fixture *fixture, gconstpointer data)
{
  g_autoptr(MvConfig) config = create_machine (fixture, "again");
  g_autoptr(GError) error = NULL;
  g_autofree char *machines = g_build_filename (fixture->state, "machines", NULL);
  g_autofree char *dir = mv_store_machine_dir (fixture->store, config->id);
  g_autofree char *removing_name = g_strdup_printf (".removing-%s", config->id);
  g_autofree char *removing = g_build_filename (machines, removing_name, NULL);
  g_autofree char *listing = NULL;

  /* A removal stopped after its rename, then the id was created again;
   * the next removal clears both. */
  g_assert_cmpint (g_mkdir (removing, 0700), ==, 0);
  {
    g_autofree char *file = g_build_filename (removing, "status.json", NULL);
    write_file (file, "{}");
  }
  g_assert_true (mv_store_remove_machine (fixture->store, config->id, &error));
  g_assert_no_error (error);
  g_assert_false (exists (dir));
  listing = list_dir (machines);
  g_assert_cmpstr (listing, ==, "");
}

int
main (int argc, char **argv)
{
  static const struct {
    const char *name;
    Corruption corruption;
  } corruptions[] = {
    { "truncated-config", CORRUPT_TRUNCATED_CONFIG },
    { "empty-config", CORRUPT_EMPTY_CONFIG },
    { "not-an-object", CORRUPT_NOT_AN_OBJECT },
    { "wrong-type", CORRUPT_WRONG_TYPE },
    { "unknown-field", CORRUPT_UNKNOWN_FIELD },
    { "no-format", CORRUPT_NO_FORMAT },
    { "missing-config", CORRUPT_MISSING_CONFIG },
    { "bad-state", CORRUPT_BAD_STATE },
    { "truncated-status", CORRUPT_TRUNCATED_STATUS },
    { "status-newer", CORRUPT_STATUS_NEWER },
    { "id-mismatch", CORRUPT_ID_MISMATCH },
    { "not-a-directory", CORRUPT_NOT_A_DIRECTORY },
    { "symlink", CORRUPT_SYMLINK },
    { "config-symlink", CORRUPT_CONFIG_SYMLINK },
    { "deep-status", CORRUPT_DEEP_STATUS },
    { "oversized-config", CORRUPT_OVERSIZED_CONFIG },
    { "comment-config", CORRUPT_COMMENT_CONFIG },
    { "duplicate-key-config", CORRUPT_DUPLICATE_KEY_CONFIG },
    { "nul-status", CORRUPT_NUL_STATUS },
    { "second-value-status", CORRUPT_SECOND_VALUE_STATUS },
  };

  g_test_init (&argc, &argv, NULL);
  warnings = store_test_capture_warnings ();

#define ADD(path, func) \
  g_test_add (path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)

  ADD ("/store/atomic-write", test_atomic_write);
  ADD ("/store/atomic-write-failures", test_atomic_write_failures);
  ADD ("/store/new-creates-directories", test_new_creates_directories);
  ADD ("/store/paths", test_paths);
  ADD ("/store/runtime-dir-made", test_runtime_dir_made);
  ADD ("/store/create-load", test_create_load);
  ADD ("/store/create-without-status", test_create_without_status);
  ADD ("/store/create-existing", test_create_existing);
  ADD ("/store/create-bad-id", test_create_bad_id);
  ADD ("/store/save", test_save);
  ADD ("/store/invalid-reasons", test_invalid_reasons);
  ADD ("/store/invalid-limits", test_invalid_limits);
  ADD ("/store/written-without-indentation", test_written_without_indentation);
  ADD ("/store/record-size-linear", test_record_size_linear);
  ADD ("/store/record-deepest-valid-spec", test_record_deepest_valid_spec);
  ADD ("/store/record-too-large-refused", test_record_too_large_refused);
  ADD ("/store/leftovers-cleaned", test_leftovers_cleaned);
  ADD ("/store/load-many", test_load_many);
  ADD ("/store/interrupted-write", test_interrupted_write);
  ADD ("/store/other-files", test_other_files);
  ADD ("/store/remove", test_remove);
  ADD ("/store/remove-resumes", test_remove_resumes);
#undef ADD

  for (gsize i = 0; i < G_N_ELEMENTS (corruptions); i++)
    {
      g_autofree char *path = g_strdup_printf ("/store/invalid/%s", corruptions[i].name);

      g_test_add (path, Fixture, GINT_TO_POINTER (corruptions[i].corruption),
                  fixture_set_up, test_invalid_record, fixture_tear_down);
    }

  return g_test_run ();
}
