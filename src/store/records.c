/* The store as core's Records interface (core/host/records.h). */
#include "store.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>

static gboolean
records_create (MvRecords *records, const MvConfig *config, const MvStatus *status,
                GError **error)
{
  return mv_store_create_machine (records->data, config, status, error);
}

static gboolean
records_save_config (MvRecords *records, const MvConfig *config, GError **error)
{
  return mv_store_save_config (records->data, config, error);
}

static gboolean
records_save_status (MvRecords *records, const char *id, const MvStatus *status, GError **error)
{
  return mv_store_save_status (records->data, id, status, error);
}

static gboolean
records_mark_destroyed (MvRecords *records, const char *id, GError **error)
{
  return mv_store_mark_destroyed (records->data, id, error);
}

static gboolean
records_remove (MvRecords *records, const char *id, GError **error)
{
  return mv_store_remove_machine (records->data, id, error);
}

static char *
records_machine_dir (MvRecords *records, const char *id)
{
  return mv_store_machine_dir (records->data, id);
}

static char *
records_runtime_dir (MvRecords *records, const char *id)
{
  return mv_store_machine_runtime_dir (records->data, id);
}

static gboolean
records_make_runtime_dir (MvRecords *records, const char *id, gboolean *made, GError **error)
{
  g_autofree char *dir = mv_store_machine_runtime_dir (records->data, id);
  g_autofree char *parent = g_path_get_dirname (dir);
  gboolean new_dir;

  if (g_mkdir_with_parents (parent, 0700) < 0)
    return mv_set_errno_error (error, errno, "Could not create %s", parent);
  new_dir = g_mkdir (dir, 0700) == 0;
  if (!new_dir && (errno != EEXIST || !g_file_test (dir, G_FILE_TEST_IS_DIR)))
    return mv_set_errno_error (error, errno, "Could not create %s", dir);
  if (made)
    *made = new_dir;
  return TRUE;
}

static gboolean
records_remove_runtime_dir (MvRecords *records, const char *id, GError **error)
{
  g_autofree char *dir = mv_store_machine_runtime_dir (records->data, id);

  return mv_remove_tree (dir, error);
}

MvRecords *
mv_store_records_new (MvStore *store)
{
  MvRecords *records = g_new0 (MvRecords, 1);

  records->data = store;
  records->create = records_create;
  records->save_config = records_save_config;
  records->save_status = records_save_status;
  records->mark_destroyed = records_mark_destroyed;
  records->remove = records_remove;
  records->machine_dir = records_machine_dir;
  records->runtime_dir = records_runtime_dir;
  records->make_runtime_dir = records_make_runtime_dir;
  records->remove_runtime_dir = records_remove_runtime_dir;
  return records;
}
