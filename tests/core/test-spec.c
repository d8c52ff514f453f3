#include <string.h>

#include "core/errors.h"
#include "core/machine.h"
#include "core/spec.h"

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* JSON written with single quotes, for readable test documents. */
static char *
q (const char *text)
{
  char *json = g_strdup (text);

  g_strdelimit (json, "'", '"');
  return json;
}

static MvSpec *
base_spec (void)
{
  MvSpec *spec = mv_spec_new ();

  spec->name = g_strdup ("web");
  spec->kernel = g_strdup ("/boot/vmlinuz");
  return spec;
}

static MvSpec *
parse_ok (const char *single_quoted)
{
  g_autofree char *json = q (single_quoted);
  g_autoptr(GError) error = NULL;
  MvSpec *spec = mv_spec_from_json (json, &error);

  g_assert_no_error (error);
  g_assert_nonnull (spec);
  return spec;
}

/* The message must contain @needle; shown in full when it does not. */
static void
assert_message_contains (const char *message, const char *needle)
{
  if (strstr (message, needle) == NULL)
    g_assert_cmpstr (message, ==, needle);
}

static void
assert_message_names_field (const char *message, const char *field)
{
  g_autofree char *prefix = g_strconcat (field, ": ", NULL);

  if (!g_str_has_prefix (message, prefix))
    g_assert_cmpstr (message, ==, prefix);
}

#define assert_parse_fails(single_quoted, needle) \
  G_STMT_START { \
    g_autofree char *json_ = q (single_quoted); \
    g_autoptr(GError) error_ = NULL; \
    g_autoptr(MvSpec) spec_ = mv_spec_from_json (json_, &error_); \
    g_assert_null (spec_); \
    g_assert_error (error_, MV_ERROR, MV_ERROR_INVALID_ARGUMENT); \
    assert_message_contains (error_->message, (needle)); \
  } G_STMT_END

#define assert_valid(spec) \
  G_STMT_START { \
    g_autoptr(GError) error_ = NULL; \
    gboolean ok_ = mv_spec_validate ((spec), &error_); \
    g_assert_no_error (error_); \
    g_assert_true (ok_); \
  } G_STMT_END

#define assert_invalid(spec, field) \
  G_STMT_START { \
    g_autoptr(GError) error_ = NULL; \
    g_assert_false (mv_spec_validate ((spec), &error_)); \
    g_assert_error (error_, MV_ERROR, MV_ERROR_INVALID_ARGUMENT); \
    assert_message_names_field (error_->message, (field)); \
  } G_STMT_END

#define assert_invalid_message(spec, expected) \
  G_STMT_START { \
    g_autoptr(GError) error_ = NULL; \
    g_assert_false (mv_spec_validate ((spec), &error_)); \
    g_assert_error (error_, MV_ERROR, MV_ERROR_INVALID_ARGUMENT); \
    g_assert_cmpstr (error_->message, ==, (expected)); \
  } G_STMT_END

static void
set_string (char **field, char *value /* owned */)
{
  g_free (*field);
  *field = value;
}

static const char full_document[] =
  "{'id':'m1','name':'web','hypervisor_type':'qemu','hypervisor_version':'7.2',"
  "'kernel':'/boot/vmlinuz','initrd':'/boot/initrd.img','kernel_args':'console=ttyS0',"
  "'cpu_millicores':1500,'max_vcpus':4,'memory_bytes':536870912,"
  "'max_memory_bytes':1073741824,"
  "'disks':[{'path':'/var/lib/a.img','read_only':true},{'path':'/var/lib/b.img'}],"
  "'readiness':'console:login: ','network_name':'default','static_ip':'10.0.0.5',"
  "'hostname':'web.example','ssh_keys':['ssh-ed25519 AAAA one','ssh-ed25519 BBBB two'],"
  "'user_data':'#cloud-config','metadata':{'tier':'1','role':'frontend'},"
  "'firewall':[{'allow':'tcp/22','from':'10.0.0.0/8'},{'deny':'all'}],"
  "'restart':{'mode':'on-failure','max_retries':5},'standby_after_seconds':300,"
  "'labels':{'team':'web','env':'prod'},'remove_on_exit':true}";

/* ---- life cycle and parsing ---- */

static void
test_defaults (void)
{
  g_autoptr(MvSpec) spec = mv_spec_new ();

  g_assert_cmpuint (spec->cpu_millicores, ==, 1000);
  g_assert_cmpuint (spec->memory_bytes, ==, 256 * MiB);
  g_assert_cmpint (spec->readiness, ==, MV_READINESS_AUTO);
  g_assert_cmpint (spec->restart_mode, ==, MV_RESTART_NO);
  g_assert_cmpuint (spec->restart_max_retries, ==, 0);
  g_assert_cmpuint (spec->max_vcpus, ==, 0);
  g_assert_cmpuint (spec->max_memory_bytes, ==, 0);
  g_assert_cmpuint (spec->standby_after_seconds, ==, 0);
  g_assert_false (spec->remove_on_exit);
  g_assert_nonnull (spec->disks);
  g_assert_nonnull (spec->ssh_keys);
  g_assert_nonnull (spec->metadata);
  g_assert_nonnull (spec->firewall);
  g_assert_nonnull (spec->labels);
  g_assert_null (spec->name);
  g_assert_null (spec->cmd);
  g_assert_nonnull (spec->env);
  g_assert_cmpuint (g_hash_table_size (spec->env), ==, 0);
  g_assert_null (spec->user);
  g_assert_null (spec->working_dir);
  g_assert_cmpint (spec->init_mode, ==, MV_INIT_MODE_AUTO);
  g_assert_nonnull (spec->mounts);
  g_assert_cmpuint (spec->mounts->len, ==, 0);
  g_assert_null (spec->health_check);
  g_assert_null (mv_spec_root_disk (spec));

  /* A minimal document takes the same defaults and is valid. */
  {
    g_autoptr(MvSpec) parsed = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz'}");
    g_autoptr(MvSpec) base = base_spec ();

    g_assert_true (mv_spec_equal (parsed, base));
    assert_valid (parsed);
  }
}

static void
test_parse_full (void)
{
  g_autoptr(MvSpec) spec = parse_ok (full_document);
  const MvDisk *disk;

  assert_valid (spec);
  g_assert_cmpstr (spec->id, ==, "m1");
  g_assert_cmpstr (spec->name, ==, "web");
  g_assert_cmpstr (spec->hypervisor_type, ==, "qemu");
  g_assert_cmpstr (spec->hypervisor_version, ==, "7.2");
  g_assert_cmpstr (spec->kernel, ==, "/boot/vmlinuz");
  g_assert_cmpstr (spec->initrd, ==, "/boot/initrd.img");
  g_assert_cmpstr (spec->kernel_args, ==, "console=ttyS0");
  g_assert_cmpuint (spec->cpu_millicores, ==, 1500);
  g_assert_cmpuint (spec->max_vcpus, ==, 4);
  g_assert_cmpuint (spec->memory_bytes, ==, 512 * MiB);
  g_assert_cmpuint (spec->max_memory_bytes, ==, 1024 * MiB);
  g_assert_cmpuint (spec->disks->len, ==, 2);
  disk = g_ptr_array_index (spec->disks, 0);
  g_assert_cmpstr (disk->path, ==, "/var/lib/a.img");
  g_assert_true (disk->read_only);
  disk = g_ptr_array_index (spec->disks, 1);
  g_assert_cmpstr (disk->path, ==, "/var/lib/b.img");
  g_assert_false (disk->read_only);
  g_assert_cmpint (spec->readiness, ==, MV_READINESS_CONSOLE);
  g_assert_cmpstr (spec->readiness_text, ==, "login: ");
  g_assert_cmpstr (spec->network_name, ==, "default");
  g_assert_cmpstr (spec->static_ip, ==, "10.0.0.5");
  g_assert_cmpstr (spec->hostname, ==, "web.example");
  g_assert_cmpuint (spec->ssh_keys->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (spec->ssh_keys, 1), ==, "ssh-ed25519 BBBB two");
  g_assert_cmpstr (spec->user_data, ==, "#cloud-config");
  g_assert_cmpuint (g_hash_table_size (spec->metadata), ==, 2);
  g_assert_cmpstr (g_hash_table_lookup (spec->metadata, "role"), ==, "frontend");
  g_assert_cmpuint (json_array_get_length (spec->firewall), ==, 2);
  g_assert_cmpint (spec->restart_mode, ==, MV_RESTART_ON_FAILURE);
  g_assert_cmpuint (spec->restart_max_retries, ==, 5);
  g_assert_cmpuint (spec->standby_after_seconds, ==, 300);
  g_assert_cmpstr (g_hash_table_lookup (spec->labels, "env"), ==, "prod");
  g_assert_true (spec->remove_on_exit);
}

static void
test_round_trip (void)
{
  g_autoptr(MvSpec) spec = parse_ok (full_document);
  g_autofree char *json = mv_spec_to_json (spec, TRUE);
  g_autoptr(GError) error = NULL;
  g_autoptr(MvSpec) again = mv_spec_from_json (json, &error);
  g_autofree char *json_again = NULL;
  g_autoptr(MvSpec) copy = NULL;
  g_autofree char *json_copy = NULL;

  g_assert_no_error (error);
  g_assert_true (mv_spec_equal (spec, again));
  json_again = mv_spec_to_json (again, TRUE);
  g_assert_cmpstr (json, ==, json_again);

  copy = mv_spec_copy (spec);
  g_assert_true (mv_spec_equal (spec, copy));
  json_copy = mv_spec_to_json (copy, TRUE);
  g_assert_cmpstr (json, ==, json_copy);

  /* The copy shares nothing with the original. */
  json_object_set_string_member (json_array_get_object_element (copy->firewall, 0),
                                 "allow", "tcp/80");
  g_hash_table_insert (copy->labels, g_strdup ("team"), g_strdup ("db"));
  g_assert_false (mv_spec_equal (spec, copy));
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (spec->firewall, 0),
                                                  "allow"), ==, "tcp/22");
  g_assert_cmpstr (g_hash_table_lookup (spec->labels, "team"), ==, "web");
}

static void
test_member_order (void)
{
  static const char *const expected[] = {
    "id", "name", "hypervisor_type", "hypervisor_version", "kernel", "initrd",
    "kernel_args", "cpu_millicores", "max_vcpus", "memory_bytes",
    "max_memory_bytes", "disks", "readiness", "network_name", "static_ip",
    "hostname", "ssh_keys", "user_data", "metadata", "firewall", "restart",
    "standby_after_seconds", "labels", "remove_on_exit",
  };
  g_autoptr(MvSpec) spec = parse_ok (full_document);
  g_autoptr(JsonNode) node = mv_spec_to_node (spec, TRUE);
  g_autoptr(GList) members = json_object_get_members (json_node_get_object (node));
  JsonObject *metadata;
  g_autoptr(GList) keys = NULL;
  guint i = 0;

  g_assert_cmpuint (g_list_length (members), ==, G_N_ELEMENTS (expected));
  for (GList *l = members; l != NULL; l = l->next, i++)
    g_assert_cmpstr (l->data, ==, expected[i]);

  /* Maps come out sorted, whatever the hash order. */
  metadata = json_object_get_object_member (json_node_get_object (node), "metadata");
  keys = json_object_get_members (metadata);
  g_assert_cmpstr (keys->data, ==, "role");
  g_assert_cmpstr (keys->next->data, ==, "tier");
}

static void
test_absent_optional_strings (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autoptr(JsonNode) node = mv_spec_to_node (spec, TRUE);
  JsonObject *object = json_node_get_object (node);

  g_assert_false (json_object_has_member (object, "id"));
  g_assert_false (json_object_has_member (object, "initrd"));
  g_assert_false (json_object_has_member (object, "hypervisor_type"));
  g_assert_false (json_object_has_member (object, "hostname"));
  g_assert_false (json_object_has_member (object, "user_data"));
  /* The workload's fields only when set. */
  g_assert_false (json_object_has_member (object, "cmd"));
  g_assert_false (json_object_has_member (object, "env"));
  g_assert_false (json_object_has_member (object, "user"));
  g_assert_false (json_object_has_member (object, "working_dir"));
  g_assert_false (json_object_has_member (object, "init_mode"));
  g_assert_false (json_object_has_member (object, "mounts"));
  g_assert_false (json_object_has_member (object, "health_check"));
  /* Numbers, lists and maps are always there. */
  g_assert_true (json_object_has_member (object, "max_vcpus"));
  g_assert_true (json_object_has_member (object, "disks"));
  g_assert_true (json_object_has_member (object, "ssh_keys"));
  g_assert_true (json_object_has_member (object, "labels"));
  g_assert_cmpstr (json_object_get_string_member (object, "readiness"), ==, "auto");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (object, "restart"),
                                                  "mode"), ==, "no");
}

static void
test_null_is_absent (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz','id':null,"
                                     "'initrd':null,'disks':null,'cpu_millicores':null,"
                                     "'restart':{'mode':null,'max_retries':null},"
                                     "'labels':null,'metadata':null,'ssh_keys':null,"
                                     "'standby_after_seconds':null,"
                                     "'sleep_after_idle_seconds':120,'remove_on_exit':null}");
  g_autoptr(MvSpec) expected = base_spec ();

  expected->standby_after_seconds = 120;
  g_assert_true (mv_spec_equal (spec, expected));
}

static void
test_empty_means_default (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz','id':'',"
                                     "'hypervisor_type':'','hypervisor_version':'',"
                                     "'kernel_args':'','hostname':'','user_data':'',"
                                     "'restart':{'mode':''}}");
  g_autoptr(MvSpec) base = base_spec ();
  g_autoptr(MvSpec) automatic = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz',"
                                          "'hypervisor_type':'auto'}");

  g_assert_true (mv_spec_equal (spec, base));
  g_assert_null (automatic->hypervisor_type);
  g_assert_true (mv_spec_equal (automatic, base));
}

static void
test_readiness (void)
{
  g_autoptr(MvSpec) automatic = parse_ok ("{'readiness':'auto'}");
  g_autoptr(MvSpec) unset = parse_ok ("{}");
  g_autoptr(MvSpec) vmm = parse_ok ("{'readiness':'vmm'}");
  g_autoptr(MvSpec) agent = parse_ok ("{'readiness':'agent'}");
  g_autoptr(MvSpec) console = parse_ok ("{'readiness':'console:Welcome: to x'}");
  g_autoptr(JsonNode) node = NULL;

  g_assert_cmpint (automatic->readiness, ==, MV_READINESS_AUTO);
  g_assert_cmpint (unset->readiness, ==, MV_READINESS_AUTO);
  g_assert_true (mv_spec_equal (automatic, unset));
  /* Records written before "auto" existed say "vmm", and keep meaning it. */
  g_assert_cmpint (vmm->readiness, ==, MV_READINESS_VMM);
  g_assert_false (mv_spec_equal (automatic, vmm));
  g_assert_cmpint (agent->readiness, ==, MV_READINESS_AGENT);
  g_assert_cmpint (console->readiness, ==, MV_READINESS_CONSOLE);
  g_assert_cmpstr (console->readiness_text, ==, "Welcome: to x");
  node = mv_spec_to_node (console, FALSE);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (node), "readiness"),
                   ==, "console:Welcome: to x");

  {
    g_autofree char *text = mv_readiness_to_string (MV_READINESS_AUTO, NULL);

    g_assert_cmpstr (text, ==, "auto");
    g_clear_pointer (&node, json_node_unref);
    node = mv_spec_to_node (unset, FALSE);
    g_assert_cmpstr (json_object_get_string_member (json_node_get_object (node), "readiness"),
                     ==, "auto");
  }
  assert_parse_fails ("{'readiness':'ssh'}", "readiness: ");
  assert_parse_fails ("{'readiness':'Auto'}", "auto, vmm, agent, console:TEXT");
  assert_parse_fails ("{'readiness':'Console:x'}", "readiness: ");
}

static void
test_restart_modes (void)
{
  static const struct { const char *name; MvRestartMode mode; } modes[] = {
    { "no", MV_RESTART_NO },
    { "on-failure", MV_RESTART_ON_FAILURE },
    { "unless-stopped", MV_RESTART_UNLESS_STOPPED },
    { "always", MV_RESTART_ALWAYS },
  };

  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    {
      g_autofree char *doc = g_strdup_printf ("{'restart':{'mode':'%s'}}", modes[i].name);
      g_autoptr(MvSpec) spec = parse_ok (doc);

      g_assert_cmpint (spec->restart_mode, ==, modes[i].mode);
      g_assert_cmpstr (mv_restart_mode_to_string (modes[i].mode), ==, modes[i].name);
    }
  assert_parse_fails ("{'restart':{'mode':'sometimes'}}", "restart.mode: ");
}

static void
test_unknown_fields (void)
{
  g_autofree char *json = q ("{'name':'web','foo':1}");
  g_autoptr(GError) error = NULL;
  g_autoptr(MvSpec) spec = mv_spec_from_json (json, &error);

  g_assert_null (spec);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "unknown field 'foo'");

  /* Near misses are not accepted either. */
  assert_parse_fails ("{'Name':'web'}", "unknown field 'Name'");
  assert_parse_fails ("{'vcpus':2}", "unknown field 'vcpus'");
  assert_parse_fails ("{'disks':[{'path':'/a','size':1}]}", "disks[0]: unknown field 'size'");
  assert_parse_fails ("{'restart':{'mode':'always','delay':5}}", "restart: unknown field 'delay'");
}

static void
test_wrong_types (void)
{
  static const struct { const char *doc; const char *message; } cases[] = {
    { "{'name':5}", "name: expected a string, got an integer" },
    { "{'kernel':['/k']}", "kernel: expected a string, got an array" },
    { "{'id':true}", "id: expected a string, got a boolean" },
    { "{'cpu_millicores':'1000'}", "cpu_millicores: expected an integer, got a string" },
    { "{'memory_bytes':{}}", "memory_bytes: expected an integer, got an object" },
    { "{'disks':{}}", "disks: expected an array, got an object" },
    { "{'disks':['/a']}", "disks[0]: expected an object, got a string" },
    { "{'disks':[{'path':1}]}", "disks[0].path: expected a string" },
    { "{'disks':[{'path':'/a','read_only':'yes'}]}", "disks[0].read_only: expected a boolean" },
    { "{'readiness':1}", "readiness: expected a string" },
    { "{'ssh_keys':'ssh-ed25519 A'}", "ssh_keys: expected an array" },
    { "{'ssh_keys':['a',2]}", "ssh_keys[1]: expected a string" },
    { "{'user_data':{}}", "user_data: expected a string" },
    { "{'metadata':[]}", "metadata: expected an object" },
    { "{'metadata':{'a':1}}", "metadata.a: expected a string" },
    { "{'labels':{'a':true}}", "labels.a: expected a string" },
    { "{'firewall':{}}", "firewall: expected an array" },
    { "{'firewall':[{},'allow']}", "firewall[1]: expected an object" },
    { "{'restart':'always'}", "restart: expected an object" },
    { "{'restart':{'mode':1}}", "restart.mode: expected a string" },
    { "{'restart':{'max_retries':'3'}}", "restart.max_retries: expected an integer" },
    { "{'standby_after_seconds':true}", "standby_after_seconds: expected an integer" },
    { "{'sleep_after_idle_seconds':'60'}", "sleep_after_idle_seconds: expected an integer" },
    { "{'remove_on_exit':1}", "remove_on_exit: expected a boolean" },
    { "[]", "spec: expected an object, got an array" },
    { "'web'", "spec: expected an object" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_parse_fails (cases[i].doc, cases[i].message);
}

static void
test_integers (void)
{
  /* Out-of-range numbers are refused with the field's own bounds, never
   * with the range of the C type that holds the field. */
  static const struct {
    const char *doc;
    const char *message;
  } cases[] = {
    { "{'cpu_millicores':-1}", "cpu_millicores: -1 is below the minimum of 100" },
    { "{'cpu_millicores':1.5}", "cpu_millicores: expected an integer, got a number" },
    { "{'cpu_millicores':4294967296}", "cpu_millicores: 4294967296 is more than the limit of 32000" },
    { "{'max_vcpus':-5}", "max_vcpus: -5 is below the minimum of 0" },
    { "{'max_vcpus':5000000000}", "max_vcpus: 5000000000 is more than the limit of 32" },
    { "{'memory_bytes':-1}", "memory_bytes: -1 is below the minimum of 33554432 (32 MiB)" },
    { "{'memory_bytes':1e300}",
      "memory_bytes: 1e+300 is more than the limit of 1099511627776 (1 TiB)" },
    { "{'max_memory_bytes':-2097152}", "max_memory_bytes: -2097152 is below the minimum of 0" },
    { "{'restart':{'max_retries':-1}}", "restart.max_retries: -1 is below the minimum of 0" },
    { "{'restart':{'max_retries':4294967296}}",
      "restart.max_retries: 4294967296 is more than the limit of 1000" },
    { "{'standby_after_seconds':4294967296}",
      "standby_after_seconds: 4294967296 is more than the limit of 31536000" },
    { "{'sleep_after_idle_seconds':-60}", "sleep_after_idle_seconds: -60 is below the minimum of 0" },
    /* Past 64 bits: json-glib would saturate these; the reader refuses
     * them, naming the field. */
    { "{'memory_bytes':18446744073709551617}", "spec: memory_bytes: the number at byte 16 is too large" },
    { "{'memory_bytes':99999999999999999999}", "spec: memory_bytes: the number at byte 16 is too large" },
    { "{'max_memory_bytes':9223372036854775808}", "spec: max_memory_bytes: the number at byte 20 is too large" },
  };
  g_autoptr(MvSpec) spec = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *json = q (cases[i].doc);
      g_autoptr(GError) error = NULL;
      g_autoptr(MvSpec) refused = mv_spec_from_json (json, &error);

      g_assert_null (refused);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (!g_str_has_prefix (error->message, cases[i].message))
        g_assert_cmpstr (error->message, ==, cases[i].message);
      g_assert_null (strstr (error->message, "4294967295"));
      g_assert_null (strstr (error->message, "9223372036854775807"));
    }

  /* Integral numbers written as floating point are integers. */
  spec = parse_ok ("{'cpu_millicores':2000.0,'memory_bytes':5.36870912e8}");
  g_assert_cmpuint (spec->cpu_millicores, ==, 2000);
  g_assert_cmpuint (spec->memory_bytes, ==, 512 * MiB);
  g_clear_pointer (&spec, mv_spec_free);

  /* What the field's type holds parses; validation judges it by the same
   * bounds. */
  spec = parse_ok ("{'name':'web','kernel':'/k','cpu_millicores':4294967295}");
  g_assert_cmpuint (spec->cpu_millicores, ==, G_MAXUINT32);
  assert_invalid_message (spec, "cpu_millicores: 4294967295 is more than the limit of 32000");
  g_clear_pointer (&spec, mv_spec_free);
  spec = parse_ok ("{'name':'web','kernel':'/k','memory_bytes':2199023255552}");
  assert_invalid_message (spec, "memory_bytes: 2199023255552 (2 TiB) is more than the limit of "
                          "1099511627776 (1 TiB)");
  g_clear_pointer (&spec, mv_spec_free);
  spec = base_spec ();
  spec->memory_bytes = G_MAXUINT64;
  assert_invalid_message (spec, "memory_bytes: 18446744073709551615 is more than the limit of "
                          "1099511627776 (1 TiB)");
}

static void
test_malformed (void)
{
  assert_parse_fails ("{", "spec: ");
  assert_parse_fails ("{'name':'web',}", "spec: ");
  assert_parse_fails ("", "spec: ");
  assert_parse_fails ("{'name':'web'} x", "spec: ");
}

/* Each kind of text that json-glib takes and JSON does not. The documents
 * are written as they are sent: no single-quote shorthand here. */
static void
test_strict_document (void)
{
  static const struct {
    const char *text;
    const char *message;
  } cases[] = {
    { "{\"name\":\"web\" /* c */}", "spec: not JSON at byte 14: comments are not allowed" },
    { "// c\n{\"name\":\"web\"}", "spec: not JSON at byte 0: comments are not allowed" },
    { "{'name':'web'}",
      "spec: not JSON at byte 1: single quotes are not allowed (strings take double quotes)" },
    { "{\"name\":\"web\"}{}",
      "spec: not JSON at byte 14: only one value is allowed, and more follows it" },
    { "\xef\xbb\xbf{\"name\":\"web\"}", "spec: not JSON at byte 0: a byte order mark is not allowed" },
    { "{\"name\":\"web\",}", "spec: not JSON at byte 13: trailing commas are not allowed" },
    { "{\"memory_bytes\":NaN}", "spec: not JSON at byte 16: NaN and Infinity are not JSON numbers" },
    { "{\"name\":\"a\\u0000b\"}", "spec: name: \\u0000 (NUL) is not allowed in a string" },
    { "{\"name\":\"\\ud800\"}", "spec: name: \\uD800 is a lone surrogate, not a character" },
    { "{\"labels\":{\"a\\u0000\":\"x\"}}", "spec: labels: \\u0000 (NUL) is not allowed in a string" },
    { "{\"name\":\"web\",\"name\":\"db\"}", "spec: at byte 14: the key \"name\" appears twice" },
    { "{\"name\":\"w\xff" "b\"}", "spec: not JSON at byte 10: not valid UTF-8" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(MvSpec) spec = mv_spec_from_json (cases[i].text, &error);

      g_assert_null (spec);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, cases[i].message);
    }
}

/* A spec nested far deeper than any field needs, in a field that takes
 * any object (firewall rules): refused by its depth, quickly, without
 * json-glib recursing through it. */
static void
test_strict_depth (void)
{
  GString *deep = g_string_new ("{\"name\":\"web\",\"firewall\":[");
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(MvSpec) spec = NULL;

  for (guint i = 0; i < 100000; i++)
    g_string_append (deep, "{\"a\":");
  g_string_append (deep, "1");
  for (guint i = 0; i < 100000; i++)
    g_string_append_c (deep, '}');
  g_string_append (deep, "]}");
  text = g_string_free (deep, FALSE);

  spec = mv_spec_from_json (text, &error);
  g_assert_null (spec);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "spec: nesting depth 33 is more than the limit of 32");
}

static void
test_strict_size (void)
{
  g_autofree char *padding = g_strnfill (MV_SPEC_MAX_BYTES, ' ');
  g_autofree char *text = g_strconcat ("{\"name\":\"web\"}", padding, NULL);
  g_autofree char *expected = g_strdup_printf ("spec: %" G_GSIZE_FORMAT " bytes is more than the "
                                               "limit of %d", strlen (text), MV_SPEC_MAX_BYTES);
  g_autoptr(GError) error = NULL;
  g_autoptr(MvSpec) spec = NULL;

  /* Exactly the limit is a spec. */
  text[MV_SPEC_MAX_BYTES] = '\0';
  g_assert_true (mv_spec_json_check_size (text, &error));
  g_assert_no_error (error);
  spec = mv_spec_from_json (text, &error);
  g_assert_no_error (error);
  g_assert_nonnull (spec);
  g_clear_pointer (&spec, mv_spec_free);
  text[MV_SPEC_MAX_BYTES] = ' ';

  g_assert_false (mv_spec_json_check_size (text, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, expected);
  g_clear_error (&error);

  spec = mv_spec_from_json (text, &error);
  g_assert_null (spec);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, expected);
}

static void
test_standby_alias (void)
{
  g_autoptr(MvSpec) alias = parse_ok ("{'sleep_after_idle_seconds':600}");
  g_autoptr(MvSpec) both = parse_ok ("{'standby_after_seconds':600,'sleep_after_idle_seconds':600}");
  g_autoptr(MvSpec) canonical = parse_ok ("{'standby_after_seconds':600}");
  g_autoptr(JsonNode) node = mv_spec_to_node (alias, TRUE);
  JsonObject *object = json_node_get_object (node);

  g_assert_cmpuint (alias->standby_after_seconds, ==, 600);
  g_assert_true (mv_spec_equal (alias, both));
  g_assert_true (mv_spec_equal (alias, canonical));
  /* Written back under the one name. */
  g_assert_cmpint (json_object_get_int_member (object, "standby_after_seconds"), ==, 600);
  g_assert_false (json_object_has_member (object, "sleep_after_idle_seconds"));

  assert_parse_fails ("{'standby_after_seconds':600,'sleep_after_idle_seconds':60}",
                      "standby_after_seconds: ");
  assert_parse_fails ("{'standby_after_seconds':600,'sleep_after_idle_seconds':60}",
                      "sleep_after_idle_seconds");
  assert_parse_fails ("{'standby_after_seconds':0,'sleep_after_idle_seconds':60}",
                      "standby_after_seconds: ");
}

static void
test_secrets (void)
{
  g_autoptr(MvSpec) spec = parse_ok (full_document);
  g_autoptr(JsonNode) hidden = mv_spec_to_node (spec, FALSE);
  g_autoptr(JsonNode) shown = mv_spec_to_node (spec, TRUE);
  JsonObject *h = json_node_get_object (hidden);
  JsonObject *s = json_node_get_object (shown);
  JsonObject *metadata;
  g_autofree char *text = json_to_string (hidden, FALSE);

  g_assert_false (json_object_has_member (h, "ssh_keys"));
  g_assert_false (json_object_has_member (h, "user_data"));
  metadata = json_object_get_object_member (h, "metadata");
  g_assert_cmpuint (json_object_get_size (metadata), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (metadata, "role"), ==, "");
  g_assert_cmpstr (json_object_get_string_member (metadata, "tier"), ==, "");
  g_assert_null (strstr (text, "frontend"));
  g_assert_null (strstr (text, "AAAA"));
  g_assert_null (strstr (text, "cloud-config"));
  /* Everything else is still there. */
  g_assert_cmpstr (json_object_get_string_member (h, "hostname"), ==, "web.example");

  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (s, "ssh_keys")), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (s, "user_data"), ==, "#cloud-config");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (s, "metadata"),
                                                  "role"), ==, "frontend");
}

/* ---- fingerprint and comparisons ---- */

static void
test_fingerprint (void)
{
  g_autoptr(MvSpec) spec = parse_ok (full_document);
  g_autoptr(MvSpec) other = NULL;
  g_autofree char *fp = mv_spec_fingerprint (spec);
  char *fp_other;

  g_assert_cmpuint (strlen (fp), ==, 64);
  for (const char *p = fp; *p; p++)
    g_assert_true (g_ascii_isdigit (*p) || (*p >= 'a' && *p <= 'f'));

  /* Not the ID, not the labels. */
  other = mv_spec_copy (spec);
  set_string (&other->id, g_strdup ("other"));
  g_hash_table_remove_all (other->labels);
  g_hash_table_insert (other->labels, g_strdup ("x"), g_strdup ("y"));
  fp_other = mv_spec_fingerprint (other);
  g_assert_cmpstr (fp, ==, fp_other);
  g_free (fp_other);

  /* Every other change counts. */
#define ASSERT_CHANGES_FINGERPRINT(stmt) \
  G_STMT_START { \
    g_autoptr(MvSpec) changed_ = mv_spec_copy (spec); \
    g_autofree char *fp_changed_ = NULL; \
    MvSpec *c = changed_; \
    stmt; \
    fp_changed_ = mv_spec_fingerprint (changed_); \
    g_assert_cmpstr (fp, !=, fp_changed_); \
  } G_STMT_END

  ASSERT_CHANGES_FINGERPRINT (c->cpu_millicores = 2000);
  ASSERT_CHANGES_FINGERPRINT (c->memory_bytes += 2 * MiB);
  ASSERT_CHANGES_FINGERPRINT (set_string (&c->name, g_strdup ("web2")));
  ASSERT_CHANGES_FINGERPRINT (set_string (&c->kernel, g_strdup ("/boot/other")));
  ASSERT_CHANGES_FINGERPRINT (set_string (&c->user_data, g_strdup ("#!/bin/sh")));
  ASSERT_CHANGES_FINGERPRINT (g_ptr_array_add (c->ssh_keys, g_strdup ("ssh-rsa C")));
  ASSERT_CHANGES_FINGERPRINT (g_hash_table_insert (c->metadata, g_strdup ("role"), g_strdup ("db")));
  ASSERT_CHANGES_FINGERPRINT (json_array_add_object_element (c->firewall, json_object_new ()));
  ASSERT_CHANGES_FINGERPRINT (c->standby_after_seconds = 60);
  ASSERT_CHANGES_FINGERPRINT (c->remove_on_exit = FALSE);
  ASSERT_CHANGES_FINGERPRINT (((MvDisk *) g_ptr_array_index (c->disks, 0))->read_only = FALSE);
#undef ASSERT_CHANGES_FINGERPRINT
}

static void
test_fingerprint_signed_urls (void)
{
  g_autoptr(MvSpec) a = parse_ok ("{'name':'web',"
                                  "'kernel':'https://img.example/k?X-Signature=aaa&Expires=1',"
                                  "'initrd':'https://img.example/i?sig=aaa',"
                                  "'disks':[{'path':'s3://bucket/root.img?sig=aaa'}]}");
  g_autoptr(MvSpec) b = parse_ok ("{'name':'web',"
                                  "'kernel':'https://img.example/k?X-Signature=bbb&Expires=2',"
                                  "'initrd':'https://img.example/i',"
                                  "'disks':[{'path':'s3://bucket/root.img?sig=bbb'}]}");
  g_autoptr(MvSpec) moved = parse_ok ("{'name':'web',"
                                      "'kernel':'https://img.example/k2?X-Signature=aaa&Expires=1',"
                                      "'initrd':'https://img.example/i?sig=aaa',"
                                      "'disks':[{'path':'s3://bucket/root.img?sig=aaa'}]}");
  g_autoptr(MvSpec) path_a = parse_ok ("{'name':'web','kernel':'/boot/k?1'}");
  g_autoptr(MvSpec) path_b = parse_ok ("{'name':'web','kernel':'/boot/k?2'}");
  g_autofree char *fa = mv_spec_fingerprint (a);
  g_autofree char *fb = mv_spec_fingerprint (b);
  g_autofree char *fm = mv_spec_fingerprint (moved);
  g_autofree char *fpa = mv_spec_fingerprint (path_a);
  g_autofree char *fpb = mv_spec_fingerprint (path_b);

  g_assert_cmpstr (fa, ==, fb);
  g_assert_cmpstr (fa, !=, fm);
  /* A '?' in a plain path is part of the file name. */
  g_assert_cmpstr (fpa, !=, fpb);
  /* The spec itself keeps the full URL. */
  g_assert_cmpstr (a->kernel, ==, "https://img.example/k?X-Signature=aaa&Expires=1");
  g_assert_false (mv_spec_equal (a, b));
}

static void
test_vcpus (void)
{
  static const struct { guint32 millicores; guint vcpus; } cases[] = {
    { 100, 1 }, { 999, 1 }, { 1000, 1 }, { 1001, 2 }, { 1500, 2 }, { 2000, 2 },
    { 31001, 32 }, { 32000, 32 },
  };
  g_autoptr(MvSpec) spec = mv_spec_new ();

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      spec->cpu_millicores = cases[i].millicores;
      g_assert_cmpuint (mv_spec_vcpus (spec), ==, cases[i].vcpus);
    }
}

static void
test_equal_and_differences (void)
{
  g_autoptr(MvSpec) a = parse_ok (full_document);
  g_autoptr(MvSpec) b = mv_spec_copy (a);

  g_assert_true (mv_spec_equal (a, b));
  g_assert_false (mv_spec_differs_beyond_standby (a, b));
  g_assert_false (mv_spec_shape_differs (a, b));

  /* Standby time alone. */
  b->standby_after_seconds = 3600;
  g_assert_false (mv_spec_equal (a, b));
  g_assert_false (mv_spec_differs_beyond_standby (a, b));
  g_assert_false (mv_spec_shape_differs (a, b));

  /* A firewall change is more than that, but keeps the shape. */
  json_array_add_object_element (b->firewall, json_object_new ());
  g_assert_true (mv_spec_differs_beyond_standby (a, b));
  g_assert_false (mv_spec_shape_differs (a, b));
  g_clear_pointer (&b, mv_spec_free);

  /* Labels and secrets are part of equality. */
  b = mv_spec_copy (a);
  g_hash_table_insert (b->labels, g_strdup ("new"), g_strdup ("1"));
  g_assert_false (mv_spec_equal (a, b));
  g_assert_true (mv_spec_differs_beyond_standby (a, b));
  g_clear_pointer (&b, mv_spec_free);
  b = mv_spec_copy (a);
  set_string (&b->user_data, g_strdup ("other"));
  g_assert_false (mv_spec_equal (a, b));
  g_clear_pointer (&b, mv_spec_free);

  /* Millicores within the same vCPU count keep the shape. */
  b = mv_spec_copy (a);
  b->cpu_millicores = 1999;
  g_assert_false (mv_spec_shape_differs (a, b));
  b->cpu_millicores = 2001;
  g_assert_true (mv_spec_shape_differs (a, b));
  g_clear_pointer (&b, mv_spec_free);

#define ASSERT_SHAPE_CHANGES(stmt) \
  G_STMT_START { \
    g_autoptr(MvSpec) changed_ = mv_spec_copy (a); \
    MvSpec *c = changed_; \
    stmt; \
    g_assert_true (mv_spec_shape_differs (a, changed_)); \
    g_assert_true (mv_spec_differs_beyond_standby (a, changed_)); \
  } G_STMT_END

  ASSERT_SHAPE_CHANGES (c->max_vcpus = 8);
  ASSERT_SHAPE_CHANGES (c->memory_bytes = 1024 * MiB);
  ASSERT_SHAPE_CHANGES (c->max_memory_bytes = 2048 * MiB);
  ASSERT_SHAPE_CHANGES (set_string (&c->hypervisor_type, g_strdup ("firecracker")));
  ASSERT_SHAPE_CHANGES (set_string (&c->hypervisor_version, NULL));
  ASSERT_SHAPE_CHANGES (g_ptr_array_remove_index (c->disks, 1));
  ASSERT_SHAPE_CHANGES (((MvDisk *) g_ptr_array_index (c->disks, 1))->read_only = TRUE);
  ASSERT_SHAPE_CHANGES (set_string (&((MvDisk *) g_ptr_array_index (c->disks, 0))->path,
                                    g_strdup ("/var/lib/c.img")));
#undef ASSERT_SHAPE_CHANGES
}

/* ---- limits ---- */

static char *
dns_name_of_length (gsize length)
{
  GString *s = g_string_new (NULL);

  /* Labels of 63 joined by dots, then a shorter last one. */
  while (s->len + 64 < length)
    g_string_append (s, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
  while (s->len < length)
    g_string_append_c (s, 'b');
  return g_string_free (s, FALSE);
}

/* {"a":{"a":...{}}}, @depth objects deep. */
static JsonNode *
nested_rule (guint depth)
{
  JsonNode *node = json_node_init_object (json_node_alloc (), json_object_new ());

  for (guint i = 1; i < depth; i++)
    {
      g_autoptr(JsonObject) outer = json_object_new ();

      json_object_set_member (outer, "a", node);
      node = json_node_init_object (json_node_alloc (), outer);
    }
  return node;
}

/* {"allow":"xxx..."}, @size bytes of compact JSON. */
static JsonNode *
rule_of_size (gsize size)
{
  g_autoptr(JsonObject) rule = json_object_new ();
  g_autofree char *value = g_strnfill (size - strlen ("{\"allow\":\"\"}"), 'x');

  json_object_set_string_member (rule, "allow", value);
  return json_node_init_object (json_node_alloc (), rule);
}

static char *
path_of_length (gsize length, char fill)
{
  char *path = g_strnfill (length, fill);

  path[0] = '/';
  return path;
}

static MvSpec *
largest_spec (void)
{
  MvSpec *spec = base_spec ();
  GString *user_data = g_string_new (NULL);

  set_string (&spec->id, g_strnfill (MV_ID_MAX_BYTES, 'i'));
  set_string (&spec->name, g_strnfill (MV_NAME_MAX_BYTES, 'n'));
  set_string (&spec->hypervisor_type, g_strdup ("cloud-hypervisor"));
  set_string (&spec->hypervisor_version, g_strnfill (MV_HYPERVISOR_VERSION_MAX_BYTES, '9'));
  set_string (&spec->kernel, path_of_length (MV_PATH_MAX_BYTES, '"'));
  set_string (&spec->initrd, path_of_length (MV_PATH_MAX_BYTES, '\\'));
  set_string (&spec->kernel_args, g_strnfill (MV_KERNEL_ARGS_MAX_BYTES, '"'));
  spec->cpu_millicores = MV_CPU_MILLICORES_MAX;
  spec->max_vcpus = MV_VCPUS_MAX;
  spec->memory_bytes = MV_MEMORY_MAX_BYTES;
  spec->max_memory_bytes = MV_MEMORY_MAX_BYTES;
  for (guint i = 0; i < MV_DISKS_MAX; i++)
    {
      MvDisk *disk = g_new0 (MvDisk, 1);

      disk->path = path_of_length (MV_PATH_MAX_BYTES, '"');
      disk->read_only = TRUE;
      g_ptr_array_add (spec->disks, disk);
    }
  spec->readiness = MV_READINESS_CONSOLE;
  set_string (&spec->readiness_text, g_strnfill (MV_READINESS_TEXT_MAX_BYTES, '\x01'));
  set_string (&spec->network_name, g_strnfill (MV_NAME_MAX_BYTES, 'l'));
  set_string (&spec->static_ip, g_strnfill (MV_STATIC_IP_MAX_BYTES, ':'));
  set_string (&spec->hostname, dns_name_of_length (MV_HOSTNAME_MAX_BYTES));
  for (guint i = 0; i < MV_SSH_KEYS_MAX; i++)
    g_ptr_array_add (spec->ssh_keys, g_strnfill (MV_SSH_KEY_MAX_BYTES, '"'));
  for (gsize i = 0; i < MV_USER_DATA_MAX_BYTES; i++)
    g_string_append_c (user_data, '"');
  set_string (&spec->user_data, g_string_free (user_data, FALSE));
  /* {"k":"<value>"} is 8 bytes around the value. */
  g_hash_table_insert (spec->metadata, g_strdup ("k"),
                       g_strnfill (MV_METADATA_MAX_JSON_BYTES - 8, 'm'));
  for (guint i = 0; i < MV_FIREWALL_RULES_MAX; i++)
    json_array_add_element (spec->firewall, rule_of_size (MV_FIREWALL_RULE_MAX_BYTES));
  spec->restart_mode = MV_RESTART_ON_FAILURE;
  spec->restart_max_retries = MV_RESTART_MAX_RETRIES_MAX;
  spec->standby_after_seconds = MV_STANDBY_AFTER_MAX_SECONDS;
  for (guint i = 0; i < MV_LABELS_MAX; i++)
    {
      g_autofree char *key = g_strdup_printf ("%0*u", MV_LABEL_KEY_MAX_BYTES, i);

      g_hash_table_insert (spec->labels, g_steal_pointer (&key),
                           g_strnfill (MV_LABEL_VALUE_MAX_BYTES, '"'));
    }
  return spec;
}

static void
test_limit_name (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  static const char *const bad[] = {
    "", "a/b", "/", ".", "..", ".hidden", "-rf", "tab\there", "new\nline",
    "del\x7f", "\xff\xfe",
    /* Names that display as another name. */
    "web\xe2\x80\xae" "gpj", "\xe2\x81\xa6web\xe2\x81\xa9", "we\xc2\x85" "b",
    "we\xe2\x80\x8b" "b", "web\xef\xbb\xbf", "web\xc2\xa0" "1", "web\xe3\x80\x80",
    " web", "web ", "cafe\xcc\x81", "\xcc\x81web", "web\xc2\xad", "\xee\x80\x80",
  };
  static const char *const good[] = {
    "a", "web-1", "web_1.example", "Web 1", "caf\xc3\xa9", "a..b", "x-",
  };

  set_string (&spec->name, g_strnfill (MV_NAME_MAX_BYTES, 'a'));
  assert_valid (spec);
  set_string (&spec->name, g_strnfill (MV_NAME_MAX_BYTES + 1, 'a'));
  assert_invalid_message (spec, "name: longer than 63 bytes");

  /* Bytes, not characters: 31 two-byte characters fit, 32 do not. */
  {
    GString *s = g_string_new (NULL);
    for (guint i = 0; i < 31; i++)
      g_string_append (s, "\xc3\xa9");
    set_string (&spec->name, g_strdup (s->str));
    assert_valid (spec);
    g_string_append (s, "\xc3\xa9");
    set_string (&spec->name, g_string_free (s, FALSE));
    assert_invalid (spec, "name");
  }

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      set_string (&spec->name, g_strdup (good[i]));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      set_string (&spec->name, g_strdup (bad[i]));
      assert_invalid (spec, "name");
    }
  set_string (&spec->name, NULL);
  assert_invalid_message (spec, "name: required");
  set_string (&spec->name, g_strdup ("web\xe2\x80\xae" "gpj.exe"));
  assert_invalid_message (spec, "name: U+202E is not allowed in a name (a bidirectional control)");
  set_string (&spec->name, g_strdup ("web\xc2\x9b"));
  assert_invalid_message (spec, "name: U+009B is not allowed in a name (a C1 control character)");

  /* The field name is the caller's. */
  {
    g_autoptr(GError) error = NULL;
    g_assert_false (mv_name_validate ("snapshot_name", "..", &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    assert_message_names_field (error->message, "snapshot_name");
  }
}

static void
test_limit_id (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  static const char *const good[] = { "a", "0", "m1", "a_b-c", "0123456789abcdef" };
  static const char *const bad[] = { "", "A", "aB", "_a", "-a", "a.b", "a/b", "a b", "\xc3\xa9" };

  assert_valid (spec);   /* no ID before create */
  set_string (&spec->id, g_strnfill (MV_ID_MAX_BYTES, 'a'));
  assert_valid (spec);
  set_string (&spec->id, g_strnfill (MV_ID_MAX_BYTES + 1, 'a'));
  assert_invalid_message (spec, "id: longer than 63 bytes");
  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      set_string (&spec->id, g_strdup (good[i]));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      set_string (&spec->id, g_strdup (bad[i]));
      assert_invalid (spec, "id");
    }
}

static void
test_limit_hypervisor (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  static const char *const good[] = { "cloud-hypervisor", "firecracker", "qemu", "test" };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      set_string (&spec->hypervisor_type, g_strdup (good[i]));
      assert_valid (spec);
    }
  set_string (&spec->hypervisor_type, g_strdup ("xen"));
  assert_invalid (spec, "hypervisor_type");
  set_string (&spec->hypervisor_type, g_strdup ("QEMU"));
  assert_invalid (spec, "hypervisor_type");

  /* The message quotes only the start of what it refuses. */
  set_string (&spec->hypervisor_type, g_strnfill (10000, 'x'));
  {
    g_autoptr(GError) error = NULL;

    g_assert_false (mv_spec_validate (spec, &error));
    g_assert_cmpuint (strlen (error->message), <, 150);
  }
  set_string (&spec->hypervisor_type, g_strdup ("qemu"));

  set_string (&spec->hypervisor_version, g_strdup ("7.2.0+dfsg-7_deb12u1"));
  assert_valid (spec);
  set_string (&spec->hypervisor_version, g_strnfill (MV_HYPERVISOR_VERSION_MAX_BYTES, '7'));
  assert_valid (spec);
  set_string (&spec->hypervisor_version, g_strnfill (MV_HYPERVISOR_VERSION_MAX_BYTES + 1, '7'));
  assert_invalid_message (spec, "hypervisor_version: 65 bytes, more than the limit of 64");
  set_string (&spec->hypervisor_version, g_strdup ("7.2 ; rm"));
  assert_invalid_message (spec, "hypervisor_version: may hold only letters, digits, '.', '_', "
                          "'+' and '-'");
}

static void
test_limit_boot (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autofree char *long_path = NULL;

  /* A path of exactly the maximum length. */
  long_path = g_strnfill (MV_PATH_MAX_BYTES, 'k');
  long_path[0] = '/';
  set_string (&spec->kernel, g_strdup (long_path));
  assert_valid (spec);
  set_string (&spec->kernel, g_strconcat (long_path, "k", NULL));
  assert_invalid (spec, "kernel");

  set_string (&spec->kernel, g_strdup ("boot/vmlinuz"));
  assert_invalid (spec, "kernel");
  set_string (&spec->kernel, g_strdup (""));
  assert_invalid (spec, "kernel");
  set_string (&spec->kernel, NULL);
  assert_invalid_message (spec, "kernel: required");
  set_string (&spec->kernel, g_strdup ("/boot/vmlinuz"));

  set_string (&spec->initrd, g_strdup ("/boot/initrd"));
  assert_valid (spec);
  set_string (&spec->initrd, g_strdup ("initrd"));
  assert_invalid (spec, "initrd");
  set_string (&spec->initrd, NULL);

  set_string (&spec->kernel_args, g_strnfill (MV_KERNEL_ARGS_MAX_BYTES, 'x'));
  assert_valid (spec);
  set_string (&spec->kernel_args, g_strnfill (MV_KERNEL_ARGS_MAX_BYTES + 1, 'x'));
  assert_invalid_message (spec, "kernel_args: longer than 4096 bytes");
  set_string (&spec->kernel_args, g_strdup ("console=ttyS0\ninit=/bin/sh"));
  assert_invalid (spec, "kernel_args");
  set_string (&spec->kernel_args, g_strdup ("console=ttyS0 \x1b[2J"));
  assert_invalid_message (spec, "kernel_args: contains a control character (0x1b)");
  set_string (&spec->kernel_args, NULL);

  set_string (&spec->kernel, g_strdup ("/boot/vm\x01linuz"));
  assert_invalid_message (spec, "kernel: contains a control character (0x01)");
  set_string (&spec->kernel, g_strdup ("vmlinuz"));
  assert_invalid_message (spec, "kernel: \"vmlinuz\" is not an absolute path");
}

static void
test_limit_cpu (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  spec->cpu_millicores = MV_CPU_MILLICORES_MIN;
  assert_valid (spec);
  spec->cpu_millicores = MV_CPU_MILLICORES_MIN - 1;
  assert_invalid_message (spec, "cpu_millicores: 99 is below the minimum of 100");
  spec->cpu_millicores = 50;
  assert_invalid_message (spec, "cpu_millicores: 50 is below the minimum of 100");
  spec->cpu_millicores = MV_CPU_MILLICORES_MAX;
  assert_valid (spec);
  spec->cpu_millicores = MV_CPU_MILLICORES_MAX + 1;
  assert_invalid_message (spec, "cpu_millicores: 32001 is more than the limit of 32000");
  spec->cpu_millicores = 0;
  assert_invalid (spec, "cpu_millicores");

  /* max_vcpus: 0, or from the boot vCPUs up to 32. */
  spec->cpu_millicores = 2000;
  spec->max_vcpus = 0;
  assert_valid (spec);
  spec->max_vcpus = 2;
  assert_valid (spec);
  spec->max_vcpus = 1;
  assert_invalid (spec, "max_vcpus");
  spec->max_vcpus = MV_VCPUS_MAX;
  assert_valid (spec);
  spec->max_vcpus = MV_VCPUS_MAX + 1;
  assert_invalid (spec, "max_vcpus");
  spec->cpu_millicores = 2001;
  spec->max_vcpus = 2;
  assert_invalid (spec, "max_vcpus");
}

static void
test_limit_memory (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  spec->memory_bytes = MV_MEMORY_MIN_BYTES;
  assert_valid (spec);
  spec->memory_bytes = MV_MEMORY_MIN_BYTES - MV_MEMORY_STEP_BYTES;
  assert_invalid (spec, "memory_bytes");
  spec->memory_bytes = 1000;
  assert_invalid_message (spec, "memory_bytes: 1000 is below the minimum of 33554432 (32 MiB)");
  spec->memory_bytes = MV_MEMORY_MAX_BYTES;
  assert_valid (spec);
  spec->memory_bytes = MV_MEMORY_MAX_BYTES + MV_MEMORY_STEP_BYTES;
  assert_invalid (spec, "memory_bytes");
  spec->memory_bytes = 257 * MiB;
  assert_invalid (spec, "memory_bytes");
  spec->memory_bytes = 256 * MiB + 1;
  assert_invalid (spec, "memory_bytes");

  spec->memory_bytes = 256 * MiB;
  spec->max_memory_bytes = 0;
  assert_valid (spec);
  spec->max_memory_bytes = 256 * MiB;
  assert_valid (spec);
  spec->max_memory_bytes = 254 * MiB;
  assert_invalid (spec, "max_memory_bytes");
  spec->max_memory_bytes = MV_MEMORY_MAX_BYTES;
  assert_valid (spec);
  spec->max_memory_bytes = MV_MEMORY_MAX_BYTES + MV_MEMORY_STEP_BYTES;
  assert_invalid (spec, "max_memory_bytes");
  spec->max_memory_bytes = 513 * MiB;
  assert_invalid (spec, "max_memory_bytes");
}

static void
test_limit_disks (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  MvDisk *disk;

  for (guint i = 0; i < MV_DISKS_MAX; i++)
    {
      disk = g_new0 (MvDisk, 1);
      disk->path = g_strdup_printf ("/var/lib/d%u.img", i);
      g_ptr_array_add (spec->disks, disk);
    }
  assert_valid (spec);
  disk = g_new0 (MvDisk, 1);
  disk->path = g_strdup ("/var/lib/extra.img");
  g_ptr_array_add (spec->disks, disk);
  assert_invalid (spec, "disks");

  g_ptr_array_set_size (spec->disks, 2);
  disk = g_ptr_array_index (spec->disks, 1);
  set_string (&disk->path, g_strdup ("relative.img"));
  assert_invalid (spec, "disks[1].path");
  set_string (&disk->path, NULL);
  assert_invalid (spec, "disks[1].path");
}

static void
test_limit_readiness (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  spec->readiness = MV_READINESS_CONSOLE;
  set_string (&spec->readiness_text, g_strnfill (MV_READINESS_TEXT_MAX_BYTES, 'r'));
  assert_valid (spec);
  set_string (&spec->readiness_text, g_strnfill (MV_READINESS_TEXT_MAX_BYTES + 1, 'r'));
  assert_invalid (spec, "readiness");
  set_string (&spec->readiness_text, g_strdup (""));
  assert_invalid (spec, "readiness");
  set_string (&spec->readiness_text, NULL);
  assert_invalid (spec, "readiness");

  {
    g_autoptr(MvSpec) parsed = parse_ok ("{'name':'web','kernel':'/k','readiness':'console:'}");
    assert_invalid (parsed, "readiness");
  }
}

static void
test_limit_hostname (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  static const char *const good[] = {
    "web", "web-1", "a.b.c", "1", "xn--caf-dma.example", "WEB.Example",
  };
  static const char *const bad[] = {
    "-web", "web-", "a..b", ".web", "web.", "we_b", "we b", "caf\xc3\xa9", "a.-b.c",
  };

  set_string (&spec->hostname, dns_name_of_length (MV_HOSTNAME_MAX_BYTES));
  g_assert_cmpuint (strlen (spec->hostname), ==, MV_HOSTNAME_MAX_BYTES);
  assert_valid (spec);
  set_string (&spec->hostname, dns_name_of_length (MV_HOSTNAME_MAX_BYTES + 1));
  assert_invalid_message (spec, "hostname: longer than 253 bytes");

  set_string (&spec->hostname, g_strnfill (63, 'h'));
  assert_valid (spec);
  set_string (&spec->hostname, g_strnfill (64, 'h'));
  assert_invalid (spec, "hostname");

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      set_string (&spec->hostname, g_strdup (good[i]));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      set_string (&spec->hostname, g_strdup (bad[i]));
      assert_invalid (spec, "hostname");
    }
}

static void
test_limit_ssh_keys (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  for (guint i = 0; i < MV_SSH_KEYS_MAX; i++)
    g_ptr_array_add (spec->ssh_keys, g_strdup_printf ("ssh-ed25519 KEY%u", i));
  assert_valid (spec);
  g_ptr_array_add (spec->ssh_keys, g_strdup ("ssh-ed25519 ONEMORE"));
  assert_invalid (spec, "ssh_keys");

  g_ptr_array_set_size (spec->ssh_keys, 1);
  set_string ((char **) &spec->ssh_keys->pdata[0], g_strnfill (MV_SSH_KEY_MAX_BYTES, 'k'));
  assert_valid (spec);
  set_string ((char **) &spec->ssh_keys->pdata[0], g_strnfill (MV_SSH_KEY_MAX_BYTES + 1, 'k'));
  assert_invalid_message (spec, "ssh_keys[0]: longer than 2048 bytes");
  set_string ((char **) &spec->ssh_keys->pdata[0], g_strdup (""));
  assert_invalid (spec, "ssh_keys[0]");
  set_string ((char **) &spec->ssh_keys->pdata[0], g_strdup ("ssh-ed25519 A\nssh-ed25519 B"));
  assert_invalid (spec, "ssh_keys[0]");
}

static void
test_limit_user_data (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  set_string (&spec->user_data, g_strnfill (MV_USER_DATA_MAX_BYTES, 'u'));
  assert_valid (spec);
  set_string (&spec->user_data, g_strnfill (MV_USER_DATA_MAX_BYTES + 1, 'u'));
  assert_invalid_message (spec, "user_data: longer than 16384 bytes");
}

static void
test_limit_metadata (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  for (guint i = 0; i < MV_METADATA_MAX_ENTRIES; i++)
    g_hash_table_insert (spec->metadata, g_strdup_printf ("key%u", i), g_strdup ("v"));
  assert_valid (spec);
  g_hash_table_insert (spec->metadata, g_strdup ("onemore"), g_strdup ("v"));
  assert_invalid (spec, "metadata");

  g_hash_table_remove_all (spec->metadata);
  g_hash_table_insert (spec->metadata, g_strnfill (MV_METADATA_KEY_MAX_BYTES, 'k'), g_strdup ("v"));
  assert_valid (spec);
  g_hash_table_insert (spec->metadata, g_strnfill (MV_METADATA_KEY_MAX_BYTES + 1, 'k'), g_strdup ("v"));
  assert_invalid (spec, "metadata");

  g_hash_table_remove_all (spec->metadata);
  g_hash_table_insert (spec->metadata, g_strdup (""), g_strdup ("v"));
  assert_invalid (spec, "metadata");

  /* {"k":"<value>"} is 8 bytes around the value: exactly 48 KiB, then one over. */
  g_hash_table_remove_all (spec->metadata);
  g_hash_table_insert (spec->metadata, g_strdup ("k"), g_strnfill (MV_METADATA_MAX_JSON_BYTES - 8, 'v'));
  assert_valid (spec);
  g_hash_table_insert (spec->metadata, g_strdup ("k"), g_strnfill (MV_METADATA_MAX_JSON_BYTES - 7, 'v'));
  assert_invalid (spec, "metadata");

  /* Keys are names the guest and people read. */
  g_hash_table_remove_all (spec->metadata);
  g_hash_table_insert (spec->metadata, g_strdup ("ro\xe2\x81\xa7le"), g_strdup ("v"));
  assert_invalid_message (spec, "metadata: U+2067 is not allowed in a key (a bidirectional control)");
  g_hash_table_remove_all (spec->metadata);
  g_hash_table_insert (spec->metadata, g_strdup ("k"), g_strnfill (MV_METADATA_MAX_JSON_BYTES - 8, 'v'));

  /* Escapes count as written: a quote takes two bytes. */
  g_hash_table_insert (spec->metadata, g_strdup ("k"), g_strnfill ((MV_METADATA_MAX_JSON_BYTES - 8) / 2 + 1, '"'));
  assert_invalid (spec, "metadata");
}

static void
test_metadata_document (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  const char *expected =
    "{\"latest\":{\"meta-data\":{\"hostname\":\"web\",\"public-keys\":[],"
    "\"attributes\":{}},\"user-data\":\"\"}}";
  gsize base, remaining;
  GString *user_data;

  /* With no hostname, the guest takes the machine's name. */
  g_assert_cmpuint (mv_spec_metadata_document_size (spec), ==, strlen (expected));
  set_string (&spec->hostname, g_strdup ("host"));
  g_assert_cmpuint (mv_spec_metadata_document_size (spec), ==, strlen (expected) + 1);

  /* Each part within its own limit, yet together past 248 KiB: control
   * characters are written as \u00XX, six bytes for one. */
  for (guint i = 0; i < MV_SSH_KEYS_MAX; i++)
    g_ptr_array_add (spec->ssh_keys, g_strnfill (MV_SSH_KEY_MAX_BYTES, '\x01'));
  base = mv_spec_metadata_document_size (spec);
  g_assert_cmpuint (base, <, MV_METADATA_DOCUMENT_MAX_BYTES);
  remaining = MV_METADATA_DOCUMENT_MAX_BYTES - base;
  user_data = g_string_new (NULL);
  for (gsize i = 0; i < remaining / 6; i++)
    g_string_append_c (user_data, '\x01');
  for (gsize i = 0; i < remaining % 6; i++)
    g_string_append_c (user_data, 'u');
  g_assert_cmpuint (user_data->len, <=, MV_USER_DATA_MAX_BYTES);
  set_string (&spec->user_data, g_strdup (user_data->str));
  g_assert_cmpuint (mv_spec_metadata_document_size (spec), ==, MV_METADATA_DOCUMENT_MAX_BYTES);
  assert_valid (spec);

  g_string_append_c (user_data, 'u');
  set_string (&spec->user_data, g_string_free (user_data, FALSE));
  g_assert_cmpuint (mv_spec_metadata_document_size (spec), ==, MV_METADATA_DOCUMENT_MAX_BYTES + 1);
  assert_invalid (spec, "metadata");
}

static void
test_limit_labels (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  for (guint i = 0; i < MV_LABELS_MAX; i++)
    g_hash_table_insert (spec->labels, g_strdup_printf ("l%u", i), g_strdup ("v"));
  assert_valid (spec);
  g_hash_table_insert (spec->labels, g_strdup ("onemore"), g_strdup ("v"));
  assert_invalid (spec, "labels");

  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strnfill (MV_LABEL_KEY_MAX_BYTES, 'k'),
                       g_strnfill (MV_LABEL_VALUE_MAX_BYTES, 'v'));
  assert_valid (spec);
  g_hash_table_insert (spec->labels, g_strnfill (MV_LABEL_KEY_MAX_BYTES + 1, 'k'), g_strdup ("v"));
  assert_invalid (spec, "labels");

  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup ("team"), g_strnfill (MV_LABEL_VALUE_MAX_BYTES + 1, 'v'));
  assert_invalid (spec, "labels.team");

  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup (""), g_strdup ("v"));
  assert_invalid (spec, "labels");

  /* Keys display as themselves; values are text without controls. */
  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup ("team\xe2\x80\xae"), g_strdup ("v"));
  assert_invalid_message (spec, "labels: U+202E is not allowed in a key (a bidirectional control)");
  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup ("te\xe2\x80\x8d" "am"), g_strdup ("v"));
  assert_invalid (spec, "labels");
  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup ("team"), g_strdup ("web\nrm -rf"));
  assert_invalid_message (spec, "labels.team: contains a control character (0x0a)");
  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup ("team"), g_strdup ("caf\xc3\xa9 \xe2\x80\xae"));
  assert_valid (spec);

  /* An empty value is a label all the same. */
  g_hash_table_remove_all (spec->labels);
  g_hash_table_insert (spec->labels, g_strdup ("flag"), g_strdup (""));
  assert_valid (spec);
}

static void
test_limit_firewall (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  for (guint i = 0; i < MV_FIREWALL_RULES_MAX; i++)
    {
      g_autoptr(JsonObject) rule = json_object_new ();
      json_object_set_int_member (rule, "port", i);
      json_array_add_object_element (spec->firewall, g_steal_pointer (&rule));
    }
  assert_valid (spec);
  json_array_add_object_element (spec->firewall, json_object_new ());
  assert_invalid (spec, "firewall");

  json_array_unref (spec->firewall);
  spec->firewall = json_array_new ();
  json_array_add_object_element (spec->firewall, json_object_new ());
  json_array_add_string_element (spec->firewall, "allow all");
  assert_invalid (spec, "firewall[1]");

  /* Each rule: its depth, then its size. */
  json_array_unref (spec->firewall);
  spec->firewall = json_array_new ();
  json_array_add_element (spec->firewall, nested_rule (MV_FIREWALL_RULE_MAX_DEPTH));
  assert_valid (spec);
  json_array_add_element (spec->firewall, nested_rule (MV_FIREWALL_RULE_MAX_DEPTH + 1));
  assert_invalid_message (spec, "firewall[1]: nesting depth 9 is more than the limit of 8");

  json_array_unref (spec->firewall);
  spec->firewall = json_array_new ();
  json_array_add_element (spec->firewall, rule_of_size (MV_FIREWALL_RULE_MAX_BYTES));
  assert_valid (spec);
  json_array_add_element (spec->firewall, rule_of_size (MV_FIREWALL_RULE_MAX_BYTES + 1));
  assert_invalid_message (spec, "firewall[1]: 1025 bytes of JSON, more than the limit of 1024");
}

static void
test_limit_network (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  static const char *const good_ips[] = { "10.0.0.5", "10.0.0.5/24", "fd00::5/64",
                                          "::ffff:192.168.100.200/128" };
  static const char *const bad_ips[] = { "10.0.0.5 ", "10.0.0.5\n", "host.example", "[fd00::5]" };

  set_string (&spec->network_name, g_strdup ("lan"));
  assert_valid (spec);
  set_string (&spec->network_name, g_strnfill (MV_NAME_MAX_BYTES + 1, 'n'));
  assert_invalid_message (spec, "network_name: longer than 63 bytes");
  set_string (&spec->network_name, g_strdup ("../lan"));
  assert_invalid (spec, "network_name");
  set_string (&spec->network_name, g_strdup ("lan\xe2\x80\xae"));
  assert_invalid (spec, "network_name");
  set_string (&spec->network_name, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (good_ips); i++)
    {
      set_string (&spec->static_ip, g_strdup (good_ips[i]));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad_ips); i++)
    {
      set_string (&spec->static_ip, g_strdup (bad_ips[i]));
      assert_invalid_message (spec, "static_ip: may hold only an IP address and a prefix length");
    }
  set_string (&spec->static_ip, g_strnfill (MV_STATIC_IP_MAX_BYTES + 1, '1'));
  assert_invalid_message (spec, "static_ip: 50 bytes, more than the limit of 49");
}

/* Every field at its limit, with characters that take two bytes in JSON
 * where a field allows them: still a spec, and one the reader takes back. */
static void
test_limit_whole_spec (void)
{
  g_autoptr(MvSpec) spec = largest_spec ();
  g_autofree char *json = NULL;
  g_autoptr(MvSpec) again = NULL;
  g_autoptr(GError) error = NULL;

  assert_valid (spec);
  json = mv_spec_to_json (spec, TRUE);
  g_test_message ("the largest spec is %" G_GSIZE_FORMAT " bytes", strlen (json));
  g_assert_cmpuint (strlen (json), <=, MV_SPEC_MAX_BYTES);
  again = mv_spec_from_json (json, &error);
  g_assert_no_error (error);
  g_assert_true (mv_spec_equal (spec, again));
}

static void
test_limit_restart (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  spec->restart_mode = MV_RESTART_ON_FAILURE;
  spec->restart_max_retries = MV_RESTART_MAX_RETRIES_MAX;
  assert_valid (spec);
  spec->restart_max_retries = MV_RESTART_MAX_RETRIES_MAX + 1;
  assert_invalid (spec, "restart.max_retries");

  spec->restart_max_retries = 5;
  spec->restart_mode = MV_RESTART_ALWAYS;
  assert_invalid (spec, "restart.max_retries");
  spec->restart_mode = MV_RESTART_NO;
  assert_invalid (spec, "restart.max_retries");
  spec->restart_max_retries = 0;
  for (MvRestartMode mode = MV_RESTART_NO; mode <= MV_RESTART_ALWAYS; mode++)
    {
      spec->restart_mode = mode;
      assert_valid (spec);
    }
}

static void
test_limit_standby (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  spec->standby_after_seconds = 0;
  assert_valid (spec);
  spec->standby_after_seconds = MV_STANDBY_AFTER_MIN_SECONDS;
  assert_valid (spec);
  spec->standby_after_seconds = MV_STANDBY_AFTER_MIN_SECONDS - 1;
  assert_invalid (spec, "standby_after_seconds");
  spec->standby_after_seconds = 1;
  assert_invalid (spec, "standby_after_seconds");
  spec->standby_after_seconds = MV_STANDBY_AFTER_MAX_SECONDS;
  assert_valid (spec);
  spec->standby_after_seconds = MV_STANDBY_AFTER_MAX_SECONDS + 1;
  assert_invalid_message (spec, "standby_after_seconds: 31536001 is more than the limit of "
                          "31536000");
}

static void
test_limit_utf8 (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  set_string (&spec->user_data, g_strdup ("\xff"));
  assert_invalid (spec, "user_data");
  set_string (&spec->user_data, NULL);
  set_string (&spec->network_name, g_strdup ("net\xc3"));
  assert_invalid (spec, "network_name");
  set_string (&spec->network_name, NULL);
  g_hash_table_insert (spec->labels, g_strdup ("k"), g_strdup ("\xfe"));
  assert_invalid (spec, "labels");
}

/* ---- fields not carried out yet ---- */

#define assert_not_implemented(spec, field) \
  G_STMT_START { \
    g_autoptr(GError) error_ = NULL; \
    g_assert_false (mv_spec_check_implemented ((spec), &error_)); \
    g_assert_error (error_, MV_ERROR, MV_ERROR_UNSUPPORTED); \
    g_assert_cmpstr (error_->message, ==, field ": not supported by this microvmd yet"); \
  } G_STMT_END

static void
test_implemented_plain (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autoptr(MvSpec) parsed = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_spec_check_implemented (spec, &error));
  g_assert_no_error (error);

  /* What every machine may set, and the pending fields left empty, which
   * mean "not set". */
  parsed = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz','cpu_millicores':2000,"
                     "'memory_bytes':536870912,'disks':[{'path':'/var/lib/a.img'}],"
                     "'readiness':'agent','restart':{'mode':'always'},"
                     "'standby_after_seconds':600,'labels':{'team':'web'},"
                     "'network_name':'','static_ip':'','hostname':'','user_data':'',"
                     "'ssh_keys':[],'metadata':{},'firewall':[]}");
  g_assert_true (mv_spec_check_implemented (parsed, &error));
  g_assert_no_error (error);
}

static void
test_implemented_each_field (void)
{
  struct {
    const char *field;
    const char *json;
  } cases[] = {
    { "network_name", "{'name':'web','kernel':'/k','network_name':'lan'}" },
    { "static_ip", "{'name':'web','kernel':'/k','static_ip':'10.0.0.5/24'}" },
    { "firewall", "{'name':'web','kernel':'/k','firewall':[{'allow':'tcp/22'}]}" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MvSpec) spec = parse_ok (cases[i].json);
      g_autofree char *expected = g_strconcat (cases[i].field,
                                               ": not supported by this microvmd yet", NULL);
      g_autoptr(GError) error = NULL;

      /* Parsed and valid all the same: only carrying it out is missing. */
      g_assert_true (mv_spec_validate (spec, &error));
      g_assert_no_error (error);
      g_assert_false (mv_spec_check_implemented (spec, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
      g_assert_cmpstr (error->message, ==, expected);
    }
}

static void
test_implemented_first_named (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  json_array_add_object_element (spec->firewall, json_object_new ());
  assert_not_implemented (spec, "firewall");
  set_string (&spec->static_ip, g_strdup ("10.0.0.5"));
  assert_not_implemented (spec, "static_ip");
  set_string (&spec->network_name, g_strdup ("lan"));
  assert_not_implemented (spec, "network_name");
}

/* The guest's identity and metadata are carried out now. */
static void
test_implemented_guest_metadata (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','hostname':'web.example',"
                                     "'ssh_keys':['ssh-ed25519 AAAA'],"
                                     "'user_data':'#cloud-config','metadata':{'role':'db'}}");
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_spec_validate (spec, &error));
  g_assert_no_error (error);
  g_assert_true (mv_spec_check_implemented (spec, &error));
  g_assert_no_error (error);
}

/* Volume and directory mounts are read and validated, not carried out;
 * file and tmpfs mounts are. */
static void
test_implemented_mounts (void)
{
  static const struct {
    const char *json;
    const char *message;
  } cases[] = {
    { "{'name':'web','kernel':'/k','mounts':[{'type':'volume','source':'data','target':'/data'}]}",
      "mounts[0].type: volume mounts are not supported by this microvmd yet" },
    { "{'name':'web','kernel':'/k','mounts':[{'type':'tmpfs','target':'/tmp'},"
      "{'type':'directory','source':'/srv/share','target':'/share'}]}",
      "mounts[1].type: directory mounts are not supported by this microvmd yet" },
  };
  g_autoptr(MvSpec) carried = parse_ok ("{'name':'web','kernel':'/k','mounts':["
                                        "{'type':'file','target':'/etc/a','content':'YQ=='},"
                                        "{'type':'tmpfs','target':'/tmp'}]}");
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_spec_check_implemented (carried, &error));
  g_assert_no_error (error);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MvSpec) spec = parse_ok (cases[i].json);

      g_assert_true (mv_spec_validate (spec, &error));
      g_assert_no_error (error);
      g_assert_false (mv_spec_check_implemented (spec, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
      g_assert_cmpstr (error->message, ==, cases[i].message);
      g_clear_error (&error);
    }
}

/* A spec built in code may hold "" where a parsed one holds NULL. */
static void
test_implemented_empty_strings (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autoptr(GError) error = NULL;

  set_string (&spec->network_name, g_strdup (""));
  set_string (&spec->static_ip, g_strdup (""));
  set_string (&spec->hostname, g_strdup (""));
  set_string (&spec->user_data, g_strdup (""));
  g_assert_true (mv_spec_check_implemented (spec, &error));
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/spec/defaults", test_defaults);
  g_test_add_func ("/spec/parse-full", test_parse_full);
  g_test_add_func ("/spec/round-trip", test_round_trip);
  g_test_add_func ("/spec/member-order", test_member_order);
  g_test_add_func ("/spec/absent-optional-strings", test_absent_optional_strings);
  g_test_add_func ("/spec/null-is-absent", test_null_is_absent);
  g_test_add_func ("/spec/empty-means-default", test_empty_means_default);
  g_test_add_func ("/spec/readiness", test_readiness);
  g_test_add_func ("/spec/restart-modes", test_restart_modes);
  g_test_add_func ("/spec/unknown-fields", test_unknown_fields);
  g_test_add_func ("/spec/wrong-types", test_wrong_types);
  g_test_add_func ("/spec/integers", test_integers);
  g_test_add_func ("/spec/malformed", test_malformed);
  g_test_add_func ("/spec/strict/document", test_strict_document);
  g_test_add_func ("/spec/strict/depth", test_strict_depth);
  g_test_add_func ("/spec/strict/size", test_strict_size);
  g_test_add_func ("/spec/standby-alias", test_standby_alias);
  g_test_add_func ("/spec/secrets", test_secrets);
  g_test_add_func ("/spec/fingerprint", test_fingerprint);
  g_test_add_func ("/spec/fingerprint-signed-urls", test_fingerprint_signed_urls);
  g_test_add_func ("/spec/vcpus", test_vcpus);
  g_test_add_func ("/spec/equal-and-differences", test_equal_and_differences);
  g_test_add_func ("/spec/limits/name", test_limit_name);
  g_test_add_func ("/spec/limits/id", test_limit_id);
  g_test_add_func ("/spec/limits/hypervisor", test_limit_hypervisor);
  g_test_add_func ("/spec/limits/boot", test_limit_boot);
  g_test_add_func ("/spec/limits/cpu", test_limit_cpu);
  g_test_add_func ("/spec/limits/memory", test_limit_memory);
  g_test_add_func ("/spec/limits/disks", test_limit_disks);
  g_test_add_func ("/spec/limits/readiness", test_limit_readiness);
  g_test_add_func ("/spec/limits/hostname", test_limit_hostname);
  g_test_add_func ("/spec/limits/ssh-keys", test_limit_ssh_keys);
  g_test_add_func ("/spec/limits/user-data", test_limit_user_data);
  g_test_add_func ("/spec/limits/metadata", test_limit_metadata);
  g_test_add_func ("/spec/limits/metadata-document", test_metadata_document);
  g_test_add_func ("/spec/limits/labels", test_limit_labels);
  g_test_add_func ("/spec/limits/firewall", test_limit_firewall);
  g_test_add_func ("/spec/limits/network", test_limit_network);
  g_test_add_func ("/spec/limits/whole-spec", test_limit_whole_spec);
  g_test_add_func ("/spec/limits/restart", test_limit_restart);
  g_test_add_func ("/spec/limits/standby", test_limit_standby);
  g_test_add_func ("/spec/limits/utf8", test_limit_utf8);
  g_test_add_func ("/spec/implemented/plain", test_implemented_plain);
  g_test_add_func ("/spec/implemented/each-field", test_implemented_each_field);
  g_test_add_func ("/spec/implemented/first-named", test_implemented_first_named);
  g_test_add_func ("/spec/implemented/guest-metadata", test_implemented_guest_metadata);
  g_test_add_func ("/spec/implemented/mounts", test_implemented_mounts);
  g_test_add_func ("/spec/implemented/empty-strings", test_implemented_empty_strings);

  return g_test_run ();
}
