/* The host's network records (networks.h). The table is guarded by a
 * mutex: the bus creates and deletes networks in worker threads, and
 * starts will allocate addresses in theirs. */
#include "networks.h"
#include "core/errors.h"
#include "core/machine.h"
#include "util/fault.h"
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STAGING_PREFIX   ".staging-"
#define DELETING_PREFIX  ".deleting-"
/* allocations.json of a /8 with every address held is about 1 GiB; a
 * host runs far fewer machines than this bound allows. */
#define ALLOCATIONS_MAX_BYTES (64 << 20)

typedef struct {
  MvNetworkSpec *spec;
  MvIpam        *ipam;
} Entry;

struct _MvNetworkStore {
  char       *dir;
  GMutex      lock;
  GHashTable *by_id;        /* id → Entry* */
  GHashTable *pending;      /* name → MvNetworkSpec* being created */
};

static void
entry_free (Entry *entry)
{
  mv_network_spec_free (entry->spec);
  mv_ipam_free (entry->ipam);
  g_free (entry);
}


static Entry *
find_locked (MvNetworkStore *store, const char *name_or_id)
{
  GHashTableIter iter;
  Entry *entry;

  entry = g_hash_table_lookup (store->by_id, name_or_id);
  if (entry != NULL)
    return entry;
  g_hash_table_iter_init (&iter, store->by_id);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    if (g_strcmp0 (entry->spec->name, name_or_id) == 0)
      return entry;
  return NULL;
}

static void
add_invalid (GPtrArray *invalid, const char *path, const char *reason)
{
  MvInvalidRecord *record;

  g_warning ("Network record %s is invalid and left alone: %s", path, reason);
  if (invalid == NULL)
    return;
  record = g_new0 (MvInvalidRecord, 1);
  record->path = g_strdup (path);
  record->reason = g_strdup (reason);
  g_ptr_array_add (invalid, record);
}

/* Every network held now and being created (MvNetworkSpec*, borrowed). */
static GPtrArray *
all_specs_locked (MvNetworkStore *store)
{
  GPtrArray *specs = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, store->by_id);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (specs, ((Entry *) value)->spec);
  g_hash_table_iter_init (&iter, store->pending);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (specs, value);
  return specs;
}

/* The network in the directory @name; *@bad_path is the file at fault. */
static Entry *
load_one (MvNetworkStore *store, const char *name, char **bad_path, GError **error)
{
  g_autofree char *path = g_build_filename (store->dir, name, MV_NETWORK_RECORD_NAME, NULL);
  g_autofree char *alloc_path = g_build_filename (store->dir, name, MV_ALLOCATIONS_RECORD_NAME,
                                                  NULL);
  g_autofree char *data = NULL;
  g_autoptr (MvNetworkSpec) spec = NULL;
  g_autoptr (MvIpam) ipam = NULL;
  g_autoptr (GPtrArray) others = NULL;
  Entry *entry;
  gsize len = 0;

  *bad_path = g_strdup (path);
  if (!mv_file_read_bounded (path, MV_NETWORK_SPEC_MAX_BYTES, MV_NETWORK_RECORD_NAME, &data, &len,
                             error))
    return NULL;
  spec = mv_network_spec_from_record (data, len, error);
  if (spec == NULL)
    return NULL;
  if (g_strcmp0 (spec->id, name) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "id: %s, but the directory is %s",
                         spec->id, name), NULL;
  if (find_locked (store, spec->name) != NULL)
    return mv_error_set (error, MV_ERROR_ALREADY_EXISTS, "name: %s is another network's",
                         spec->name), NULL;
  others = all_specs_locked (store);
  if (!mv_network_spec_check_overlap (spec, others, error))
    return NULL;

  g_clear_pointer (&data, g_free);
  g_free (*bad_path);
  *bad_path = g_strdup (alloc_path);
  if (!mv_file_read_bounded (alloc_path, ALLOCATIONS_MAX_BYTES, MV_ALLOCATIONS_RECORD_NAME, &data,
                             &len, error))
    return NULL;
  ipam = mv_ipam_from_json (spec, data, len, error);
  if (ipam == NULL)
    return NULL;

  entry = g_new0 (Entry, 1);
  entry->spec = g_steal_pointer (&spec);
  entry->ipam = g_steal_pointer (&ipam);
  return entry;
}

static gint
by_text (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

MvNetworkStore *
mv_network_store_open (const char *dir, GPtrArray *invalid, GError **error)
{
  g_autoptr (MvNetworkStore) store = g_new0 (MvNetworkStore, 1);
  g_autoptr (GDir) d = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  store->dir = g_strdup (dir);
  g_mutex_init (&store->lock);
  store->by_id = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                        (GDestroyNotify) entry_free);
  store->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) mv_network_spec_free);
  if (g_mkdir_with_parents (dir, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", dir), NULL;
  d = g_dir_open (dir, 0, error);
  if (d == NULL)
    return NULL;
  while ((name = g_dir_read_name (d)))
    g_ptr_array_add (names, g_strdup (name));
  /* In one order, so that of two overlapping networks the same one is
   * refused at every start. */
  g_ptr_array_sort (names, by_text);
  for (guint i = 0; i < names->len; i++)
    {
      const char *entry_name = names->pdata[i];
      g_autofree char *path = g_build_filename (dir, entry_name, NULL);
      g_autofree char *bad_path = NULL;
      g_autoptr (GError) local = NULL;
      Entry *entry;

      if (g_str_has_prefix (entry_name, STAGING_PREFIX) ||
          g_str_has_prefix (entry_name, DELETING_PREFIX))
        {
          /* A create or a delete that a crash interrupted. */
          if (!mv_remove_tree (path, error))
            return NULL;
          g_message ("Swept %s, left by an interrupted network create or delete", path);
          continue;
        }
      if (!mv_id_validate (entry_name, NULL))
        {
          add_invalid (invalid, path, "not a network's directory (its name is not an ID)");
          continue;
        }
      entry = load_one (store, entry_name, &bad_path, &local);
      if (entry == NULL)
        {
          add_invalid (invalid, bad_path, local->message);
          continue;
        }
      g_hash_table_insert (store->by_id, entry->spec->id, entry);
    }
  return g_steal_pointer (&store);
}

void
mv_network_store_free (MvNetworkStore *store)
{
  if (store == NULL)
    return;
  g_clear_pointer (&store->by_id, g_hash_table_unref);
  g_clear_pointer (&store->pending, g_hash_table_unref);
  g_mutex_clear (&store->lock);
  g_free (store->dir);
  g_free (store);
}

/* Both records in the staging directory, then renamed into place. */
static gboolean
write_network (MvNetworkStore *store, const MvNetworkSpec *spec, GError **error)
{
  g_autofree char *staged_name = g_strconcat (STAGING_PREFIX, spec->id, NULL);
  g_autofree char *staged = g_build_filename (store->dir, staged_name, NULL);
  g_autofree char *final = g_build_filename (store->dir, spec->id, NULL);
  g_autofree char *record = g_build_filename (staged, MV_NETWORK_RECORD_NAME, NULL);
  g_autofree char *alloc_record = g_build_filename (staged, MV_ALLOCATIONS_RECORD_NAME, NULL);
  g_autofree char *json = mv_network_spec_to_json (spec);
  g_autoptr (MvIpam) empty = mv_ipam_new (spec);
  g_autofree char *alloc_json = mv_ipam_to_json (empty);

  if (g_mkdir (staged, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", staged);
  if (mv_write_file_atomic (record, json, strlen (json), error) &&
      mv_write_file_atomic (alloc_record, alloc_json, strlen (alloc_json), error) &&
      (mv_fault_point ("network", "staged"), TRUE))
    {
      if (mv_rename_durably (staged, final, error))
        return TRUE;
    }
  mv_remove_tree (staged, NULL);
  return FALSE;
}

MvNetworkSpec *
mv_network_store_create (MvNetworkStore *store, const MvNetworkSpec *spec, GError **error)
{
  g_autoptr (MvNetworkSpec) network = mv_network_spec_copy (spec);
  gboolean ok;

  g_free (network->id);
  network->id = mv_id_new ();
  network->created_at = g_get_real_time ();
  if (!mv_network_spec_validate (network, error))
    return NULL;

  g_mutex_lock (&store->lock);
  if (find_locked (store, network->name) != NULL ||
      g_hash_table_contains (store->pending, network->name))
    ok = mv_error_set (error, MV_ERROR_ALREADY_EXISTS, "name: a network called %s exists",
                       network->name);
  else if (g_hash_table_size (store->by_id) + g_hash_table_size (store->pending) >= MV_NETWORKS_MAX)
    ok = mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                       "This host has the most networks it keeps, %d", MV_NETWORKS_MAX);
  else
    {
      g_autoptr (GPtrArray) others = all_specs_locked (store);

      ok = mv_network_spec_check_overlap (network, others, error);
    }
  if (ok)
    g_hash_table_insert (store->pending, g_strdup (network->name), mv_network_spec_copy (network));
  g_mutex_unlock (&store->lock);
  if (!ok)
    return NULL;

  ok = write_network (store, network, error);

  g_mutex_lock (&store->lock);
  g_hash_table_remove (store->pending, network->name);
  if (ok)
    {
      Entry *entry = g_new0 (Entry, 1);

      entry->spec = mv_network_spec_copy (network);
      entry->ipam = mv_ipam_new (network);
      g_hash_table_insert (store->by_id, entry->spec->id, entry);
    }
  g_mutex_unlock (&store->lock);
  return ok ? g_steal_pointer (&network) : NULL;
}

gboolean
mv_network_store_delete (MvNetworkStore *store, const char *id, GError **error)
{
  g_autofree char *path = g_build_filename (store->dir, id, NULL);
  g_autofree char *aside_name = g_strconcat (DELETING_PREFIX, id, NULL);
  g_autofree char *aside = g_build_filename (store->dir, aside_name, NULL);
  gboolean ok;

  g_mutex_lock (&store->lock);
  ok = g_hash_table_contains (store->by_id, id);
  if (!ok)
    mv_error_set (error, MV_ERROR_NOT_FOUND, "No network with ID %s", id);
  else if (rename (path, aside) < 0)
    ok = mv_set_errno_error (error, errno, "Cannot move %s aside", path);
  else
    g_hash_table_remove (store->by_id, id);
  g_mutex_unlock (&store->lock);
  return ok && mv_fsync_dir (store->dir, error) && mv_remove_tree (aside, error);
}

MvNetworkSpec *
mv_network_store_find (MvNetworkStore *store, const char *name_or_id)
{
  MvNetworkSpec *spec = NULL;
  Entry *entry;

  g_mutex_lock (&store->lock);
  entry = find_locked (store, name_or_id);
  if (entry != NULL)
    spec = mv_network_spec_copy (entry->spec);
  g_mutex_unlock (&store->lock);
  return spec;
}

static gint
by_name (gconstpointer a, gconstpointer b)
{
  const MvNetworkSpec *na = *(const MvNetworkSpec *const *) a;
  const MvNetworkSpec *nb = *(const MvNetworkSpec *const *) b;

  return g_strcmp0 (na->name, nb->name);
}

GPtrArray *
mv_network_store_list (MvNetworkStore *store)
{
  GPtrArray *list = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_network_spec_free);
  GHashTableIter iter;
  Entry *entry;

  g_mutex_lock (&store->lock);
  g_hash_table_iter_init (&iter, store->by_id);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    g_ptr_array_add (list, mv_network_spec_copy (entry->spec));
  g_mutex_unlock (&store->lock);
  g_ptr_array_sort (list, by_name);
  return list;
}

/* ---- allocations ---- */

static gboolean
write_allocations_locked (MvNetworkStore *store, Entry *entry, GError **error)
{
  g_autofree char *path = g_build_filename (store->dir, entry->spec->id,
                                            MV_ALLOCATIONS_RECORD_NAME, NULL);
  g_autofree char *json = mv_ipam_to_json (entry->ipam);

  return mv_write_file_atomic (path, json, strlen (json), error);
}

/* The table as it was before a change that could not be written. */
static void
restore (Entry *entry, const char *machine_id, gboolean held, guint32 before)
{
  g_autoptr (GError) ignored = NULL;
  g_autofree char *text = mv_ipv4_to_string (before);
  guint32 again = 0;

  mv_ipam_release (entry->ipam, machine_id);
  if (held)
    mv_ipam_allocate (entry->ipam, machine_id, text, &again, &ignored);
}

/* mv_ipam_allocate() on @name_or_id; with @record, written before it
 * returns (on a failed write the table is as it was), else only tried:
 * given back at once, in memory. */
static gboolean
allocate (MvNetworkStore *store, const char *name_or_id, const char *machine_id,
          const char *static_ip, gboolean record, guint32 *now, GError **error)
{
  guint32 before = 0;
  gboolean held, ok;
  Entry *entry;

  g_mutex_lock (&store->lock);
  entry = find_locked (store, name_or_id);
  if (entry == NULL)
    ok = mv_error_set (error, MV_ERROR_NOT_FOUND, "network_name: no network called %s",
                       name_or_id);
  else
    {
      held = mv_ipam_lookup (entry->ipam, machine_id, &before);
      ok = mv_ipam_allocate (entry->ipam, machine_id, static_ip, now, error);
      if (ok && !record)
        restore (entry, machine_id, held, before);
      else if (ok && (!held || before != *now) && !write_allocations_locked (store, entry, error))
        {
          restore (entry, machine_id, held, before);
          ok = FALSE;
        }
    }
  g_mutex_unlock (&store->lock);
  return ok;
}

gboolean
mv_network_store_allocate (MvNetworkStore *store, const char *name_or_id, const char *machine_id,
                           const char *static_ip, char **address, GError **error)
{
  guint32 now = 0;

  if (!allocate (store, name_or_id, machine_id, static_ip, TRUE, &now, error))
    return FALSE;
  *address = mv_ipv4_to_string (now);
  return TRUE;
}

char *
mv_network_store_address_of (MvNetworkStore *store, const char *name_or_id,
                             const char *machine_id)
{
  guint32 address = 0;
  gboolean held = FALSE;
  Entry *entry;

  g_mutex_lock (&store->lock);
  entry = find_locked (store, name_or_id);
  if (entry)
    held = mv_ipam_lookup (entry->ipam, machine_id, &address);
  g_mutex_unlock (&store->lock);
  return held ? mv_ipv4_to_string (address) : NULL;
}

gboolean
mv_network_store_check (MvNetworkStore *store, const char *name_or_id, const char *machine_id,
                        const char *static_ip, GError **error)
{
  guint32 now = 0;

  return allocate (store, name_or_id, machine_id ? machine_id : "", static_ip, FALSE, &now,
                   error);
}

gboolean
mv_network_store_release_elsewhere (MvNetworkStore *store, const char *machine_id,
                                    const char *keep_id, GError **error)
{
  GHashTableIter iter;
  Entry *entry;
  gboolean ok = TRUE;

  g_mutex_lock (&store->lock);
  g_hash_table_iter_init (&iter, store->by_id);
  while (ok && g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    {
      guint32 before = 0;

      if (g_strcmp0 (entry->spec->id, keep_id) == 0 ||
          !mv_ipam_lookup (entry->ipam, machine_id, &before))
        continue;
      mv_ipam_release (entry->ipam, machine_id);
      if (!write_allocations_locked (store, entry, error))
        {
          restore (entry, machine_id, TRUE, before);
          ok = FALSE;
        }
    }
  g_mutex_unlock (&store->lock);
  return ok;
}

gboolean
mv_network_store_release (MvNetworkStore *store, const char *name_or_id, const char *machine_id,
                          GError **error)
{
  guint32 before = 0;
  gboolean ok = TRUE;
  Entry *entry;

  g_mutex_lock (&store->lock);
  entry = find_locked (store, name_or_id);
  if (entry != NULL && mv_ipam_lookup (entry->ipam, machine_id, &before))
    {
      mv_ipam_release (entry->ipam, machine_id);
      if (!write_allocations_locked (store, entry, error))
        {
          restore (entry, machine_id, TRUE, before);
          ok = FALSE;
        }
    }
  g_mutex_unlock (&store->lock);
  return ok;
}

gboolean
mv_network_store_reconcile (MvNetworkStore *store, GHashTable *live, guint *released,
                            GError **error)
{
  GHashTableIter iter;
  Entry *entry;
  guint total = 0;
  gboolean ok = TRUE;

  g_mutex_lock (&store->lock);
  g_hash_table_iter_init (&iter, store->by_id);
  while (ok && g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    {
      guint n = mv_ipam_reconcile (entry->ipam, live);

      /* What is freed in memory and not on disk is freed again next time. */
      if (n > 0)
        ok = write_allocations_locked (store, entry, error);
      total += n;
    }
  g_mutex_unlock (&store->lock);
  if (released)
    *released = total;
  return ok;
}

char *
mv_network_store_instance_at (MvNetworkStore *store, const char *name_or_id, const char *address)
{
  char *machine_id = NULL;
  Entry *entry;

  g_mutex_lock (&store->lock);
  entry = find_locked (store, name_or_id);
  if (entry != NULL)
    machine_id = g_strdup (mv_ipam_instance_at (entry->ipam, address));
  g_mutex_unlock (&store->lock);
  return machine_id;
}
