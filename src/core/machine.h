/* A machine's two records: the desired one (config.json) and the observed
 * one (status.json), with the generation rules of seed 000. Pure. */
#pragma once
#include "spec.h"
#include "image-config.h"
#include "state.h"

#define MV_CONFIG_FORMAT  2
#define MV_STATUS_FORMAT  1

/* A record file as the store reads and writes it: config.json holds a
 * spec (MV_SPEC_MAX_BYTES, MV_SPEC_MAX_DEPTH) one level down, with room
 * for the record's own fields. */
#define MV_RECORD_MAX_BYTES  (MV_SPEC_MAX_BYTES + 64 * 1024)
#define MV_RECORD_MAX_DEPTH  (MV_SPEC_MAX_DEPTH + 2)

typedef struct {
  char      *id;
  MvSpec    *spec;
  MvDesired  desired;
  guint64    desired_generation;
  guint64    specification_generation;
  guint64    restart_generation;
  char      *fingerprint;       /* of the spec the machine was created with */
  gint64     created_at;        /* µs since the epoch */
  gint64     updated_at;
  gboolean   stopped_by_user;
  /* The guest is wanted frozen to disk (standby), by a user or because it
   * was idle; the desired state says what it is when it wakes. */
  gboolean   standby;
  /* The config of the image the spec is pinned to (what a digest names
   * never changes): the workload's defaults. NULL without an image. */
  MvImageConfig *image_config;
} MvConfig;

/* MvStatus.started_from. */
#define MV_STARTED_COLD         "cold"
#define MV_STARTED_WARM         "warm"
#define MV_STARTED_SAVED_STATE  "saved-state"

typedef struct {
  MvState    state;
  char      *state_error;       /* NULL when none */
  char      *phase;             /* the host call under way, NULL when idle */
  char      *operation_id;      /* NULL when idle */
  guint64    observed_generation;
  gint64     started_at;        /* µs since the epoch, 0 = never */
  gint64     finished_at;
  gboolean   has_exit_code;
  gint32     exit_code;
  guint32    restart_count;
  gint64     next_restart_at;
  JsonObject *vmm;              /* runtime's identity of its VMM; NULL = none */
  char      *saved_state;       /* path of a saved guest, NULL = none */
  /* The desired generation whose reconciliation failed: the reconciler
   * leaves the machine alone until something new is asked of it. 0 = none. */
  guint64    failed_generation;
  /* The restart generation the last start carried out. */
  guint64    observed_restart_generation;
  /* The sequence number of the last traffic event that woke the machine. */
  guint64    traffic_sequence;
  /* A Snapshot.Restore under way: the snapshot whose disk (and frozen
   * guest) is being put back; an interrupted one is done again. NULL = none. */
  char      *restoring_snapshot;
  /* A fork not yet whole: the machine is removed if it is interrupted. */
  gboolean   forking;
  /* What an interrupted destroy already removed, by resource name. */
  GPtrArray *destroyed;         /* char*, never NULL */
  /* The size the guest was admitted with (seed 002, Status.VCPUs and
   * MemoryBytes), kept while it is frozen to disk: what a resume is
   * admitted on, since the spec may say otherwise by then. 0 = not
   * recorded (the spec's size). */
  guint32    vcpus;
  guint64    memory_bytes;
  /* How the guest that runs now came up: "cold" (booted), "warm" (from a
   * warm template), "saved-state" (its own frozen guest woken). NULL:
   * none has run since it was created. */
  char      *started_from;
  /* The key of the warm template its overlay disk and first guest were
   * restored from (its WarmImage's UsedBy); NULL for a machine that never
   * started warm. Kept for the machine's life. */
  char      *warm_template;
} MvStatus;

MvConfig *mv_config_new (const char *id, MvSpec *spec /* owned */, gint64 now);
/* The same, given the spec's mv_spec_fingerprint() (owned) already made. */
MvConfig *mv_config_new_fingerprinted (const char *id, MvSpec *spec /* owned */,
                                       char *fingerprint /* owned */, gint64 now);
void      mv_config_free (MvConfig *config);
MvConfig *mv_config_copy (const MvConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvConfig, mv_config_free)

MvStatus *mv_status_new (void);    /* Stopped, generation 0 */
void      mv_status_free (MvStatus *status);
MvStatus *mv_status_copy (const MvStatus *status);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvStatus, mv_status_free)

/* Generation rules. Each returns TRUE if the record changed. */
/* Desired generation rises only for a real change of desired state. */
gboolean mv_config_set_desired (MvConfig *config, MvDesired desired, gint64 now);
/* Restart generation rises for each accepted restart; it is a change of
 * what is desired, so the desired generation rises with it. */
void     mv_config_request_restart (MvConfig *config, gint64 now);
/* Asks again for the current desired state after a failure: the desired
 * generation rises so the reconciler tries once more. */
void     mv_config_retry (MvConfig *config, gint64 now);
/* Asks for the guest to be frozen to disk (@standby) or woken. */
gboolean mv_config_set_standby (MvConfig *config, gboolean standby, gint64 now);
/* Replaces the spec (id and name are kept from @config unless @spec has
 * them equal). The specification generation rises unless only the standby
 * time changed; the desired generation rises for any change. */
gboolean mv_config_update_spec (MvConfig *config, MvSpec *spec /* owned */, gint64 now);

/* Serialization of the records, with their "format" number. Parsing
 * checks types and values and fails with MV_ERROR_INVALID_ARGUMENT saying
 * what is wrong; it expects the current format (store applies patches). */
JsonNode *mv_config_to_node (const MvConfig *config);
MvConfig *mv_config_from_node (const MvJson *node, GError **error);
JsonNode *mv_status_to_node (const MvStatus *status);
MvStatus *mv_status_from_node (const MvJson *node, GError **error);

/* Whether @status is what @config asks for: the state for the desired
 * power state, on standby if standby is wanted, and no saved guest left
 * behind by a stop. */
gboolean  mv_machine_desired_reached (const MvConfig *config, const MvStatus *status);

/* A fresh random ID: 32 lowercase hex characters. */
char     *mv_id_new (void);
gboolean  mv_id_validate (const char *id, GError **error);
