/* The workload a guest runs: what its spec says, over its image's config
 * (seed 002). Pure. */
#pragma once
#include "image-config.h"
#include "spec.h"

/* A copy of @spec with the image's defaults where the spec sets nothing:
 * the image's entrypoint and command as cmd, its Env under the spec's
 * env, its User, WorkingDir and HEALTHCHECK. @image may be NULL. */
MvSpec *mv_spec_with_image_defaults (const MvSpec *spec, const MvImageConfig *image);
