/* The xattr "system.posix_acl_access": a version word, then entries of
 * tag, permissions and ID, in the order the kernel insists on: USER_OBJ,
 * USER by ID, GROUP_OBJ, GROUP by ID, MASK, OTHER. */
#include "acl.h"

#include <errno.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define ACL_XATTR        "system.posix_acl_access"
#define ACL_VERSION      2
#define ACL_MAX_ENTRIES  512

enum {
  TAG_USER_OBJ  = 0x01,
  TAG_USER      = 0x02,
  TAG_GROUP_OBJ = 0x04,
  TAG_GROUP     = 0x08,
  TAG_MASK      = 0x10,
  TAG_OTHER     = 0x20,
};

#define NO_ID 0xffffffffu

typedef struct {
  uint16_t tag;
  uint16_t perm;
  uint32_t id;
} __attribute__ ((packed)) Entry;

typedef struct {
  uint32_t version;
  Entry    entries[ACL_MAX_ENTRIES];
} __attribute__ ((packed)) Acl;

/* The file's ACL, or the three entries its mode stands for; the number of
 * entries, or -errno. */
static int
read_acl (int fd, Acl *acl)
{
  ssize_t n = fgetxattr (fd, ACL_XATTR, acl, sizeof *acl);
  struct stat st;

  if (n >= (ssize_t) sizeof (uint32_t))
    {
      if (acl->version != ACL_VERSION || (n - sizeof (uint32_t)) % sizeof (Entry) != 0)
        return -EINVAL;
      return (int) ((n - sizeof (uint32_t)) / sizeof (Entry));
    }
  if (n >= 0 || errno != ENODATA)
    return n >= 0 ? -EINVAL : -errno;
  if (fstat (fd, &st) < 0)
    return -errno;
  acl->version = ACL_VERSION;
  acl->entries[0] = (Entry) { TAG_USER_OBJ, (st.st_mode >> 6) & 7, NO_ID };
  acl->entries[1] = (Entry) { TAG_GROUP_OBJ, (st.st_mode >> 3) & 7, NO_ID };
  acl->entries[2] = (Entry) { TAG_OTHER, st.st_mode & 7, NO_ID };
  return 3;
}

static int
entry_order (const Entry *a, const Entry *b)
{
  if (a->tag != b->tag)
    return a->tag < b->tag ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Drops the mask, recomputes it as what the named entries and the group
 * need (as setfacl does), sorts, and writes. */
static int
write_acl (int fd, Acl *acl, int count)
{
  unsigned mask = 0;
  int named = 0, out = 0;

  for (int i = 0; i < count; i++)
    {
      Entry e = acl->entries[i];

      if (e.tag == TAG_MASK)
        continue;
      if (e.tag == TAG_USER || e.tag == TAG_GROUP)
        named++;
      if (e.tag == TAG_USER || e.tag == TAG_GROUP || e.tag == TAG_GROUP_OBJ)
        mask |= e.perm;
      acl->entries[out++] = e;
    }
  if (named > 0)
    acl->entries[out++] = (Entry) { TAG_MASK, mask, NO_ID };
  /* Insertion sort: a handful of entries, and no library call. */
  for (int i = 1; i < out; i++)
    for (int j = i; j > 0 && entry_order (&acl->entries[j - 1], &acl->entries[j]) > 0; j--)
      {
        Entry t = acl->entries[j];
        acl->entries[j] = acl->entries[j - 1];
        acl->entries[j - 1] = t;
      }
  /* With no named entry the kernel folds the ACL back into the mode. */
  if (fsetxattr (fd, ACL_XATTR, acl, sizeof (uint32_t) + out * sizeof (Entry), 0) < 0)
    return -errno;
  return 0;
}

static int
drop_user (Acl *acl, int count, uid_t uid)
{
  int out = 0;

  for (int i = 0; i < count; i++)
    if (acl->entries[i].tag != TAG_USER || acl->entries[i].id != (uint32_t) uid)
      acl->entries[out++] = acl->entries[i];
  return out;
}

static int
edit (int fd, uid_t uid, unsigned perm, int grant)
{
  Acl acl;
  int count, r, before;

  while (flock (fd, LOCK_EX) < 0)
    if (errno != EINTR)
      return -errno;
  count = read_acl (fd, &acl);
  if (count < 0)
    r = count;
  else
    {
      before = count;
      count = drop_user (&acl, count, uid);
      if (grant && count < ACL_MAX_ENTRIES)
        {
          acl.entries[count++] = (Entry) { TAG_USER, perm & 7, (uint32_t) uid };
          r = write_acl (fd, &acl, count);
        }
      else if (grant)
        r = -ENOSPC;
      else
        r = count == before ? 0 : write_acl (fd, &acl, count);
    }
  flock (fd, LOCK_UN);
  return r;
}

int
mv_acl_grant (int fd, uid_t uid, unsigned perm)
{
  return edit (fd, uid, perm, 1);
}

int
mv_acl_revoke (int fd, uid_t uid)
{
  return edit (fd, uid, 0, 0);
}
