/* An observer that records what the reconciler reports: the properties
 * that changed per machine, every settled() with its error, the machines
 * added and removed. It also answers waiters the way the bus answers its
 * waiting calls (src/bus/service.c): once the wish they noted is reached,
 * superseded, failed, or the machine is gone. */
#pragma once
#include "reconcile/reconciler.h"

typedef struct {
  char   *machine_id;
  GError *failure;      /* NULL: settled with the wish reached */
} Settled;

typedef struct {
  char      *machine_id;
  MvDesired  target;
  guint64    generation;
  gboolean   done;
  GError    *error;     /* set when done with an error */
} Waiter;

typedef struct {
  MvObserver  observer;
  GPtrArray  *settled;  /* Settled* */
  GPtrArray  *added;    /* char* */
  GPtrArray  *removed;  /* char* */
  GHashTable *props;    /* machine id -> changed MvMachineProp bits, ORed */
  GPtrArray  *waiters;  /* Waiter* */
  GPtrArray  *breaches; /* char*: reports that make no sense */
} Recorder;

Recorder *recorder_new (void);
void      recorder_free (Recorder *recorder);

/* The bits changed for @machine_id since the last clear. */
guint     recorder_props (Recorder *recorder, const char *machine_id);
void      recorder_clear_props (Recorder *recorder, const char *machine_id);
guint     recorder_n_settled (Recorder *recorder, const char *machine_id);
/* The last settled() of @machine_id, or NULL. */
Settled  *recorder_last_settled (Recorder *recorder, const char *machine_id);
gboolean  recorder_was_removed (Recorder *recorder, const char *machine_id);

/* Notes what @machine is wanted now, as the bus does for a waiting call;
 * the waiter stays the recorder's. */
Waiter   *recorder_wait (Recorder *recorder, MvMachine *machine);
