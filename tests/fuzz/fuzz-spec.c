/* A spec document as a client sends it to CreateMachine or Update: parsed,
 * validated and checked as the reconciler does, then written the way
 * config.json keeps it and read back. A valid spec must come back equal
 * to itself with the same fingerprint, or a machine would change across
 * a restart of the daemon. */
#include "fuzz-common.h"
#include "core/json-strict.h"
#include "core/spec.h"
#include "core/spec-private.h"

#include <string.h>

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  mv_fuzz_init ();
  return 0;
}

static void
check_round_trip (const MvSpec *spec)
{
  g_autofree char *json = mv_spec_to_json (spec, TRUE);
  g_autofree char *public_json = mv_spec_to_json (spec, FALSE);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) again = mv_spec_from_json (json, &error);
  g_autoptr (MvSpec) copy = mv_spec_copy (spec);
  g_autoptr (MvSpec) public_spec = NULL;
  g_autofree char *fingerprint = NULL;
  g_autofree char *fingerprint_again = NULL;

  if (!again)
    mv_fuzz_fail ("a valid spec was written as a document that does not parse: %s\n%s",
                  error->message, json);
  if (!mv_spec_validate (again, &error))
    mv_fuzz_fail ("a valid spec read back is invalid: %s\n%s", error->message, json);
  if (!mv_spec_equal (spec, again))
    mv_fuzz_fail ("a valid spec read back differs from itself:\n%s", json);
  fingerprint = mv_spec_fingerprint (spec);
  fingerprint_again = mv_spec_fingerprint (again);
  if (strcmp (fingerprint, fingerprint_again) != 0)
    mv_fuzz_fail ("a valid spec read back has another fingerprint:\n%s", json);
  if (!mv_spec_equal (spec, copy) || mv_spec_shape_differs (spec, copy) ||
      mv_spec_differs_beyond_standby (spec, copy))
    mv_fuzz_fail ("a copy of a valid spec differs from it:\n%s", json);

  /* What the bus shows without secrets is a document too. */
  public_spec = mv_spec_from_json (public_json, &error);
  if (!public_spec)
    mv_fuzz_fail ("the public document of a valid spec does not parse: %s\n%s",
                  error->message, public_json);

  g_assert (mv_spec_metadata_document_size (spec) <= MV_METADATA_DOCUMENT_MAX_BYTES);
}

/* The spec's text, and its length found without making it, are what
 * json-glib writes of its tree; so is the guest metadata document's. */
static void
check_written_forms (const MvSpec *spec)
{
  static const MvSpecCanonFlags flags[] = {
    0, MV_SPEC_CANON_NO_ID_LABELS | MV_SPEC_CANON_STRIP_QUERY,
    MV_SPEC_CANON_NO_STANDBY | MV_SPEC_CANON_NO_GUEST_METADATA,
  };

  for (int with_secrets = 0; with_secrets < 2; with_secrets++)
    {
      g_autoptr (JsonNode) node = mv_spec_to_node (spec, with_secrets);
      g_autofree char *theirs = json_to_string (node, FALSE);
      g_autofree char *ours = mv_spec_to_json (spec, with_secrets);

      if (strcmp (ours, theirs) != 0)
        mv_fuzz_fail ("a spec's text differs from its tree's:\n%s\n%s", ours, theirs);
    }
  for (guint i = 0; i < G_N_ELEMENTS (flags); i++)
    {
      g_autofree char *json = mv_spec_canonical_json (spec, flags[i]);

      if (mv_spec_canonical_size (spec, flags[i]) != strlen (json))
        mv_fuzz_fail ("a spec's counted size is not its length:\n%s", json);
    }
  {
    g_autoptr (JsonNode) document = mv_spec_metadata_document (spec);
    g_autofree char *text = json_to_string (document, FALSE);

    if (mv_spec_metadata_document_size (spec) != strlen (text))
      mv_fuzz_fail ("a metadata document's counted size is not its length:\n%s", text);
  }
}

/* What the strict reader builds holds what json-glib's own parser makes
 * of the same text. */
static void
check_same_tree (const char *json)
{
  static const MvJsonLimits limits = { .max_bytes = 1024 * 1024, .max_depth = 64 };
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) check_error = NULL;
  g_autoptr (MvJsonDoc) doc = mv_json_read (json, -1, &limits, "doc", &error);
  gboolean checked = mv_json_check (json, -1, &limits, "doc", &check_error);
  g_autoptr (JsonParser) parser = NULL;
  g_autoptr (JsonNode) ours = NULL;
  g_autofree char *ours_text = NULL, *theirs_text = NULL;

  /* Checking alone (its own way of finding a repeated key) and reading
   * take and refuse the same, in the same words. */
  if ((doc != NULL) != checked)
    mv_fuzz_fail ("checking and reading disagree on:\n%s", json);
  if (!doc)
    {
      if (strcmp (error->message, check_error->message) != 0)
        mv_fuzz_fail ("checking and reading refuse with other words:\n%s\n%s\n%s", json,
                      error->message, check_error->message);
      return;
    }
  ours = mv_json_to_node (mv_json_doc_root (doc));
  parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, json, -1, NULL))
    mv_fuzz_fail ("the strict reader takes what json-glib refuses:\n%s", json);
  ours_text = json_to_string (ours, FALSE);
  theirs_text = json_to_string (json_parser_get_root (parser), FALSE);
  if (!json_node_equal (ours, json_parser_get_root (parser)) ||
      strcmp (ours_text, theirs_text) != 0)
    mv_fuzz_fail ("the strict reader's document differs from json-glib's tree:\n%s\n%s\n%s",
                  json, ours_text, theirs_text);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* D-Bus strings end at their first NUL, as the parser's input does. */
  g_autofree char *json = g_strndup ((const char *) data, size);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) spec = NULL;

  if (mv_fuzz_json_glib_leaks (json, strlen (json)))
    return -1;
  check_same_tree (json);
  spec = mv_spec_from_json (json, &error);
  if (!spec)
    {
      g_assert (error != NULL);
      return 0;
    }
  /* The spec's own checks, as the reconciler makes them before it takes
   * a spec: with a shorter standby minimum than the default, as a daemon
   * may be configured, and with the default. */
  if (!mv_spec_validate_with_standby_min (spec, 1, &error))
    return 0;
  if (!mv_spec_validate (spec, &error))
    return 0;
  check_round_trip (spec);
  check_written_forms (spec);
  return 0;
}
