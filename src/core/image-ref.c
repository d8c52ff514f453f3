#include "image-ref.h"
#include "core/errors.h"

#include <gio/gio.h>
#include <string.h>

void
mv_image_ref_free (MvImageRef *ref)
{
  if (ref == NULL)
    return;
  g_free (ref->text);
  g_free (ref->host);
  g_free (ref->repository);
  g_free (ref->tag);
  g_free (ref->digest);
  g_free (ref->path);
  g_free (ref->url);
  g_free (ref);
}

gboolean
mv_image_digest_is_valid (const char *digest)
{
  if (digest == NULL || !g_str_has_prefix (digest, "sha256:") || strlen (digest) != 7 + 64)
    return FALSE;
  for (const char *p = digest + 7; *p; p++)
    if (!g_ascii_isdigit (*p) && !(*p >= 'a' && *p <= 'f'))
      return FALSE;
  return TRUE;
}

char *
mv_url_strip_query (const char *url)
{
  return g_strndup (url, strcspn (url, "?#"));
}

static gboolean
invalid (GError **error, const char *text, const char *why)
{
  g_autofree char *shown = g_strndup (text, 80);

  return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "image: \"%s\"%s is not a reference: %s",
                       shown, strlen (text) > 80 ? "..." : "", why);
}

/* A tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. */
static gboolean
tag_is_valid (const char *tag)
{
  gsize len = strlen (tag);

  if (len == 0 || len > MV_IMAGE_TAG_MAX || !(g_ascii_isalnum (tag[0]) || tag[0] == '_'))
    return FALSE;
  for (const char *p = tag; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '_' && *p != '.' && *p != '-')
      return FALSE;
  return TRUE;
}

/* Repository components: lowercase letters and digits, separated inside a
 * component by one '.', '_' or '-' (or "__"), components by '/'. */
static gboolean
repository_is_valid (const char *repo)
{
  g_auto (GStrv) parts = g_strsplit (repo, "/", -1);

  if (*repo == '\0')
    return FALSE;
  for (char **part = parts; *part; part++)
    {
      const char *p = *part;
      gsize len = strlen (p);

      if (len == 0 || !g_ascii_isalnum (p[0]) || !g_ascii_isalnum (p[len - 1]))
        return FALSE;
      for (gsize i = 0; i < len; i++)
        {
          if (g_ascii_isdigit (p[i]) || (p[i] >= 'a' && p[i] <= 'z'))
            continue;
          if (p[i] != '.' && p[i] != '_' && p[i] != '-')
            return FALSE;
          if (!g_ascii_isalnum (p[i + 1]) && !(p[i] == '_' && p[i + 1] == '_' && g_ascii_isalnum (p[i + 2])))
            return FALSE;
          if (p[i + 1] == '_')
            i++;
        }
    }
  return TRUE;
}

/* Splits "host[:port]" or "[v6]:port" into the bare host and checks both.
 * Returns the bare host ("::1" for "[::1]"). */
static char *
split_host (const char *hostport, GError **error, const char *text)
{
  g_autofree char *host = NULL;
  const char *port = NULL;

  if (hostport[0] == '[')
    {
      const char *end = strchr (hostport, ']');
      g_autoptr (GInetAddress) addr = NULL;

      if (end == NULL)
        return invalid (error, text, "an IPv6 host has no closing ']'"), NULL;
      host = g_strndup (hostport + 1, end - hostport - 1);
      addr = g_inet_address_new_from_string (host);
      if (addr == NULL || g_inet_address_get_family (addr) != G_SOCKET_FAMILY_IPV6)
        return invalid (error, text, "the host in [] is not an IPv6 address"), NULL;
      if (end[1] == ':')
        port = end + 2;
      else if (end[1] != '\0')
        return invalid (error, text, "the host ends in something other than a port"), NULL;
    }
  else
    {
      const char *colon = strchr (hostport, ':');

      host = colon ? g_strndup (hostport, colon - hostport) : g_strdup (hostport);
      port = colon ? colon + 1 : NULL;
      if (*host == '\0')
        return invalid (error, text, "the host is empty"), NULL;
      for (const char *p = host; *p; p++)
        if (!g_ascii_isalnum (*p) && *p != '.' && *p != '-')
          return invalid (error, text, "the host holds a character a host name cannot"), NULL;
      if (host[0] == '-' || host[0] == '.')
        return invalid (error, text, "the host name starts with '-' or '.'"), NULL;
    }

  if (port != NULL)
    {
      guint64 n;

      if (*port == '\0' || strlen (port) > 5 || !g_ascii_string_to_unsigned (port, 10, 1, 65535, &n, NULL))
        return invalid (error, text, "the port is not a number from 1 to 65535"), NULL;
    }
  return g_steal_pointer (&host);
}

static gboolean
host_is_loopback (const char *host)
{
  g_autoptr (GInetAddress) addr = NULL;

  if (g_ascii_strcasecmp (host, "localhost") == 0)
    return TRUE;
  addr = g_inet_address_new_from_string (host);
  return addr != NULL && g_inet_address_get_is_loopback (addr);
}

static gboolean
plain_http_for (const char *hostport, const char *host, const char * const *insecure_hosts)
{
  if (host_is_loopback (host))
    return TRUE;
  for (const char * const *h = insecure_hosts; h && *h; h++)
    if (g_ascii_strcasecmp (*h, hostport) == 0 || g_ascii_strcasecmp (*h, host) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
parse_layout (MvImageRef *ref, const char *rest, GError **error)
{
  const char *colon = strrchr (rest, ':');
  g_autofree char *path = NULL;
  g_auto (GStrv) parts = NULL;

  if (colon != NULL && strchr (colon, '/') == NULL)
    {
      if (!tag_is_valid (colon + 1))
        return invalid (error, ref->text, "the tag after the layout's path is not a valid tag");
      ref->tag = g_strdup (colon + 1);
      path = g_strndup (rest, colon - rest);
    }
  else
    path = g_strdup (rest);

  if (!g_path_is_absolute (path))
    return invalid (error, ref->text, "an oci: layout must be an absolute path");
  parts = g_strsplit (path, "/", -1);
  for (char **part = parts; *part; part++)
    if (g_str_equal (*part, "..") || g_str_equal (*part, "."))
      return invalid (error, ref->text, "an oci: layout path may not hold '.' or '..'");
  ref->path = g_steal_pointer (&path);
  return TRUE;
}

static gboolean
parse_archive (MvImageRef *ref, const char * const *insecure_hosts, GError **error)
{
  const char *text = ref->text;
  gboolean tls = g_str_has_prefix (text, "https://");
  const char *authority = text + (tls ? strlen ("https://") : strlen ("http://"));
  gsize authority_len = strcspn (authority, "/?#");
  g_autofree char *hostport = g_strndup (authority, authority_len);
  g_autofree char *host = NULL;

  if (strlen (text) > MV_IMAGE_URL_MAX)
    return invalid (error, text, "the URL is longer than " G_STRINGIFY (MV_IMAGE_URL_MAX) " bytes");
  if (strchr (hostport, '@') != NULL)
    return invalid (error, text, "the URL may not carry user credentials");
  for (const char *p = text; *p; p++)
    if ((guchar) *p <= ' ' || (guchar) *p >= 0x7f)
      return invalid (error, text, "the URL holds a space or a control or non-ASCII character");
  host = split_host (hostport, error, text);
  if (host == NULL)
    return FALSE;
  if (authority[authority_len] != '/' || authority[authority_len + 1] == '\0')
    return invalid (error, text, "the URL names no file");

  ref->host = g_steal_pointer (&hostport);
  ref->plain_http = !tls;
  if (!tls && !plain_http_for (ref->host, host, insecure_hosts))
    return invalid (error, text, "plain http:// is allowed only to a loopback or insecure host");
  ref->url = g_strdup (text);
  return TRUE;
}

static gboolean
parse_registry (MvImageRef *ref, const char * const *insecure_hosts, GError **error)
{
  const char *text = ref->text;
  const char *slash = strchr (text, '/');
  const char *at;
  g_autofree char *hostport = NULL;
  g_autofree char *host = NULL;
  g_autofree char *name = NULL;

  if (slash == NULL)
    return invalid (error, text, "it names no host (host[:port]/repository[:tag])");
  hostport = g_strndup (text, slash - text);
  /* The first component is a host only if it looks like one, as docker
   * decides it; a bare "library/busybox" is refused, not sent to a default. */
  if (strchr (hostport, '.') == NULL && strchr (hostport, ':') == NULL &&
      g_ascii_strcasecmp (hostport, "localhost") != 0)
    return invalid (error, text, "it names no host (host[:port]/repository[:tag])");
  host = split_host (hostport, error, text);
  if (host == NULL)
    return FALSE;

  at = strchr (slash + 1, '@');
  if (at != NULL)
    {
      if (!mv_image_digest_is_valid (at + 1))
        return invalid (error, text, "the digest is not sha256: and 64 lowercase hex digits");
      ref->digest = g_strdup (at + 1);
      name = g_strndup (slash + 1, at - slash - 1);
    }
  else
    {
      const char *colon = strrchr (slash + 1, ':');

      if (colon != NULL)
        {
          if (!tag_is_valid (colon + 1))
            return invalid (error, text, "the tag is not 1 to 128 of [A-Za-z0-9_.-], not starting with . or -");
          ref->tag = g_strdup (colon + 1);
          name = g_strndup (slash + 1, colon - slash - 1);
        }
      else
        {
          ref->tag = g_strdup ("latest");
          name = g_strdup (slash + 1);
        }
    }

  if (strlen (hostport) + 1 + strlen (name) > MV_IMAGE_NAME_MAX)
    return invalid (error, text, "host and repository are longer than " G_STRINGIFY (MV_IMAGE_NAME_MAX) " bytes");
  if (!repository_is_valid (name))
    return invalid (error, text, "the repository is not lowercase components separated by '/'");

  ref->plain_http = plain_http_for (hostport, host, insecure_hosts);
  ref->host = g_steal_pointer (&hostport);
  ref->repository = g_steal_pointer (&name);
  return TRUE;
}

MvImageRef *
mv_image_ref_parse (const char *text, const char * const *insecure_hosts, GError **error)
{
  g_autoptr (MvImageRef) ref = g_new0 (MvImageRef, 1);
  gboolean ok;

  g_return_val_if_fail (text != NULL, NULL);

  if (*text == '\0')
    return invalid (error, text, "it is empty"), NULL;
  if (strlen (text) > MV_IMAGE_REF_MAX && !g_str_has_prefix (text, "http"))
    return invalid (error, text, "it is longer than " G_STRINGIFY (MV_IMAGE_REF_MAX) " bytes"), NULL;
  if (!g_utf8_validate (text, -1, NULL))
    return invalid (error, "(not UTF-8)", "it is not UTF-8"), NULL;
  ref->text = g_strdup (text);

  if (g_str_has_prefix (text, "oci:"))
    {
      ref->kind = MV_IMAGE_REF_LAYOUT;
      ok = parse_layout (ref, text + 4, error);
    }
  else if (g_str_has_prefix (text, "http://") || g_str_has_prefix (text, "https://"))
    {
      ref->kind = MV_IMAGE_REF_ARCHIVE;
      ok = parse_archive (ref, insecure_hosts, error);
    }
  else if (strstr (text, "://") != NULL)
    ok = invalid (error, text, "the only URL schemes are http:// and https://");
  else
    {
      ref->kind = MV_IMAGE_REF_REGISTRY;
      ok = parse_registry (ref, insecure_hosts, error);
    }
  return ok ? g_steal_pointer (&ref) : NULL;
}
