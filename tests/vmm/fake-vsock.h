/* The Unix-socket face of the virtio-vsock device Firecracker and Cloud
 * Hypervisor share ("hybrid vsock"): a host connects to the device's
 * socket and says "CONNECT <port>\n"; when something listens on that guest
 * port the device answers "OK <hostport>\n" and the stream is the guest's.
 * A connection the guest opens to host port P is made to <socket>_<P>. */
#pragma once
#include <glib.h>

#include "fake-guest.h"
#include "fake-vmm.h"

FakeVsock *fake_vsock_new (const char *uds_path, guint32 cid, FakeLog *log);
/* Binds the socket (an existing path fails); 0 or an errno. */
int        fake_vsock_bind (FakeVsock *vsock);
/* Starts accepting, with @guest answering. */
void       fake_vsock_start (FakeVsock *vsock, FakeGuest *guest);
/* Closes the socket, removes it, and drops every connection. */
void       fake_vsock_free (FakeVsock *vsock);

/* Drops every open connection, as a device reset does. */
void       fake_vsock_reset_all (FakeVsock *vsock);
/* Drops the connections the guest serves. */
void       fake_vsock_drop_guest_connections (FakeVsock *vsock);
/* Moves on whatever waits for the guest (handshakes, buffered input). */
void       fake_vsock_pump (FakeVsock *vsock);

/* A connection the guest opens to the host's port @port: a connected fd,
 * or -1 with *errnum set. */
int        fake_vsock_connect_to_host (FakeVsock *vsock, guint32 port, int *errnum);
/* The guest serves @service on @fd from now on. */
void       fake_vsock_adopt (FakeVsock *vsock, int fd, FakeGuestService service);
