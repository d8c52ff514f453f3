/* Several versions of one hypervisor (seed 003, Starters): the config may
 * list more than one binary per type. The first is the default; every
 * other one is deprecated and kept only for what still uses it. A machine
 * or snapshot pinned to a version needs exactly that version. */
#pragma once
#include <glib.h>

#include "hypervisor.h"
#include "core/version.h"

/* Runs `@binary --version` and takes the version from its first line,
 * "<@prefix> v<version>": "Firecracker v1.16.0" gives "1.16.0".
 * MV_ERROR_UNAVAILABLE if the binary cannot be run. */
char       *mv_binary_version (const char *binary, const char *prefix, GError **error);

/* The starters of the Cloud Hypervisor and Firecracker backends that
 * @config lists: groups [cloud-hypervisor] and [firecracker], key
 * binaries= (a list, default first). Without the key, the type's usual
 * binary found in PATH, if any. Each binary is asked its version; two of
 * one type with the same version are an error. The array frees the
 * starters. */
GPtrArray  *mv_http_backends_starters_from_config (GKeyFile *config, GError **error);

/* The starter of @type for @version (NULL or "": the default, the first
 * listed). MV_ERROR_UNAVAILABLE naming the versions there are otherwise.
 * Sets *@deprecated (may be NULL) when it is not the default. */
MvStarter  *mv_starters_pick (GPtrArray *starters, const char *type, const char *version,
                              gboolean *deprecated, GError **error);

/* The deprecated versions of @type among @starters, in order. */
GStrv       mv_starters_deprecated_versions (GPtrArray *starters, const char *type);

/* Whether @version of @type is a deprecated one; "" and NULL never are. */
gboolean    mv_starters_is_deprecated (GPtrArray *starters, const char *type, const char *version);

/* Logs the warning for @what ("machine web1", "snapshot s1") that still
 * uses a deprecated version; returns whether it did. */
gboolean    mv_starters_warn_if_deprecated (GPtrArray *starters, const char *type,
                                            const char *version, const char *what);
