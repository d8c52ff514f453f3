/* Rate limits with traffic control. See rate-limit.h.
 *
 * This runs the tc and ip programs of iproute2 (argv arrays, never a
 * shell) rather than speaking rtnetlink itself: tc turns a rate and a
 * burst into tbf's rate table and buffer in the packet scheduler's ticks
 * and knows each qdisc's and action's attributes on every kernel, and the
 * commands here are the ones an administrator reads and repeats by hand.
 * A process per step costs nothing for a step taken once per machine
 * start. */
#include "rate-limit.h"

#include "core/errors.h"
#include "nm.h"

#include <json-glib/json-glib.h>

#define SYS_CLASS_NET    "/sys/class/net"
#define IFB_HASH_DIGITS  10
/* An Ethernet header and a VLAN tag around a frame of the MTU. */
#define FRAME_OVERHEAD   18
#define DEFAULT_MTU      1500
/* A hundredth of a second's worth of bytes per burst. */
#define BURST_DIVISOR    100

char *
mv_rate_limit_ifb_name (const char *ifname)
{
  g_autofree char *hash = g_compute_checksum_for_string (G_CHECKSUM_SHA256, ifname, -1);

  return g_strdup_printf (MV_RATE_LIMIT_IFB_PREFIX "%.*s", IFB_HASH_DIGITS, hash);
}

static gboolean
interface_exists (const char *ifname)
{
  g_autofree char *dir = g_build_filename (SYS_CLASS_NET, ifname, NULL);

  return g_file_test (dir, G_FILE_TEST_IS_DIR);
}

static guint64
interface_mtu (const char *ifname)
{
  g_autofree char *path = g_build_filename (SYS_CLASS_NET, ifname, "mtu", NULL);
  g_autofree char *text = NULL;
  guint64 mtu;

  if (!g_file_get_contents (path, &text, NULL, NULL)
      || !g_ascii_string_to_unsigned (g_strchomp (text), 10, 1, G_MAXUINT32, &mtu, NULL))
    return DEFAULT_MTU;
  return mtu;
}

/* Runs @argv; MV_ERROR_FAILED with the command and what it said. */
static gboolean
run (const char *const  *argv,
     char              **out,
     GError            **error)
{
  g_autofree char *command = g_strjoinv (" ", (char **) argv);
  g_autofree char *err = NULL;
  g_autoptr(GError) local_error = NULL;
  int wait_status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, out, &err,
                     &wait_status, &local_error))
    return mv_error_set (error, MV_ERROR_FAILED, "cannot run %s: %s", argv[0],
                         local_error->message);
  if (!g_spawn_check_wait_status (wait_status, &local_error))
    return mv_error_set (error, MV_ERROR_FAILED, "`%s` failed: %s", command,
                         err != NULL && *err != '\0' ? g_strstrip (err) : local_error->message);
  return TRUE;
}

/* What qdiscs @ifname has that a limit here would have made. */
typedef struct {
  gboolean root_tbf;
  gboolean ingress;
} Qdiscs;

static gboolean
read_qdiscs (const char  *ifname,
             Qdiscs      *qdiscs,
             GError     **error)
{
  const char *argv[] = { "tc", "-j", "qdisc", "show", "dev", ifname, NULL };
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local_error = NULL;
  g_autofree char *out = NULL;
  JsonNode *root;
  JsonArray *list;

  *qdiscs = (Qdiscs) { FALSE, FALSE };
  if (!run (argv, &out, error))
    return FALSE;
  if (!json_parser_load_from_data (parser, out, -1, &local_error))
    return mv_error_set (error, MV_ERROR_FAILED, "cannot read the qdiscs of %s: %s", ifname,
                         local_error->message);
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_ARRAY (root))
    return mv_error_set (error, MV_ERROR_FAILED, "cannot read the qdiscs of %s: not a list",
                         ifname);
  list = json_node_get_array (root);
  for (guint i = 0; i < json_array_get_length (list); i++)
    {
      JsonNode *node = json_array_get_element (list, i);
      JsonObject *qdisc;
      const char *kind;

      if (!JSON_NODE_HOLDS_OBJECT (node))
        continue;
      qdisc = json_node_get_object (node);
      kind = json_object_get_string_member_with_default (qdisc, "kind", "");
      if (g_str_equal (kind, "tbf")
          && json_object_get_boolean_member_with_default (qdisc, "root", FALSE))
        qdiscs->root_tbf = TRUE;
      else if (g_str_equal (kind, "ingress"))
        qdiscs->ingress = TRUE;
    }
  return TRUE;
}

/* Makes @ifname's root qdisc a tbf of @bps bytes/s. */
static gboolean
replace_tbf (const char  *ifname,
             guint64      bps,
             GError     **error)
{
  guint64 burst = MAX (bps / BURST_DIVISOR, interface_mtu (ifname) + FRAME_OVERHEAD);
  g_autofree char *rate = g_strdup_printf ("%" G_GUINT64_FORMAT "bit", bps * 8);
  g_autofree char *burst_text = g_strdup_printf ("%" G_GUINT64_FORMAT, burst);
  g_autofree char *latency = g_strdup_printf ("%dms", MV_RATE_LIMIT_LATENCY_MS);
  const char *argv[] = { "tc", "qdisc", "replace", "dev", ifname, "root", "tbf",
                         "rate", rate, "burst", burst_text, "latency", latency, NULL };

  return run (argv, NULL, error);
}

static gboolean
delete_root (const char  *ifname,
             GError     **error)
{
  const char *argv[] = { "tc", "qdisc", "del", "dev", ifname, "root", NULL };

  return run (argv, NULL, error);
}

static gboolean
limit_download (const char  *ifname,
                guint64      bps,
                GError     **error)
{
  Qdiscs qdiscs;

  if (bps > 0)
    return replace_tbf (ifname, bps, error);
  if (!read_qdiscs (ifname, &qdiscs, error))
    return FALSE;
  return !qdiscs.root_tbf || delete_root (ifname, error);
}

static gboolean
ensure_ifb (const char  *ifb,
            guint64      mtu,
            GError     **error)
{
  g_autofree char *mtu_text = g_strdup_printf ("%" G_GUINT64_FORMAT, mtu);
  const char *add[] = { "ip", "link", "add", "name", ifb, "type", "ifb", NULL };
  const char *up[] = { "ip", "link", "set", "dev", ifb, "mtu", mtu_text, "up", NULL };

  if (!interface_exists (ifb) && !run (add, NULL, error))
    return FALSE;
  return run (up, NULL, error);
}

static gboolean
remove_ifb (const char  *ifb,
            GError     **error)
{
  const char *argv[] = { "ip", "link", "del", "dev", ifb, NULL };

  return !interface_exists (ifb) || run (argv, NULL, error);
}

static gboolean
limit_upload (const char  *ifname,
              guint64      bps,
              GError     **error)
{
  g_autofree char *ifb = mv_rate_limit_ifb_name (ifname);
  const char *ingress[] = { "tc", "qdisc", "replace", "dev", ifname, "handle", "ffff:",
                            "ingress", NULL };
  /* One filter with a fixed handle, so that a replace finds it again. */
  const char *redirect[] = { "tc", "filter", "replace", "dev", ifname, "parent", "ffff:",
                             "protocol", "all", "prio", "1", "handle", "800::800",
                             "u32", "match", "u32", "0", "0",
                             "action", "mirred", "egress", "redirect", "dev", ifb, NULL };
  const char *no_ingress[] = { "tc", "qdisc", "del", "dev", ifname, "ingress", NULL };
  Qdiscs qdiscs;

  if (bps > 0)
    {
      /* The IFB shapes before anything is sent to it. */
      return ensure_ifb (ifb, interface_mtu (ifname), error)
             && replace_tbf (ifb, bps, error)
             && run (ingress, NULL, error)
             && run (redirect, NULL, error);
    }

  if (interface_exists (ifname))
    {
      if (!read_qdiscs (ifname, &qdiscs, error))
        return FALSE;
      if (qdiscs.ingress && !run (no_ingress, NULL, error))
        return FALSE;
    }
  return remove_ifb (ifb, error);
}

static gboolean
check_rate (const char  *what,
            guint64      bps,
            GError     **error)
{
  if (bps != 0 && (bps < MV_RATE_LIMIT_MIN_BPS || bps > MV_RATE_LIMIT_MAX_BPS))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s limit %" G_GUINT64_FORMAT " bytes/s is out of range (0 for none, or "
                         "%u to %" G_GUINT64_FORMAT ")", what, bps, MV_RATE_LIMIT_MIN_BPS,
                         MV_RATE_LIMIT_MAX_BPS);
  return TRUE;
}

gboolean
mv_rate_limit_apply (const char  *ifname,
                     guint64      download_bps,
                     guint64      upload_bps,
                     GError     **error)
{
  if (!mv_nm_check_ifname (ifname, error)
      || !check_rate ("download", download_bps, error)
      || !check_rate ("upload", upload_bps, error))
    return FALSE;

  if (!interface_exists (ifname))
    {
      if (download_bps != 0 || upload_bps != 0)
        return mv_error_set (error, MV_ERROR_NOT_FOUND, "there is no network interface %s",
                             ifname);
      return limit_upload (ifname, 0, error);
    }
  return limit_download (ifname, download_bps, error)
         && limit_upload (ifname, upload_bps, error);
}
