/* A clock that stands still until the test moves it. Timers are kept in a
 * list; moving the clock fires those that fall due, in order, each at its
 * own time, on the calling (main) thread. Real and monotonic time move
 * together. */
#pragma once
#include "reconcile/reconciler.h"

typedef struct _FakeClock FakeClock;

FakeClock     *fake_clock_new (void);
void           fake_clock_free (FakeClock *fake);
const MvClock *fake_clock_iface (FakeClock *fake);

gint64         fake_clock_real (FakeClock *fake);        /* µs since the epoch */
gint64         fake_clock_monotonic (FakeClock *fake);   /* µs */
/* Moves both clocks on by @ms, firing every timer due on the way. */
void           fake_clock_advance (FakeClock *fake, guint ms);
guint          fake_clock_n_timers (FakeClock *fake);
/* Whether a timer added with exactly @ms is pending. */
gboolean       fake_clock_has_timer (FakeClock *fake, guint ms);
/* How long until the next timer is due, in ms; -1 without one. */
gint64         fake_clock_next_due (FakeClock *fake);
