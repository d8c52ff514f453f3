/* A network namespace of the test's own with NetworkManager running in it
 * on the test environment's private system bus (test-env.h).
 *
 * NetworkManager runs as `ip netns exec NS sh -c ...`: in the namespace's
 * own mount namespace it gets an empty tmpfs on /run and on
 * /var/lib/NetworkManager, so its pid file, in-memory profiles, leases and
 * state stay out of the machine's, and a configuration of the test's:
 * keyfile plugin with the keyfile path in the test directory, no default
 * connections, DNS, hostname and firewall left alone, loopback unmanaged,
 * logging at INFO to NetworkManager.log in the test directory. Each start
 * gets a fresh /run, so profiles added in memory do not survive a restart
 * of NetworkManager here (they do on a real host).
 *
 * The test process stays in its own namespace: libnm and nmcli speak to
 * NetworkManager only over D-Bus, and the bus socket is a file; commands
 * that look at devices run in the namespace (mv_test_netns_run()).
 *
 * The namespace is named mvtest-PID-N. Free stops NetworkManager and
 * deletes the namespace, which deletes every virtual device in it; a new
 * namespace first deletes those of test processes that are gone. Every
 * function asserts. */
#pragma once

#include "test-env.h"

G_BEGIN_DECLS

#define MV_TEST_NM_BUS_NAME "org.freedesktop.NetworkManager"

typedef struct _MvTestNetns MvTestNetns;

/* Creates the namespace and starts NetworkManager in it. */
MvTestNetns *mv_test_netns_new        (MvTestEnv   *env);
void         mv_test_netns_free       (MvTestNetns *netns);

const char  *mv_test_netns_name       (MvTestNetns *netns);
const char  *mv_test_netns_keyfile_dir (MvTestNetns *netns);

/* Starts NetworkManager and waits up to 20 s until it owns its name. */
void         mv_test_netns_start_nm   (MvTestNetns *netns);
/* Sends @signo, waits for NetworkManager to exit and for its name to
 * leave the bus. */
void         mv_test_netns_stop_nm    (MvTestNetns *netns,
                                       int          signo);
gboolean     mv_test_netns_nm_running (MvTestNetns *netns);

/* Runs @argv inside the namespace (ip netns exec) and returns its exit
 * status, like mv_test_env_run(). */
int          mv_test_netns_run        (MvTestNetns        *netns,
                                       const char *const  *argv,
                                       char              **out,
                                       char              **err);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvTestNetns, mv_test_netns_free)

G_END_DECLS
