/* The guest's metadata document as a metadata service (Firecracker's
 * MMDS) is given it. The document itself is core's
 * (mv_spec_metadata_document()), as is its limit. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#include "core/spec.h"

/* The data store's size limit, given to the VMM explicitly: room for the
 * largest document a spec makes, and for the temporary console keys
 * added to it later. */
#define MV_MMDS_SIZE_LIMIT_BYTES     (MV_METADATA_DOCUMENT_MAX_BYTES + MV_CONSOLE_KEYS_MAX_BYTES)

/* The document as it is sent, compact; NULL and MV_ERROR_INVALID_ARGUMENT
 * if it is not an object or is over MV_MMDS_SIZE_LIMIT_BYTES. The
 * whole document is checked before any of it is sent. */
char     *mv_metadata_document_serialize (JsonNode *document, GError **error);
