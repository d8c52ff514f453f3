/* What the store's tests share: the warnings the store logs about bad
 * records, kept for the tests to look at (GTest would make them fatal),
 * and a scratch directory's removal. */
#pragma once
#include <glib.h>

/* Sends warnings to the list returned (messages, char*) from now on;
 * other messages go where they would have. */
GPtrArray *store_test_capture_warnings (void);
/* Whether a captured warning mentions @text. */
gboolean   store_test_warned_about (const char *text);
/* Removes @path and everything in it, failing the test if it cannot. */
void       store_test_remove_all (const char *path);
