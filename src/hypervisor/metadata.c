/* The guest's metadata document as the metadata service is sent it. */
#include "metadata.h"
#include "core/errors.h"

#include <string.h>

char *
mv_metadata_document_serialize (JsonNode *document, GError **error)
{
  g_autofree char *text = NULL;
  gsize size;

  if (!document || !JSON_NODE_HOLDS_OBJECT (document))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "metadata: the document is not a JSON object");
      return NULL;
    }
  text = json_to_string (document, FALSE);
  size = strlen (text);
  if (size > MV_MMDS_SIZE_LIMIT_BYTES)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "metadata: the guest metadata document is %" G_GSIZE_FORMAT " bytes, over "
                   "the metadata service's limit of %d (%d for the spec's part, %d for console "
                   "keys)", size, MV_MMDS_SIZE_LIMIT_BYTES, MV_METADATA_DOCUMENT_MAX_BYTES,
                   MV_CONSOLE_KEYS_MAX_BYTES);
      return NULL;
    }
  return g_steal_pointer (&text);
}
