/* The guest metadata document: what the VMM's metadata service serves
 * the guest of a spec. Pure. */
#include "spec.h"
#include "json-util.h"

#include <string.h>

JsonNode *
mv_spec_metadata_document (const MvSpec *spec)
{
  g_autoptr(JsonObject) meta = json_object_new ();
  g_autoptr(JsonObject) latest = json_object_new ();
  g_autoptr(JsonObject) root = json_object_new ();
  g_autoptr(JsonArray) keys = json_array_new ();
  const char *hostname;

  g_return_val_if_fail (spec != NULL, NULL);

  /* The guest is called after the machine when no hostname is given. */
  hostname = spec->hostname != NULL && *spec->hostname != '\0' ? spec->hostname : spec->name;
  json_object_set_string_member (meta, "hostname", hostname != NULL ? hostname : "");
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    json_array_add_string_element (keys, g_ptr_array_index (spec->ssh_keys, i));
  json_object_set_array_member (meta, "public-keys", g_steal_pointer (&keys));
  json_object_set_member (meta, "attributes", mv_json_string_map_to_node (spec->metadata, TRUE));
  json_object_set_object_member (latest, "meta-data", g_steal_pointer (&meta));
  json_object_set_string_member (latest, "user-data",
                                 spec->user_data != NULL ? spec->user_data : "");
  json_object_set_object_member (root, "latest", g_steal_pointer (&latest));

  return json_node_init_object (json_node_alloc (), root);
}

gsize
mv_spec_metadata_document_size (const MvSpec *spec)
{
  g_autoptr(JsonNode) node = mv_spec_metadata_document (spec);
  g_autofree char *json = json_to_string (node, FALSE);

  return strlen (json);
}
