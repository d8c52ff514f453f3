/* The org.microvmd1.Image objects: one per cached image at
 * /org/microvmd1/image/<encoded digest hex>, and the Manager's image
 * methods (PullImage, PruneImages) that make and remove them. A view of
 * the image store; the blocking store calls run in worker threads. Main
 * thread only. */
#pragma once
#include "service.h"
#include "storage/images.h"

/* @store and @images (the host's, for pull policies) outlive the objects. */
MvImageObjects *mv_image_objects_new (MvBusService *service, MvImageStore *store, MvImages *images);
void            mv_image_objects_free (MvImageObjects *objects);
/* Blocks a little: reads the cache's records, then serves an object for
 * each image found (they are there from the start, not announced). */
int             mv_image_objects_register (MvImageObjects *objects);
/* A machine was defined, changed or removed: which machines use which
 * image is looked at again once this main loop turn is over. */
void            mv_image_objects_machines_changed (MvImageObjects *objects);

/* Manager.PullImage (s reference, s policy) → o, and Manager.PruneImages () → ao. */
int             mv_image_method_pull (sd_bus_message *m, MvImageObjects *objects, sd_bus_error *error);
int             mv_image_method_prune (sd_bus_message *m, MvImageObjects *objects, sd_bus_error *error);

/* The object path of the image with @digest ("sha256:<hex>"). */
char           *mv_image_object_path (const char *digest);
