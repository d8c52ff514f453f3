/* The guest's metadata document, as a metadata service (Firecracker's
 * MMDS) serves it, and the limit it is held to (seed 004). */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#include "core/spec.h"

/* The data store's size limit, given to the VMM explicitly; of it, this
 * much is kept free for keys added later (temporary console keys), so a
 * document built from a spec may use the rest. */
#define MV_MMDS_SIZE_LIMIT_BYTES     (256 * 1024)
#define MV_MMDS_RESERVED_BYTES       (8 * 1024)
#define MV_MMDS_DOCUMENT_MAX_BYTES   (MV_MMDS_SIZE_LIMIT_BYTES - MV_MMDS_RESERVED_BYTES)

/* {"latest":{"meta-data":{"hostname","public-keys","attributes"},
 * "user-data"}}, with the custom metadata at latest/meta-data/attributes. */
JsonNode *mv_metadata_document_new (const MvSpec *spec);

/* The document as it is sent, compact; NULL and MV_ERROR_INVALID_ARGUMENT
 * if it is not an object or is over MV_MMDS_DOCUMENT_MAX_BYTES. The whole
 * document is checked before any of it is sent. */
char     *mv_metadata_document_serialize (JsonNode *document, GError **error);
