/* The metadata document and Firecracker's MMDS: built from the spec,
 * checked whole before anything is sent, replaced whole. */
#include "vmm-fixture.h"
#include "hypervisor/firecracker.h"
#include "hypervisor/http.h"
#include "hypervisor/metadata.h"
#include "core/errors.h"
#include "core/spec.h"

#include <string.h>

/* {"latest":{"meta-data":{"attributes":{"pad":"xxx..."}}}} of exactly
 * @size bytes. */
static JsonNode *
document_of_size (gsize size)
{
  const char *shell = "{\"latest\":{\"meta-data\":{\"attributes\":{\"pad\":\"\"}}}}";
  g_autofree char *pad = g_strnfill (size - strlen (shell), 'x');
  g_autofree char *text = g_strdup_printf ("{\"latest\":{\"meta-data\":{\"attributes\":{\"pad\":\"%s\"}}}}",
                                           pad);
  g_assert_cmpuint (strlen (text), ==, size);
  return json_from_string (text, NULL);
}

static char *
mmds (const char *socket_path)
{
  g_autoptr (MvHttp) http = mv_http_new (socket_path, "Firecracker");
  g_autoptr (JsonNode) reply = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_http_call_json (http, "GET", "/mmds", NULL, &reply, NULL, &error));
  g_assert_no_error (error);
  return json_to_string (reply, FALSE);
}

static void
test_document (void)
{
  g_autoptr (MvSpec) spec = mv_spec_new ();
  g_autoptr (JsonNode) document = NULL;
  g_autofree char *text = NULL;
  JsonObject *latest, *meta;

  spec->name = g_strdup ("web1");
  g_ptr_array_add (spec->ssh_keys, g_strdup ("ssh-ed25519 AAAA test"));
  spec->user_data = g_strdup ("#cloud-config\n");
  g_hash_table_insert (spec->metadata, g_strdup ("role"), g_strdup ("frontend"));
  document = mv_spec_metadata_document (spec);
  latest = json_object_get_object_member (json_node_get_object (document), "latest");
  meta = json_object_get_object_member (latest, "meta-data");
  /* No hostname given: the machine's name. */
  g_assert_cmpstr (json_object_get_string_member (meta, "hostname"), ==, "web1");
  g_assert_cmpstr (json_array_get_string_element (json_object_get_array_member (meta, "public-keys"), 0),
                   ==, "ssh-ed25519 AAAA test");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (meta, "attributes"),
                                                  "role"), ==, "frontend");
  g_assert_cmpstr (json_object_get_string_member (latest, "user-data"), ==, "#cloud-config\n");
  text = json_to_string (document, FALSE);
  g_assert_cmpuint (strlen (text), ==, mv_spec_metadata_document_size (spec));
}

/* The metadata service holds the spec's 248 KiB and the 8 KiB of
 * console keys beside it (seed 004), and no more. */
static void
test_limit (void)
{
  g_autoptr (JsonNode) at = document_of_size (MV_MMDS_SIZE_LIMIT_BYTES);
  g_autoptr (JsonNode) over = document_of_size (MV_MMDS_SIZE_LIMIT_BYTES + 1);
  g_autoptr (GError) error = NULL;
  g_autofree char *text = mv_metadata_document_serialize (at, &error);

  g_assert_cmpint (MV_METADATA_DOCUMENT_MAX_BYTES, ==, 248 * 1024);
  g_assert_cmpint (MV_CONSOLE_KEYS_MAX_BYTES, ==, 8 * 1024);
  g_assert_cmpint (MV_MMDS_SIZE_LIMIT_BYTES, ==, 256 * 1024);
  g_assert_no_error (error);
  g_assert_cmpuint (strlen (text), ==, 256 * 1024);
  g_assert_null (mv_metadata_document_serialize (over, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "over the metadata service's limit of 262144"));
}

static void
test_boot_with_document (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *served = NULL;
  g_autofree char *expected = NULL;

  /* 248 KiB goes through: the VMM was given room for it. */
  spec->metadata = document_of_size (MV_METADATA_DOCUMENT_MAX_BYTES);
  hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error);
  g_assert_no_error (error);
  served = mmds (fixture->socket_path);
  expected = json_to_string (spec->metadata, FALSE);
  g_assert_cmpstr (served, ==, expected);
}

static void
test_over_limit_sends_nothing (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *log = mv_vmm_log_path (fixture->socket_path);

  spec->metadata = document_of_size (MV_MMDS_SIZE_LIMIT_BYTES + 1);
  g_assert_null (starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "metadata:"));
  /* Refused before anything: no VMM was started, so it had no log. */
  g_assert_null (vmm);
  g_assert_false (g_file_test (fixture->socket_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (log, G_FILE_TEST_EXISTS));
}

static void
test_replace_whole (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) second = json_from_string ("{\"latest\":{\"meta-data\":{\"attributes\":{\"c\":\"3\"}}}}", NULL);
  g_autoptr (JsonNode) over = document_of_size (MV_MMDS_SIZE_LIMIT_BYTES + 1);
  g_autofree char *served = NULL;
  g_autofree char *still = NULL;

  spec->metadata = json_from_string ("{\"latest\":{\"meta-data\":{\"attributes\":{\"a\":\"1\",\"b\":\"2\"}},"
                                     "\"user-data\":\"x\"}}", NULL);
  hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error);
  g_assert_no_error (error);

  /* The new document replaces the old: nothing of it is merged in. */
  g_assert_true (hv->set_metadata (hv, second, &error));
  g_assert_no_error (error);
  served = mmds (fixture->socket_path);
  g_assert_cmpstr (served, ==, "{\"latest\":{\"meta-data\":{\"attributes\":{\"c\":\"3\"}}}}");

  /* One over the limit is refused and the store stays as it was. */
  g_assert_false (hv->set_metadata (hv, over, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  still = mmds (fixture->socket_path);
  g_assert_cmpstr (still, ==, served);
}

static void
test_vmm_limit (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_binary ("firecracker");
  const char *argv[] = { binary, "--api-sock", fixture->socket_path, "--mmds-size-limit", "1024",
                         NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = mv_process_start (fixture->socket_path, argv, NULL, 10000, &error);
  g_autoptr (MvHttp) http = mv_http_new (fixture->socket_path, "Firecracker");
  g_autoptr (JsonNode) big = document_of_size (2048);
  guint status = 0;

  /* The VMM's own limit answers 413, quoted. */
  g_assert_no_error (error);
  g_assert_false (mv_http_call_json (http, "PUT", "/mmds", big, NULL, &status, &error));
  g_assert_cmpuint (status, ==, 413);
  g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "MMDS limit exceeded"));
}

#define VMM_TEST(name, func) \
  g_test_add (name, VmmFixture, NULL, vmm_fixture_setup, func, vmm_fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mmds/document", test_document);
  g_test_add_func ("/mmds/limit", test_limit);
  VMM_TEST ("/mmds/boot-with-document", test_boot_with_document);
  VMM_TEST ("/mmds/over-limit-sends-nothing", test_over_limit_sends_nothing);
  VMM_TEST ("/mmds/replace-whole", test_replace_whole);
  VMM_TEST ("/mmds/vmm-limit", test_vmm_limit);
  return g_test_run ();
}
