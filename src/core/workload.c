/* The workload a guest runs: the spec's fields over its image's config
 * (seed 002: Cmd, Env, User, WorkingDir, HealthCheck). Pure. */
#include "workload.h"
#include "spec-private.h"

#include <string.h>

#define NS_PER_SECOND G_GINT64_CONSTANT (1000000000)

/* Seconds, rounded up, within [@min, @max]; @fallback for 0. */
static guint32
seconds_of (gint64 ns, guint32 fallback, guint32 min, guint32 max)
{
  gint64 s;

  if (ns <= 0)
    return fallback;
  s = (ns + NS_PER_SECOND - 1) / NS_PER_SECOND;
  return (guint32) CLAMP (s, (gint64) min, (gint64) max);
}

/* Docker's HEALTHCHECK as the agent runs checks: CMD runs its arguments,
 * CMD-SHELL its one string through /bin/sh, NONE switches it off. */
static MvHealthCheck *
image_health_check (const MvImageHealthcheck *hc)
{
  MvHealthCheck *check;
  guint n = hc->test ? g_strv_length (hc->test) : 0;

  if (n < 2 || (strcmp (hc->test[0], "CMD") != 0 && strcmp (hc->test[0], "CMD-SHELL") != 0))
    return NULL;
  check = mv_health_check_new (MV_HEALTH_CHECK_EXEC);
  if (strcmp (hc->test[0], "CMD") == 0)
    check->exec = g_strdupv (hc->test + 1);
  else
    {
      const char *argv[] = { "/bin/sh", "-c", hc->test[1], NULL };

      check->exec = g_strdupv ((char **) argv);
    }
  check->interval_seconds = seconds_of (hc->interval_ns, MV_HEALTH_DEFAULT_INTERVAL_SECONDS, 1,
                                        MV_HEALTH_INTERVAL_MAX_SECONDS);
  check->timeout_seconds = seconds_of (hc->timeout_ns, MV_HEALTH_DEFAULT_TIMEOUT_SECONDS, 1,
                                       check->interval_seconds);
  check->start_period_seconds = seconds_of (hc->start_period_ns, 0, 0,
                                            MV_HEALTH_START_PERIOD_MAX_SECONDS);
  check->retries = hc->retries > 0 ? (guint32) MIN (hc->retries, MV_HEALTH_RETRIES_MAX)
                                   : MV_HEALTH_DEFAULT_RETRIES;
  return check;
}

static char **
image_command (const MvImageConfig *image)
{
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_auto (GStrv) argv = NULL;

  if (image->entrypoint)
    g_strv_builder_addv (builder, (const char **) image->entrypoint);
  if (image->cmd)
    g_strv_builder_addv (builder, (const char **) image->cmd);
  argv = g_strv_builder_end (builder);
  return argv[0] ? g_steal_pointer (&argv) : NULL;
}

MvSpec *
mv_spec_with_image_defaults (const MvSpec *spec, const MvImageConfig *image)
{
  MvSpec *workload = mv_spec_copy (spec);
  GHashTableIter iter;
  gpointer key, value;

  if (image == NULL)
    return workload;
  /* The spec's command replaces the image's entrypoint and command. */
  if (workload->cmd == NULL)
    workload->cmd = image_command (image);
  if (image->env)
    {
      g_autoptr (GHashTable) env = workload->env;

      workload->env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      for (char **e = image->env; *e; e++)
        {
          const char *eq = strchr (*e, '=');

          if (eq != NULL && eq != *e)
            g_hash_table_insert (workload->env, g_strndup (*e, eq - *e), g_strdup (eq + 1));
        }
      g_hash_table_iter_init (&iter, env);
      while (g_hash_table_iter_next (&iter, &key, &value))
        g_hash_table_insert (workload->env, g_strdup (key), g_strdup (value));
    }
  if (workload->user == NULL && image->user && *image->user)
    workload->user = g_strdup (image->user);
  if (workload->working_dir == NULL && image->working_dir && *image->working_dir)
    workload->working_dir = g_strdup (image->working_dir);
  /* A disabled check in the spec switches the image's off. */
  if (workload->health_check == NULL && image->healthcheck)
    workload->health_check = image_health_check (image->healthcheck);
  return workload;
}
