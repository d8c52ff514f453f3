#include "restart.h"

MvEndOutcome
mv_restart_decide (const MvSpec *spec, guint32 restart_count, gboolean clean, gint64 now,
                   gint64 backoff_us, gint64 *restart_at)
{
  gboolean restart = FALSE;
  gint64 delay = MAX (backoff_us, 1);

  switch (spec->restart_mode)
    {
    case MV_RESTART_NO:
      break;
    case MV_RESTART_ON_FAILURE:
      restart = !clean && (spec->restart_max_retries == 0 ||
                           restart_count < spec->restart_max_retries);
      break;
    case MV_RESTART_UNLESS_STOPPED:
    case MV_RESTART_ALWAYS:
      restart = TRUE;
      break;
    }

  if (!restart)
    return clean ? MV_END_STOPPED : MV_END_FAILED;

  for (guint32 i = 0; i < restart_count && delay < MV_RESTART_BACKOFF_MAX_US; i++)
    delay *= 2;
  *restart_at = now + MIN (delay, MV_RESTART_BACKOFF_MAX_US);
  return MV_END_RESTART;
}

gboolean
mv_restart_starts_on_boot (const MvSpec *spec, gboolean stopped_by_user)
{
  switch (spec->restart_mode)
    {
    case MV_RESTART_ALWAYS:
      return TRUE;
    case MV_RESTART_UNLESS_STOPPED:
      return !stopped_by_user;
    case MV_RESTART_NO:
    case MV_RESTART_ON_FAILURE:
      break;
    }
  return FALSE;
}
