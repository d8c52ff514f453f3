#include <string.h>

#include "core/errors.h"
#include "core/machine.h"
#include "core/net-rules.h"
#include "core/network-spec.h"
#include "core/spec.h"
#include "core/spec-private.h"
#include "core/workload.h"

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
  "'firewall':[{'action':'allow','protocol':'tcp','port':22,'source':'10.0.0.0/8'},"
  "{'action':'deny'}],'ports':[{'host_port':8080,'guest_port':80},"
  "{'host_ip':'127.0.0.1','host_port':53,'protocol':'udp'}],"
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
  g_assert_cmpuint (spec->ports->len, ==, 2);
  {
    const MvPortMapping *web = g_ptr_array_index (spec->ports, 0);
    const MvPortMapping *dns = g_ptr_array_index (spec->ports, 1);

    g_assert_cmphex (web->host_address, ==, 0);
    g_assert_cmpuint (web->host_port, ==, 8080);
    g_assert_cmpuint (web->guest_port, ==, 80);
    g_assert_cmpint (web->protocol, ==, MV_NET_PROTOCOL_TCP);
    g_assert_cmphex (dns->host_address, ==, 0x7f000001);
    g_assert_cmpuint (dns->guest_port, ==, 53);
    g_assert_cmpint (dns->protocol, ==, MV_NET_PROTOCOL_UDP);
  }
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
                                 "action", "deny");
  ((MvPortMapping *) g_ptr_array_index (copy->ports, 0))->guest_port = 81;
  g_hash_table_insert (copy->labels, g_strdup ("team"), g_strdup ("db"));
  g_assert_false (mv_spec_equal (spec, copy));
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (spec->firewall, 0),
                                                  "action"), ==, "allow");
  g_assert_cmpuint (((MvPortMapping *) g_ptr_array_index (spec->ports, 0))->guest_port, ==, 80);
  g_assert_cmpstr (g_hash_table_lookup (spec->labels, "team"), ==, "web");
}

static void
test_member_order (void)
{
  static const char *const expected[] = {
    "id", "name", "hypervisor_type", "hypervisor_version", "kernel", "initrd",
    "kernel_args", "cpu_millicores", "max_vcpus", "memory_bytes",
    "max_memory_bytes", "disks", "readiness", "network_name", "static_ip",
    "hostname", "ssh_keys", "user_data", "metadata", "firewall", "ports", "restart",
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
  assert_parse_fails ("{'workdir':'/srv'}", "unknown field 'workdir'");
  assert_parse_fails ("{'command':['/bin/sh']}", "unknown field 'command'");
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
    { "{'ports':{}}", "ports: expected an array of objects, got an object" },
    { "{'ports':[8080]}", "ports[0]: expected an object, got an integer" },
    { "{'ports':[{'host_port':'8080'}]}", "ports[0].host_port: expected an integer" },
    { "{'ports':[{'host_port':8080,'guest_port':true}]}", "ports[0].guest_port: expected an integer" },
    { "{'ports':[{'host_port':80,'host_ip':1}]}", "ports[0].host_ip: expected a string" },
    { "{'ports':[{'host_port':80,'protocol':6}]}", "ports[0].protocol: expected a string" },
    { "{'ports':[{'host_port':80,'proto':'tcp'}]}", "ports[0]: unknown field 'proto'" },
    { "{'ports':[{'host_port':80},{'guest_port':80}]}", "ports[1].host_port: required" },
    { "{'ports':[{'host_port':70000}]}", "ports[0].host_port: 70000 is more than the limit of 65535" },
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

  /* Each secret stands as the placeholder. */
  JsonArray *keys = json_object_get_array_member (h, "ssh_keys");
  g_assert_cmpuint (json_array_get_length (keys), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (keys, 0), ==, MV_SPEC_REDACTED);
  g_assert_cmpstr (json_object_get_string_member (h, "user_data"), ==, MV_SPEC_REDACTED);
  metadata = json_object_get_object_member (h, "metadata");
  g_assert_cmpuint (json_object_get_size (metadata), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (metadata, "role"), ==, MV_SPEC_REDACTED);
  g_assert_cmpstr (json_object_get_string_member (metadata, "tier"), ==, MV_SPEC_REDACTED);
  g_assert_null (strstr (text, "frontend"));
  g_assert_null (strstr (text, "AAAA"));
  g_assert_null (strstr (text, "cloud-config"));
  /* Everything else is still there. */
  g_assert_cmpstr (json_object_get_string_member (h, "hostname"), ==, "web.example");

  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (s, "ssh_keys")), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (s, "user_data"), ==, "#cloud-config");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (s, "metadata"),
                                                  "role"), ==, "frontend");

  /* Sent back, the shown spec is refused, naming the first placeholder:
   * it cannot wipe what it hides. */
  {
    g_autoptr(MvSpec) back = mv_spec_from_json (text, NULL);
    g_autoptr(GError) error = NULL;

    g_assert_nonnull (back);
    g_assert_false (mv_spec_validate (back, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "ssh_keys[0]"));
    g_assert_nonnull (strstr (error->message, MV_SPEC_REDACTED));
    g_ptr_array_set_size (back->ssh_keys, 0);
    g_clear_error (&error);
    g_assert_false (mv_spec_validate (back, &error));
    g_assert_nonnull (strstr (error->message, "user_data"));
    g_clear_pointer (&back->user_data, g_free);
    g_clear_error (&error);
    g_assert_false (mv_spec_validate (back, &error));
    g_assert_nonnull (strstr (error->message, "metadata."));
    g_hash_table_remove_all (back->metadata);
    g_clear_error (&error);
    g_assert_true (mv_spec_validate (back, &error));
  }
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
  g_autoptr(JsonObject) innermost = json_object_new ();
  JsonNode *node = json_node_init_object (json_node_alloc (), innermost);

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

/* The longest rule there can be: every member, each at its longest. */
static JsonNode *
longest_rule (void)
{
  g_autoptr(JsonObject) rule = json_object_new ();

  json_object_set_string_member (rule, "action", "allow");
  json_object_set_string_member (rule, "protocol", "tcp");
  json_object_set_string_member (rule, "port", "65535-65535");
  json_object_set_string_member (rule, "source", "255.255.255.255/32");
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
    json_array_add_element (spec->firewall, longest_rule ());
  for (guint i = 0; i < MV_PORTS_MAX; i++)
    {
      MvPortMapping *port = g_new0 (MvPortMapping, 1);

      port->host_address = 0xffffffff;
      port->host_port = (guint16) (MV_NET_PORT_MAX - i);
      port->guest_port = MV_NET_PORT_MAX;
      port->protocol = MV_NET_PROTOCOL_UDP;
      g_ptr_array_add (spec->ports, port);
    }
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
  /* None: the daemon's own guest kernel. */
  set_string (&spec->kernel, NULL);
  assert_valid (spec);
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

/* Console keys sit in latest/meta-data/console-keys; what they add to
 * the document is what mv_console_keys_size() says, to the byte. */
static void
test_console_keys_document (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_console_key_free);
  g_autoptr(JsonNode) bare = mv_spec_metadata_document (spec);
  g_autofree char *bare_text = json_to_string (bare, FALSE);

  g_assert_cmpuint (mv_console_keys_size (keys), ==, 0);
  for (guint i = 0; i < 3; i++)
    {
      MvConsoleKey *key = g_new0 (MvConsoleKey, 1);
      g_autoptr(JsonNode) doc = NULL;
      g_autofree char *text = NULL;

      key->key = g_strdup_printf ("sha256:%064u", i);
      key->user = g_strdup (i ? "app" : "root");
      key->expires = 1796529452 + i;
      g_ptr_array_add (keys, key);
      doc = mv_spec_metadata_document_with_keys (spec, keys);
      text = json_to_string (doc, FALSE);
      g_assert_cmpuint (strlen (text), ==, strlen (bare_text) + mv_console_keys_size (keys));
      g_assert_nonnull (strstr (text, "\"attributes\":{},\"console-keys\":[{\"key\":\"sha256:"));
      g_assert_nonnull (strstr (text, "\"user\":\"root\",\"expires\":1796529452}"));
    }
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
reset_firewall (MvSpec *spec)
{
  json_array_unref (spec->firewall);
  spec->firewall = json_array_new ();
}

static void
add_rule (MvSpec *spec, const char *single_quoted)
{
  g_autofree char *json = q (single_quoted);

  json_array_add_element (spec->firewall, json_from_string (json, NULL));
}

static void
test_limit_firewall (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  set_string (&spec->network_name, g_strdup ("lan"));
  for (guint i = 0; i < MV_FIREWALL_RULES_MAX; i++)
    {
      g_autoptr(JsonObject) rule = json_object_new ();
      json_object_set_string_member (rule, "action", "allow");
      json_object_set_string_member (rule, "protocol", "tcp");
      json_object_set_int_member (rule, "port", i + 1);
      json_array_add_object_element (spec->firewall, g_steal_pointer (&rule));
    }
  assert_valid (spec);
  add_rule (spec, "{'action':'deny'}");
  assert_invalid_message (spec, "firewall: 257 rules, more than the limit of 256");

  reset_firewall (spec);
  add_rule (spec, "{'action':'deny'}");
  json_array_add_string_element (spec->firewall, "allow all");
  assert_invalid (spec, "firewall[1]");

  /* Rules need a network to be on. */
  reset_firewall (spec);
  add_rule (spec, "{'action':'deny','protocol':'icmp'}");
  assert_valid (spec);
  set_string (&spec->network_name, NULL);
  assert_invalid_message (spec, "firewall: the machine is on no network (network_name is not "
                          "set)");
  set_string (&spec->network_name, g_strdup ("lan"));

  /* Each rule in its real form, the error naming it and its member. */
  reset_firewall (spec);
  add_rule (spec, "{'action':'allow','protocol':'tcp','port':'22-23','source':'10.0.0.0/8'}");
  add_rule (spec, "{'allow':'tcp/22'}");
  assert_invalid_message (spec, "firewall[1]: unknown field 'allow'");
  reset_firewall (spec);
  add_rule (spec, "{'action':'allow'}");
  add_rule (spec, "{'protocol':'tcp'}");
  assert_invalid_message (spec, "firewall[1].action: required (allow or deny)");
  reset_firewall (spec);
  add_rule (spec, "{'action':'allow','protocol':'udp','port':65535}");
  assert_valid (spec);
  add_rule (spec, "{'action':'allow','protocol':'udp','port':65536}");
  assert_invalid_message (spec, "firewall[1].port: 65536 is more than the limit of 65535");
  reset_firewall (spec);
  add_rule (spec, "{'action':'allow','protocol':'tcp','port':1}");
  assert_valid (spec);
  add_rule (spec, "{'action':'allow','protocol':'tcp','port':0}");
  assert_invalid_message (spec, "firewall[1].port: 0 is below the minimum of 1");
  reset_firewall (spec);
  add_rule (spec, "{'action':'allow','protocol':'icmp','port':1}");
  assert_invalid_message (spec, "firewall[0].port: only for tcp and udp rules, not icmp");
  reset_firewall (spec);
  add_rule (spec, "{'action':'allow','source':'10.1.0.0/16'}");
  assert_valid (spec);
  add_rule (spec, "{'action':'allow','source':'10.1.0.0/15'}");
  assert_invalid_message (spec, "firewall[1].source: \"10.1.0.0/15\" has host bits set "
                          "(the network is 10.0.0.0/15)");

  /* Each rule: its depth, then its size, before its members are read. */
  reset_firewall (spec);
  json_array_add_element (spec->firewall, nested_rule (MV_FIREWALL_RULE_MAX_DEPTH));
  assert_invalid_message (spec, "firewall[0]: unknown field 'a'");
  json_array_add_element (spec->firewall, nested_rule (MV_FIREWALL_RULE_MAX_DEPTH + 1));
  assert_invalid_message (spec, "firewall[1]: nesting depth 9 is more than the limit of 8");

  reset_firewall (spec);
  json_array_add_element (spec->firewall, rule_of_size (MV_FIREWALL_RULE_MAX_BYTES));
  assert_invalid_message (spec, "firewall[0]: unknown field 'allow'");
  json_array_add_element (spec->firewall, rule_of_size (MV_FIREWALL_RULE_MAX_BYTES + 1));
  assert_invalid_message (spec, "firewall[1]: 1025 bytes of JSON, more than the limit of 1024");
}

static MvPortMapping *
add_port (MvSpec *spec, const char *host_ip, guint16 host_port, MvNetProtocol protocol)
{
  MvPortMapping *port = g_new0 (MvPortMapping, 1);

  if (host_ip != NULL)
    g_assert_true (mv_ipv4_parse (host_ip, &port->host_address));
  port->host_port = host_port;
  port->guest_port = host_port;
  port->protocol = protocol;
  g_ptr_array_add (spec->ports, port);
  return port;
}

static void
test_limit_ports (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  MvPortMapping *port;

  set_string (&spec->network_name, g_strdup ("lan"));
  for (guint i = 0; i < MV_PORTS_MAX; i++)
    add_port (spec, NULL, (guint16) (8000 + i), MV_NET_PROTOCOL_TCP);
  assert_valid (spec);
  add_port (spec, NULL, 9000, MV_NET_PROTOCOL_TCP);
  assert_invalid_message (spec, "ports: 65 ports, more than the limit of 64");

  /* Ports need a network to be on. */
  g_ptr_array_set_size (spec->ports, 1);
  assert_valid (spec);
  set_string (&spec->network_name, NULL);
  assert_invalid_message (spec, "ports: the machine is on no network (network_name is not set)");
  set_string (&spec->network_name, g_strdup ("lan"));

  /* The same host port twice: the same address, or either is every one. */
  g_ptr_array_set_size (spec->ports, 0);
  add_port (spec, NULL, 8080, MV_NET_PROTOCOL_TCP);
  add_port (spec, NULL, 8080, MV_NET_PROTOCOL_TCP);
  assert_invalid_message (spec, "ports[1]: tcp 8080 is published twice");
  g_ptr_array_set_size (spec->ports, 0);
  add_port (spec, "127.0.0.1", 8080, MV_NET_PROTOCOL_TCP);
  add_port (spec, "0.0.0.0", 8080, MV_NET_PROTOCOL_TCP);
  assert_invalid_message (spec, "ports[1]: tcp 8080 is published twice");
  g_ptr_array_set_size (spec->ports, 0);
  add_port (spec, NULL, 53, MV_NET_PROTOCOL_UDP);
  add_port (spec, "10.1.2.3", 53, MV_NET_PROTOCOL_UDP);
  assert_invalid_message (spec, "ports[1]: udp 53 is published twice");
  /* Another protocol, or another address of the host, is another port. */
  g_ptr_array_set_size (spec->ports, 0);
  add_port (spec, NULL, 53, MV_NET_PROTOCOL_UDP);
  add_port (spec, NULL, 53, MV_NET_PROTOCOL_TCP);
  add_port (spec, "127.0.0.1", 8080, MV_NET_PROTOCOL_TCP);
  add_port (spec, "127.0.0.2", 8080, MV_NET_PROTOCOL_TCP);
  assert_valid (spec);

  /* From 1 to 65535, each way. */
  g_ptr_array_set_size (spec->ports, 0);
  port = add_port (spec, NULL, 1, MV_NET_PROTOCOL_TCP);
  port->guest_port = MV_NET_PORT_MAX;
  assert_valid (spec);
  port->host_port = 0;
  assert_invalid_message (spec, "ports[0].host_port: 0 is below the minimum of 1");
  port->host_port = MV_NET_PORT_MAX;
  port->guest_port = 0;
  assert_invalid_message (spec, "ports[0].guest_port: 0 is below the minimum of 1");
  port->guest_port = 1;
  port->protocol = MV_NET_PROTOCOL_ICMP;
  assert_invalid_message (spec, "ports[0].protocol: icmp is not one of tcp, udp");
}

/* As a document: the same refusals, and the defaults filled in. */
static void
test_ports_document (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','network_name':'lan',"
                                     "'ports':[{'host_port':8080}]}");
  const MvPortMapping *port = g_ptr_array_index (spec->ports, 0);
  g_autofree char *json = mv_spec_to_json (spec, TRUE);
  g_autoptr(MvSpec) none = parse_ok ("{'name':'web','kernel':'/k'}");
  g_autofree char *json_none = mv_spec_to_json (none, TRUE);

  assert_valid (spec);
  g_assert_cmphex (port->host_address, ==, 0);
  g_assert_cmpuint (port->guest_port, ==, 8080);
  g_assert_cmpint (port->protocol, ==, MV_NET_PROTOCOL_TCP);
  assert_message_contains (json, "\"ports\":[{\"host_ip\":\"0.0.0.0\",\"host_port\":8080,"
                           "\"guest_port\":8080,\"protocol\":\"tcp\"}]");
  /* Written only when there are some. */
  g_assert_null (strstr (json_none, "ports"));

  g_clear_pointer (&spec, mv_spec_free);
  spec = parse_ok ("{'name':'web','kernel':'/k','network_name':'lan',"
                   "'ports':[{'host_port':8080},{'host_port':8080,'guest_port':80}]}");
  assert_invalid_message (spec, "ports[1]: tcp 8080 is published twice");
  g_clear_pointer (&spec, mv_spec_free);
  spec = parse_ok ("{'name':'web','kernel':'/k','ports':[{'host_port':8080}]}");
  assert_invalid_message (spec, "ports: the machine is on no network (network_name is not set)");
  g_clear_pointer (&spec, mv_spec_free);
  spec = parse_ok ("{'name':'web','kernel':'/k','network_name':'lan','ports':[]}");
  assert_valid (spec);
  g_assert_cmpuint (spec->ports->len, ==, 0);
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

  /* What is only for a machine on a network needs one. */
  set_string (&spec->static_ip, g_strdup ("10.0.0.5"));
  assert_invalid_message (spec, "static_ip: the machine is on no network (network_name is not "
                          "set)");
  set_string (&spec->static_ip, NULL);
  spec->upload_bytes_per_second = 1 << 20;
  assert_invalid_message (spec, "upload_bytes_per_second: the machine is on no network "
                          "(network_name is not set)");
  spec->upload_bytes_per_second = 0;
  spec->download_bytes_per_second = 1 << 20;
  assert_invalid_message (spec, "download_bytes_per_second: the machine is on no network "
                          "(network_name is not set)");
  set_string (&spec->network_name, g_strdup ("lan"));
  assert_valid (spec);
  spec->download_bytes_per_second = MV_NET_BYTES_PER_SECOND_MIN - 1;
  assert_invalid (spec, "download_bytes_per_second");
  spec->download_bytes_per_second = MV_NET_BYTES_PER_SECOND_MAX + 1;
  assert_invalid (spec, "download_bytes_per_second");
  spec->download_bytes_per_second = 0;
  spec->upload_bytes_per_second = MV_NET_BYTES_PER_SECOND_MIN - 1;
  assert_invalid (spec, "upload_bytes_per_second");
  spec->upload_bytes_per_second = 0;

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

/* ---- the workload ---- */

static const char workload_document[] =
  "{'name':'web','kernel':'/boot/vmlinuz',"
  "'disks':[{'path':'/var/lib/root.img','root':true},{'path':'/var/lib/data.img'}],"
  "'cmd':['/usr/bin/server','--port','8080'],'env':{'PATH':'/usr/bin','LANG':'C.UTF-8'},"
  "'user':'www:www','working_dir':'/srv','init_mode':'exec',"
  "'mounts':[{'type':'file','target':'/etc/app.conf','content':'aGVsbG8K','mode':'0600',"
  "'read_only':true},"
  "{'type':'tmpfs','target':'/tmp','size_bytes':16777216,'mode':448},"
  "{'type':'volume','source':'data','target':'/data'},"
  "{'type':'directory','source':'/srv/share','target':'/share','read_only':true}],"
  "'health_check':{'http':{'port':8080,'path':'/healthz'},'interval_seconds':10,"
  "'timeout_seconds':2,'retries':5,'start_period_seconds':30,'disabled':true}}";

static void
mv_health_check_free_for_test (MvHealthCheck *check)
{
  g_strfreev (check->exec);
  g_free (check->http_path);
  g_free (check);
}

static MvMount *
mount_at (const MvSpec *spec, guint i)
{
  g_assert_cmpuint (i, <, spec->mounts->len);
  return g_ptr_array_index (spec->mounts, i);
}

/* The text of a spec, and the lengths the size checks count without
 * making it, are what json-glib writes of the spec's tree. */
static void
test_written_forms (void)
{
  static const char *const documents[] = { full_document, workload_document };
  static const MvSpecCanonFlags flags[] = {
    0, MV_SPEC_CANON_NO_ID_LABELS, MV_SPEC_CANON_NO_STANDBY, MV_SPEC_CANON_STRIP_QUERY,
    MV_SPEC_CANON_NO_GUEST_METADATA,
  };

  for (guint d = 0; d < G_N_ELEMENTS (documents); d++)
    {
      g_autoptr(MvSpec) spec = parse_ok (documents[d]);
      g_autoptr(JsonNode) document = NULL;
      g_autofree char *document_text = NULL;

      /* A value that json-glib escapes, one it does not, and a tree of
       * rules with a double in it. */
      set_string (&spec->hostname, g_strdup ("web\"\x01\x1f\x7f\xc3\xa9"));
      g_hash_table_insert (spec->metadata, g_strdup ("tab\t"), g_strdup ("new\nline"));
      json_array_add_element (spec->firewall, json_from_string ("{\"weight\":0.5}", NULL));

      for (int with_secrets = 0; with_secrets < 2; with_secrets++)
        {
          g_autoptr(JsonNode) node = mv_spec_to_node (spec, with_secrets);
          g_autofree char *theirs = json_to_string (node, FALSE);
          g_autofree char *ours = mv_spec_to_json (spec, with_secrets);

          g_assert_cmpstr (ours, ==, theirs);
        }
      for (guint f = 0; f < G_N_ELEMENTS (flags); f++)
        {
          g_autofree char *json = mv_spec_canonical_json (spec, flags[f]);

          g_assert_cmpuint (mv_spec_canonical_size (spec, flags[f]), ==, strlen (json));
        }
      document = mv_spec_metadata_document (spec);
      document_text = json_to_string (document, FALSE);
      g_assert_nonnull (strstr (document_text, "\"hostname\":\"web\\\"\\u0001"));
      g_assert_cmpuint (mv_spec_metadata_document_size (spec), ==, strlen (document_text));
    }
}

static void
test_workload_parse (void)
{
  g_autoptr(MvSpec) spec = parse_ok (workload_document);
  const MvDisk *root;
  const MvMount *mount;
  gsize size;
  const char *data;

  assert_valid (spec);
  root = mv_spec_root_disk (spec);
  g_assert_nonnull (root);
  g_assert_cmpstr (root->path, ==, "/var/lib/root.img");
  g_assert_true (root == g_ptr_array_index (spec->disks, 0));
  g_assert_false (((MvDisk *) g_ptr_array_index (spec->disks, 1))->root);

  g_assert_cmpuint (g_strv_length (spec->cmd), ==, 3);
  g_assert_cmpstr (spec->cmd[0], ==, "/usr/bin/server");
  g_assert_cmpstr (spec->cmd[2], ==, "8080");
  g_assert_cmpuint (g_hash_table_size (spec->env), ==, 2);
  g_assert_cmpstr (g_hash_table_lookup (spec->env, "LANG"), ==, "C.UTF-8");
  g_assert_cmpstr (spec->user, ==, "www:www");
  g_assert_cmpstr (spec->working_dir, ==, "/srv");
  g_assert_cmpint (spec->init_mode, ==, MV_INIT_MODE_EXEC);

  g_assert_cmpuint (spec->mounts->len, ==, 4);
  mount = mount_at (spec, 0);
  g_assert_cmpint (mount->type, ==, MV_MOUNT_FILE);
  g_assert_cmpstr (mount->target, ==, "/etc/app.conf");
  g_assert_null (mount->source);
  g_assert_true (mount->read_only);
  g_assert_cmpuint (mount->mode, ==, 0600);
  data = g_bytes_get_data (mount->content, &size);
  g_assert_cmpmem (data, size, "hello\n", 6);
  mount = mount_at (spec, 1);
  g_assert_cmpint (mount->type, ==, MV_MOUNT_TMPFS);
  g_assert_cmpuint (mount->size_bytes, ==, 16 * MiB);
  g_assert_cmpuint (mount->mode, ==, 0700);
  g_assert_null (mount->content);
  mount = mount_at (spec, 2);
  g_assert_cmpint (mount->type, ==, MV_MOUNT_VOLUME);
  g_assert_cmpstr (mount->source, ==, "data");
  g_assert_false (mount->read_only);
  mount = mount_at (spec, 3);
  g_assert_cmpint (mount->type, ==, MV_MOUNT_DIRECTORY);
  g_assert_cmpstr (mount->source, ==, "/srv/share");

  g_assert_nonnull (spec->health_check);
  g_assert_cmpint (spec->health_check->kind, ==, MV_HEALTH_CHECK_HTTP);
  g_assert_cmpuint (spec->health_check->port, ==, 8080);
  g_assert_cmpstr (spec->health_check->http_path, ==, "/healthz");
  g_assert_cmpuint (spec->health_check->interval_seconds, ==, 10);
  g_assert_cmpuint (spec->health_check->timeout_seconds, ==, 2);
  g_assert_cmpuint (spec->health_check->retries, ==, 5);
  g_assert_cmpuint (spec->health_check->start_period_seconds, ==, 30);
  g_assert_true (spec->health_check->disabled);
}

static void
test_workload_round_trip (void)
{
  g_autoptr(MvSpec) spec = parse_ok (workload_document);
  g_autofree char *json = mv_spec_to_json (spec, TRUE);
  g_autofree char *hidden = mv_spec_to_json (spec, FALSE);
  g_autoptr(GError) error = NULL;
  g_autoptr(MvSpec) again = mv_spec_from_json (json, &error);
  g_autoptr(MvSpec) copy = mv_spec_copy (spec);
  g_autofree char *json_again = NULL;
  g_autofree char *json_copy = mv_spec_to_json (copy, TRUE);
  g_autoptr(JsonNode) node = mv_spec_to_node (spec, TRUE);
  JsonObject *object = json_node_get_object (node);
  JsonArray *mounts = json_object_get_array_member (object, "mounts");
  JsonObject *file = json_array_get_object_element (mounts, 0);
  JsonObject *tmpfs = json_array_get_object_element (mounts, 1);
  JsonObject *volume = json_array_get_object_element (mounts, 2);
  JsonObject *disk0 = json_array_get_object_element (json_object_get_array_member (object, "disks"), 0);
  JsonObject *disk1 = json_array_get_object_element (json_object_get_array_member (object, "disks"), 1);

  g_assert_no_error (error);
  g_assert_true (mv_spec_equal (spec, again));
  json_again = mv_spec_to_json (again, TRUE);
  g_assert_cmpstr (json, ==, json_again);
  g_assert_true (mv_spec_equal (spec, copy));
  g_assert_cmpstr (json, ==, json_copy);

  /* Modes are written as four octal digits, contents as base64, the root
   * flag only where it is set. */
  g_assert_cmpstr (json_object_get_string_member (file, "mode"), ==, "0600");
  g_assert_cmpstr (json_object_get_string_member (file, "content"), ==, "aGVsbG8K");
  g_assert_cmpstr (json_object_get_string_member (tmpfs, "mode"), ==, "0700");
  g_assert_cmpint (json_object_get_int_member (tmpfs, "size_bytes"), ==, 16 * MiB);
  g_assert_false (json_object_has_member (tmpfs, "content"));
  g_assert_false (json_object_has_member (volume, "mode"));
  g_assert_false (json_object_has_member (file, "size_bytes"));
  g_assert_true (json_object_get_boolean_member (disk0, "root"));
  g_assert_false (json_object_has_member (disk1, "root"));
  g_assert_cmpstr (json_object_get_string_member (object, "init_mode"), ==, "exec");

  /* File contents are no secret: kept without secrets too. */
  g_assert_nonnull (strstr (hidden, "aGVsbG8K"));
  g_assert_nonnull (strstr (hidden, "\"health_check\""));

  /* The copy shares nothing with the original. */
  g_free (copy->cmd[0]);
  copy->cmd[0] = g_strdup ("/bin/other");
  mount_at (copy, 0)->mode = 0644;
  g_free (copy->health_check->http_path);
  copy->health_check->http_path = g_strdup ("/other");
  g_assert_cmpstr (spec->cmd[0], ==, "/usr/bin/server");
  g_assert_cmpuint (mount_at (spec, 0)->mode, ==, 0600);
  g_assert_cmpstr (spec->health_check->http_path, ==, "/healthz");
}

static void
test_workload_defaults (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','mounts':["
                                     "{'type':'file','target':'/etc/empty'},"
                                     "{'type':'tmpfs','target':'/run/x'}],"
                                     "'health_check':{'tcp':22}}");
  g_autoptr(MvSpec) exec = parse_ok ("{'health_check':{'exec':['/bin/true']}}");
  g_autoptr(MvSpec) http = parse_ok ("{'health_check':{'http':{'port':80}}}");
  g_autoptr(MvSpec) modes = parse_ok ("{'mounts':[{'type':'file','target':'/a','mode':'7'},"
                                      "{'type':'file','target':'/b','mode':'4755'},"
                                      "{'type':'file','target':'/c','mode':0}]}");
  const MvHealthCheck *check = spec->health_check;

  assert_valid (spec);
  g_assert_cmpuint (mount_at (spec, 0)->mode, ==, 0644);
  g_assert_nonnull (mount_at (spec, 0)->content);
  g_assert_cmpuint (g_bytes_get_size (mount_at (spec, 0)->content), ==, 0);
  g_assert_false (mount_at (spec, 0)->read_only);
  g_assert_cmpuint (mount_at (spec, 1)->mode, ==, 01777);
  g_assert_cmpuint (mount_at (spec, 1)->size_bytes, ==, 0);

  g_assert_cmpint (check->kind, ==, MV_HEALTH_CHECK_TCP);
  g_assert_cmpuint (check->port, ==, 22);
  g_assert_cmpuint (check->interval_seconds, ==, 30);
  g_assert_cmpuint (check->timeout_seconds, ==, 5);
  g_assert_cmpuint (check->retries, ==, 3);
  g_assert_cmpuint (check->start_period_seconds, ==, 0);
  g_assert_false (check->disabled);

  g_assert_cmpint (exec->health_check->kind, ==, MV_HEALTH_CHECK_EXEC);
  g_assert_cmpstr (exec->health_check->exec[0], ==, "/bin/true");
  g_assert_null (exec->health_check->exec[1]);
  g_assert_cmpint (http->health_check->kind, ==, MV_HEALTH_CHECK_HTTP);
  g_assert_cmpstr (http->health_check->http_path, ==, "/");

  g_assert_cmpuint (mount_at (modes, 0)->mode, ==, 07);
  g_assert_cmpuint (mount_at (modes, 1)->mode, ==, 04755);
  g_assert_cmpuint (mount_at (modes, 2)->mode, ==, 0);

  g_assert_cmpstr (mv_init_mode_to_string (MV_INIT_MODE_AUTO), ==, "auto");
  g_assert_cmpstr (mv_init_mode_to_string (MV_INIT_MODE_EXEC), ==, "exec");
  g_assert_cmpstr (mv_init_mode_to_string (MV_INIT_MODE_SYSTEMD), ==, "systemd");
  g_assert_cmpstr (mv_mount_type_to_string (MV_MOUNT_FILE), ==, "file");
  g_assert_cmpstr (mv_mount_type_to_string (MV_MOUNT_TMPFS), ==, "tmpfs");
  g_assert_cmpstr (mv_mount_type_to_string (MV_MOUNT_VOLUME), ==, "volume");
  g_assert_cmpstr (mv_mount_type_to_string (MV_MOUNT_DIRECTORY), ==, "directory");
}

/* Documents that use none of the workload's fields read, write and
 * fingerprint as they did before those fields existed, so the records
 * and create fingerprints already on a host stay what they were. */
static void
test_workload_absent_unchanged (void)
{
  /* full_document as it was then: rules in a form read as any object. */
  static const char then_document[] =
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
  g_autoptr(MvSpec) full = parse_ok (then_document);
  g_autoptr(MvSpec) minimal = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz',"
                                        "'readiness':'vmm'}");
  g_autofree char *fp_full = mv_spec_fingerprint (full);
  g_autofree char *fp_minimal = mv_spec_fingerprint (minimal);
  g_autofree char *json = mv_spec_to_json (minimal, TRUE);

  g_assert_cmpstr (fp_full, ==, "1db1dc9673c1aef0ed41b843a8a6b77e6c9ed1083cc47d38698d2b0fcd2229d8");
  g_assert_cmpstr (fp_minimal, ==, "9a9dae61cc2694659af98f848baf6bf72a6e433bf86533eea65b2eeabaa18802");
  g_assert_cmpstr (json, ==,
                   "{\"name\":\"web\",\"kernel\":\"/boot/vmlinuz\",\"cpu_millicores\":1000,"
                   "\"max_vcpus\":0,\"memory_bytes\":268435456,\"max_memory_bytes\":0,"
                   "\"disks\":[],\"readiness\":\"vmm\",\"ssh_keys\":[],\"metadata\":{},"
                   "\"firewall\":[],\"restart\":{\"mode\":\"no\",\"max_retries\":0},"
                   "\"standby_after_seconds\":0,\"labels\":{},\"remove_on_exit\":false}");
}

static void
test_workload_bad_documents (void)
{
  static const struct { const char *doc; const char *message; } cases[] = {
    { "{'disks':[{'path':'/a','root':1}]}", "disks[0].root: expected a boolean" },
    { "{'cmd':'/bin/sh'}", "cmd: expected an array of strings" },
    { "{'cmd':['/bin/sh',1]}", "cmd[1]: expected a string" },
    { "{'env':['A=1']}", "env: expected an object" },
    { "{'env':{'A':1}}", "env.A: expected a string" },
    { "{'user':0}", "user: expected a string" },
    { "{'working_dir':['/']}", "working_dir: expected a string" },
    { "{'init_mode':'sysv'}", "init_mode: \"sysv\" is not one of auto, exec, systemd" },
    { "{'init_mode':true}", "init_mode: expected a string" },
    { "{'mounts':{}}", "mounts: expected an array" },
    { "{'mounts':['/a']}", "mounts[0]: expected an object" },
    { "{'mounts':[{'target':'/a'}]}", "mounts[0].type: required" },
    { "{'mounts':[{'type':'bind','target':'/a'}]}",
      "mounts[0].type: \"bind\" is not one of file, tmpfs, volume, directory" },
    { "{'mounts':[{'type':'tmpfs','target':'/a','size':1}]}", "mounts[0]: unknown field 'size'" },
    { "{'mounts':[{'type':'tmpfs','target':1}]}", "mounts[0].target: expected a string" },
    { "{'mounts':[{'type':'tmpfs','target':'/a','read_only':'no'}]}",
      "mounts[0].read_only: expected a boolean" },
    { "{'mounts':[{'type':'tmpfs','target':'/a','size_bytes':-1}]}",
      "mounts[0].size_bytes: -1 is below the minimum of 0" },
    { "{'mounts':[{'type':'tmpfs','target':'/a','size_bytes':'1'}]}",
      "mounts[0].size_bytes: expected an integer" },
    { "{'mounts':[{'type':'file','target':'/a','mode':'0648'}]}",
      "mounts[0].mode: \"0648\" is not a mode (1 to 4 octal digits" },
    { "{'mounts':[{'type':'file','target':'/a','mode':'00644'}]}",
      "mounts[0].mode: \"00644\" is not a mode" },
    { "{'mounts':[{'type':'file','target':'/a','mode':''}]}", "mounts[0].mode: \"\" is not a mode" },
    { "{'mounts':[{'type':'file','target':'/a','mode':'-644'}]}", "mounts[0].mode: " },
    { "{'mounts':[{'type':'file','target':'/a','mode':4096}]}",
      "mounts[0].mode: 4096 is not a mode (0 to 07777" },
    { "{'mounts':[{'type':'file','target':'/a','mode':-1}]}", "mounts[0].mode: -1 is not a mode" },
    { "{'mounts':[{'type':'file','target':'/a','mode':true}]}",
      "mounts[0].mode: expected an integer or a string of octal digits" },
    { "{'health_check':true}", "health_check: expected an object" },
    { "{'health_check':{}}", "health_check: one of exec, tcp, http is required" },
    { "{'health_check':{'interval_seconds':10}}", "health_check: one of exec, tcp, http is required" },
    { "{'health_check':{'exec':['/bin/true'],'tcp':22}}",
      "health_check: both exec and tcp are given" },
    { "{'health_check':{'tcp':22,'http':{'port':80}}}", "health_check: both tcp and http" },
    { "{'health_check':{'tcp':22,'grpc':1}}", "health_check: unknown field 'grpc'" },
    { "{'health_check':{'exec':'/bin/true'}}", "health_check.exec: expected an array of strings" },
    { "{'health_check':{'tcp':'22'}}", "health_check.tcp: expected an integer" },
    { "{'health_check':{'tcp':-5}}", "health_check.tcp: -5 is below the minimum of 1" },
    { "{'health_check':{'tcp':4294967296}}", "health_check.tcp: 4294967296 is more than the limit of 65535" },
    { "{'health_check':{'http':80}}", "health_check.http: expected an object" },
    { "{'health_check':{'http':{'path':'/'}}}", "health_check.http.port: required" },
    { "{'health_check':{'http':{'port':80,'host':'x'}}}", "health_check.http: unknown field 'host'" },
    { "{'health_check':{'http':{'port':80,'path':1}}}", "health_check.http.path: expected a string" },
    { "{'health_check':{'tcp':22,'interval_seconds':-1}}",
      "health_check.interval_seconds: -1 is below the minimum of 1" },
    { "{'health_check':{'tcp':22,'retries':1e300}}",
      "health_check.retries: 1e+300 is more than the limit of 100" },
    { "{'health_check':{'tcp':22,'disabled':'yes'}}", "health_check.disabled: expected a boolean" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_parse_fails (cases[i].doc, cases[i].message);
}

static void
test_workload_base64 (void)
{
  static const struct { const char *content; const char *message; } bad[] = {
    { "aGVsbG8", "not a multiple of 4; padding with '=' is required" },
    { "aGVsbA", "not a multiple of 4" },
    { "aGVs bG8K", "not a multiple of 4" },
    { "aGV\\nsbG8", "\"\\n\" at offset 3 is not in the standard alphabet" },
    { "aGVsbG8-", "\"-\" at offset 7 is not in the standard alphabet" },
    { "aGVs_G8K", "\"_\" at offset 4 is not in the standard alphabet" },
    { "aG=sbG8K", "\"=\" at offset 2" },
    { "a===", "\"=\" at offset 1" },
    { "aGVsbG9=", "the bits after the last byte are not zero" },
    { "aR==", "the bits after the last byte are not zero" },
    { "\\u00e9GVsbG8", "at offset 0 is not in the standard alphabet" },
  };
  static const struct { const char *content; const char *decoded; gsize len; } good[] = {
    { "", "", 0 },
    { "YQ==", "a", 1 },
    { "YWI=", "ab", 2 },
    { "YWJj", "abc", 3 },
    { "AP8A/w==", "\0\xff\0\xff", 4 },
    { "+/+/", "\xfb\xff\xbf", 3 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *doc = g_strdup_printf ("{'mounts':[{'type':'tmpfs','target':'/t'},"
                                              "{'type':'file','target':'/f','content':'%s'}]}",
                                              bad[i].content);
      g_autofree char *json = q (doc);
      g_autoptr(GError) error = NULL;
      g_autoptr(MvSpec) spec = mv_spec_from_json (json, &error);

      g_assert_null (spec);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      assert_message_names_field (error->message, "mounts[1].content");
      assert_message_contains (error->message, bad[i].message);
    }
  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autofree char *doc = g_strdup_printf ("{'name':'web','kernel':'/k','mounts':"
                                              "[{'type':'file','target':'/f','content':'%s'}]}",
                                              good[i].content);
      g_autoptr(MvSpec) spec = parse_ok (doc);
      g_autoptr(JsonNode) node = mv_spec_to_node (spec, TRUE);
      JsonArray *mounts = json_object_get_array_member (json_node_get_object (node), "mounts");
      gsize size;
      const char *data = g_bytes_get_data (mount_at (spec, 0)->content, &size);

      g_assert_cmpmem (data, size, good[i].decoded, good[i].len);
      g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (mounts, 0),
                                                      "content"), ==, good[i].content);
      assert_valid (spec);
    }
}

static void
test_workload_effective_init_mode (void)
{
  static const struct {
    const char *cmd;   /* NULL: none */
    MvInitMode  mode;
    MvInitMode  effective;
  } cases[] = {
    { NULL, MV_INIT_MODE_AUTO, MV_INIT_MODE_EXEC },
    { "/usr/bin/server", MV_INIT_MODE_AUTO, MV_INIT_MODE_EXEC },
    { "systemd", MV_INIT_MODE_AUTO, MV_INIT_MODE_SYSTEMD },
    { "/sbin/init", MV_INIT_MODE_AUTO, MV_INIT_MODE_SYSTEMD },
    { "/lib/systemd/systemd", MV_INIT_MODE_AUTO, MV_INIT_MODE_SYSTEMD },
    { "/usr/lib/systemd/systemd", MV_INIT_MODE_AUTO, MV_INIT_MODE_SYSTEMD },
    { "/usr/bin/systemd", MV_INIT_MODE_AUTO, MV_INIT_MODE_EXEC },
    { "/sbin/init.real", MV_INIT_MODE_AUTO, MV_INIT_MODE_EXEC },
    { "/bin/systemctl", MV_INIT_MODE_AUTO, MV_INIT_MODE_EXEC },
    /* Given, the mode is what it says. */
    { "/sbin/init", MV_INIT_MODE_EXEC, MV_INIT_MODE_EXEC },
    { "/usr/bin/server", MV_INIT_MODE_SYSTEMD, MV_INIT_MODE_SYSTEMD },
    { NULL, MV_INIT_MODE_SYSTEMD, MV_INIT_MODE_SYSTEMD },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MvSpec) spec = base_spec ();

      if (cases[i].cmd != NULL)
        {
          spec->cmd = g_new0 (char *, 3);
          spec->cmd[0] = g_strdup (cases[i].cmd);
          spec->cmd[1] = g_strdup ("--arg");
        }
      spec->init_mode = cases[i].mode;
      g_assert_cmpint (mv_spec_effective_init_mode (spec), ==, cases[i].effective);
    }

  /* Only the program counts, not an argument. */
  {
    g_autoptr(MvSpec) spec = parse_ok ("{'cmd':['/bin/sh','/sbin/init']}");

    g_assert_cmpint (mv_spec_effective_init_mode (spec), ==, MV_INIT_MODE_EXEC);
  }
}

static void
test_workload_compare (void)
{
  g_autoptr(MvSpec) spec = parse_ok (workload_document);
  g_autofree char *fp = mv_spec_fingerprint (spec);

  /* Every field of the workload is part of the fingerprint and of
   * equality, and none of them changes the shape but the root disk. */
#define ASSERT_WORKLOAD_CHANGE(stmt, shape) \
  G_STMT_START { \
    g_autoptr(MvSpec) changed_ = mv_spec_copy (spec); \
    g_autofree char *fp_changed_ = NULL; \
    MvSpec *c = changed_; \
    stmt; \
    fp_changed_ = mv_spec_fingerprint (changed_); \
    g_assert_cmpstr (fp, !=, fp_changed_); \
    g_assert_false (mv_spec_equal (spec, changed_)); \
    g_assert_true (mv_spec_differs_beyond_standby (spec, changed_)); \
    g_assert_false (mv_spec_differs_only_in_guest_metadata (spec, changed_)); \
    g_assert_cmpint (mv_spec_shape_differs (spec, changed_), ==, (shape)); \
  } G_STMT_END

  ASSERT_WORKLOAD_CHANGE (((MvDisk *) g_ptr_array_index (c->disks, 0))->root = FALSE, TRUE);
  ASSERT_WORKLOAD_CHANGE (((MvDisk *) g_ptr_array_index (c->disks, 1))->root = TRUE, TRUE);
  ASSERT_WORKLOAD_CHANGE (set_string (&c->cmd[2], g_strdup ("8081")), FALSE);
  ASSERT_WORKLOAD_CHANGE (g_clear_pointer (&c->cmd, g_strfreev), FALSE);
  ASSERT_WORKLOAD_CHANGE (g_hash_table_insert (c->env, g_strdup ("LANG"), g_strdup ("C")), FALSE);
  ASSERT_WORKLOAD_CHANGE (g_hash_table_remove_all (c->env), FALSE);
  ASSERT_WORKLOAD_CHANGE (set_string (&c->user, g_strdup ("www")), FALSE);
  ASSERT_WORKLOAD_CHANGE (set_string (&c->user, NULL), FALSE);
  ASSERT_WORKLOAD_CHANGE (set_string (&c->working_dir, g_strdup ("/")), FALSE);
  ASSERT_WORKLOAD_CHANGE (c->init_mode = MV_INIT_MODE_SYSTEMD, FALSE);
  ASSERT_WORKLOAD_CHANGE (c->init_mode = MV_INIT_MODE_AUTO, FALSE);
  ASSERT_WORKLOAD_CHANGE (g_ptr_array_remove_index (c->mounts, 3), FALSE);
  ASSERT_WORKLOAD_CHANGE (mount_at (c, 0)->read_only = FALSE, FALSE);
  ASSERT_WORKLOAD_CHANGE (mount_at (c, 0)->mode = 0644, FALSE);
  ASSERT_WORKLOAD_CHANGE (set_string (&mount_at (c, 0)->target, g_strdup ("/etc/b.conf")), FALSE);
  ASSERT_WORKLOAD_CHANGE (g_bytes_unref (mount_at (c, 0)->content);
                          mount_at (c, 0)->content = g_bytes_new ("hello!", 6), FALSE);
  ASSERT_WORKLOAD_CHANGE (mount_at (c, 1)->size_bytes = 0, FALSE);
  ASSERT_WORKLOAD_CHANGE (set_string (&mount_at (c, 2)->source, g_strdup ("other")), FALSE);
  ASSERT_WORKLOAD_CHANGE (mount_at (c, 2)->type = MV_MOUNT_DIRECTORY, FALSE);
  ASSERT_WORKLOAD_CHANGE (g_clear_pointer (&c->health_check, mv_health_check_free_for_test), FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->disabled = FALSE, FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->port = 8081, FALSE);
  ASSERT_WORKLOAD_CHANGE (set_string (&c->health_check->http_path, g_strdup ("/")), FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->interval_seconds = 11, FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->timeout_seconds = 3, FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->retries = 4, FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->start_period_seconds = 0, FALSE);
  ASSERT_WORKLOAD_CHANGE (c->health_check->kind = MV_HEALTH_CHECK_TCP, FALSE);
#undef ASSERT_WORKLOAD_CHANGE
}

static void
test_guest_metadata_differs (void)
{
  g_autoptr(MvSpec) a = parse_ok (full_document);
  g_autoptr(MvSpec) b = mv_spec_copy (a);

  /* Equal specs do not differ at all. */
  g_assert_false (mv_spec_differs_only_in_guest_metadata (a, b));
  /* The standby time alone is no metadata change. */
  b->standby_after_seconds = 3600;
  g_assert_false (mv_spec_differs_only_in_guest_metadata (a, b));
  g_clear_pointer (&b, mv_spec_free);

#define ASSERT_GUEST_METADATA_ONLY(stmt, expected) \
  G_STMT_START { \
    g_autoptr(MvSpec) changed_ = mv_spec_copy (a); \
    MvSpec *c = changed_; \
    stmt; \
    g_assert_cmpint (mv_spec_differs_only_in_guest_metadata (a, changed_), ==, (expected)); \
    g_assert_cmpint (mv_spec_differs_only_in_guest_metadata (changed_, a), ==, (expected)); \
  } G_STMT_END

  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, g_strdup ("db.example")), TRUE);
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, NULL), TRUE);
  ASSERT_GUEST_METADATA_ONLY (g_ptr_array_add (c->ssh_keys, g_strdup ("ssh-rsa C")), TRUE);
  ASSERT_GUEST_METADATA_ONLY (g_ptr_array_set_size (c->ssh_keys, 0), TRUE);
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->user_data, g_strdup ("#!/bin/sh")), TRUE);
  ASSERT_GUEST_METADATA_ONLY (g_hash_table_insert (c->metadata, g_strdup ("role"), g_strdup ("db")),
                              TRUE);
  ASSERT_GUEST_METADATA_ONLY (g_hash_table_remove_all (c->metadata), TRUE);
  /* All of them at once, with the standby time. */
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, g_strdup ("db"));
                              set_string (&c->user_data, NULL);
                              g_hash_table_remove_all (c->metadata);
                              c->standby_after_seconds = 0, TRUE);
  /* Anything else beside it makes it more than a metadata change. */
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, g_strdup ("db")); c->cpu_millicores = 2000,
                              FALSE);
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, g_strdup ("db"));
                              g_hash_table_insert (c->labels, g_strdup ("x"), g_strdup ("y")),
                              FALSE);
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, g_strdup ("db"));
                              set_string (&c->id, g_strdup ("m2")), FALSE);
  ASSERT_GUEST_METADATA_ONLY (set_string (&c->hostname, g_strdup ("db"));
                              c->init_mode = MV_INIT_MODE_SYSTEMD, FALSE);
  ASSERT_GUEST_METADATA_ONLY (g_hash_table_insert (c->metadata, g_strdup ("role"), g_strdup ("db"));
                              json_array_add_object_element (c->firewall, json_object_new ()),
                              FALSE);
  ASSERT_GUEST_METADATA_ONLY (c->remove_on_exit = FALSE, FALSE);
#undef ASSERT_GUEST_METADATA_ONLY
}

/* ---- the workload's limits ---- */

static void
test_limit_root_disk (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','disks':["
                                     "{'path':'/a'},{'path':'/b','root':true},{'path':'/c'}]}");

  assert_valid (spec);
  g_assert_true (mv_spec_root_disk (spec) == g_ptr_array_index (spec->disks, 1));
  ((MvDisk *) g_ptr_array_index (spec->disks, 2))->root = TRUE;
  assert_invalid_message (spec, "disks[2].root: only one disk can be the root; disks[1] is");
  ((MvDisk *) g_ptr_array_index (spec->disks, 1))->root = FALSE;
  assert_valid (spec);
  g_assert_true (mv_spec_root_disk (spec) == g_ptr_array_index (spec->disks, 2));
  ((MvDisk *) g_ptr_array_index (spec->disks, 0))->root = TRUE;
  assert_invalid_message (spec, "disks[2].root: only one disk can be the root; disks[0] is");
}

static void
test_image_and_disks (void)
{
  static const char digest[] =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','image':'127.0.0.1:5000/test/busybox:1',"
                                     "'kernel_name':'cloud','disk_bytes':134217728,"
                                     "'disk_bytes_per_second':1048576,'disk_iops':100}");
  g_autoptr(MvSpec) bare = parse_ok ("{'name':'web','kernel':'/k'}");
  g_autofree char *json = mv_spec_to_json (spec, TRUE);
  g_autofree char *bare_json = mv_spec_to_json (bare, TRUE);
  g_autoptr(MvSpec) again = mv_spec_from_json (json, NULL);
  g_autoptr(MvSpec) copy = mv_spec_copy (spec);

  assert_valid (spec);
  g_assert_cmpstr (spec->image, ==, "127.0.0.1:5000/test/busybox:1");
  g_assert_cmpstr (spec->kernel_name, ==, "cloud");
  g_assert_cmpuint (spec->disk_bytes, ==, 128 << 20);
  g_assert_cmpuint (spec->disk_bytes_per_second, ==, 1 << 20);
  g_assert_cmpuint (spec->disk_iops, ==, 100);
  g_assert_nonnull (again);
  g_assert_true (mv_spec_equal (spec, again));
  g_assert_true (mv_spec_equal (spec, copy));
  /* A spec without them reads as it did before they existed. */
  g_assert_null (strstr (bare_json, "image"));
  g_assert_null (strstr (bare_json, "disk_"));
  g_assert_cmpuint (mv_spec_overlay_bytes (bare), ==, 0);
  g_assert_cmpuint (mv_spec_overlay_bytes (spec), ==, 128 << 20);

  /* Pinning the digest changes the shape: a frozen guest of the old
   * image cannot wake into the new one. */
  copy->image_digest = g_strdup (digest);
  assert_valid (copy);
  g_assert_true (mv_spec_shape_differs (spec, copy));
  g_clear_pointer (&copy->image_digest, g_free);
  copy->disk_bytes = 0;
  g_assert_cmpuint (mv_spec_overlay_bytes (copy), ==, MV_DEFAULT_DISK_BYTES);
  g_assert_true (mv_spec_shape_differs (spec, copy));

  spec->image_digest = g_strdup ("sha256:ABC");
  assert_invalid_message (spec, "image_digest: not \"sha256:\" and 64 lowercase hex digits");
  g_clear_pointer (&spec->image_digest, g_free);
  spec->disk_bytes = MV_DISK_BYTES_MIN - 1;
  assert_invalid_message (spec, "disk_bytes: 67108863 (64.0 MiB) is below the minimum of 67108864 (64 MiB)");
  spec->disk_bytes = MV_DISK_BYTES_MAX + 1;
  assert_invalid_message (spec, "disk_bytes: 17592186044417 (16.0 TiB) is more than the limit of 17592186044416 (16 TiB)");
  spec->disk_bytes = 0;
  spec->disk_bytes_per_second = 1000;
  assert_invalid_message (spec, "disk_bytes_per_second: 1000 is below the minimum of 65536 (64 KiB)");
  spec->disk_bytes_per_second = 0;
  spec->disk_iops = MV_DISK_IOPS_MAX + 1;
  assert_invalid_message (spec, "disk_iops: 1000001 is more than the limit of 1000000");
  spec->disk_iops = 0;
  spec->kernel = g_strdup ("/k");
  assert_invalid_message (spec, "kernel_name: names a configured kernel; kernel names a file; "
                          "give one of them");
  g_clear_pointer (&spec->kernel_name, g_free);
  assert_valid (spec);
  spec->kernel_name = g_strdup ("../x");
  g_clear_pointer (&spec->kernel, g_free);
  assert_invalid_message (spec, "kernel_name: may hold only letters, digits, '.', '_' and '-'");
  g_clear_pointer (&spec->kernel_name, g_free);
  spec->initrd = g_strdup ("/i");
  assert_invalid_message (spec, "initrd: a machine booted from an image boots microvmd's "
                          "initramfs; leave initrd out");
  g_clear_pointer (&spec->initrd, g_free);
  g_ptr_array_add (spec->disks, mv_disk_new ("/r", FALSE, TRUE));
  assert_invalid_message (spec, "disks: a machine booted from an image has the image as its "
                          "root; no disk can be marked root");
  g_ptr_array_set_size (spec->disks, 0);
  g_free (spec->image);
  spec->image = g_strdup ("no such thing");
  assert_invalid (spec, "image");

  bare->disk_bytes = MV_DISK_BYTES_MIN;
  assert_invalid_message (bare, "disk_bytes: the overlay disk is for a root file system: "
                          "it needs image, or a disk marked root");
  g_ptr_array_add (bare->disks, mv_disk_new ("/r", TRUE, TRUE));
  assert_valid (bare);
  bare->image_digest = g_strdup (digest);
  assert_invalid_message (bare, "image_digest: only with image");
}

/* The image's config is the workload's default, field by field; the
 * spec's own fields win (seed 002). */
static void
test_image_defaults (void)
{
  g_autoptr (MvImageConfig) image = mv_image_config_parse (
    "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{"
    "\"Entrypoint\":[\"/bin/app\",\"--serve\"],\"Cmd\":[\"--port\",\"80\"],"
    "\"Env\":[\"PATH=/bin\",\"MODE=image\"],\"User\":\"app\",\"WorkingDir\":\"/srv\","
    "\"Healthcheck\":{\"Test\":[\"CMD-SHELL\",\"curl -f localhost\"],"
    "\"Interval\":10000000000,\"Timeout\":2500000000,\"Retries\":5}}}", -1, NULL);
  g_autoptr (MvSpec) bare = parse_ok ("{'name':'web','image':'127.0.0.1:5000/app:1'}");
  g_autoptr (MvSpec) own = parse_ok ("{'name':'web','image':'127.0.0.1:5000/app:1',"
                                     "'cmd':['/bin/sh'],'env':{'MODE':'spec'},'user':'root',"
                                     "'working_dir':'/tmp','health_check':{'tcp':80,"
                                     "'disabled':true}}");
  g_autoptr (MvSpec) merged = NULL, kept = NULL, none = NULL;
  const char *const image_cmd[] = { "/bin/app", "--serve", "--port", "80", NULL };
  const char *const shell_check[] = { "/bin/sh", "-c", "curl -f localhost", NULL };

  g_assert_nonnull (image);
  merged = mv_spec_with_image_defaults (bare, image);
  g_assert_true (g_strv_equal ((const char *const *) merged->cmd, image_cmd));
  g_assert_cmpstr (g_hash_table_lookup (merged->env, "MODE"), ==, "image");
  g_assert_cmpstr (g_hash_table_lookup (merged->env, "PATH"), ==, "/bin");
  g_assert_cmpstr (merged->user, ==, "app");
  g_assert_cmpstr (merged->working_dir, ==, "/srv");
  g_assert_nonnull (merged->health_check);
  g_assert_cmpint (merged->health_check->kind, ==, MV_HEALTH_CHECK_EXEC);
  g_assert_true (g_strv_equal ((const char *const *) merged->health_check->exec, shell_check));
  g_assert_cmpuint (merged->health_check->interval_seconds, ==, 10);
  g_assert_cmpuint (merged->health_check->timeout_seconds, ==, 3);
  g_assert_cmpuint (merged->health_check->retries, ==, 5);
  assert_valid (merged);
  /* The spec shown to clients is what they gave. */
  g_assert_null (bare->cmd);

  kept = mv_spec_with_image_defaults (own, image);
  g_assert_cmpstr (kept->cmd[0], ==, "/bin/sh");
  g_assert_null (kept->cmd[1]);
  g_assert_cmpstr (g_hash_table_lookup (kept->env, "MODE"), ==, "spec");
  g_assert_cmpstr (g_hash_table_lookup (kept->env, "PATH"), ==, "/bin");
  g_assert_cmpstr (kept->user, ==, "root");
  g_assert_cmpstr (kept->working_dir, ==, "/tmp");
  g_assert_true (kept->health_check->disabled);

  none = mv_spec_with_image_defaults (bare, NULL);
  g_assert_true (mv_spec_equal (none, bare));
}

static void
test_fingerprint_signed_image_url (void)
{
  g_autoptr(MvSpec) a = parse_ok ("{'name':'web','image':'https://img.example/b.tar?sig=aaa'}");
  g_autoptr(MvSpec) b = parse_ok ("{'name':'web','image':'https://img.example/b.tar?sig=bbb'}");
  g_autoptr(MvSpec) other = parse_ok ("{'name':'web','image':'https://img.example/c.tar?sig=aaa'}");
  g_autofree char *fa = mv_spec_fingerprint (a);
  g_autofree char *fb = mv_spec_fingerprint (b);
  g_autofree char *fo = mv_spec_fingerprint (other);

  g_assert_cmpstr (fa, ==, fb);
  g_assert_cmpstr (fa, !=, fo);
  g_assert_false (mv_spec_equal (a, b));

  /* The token is a secret: shown without secrets, the URL has none. */
  {
    g_autofree char *shown = mv_spec_to_json (a, FALSE);
    g_autofree char *whole = mv_spec_to_json (a, TRUE);

    g_assert_null (strstr (shown, "sig=aaa"));
    g_assert_nonnull (strstr (shown, "\"image\":\"https://img.example/b.tar\""));
    g_assert_nonnull (strstr (whole, "sig=aaa"));
  }
}

static char **
argv_of (guint n, gsize each_bytes)
{
  char **argv = g_new0 (char *, n + 1);

  for (guint i = 0; i < n; i++)
    argv[i] = g_strnfill (each_bytes, 'a');
  return argv;
}

static void
test_limit_cmd (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  spec->cmd = argv_of (MV_CMD_MAX_ARGS, 1);
  assert_valid (spec);
  g_strfreev (spec->cmd);
  spec->cmd = argv_of (MV_CMD_MAX_ARGS + 1, 1);
  assert_invalid_message (spec, "cmd: 257 arguments, more than the limit of 256");

  /* 128 KiB of arguments in all, exactly, then a byte more. */
  g_strfreev (spec->cmd);
  spec->cmd = argv_of (128, 1024);
  assert_valid (spec);
  set_string (&spec->cmd[127], g_strnfill (1025, 'a'));
  assert_invalid_message (spec, "cmd: 131073 bytes of arguments in all, more than the limit of "
                          "131072 (128 KiB)");

  g_strfreev (spec->cmd);
  spec->cmd = g_new0 (char *, 1);
  assert_invalid (spec, "cmd");
  g_clear_pointer (&spec->cmd, g_strfreev);

  {
    g_autoptr(MvSpec) empty_arg = parse_ok ("{'name':'web','kernel':'/k','cmd':['/bin/sh','']}");
    g_autoptr(MvSpec) empty_list = parse_ok ("{'name':'web','kernel':'/k','cmd':[]}");
    g_autoptr(MvSpec) bad_utf8 = base_spec ();

    assert_invalid_message (empty_arg, "cmd[1]: empty");
    assert_invalid (empty_list, "cmd");
    bad_utf8->cmd = g_new0 (char *, 2);
    bad_utf8->cmd[0] = g_strdup ("/bin/\xff");
    assert_invalid_message (bad_utf8, "cmd[0]: not valid UTF-8");
  }
}

static void
test_limit_env (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  static const char *const good_names[] = { "A", "_", "PATH", "my_var2", "_1" };
  static const char *const bad_names[] = { "", "1A", "A-B", "A=B", "A B", "\xc3\xa9", "A.B" };
  gsize each;

  for (guint i = 0; i < MV_ENV_MAX; i++)
    g_hash_table_insert (spec->env, g_strdup_printf ("V%u", i), g_strdup ("1"));
  assert_valid (spec);
  g_hash_table_insert (spec->env, g_strdup ("ONEMORE"), g_strdup ("1"));
  assert_invalid_message (spec, "env: 257 variables, more than the limit of 256");

  for (guint i = 0; i < G_N_ELEMENTS (good_names); i++)
    {
      g_hash_table_remove_all (spec->env);
      g_hash_table_insert (spec->env, g_strdup (good_names[i]), g_strdup ("x\ny"));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad_names); i++)
    {
      g_hash_table_remove_all (spec->env);
      g_hash_table_insert (spec->env, g_strdup (bad_names[i]), g_strdup ("x"));
      assert_invalid (spec, "env");
    }
  g_hash_table_remove_all (spec->env);
  g_hash_table_insert (spec->env, g_strdup ("A"), g_strdup ("\xfe"));
  assert_invalid_message (spec, "env.A: not valid UTF-8");

  /* 128 KiB of KEY=VALUE in all: 64 variables "Vnn=" and values. */
  g_hash_table_remove_all (spec->env);
  each = MV_ENV_MAX_BYTES / 64 - strlen ("V00=");
  for (guint i = 0; i < 64; i++)
    g_hash_table_insert (spec->env, g_strdup_printf ("V%02u", i), g_strnfill (each, 'v'));
  assert_valid (spec);
  g_hash_table_insert (spec->env, g_strdup ("V00"), g_strnfill (each + 1, 'v'));
  assert_invalid_message (spec, "env: 131073 bytes of KEY=VALUE in all, more than the limit of "
                          "131072 (128 KiB)");
}

static void
test_limit_user (void)
{
  static const char *const good[] = {
    "root", "www-data", "_apt", "user.name", "a", "u1", "0", "1000", "4294967294",
    "www:www", "1000:1000", "0:0", "nobody:nogroup",
    "abcdefghijklmnopqrstuvwxyz012345",   /* 32 bytes */
  };
  static const char *const bad[] = {
    ":", "www:", ":www", "a:b:c", "1000:www", "www:1000", "-rf", ".hidden", "1a", "a b",
    "user$", "4294967295", "99999999999", "01000", "-1", "+1", "caf\xc3\xa9", "a\tb",
    "abcdefghijklmnopqrstuvwxyz0123456",  /* 33 bytes */
  };
  g_autoptr(MvSpec) spec = base_spec ();

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      set_string (&spec->user, g_strdup (good[i]));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      set_string (&spec->user, g_strdup (bad[i]));
      assert_invalid (spec, "user");
    }
  set_string (&spec->user, g_strdup ("www:1000"));
  {
    g_autoptr(GError) error = NULL;

    g_assert_false (mv_spec_validate (spec, &error));
    assert_message_contains (error->message, "\"www:1000\" is not one of name, uid, name:group, uid:gid");
  }
  set_string (&spec->user, g_strnfill (MV_USER_MAX_BYTES + 1, 'u'));
  assert_invalid_message (spec, "user: 257 bytes, more than the limit of 256");

  /* Given as "", it is left out: root. */
  {
    g_autoptr(MvSpec) parsed = parse_ok ("{'name':'web','kernel':'/k','user':''}");

    g_assert_null (parsed->user);
  }
}

static void
test_limit_working_dir (void)
{
  static const char *const good[] = { "/", "/srv", "/srv/app", "/a.b/..c/.d", "/with space" };
  static const char *const bad[] = {
    "srv", "./srv", "/srv/", "//srv", "/srv//app", "/srv/./app", "/srv/..", "/./", "/..",
    "/srv/.", "/a\nb",
  };
  g_autoptr(MvSpec) spec = base_spec ();

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      set_string (&spec->working_dir, g_strdup (good[i]));
      assert_valid (spec);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      set_string (&spec->working_dir, g_strdup (bad[i]));
      assert_invalid (spec, "working_dir");
    }
  set_string (&spec->working_dir, g_strdup ("srv"));
  assert_invalid_message (spec, "working_dir: \"srv\" is not an absolute path");
  set_string (&spec->working_dir, g_strdup ("/srv/../etc"));
  assert_invalid_message (spec, "working_dir: \"/srv/../etc\" is not a normalized path "
                          "(no \".\" or \"..\", no \"//\", no trailing \"/\")");
  set_string (&spec->working_dir, path_of_length (MV_PATH_MAX_BYTES, 'w'));
  assert_valid (spec);
  set_string (&spec->working_dir, path_of_length (MV_PATH_MAX_BYTES + 1, 'w'));
  assert_invalid_message (spec, "working_dir: longer than 4095 bytes");
}

static MvMount *
add_mount (MvSpec *spec, MvMountType type, const char *target)
{
  MvMount *mount = g_new0 (MvMount, 1);

  mount->type = type;
  mount->target = g_strdup (target);
  if (type == MV_MOUNT_FILE)
    {
      mount->mode = 0644;
      mount->content = g_bytes_new ("x", 1);
    }
  else if (type == MV_MOUNT_TMPFS)
    mount->mode = 01777;
  else
    mount->source = type == MV_MOUNT_VOLUME ? g_strdup_printf ("data-%u", spec->mounts->len)
                                            : g_strdup ("/srv/share");
  g_ptr_array_add (spec->mounts, mount);
  return mount;
}

static void
test_limit_mounts (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  MvMount *mount;

  for (guint i = 0; i < MV_MOUNTS_MAX; i++)
    {
      g_autofree char *target = g_strdup_printf ("/m/%u", i);

      add_mount (spec, (MvMountType) (i % 4), target);
    }
  assert_valid (spec);
  add_mount (spec, MV_MOUNT_TMPFS, "/onemore");
  assert_invalid_message (spec, "mounts: 65 mounts, more than the limit of 64");
  g_ptr_array_set_size (spec->mounts, 0);

  /* Targets: absolute, normalized, not "/", each once. */
  mount = add_mount (spec, MV_MOUNT_TMPFS, "tmp");
  assert_invalid_message (spec, "mounts[0].target: \"tmp\" is not an absolute path");
  set_string (&mount->target, g_strdup ("/tmp/"));
  assert_invalid (spec, "mounts[0].target");
  set_string (&mount->target, g_strdup ("/tmp/../etc"));
  assert_invalid (spec, "mounts[0].target");
  set_string (&mount->target, g_strdup ("/"));
  assert_invalid_message (spec, "mounts[0].target: \"/\" is not allowed");
  set_string (&mount->target, NULL);
  assert_invalid_message (spec, "mounts[0].target: required");
  set_string (&mount->target, g_strdup (""));
  assert_invalid_message (spec, "mounts[0].target: empty");
  set_string (&mount->target, path_of_length (MV_PATH_MAX_BYTES + 1, 't'));
  assert_invalid_message (spec, "mounts[0].target: longer than 4095 bytes");
  set_string (&mount->target, path_of_length (MV_PATH_MAX_BYTES, 't'));
  assert_valid (spec);
  set_string (&mount->target, g_strdup ("/tmp"));
  add_mount (spec, MV_MOUNT_FILE, "/etc/a");
  add_mount (spec, MV_MOUNT_FILE, "/tmp");
  assert_invalid_message (spec, "mounts[2].target: \"/tmp\" is also the target of mounts[0]");
  set_string (&mount_at (spec, 2)->target, g_strdup ("/tmp/x"));
  assert_valid (spec);
  g_ptr_array_set_size (spec->mounts, 0);

  /* What each type may set. */
  mount = add_mount (spec, MV_MOUNT_FILE, "/etc/a");
  mount->source = g_strdup ("/x");
  assert_invalid_message (spec, "mounts[0].source: not for file mounts");
  g_clear_pointer (&mount->source, g_free);
  mount->size_bytes = 4096;
  assert_invalid_message (spec, "mounts[0].size_bytes: only for tmpfs mounts, not file");
  mount->size_bytes = 0;
  mount->mode = 010000;
  assert_invalid_message (spec, "mounts[0].mode: 10000 is more than the limit of 07777");
  mount->mode = 07777;
  assert_valid (spec);
  g_ptr_array_set_size (spec->mounts, 0);

  mount = add_mount (spec, MV_MOUNT_TMPFS, "/tmp");
  mount->content = g_bytes_new ("x", 1);
  assert_invalid_message (spec, "mounts[0].content: only for file mounts, not tmpfs");
  g_clear_pointer (&mount->content, g_bytes_unref);
  mount->source = g_strdup ("data");
  assert_invalid_message (spec, "mounts[0].source: not for tmpfs mounts");
  g_clear_pointer (&mount->source, g_free);
  mount->size_bytes = 4096;
  assert_valid (spec);
  mount->size_bytes = 4095;
  assert_invalid_message (spec, "mounts[0].size_bytes: 4095 (4.0 KiB) is below the minimum of 4096 (4 KiB)");
  mount->size_bytes = spec->memory_bytes;
  assert_valid (spec);
  mount->size_bytes = spec->memory_bytes + 1;
  assert_invalid_message (spec, "mounts[0].size_bytes: 268435457 (256.0 MiB) is more than "
                          "memory_bytes 268435456 (256 MiB)");
  g_ptr_array_set_size (spec->mounts, 0);

  mount = add_mount (spec, MV_MOUNT_VOLUME, "/data");
  assert_valid (spec);
  set_string (&mount->source, NULL);
  assert_invalid_message (spec, "mounts[0].source: required for volume mounts");
  set_string (&mount->source, g_strdup ("../data"));
  assert_invalid (spec, "mounts[0].source");
  set_string (&mount->source, g_strdup ("data\xe2\x80\xae"));
  assert_invalid (spec, "mounts[0].source");
  set_string (&mount->source, g_strdup ("data"));
  mount->mode = 0755;
  assert_invalid_message (spec, "mounts[0].mode: only for file and tmpfs mounts, not volume");
  mount->mode = 0;
  mount->content = g_bytes_new ("x", 1);
  assert_invalid (spec, "mounts[0].content");
  g_ptr_array_set_size (spec->mounts, 0);

  mount = add_mount (spec, MV_MOUNT_DIRECTORY, "/share");
  assert_valid (spec);
  set_string (&mount->source, g_strdup ("srv/share"));
  assert_invalid_message (spec, "mounts[0].source: \"srv/share\" is not an absolute path");
  set_string (&mount->source, g_strdup ("/srv/share/"));
  assert_invalid (spec, "mounts[0].source");
  set_string (&mount->source, g_strdup (""));
  assert_invalid_message (spec, "mounts[0].source: required for directory mounts");

  /* A document's relative target is refused the same way. */
  {
    g_autoptr(MvSpec) parsed = parse_ok ("{'name':'web','kernel':'/k','mounts':"
                                         "[{'type':'tmpfs','target':'run/x'}]}");

    assert_invalid_message (parsed, "mounts[0].target: \"run/x\" is not an absolute path");
  }
}

/* All file contents together, exactly at the limit and a byte over, in
 * a document that still reads back (the base64 is a third larger). */
static void
test_limit_file_mount_total (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autofree char *json = NULL;
  g_autoptr(MvSpec) again = NULL;
  g_autoptr(GError) error = NULL;
  MvMount *first = add_mount (spec, MV_MOUNT_FILE, "/etc/a");
  MvMount *second = add_mount (spec, MV_MOUNT_FILE, "/etc/b");
  guchar *data = g_malloc (MV_FILE_MOUNT_MAX_BYTES);

  for (gsize i = 0; i < MV_FILE_MOUNT_MAX_BYTES; i++)
    data[i] = (guchar) (i * 7);
  g_bytes_unref (first->content);
  first->content = g_bytes_new (data, MV_FILE_MOUNT_MAX_BYTES - 1000);
  g_bytes_unref (second->content);
  second->content = g_bytes_new (data, 1000);
  assert_valid (spec);

  json = mv_spec_to_json (spec, TRUE);
  g_assert_cmpuint (strlen (json), >, MV_FILE_MOUNT_MAX_BYTES * 4 / 3);
  g_assert_cmpuint (strlen (json), <=, MV_SPEC_MAX_BYTES);
  again = mv_spec_from_json (json, &error);
  g_assert_no_error (error);
  g_assert_true (mv_spec_equal (spec, again));
  g_assert_true (g_bytes_equal (mount_at (again, 0)->content, first->content));
  assert_valid (again);

  g_bytes_unref (second->content);
  second->content = g_bytes_new (data, 1001);
  assert_invalid_message (spec, "mounts: file contents total 1048577 bytes, over the limit of "
                          "1048576 (1 MiB)");
  g_free (data);
}

/* The field limits no longer keep every field at its limit within the
 * document's: the document's own limit holds the rest. */
static void
test_limit_whole_spec_with_workload (void)
{
  g_autoptr(MvSpec) spec = largest_spec ();
  MvMount *file = add_mount (spec, MV_MOUNT_FILE, "/etc/big");
  g_autofree char *limit_message = NULL;
  g_autoptr(GError) error = NULL;

  g_bytes_unref (file->content);
  file->content = g_bytes_new_take (g_malloc0 (MV_FILE_MOUNT_MAX_BYTES), MV_FILE_MOUNT_MAX_BYTES);
  assert_valid (spec);

  spec->cmd = argv_of (128, 1024);
  for (guint i = 0; i < 128; i++)
    memset (spec->cmd[i], '"', 1024);
  /* 64 of "Vnn=..." at 2048 bytes each: the environment at its limit. */
  for (guint i = 0; i < 64; i++)
    g_hash_table_insert (spec->env, g_strdup_printf ("V%02u", i), g_strnfill (2044, '"'));
  g_assert_false (mv_spec_validate (spec, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  assert_message_names_field (error->message, "spec");
  assert_message_contains (error->message, "more than the limit of 2097152 (2 MiB)");
}

static void
test_limit_health_check (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autoptr(MvSpec) parsed = NULL;
  MvHealthCheck *check = g_new0 (MvHealthCheck, 1);

  spec->health_check = check;
  check->kind = MV_HEALTH_CHECK_TCP;
  check->port = 22;
  check->interval_seconds = 30;
  check->timeout_seconds = 5;
  check->retries = 3;
  assert_valid (spec);

  check->port = 0;
  assert_invalid_message (spec, "health_check.tcp: 0 is below the minimum of 1");
  check->port = 65536;
  assert_invalid_message (spec, "health_check.tcp: 65536 is more than the limit of 65535");
  check->port = 65535;
  assert_valid (spec);

  check->interval_seconds = 0;
  assert_invalid_message (spec, "health_check.interval_seconds: 0 is below the minimum of 1");
  check->interval_seconds = MV_HEALTH_INTERVAL_MAX_SECONDS + 1;
  assert_invalid_message (spec, "health_check.interval_seconds: 3601 is more than the limit of 3600");
  check->interval_seconds = MV_HEALTH_INTERVAL_MAX_SECONDS;
  assert_valid (spec);
  check->interval_seconds = 30;

  check->timeout_seconds = 0;
  assert_invalid_message (spec, "health_check.timeout_seconds: 0 is below the minimum of 1");
  check->timeout_seconds = 31;
  assert_invalid_message (spec, "health_check.timeout_seconds: 31 is more than interval_seconds 30");
  check->timeout_seconds = 30;
  assert_valid (spec);

  check->retries = 0;
  assert_invalid_message (spec, "health_check.retries: 0 is below the minimum of 1");
  check->retries = MV_HEALTH_RETRIES_MAX + 1;
  assert_invalid_message (spec, "health_check.retries: 101 is more than the limit of 100");
  check->retries = MV_HEALTH_RETRIES_MAX;
  assert_valid (spec);

  check->start_period_seconds = MV_HEALTH_START_PERIOD_MAX_SECONDS + 1;
  assert_invalid_message (spec, "health_check.start_period_seconds: 3601 is more than the limit "
                          "of 3600");
  check->start_period_seconds = MV_HEALTH_START_PERIOD_MAX_SECONDS;
  assert_valid (spec);

  check->kind = MV_HEALTH_CHECK_HTTP;
  check->http_path = g_strdup ("/healthz?full=1");
  assert_valid (spec);
  set_string (&check->http_path, g_strdup ("healthz"));
  assert_invalid_message (spec, "health_check.http.path: must start with '/'");
  set_string (&check->http_path, g_strdup ("/health check"));
  assert_invalid (spec, "health_check.http.path");
  set_string (&check->http_path, g_strdup ("/h\r\nHost: x"));
  assert_invalid (spec, "health_check.http.path");
  set_string (&check->http_path, g_strdup ("/caf\xc3\xa9"));
  assert_invalid (spec, "health_check.http.path");
  set_string (&check->http_path, path_of_length (MV_HEALTH_HTTP_PATH_MAX_BYTES, 'p'));
  assert_valid (spec);
  set_string (&check->http_path, path_of_length (MV_HEALTH_HTTP_PATH_MAX_BYTES + 1, 'p'));
  assert_invalid_message (spec, "health_check.http.path: 1025 bytes, more than the limit of 1024");
  set_string (&check->http_path, g_strdup ("/"));
  check->port = 0;
  assert_invalid (spec, "health_check.http.port");
  check->port = 80;

  check->kind = MV_HEALTH_CHECK_EXEC;
  assert_invalid_message (spec, "health_check.exec: an empty list (it needs at least the program)");
  check->exec = argv_of (MV_HEALTH_EXEC_MAX_ARGS, 4);
  assert_valid (spec);
  g_strfreev (check->exec);
  check->exec = argv_of (MV_HEALTH_EXEC_MAX_ARGS + 1, 4);
  assert_invalid_message (spec, "health_check.exec: 65 arguments, more than the limit of 64");
  set_string (&check->exec[1], g_strdup (""));
  g_free (check->exec[MV_HEALTH_EXEC_MAX_ARGS]);
  check->exec[MV_HEALTH_EXEC_MAX_ARGS] = NULL;
  assert_invalid_message (spec, "health_check.exec[1]: empty");

  /* A disabled check is kept, and written back. */
  parsed = parse_ok ("{'name':'web','kernel':'/k','health_check':{'tcp':22,'disabled':true}}");
  assert_valid (parsed);
  g_assert_true (parsed->health_check->disabled);
  {
    g_autofree char *json = mv_spec_to_json (parsed, FALSE);

    assert_message_contains (json, "\"health_check\":{\"tcp\":22,\"interval_seconds\":30,"
                             "\"timeout_seconds\":5,\"retries\":3,\"start_period_seconds\":0,"
                             "\"disabled\":true}");
  }
  /* From a document, the same limits. */
  g_clear_pointer (&parsed, mv_spec_free);
  parsed = parse_ok ("{'name':'web','kernel':'/k','health_check':{'tcp':22,'timeout_seconds':60}}");
  assert_invalid_message (parsed, "health_check.timeout_seconds: 60 is more than interval_seconds 30");
  g_clear_pointer (&parsed, mv_spec_free);
  parsed = parse_ok ("{'name':'web','kernel':'/k','health_check':{'tcp':22,'retries':0}}");
  assert_invalid_message (parsed, "health_check.retries: 0 is below the minimum of 1");
  g_clear_pointer (&parsed, mv_spec_free);
  parsed = parse_ok ("{'name':'web','kernel':'/k','health_check':{'exec':[]}}");
  assert_invalid (parsed, "health_check.exec");
  g_clear_pointer (&parsed, mv_spec_free);
  parsed = parse_ok ("{'name':'web','kernel':'/k','health_check':{'http':{'port':80,'path':'x'}}}");
  assert_invalid (parsed, "health_check.http.path");
}

static void
test_limit_init_mode (void)
{
  g_autoptr(MvSpec) spec = base_spec ();

  for (MvInitMode mode = MV_INIT_MODE_AUTO; mode <= MV_INIT_MODE_SYSTEMD; mode++)
    {
      g_autofree char *doc = g_strdup_printf ("{'name':'web','kernel':'/k','init_mode':'%s'}",
                                              mv_init_mode_to_string (mode));
      g_autoptr(MvSpec) parsed = parse_ok (doc);

      g_assert_cmpint (parsed->init_mode, ==, mode);
      assert_valid (parsed);
    }
  spec->init_mode = (MvInitMode) 7;
  assert_invalid_message (spec, "init_mode: unknown mode 7");
}

/* ---- fields every machine may set, carried out ---- */


static void
test_implemented_plain (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  g_autoptr(MvSpec) parsed = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_spec_validate (spec, &error));
  g_assert_no_error (error);

  /* What every machine may set, and the pending fields left empty, which
   * mean "not set". */
  parsed = parse_ok ("{'name':'web','kernel':'/boot/vmlinuz','cpu_millicores':2000,"
                     "'memory_bytes':536870912,'disks':[{'path':'/var/lib/a.img'}],"
                     "'readiness':'agent','restart':{'mode':'always'},"
                     "'standby_after_seconds':600,'labels':{'team':'web'},"
                     "'network_name':'','static_ip':'','hostname':'','user_data':'',"
                     "'ssh_keys':[],'metadata':{},'firewall':[],'ports':[]}");
  g_assert_true (mv_spec_validate (parsed, &error));
  g_assert_no_error (error);
}

/* A machine on a network, with its own address and rate limits: carried
 * out (by the host's network layer). */
static void
test_implemented_network (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','network_name':'lan',"
                                     "'static_ip':'10.0.0.5','upload_bytes_per_second':1048576,"
                                     "'download_bytes_per_second':2097152}");
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_spec_validate (spec, &error));
  g_assert_no_error (error);
  g_assert_true (mv_spec_validate (spec, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (spec->upload_bytes_per_second, ==, 1048576);
  g_assert_cmpuint (spec->download_bytes_per_second, ==, 2097152);
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
  g_assert_true (mv_spec_validate (spec, &error));
  g_assert_no_error (error);
}

/* Volumes: at most 22 (/dev/vde to /dev/vdz), each once, and no more
 * than the guest's 26 disks with the others. */
static void
test_limit_volume_mounts (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  MvMount *mount;

  for (guint i = 0; i < MV_VOLUME_MOUNTS_MAX; i++)
    {
      g_autofree char *target = g_strdup_printf ("/v/%u", i);

      add_mount (spec, MV_MOUNT_VOLUME, target);
    }
  assert_valid (spec);
  add_mount (spec, MV_MOUNT_VOLUME, "/v/onemore");
  assert_invalid_message (spec, "mounts[22]: more than the limit of 22 volume mounts "
                          "(/dev/vde to /dev/vdz)");
  g_ptr_array_set_size (spec->mounts, 0);

  add_mount (spec, MV_MOUNT_VOLUME, "/a");
  mount = add_mount (spec, MV_MOUNT_TMPFS, "/t");
  mount = add_mount (spec, MV_MOUNT_VOLUME, "/b");
  set_string (&mount->source, g_strdup ("data-0"));
  assert_invalid_message (spec, "mounts[2].source: volume data-0 is also mounted by mounts[0]");
}

/* Every type of mount is carried out. */
static void
test_implemented_mounts (void)
{
  g_autoptr(MvSpec) carried = parse_ok ("{'name':'web','kernel':'/k','mounts':["
                                        "{'type':'file','target':'/etc/a','content':'YQ=='},"
                                        "{'type':'tmpfs','target':'/tmp'},"
                                        "{'type':'directory','source':'/srv/share',"
                                        "'target':'/share','read_only':true},"
                                        "{'type':'volume','source':'data','target':'/data'}]}");
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_spec_validate (carried, &error));
  g_assert_no_error (error);
}

/* A directory mount is told apart from the other kinds, and rules out
 * idle standby. */
static void
test_directory_mount (void)
{
  g_autoptr(MvSpec) plain = parse_ok ("{'name':'web','kernel':'/k','mounts':["
                                      "{'type':'tmpfs','target':'/tmp'},"
                                      "{'type':'volume','source':'data','target':'/data'}]}");
  g_autoptr(MvSpec) shared = parse_ok ("{'name':'web','kernel':'/k','mounts':["
                                       "{'type':'tmpfs','target':'/tmp'},"
                                       "{'type':'directory','source':'/srv/share',"
                                       "'target':'/share'}]}");
  g_autoptr(MvSpec) idle = parse_ok ("{'name':'web','kernel':'/k','standby_after_seconds':600,"
                                     "'mounts':[{'type':'directory','source':'/srv/share',"
                                     "'target':'/share'}]}");
  g_autoptr(MvSpec) idle_plain = parse_ok ("{'name':'web','kernel':'/k',"
                                           "'standby_after_seconds':600,'mounts':["
                                           "{'type':'tmpfs','target':'/tmp'}]}");
  g_autoptr(GError) error = NULL;

  g_assert_false (mv_spec_has_directory_mount (plain));
  g_assert_true (mv_spec_has_directory_mount (shared));
  g_assert_true (mv_spec_validate (shared, &error));
  g_assert_no_error (error);
  g_assert_true (mv_spec_validate (idle_plain, &error));
  g_assert_no_error (error);

  g_assert_false (mv_spec_validate (idle, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "standby_after_seconds: a machine with a directory mount "
                   "cannot be put on standby (0 turns standby off)");
}

/* ---- cpu_affinity ---- */

static const MvCpuAffinity *
affinity_at (const MvSpec *spec, guint i)
{
  return g_ptr_array_index (spec->cpu_affinity, i);
}

static guint32
host_cpu_at (const MvSpec *spec, guint i, guint j)
{
  return g_array_index (affinity_at (spec, i)->host_cpus, guint32, j);
}

static void
test_cpu_affinity_parse (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','cpu_millicores':2000,"
                                     "'cpu_affinity':[{'vcpu':1,'host_cpus':[3,0,2]},"
                                     "{'host_cpus':[1],'vcpu':0}]}");
  g_autoptr(MvSpec) copy = NULL;
  g_autoptr(MvSpec) back = NULL;
  g_autoptr(MvSpec) none = parse_ok ("{'name':'web','kernel':'/k','cpu_affinity':[]}");
  g_autoptr(MvSpec) plain = base_spec ();
  g_autofree char *json = NULL;
  g_autofree char *none_print = NULL, *plain_print = NULL;

  /* In the order given, each list as it was written. */
  g_assert_cmpuint (spec->cpu_affinity->len, ==, 2);
  g_assert_cmpuint (affinity_at (spec, 0)->vcpu, ==, 1);
  g_assert_cmpuint (affinity_at (spec, 0)->host_cpus->len, ==, 3);
  g_assert_cmpuint (host_cpu_at (spec, 0, 0), ==, 3);
  g_assert_cmpuint (host_cpu_at (spec, 0, 1), ==, 0);
  g_assert_cmpuint (host_cpu_at (spec, 0, 2), ==, 2);
  g_assert_cmpuint (affinity_at (spec, 1)->vcpu, ==, 0);
  g_assert_cmpuint (host_cpu_at (spec, 1, 0), ==, 1);
  assert_valid (spec);

  /* Written back as read, and read back the same. */
  json = mv_spec_to_json (spec, TRUE);
  g_assert_nonnull (strstr (json, "\"cpu_affinity\":[{\"vcpu\":1,\"host_cpus\":[3,0,2]},"
                                  "{\"vcpu\":0,\"host_cpus\":[1]}]"));
  back = mv_spec_from_json (json, NULL);
  g_assert_nonnull (back);
  g_assert_true (mv_spec_equal (spec, back));

  /* A copy is deep. */
  copy = mv_spec_copy (spec);
  g_assert_true (mv_spec_equal (spec, copy));
  g_array_index (((MvCpuAffinity *) g_ptr_array_index (copy->cpu_affinity, 0))->host_cpus,
                 guint32, 0) = 7;
  g_assert_false (mv_spec_equal (spec, copy));
  g_assert_cmpuint (host_cpu_at (spec, 0, 0), ==, 3);
  /* Pinning is not the guest's shape: a frozen guest resumes pinned anew. */
  g_assert_false (mv_spec_shape_differs (spec, copy));
  g_assert_true (mv_spec_differs_beyond_standby (spec, copy));

  /* An empty list is no list: the document and the fingerprint of a spec
   * without it are what they were before the field existed. */
  g_assert_cmpuint (none->cpu_affinity->len, ==, 0);
  g_clear_pointer (&json, g_free);
  json = mv_spec_to_json (none, TRUE);
  g_assert_null (strstr (json, "cpu_affinity"));
  none_print = mv_spec_fingerprint (none);
  plain->kernel = (g_free (plain->kernel), g_strdup ("/k"));
  plain_print = mv_spec_fingerprint (plain);
  g_assert_cmpstr (none_print, ==, plain_print);
}

static void
test_cpu_affinity_bad_documents (void)
{
  static const struct {
    const char *doc;
    const char *message;
  } cases[] = {
    { "{'cpu_affinity':{'vcpu':0}}", "cpu_affinity: expected an array of objects" },
    { "{'cpu_affinity':[[0,1]]}", "cpu_affinity[0]: expected an object" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[1],'cpus':[2]}]}",
      "cpu_affinity[0]: unknown field 'cpus'" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[1],'hostCpus':[2]}]}",
      "cpu_affinity[0]: unknown field 'hostCpus'" },
    { "{'cpu_affinity':[{'host_cpus':[1]}]}", "cpu_affinity[0].vcpu: required" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[0]},{'vcpu':1}]}",
      "cpu_affinity[1].host_cpus: required" },
    { "{'cpu_affinity':[{'vcpu':'0','host_cpus':[1]}]}", "cpu_affinity[0].vcpu: expected an integer" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':'0-3'}]}",
      "cpu_affinity[0].host_cpus: expected an array of integers" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[1,'2']}]}",
      "cpu_affinity[0].host_cpus[1]: expected an integer" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[1.5]}]}",
      "cpu_affinity[0].host_cpus[0]: expected an integer" },
    { "{'cpu_affinity':[{'vcpu':-1,'host_cpus':[1]}]}",
      "cpu_affinity[0].vcpu: -1 is below the minimum of 0" },
    { "{'cpu_affinity':[{'vcpu':4294967296,'host_cpus':[1]}]}",
      "cpu_affinity[0].vcpu: 4294967296 is more than the limit of 31" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[0,-2]}]}",
      "cpu_affinity[0].host_cpus[1]: -2 is below the minimum of 0" },
    { "{'cpu_affinity':[{'vcpu':0,'host_cpus':[1e12]}]}",
      "cpu_affinity[0].host_cpus[0]: 1000000000000 is more than the limit of 4095" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_parse_fails (cases[i].doc, cases[i].message);
}

/* Validation, case by case: each refusal names the entry's field and the
 * limit. */
static void
test_cpu_affinity_limits (void)
{
  static const struct {
    guint       millicores;
    guint       max_vcpus;
    const char *affinity;
    const char *message;     /* NULL: valid */
  } cases[] = {
    { 2000, 0, "[{'vcpu':0,'host_cpus':[1]},{'vcpu':1,'host_cpus':[0]}]", NULL },
    { 1000, 0, "[{'vcpu':0,'host_cpus':[0,1,2,3,4095]}]", NULL },
    /* Up to the vCPUs the machine has... */
    { 2000, 0, "[{'vcpu':2,'host_cpus':[1]}]",
      "cpu_affinity[0].vcpu: 2 is not one of the machine's vCPUs (0 to 1; max_vcpus gives room "
      "for more)" },
    { 1500, 0, "[{'vcpu':1,'host_cpus':[0]},{'vcpu':2,'host_cpus':[0]}]",
      "cpu_affinity[1].vcpu: 2 is not one of the machine's vCPUs (0 to 1; max_vcpus gives room "
      "for more)" },
    /* ...or may be given: a hot-added vCPU is pinned as it comes. */
    { 1000, 4, "[{'vcpu':3,'host_cpus':[1]}]", NULL },
    { 1000, 4, "[{'vcpu':4,'host_cpus':[1]}]",
      "cpu_affinity[0].vcpu: 4 is not one of the machine's vCPUs (0 to 3, max_vcpus included)" },
    { 32000, 0, "[{'vcpu':31,'host_cpus':[0]}]", NULL },
    /* Each vCPU once. */
    { 2000, 0, "[{'vcpu':1,'host_cpus':[0]},{'vcpu':0,'host_cpus':[0]},{'vcpu':1,'host_cpus':[1]}]",
      "cpu_affinity[2].vcpu: vCPU 1 is pinned already by cpu_affinity[0]" },
    /* A set of distinct host CPUs, at least one, below the limit. */
    { 2000, 0, "[{'vcpu':0,'host_cpus':[0]},{'vcpu':1,'host_cpus':[]}]",
      "cpu_affinity[1].host_cpus: empty; give at least one host CPU (leave the vCPU out to let "
      "it run on any)" },
    { 2000, 0, "[{'vcpu':0,'host_cpus':[0]},{'vcpu':1,'host_cpus':[2,3,2]}]",
      "cpu_affinity[1].host_cpus: CPU 2 is listed twice" },
    { 1000, 0, "[{'vcpu':0,'host_cpus':[0,4096]}]",
      "cpu_affinity[0].host_cpus: CPU 4096 is more than the limit of 4095" },
    { 1000, 0, "[{'vcpu':0,'host_cpus':[4294967295]}]",
      "cpu_affinity[0].host_cpus: CPU 4294967295 is more than the limit of 4095" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *doc = g_strdup_printf ("{'name':'web','kernel':'/k','cpu_millicores':%u,"
                                              "'max_vcpus':%u,'cpu_affinity':%s}",
                                              cases[i].millicores, cases[i].max_vcpus,
                                              cases[i].affinity);
      g_autoptr(MvSpec) spec = parse_ok (doc);

      if (cases[i].message == NULL)
        assert_valid (spec);
      else
        assert_invalid_message (spec, cases[i].message);
    }
}

/* More entries than a machine has vCPUs, which no document with distinct
 * vCPUs can reach, and a host CPU list longer than the host CPUs there
 * can be, built directly. */
static void
test_cpu_affinity_lengths (void)
{
  g_autoptr(MvSpec) spec = base_spec ();
  MvCpuAffinity *affinity;

  spec->cpu_millicores = 32000;
  for (guint v = 0; v <= MV_VCPUS_MAX; v++)
    {
      guint32 cpu = 0;

      affinity = mv_cpu_affinity_new (v % MV_VCPUS_MAX);
      g_array_append_val (affinity->host_cpus, cpu);
      g_ptr_array_add (spec->cpu_affinity, affinity);
    }
  assert_invalid_message (spec, "cpu_affinity: 33 entries, more than the limit of 32 (one per "
                          "vCPU)");
  g_ptr_array_set_size (spec->cpu_affinity, MV_VCPUS_MAX);
  assert_valid (spec);

  g_ptr_array_set_size (spec->cpu_affinity, 1);
  affinity = g_ptr_array_index (spec->cpu_affinity, 0);
  g_array_set_size (affinity->host_cpus, 0);
  for (guint32 cpu = 0; cpu < MV_HOST_CPUS_MAX; cpu++)
    g_array_append_val (affinity->host_cpus, cpu);
  assert_valid (spec);
  {
    guint32 again = 7;

    g_array_append_val (affinity->host_cpus, again);
  }
  assert_invalid_message (spec, "cpu_affinity[0].host_cpus: 4097 CPUs, more than the limit of "
                          "4096");
}

/* ---- cpu_topology ---- */

/* Read, written back and compared; part of the guest's shape. */
static void
test_cpu_topology_parse (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k','cpu_millicores':4000,"
                                     "'cpu_topology':{'packages':2,'threads_per_core':2,"
                                     "'cores_per_die':1,'dies_per_package':1}}");
  g_autoptr(MvSpec) back = NULL, copy = NULL, plain = NULL;
  g_autofree char *json = NULL;

  g_assert_nonnull (spec->cpu_topology);
  g_assert_cmpuint (spec->cpu_topology->threads_per_core, ==, 2);
  g_assert_cmpuint (spec->cpu_topology->cores_per_die, ==, 1);
  g_assert_cmpuint (spec->cpu_topology->dies_per_package, ==, 1);
  g_assert_cmpuint (spec->cpu_topology->packages, ==, 2);
  assert_valid (spec);
  json = mv_spec_to_json (spec, TRUE);
  g_assert_nonnull (strstr (json, "\"cpu_topology\":{\"threads_per_core\":2,"
                                  "\"cores_per_die\":1,\"dies_per_package\":1,\"packages\":2}"));
  back = mv_spec_from_json (json, NULL);
  g_assert_true (mv_spec_equal (spec, back));
  copy = mv_spec_copy (spec);
  g_assert_true (mv_spec_equal (spec, copy));
  copy->cpu_topology->threads_per_core = 1;
  copy->cpu_topology->cores_per_die = 2;
  g_assert_false (mv_spec_equal (spec, copy));
  g_assert_cmpuint (spec->cpu_topology->threads_per_core, ==, 2);
  /* A frozen guest's CPUs are as they were: it cannot be woken as another. */
  g_assert_true (mv_spec_shape_differs (spec, copy));
  plain = mv_spec_copy (spec);
  g_clear_pointer (&plain->cpu_topology, g_free);
  g_assert_true (mv_spec_shape_differs (spec, plain));
  g_clear_pointer (&json, g_free);
  json = mv_spec_to_json (plain, TRUE);
  g_assert_null (strstr (json, "cpu_topology"));
}

static void
test_cpu_topology_refused (void)
{
  static const struct {
    const char *doc;
    const char *message;
    gboolean    parse;     /* refused as it is read; else by validation */
  } cases[] = {
    { "{'cpu_topology':[2,1,1,1]}", "cpu_topology: expected an object", TRUE },
    { "{'cpu_topology':{'threads_per_core':1,'cores_per_die':1,'dies_per_package':1}}",
      "cpu_topology.packages: required", TRUE },
    { "{'cpu_topology':{'threads_per_core':1,'cores_per_die':1,'dies_per_package':1,"
      "'packages':1,'sockets':1}}", "cpu_topology: unknown field 'sockets'", TRUE },
    { "{'cpu_topology':{'threads_per_core':'1','cores_per_die':1,'dies_per_package':1,"
      "'packages':1}}", "cpu_topology.threads_per_core: expected an integer", TRUE },
    { "{'cpu_topology':{'threads_per_core':0,'cores_per_die':1,'dies_per_package':1,"
      "'packages':1}}", "cpu_topology.threads_per_core: 0 is outside 1–32", FALSE },
    { "{'cpu_topology':{'threads_per_core':1,'cores_per_die':33,'dies_per_package':1,"
      "'packages':1}}", "cpu_topology.cores_per_die: 33 is outside 1–32", FALSE },
    { "{'cpu_topology':{'threads_per_core':2,'cores_per_die':1,'dies_per_package':1,"
      "'packages':1}}", "cpu_topology: 2 threads per core × 1 cores per die × 1 dies per package "
      "× 1 packages is 2 vCPUs, and the machine has 1", FALSE },
    /* With room to grow, the most vCPUs it can have. */
    { "{'max_vcpus':4,'cpu_topology':{'threads_per_core':2,'cores_per_die':1,"
      "'dies_per_package':1,'packages':1}}", "cpu_topology: 2 threads per core × 1 cores per die "
      "× 1 dies per package × 1 packages is 2 vCPUs, and the machine has 4 (max_vcpus)", FALSE },
    { "{'max_vcpus':4,'cpu_topology':{'threads_per_core':2,'cores_per_die':2,"
      "'dies_per_package':1,'packages':1}}", NULL, FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GString) doc = g_string_new (cases[i].doc);

      g_string_insert (doc, 1, "'name':'web','kernel':'/k',");
      if (cases[i].parse)
        assert_parse_fails (doc->str, cases[i].message);
      else
        {
          g_autoptr(MvSpec) spec = parse_ok (doc->str);

          if (cases[i].message)
            assert_invalid_message (spec, cases[i].message);
          else
            assert_valid (spec);
        }
    }
}

/* ---- pci_devices and gpu ---- */

static void
test_host_devices (void)
{
  g_autoptr(MvSpec) spec = parse_ok ("{'name':'web','kernel':'/k',"
                                     "'pci_devices':['0000:01:00.0','0000:0a:1f.7'],"
                                     "'gpu':{'profile':'nvidia-35','mediated_device_uuid':"
                                     "'7c4f3a4e-2b1d-4c55-9d3a-0f6b8e1d2c3a'}}");
  g_autoptr(MvSpec) back = NULL, copy = NULL, plain = NULL;
  g_autofree char *json = NULL;

  g_assert_cmpuint (spec->pci_devices->len, ==, 2);
  g_assert_cmpstr (spec->pci_devices->pdata[1], ==, "0000:0a:1f.7");
  g_assert_cmpstr (spec->gpu->profile, ==, "nvidia-35");
  assert_valid (spec);
  g_assert_true (mv_spec_has_host_devices (spec));
  g_assert_nonnull (mv_spec_unfreezable (spec));
  json = mv_spec_to_json (spec, TRUE);
  g_assert_nonnull (strstr (json, "\"pci_devices\":[\"0000:01:00.0\",\"0000:0a:1f.7\"],"
                                  "\"gpu\":{\"profile\":\"nvidia-35\",\"mediated_device_uuid\":"
                                  "\"7c4f3a4e-2b1d-4c55-9d3a-0f6b8e1d2c3a\"}"));
  back = mv_spec_from_json (json, NULL);
  g_assert_true (mv_spec_equal (spec, back));
  copy = mv_spec_copy (spec);
  g_assert_true (mv_spec_equal (spec, copy));
  g_free (copy->gpu->profile);
  copy->gpu->profile = g_strdup ("nvidia-36");
  g_assert_false (mv_spec_equal (spec, copy));
  /* Other devices are another guest. */
  g_assert_false (mv_spec_shape_differs (spec, back));
  g_assert_true (mv_spec_shape_differs (spec, copy));

  plain = parse_ok ("{'name':'web','kernel':'/k','pci_devices':[]}");
  g_assert_false (mv_spec_has_host_devices (plain));
  g_assert_null (mv_spec_unfreezable (plain));
  g_clear_pointer (&json, g_free);
  json = mv_spec_to_json (plain, TRUE);
  g_assert_null (strstr (json, "pci_devices"));
  g_assert_null (strstr (json, "gpu"));

  assert_parse_fails ("{'pci_devices':'0000:01:00.0'}",
                      "pci_devices: expected an array of PCI addresses");
  assert_parse_fails ("{'pci_devices':[1]}", "pci_devices[0]: expected a string");
  assert_parse_fails ("{'gpu':{'profile':'a','mediated_device_uuid':'b','vram':1}}",
                      "gpu: unknown field 'vram'");
  assert_parse_fails ("{'gpu':{'mediated_device_uuid':'b'}}", "gpu.profile: required");
}

static void
test_host_devices_refused (void)
{
  static const struct {
    const char *doc;
    const char *message;
  } cases[] = {
    { "'pci_devices':['0000:01:00.0 ']", "pci_devices[0]: \"0000:01:00.0 \" is not a PCI address" },
    { "'pci_devices':['0000:01:00.8']", "pci_devices[0]: \"0000:01:00.8\" is not a PCI address" },
    { "'pci_devices':['0000:01:00.A']", "pci_devices[0]: \"0000:01:00.A\" is not a PCI address" },
    { "'pci_devices':['0000:01:00.0','0000:01:00.0']",
      "pci_devices[1]: 0000:01:00.0 is listed already (pci_devices[0])" },
    { "'pci_devices':['0000:01:00.0','0000:01:00.1','0000:01:00.2','0000:01:00.3','0000:01:00.4',"
      "'0000:01:00.5','0000:01:00.6','0000:01:00.7','0000:01:01.0']",
      "pci_devices: 9 devices, more than the limit of 8" },
    { "'gpu':{'profile':'','mediated_device_uuid':'7c4f3a4e-2b1d-4c55-9d3a-0f6b8e1d2c3a'}",
      "gpu.profile: \"\" is not a mediated device type's name" },
    { "'gpu':{'profile':'a/b','mediated_device_uuid':'7c4f3a4e-2b1d-4c55-9d3a-0f6b8e1d2c3a'}",
      "gpu.profile: \"a/b\" is not a mediated device type's name" },
    { "'gpu':{'profile':'nvidia-35','mediated_device_uuid':'7C4F3A4E-2B1D-4C55-9D3A-0F6B8E1D2C3A'}",
      "gpu.mediated_device_uuid: \"7C4F3A4E-2B1D-4C55-9D3A-0F6B8E1D2C3A\" is not a UUID in "
      "lower case" },
    { "'pci_devices':['0000:01:00.0'],'standby_after_seconds':600",
      "standby_after_seconds: a machine with passed-through devices cannot be put on standby" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *doc = g_strdup_printf ("{'name':'web','kernel':'/k',%s}", cases[i].doc);
      g_autoptr(MvSpec) spec = parse_ok (doc);
      g_autoptr(GError) error = NULL;

      g_assert_false (mv_spec_validate (spec, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (!g_str_has_prefix (error->message, cases[i].message))
        g_error ("'%s' does not begin '%s'", error->message, cases[i].message);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/spec/defaults", test_defaults);
  g_test_add_func ("/spec/parse-full", test_parse_full);
  g_test_add_func ("/spec/round-trip", test_round_trip);
  g_test_add_func ("/spec/written-forms", test_written_forms);
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
  g_test_add_func ("/spec/cpu-affinity/parse", test_cpu_affinity_parse);
  g_test_add_func ("/spec/cpu-affinity/bad-documents", test_cpu_affinity_bad_documents);
  g_test_add_func ("/spec/cpu-affinity/limits", test_cpu_affinity_limits);
  g_test_add_func ("/spec/cpu-affinity/lengths", test_cpu_affinity_lengths);
  g_test_add_func ("/spec/cpu-topology/parse", test_cpu_topology_parse);
  g_test_add_func ("/spec/cpu-topology/refused", test_cpu_topology_refused);
  g_test_add_func ("/spec/host-devices/parse", test_host_devices);
  g_test_add_func ("/spec/host-devices/refused", test_host_devices_refused);
  g_test_add_func ("/spec/limits/disks", test_limit_disks);
  g_test_add_func ("/spec/limits/readiness", test_limit_readiness);
  g_test_add_func ("/spec/limits/hostname", test_limit_hostname);
  g_test_add_func ("/spec/limits/ssh-keys", test_limit_ssh_keys);
  g_test_add_func ("/spec/limits/user-data", test_limit_user_data);
  g_test_add_func ("/spec/limits/metadata", test_limit_metadata);
  g_test_add_func ("/spec/limits/metadata-document", test_metadata_document);
  g_test_add_func ("/spec/console-keys-document", test_console_keys_document);
  g_test_add_func ("/spec/limits/labels", test_limit_labels);
  g_test_add_func ("/spec/limits/firewall", test_limit_firewall);
  g_test_add_func ("/spec/limits/ports", test_limit_ports);
  g_test_add_func ("/spec/ports-document", test_ports_document);
  g_test_add_func ("/spec/limits/network", test_limit_network);
  g_test_add_func ("/spec/limits/whole-spec", test_limit_whole_spec);
  g_test_add_func ("/spec/limits/restart", test_limit_restart);
  g_test_add_func ("/spec/limits/standby", test_limit_standby);
  g_test_add_func ("/spec/limits/utf8", test_limit_utf8);
  g_test_add_func ("/spec/workload/parse", test_workload_parse);
  g_test_add_func ("/spec/workload/round-trip", test_workload_round_trip);
  g_test_add_func ("/spec/workload/defaults", test_workload_defaults);
  g_test_add_func ("/spec/workload/absent-unchanged", test_workload_absent_unchanged);
  g_test_add_func ("/spec/workload/bad-documents", test_workload_bad_documents);
  g_test_add_func ("/spec/workload/base64", test_workload_base64);
  g_test_add_func ("/spec/workload/effective-init-mode", test_workload_effective_init_mode);
  g_test_add_func ("/spec/workload/compare", test_workload_compare);
  g_test_add_func ("/spec/guest-metadata-differs", test_guest_metadata_differs);
  g_test_add_func ("/spec/limits/root-disk", test_limit_root_disk);
  g_test_add_func ("/spec/image-and-disks", test_image_and_disks);
  g_test_add_func ("/spec/image-defaults", test_image_defaults);
  g_test_add_func ("/spec/fingerprint-signed-image-url", test_fingerprint_signed_image_url);
  g_test_add_func ("/spec/limits/cmd", test_limit_cmd);
  g_test_add_func ("/spec/limits/env", test_limit_env);
  g_test_add_func ("/spec/limits/user", test_limit_user);
  g_test_add_func ("/spec/limits/working-dir", test_limit_working_dir);
  g_test_add_func ("/spec/limits/mounts", test_limit_mounts);
  g_test_add_func ("/spec/limits/volume-mounts", test_limit_volume_mounts);
  g_test_add_func ("/spec/limits/file-mount-total", test_limit_file_mount_total);
  g_test_add_func ("/spec/limits/whole-spec-with-workload", test_limit_whole_spec_with_workload);
  g_test_add_func ("/spec/limits/health-check", test_limit_health_check);
  g_test_add_func ("/spec/limits/init-mode", test_limit_init_mode);
  g_test_add_func ("/spec/implemented/plain", test_implemented_plain);
  g_test_add_func ("/spec/implemented/guest-metadata", test_implemented_guest_metadata);
  g_test_add_func ("/spec/implemented/network", test_implemented_network);
  g_test_add_func ("/spec/implemented/mounts", test_implemented_mounts);
  g_test_add_func ("/spec/directory-mount", test_directory_mount);

  return g_test_run ();
}
