/* ListMachines' answer kept ready: every machine's ID, name, state (as
 * it is shown: mv_machine_shown_status()) and path in name order, packed in two arrays that a listing reads straight
 * through. Built on the first listing after a machine came, went or was
 * renamed; a state change is written into its entry in place. */
#pragma once
#include "service.h"

typedef struct _MvListing MvListing;

MvListing *mv_listing_new (void);
void       mv_listing_free (MvListing *listing);
/* A machine came, went or was renamed: the next listing builds afresh. */
void       mv_listing_invalidate (MvListing *listing);
/* @view's machine has a new state, or what it shows changed. */
void       mv_listing_state_changed (MvListing *listing, MvMachineView *view);
/* Appends the a(ssso) of every machine to @reply. */
int        mv_listing_append (MvListing *listing, MvBusService *service, sd_bus_message *reply);
