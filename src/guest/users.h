/* Users and groups of a guest's root, read from its /etc/passwd and
 * /etc/group: how the agent turns a USER field ("user", "uid",
 * "user:group", "uid:gid") into the ids a process runs as.
 *
 * Plain C with the C library only (the agent is a static program and
 * cannot use NSS); the files are parsed here, not through getpwnam(). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Supplementary groups kept for one user; more are not set. */
#define MV_USER_GROUPS_MAX 64

typedef struct {
  uid_t  uid;
  gid_t  gid;
  char   name[64];     /* empty for a uid that is not in passwd */
  char   home[256];    /* "/" when passwd has none */
  size_t n_groups;
  gid_t  groups[MV_USER_GROUPS_MAX];  /* gid first, then /etc/group's member lists */
} MvUser;

/* Looks @spec up under @root (a directory: "/" or a root being set up).
 * An empty or NULL @spec is root. Numbers that passwd or group do not
 * list are taken as they are, with home "/" and, for a uid alone, gid 0.
 * On failure returns false with a message in @error ("user: alice: not
 * in the guest's /etc/passwd"). */
bool mv_user_lookup (const char *root, const char *spec, MvUser *user,
                     char *error, size_t error_size);
