/* One ordered record of the host calls every fake saw, from any thread, so
 * that a test can tell what happened in which order; and the contract
 * breaches the fakes noticed (a blocking call on the main thread, two calls
 * for one machine at once), which the fixture fails the test on. */
#pragma once
#include <glib.h>

typedef struct _FakeLog FakeLog;

FakeLog *fake_log_new (void);
void     fake_log_free (FakeLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FakeLog, fake_log_free)

/* Entries read "<layer>.<call> <machine id>[ <details>]". Adding one wakes
 * the main context, so that a test waiting there notices a worker's call. */
void     fake_log_add (FakeLog *log, const char *format, ...) G_GNUC_PRINTF (2, 3);
guint    fake_log_len (FakeLog *log);
/* A copy of entry @index. */
char    *fake_log_get (FakeLog *log, guint index);
/* The first entry at or after @from that is @call (the entry itself or the
 * entry followed by a space and details), or -1. */
int      fake_log_find (FakeLog *log, guint from, const char *call);
/* The last such entry before @before, or -1. */
int      fake_log_rfind (FakeLog *log, int before, const char *call);
guint    fake_log_count (FakeLog *log, const char *call);
/* Every entry, one a line, for failure messages. */
char    *fake_log_dump (FakeLog *log);

void     fake_log_breach (FakeLog *log, const char *format, ...) G_GNUC_PRINTF (2, 3);
/* The breaches so far, one a line, or NULL. */
char    *fake_log_breaches (FakeLog *log);

/* The thread the tests and the reconciler's callbacks run on. */
void     fake_set_main_thread (void);
gboolean fake_on_main_thread (void);

/* Fails the test unless @calls (NULL-terminated) appear in @log in this
 * order, each after the one before. */
#define fake_assert_order(log, ...) fake_assert_order_impl (log, __FILE__, __LINE__, __VA_ARGS__, NULL)
void     fake_assert_order_impl (FakeLog *log, const char *file, int line, ...);

/* Holds a worker inside one kind of host call until the test lets it go,
 * so that a test can look at the machine while the call is under way. */
typedef struct {
  GMutex   lock;
  GCond    cond;
  int      armed;       /* the call to hold next, or -1 */
  gboolean holding;     /* a worker waits inside it */
} FakeHold;

void     fake_hold_init (FakeHold *hold);
void     fake_hold_clear (FakeHold *hold);
void     fake_hold_arm (FakeHold *hold, int call);
/* Called by a fake at the start of @call: waits there if it is armed. */
void     fake_hold_point (FakeHold *hold, int call);
gboolean fake_hold_holding (FakeHold *hold);
void     fake_hold_release (FakeHold *hold);
