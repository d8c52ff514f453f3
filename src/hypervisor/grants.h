/* What a walled-in VMM was given for as long as it runs (jail.h), in
 * plain memory: the files with an ACL entry of its UID, the TAP devices
 * its UID owns, and its runtime directory. Whoever outlives the VMM
 * takes them back: its parent (vmm-parent.h), or the jail itself if no
 * VMM ever ran. */
#pragma once
#include <glib.h>
#include <sys/types.h>

/* IFNAMSIZ, with its terminating NUL. */
#define MV_TAP_NAME_SIZE  16

typedef struct {
  char name[MV_TAP_NAME_SIZE];
} MvTapName;

typedef struct {
  uid_t            uid;
  int              runtime_fd;   /* -1: none to give back */
  const int       *granted;      /* descriptors of files with an entry of @uid */
  guint            n_granted;
  const MvTapName *taps;         /* TAP devices @uid owns */
  guint            n_taps;
} MvGrants;

/* Makes @uid the owner of the TAP device @name (TUNSETOWNER): 0 or an
 * errno. Plain system calls. */
int   mv_tap_set_owner (const char *name, uid_t uid);

/* Takes every entry back, gives the TAPs and the runtime directory back to
 * root (0700). Async-signal-safe. */
void  mv_grants_release (const MvGrants *grants);
