/* What every fuzz target shares. The targets feed broken input on
 * purpose: only what would be a bug (a critical, a crash, a leak, a
 * broken invariant) may stop them. */
#pragma once
#include <glib.h>
#include <stddef.h>
#include <stdint.h>

/* Makes criticals fatal, as in the test suite, and drops every message
 * below them. Called from LLVMFuzzerInitialize. */
void mv_fuzz_init (void);

/* Whether JSON-GLib would read @data as one value followed by another
 * object or array: json-glib 1.6 then returns the first as the document
 * and leaks the rest. Conservative: it also says TRUE for some inputs the
 * parser refuses (a comment or a "var" before the value). Targets skip
 * such inputs so that the leak, which is not ours, does not end every
 * run; the spec and records parsers accept such documents. */
gboolean mv_fuzz_json_has_second_value (const char *data, gsize size);

/* Stops the run: @what is an invariant that did not hold. */
G_NORETURN void mv_fuzz_fail (const char *format, ...) G_GNUC_PRINTF (1, 2);

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
