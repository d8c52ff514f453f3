/* org.microvmd1.Image: one object per cached image, and the pulls and
 * removals that make and remove them. */
#include "image-object.h"
#include "core/errors.h"
#include "names.h"
#include "polkit.h"

#include <errno.h>
#include <string.h>

/* How far apart one pull's PullProgress signals are at least: five a
 * second at most. */
#define PROGRESS_MIN_INTERVAL_US (200 * G_TIME_SPAN_MILLISECOND)

typedef struct {
  MvImageObjects *objects;
  char     *digest;           /* "sha256:<hex>" */
  char     *path;
  char    **references;
  guint64   disk_size;
  guint64   created_us;
  guint64   pulled_us;
  char    **announced_used_by; /* what clients were last told UsedBy is */
} ImageView;

struct _MvImageObjects {
  MvBusService *service;
  MvImageStore *store;
  MvImages     *images;
  GHashTable   *views;        /* digest → ImageView* */
  GHashTable   *looking_up;   /* digests pinned by machines being looked up in the store */
  guint         refresh_id;
};

char *
mv_image_object_path (const char *digest)
{
  const char *hex = strchr (digest, ':');
  char *path = NULL;

  /* Only fails for lack of memory, which GLib treats as fatal anyway. */
  if (sd_bus_path_encode (MV_IMAGE_PREFIX, hex ? hex + 1 : digest, &path) < 0)
    g_abort ();
  return path;
}

static void
view_free (ImageView *view)
{
  g_free (view->digest);
  g_free (view->path);
  g_strfreev (view->references);
  g_strfreev (view->announced_used_by);
  g_free (view);
}

static guint64
created_us (const MvImage *image)
{
  g_autoptr (GDateTime) when = image->created ? g_date_time_new_from_iso8601 (image->created, NULL) : NULL;

  if (when == NULL || g_date_time_to_unix (when) < 0)
    return 0;
  return (guint64) g_date_time_to_unix (when) * G_USEC_PER_SEC + g_date_time_get_microsecond (when);
}

/* Every machine whose spec is pinned to @digest, by name. Snapshots that
 * keep an image will add theirs here. */
static GPtrArray *
machines_using (MvImageObjects *objects, const char *digest)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_list (mv_bus_service_reconciler (objects->service));
  GPtrArray *users = g_ptr_array_new ();

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];

      if (g_strcmp0 (machine->config->spec->image_digest, digest) == 0)
        g_ptr_array_add (users, machine);
    }
  return users;
}

static char **
used_by_paths (MvImageObjects *objects, const char *digest)
{
  g_autoptr (GPtrArray) users = machines_using (objects, digest);
  GStrvBuilder *builder = g_strv_builder_new ();
  char **paths;

  for (guint i = 0; i < users->len; i++)
    {
      g_autofree char *path = mv_machine_object_path (((MvMachine *) users->pdata[i])->id);

      g_strv_builder_add (builder, path);
    }
  paths = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  return paths;
}

/* Makes or refreshes the view of @image; announces a new one. */
static ImageView *
image_seen (MvImageObjects *objects, const MvImage *image, gboolean announce)
{
  ImageView *view = g_hash_table_lookup (objects->views, image->digest);
  sd_bus *bus = mv_bus_service_bus (objects->service);

  if (view != NULL)
    {
      gboolean refs_changed = !g_strv_equal ((const char * const *) view->references,
                                             (const char * const *) image->references);
      gboolean pulled_changed = view->pulled_us != (guint64) MAX (image->pulled, 0) * G_USEC_PER_SEC;

      g_strfreev (view->references);
      view->references = g_strdupv (image->references);
      view->pulled_us = (guint64) MAX (image->pulled, 0) * G_USEC_PER_SEC;
      if (announce && (refs_changed || pulled_changed))
        sd_bus_emit_properties_changed (bus, view->path, MV_IMAGE_IFACE,
                                        refs_changed ? "References" : "PulledAt",
                                        refs_changed && pulled_changed ? "PulledAt" : NULL, NULL);
      return view;
    }
  view = g_new0 (ImageView, 1);
  view->objects = objects;
  view->digest = g_strdup (image->digest);
  view->path = mv_image_object_path (image->digest);
  view->references = g_strdupv (image->references);
  view->disk_size = image->disk_size;
  view->created_us = created_us (image);
  view->pulled_us = (guint64) MAX (image->pulled, 0) * G_USEC_PER_SEC;
  view->announced_used_by = used_by_paths (objects, image->digest);
  g_hash_table_insert (objects->views, view->digest, view);
  if (announce)
    sd_bus_emit_object_added (bus, view->path);
  return view;
}

static void
image_gone (MvImageObjects *objects, const char *digest)
{
  ImageView *view = g_hash_table_lookup (objects->views, digest);

  if (view == NULL)
    return;
  /* The object must still be found while its removal is announced. */
  sd_bus_emit_object_removed (mv_bus_service_bus (objects->service), view->path);
  g_hash_table_remove (objects->views, digest);
}

/* ---- the objects ---- */

static int
image_find (sd_bus *bus, const char *path, const char *interface, void *userdata,
            void **found, sd_bus_error *error)
{
  MvImageObjects *objects = userdata;
  g_autofree char *hex = NULL;
  g_autofree char *digest = NULL;
  ImageView *view;

  if (sd_bus_path_decode (path, MV_IMAGE_PREFIX, &hex) <= 0 || !hex)
    return 0;
  digest = g_strconcat ("sha256:", hex, NULL);
  view = g_hash_table_lookup (objects->views, digest);
  if (view == NULL)
    return 0;
  *found = view;
  return 1;
}

static int
image_enumerate (sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                 sd_bus_error *error)
{
  MvImageObjects *objects = userdata;
  char **list = calloc (g_hash_table_size (objects->views) + 1, sizeof (char *));
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  if (!list)
    return -ENOMEM;
  g_hash_table_iter_init (&iter, objects->views);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    list[n++] = strdup (((ImageView *) value)->path);
  *nodes = list;
  return 1;
}

static int
get_id (sd_bus *bus, const char *path, const char *interface, const char *property,
        sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  ImageView *view = userdata;

  return sd_bus_message_append (reply, "s", view->digest + strlen ("sha256:"));
}

static int
get_digest (sd_bus *bus, const char *path, const char *interface, const char *property,
            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  ImageView *view = userdata;

  return sd_bus_message_append (reply, "s", view->digest);
}

static int
get_references (sd_bus *bus, const char *path, const char *interface, const char *property,
                sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  ImageView *view = userdata;

  return sd_bus_message_append_strv (reply, view->references);
}

static int
get_number (sd_bus *bus, const char *path, const char *interface, const char *property,
            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  ImageView *view = userdata;
  guint64 value = g_str_equal (property, "SizeBytes") ? view->disk_size
                : g_str_equal (property, "CreatedAt") ? view->created_us
                : view->pulled_us;

  return sd_bus_message_append (reply, "t", value);
}

static int
get_used_by (sd_bus *bus, const char *path, const char *interface, const char *property,
             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  ImageView *view = userdata;
  g_auto (GStrv) paths = used_by_paths (view->objects, view->digest);
  int r;

  r = sd_bus_message_open_container (reply, 'a', "o");
  for (guint i = 0; r >= 0 && paths[i]; i++)
    r = sd_bus_message_append (reply, "o", paths[i]);
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

/* ---- Image.Delete ---- */

typedef struct {
  MvImageObjects *objects;
  char           *digest;
  sd_bus_message *call;
} Removal;

static void
removal_free (Removal *removal)
{
  g_free (removal->digest);
  sd_bus_message_unref (removal->call);
  g_free (removal);
}

static void
remove_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Removal *removal = data;
  GError *error = NULL;

  if (mv_image_store_remove (removal->objects->store, removal->digest, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
removed (GObject *source, GAsyncResult *result, gpointer data)
{
  Removal *removal = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error) &&
      !g_error_matches (error, MV_ERROR, MV_ERROR_NOT_FOUND))
    {
      mv_bus_reply_gerror (removal->call, error);
      return;
    }
  /* Gone from the store, whoever removed it. */
  image_gone (removal->objects, removal->digest);
  if (error != NULL)
    mv_bus_reply_gerror (removal->call, error);
  else
    sd_bus_reply_method_return (removal->call, NULL);
}

/* The machines in @users by name, for a message. */
static char *
machine_names (GPtrArray *users)
{
  g_autoptr (GString) text = g_string_new ("");

  for (guint i = 0; i < users->len; i++)
    g_string_append_printf (text, "%s%s", i ? ", " : "",
                            ((MvMachine *) users->pdata[i])->config->spec->name);
  return g_string_free (g_steal_pointer (&text), FALSE);
}

static void
do_delete (sd_bus_message *call, gboolean root, gpointer user_data)
{
  Removal *pending = user_data;
  MvImageObjects *objects = pending->objects;
  g_autoptr (GPtrArray) users = NULL;
  g_auto (GStrv) in_use = NULL;
  Removal *removal;

  if (!g_hash_table_contains (objects->views, pending->digest))
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "Image %s was removed",
                                  pending->digest);
      return;
    }
  users = machines_using (objects, pending->digest);
  if (users->len > 0)
    {
      g_autofree char *names = machine_names (users);

      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_STATE,
                                  "Image %s is used by %s: delete %s first", pending->digest, names,
                                  users->len == 1 ? "that machine" : "those machines");
      return;
    }
  in_use = mv_reconciler_images_in_use (mv_bus_service_reconciler (objects->service));
  if (g_strv_contains ((const char * const *) in_use, pending->digest))
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_STATE,
                                  "Image %s is what snapshots' guests booted from: delete those "
                                  "snapshots first", pending->digest);
      return;
    }
  removal = g_new0 (Removal, 1);
  removal->objects = objects;
  removal->digest = g_strdup (pending->digest);
  removal->call = sd_bus_message_ref (call);
  mv_bus_run_in_thread (remove_thread, removal, (GDestroyNotify) removal_free, removed);
}

static int
method_delete (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  ImageView *view = userdata;
  MvImageObjects *objects = view->objects;
  Removal *pending = g_new0 (Removal, 1);
  const char *details[] = {
    "image", view->digest,
    "verb", "delete",
    NULL,
  };

  pending->objects = objects;
  pending->digest = g_strdup (view->digest);
  mv_polkit_check (m, MV_ACTION_IMAGE_DELETE, details, do_delete, pending,
                   (GDestroyNotify) removal_free);
  return 1;
}

static const sd_bus_vtable image_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Id", "s", get_id, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Digest", "s", get_digest, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("References", "as", get_references, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("SizeBytes", "t", get_number, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_number, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("PulledAt", "t", get_number, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("UsedBy", "ao", get_used_by, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_METHOD_WITH_ARGS ("Delete", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_delete,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_VTABLE_END
};

/* ---- UsedBy, as machines come and go ---- */

typedef struct {
  MvImageObjects *objects;
  GPtrArray      *digests;
} Lookup;

static void
lookup_free (Lookup *lookup)
{
  g_ptr_array_unref (lookup->digests);
  g_free (lookup);
}

static void
looked_up (GObject *source, GAsyncResult *result, gpointer data)
{
  Lookup *lookup = g_task_get_task_data (G_TASK (result));
  g_autoptr (GPtrArray) found = g_task_propagate_pointer (G_TASK (result), NULL);

  for (guint i = 0; i < lookup->digests->len; i++)
    g_hash_table_remove (lookup->objects->looking_up, lookup->digests->pdata[i]);
  for (guint i = 0; found && i < found->len; i++)
    image_seen (lookup->objects, found->pdata[i], TRUE);
}

static void
lookup_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Lookup *lookup = data;
  GPtrArray *found = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_image_free);

  for (guint i = 0; i < lookup->digests->len; i++)
    {
      MvImage *image = mv_image_store_lookup (lookup->objects->store, lookup->digests->pdata[i], NULL);

      if (image != NULL)
        g_ptr_array_add (found, image);
    }
  g_task_return_pointer (task, found, (GDestroyNotify) g_ptr_array_unref);
}

static gboolean
refresh (gpointer data)
{
  MvImageObjects *objects = data;
  sd_bus *bus = mv_bus_service_bus (objects->service);
  g_autoptr (GPtrArray) machines = mv_reconciler_list (mv_bus_service_reconciler (objects->service));
  g_autoptr (GPtrArray) unknown = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer value;

  objects->refresh_id = 0;
  g_hash_table_iter_init (&iter, objects->views);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      ImageView *view = value;
      g_auto (GStrv) paths = used_by_paths (objects, view->digest);

      if (g_strv_equal ((const char * const *) paths, (const char * const *) view->announced_used_by))
        continue;
      g_strfreev (view->announced_used_by);
      view->announced_used_by = g_steal_pointer (&paths);
      sd_bus_emit_properties_changed (bus, view->path, MV_IMAGE_IFACE, "UsedBy", NULL);
    }

  /* An image a machine was pinned to by another way than PullImage (a
   * create that pulled it) is served once it is seen. */
  for (guint i = 0; i < machines->len; i++)
    {
      const char *digest = ((MvMachine *) machines->pdata[i])->config->spec->image_digest;

      if (digest != NULL && !g_hash_table_contains (objects->views, digest) &&
          !g_hash_table_contains (objects->looking_up, digest))
        {
          g_hash_table_add (objects->looking_up, g_strdup (digest));
          g_ptr_array_add (unknown, g_strdup (digest));
        }
    }
  if (unknown->len > 0)
    {
      g_autoptr (GTask) task = g_task_new (NULL, NULL, looked_up, NULL);
      Lookup *lookup = g_new0 (Lookup, 1);

      lookup->objects = objects;
      lookup->digests = g_steal_pointer (&unknown);
      g_task_set_task_data (task, lookup, (GDestroyNotify) lookup_free);
      g_task_run_in_thread (task, lookup_thread);
    }
  return G_SOURCE_REMOVE;
}

void
mv_image_objects_machines_changed (MvImageObjects *objects)
{
  if (objects != NULL && objects->refresh_id == 0)
    objects->refresh_id = g_idle_add (refresh, objects);
}

/* ---- Manager.PullImage ---- */

typedef struct {
  MvImageObjects *objects;
  sd_bus_message *call;
  char           *reference;
  MvPullPolicy    policy;
  GCancellable   *cancellable;
  sd_bus_track   *track;
  GMutex          lock;
  guint64         done, total;    /* the latest report, under the lock */
  gboolean        scheduled;      /* a PullProgress is due, under the lock */
  gint64          sent_at;        /* under the lock */
  guint64         sent_done, sent_total;
  gboolean        sent;
} Pull;

static void
pull_release (Pull *pull)
{
  g_free (pull->reference);
  g_clear_object (&pull->cancellable);
  sd_bus_message_unref (pull->call);
  sd_bus_track_unref (pull->track);
  g_mutex_clear (&pull->lock);
}

static void
pull_unref (Pull *pull)
{
  g_rc_box_release_full (pull, (GDestroyNotify) pull_release);
}

/* Main thread: the latest report as PullProgress, unless it was sent. */
static void
send_progress (Pull *pull)
{
  guint64 done, total;

  g_mutex_lock (&pull->lock);
  pull->scheduled = FALSE;
  pull->sent_at = g_get_monotonic_time ();
  done = pull->done;
  total = pull->total;
  g_mutex_unlock (&pull->lock);
  if (pull->sent && done == pull->sent_done && total == pull->sent_total)
    return;
  pull->sent = TRUE;
  pull->sent_done = done;
  pull->sent_total = total;
  sd_bus_emit_signal (mv_bus_service_bus (pull->objects->service), MV_MANAGER_PATH, MV_MANAGER_IFACE,
                      "PullProgress", "stt", pull->reference, done, total);
}

static gboolean
on_progress_due (gpointer data)
{
  send_progress (data);
  return G_SOURCE_REMOVE;
}

/* Worker thread: keeps the report and has it sent from the main thread,
 * no sooner than PROGRESS_MIN_INTERVAL_US after the last one. */
static void
on_pull_progress (guint64 done, guint64 total, gpointer data)
{
  Pull *pull = data;
  gint64 wait = 0;
  gboolean schedule;

  g_mutex_lock (&pull->lock);
  pull->done = done;
  pull->total = total;
  schedule = !pull->scheduled;
  if (schedule)
    {
      pull->scheduled = TRUE;
      wait = pull->sent_at + PROGRESS_MIN_INTERVAL_US - g_get_monotonic_time ();
    }
  g_mutex_unlock (&pull->lock);
  if (schedule)
    g_timeout_add_full (G_PRIORITY_DEFAULT, (guint) MAX (wait, 0) / 1000, on_progress_due,
                        g_rc_box_acquire (pull), (GDestroyNotify) pull_unref);
}

static void
pull_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Pull *pull = data;
  MvImages *images = pull->objects->images;
  GError *error = NULL;
  g_autofree char *digest = images->ensure (images, pull->reference, pull->policy, on_pull_progress,
                                            pull, pull->cancellable, NULL, &error);
  MvImage *image = digest ? mv_image_store_lookup (pull->objects->store, digest, &error) : NULL;

  if (image == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, image, (GDestroyNotify) mv_image_free);
}

static void
pulled (GObject *source, GAsyncResult *result, gpointer data)
{
  Pull *pull = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImage) image = g_task_propagate_pointer (G_TASK (result), &error);

  /* Answered: the caller's departure no longer matters, though a progress
   * report still due keeps the pull a moment longer. */
  g_clear_pointer (&pull->track, sd_bus_track_unref);
  if (image == NULL)
    {
      mv_bus_reply_gerror (pull->call, error);
      return;
    }
  /* The last report goes out before the reply. */
  send_progress (pull);
  sd_bus_reply_method_return (pull->call, "o", image_seen (pull->objects, image, TRUE)->path);
}

static int
on_caller_gone (sd_bus_track *track, void *userdata)
{
  Pull *pull = userdata;

  /* The store goes on pulling for anyone else who still wants it. The
   * track is done with: left in place, an empty track would be handed
   * back to this function on every turn of the bus until the pull ends,
   * and the pull could not end while the main loop spins here. */
  g_cancellable_cancel (pull->cancellable);
  g_clear_pointer (&pull->track, sd_bus_track_unref);
  return 1;
}

typedef struct {
  MvImageObjects *objects;
  MvPullPolicy    policy;
} PullRequest;

static void
do_pull (sd_bus_message *call, gboolean root, gpointer user_data)
{
  PullRequest *request = user_data;
  const char *reference = NULL;
  Pull *pull;
  int r;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "s", &reference) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (ss)");
      return;
    }
  pull = g_rc_box_new0 (Pull);
  pull->objects = request->objects;
  pull->call = sd_bus_message_ref (call);
  pull->reference = g_strdup (reference);
  pull->policy = request->policy;
  pull->cancellable = g_cancellable_new ();
  g_mutex_init (&pull->lock);
  r = sd_bus_track_new (sd_bus_message_get_bus (call), &pull->track, on_caller_gone, pull);
  if (r >= 0)
    r = sd_bus_track_add_sender (pull->track, call);
  if (r < 0)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_FAILED, "Cannot follow the caller: %s",
                                  g_strerror (-r));
      pull_unref (pull);
      return;
    }
  mv_bus_run_in_thread (pull_thread, pull, (GDestroyNotify) pull_unref, pulled);
}

int
mv_image_method_pull (sd_bus_message *m, MvImageObjects *objects, sd_bus_error *error)
{
  const char *reference = NULL, *policy_text = NULL;
  g_autoptr (GError) local = NULL;
  PullRequest *request;
  MvPullPolicy policy;
  int r = sd_bus_message_read (m, "ss", &reference, &policy_text);

  if (r < 0)
    return r;
  if (objects == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_UNSUPPORTED, "This daemon keeps no images");
  if (!mv_pull_policy_from_string (policy_text, &policy))
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "policy: \"%s\" is not one of missing, always, never (or empty, which is missing)",
                              policy_text);
  if (!objects->images->check (objects->images, reference, &local))
    return mv_bus_error_from_gerror (error, local);
  sd_bus_message_rewind (m, TRUE);

  const char *details[] = {
    "image", reference,
    "verb", "pull",
    NULL,
  };
  request = g_new0 (PullRequest, 1);
  request->objects = objects;
  request->policy = policy;
  mv_polkit_check (m, MV_ACTION_IMAGE_PULL, details, do_pull, request, g_free);
  return 1;
}

/* ---- Manager.PruneImages ---- */

typedef struct {
  MvImageObjects *objects;
  sd_bus_message *call;
  GStrv           keep;
  GStrv           warm;          /* the warm templates of the images not kept */
  GPtrArray      *warm_removed;  /* char*: those removed */
} Prune;

static void
prune_free (Prune *prune)
{
  sd_bus_message_unref (prune->call);
  g_strfreev (prune->keep);
  g_strfreev (prune->warm);
  g_ptr_array_unref (prune->warm_removed);
  g_free (prune);
}

/* Removes every cached image not kept; returns their digests, also when
 * a removal fails half-way (the error is then logged). */
static void
prune_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Prune *prune = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) images = mv_image_store_list (prune->objects->store, &error);
  GPtrArray *removed = g_ptr_array_new_with_free_func (g_free);
  MvReconciler *rec = mv_bus_service_reconciler (prune->objects->service);

  /* The warm templates of the images no machine is pinned to go with
   * them. */
  for (char **key = prune->warm; *key; key++)
    {
      g_autoptr (GError) local = NULL;

      if (mv_reconciler_remove_warm (rec, *key, &local))
        g_ptr_array_add (prune->warm_removed, g_strdup (*key));
      else
        g_warning ("Pruning warm template %s: %s", *key, local->message);
    }
  for (guint i = 0; images && i < images->len; i++)
    {
      const char *digest = ((MvImage *) images->pdata[i])->digest;
      g_autoptr (GError) local = NULL;

      if (g_strv_contains ((const char * const *) prune->keep, digest))
        continue;
      if (mv_image_store_remove (prune->objects->store, digest, &local) ||
          g_error_matches (local, MV_ERROR, MV_ERROR_NOT_FOUND))
        g_ptr_array_add (removed, g_strdup (digest));
      else if (error == NULL)
        error = g_steal_pointer (&local);
    }
  if (error != NULL && removed->len == 0)
    {
      g_ptr_array_unref (removed);
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  if (error != NULL)
    g_warning ("Pruning images: %s", error->message);
  g_task_return_pointer (task, removed, (GDestroyNotify) g_ptr_array_unref);
}

static void
pruned (GObject *source, GAsyncResult *result, gpointer data)
{
  Prune *prune = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) removed = g_task_propagate_pointer (G_TASK (result), &error);
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  mv_reconciler_forget_warm (mv_bus_service_reconciler (prune->objects->service),
                             prune->warm_removed);
  if (removed == NULL)
    {
      mv_bus_reply_gerror (prune->call, error);
      return;
    }
  r = sd_bus_message_new_method_return (prune->call, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "o");
  for (guint i = 0; i < removed->len; i++)
    {
      g_autofree char *path = mv_image_object_path (removed->pdata[i]);

      if (r >= 0)
        r = sd_bus_message_append (reply, "o", path);
      image_gone (prune->objects, removed->pdata[i]);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r >= 0)
    sd_bus_send (NULL, reply, NULL);
  else
    sd_bus_reply_method_errorf (prune->call, MV_BUS_ERROR_FAILED, "Cannot reply: %s", g_strerror (-r));
}

static void
do_prune (sd_bus_message *call, gboolean root, gpointer user_data)
{
  MvImageObjects *objects = user_data;
  Prune *prune;

  /* What machines are pinned to and snapshots' guests booted from now;
   * a machine defined while the removal runs pulls its image again when
   * it starts. */
  prune = g_new0 (Prune, 1);
  prune->objects = objects;
  prune->call = sd_bus_message_ref (call);
  prune->keep = mv_reconciler_images_in_use (mv_bus_service_reconciler (objects->service));
  prune->warm = mv_reconciler_warm_unused (mv_bus_service_reconciler (objects->service),
                                           (const char *const *) prune->keep);
  prune->warm_removed = g_ptr_array_new_with_free_func (g_free);
  mv_bus_run_in_thread (prune_thread, prune, (GDestroyNotify) prune_free, pruned);
}

int
mv_image_method_prune (sd_bus_message *m, MvImageObjects *objects, sd_bus_error *error)
{
  const char *details[] = {
    "verb", "prune",
    NULL,
  };

  if (objects == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_UNSUPPORTED, "This daemon keeps no images");
  mv_polkit_check (m, MV_ACTION_IMAGE_DELETE, details, do_prune, objects, NULL);
  return 1;
}

/* ---- the whole ---- */

MvImageObjects *
mv_image_objects_new (MvBusService *service, MvImageStore *store, MvImages *images)
{
  MvImageObjects *objects = g_new0 (MvImageObjects, 1);

  objects->service = service;
  objects->store = store;
  objects->images = images;
  objects->views = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) view_free);
  objects->looking_up = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return objects;
}

void
mv_image_objects_free (MvImageObjects *objects)
{
  if (objects == NULL)
    return;
  g_clear_handle_id (&objects->refresh_id, g_source_remove);
  g_hash_table_unref (objects->views);
  g_hash_table_unref (objects->looking_up);
  g_free (objects);
}

int
mv_image_objects_register (MvImageObjects *objects)
{
  sd_bus *bus = mv_bus_service_bus (objects->service);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) images = mv_image_store_list (objects->store, &error);
  int r;

  if (images == NULL)
    g_warning ("Cannot list the cached images: %s", error->message);
  for (guint i = 0; images && i < images->len; i++)
    image_seen (objects, images->pdata[i], FALSE);

  r = sd_bus_add_fallback_vtable (bus, NULL, MV_IMAGE_PREFIX, MV_IMAGE_IFACE, image_vtable,
                                  image_find, objects);
  if (r >= 0)
    r = sd_bus_add_node_enumerator (bus, NULL, MV_IMAGE_PREFIX, image_enumerate, objects);
  return r;
}
