/* A machine as the reconciler owns it: its two records and what the
 * reconciler keeps in memory beside them. Only the reconciler changes a
 * machine; everyone else reads it on the main thread and hears of its
 * changes through the observer (reconciler.h). */
#pragma once
#include "core/machine.h"

typedef struct _MvReconciler MvReconciler;
typedef struct _MvMachine MvMachine;
typedef struct _MvForkWait MvForkWait;
typedef struct _MvRecordWriter MvRecordWriter;

/* What of a machine changed, as bits: the bus turns them into properties. */
typedef enum {
  MV_PROP_NAME                     = 1 << 0,
  MV_PROP_STATE                    = 1 << 1,
  MV_PROP_STATE_ERROR              = 1 << 2,
  MV_PROP_DESIRED_STATE            = 1 << 3,
  MV_PROP_DESIRED_GENERATION       = 1 << 4,
  MV_PROP_OBSERVED_GENERATION      = 1 << 5,
  MV_PROP_SPECIFICATION_GENERATION = 1 << 6,
  MV_PROP_RESTART_GENERATION       = 1 << 7,
  MV_PROP_SPEC                     = 1 << 8,  /* Spec and everything derived from it */
  MV_PROP_PHASE                    = 1 << 9,  /* Phase and OperationId */
  MV_PROP_STARTED_AT               = 1 << 10,
  MV_PROP_UPDATED_AT               = 1 << 11,
  MV_PROP_EXIT_CODE                = 1 << 12,
  MV_PROP_RESTART_COUNT            = 1 << 13,
  MV_PROP_GUEST                    = 1 << 14, /* Health, HealthFailingStreak, AgentVersion */
  MV_PROP_ALL_CONFIG               = MV_PROP_NAME | MV_PROP_DESIRED_STATE |
                                     MV_PROP_DESIRED_GENERATION |
                                     MV_PROP_SPECIFICATION_GENERATION |
                                     MV_PROP_RESTART_GENERATION | MV_PROP_SPEC |
                                     MV_PROP_UPDATED_AT,
  MV_PROP_ALL_STATUS               = MV_PROP_STATE | MV_PROP_STATE_ERROR |
                                     MV_PROP_OBSERVED_GENERATION | MV_PROP_PHASE |
                                     MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE |
                                     MV_PROP_RESTART_COUNT,
} MvMachineProp;

struct _MvMachine {
  MvReconciler *reconciler;
  char         *id;
  MvConfig     *config;
  MvStatus     *status;

  /* One operation at a time: a step, or recovery at startup. */
  gboolean      busy;
  gboolean      gone;            /* records removed; freed once the observer heard */
  /* Its directory held files besides its records when it was loaded:
   * what a crash left among them is swept at recovery. */
  gboolean      other_files;
  gboolean      status_unsaved;  /* the last status write failed; written again later */
  /* Record writes (record-writes.c): each has a sequence number, and the
   * writer keeps an older one from landing over a newer one. While any is
   * in flight off the main loop, what changed is not announced (see
   * MvObserver.durable); while a config write is, nothing acts on it. */
  MvRecordWriter *record_writer;
  guint64       status_seq;      /* of the newest status write begun */
  guint64       status_result_seq; /* of the newest status write whose result is known */
  guint64       config_seq;
  guint         record_writes;   /* writes begun and not yet done off the main loop */
  guint         config_writes;   /* of those, the config writes */
  /* While writes are in flight: the status and config as they were when
   * the first began, which is what is on disk; what the bus shows. NULL
   * when nothing is being written (the config: nor a config write). */
  MvStatus     *shown_status;
  MvConfig     *shown_config;
  gboolean      stopped_now;     /* a stop step has just ended the guest */
  /* When a step last began or ended, or its VMM's end was heard (the
   * reconciler's monotonic clock, µs; 0: not since the daemon started):
   * whether its logs may have grown lately (mv_reconciler_active_since). */
  gint64        active_at;
  guint         watch_id;
  guint         restart_timer;
  GCancellable *step_cancellable;  /* of the step under way; a forced delete cancels it */
  /* The watched VMM's end, heard while a step was under way: a step that
   * releases the VMM accounts for it; after any other it is handled. */
  gboolean      end_heard;
  gboolean      end_has_exit_code;
  int           end_exit_code;
  char         *end_reason;
  /* Its start waits for templates built behind starts to give way. */
  gboolean      waits_for_room;

  /* What the guest's agent said, kept in memory only: the agent says it
   * again to the next daemon. NULL while it has said nothing. */
  char         *agent_version;
  char         *health;
  /* The operation whose start brought up the VMM the guest runs in: what
   * the guest's ready event names. NULL for a VMM adopted at startup. */
  char         *run_operation_id;
  guint         health_failing_streak;

  /* What the guest's agent last said its CPUs had done (USAGE), and when
   * (µs, monotonic; 0 = never). */
  guint64       guest_cpu_busy;
  guint64       guest_cpu_total;
  guint         guest_cpus;
  gint64        guest_usage_at;

  /* Idleness, kept in memory only. */
  guint64       idle_cpu_ns;     /* the VMM's CPU time at the last sample */
  guint64       idle_net_rx;     /* bytes its guest had received then; G_MAXUINT64: unknown */
  guint64       idle_guest_busy; /* the guest's counters at the last sample, or 0 */
  guint64       idle_guest_total;
  gint64        idle_sampled_at; /* µs, monotonic; 0 = not sampled yet */
  gint64        idle_since;      /* µs, monotonic; 0 = busy */

  /* Temporary console keys (console.c), MvConsoleKey*, in the guest's
   * metadata; in memory only. NULL: none yet. */
  GPtrArray    *console_keys;
  /* A fork whose caller waits for it to be whole (snapshots.c). */
  MvForkWait   *fork_wait;
  /* The observer's own state for this machine (the bus object); set and
   * freed by the observer, never touched by the reconciler. */
  gpointer      view;
};

/* Logs about @machine with its ID, operation ID and phase as structured
 * fields. */
void mv_machine_log (const MvMachine *machine, GLogLevelFlags level, const char *format, ...)
  G_GNUC_PRINTF (3, 4);

/* What is on disk of @machine's status and config, as the bus shows them:
 * while a write is in flight, what they were before it. */
const MvStatus *mv_machine_shown_status (const MvMachine *machine);
const MvConfig *mv_machine_shown_config (const MvMachine *machine);

/* Starting, running, paused, on standby, stopping, or with a step under
 * way: a Delete needs force. */
gboolean mv_machine_is_active (const MvMachine *machine);
