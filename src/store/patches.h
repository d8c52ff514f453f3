/* Upgrades of stored records from one format to the next. Each patch
 * takes a record of format N and leaves it in format N + 1. */
#pragma once
#include <json-glib/json-glib.h>

/* Brings a config.json object up to MV_CONFIG_FORMAT in place. Fails if
 * the format is missing, newer than this daemon, or a patch cannot apply. */
gboolean mv_patches_upgrade_config (JsonObject *record, gboolean *changed, GError **error);
gboolean mv_patches_upgrade_status (JsonObject *record, gboolean *changed, GError **error);
