/* Upgrades of stored records from one format to the next. Each patch
 * takes a record of format N and leaves it in format N + 1. */
#pragma once
#include <json-glib/json-glib.h>

/* Brings a config.json object up to MV_CONFIG_FORMAT in place. Fails if
 * the format is missing, newer than this daemon, or a patch cannot apply. */
gboolean mv_patches_upgrade_config (JsonObject *record, gboolean *changed, GError **error);
gboolean mv_patches_upgrade_status (JsonObject *record, gboolean *changed, GError **error);

/* One step of a record's history: turns format @from into @from + 1 and
 * sets "format" accordingly. */
typedef struct {
  gint64     from;
  gboolean (*apply) (JsonObject *record, GError **error);
} MvPatch;

/* Runs @patches, one per format, on @record until it is of format
 * @current. The two functions above are this with their own tables; it is
 * public so the runner can be tested with tables of the test's making. */
gboolean mv_patches_apply (JsonObject *record, const MvPatch *patches, gsize n_patches,
                           gint64 current, gboolean *changed, GError **error);
