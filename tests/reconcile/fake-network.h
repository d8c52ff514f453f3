/* A Network that hands out addresses from memory and logs what it gives
 * back; its next release can be scripted to fail. */
#pragma once
#include "core/host/network.h"
#include "fake-log.h"

typedef struct _FakeNetwork FakeNetwork;

FakeNetwork *fake_network_new (FakeLog *log);
void         fake_network_free (FakeNetwork *fake);
MvNetwork   *fake_network_iface (FakeNetwork *fake);
void         fake_network_fail_next_release (FakeNetwork *fake, const char *message);
/* Whether @machine_id holds an attachment. */
/* Its guest has received @bytes more from its network (counters()). */
void         fake_network_add_received (FakeNetwork *fake, const char *machine_id, guint64 bytes);
gboolean     fake_network_attached (FakeNetwork *fake, const char *machine_id);
