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

/* Whether json-glib 1.6 would leak memory parsing @data, which is not
 * ours to fix: a value followed by another object or array (it returns
 * the first as the document and leaks the rest), or a high surrogate
 * escape (its scanner's "malformed surrogate pair" leaks the string, and
 * after a lone one it reads on past the closing quote). Conservative: it
 * also says TRUE for some inputs that would not leak. Targets skip such inputs so that the leak
 * does not end every run; note that the spec and records parsers accept
 * a document with a second value after it. */
gboolean mv_fuzz_json_glib_leaks (const char *data, gsize size);

/* Stops the run: @what is an invariant that did not hold. */
G_NORETURN void mv_fuzz_fail (const char *format, ...) G_GNUC_PRINTF (1, 2);

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
