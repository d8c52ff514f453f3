/* Asynchronous authorization of bus calls with polkit. */
#pragma once
#include "bus-util.h"

/* Called on the main thread once @call is authorized and its sender is
 * still connected; @root when the caller is root, who may see everything. */
typedef void (*MvAuthorizedFunc) (sd_bus_message *call, gboolean root, gpointer user_data);

/* How many calls of one sender may wait for their authorization at once;
 * more are refused at once with ResourceExhausted. */
#define MV_POLKIT_PENDING_PER_SENDER_MAX  32

/* Checks that the sender of @call may do @action_id. Root is allowed
 * without asking polkit; anyone else is asked about with the caller's
 * unique bus name as subject and @details (NULL-terminated key, value
 * pairs) for rules and messages. Interaction is allowed only when @call
 * allows it. A sender with MV_POLKIT_PENDING_PER_SENDER_MAX calls waiting
 * already is refused. A denied call is answered here with AccessDenied or
 * InteractiveAuthorizationRequired; a caller that has left the bus gets
 * nothing done. @func runs from the main loop, never before this returns.
 * @destroy frees @user_data in every case. */
void mv_polkit_check (sd_bus_message   *call,
                      const char       *action_id,
                      const char *const *details,
                      MvAuthorizedFunc  func,
                      gpointer          user_data,
                      GDestroyNotify    destroy);

