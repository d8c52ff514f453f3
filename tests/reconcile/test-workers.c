/* The way back from the reconciler's workers: results handed back
 * together are handled in one dispatch, and what each puts off with
 * mv_reconciler_later() runs after all of them, before anything handed
 * back later. */
#include "reconcile/reconciler-private.h"

typedef struct {
  GString *order;
  gboolean finished;
} Log;

static Log log_;

static void
note (const char *what)
{
  if (log_.order->len)
    g_string_append_c (log_.order, ' ');
  g_string_append (log_.order, what);
}

static gboolean
on_last (gpointer data)
{
  note ("D");
  log_.finished = TRUE;
  return G_SOURCE_REMOVE;
}

static gboolean
on_later_again (gpointer data)
{
  note ("LA2");
  return G_SOURCE_REMOVE;
}

static gboolean
on_later (gpointer data)
{
  note (data);
  if (g_str_equal (data, "LA"))
    mv_reconciler_later (on_later_again, NULL, NULL);
  return G_SOURCE_REMOVE;
}

static void
on_freed (gpointer data)
{
  g_autofree char *what = g_strconcat ("~", data, NULL);

  note (what);
}

static gboolean
on_result (gpointer data)
{
  note (data);
  if (g_str_equal (data, "A"))
    {
      mv_reconciler_later (on_later, "LA", on_freed);
      /* Handed back while the burst is handled: it comes after. */
      mv_reconciler_send (on_last, NULL, NULL);
    }
  else if (g_str_equal (data, "B"))
    mv_reconciler_later (on_later, "LB", NULL);
  return G_SOURCE_REMOVE;
}

static gpointer
hand_back_burst (gpointer data)
{
  mv_reconciler_send (on_result, "A", NULL);
  mv_reconciler_send (on_result, "B", NULL);
  mv_reconciler_send (on_result, "C", NULL);
  return NULL;
}

static void
test_later_after_the_burst (void)
{
  log_.order = g_string_new (NULL);
  log_.finished = FALSE;
  /* The queue belongs to this thread's context from its first use. */
  mv_reconciler_later (on_later, "first", NULL);
  /* The burst is all queued before the loop looks. */
  g_thread_join (g_thread_new ("worker", hand_back_burst, NULL));
  while (!log_.finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpstr (log_.order->str, ==, "first A B C LA ~LA LB LA2 D");
  g_string_free (log_.order, TRUE);
}

static void
test_later_at_once_elsewhere (void)
{
  log_.order = g_string_new (NULL);
  mv_reconciler_later (on_later, "X", on_freed);
  note ("after");
  g_assert_cmpstr (log_.order->str, ==, "X ~X after");
  g_string_free (log_.order, TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/reconcile/workers/later-after-the-burst", test_later_after_the_burst);
  g_test_add_func ("/reconcile/workers/later-at-once-elsewhere", test_later_at_once_elsewhere);
  return g_test_run ();
}
