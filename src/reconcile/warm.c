/* Warm templates (docs/agent-protocol.md, Templates): a guest booted once
 * with its root alone and nothing of any machine, frozen, and kept under
 * the key of what it depends on, so that a machine of the same image and
 * shape starts by restoring it and being told who it is. A template is
 * built from a machine's spec, never from a machine's guest or its saved
 * state (seed 000, WarmImageBuilder): in a directory of its own, with
 * the hypervisor's own start, then frozen and moved into place whole. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "util/fault.h"
#include "util/files.h"

#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

char *
mv_reconciler_warm_key (MvRuntime *runtime, const MvRuntimeRequest *req, GError **error)
{
  g_autofree char *inputs = NULL;
  g_autofree char *text = NULL;
  g_autofree char *digest = NULL;

  if (!runtime->warm_inputs)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "start_mode: the %s hypervisor has no "
                         "warm starts", runtime->type), NULL;
  inputs = runtime->warm_inputs (runtime, req, error);
  if (!inputs)
    return NULL;
  /* The agent that set the template up is this daemon's, and the image
   * is the one the spec is pinned to. */
  text = g_strdup_printf ("%simage=%s\nmicrovmd=%s\n", inputs,
                          req->spec->image_digest ? req->spec->image_digest : "none",
                          PACKAGE_VERSION);
  digest = g_compute_checksum_for_string (G_CHECKSUM_SHA256, text, -1);
  /* An ID's form: 32 hexadecimal digits. */
  return g_strndup (digest, 32);
}

typedef struct {
  MvReconciler  *rec;
  MvRuntime     *runtime;
  MvSpec        *spec;            /* the template's */
  MvImageConfig *image_config;
  char          *key;             /* NULL: found in the build, once its disks are ready */
  char          *hypervisor_version;
  MvWarmBuilt    done;            /* may be NULL */
  gpointer       done_data;
  gboolean       registered;      /* its key is in rec->warm_building */
  /* Built behind a start, on the daemon's own: cancelled when it gives
   * way to a start that needs its room. NULL: asked for, it never does. */
  GCancellable  *behind;
  /* Results, read on the main thread. */
  MvSnapshot    *built;           /* the template's record */
  gboolean       existed;         /* one of that key was there already */
} Build;

static void
build_free (Build *build)
{
  mv_spec_free (build->spec);
  mv_image_config_free (build->image_config);
  g_free (build->key);
  g_free (build->hypervisor_version);
  g_clear_object (&build->behind);
  mv_snapshot_free (build->built);
  g_free (build);
}

/* The template, booted and frozen into @staged; @req is its VMM's
 * request, with its disks and its NIC. */
static gboolean
boot_and_freeze (Build *build, const char *staged, MvRuntimeRequest *req_in, GError **error)
{
  MvRuntime *rt = build->runtime;
  MvSnapshots *warm = build->rec->host->warm;
  g_autofree char *state = warm->state_dir (warm, staged);
  g_autofree char *key = NULL;
  g_autoptr (JsonObject) vmm = NULL;
  MvRuntimeRequest req = *req_in;
  gboolean ok;

  /* What it is built from must still be what the key says. */
  key = mv_reconciler_warm_key (rt, &req, error);
  if (!key)
    return FALSE;
  if (!build->key)
    {
      g_autofree char *whole = warm->dir (warm, key);

      build->key = g_strdup (key);
      req.machine_id = build->key;
      g_free (build->spec->name);
      build->spec->name = g_strdup_printf ("warm-%.12s", key);
      if (g_file_test (whole, G_FILE_TEST_IS_DIR))
        {
          build->existed = TRUE;
          return TRUE;
        }
    }
  if (!g_str_equal (key, build->key))
    return mv_error_set (error, MV_ERROR_CONFLICT, "what the template depends on changed while "
                         "it was built (key %s, now %s)", build->key, key);
  if (g_cancellable_set_error_if_cancelled (build->behind, error))
    return FALSE;
  vmm = rt->start (rt, &req, error);
  /* Told to give way as it booted: its guest goes at once. */
  if (vmm && g_cancellable_set_error_if_cancelled (build->behind, error))
    {
      req.vmm = vmm;
      rt->stop (rt, &req, TRUE, NULL);
      rt->destroy (rt, &req, NULL);
      mv_remove_tree (req.runtime_dir, NULL);
      return FALSE;
    }
  if (!vmm)
    return FALSE;
  mv_fault_point ("warm-build", "booted");
  req.vmm = vmm;
  ok = rt->save (rt, &req, state, error);
  if (!ok)
    rt->stop (rt, &req, TRUE, NULL);
  rt->destroy (rt, &req, NULL);
  mv_remove_tree (req.runtime_dir, NULL);
  if (ok)
    mv_fault_point ("warm-build", "saved");
  return ok;
}

/* The template's disks and, for machines on a network, a NIC of its own
 * there, given back once it is frozen: it is then built into @staged. */
static gboolean
equip_and_freeze (Build *build, const char *staged, GError **error)
{
  const MvHost *host = build->rec->host;
  g_autofree char *run = g_build_filename (staged, "run", NULL);
  g_autofree char *overlay = host->warm->disk_path (host->warm, staged);
  g_autoptr (GPtrArray) blocks = NULL;
  g_autoptr (MvNetworkAttachment) nic = NULL;
  g_autoptr (GError) local = NULL;
  /* Until the key is known, the template's VMM goes by an ID of its own;
   * its NIC always does. Recover gives back what an ID of no machine
   * holds. */
  g_autofree char *build_id = mv_id_new ();
  MvRuntimeRequest req = {
    .machine_id = build->key ? build->key : build_id,
    .spec = build->spec,
    .runtime_dir = run,
    .runtime_dir_new = TRUE,   /* made below, or the build fails */
    .image_config = build->image_config,
    .build_template = TRUE,
    .host_limits_network = !build->runtime->limits_network,
    .cancellable = build->behind,
  };
  MvRuntimeRequest nic_req = req;
  gboolean ok;

  nic_req.machine_id = build_id;
  if (g_mkdir (run, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", run);
  if (host->storage->prepare_template_disks &&
      !(blocks = host->storage->prepare_template_disks (host->storage, &req, overlay, error)))
    return FALSE;
  req.blocks = blocks;
  if (build->spec->network_name)
    {
      if (!host->network)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                             "network_name: this host has no networks");
      if (!(nic = host->network->attach (host->network, &nic_req, error)))
        return FALSE;
      req.network = nic;
      mv_fault_point ("warm-build", "network");
    }
  ok = boot_and_freeze (build, staged, &req, error);
  if (nic && !host->network->release (host->network, &nic_req, &local))
    g_warning ("Warm template %s: its NIC %s is left to the next start of microvmd: %s",
               build->key ? build->key : build_id, nic->tap_device, local->message);
  return ok;
}

static void
build_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Build *build = task_data;
  MvSnapshots *warm = build->rec->host->warm;
  g_autofree char *staged = NULL;
  g_autofree char *overlay = NULL;
  g_autoptr (MvSnapshot) record = NULL;
  GError *error = NULL;

  /* An image named but not yet pinned: the one it names now. */
  if (build->spec->image && !build->spec->image_digest)
    {
      MvImages *images = build->rec->host->images;

      if (!images)
        {
          g_task_return_new_error (gtask, MV_ERROR, MV_ERROR_UNSUPPORTED,
                                   "image: this host boots no images");
          return;
        }
      build->spec->image_digest = images->ensure (images, build->spec->image, MV_PULL_MISSING,
                                                  NULL, NULL, NULL, &build->image_config,
                                                  &error);
      if (!build->spec->image_digest)
        {
          g_task_return_error (gtask, error);
          return;
        }
    }
  staged = warm->stage (warm, &error);
  if (!staged)
    {
      g_task_return_error (gtask, error);
      return;
    }
  if (!equip_and_freeze (build, staged, &error))
    {
      warm->discard (warm, staged);
      g_task_return_error (gtask, error);
      return;
    }
  if (build->existed)
    {
      warm->discard (warm, staged);
      g_task_return_boolean (gtask, TRUE);
      return;
    }
  overlay = warm->disk_path (warm, staged);
  record = g_new0 (MvSnapshot, 1);
  record->id = g_strdup (build->key);
  record->name = g_strdup (build->spec->name);
  record->kind = MV_SNAPSHOT_MEMORY;
  record->machine_id = g_strdup (build->key);
  record->machine_name = g_strdup (build->spec->name);
  record->spec = mv_spec_copy (build->spec);
  record->image_config = mv_image_config_copy (build->image_config);
  record->hypervisor_type = g_strdup (build->runtime->type);
  record->hypervisor_version = g_strdup (build->hypervisor_version);
  record->vcpus = mv_spec_vcpus (build->spec);
  record->memory_bytes = build->spec->memory_bytes;
  record->image_digest = g_strdup (build->spec->image_digest);
  record->has_disk = g_file_test (overlay, G_FILE_TEST_IS_REGULAR);
  record->created_at = g_get_real_time ();
  if (!warm->commit (warm, staged, record, &error))
    {
      g_autofree char *whole = warm->dir (warm, build->key);

      warm->discard (warm, staged);
      /* Another build of the same key was quicker: that one stands. */
      if (g_file_test (whole, G_FILE_TEST_IS_DIR))
        {
          g_clear_error (&error);
          build->existed = TRUE;
          g_task_return_boolean (gtask, TRUE);
          return;
        }
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point ("warm-build", "committed");
  build->built = g_steal_pointer (&record);
  g_task_return_boolean (gtask, TRUE);
}

/* The starts that waited for templates to give way are tried again,
 * each as its reconcile finds it then. */
static void
wake_waiting (MvReconciler *rec)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_all (rec);

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];

      if (!machine->waits_for_room)
        continue;
      machine->waits_for_room = FALSE;
      mv_reconciler_reconcile (machine);
    }
}

static gboolean
any_waiting (MvReconciler *rec)
{
  GHashTableIter iter;
  MvMachine *machine;

  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (machine->waits_for_room)
      return TRUE;
  return FALSE;
}

static void
on_built (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Build *build = g_task_get_task_data (G_TASK (result));
  MvReconciler *rec = build->rec;
  g_autoptr (GError) error = NULL;

  if (build->registered)
    g_hash_table_remove (rec->warm_building, build->key);
  mv_reconciler_release_warm_build (rec, build->spec, build->behind != NULL);
  rec->warm_builds--;
  rec->background--;
  if (!g_task_propagate_boolean (G_TASK (result), &error) &&
      g_cancellable_is_cancelled (build->behind))
    g_message ("Warm template %s gave way to a start; it is built behind a later one",
               build->key ? build->key : "(no key yet)");
  else if (error)
    g_warning ("A warm template (%s on %s) could not be built: %s",
               build->spec->image ? build->spec->image : "no image", build->runtime->type,
               error->message);
  else if (build->built)
    {
      MvSnapshot *template = g_steal_pointer (&build->built);

      g_message ("Warm template %s built: machines of its shape start from it now",
                 template->id);
      g_hash_table_replace (rec->warm, template->id, template);
      if (rec->observer.warm_added)
        rec->observer.warm_added (template, rec->observer.data);
    }
  if (build->done)
    build->done (error ? NULL : build->key, error, build->done_data);
  if (build->behind)
    wake_waiting (rec);
}

void
mv_reconciler_warm_give_way (MvReconciler *rec)
{
  if (g_cancellable_is_cancelled (rec->warm_behind_cancel))
    return;
  g_message ("The warm templates being built behind starts give way to a start that needs "
             "their room");
  g_cancellable_cancel (rec->warm_behind_cancel);
}

/* Whether the host keeps as many templates as it may, counting those
 * being built: each is a guest's memory on the disk. */
static gboolean
warm_full (MvReconciler *rec)
{
  return g_hash_table_size (rec->warm) + rec->warm_builds >= MV_WARM_TEMPLATES_MAX;
}

/* Starts @build, admitted as a start of its size is; FALSE with @error
 * (and @build freed) if the host has no room for it now. */
static gboolean
start_build (MvReconciler *rec, Build *build, GError **error)
{
  g_autoptr (GTask) gtask = NULL;

  if (!mv_reconciler_admit_warm_build (rec, build->spec, build->behind != NULL, error))
    {
      build_free (build);
      return FALSE;
    }
  build->registered = build->key != NULL;
  if (build->registered)
    g_hash_table_add (rec->warm_building, g_strdup (build->key));
  rec->warm_builds++;
  rec->background++;
  gtask = g_task_new (NULL, NULL, on_built, NULL);
  g_task_set_task_data (gtask, build, (GDestroyNotify) build_free);
  g_task_run_in_thread (gtask, build_in_thread);
  return TRUE;
}

void
mv_reconciler_build_warm_image (MvReconciler *rec, MvSpec *spec_in, MvWarmBuilt done,
                                gpointer data)
{
  g_autoptr (MvSpec) spec = spec_in;
  g_autoptr (GError) error = NULL;
  MvRuntime *runtime = NULL;
  Build *build;

  if (!rec->host->warm)
    mv_error_set (&error, MV_ERROR_UNSUPPORTED, "this host keeps no warm templates");
  else if (warm_full (rec))
    mv_error_set (&error, MV_ERROR_RESOURCE_EXHAUSTED, "warm templates: the host keeps at most "
                  "%d (built or being built); PruneImages removes those of unused images",
                  MV_WARM_TEMPLATES_MAX);
  else if ((runtime = mv_reconciler_validate_spec (rec, spec, &error)) != NULL &&
           !runtime->warm_inputs)
    mv_error_set (&error, MV_ERROR_UNSUPPORTED, "hypervisor_type: the %s hypervisor has no "
                  "warm starts", runtime->type);
  if (error)
    {
      done (NULL, error, data);
      return;
    }
  build = g_new0 (Build, 1);
  build->rec = rec;
  build->runtime = runtime;
  build->spec = mv_spec_warm_template (spec, "0");
  build->hypervisor_version = g_strdup (mv_runtimes_version (rec->host->runtimes, runtime));
  build->done = done;
  build->done_data = data;
  if (!start_build (rec, build, &error))
    done (NULL, error, data);
}

void
mv_reconciler_build_warm (MvReconciler *rec, MvRuntime *runtime, const MvSpec *spec,
                          const MvImageConfig *image_config, const char *key)
{
  g_autoptr (GError) error = NULL;
  Build *build;

  if (!rec->host->warm || g_hash_table_contains (rec->warm_building, key))
    return;
  /* What it would hold is wanted by a start. */
  if (any_waiting (rec))
    {
      g_message ("Warm template %s not built now: a start waits for room", key);
      return;
    }
  if (warm_full (rec))
    {
      g_message ("Warm template %s not built: the host keeps at most %d", key,
                 MV_WARM_TEMPLATES_MAX);
      return;
    }
  build = g_new0 (Build, 1);
  build->rec = rec;
  build->runtime = runtime;
  build->spec = mv_spec_warm_template (spec, key);
  build->image_config = mv_image_config_copy (image_config);
  build->key = g_strdup (key);
  build->hypervisor_version = g_strdup (mv_runtimes_version (rec->host->runtimes, runtime));
  /* Those told to give way keep the cancellable they had. */
  if (g_cancellable_is_cancelled (rec->warm_behind_cancel))
    {
      g_object_unref (rec->warm_behind_cancel);
      rec->warm_behind_cancel = g_cancellable_new ();
    }
  build->behind = g_object_ref (rec->warm_behind_cancel);
  if (!start_build (rec, build, &error))
    g_message ("Warm template %s not built now: %s", key, error->message);
}

void
mv_reconciler_add_warm (MvReconciler *rec, GPtrArray *templates)
{
  for (guint i = 0; templates && i < templates->len; i++)
    {
      MvSnapshot *template = mv_snapshot_copy (templates->pdata[i]);

      g_hash_table_replace (rec->warm, template->id, template);
    }
}

const MvSnapshot *
mv_reconciler_lookup_warm (MvReconciler *rec, const char *key)
{
  return g_hash_table_lookup (rec->warm, key);
}

GPtrArray *
mv_reconciler_list_warm (MvReconciler *rec)
{
  GPtrArray *list = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, rec->warm);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (list, value);
  return list;
}

char **
mv_reconciler_warm_unused (MvReconciler *rec, const char *const *keep_digests)
{
  g_autoptr (GStrvBuilder) unused = g_strv_builder_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, rec->warm);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      const MvSnapshot *template = value;

      /* A template is as good as the image its root is: without it, no
       * start could match its key again. */
      if (template->image_digest && !g_strv_contains (keep_digests, template->image_digest))
        g_strv_builder_add (unused, template->id);
    }
  return g_strv_builder_end (unused);
}

gboolean
mv_reconciler_remove_warm (MvReconciler *rec, const char *key, GError **error)
{
  MvSnapshots *warm = rec->host->warm;

  return warm->remove (warm, key, error);
}

void
mv_reconciler_forget_warm (MvReconciler *rec, GPtrArray *keys)
{
  for (guint i = 0; i < keys->len; i++)
    {
      MvSnapshot *template = g_hash_table_lookup (rec->warm, keys->pdata[i]);

      if (!template)
        continue;
      if (rec->observer.warm_removed)
        rec->observer.warm_removed (template, rec->observer.data);
      g_hash_table_remove (rec->warm, keys->pdata[i]);
    }
}

void
mv_warm_keep_runnable (MvSnapshots *warm, MvRuntimes *runtimes, GPtrArray *templates)
{
  for (guint i = templates->len; i-- > 0;)
    {
      const MvSnapshot *template = templates->pdata[i];
      const char *type = template->hypervisor_type, *version = template->hypervisor_version;
      gboolean gone = !mv_runtimes_find (runtimes, type, version);
      g_autoptr (GError) error = NULL;

      if (!gone && !mv_runtimes_is_deprecated (runtimes, type, version))
        continue;
      /* No machine holds a template once it has started from it: nothing
       * uses one between starts. */
      g_warning ("Warm template %s is of %s %s, %s: removing it", template->id, type, version,
                 gone ? "which this host no longer has" : "a deprecated version");
      if (!warm->remove (warm, template->id, &error))
        g_warning ("Warm template %s: %s", template->id, error->message);
      g_ptr_array_remove_index (templates, i);
    }
}
