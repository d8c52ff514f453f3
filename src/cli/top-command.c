/* microvmctl top: a live table of what every machine uses, each frame the
 * rates between two reads of Manager.GetAllStats. On a terminal it
 * redraws until q or Ctrl-C; otherwise it prints --iterations frames one
 * after another. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <glib/gi18n.h>

#include "properties.h"
#include "stats-command.h"
#include "table.h"
#include "terminal-text.h"

#define TOP_HEADER_LINES 3   /* the summary, a blank line and the column names */

static volatile sig_atomic_t quit_signal;

static void
on_quit_signal (int signo)
{
  quit_signal = signo;
}

typedef struct {
  gboolean       interactive;  /* redrawing a terminal */
  gboolean       keys;         /* reading q from a terminal on stdin */
  struct termios saved;
  sigset_t       wait_mask;    /* the mask to wait with: the quit signals let through */
} Screen;

static void
screen_open (Screen *screen)
{
  static const int quit_signals[] = { SIGINT, SIGTERM, SIGHUP };
  struct sigaction action = { .sa_handler = on_quit_signal };
  sigset_t block;

  /* Blocked but while waiting, so a signal cannot slip in between the
   * check of quit_signal and the wait. */
  sigemptyset (&block);
  for (gsize i = 0; i < G_N_ELEMENTS (quit_signals); i++)
    {
      sigaddset (&block, quit_signals[i]);
      sigaction (quit_signals[i], &action, NULL);
    }
  sigprocmask (SIG_BLOCK, &block, &screen->wait_mask);
  for (gsize i = 0; i < G_N_ELEMENTS (quit_signals); i++)
    sigdelset (&screen->wait_mask, quit_signals[i]);

  if (!screen->interactive)
    return;
  if (isatty (STDIN_FILENO) && tcgetattr (STDIN_FILENO, &screen->saved) == 0)
    {
      struct termios raw = screen->saved;

      raw.c_lflag &= ~(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      screen->keys = tcsetattr (STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  /* The alternate screen, without a cursor. */
  fputs ("\033[?1049h\033[?25l", stdout);
}

static void
screen_close (Screen *screen)
{
  if (screen->keys)
    tcsetattr (STDIN_FILENO, TCSANOW, &screen->saved);
  if (screen->interactive)
    fputs ("\033[?25h\033[?1049l", stdout);
  fflush (stdout);
}

/* Waits up to INTERVAL_MS; FALSE once the user asked to quit. */
static gboolean
screen_wait (Screen *screen, int interval_ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) interval_ms * 1000;

  for (;;)
    {
      struct pollfd fd = { .fd = STDIN_FILENO, .events = POLLIN };
      gint64 left = end - g_get_monotonic_time ();
      struct timespec timeout;
      int n;

      if (quit_signal)
        return FALSE;
      if (left <= 0)
        return TRUE;
      timeout.tv_sec = left / G_USEC_PER_SEC;
      timeout.tv_nsec = (left % G_USEC_PER_SEC) * 1000;
      n = ppoll (&fd, screen->keys ? 1 : 0, &timeout, &screen->wait_mask);
      if (n > 0)
        {
          char keys[64];
          ssize_t got = read (STDIN_FILENO, keys, sizeof keys);

          if (got <= 0)
            screen->keys = FALSE;   /* no more input: wait on the clock alone */
          for (ssize_t i = 0; i < got; i++)
            if (keys[i] == 'q' || keys[i] == 'Q')
              return FALSE;
        }
    }
}

static char *
format_rate (double bytes_per_second)
{
  g_autofree char *bytes = mv_format_bytes ((guint64) (bytes_per_second + 0.5));

  return g_strdup_printf ("%s/s", bytes);
}

/* The rows' rates from the samples of the frame before (ID → MvTopRow). */
static void
compute_rates (GPtrArray *rows, GHashTable *before)
{
  for (guint i = 0; i < rows->len; i++)
    {
      MvTopRow *row = rows->pdata[i];
      MvTopRow *old = g_hash_table_lookup (before, row->id);

      row->has_rates = old && mv_stats_rates (&old->sample, &row->sample, &row->rates);
    }
}

static void
print_frame (Screen *screen, GPtrArray *rows)
{
  g_autoptr (MvTable) table = mv_table_new ("NAME", "STATE", "CPU", "MEMORY", "DISK-READ",
                                            "DISK-WRITE", "NET-RX", "NET-TX", NULL);
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *clock = g_date_time_format (now, "%H:%M:%S");
  guint shown = rows->len;
  double total = 0;

  for (guint column = 2; column < 8; column++)
    mv_table_set_align_right (table, column);
  for (guint i = 0; i < rows->len; i++)
    {
      MvTopRow *row = rows->pdata[i];

      if (row->has_rates)
        total += row->rates.cpu_percent;
    }

  if (screen->interactive)
    {
      struct winsize size;

      /* As many rows as the terminal has lines for. */
      if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > TOP_HEADER_LINES)
        shown = MIN (shown, (guint) size.ws_row - TOP_HEADER_LINES);
      fputs ("\033[H\033[2J", stdout);
    }
  printf (_("%s  %u machines with a VMM, CPU %.1f%%%s\n"), clock, rows->len, total,
          screen->interactive ? _("  (q to quit)") : "");
  if (!screen->interactive || rows->len > 0)
    printf ("\n");

  for (guint i = 0; i < shown; i++)
    {
      MvTopRow *row = rows->pdata[i];
      const MvStatsRates *rates = &row->rates;
      gboolean network = row->has_rates && rates->has_network;
      g_autofree char *name = mv_terminal_text (row->name, -1);
      g_autofree char *state = mv_terminal_text (row->state, -1);
      g_autofree char *cpu = row->has_rates ? g_strdup_printf ("%.1f%%", rates->cpu_percent) : NULL;
      g_autofree char *memory = mv_format_bytes (row->sample.resident_memory_bytes);
      g_autofree char *read = row->has_rates ? format_rate (rates->disk_read_per_sec) : NULL;
      g_autofree char *write = row->has_rates ? format_rate (rates->disk_written_per_sec) : NULL;
      g_autofree char *rx = network ? format_rate (rates->network_receive_per_sec) : NULL;
      g_autofree char *tx = network ? format_rate (rates->network_transmit_per_sec) : NULL;

      mv_table_add_row (table, name, state, cpu, memory, read, write, rx, tx);
    }
  if (rows->len > 0)
    mv_table_print (table, stdout);
  fflush (stdout);
}

/* ID → row, for the next frame's rates. */
static GHashTable *
index_rows (GPtrArray *rows)
{
  GHashTable *index = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < rows->len; i++)
    g_hash_table_insert (index, ((MvTopRow *) rows->pdata[i])->id, rows->pdata[i]);
  return index;
}

int
mv_cmd_top (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_autoptr (GPtrArray) before = g_ptr_array_new_with_free_func (mv_top_row_free);
  g_auto (sd_bus_error) error = SD_BUS_ERROR_NULL;
  Screen screen = { .interactive = isatty (STDOUT_FILENO) };
  guint64 iterations = screen.interactive ? 0 : 1;   /* 0: until told to quit */
  guint64 interval = 1;
  int r;

  if (ctl->json)
    return mv_usage_error (_("--json does not apply to 'top'; 'stats --json' reads the same"));
  if (ctl->interval && !g_ascii_string_to_unsigned (ctl->interval, 10, 1, MV_TOP_INTERVAL_MAX,
                                                    &interval, NULL))
    return mv_usage_error (_("invalid --interval '%s': expected whole seconds from 1 to %d"),
                           ctl->interval, MV_TOP_INTERVAL_MAX);
  if (ctl->iterations && !g_ascii_string_to_unsigned (ctl->iterations, 10, 1,
                                                      MV_TOP_ITERATIONS_MAX, &iterations, NULL))
    return mv_usage_error (_("invalid --iterations '%s': expected a count from 1 to %d"),
                           ctl->iterations, MV_TOP_ITERATIONS_MAX);

  if ((r = mv_read_all_stats (ctl, before, &error)) < 0)
    return mv_fail_bus (&error, r);

  screen_open (&screen);
  if (screen.interactive)
    {
      /* Something at once; the rates come with the next read. */
      g_ptr_array_sort (before, mv_top_row_compare);
      print_frame (&screen, before);
    }
  for (guint64 frame = 0; iterations == 0 || frame < iterations; frame++)
    {
      g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func (mv_top_row_free);
      g_autoptr (GHashTable) index = NULL;

      if (!screen_wait (&screen, (int) interval * 1000))
        break;
      if ((r = mv_read_all_stats (ctl, rows, &error)) < 0)
        break;
      index = index_rows (before);
      compute_rates (rows, index);
      g_ptr_array_sort (rows, mv_top_row_compare);
      if (!screen.interactive && frame > 0)
        printf ("\n");
      print_frame (&screen, rows);
      g_clear_pointer (&index, g_hash_table_unref);
      g_ptr_array_unref (before);
      before = g_steal_pointer (&rows);
    }
  screen_close (&screen);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}
