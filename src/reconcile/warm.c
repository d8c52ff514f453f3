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

char *
mv_reconciler_warm_key (MvRuntime *runtime, const MvRuntimeRequest *req, GError **error)
{
  g_autofree char *inputs = runtime->warm_inputs ? runtime->warm_inputs (runtime, req, error)
                                                 : NULL;
  g_autofree char *text = NULL;
  g_autofree char *digest = NULL;

  if (!runtime->warm_inputs)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "start_mode: the %s hypervisor has no "
                         "warm starts", runtime->type), NULL;
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
  char          *key;
  char          *hypervisor_version;
} Build;

static void
build_free (Build *build)
{
  mv_spec_free (build->spec);
  mv_image_config_free (build->image_config);
  g_free (build->key);
  g_free (build->hypervisor_version);
  g_free (build);
}

/* The template, booted and frozen into @staged. */
static gboolean
boot_and_freeze (Build *build, const char *staged, GError **error)
{
  const MvHost *host = build->rec->host;
  MvRuntime *rt = build->runtime;
  MvSnapshots *warm = host->warm;
  g_autofree char *run = g_build_filename (staged, "run", NULL);
  g_autofree char *overlay = warm->disk_path (warm, staged);
  g_autofree char *state = warm->state_dir (warm, staged);
  g_autofree char *key = NULL;
  g_autoptr (GPtrArray) blocks = NULL;
  g_autoptr (JsonObject) vmm = NULL;
  MvRuntimeRequest req = {
    .machine_id = build->key,
    .spec = build->spec,
    .runtime_dir = run,
    .image_config = build->image_config,
    .build_template = TRUE,
  };
  gboolean ok;

  if (g_mkdir (run, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", run);
  if (host->storage->prepare_template_disks &&
      !(blocks = host->storage->prepare_template_disks (host->storage, &req, overlay, error)))
    return FALSE;
  req.blocks = blocks;
  /* What it is built from must still be what the key says. */
  key = mv_reconciler_warm_key (rt, &req, error);
  if (!key)
    return FALSE;
  if (!g_str_equal (key, build->key))
    return mv_error_set (error, MV_ERROR_CONFLICT, "what the template depends on changed while "
                         "it was built (key %s, now %s)", build->key, key);
  vmm = rt->start (rt, &req, error);
  if (!vmm)
    return FALSE;
  mv_fault_point ("warm-build", "booted");
  req.vmm = vmm;
  ok = rt->save (rt, &req, state, error);
  if (!ok)
    rt->stop (rt, &req, TRUE, NULL);
  rt->destroy (rt, &req, NULL);
  mv_remove_tree (run, NULL);
  if (ok)
    mv_fault_point ("warm-build", "saved");
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

  staged = warm->stage (warm, &error);
  if (!staged)
    {
      g_task_return_error (gtask, error);
      return;
    }
  if (!boot_and_freeze (build, staged, &error))
    {
      warm->discard (warm, staged);
      g_task_return_error (gtask, error);
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
      warm->discard (warm, staged);
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point ("warm-build", "committed");
  g_task_return_boolean (gtask, TRUE);
}

static void
on_built (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Build *build = g_task_get_task_data (G_TASK (result));
  MvReconciler *rec = build->rec;
  g_autoptr (GError) error = NULL;

  g_hash_table_remove (rec->warm_building, build->key);
  rec->background--;
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    g_warning ("The warm template %s (%s on %s) could not be built: %s", build->key,
               build->spec->image ? build->spec->image : "no image", build->runtime->type,
               error->message);
  else
    g_message ("Warm template %s built: machines like %s now start from it", build->key,
               build->spec->name);
}

void
mv_reconciler_build_warm (MvReconciler *rec, MvRuntime *runtime, const MvSpec *spec,
                          const MvImageConfig *image_config, const char *key)
{
  g_autoptr (GTask) gtask = NULL;
  Build *build;

  if (!rec->host->warm || g_hash_table_contains (rec->warm_building, key))
    return;
  build = g_new0 (Build, 1);
  build->rec = rec;
  build->runtime = runtime;
  build->spec = mv_spec_warm_template (spec, key);
  build->image_config = mv_image_config_copy (image_config);
  build->key = g_strdup (key);
  build->hypervisor_version = g_strdup (mv_runtimes_version (rec->host->runtimes, runtime));
  g_hash_table_add (rec->warm_building, g_strdup (key));
  rec->background++;
  gtask = g_task_new (NULL, NULL, on_built, NULL);
  g_task_set_task_data (gtask, build, (GDestroyNotify) build_free);
  g_task_run_in_thread (gtask, build_in_thread);
}

guint
mv_reconciler_prune_warm (MvReconciler *rec, const char *const *keep_digests)
{
  MvSnapshots *warm = rec->host->warm;
  g_autoptr (GPtrArray) templates = warm ? warm->load (warm, NULL, NULL) : NULL;
  guint removed = 0;

  for (guint i = 0; templates && i < templates->len; i++)
    {
      const MvSnapshot *template = templates->pdata[i];
      g_autoptr (GError) error = NULL;

      /* A template is as good as the image its root is: without it, no
       * start could match its key again. */
      if (!template->image_digest ||
          g_strv_contains (keep_digests, template->image_digest))
        continue;
      if (warm->remove (warm, template->id, &error))
        removed++;
      else
        g_warning ("Pruning warm template %s: %s", template->id, error->message);
    }
  return removed;
}

void
mv_warm_check_hypervisors (MvSnapshots *warm, MvRuntimes *runtimes)
{
  g_autoptr (GPtrArray) templates = warm->load (warm, NULL, NULL);

  for (guint i = 0; templates && i < templates->len; i++)
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
    }
}
