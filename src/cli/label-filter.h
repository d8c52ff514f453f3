/* list --label: which machines a set of label selectors picks. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

/* Whether @selector is a well-formed "KEY=VALUE" or "KEY": KEY not empty. */
gboolean mv_label_selector_valid (const char *selector);

/* Whether @labels (the Labels property as a JSON object of strings; NULL
 * for none) satisfies every selector of @selectors (char*, may be NULL or
 * empty): "KEY=VALUE" wants KEY with that value, "KEY" wants KEY with any. */
gboolean mv_labels_match (JsonObject *labels, GPtrArray *selectors);
