/* Hypervisor version strings: "v1.16.0" and "1.16.0" name one version.
 * The one place versions are compared. Pure. */
#pragma once
#include <glib.h>

/* @version without its leading "v", if it has one. */
const char *mv_version_without_v (const char *version);

/* Whether @a and @b name the same version, a leading "v" aside. */
gboolean    mv_version_equal (const char *a, const char *b);

/* Whether @version ("1.16.0", "v53.0") is @major.@minor or later; FALSE
 * for what does not start as MAJOR or MAJOR.MINOR. */
gboolean    mv_version_at_least (const char *version, guint major, guint minor);
