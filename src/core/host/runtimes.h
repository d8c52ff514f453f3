/* The runtimes a host offers: which hypervisor types and versions there
 * are, which is the default, and which one a spec asks for. Filled once at
 * startup (the versions are asked by whoever adds a runtime); read-only
 * afterwards, so any thread may look things up. Pure. */
#pragma once
#include "runtime.h"

typedef struct _MvRuntimes MvRuntimes;

/* @default_type NULL: the first runtime added is the default. */
MvRuntimes *mv_runtimes_new (const char *default_type);
void        mv_runtimes_free (MvRuntimes *runtimes);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvRuntimes, mv_runtimes_free)

/* @runtime stays the caller's; @version as it reported it ("" unknown). */
void        mv_runtimes_add (MvRuntimes *runtimes, MvRuntime *runtime, const char *version);
guint       mv_runtimes_count (MvRuntimes *runtimes);
MvRuntime  *mv_runtimes_get (MvRuntimes *runtimes, guint index);
/* The runtime of @type (NULL or "": the default type) in @version (NULL
 * or "": the first of that type, its default), or NULL. */
MvRuntime  *mv_runtimes_find (MvRuntimes *runtimes, const char *type, const char *version);
/* The runtime @spec asks for; MV_ERROR_UNSUPPORTED naming the field if
 * the host has no such hypervisor or version. */
MvRuntime  *mv_runtimes_for_spec (MvRuntimes *runtimes, const MvSpec *spec, GError **error);
/* The version @runtime reported; "" if unknown. */
const char *mv_runtimes_version (MvRuntimes *runtimes, MvRuntime *runtime);
/* Whether @version of @type is one the host has but not as its type's
 * default: kept only for what still uses it. */
gboolean    mv_runtimes_is_deprecated (MvRuntimes *runtimes, const char *type,
                                       const char *version);
