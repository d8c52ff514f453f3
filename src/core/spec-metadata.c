/* The guest metadata document: what the VMM's metadata service serves
 * the guest of a spec. Pure. */
#include "spec.h"
#include "json-out.h"

#include <string.h>

void
mv_console_key_free (MvConsoleKey *key)
{
  if (!key)
    return;
  g_free (key->key);
  g_free (key->user);
  g_free (key);
}

static void
put_keys (MvJsonOut *out, const GPtrArray *keys)
{
  mv_json_out_begin_array (out);
  for (guint i = 0; i < keys->len; i++)
    {
      const MvConsoleKey *key = keys->pdata[i];

      mv_json_out_begin_object (out);
      mv_json_out_string_member (out, "key", key->key);
      mv_json_out_string_member (out, "user", key->user);
      mv_json_out_int_member (out, "expires", key->expires);
      mv_json_out_end_object (out);
    }
  mv_json_out_end_array (out);
}

static void
put_document (MvJsonOut *out, const MvSpec *spec, const GPtrArray *keys)
{
  /* The guest is called after the machine when no hostname is given. */
  const char *hostname = spec->hostname != NULL && *spec->hostname != '\0' ? spec->hostname
                                                                           : spec->name;

  mv_json_out_begin_object (out);
  mv_json_out_name (out, "latest");
  mv_json_out_begin_object (out);
  mv_json_out_name (out, "meta-data");
  mv_json_out_begin_object (out);
  mv_json_out_string_member (out, "hostname", hostname != NULL ? hostname : "");
  mv_json_out_name (out, "public-keys");
  mv_json_out_string_array (out, spec->ssh_keys, NULL);
  mv_json_out_name (out, "attributes");
  mv_json_out_string_map (out, spec->metadata, NULL);
  if (keys && keys->len > 0)
    {
      mv_json_out_name (out, "console-keys");
      put_keys (out, keys);
    }
  mv_json_out_end_object (out);
  mv_json_out_string_member (out, "user-data", spec->user_data != NULL ? spec->user_data : "");
  mv_json_out_end_object (out);
  mv_json_out_end_object (out);
}

JsonNode *
mv_spec_metadata_document (const MvSpec *spec)
{
  return mv_spec_metadata_document_with_keys (spec, NULL);
}

JsonNode *
mv_spec_metadata_document_with_keys (const MvSpec *spec, const GPtrArray *keys)
{
  MvJsonOut out;
  JsonNode *node;

  g_return_val_if_fail (spec != NULL, NULL);
  mv_json_out_init (&out, MV_JSON_OUT_TREE);
  put_document (&out, spec, keys);
  node = mv_json_out_steal_node (&out);
  mv_json_out_clear (&out);
  return node;
}

gsize
mv_spec_metadata_document_size (const MvSpec *spec)
{
  MvJsonOut out;
  gsize size;

  g_return_val_if_fail (spec != NULL, 0);
  mv_json_out_init (&out, MV_JSON_OUT_COUNT);
  put_document (&out, spec, NULL);
  size = mv_json_out_size (&out);
  mv_json_out_clear (&out);
  return size;
}

gsize
mv_console_keys_size (const GPtrArray *keys)
{
  MvJsonOut out;
  gsize size;

  if (!keys || keys->len == 0)
    return 0;
  mv_json_out_init (&out, MV_JSON_OUT_COUNT);
  put_keys (&out, keys);
  /* ,"console-keys": before it */
  size = mv_json_out_size (&out) + strlen (",\"console-keys\":");
  mv_json_out_clear (&out);
  return size;
}
