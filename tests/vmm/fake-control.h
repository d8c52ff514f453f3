/* Faults a test sets in a running test VMM: words in the file
 * fake-vmm.control beside the API socket (the machine's runtime
 * directory), in the kernel command line's syntax, read again at each
 * request they concern, so that a test arms a VMM by writing the file.
 *
 *   fail-snapshot       the snapshot request fails as on a full disk
 *                       (ENOSPC), answered the way the VMM reports it
 *   stall-probe[=MS]    the first probe request after fail-snapshot
 *                       failed one (Cloud Hypervisor's GET vm.info,
 *                       Firecracker's GET /) is taken and answered MS ms
 *                       later
 *                       (default 10000), as by a VMM that hangs. The file
 *                       fake-vmm.stall-begin is written as the stall
 *                       begins, fake-vmm.stall-end just before the answer
 *                       goes. Other connections are served meanwhile.
 *   log-requests        every request that carries a body is appended to
 *                       fake-vmm.requests beside it, one line each:
 *                       METHOD PATH BODY, the body as it came, so that a
 *                       test reads what the backend sent on the wire
 *
 * Test code only. */
#pragma once
#include "fake-http.h"

#define FAKE_CONTROL_FILE        "fake-vmm.control"
#define FAKE_CONTROL_STALL_BEGIN "fake-vmm.stall-begin"
#define FAKE_CONTROL_STALL_END   "fake-vmm.stall-end"
#define FAKE_CONTROL_REQUEST_LOG "fake-vmm.requests"

typedef struct {
  char     *dir;
  gboolean  snapshot_failed;   /* and no probe has stalled since */
} FakeControl;

void fake_control_init (FakeControl *control, const char *api_socket);
void fake_control_clear (FakeControl *control);

/* The errno the snapshot is to fail with, 0 for none. */
int  fake_control_snapshot_error (FakeControl *control);
/* For the probe request's response once it is filled in: holds it back
 * if a snapshot failed and stall-probe is set. */
void fake_control_probe (FakeControl *control, FakeResponse *response);
/* Called for each request as it comes: logs it if log-requests is set. */
void fake_control_request (FakeControl *control, const FakeRequest *request);
