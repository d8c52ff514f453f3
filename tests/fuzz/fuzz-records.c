/* A record file as the store finds it on disk (config.json, status.json
 * or a snapshot's snapshot.json; every input is tried as each): parsed,
 * upgraded and checked as loading does. A record that loads must be written back in the
 * current format and load again to the same record, or a restart of the
 * daemon would change the machine. */
#include "fuzz-common.h"
#include "core/snapshot.h"
#include "store/store.h"

#include <string.h>

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  mv_fuzz_init ();
  return 0;
}

static char *
config_text (const MvConfig *config)
{
  g_autoptr (JsonNode) node = mv_config_to_node (config);

  return json_to_string (node, TRUE);
}

static char *
status_text (const MvStatus *status)
{
  g_autoptr (JsonNode) node = mv_status_to_node (status);

  return json_to_string (node, TRUE);
}

static void
fuzz_config (const char *data, gsize size)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvConfig) config = NULL;
  g_autoptr (MvConfig) again = NULL;
  g_autoptr (MvConfig) copy = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_again = NULL;
  g_autofree char *text_copy = NULL;
  gboolean upgraded;

  config = mv_store_parse_config (data, size, &upgraded, &error);
  if (!config)
    {
      g_assert (error != NULL);
      return;
    }
  text = config_text (config);
  again = mv_store_parse_config (text, strlen (text), &upgraded, &error);
  if (!again)
    mv_fuzz_fail ("a config.json that loaded was written back unreadable: %s\n%s",
                  error->message, text);
  if (upgraded)
    mv_fuzz_fail ("a config.json written back is not of the current format:\n%s", text);
  text_again = config_text (again);
  if (strcmp (text, text_again) != 0)
    mv_fuzz_fail ("a config.json written back loads differently:\n%s\n%s", text, text_again);
  copy = mv_config_copy (config);
  text_copy = config_text (copy);
  if (strcmp (text, text_copy) != 0)
    mv_fuzz_fail ("a copy of a config differs from it:\n%s\n%s", text, text_copy);
}

static void
fuzz_status (const char *data, gsize size)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) status = NULL;
  g_autoptr (MvStatus) again = NULL;
  g_autoptr (MvStatus) copy = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_again = NULL;
  g_autofree char *text_copy = NULL;
  gboolean upgraded;

  status = mv_store_parse_status (data, size, &upgraded, &error);
  if (!status)
    {
      g_assert (error != NULL);
      return;
    }
  text = status_text (status);
  again = mv_store_parse_status (text, strlen (text), &upgraded, &error);
  if (!again)
    mv_fuzz_fail ("a status.json that loaded was written back unreadable: %s\n%s",
                  error->message, text);
  if (upgraded)
    mv_fuzz_fail ("a status.json written back is not of the current format:\n%s", text);
  text_again = status_text (again);
  if (strcmp (text, text_again) != 0)
    mv_fuzz_fail ("a status.json written back loads differently:\n%s\n%s", text, text_again);
  copy = mv_status_copy (status);
  text_copy = status_text (copy);
  if (strcmp (text, text_copy) != 0)
    mv_fuzz_fail ("a copy of a status differs from it:\n%s\n%s", text, text_copy);
}

static void
fuzz_snapshot (const char *data, gsize size)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSnapshot) snapshot = mv_snapshot_from_json (data, size, &error);
  g_autoptr (MvSnapshot) again = NULL;
  g_autoptr (MvSnapshot) copy = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_again = NULL;
  g_autofree char *text_copy = NULL;

  if (!snapshot)
    {
      g_assert (error != NULL);
      return;
    }
  text = mv_snapshot_to_json (snapshot);
  again = mv_snapshot_from_json (text, strlen (text), &error);
  if (!again)
    mv_fuzz_fail ("a snapshot.json that loaded was written back unreadable: %s\n%s",
                  error->message, text);
  text_again = mv_snapshot_to_json (again);
  if (strcmp (text, text_again) != 0)
    mv_fuzz_fail ("a snapshot.json written back loads differently:\n%s\n%s", text, text_again);
  copy = mv_snapshot_copy (snapshot);
  text_copy = mv_snapshot_to_json (copy);
  if (strcmp (text, text_copy) != 0)
    mv_fuzz_fail ("a copy of a snapshot differs from it:\n%s\n%s", text, text_copy);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* As g_file_get_contents() gives it: the bytes, then a NUL. */
  g_autofree char *text = g_malloc (size + 1);

  memcpy (text, data, size);
  text[size] = '\0';
  if (mv_fuzz_json_glib_leaks (text, size))
    return -1;
  fuzz_config (text, size);
  fuzz_status (text, size);
  fuzz_snapshot (text, size);
  return 0;
}
