/* A network namespace of the test process's own, without a name and
 * without NetworkManager: the test unshares it at the start of main, so
 * every device, rule and qdisc it makes goes with the process. A mount
 * namespace comes with it, with a sysfs of its own on /sys: sysfs shows
 * the devices of the namespace that mounted it. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Enters a new network namespace, turns IPv6 off for the devices made
 * in it and sets lo up. Exits with 77 (a skip)
 * when not root. Call first in main, before any thread exists. */
void  mv_test_private_netns_enter (void);

/* Runs the command of the NULL-terminated arguments (first: the program,
 * looked up in PATH) and asserts that it exits with 0; returns its
 * output. */
char *mv_test_cmd_out (const char *program,
                       ...) G_GNUC_NULL_TERMINATED;
#define mv_test_cmd(...) g_free (mv_test_cmd_out (__VA_ARGS__))

/* A counter of /sys/class/net/IFNAME/statistics, read directly. */
guint64 mv_test_sysfs_counter (const char *ifname,
                               const char *name);

/* Waits up to 5 s until the kernel has @ifname up: its operational state
 * is up (or unknown, as a TAP's is). Until then its qdisc is noop and
 * drops everything sent through it. */
void    mv_test_wait_link_up (const char *ifname);

G_END_DECLS
