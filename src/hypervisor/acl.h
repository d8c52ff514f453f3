/* One user's entry in a file's POSIX access ACL, added and taken away
 * again: how a walled-in VMM is let write a disk it does not own, for as
 * long as it runs. Both calls are async-signal-safe (fixed buffers, plain
 * system calls), for the VMM's parent, which takes the entry away when
 * the VMM ends. They hold an flock on @fd while they rewrite the ACL, so
 * that two VMMs given one file do not lose each other's entry. */
#pragma once
#include <sys/types.h>

#define MV_ACL_READ   4
#define MV_ACL_WRITE  2

/* Gives @uid @perm (MV_ACL_READ | MV_ACL_WRITE) on the file open as @fd;
 * 0 or -errno (-EOPNOTSUPP where the file system has no ACLs). */
int mv_acl_grant (int fd, uid_t uid, unsigned perm);
/* Takes @uid's entry away; the file's mode is as before once no named
 * entry is left. 0 (also if there was none) or -errno. */
int mv_acl_revoke (int fd, uid_t uid);
