/* Users and groups of a guest's root (users.h). */
#include "users.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A passwd or group line split on ':'; false if it has fewer than @min
 * fields (a malformed line, skipped). */
static bool
split_line (char *line, char **fields, size_t n, size_t min)
{
  size_t i = 0;
  char *p = line;

  line[strcspn (line, "\n")] = '\0';
  if (line[0] == '#' || line[0] == '\0')
    return false;
  while (i < n)
    {
      fields[i++] = p;
      p = strchr (p, ':');
      if (!p)
        break;
      *p++ = '\0';
    }
  for (size_t j = i; j < n; j++)
    fields[j] = NULL;
  return i >= min;
}

/* A decimal id, the whole of @text; false for anything else. */
static bool
parse_id (const char *text, unsigned long *out)
{
  char *end;

  if (!text || text[0] < '0' || text[0] > '9')
    return false;
  errno = 0;
  *out = strtoul (text, &end, 10);
  return errno == 0 && *end == '\0' && *out < 0xffffffffUL;
}

static FILE *
open_in_root (const char *root, const char *path)
{
  char full[4096];
  size_t len = strlen (root);

  while (len > 0 && root[len - 1] == '/')
    len--;
  if ((size_t) snprintf (full, sizeof full, "%.*s%s", (int) len, root, path) >= sizeof full)
    return NULL;
  return fopen (full, "re");
}

/* Finds the passwd entry named @name, or of uid @uid when @name is NULL. */
static bool
find_passwd (const char *root, const char *name, unsigned long uid, MvUser *user)
{
  FILE *f = open_in_root (root, "/etc/passwd");
  char *line = NULL;
  size_t cap = 0;
  bool found = false;

  if (!f)
    return false;
  while (!found && getline (&line, &cap, f) >= 0)
    {
      char *fields[7];
      unsigned long u, g;

      if (!split_line (line, fields, 7, 7) || !parse_id (fields[2], &u) || !parse_id (fields[3], &g))
        continue;
      if (name ? strcmp (fields[0], name) != 0 : u != uid)
        continue;
      if (strlen (fields[0]) >= sizeof user->name)
        continue;
      user->uid = (uid_t) u;
      user->gid = (gid_t) g;
      strcpy (user->name, fields[0]);
      if (fields[5][0] == '/' && strlen (fields[5]) < sizeof user->home)
        strcpy (user->home, fields[5]);
      found = true;
    }
  free (line);
  fclose (f);
  return found;
}

static bool
member_of (char *members, const char *name)
{
  char *save = NULL;

  for (char *m = strtok_r (members, ",", &save); m; m = strtok_r (NULL, ",", &save))
    if (strcmp (m, name) == 0)
      return true;
  return false;
}

static void
add_group (MvUser *user, gid_t gid)
{
  for (size_t i = 0; i < user->n_groups; i++)
    if (user->groups[i] == gid)
      return;
  if (user->n_groups < MV_USER_GROUPS_MAX)
    user->groups[user->n_groups++] = gid;
}

/* Reads /etc/group once: the gid of @group_name (if asked), and the
 * groups whose member lists name the user. */
static bool
scan_groups (const char *root, const char *group_name, gid_t *group_gid, MvUser *user)
{
  FILE *f = open_in_root (root, "/etc/group");
  char *line = NULL;
  size_t cap = 0;
  bool found = false;

  if (!f)
    return false;
  while (getline (&line, &cap, f) >= 0)
    {
      char *fields[4];
      unsigned long g;

      if (!split_line (line, fields, 4, 3) || !parse_id (fields[2], &g))
        continue;
      if (group_name && !found && strcmp (fields[0], group_name) == 0)
        {
          *group_gid = (gid_t) g;
          found = true;
        }
      if (user->name[0] && fields[3] && member_of (fields[3], user->name))
        add_group (user, (gid_t) g);
    }
  free (line);
  fclose (f);
  return found;
}

bool
mv_user_lookup (const char *root, const char *spec, MvUser *user,
                char *error, size_t error_size)
{
  char user_part[256];
  const char *group_part = NULL;
  const char *colon;
  unsigned long id;
  gid_t group_gid = 0;
  bool numeric_group = false;

  memset (user, 0, sizeof *user);
  strcpy (user->home, "/");
  if (!spec || !spec[0])
    spec = "0";
  colon = strchr (spec, ':');
  if ((size_t) (colon ? colon - spec : (long) strlen (spec)) >= sizeof user_part)
    {
      snprintf (error, error_size, "user: %.64s...: too long", spec);
      return false;
    }
  snprintf (user_part, sizeof user_part, "%.*s", (int) (colon ? colon - spec : (long) strlen (spec)), spec);
  if (colon)
    group_part = colon + 1;
  if (!user_part[0] || (group_part && !group_part[0]))
    {
      snprintf (error, error_size, "user: \"%s\": not user, uid, user:group or uid:gid", spec);
      return false;
    }

  if (parse_id (user_part, &id))
    {
      if (!find_passwd (root, NULL, id, user))
        {
          user->uid = (uid_t) id;
          user->gid = 0;
        }
    }
  else if (!find_passwd (root, user_part, 0, user))
    {
      snprintf (error, error_size, "user: %s: not in the guest's /etc/passwd", user_part);
      return false;
    }

  if (group_part && parse_id (group_part, &id))
    {
      group_gid = (gid_t) id;
      numeric_group = true;
    }
  /* The primary group first, as initgroups() orders them. */
  user->n_groups = 0;
  if (!scan_groups (root, numeric_group ? NULL : group_part, &group_gid, user) &&
      group_part && !numeric_group)
    {
      snprintf (error, error_size, "group: %s: not in the guest's /etc/group", group_part);
      return false;
    }
  if (group_part)
    user->gid = group_gid;
  {
    gid_t member[MV_USER_GROUPS_MAX];
    size_t n = user->n_groups;

    memcpy (member, user->groups, n * sizeof *member);
    user->n_groups = 0;
    add_group (user, user->gid);
    for (size_t i = 0; i < n; i++)
      add_group (user, member[i]);
  }
  return true;
}
