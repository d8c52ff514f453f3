/* The records on disk (DESIGN §3): one directory per machine under
 * <state>/machines/<id>/ with config.json and status.json. Writes are
 * atomic; loading validates every record and leaves invalid ones alone. */
#pragma once
#include "core/machine.h"
#include "core/host/records.h"

typedef struct _MvStore MvStore;

typedef struct {
  MvConfig *config;
  MvStatus *status;   /* never NULL: a missing status.json is a fresh Stopped */
  /* Its directory holds more than the records (a disk, a frozen guest):
   * only then may a crash have left something there to sweep. */
  gboolean  other_files;
} MvRecord;

typedef struct {
  char *path;         /* the file or directory that failed */
  char *reason;       /* why, for people */
} MvInvalidRecord;

/* Creates the state and runtime directories (0700) if needed. */
MvStore    *mv_store_new (const char *state_dir, const char *runtime_dir, GError **error);
void        mv_store_free (MvStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvStore, mv_store_free)

const char *mv_store_state_dir (MvStore *store);
const char *mv_store_runtime_dir (MvStore *store);
char       *mv_store_machine_dir (MvStore *store, const char *id);
char       *mv_store_machine_runtime_dir (MvStore *store, const char *id);

/* Loads every machine. Valid ones come back as MvRecord* (free with
 * mv_record_free); each invalid one is added to @invalid and its files
 * are left byte for byte as they were. Old formats are upgraded in memory
 * by the patches (and written back upgraded, atomically). */
GPtrArray  *mv_store_load_machines (MvStore *store, GPtrArray *invalid /* MvInvalidRecord* */);

/* A record file's text as loading reads it: parsed, brought up to the
 * current format by the patches (*@upgraded then TRUE: it is to be written
 * back) and checked. */
MvConfig   *mv_store_parse_config (const char *data, gsize len, gboolean *upgraded,
                                   GError **error);
MvStatus   *mv_store_parse_status (const char *data, gsize len, gboolean *upgraded,
                                   GError **error);

/* A new machine appears whole or not at all: written into a staging
 * directory, then renamed into place. Fails with MV_ERROR_ALREADY_EXISTS
 * if the directory exists. */
gboolean    mv_store_create_machine (MvStore *store, const MvConfig *config,
                                     const MvStatus *status, GError **error);
gboolean    mv_store_save_config (MvStore *store, const MvConfig *config, GError **error);
gboolean    mv_store_save_status (MvStore *store, const char *id,
                                  const MvStatus *status, GError **error);
/* Notes that the machine is to be destroyed without rewriting its config
 * (an empty file, for a full disk); loading then says desired destroyed. */
gboolean    mv_store_mark_destroyed (MvStore *store, const char *id, GError **error);
/* Removes the machine's records; the directory disappears last. */
gboolean    mv_store_remove_machine (MvStore *store, const char *id, GError **error);

void        mv_record_free (MvRecord *record);
void        mv_invalid_record_free (MvInvalidRecord *invalid);

/* temp file in the same directory, fsync, rename, fsync of the directory;
 * mode 0600. */
gboolean    mv_write_file_atomic (const char *path, const char *data, gsize len,
                                  GError **error);

/* The store as core's Records interface; @store outlives it. Free with
 * g_free. */
MvRecords  *mv_store_records_new (MvStore *store);
