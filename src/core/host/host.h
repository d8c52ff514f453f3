/* The host as the reconciler sees it: the layers it drives, each behind a
 * small interface declared beside this file, and what a machine holds in
 * each of them. Pure: it only calls through the interfaces. */
#pragma once
#include "images.h"
#include "network.h"
#include "records.h"
#include "runtimes.h"
#include "snapshots.h"
#include "storage.h"
#include "volumes.h"

typedef struct {
  MvRuntimes  *runtimes;
  MvRecords   *records;
  MvStorage   *storage;
  MvNetwork   *network;      /* NULL: this host has no networks */
  MvSnapshots *snapshots;    /* NULL: this host keeps no snapshots */
  /* Warm templates, kept as snapshots of no machine, each under the key
   * of what it depends on (warm.c); NULL: this host keeps none. */
  MvSnapshots *warm;
  MvImages    *images;       /* NULL: this host boots no images */
  MvVolumes   *volumes;      /* NULL: this host keeps no volumes */
  guint64      memory_bytes; /* the host's memory; 0 = unknown */
} MvHost;

/* What the reconciler notes in a machine's status once a resource is
 * released, beside adding its name to status.destroyed. */
typedef enum {
  MV_RESOURCE_OTHER,         /* nothing more */
  MV_RESOURCE_VMM,           /* the VMM is gone: no VMM identity, not running */
  MV_RESOURCE_SAVED_STATE,   /* no frozen guest any more */
  MV_RESOURCE_RECORDS,       /* the machine is gone: the last one */
} MvResourceRole;

/* One thing a machine holds on the host, given back by a destroy. */
typedef struct {
  const char    *name;       /* recorded in status.destroyed once released */
  MvResourceRole role;
  /* Blocks; worker thread. @runtime is NULL when the machine's hypervisor
   * is gone from the host (its VMM cannot be running then). */
  gboolean  (*release) (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
                        GError **error);
} MvHostResource;

/* What a destroy releases, in order (records last), and how many. An
 * interrupted destroy resumes with the first one not recorded as done. */
const MvHostResource *mv_host_destroy_order (guint *n_resources);
/* The resource called @name, or NULL. */
const MvHostResource *mv_host_resource (const char *name);
