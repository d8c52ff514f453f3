#include "fake-clock.h"

#define START_REAL       (G_GINT64_CONSTANT (1700000000) * G_USEC_PER_SEC)
#define START_MONOTONIC  (G_GINT64_CONSTANT (1000) * G_USEC_PER_SEC)

typedef struct {
  guint       id;
  guint       ms;
  gint64      due;      /* monotonic µs */
  GSourceFunc func;
  gpointer    data;
} Timer;

struct _FakeClock {
  MvClock    iface;
  gint64     offset;    /* µs since the clock was made; a start's worker reads it too */
  GPtrArray *timers;    /* Timer* */
  guint      next_id;
};

static gint64
fake_real_time (gpointer data)
{
  return fake_clock_real (data);
}

static gint64
fake_monotonic_time (gpointer data)
{
  return fake_clock_monotonic (data);
}

static guint
fake_timeout_add (guint ms, GSourceFunc func, gpointer func_data, gpointer data)
{
  FakeClock *fake = data;
  Timer *timer = g_new0 (Timer, 1);

  timer->id = ++fake->next_id;
  timer->ms = ms;
  timer->due = fake_clock_monotonic (fake) + (gint64) ms * 1000;
  timer->func = func;
  timer->data = func_data;
  g_ptr_array_add (fake->timers, timer);
  return timer->id;
}

static void
fake_source_remove (guint id, gpointer data)
{
  FakeClock *fake = data;

  for (guint i = 0; i < fake->timers->len; i++)
    if (((Timer *) fake->timers->pdata[i])->id == id)
      {
        g_ptr_array_remove_index (fake->timers, i);
        return;
      }
  g_critical ("fake clock: no timer %u to remove", id);
}

FakeClock *
fake_clock_new (void)
{
  FakeClock *fake = g_new0 (FakeClock, 1);

  fake->timers = g_ptr_array_new_with_free_func (g_free);
  fake->iface = (MvClock) {
    .real_time = fake_real_time,
    .monotonic_time = fake_monotonic_time,
    .timeout_add = fake_timeout_add,
    .source_remove = fake_source_remove,
    .data = fake,
  };
  return fake;
}

void
fake_clock_free (FakeClock *fake)
{
  if (!fake)
    return;
  g_ptr_array_unref (fake->timers);
  g_free (fake);
}

const MvClock *
fake_clock_iface (FakeClock *fake)
{
  return &fake->iface;
}

gint64
fake_clock_real (FakeClock *fake)
{
  return START_REAL + __atomic_load_n (&fake->offset, __ATOMIC_RELAXED);
}

gint64
fake_clock_monotonic (FakeClock *fake)
{
  return START_MONOTONIC + __atomic_load_n (&fake->offset, __ATOMIC_RELAXED);
}

static Timer *
earliest (FakeClock *fake)
{
  Timer *first = NULL;

  for (guint i = 0; i < fake->timers->len; i++)
    {
      Timer *timer = fake->timers->pdata[i];

      if (!first || timer->due < first->due)
        first = timer;
    }
  return first;
}

void
fake_clock_advance (FakeClock *fake, guint ms)
{
  gint64 target = fake_clock_monotonic (fake) + (gint64) ms * 1000;
  Timer *timer;

  while ((timer = earliest (fake)) && timer->due <= target)
    {
      guint id = timer->id;

      __atomic_store_n (&fake->offset, timer->due - START_MONOTONIC, __ATOMIC_RELAXED);
      if (timer->func (timer->data) == G_SOURCE_CONTINUE)
        {
          /* The callback may have added or removed timers: find it again. */
          for (guint i = 0; i < fake->timers->len; i++)
            if (((Timer *) fake->timers->pdata[i])->id == id)
              {
                timer = fake->timers->pdata[i];
                timer->due += MAX (timer->ms, 1) * (gint64) 1000;
              }
        }
      else
        for (guint i = 0; i < fake->timers->len; i++)
          if (((Timer *) fake->timers->pdata[i])->id == id)
            g_ptr_array_remove_index (fake->timers, i);
    }
  __atomic_store_n (&fake->offset, target - START_MONOTONIC, __ATOMIC_RELAXED);
}

guint
fake_clock_n_timers (FakeClock *fake)
{
  return fake->timers->len;
}

gboolean
fake_clock_has_timer (FakeClock *fake, guint ms)
{
  for (guint i = 0; i < fake->timers->len; i++)
    if (((Timer *) fake->timers->pdata[i])->ms == ms)
      return TRUE;
  return FALSE;
}

gint64
fake_clock_next_due (FakeClock *fake)
{
  Timer *timer = earliest (fake);

  return timer ? (timer->due - fake_clock_monotonic (fake)) / 1000 : -1;
}
