#include "volumes.h"
#include "core/errors.h"

gboolean
mv_volumes_check_spec (MvVolumes *volumes, const MvSpec *spec, GError **error)
{
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = g_ptr_array_index (spec->mounts, i);
      g_autofree char *path = NULL;
      g_autoptr (GError) local = NULL;

      if (mount->type != MV_MOUNT_VOLUME)
        continue;
      if (volumes == NULL)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                             "mounts[%u].source: this host keeps no volumes", i);
      path = volumes->disk_path (volumes, mount->source, &local);
      if (path == NULL)
        return mv_error_set (error, local->domain == MV_ERROR ? local->code : MV_ERROR_FAILED,
                             "mounts[%u].source: %s", i, local->message);
    }
  return TRUE;
}
