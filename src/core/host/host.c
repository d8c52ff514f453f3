#include "host.h"

static gboolean
release_vmm (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
             GError **error)
{
  return !runtime || runtime->stop (runtime, req, TRUE, error);
}

static gboolean
release_runtime (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
                 GError **error)
{
  return (!runtime || runtime->destroy (runtime, req, error)) &&
         host->records->remove_runtime_dir (host->records, req->machine_id, error);
}

static gboolean
release_network (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
                 GError **error)
{
  return !host->network || host->network->release (host->network, req, error);
}

static gboolean
release_saved_state (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
                     GError **error)
{
  MvStorage *storage = host->storage;

  return storage->discard_saved_state (storage, req->machine_id, error) &&
         storage->sweep (storage, req->machine_id, error);
}

/* The overlay disk: what the machine wrote to its root. */
static gboolean
release_disks (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
               GError **error)
{
  MvStorage *storage = host->storage;

  return !storage->remove_disks || storage->remove_disks (storage, req->machine_id, error);
}

static gboolean
release_records (const MvHost *host, MvRuntime *runtime, const MvRuntimeRequest *req,
                 GError **error)
{
  return host->records->remove (host->records, req->machine_id, error);
}

/* The VMM first, so nothing uses what follows; the records last, so that
 * an interrupted destroy is found and finished at the next start. */
static const MvHostResource destroy_order[] = {
  { "vmm", MV_RESOURCE_VMM, release_vmm },
  { "runtime", MV_RESOURCE_OTHER, release_runtime },
  { "network", MV_RESOURCE_OTHER, release_network },
  { "saved-state", MV_RESOURCE_SAVED_STATE, release_saved_state },
  { "disks", MV_RESOURCE_OTHER, release_disks },
  { "records", MV_RESOURCE_RECORDS, release_records },
};

const MvHostResource *
mv_host_destroy_order (guint *n_resources)
{
  *n_resources = G_N_ELEMENTS (destroy_order);
  return destroy_order;
}

const MvHostResource *
mv_host_resource (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (destroy_order); i++)
    if (g_strcmp0 (destroy_order[i].name, name) == 0)
      return &destroy_order[i];
  return NULL;
}
