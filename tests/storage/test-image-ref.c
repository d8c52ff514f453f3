#include "core/image-ref.h"
#include "core/errors.h"

#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static MvImageRef *
parse_ok (const char *text, const char * const *insecure)
{
  g_autoptr (GError) error = NULL;
  MvImageRef *ref = mv_image_ref_parse (text, insecure, &error);

  g_assert_no_error (error);
  g_assert_nonnull (ref);
  g_assert_cmpstr (ref->text, ==, text);
  return ref;
}

static void
test_registry (void)
{
  g_autoptr (MvImageRef) a = parse_ok ("registry.example.org/team/app:1.2", NULL);
  g_autoptr (MvImageRef) b = parse_ok ("127.0.0.1:5000/test/busybox", NULL);
  g_autoptr (MvImageRef) c = parse_ok ("[::1]:5000/x@sha256:" HEX, NULL);
  g_autoptr (MvImageRef) d = parse_ok ("localhost/a_b__c/d-e", NULL);
  g_autoptr (MvImageRef) e = parse_ok ("127.9.9.9:80/a", NULL);

  g_assert_cmpint (a->kind, ==, MV_IMAGE_REF_REGISTRY);
  g_assert_cmpstr (a->host, ==, "registry.example.org");
  g_assert_cmpstr (a->repository, ==, "team/app");
  g_assert_cmpstr (a->tag, ==, "1.2");
  g_assert_null (a->digest);
  g_assert_false (a->plain_http);

  g_assert_cmpstr (b->host, ==, "127.0.0.1:5000");
  g_assert_cmpstr (b->tag, ==, "latest");
  g_assert_true (b->plain_http);

  g_assert_cmpstr (c->host, ==, "[::1]:5000");
  g_assert_cmpstr (c->digest, ==, "sha256:" HEX);
  g_assert_null (c->tag);
  g_assert_true (c->plain_http);

  g_assert_true (d->plain_http);
  g_assert_cmpstr (d->repository, ==, "a_b__c/d-e");
  g_assert_true (e->plain_http);
}

static void
test_insecure (void)
{
  const char *insecure[] = { "reg.lan:5000", "other.lan", NULL };
  g_autoptr (MvImageRef) a = parse_ok ("reg.lan:5000/x", insecure);
  g_autoptr (MvImageRef) b = parse_ok ("reg.lan:6000/x", insecure);
  g_autoptr (MvImageRef) c = parse_ok ("other.lan:1/x", insecure);
  g_autoptr (MvImageRef) d = parse_ok ("http://other.lan/a.tar", insecure);

  g_assert_true (a->plain_http);
  g_assert_false (b->plain_http);
  g_assert_true (c->plain_http);
  g_assert_true (d->plain_http);
}

static void
test_layout (void)
{
  g_autoptr (MvImageRef) a = parse_ok ("oci:/srv/images/app:v1", NULL);
  g_autoptr (MvImageRef) b = parse_ok ("oci:/srv/images/app", NULL);

  g_assert_cmpint (a->kind, ==, MV_IMAGE_REF_LAYOUT);
  g_assert_cmpstr (a->path, ==, "/srv/images/app");
  g_assert_cmpstr (a->tag, ==, "v1");
  g_assert_cmpstr (b->path, ==, "/srv/images/app");
  g_assert_null (b->tag);
}

static void
test_archive (void)
{
  g_autoptr (MvImageRef) a = parse_ok ("https://files.example.org/img/app.tar?sig=abc#x", NULL);
  g_autoptr (MvImageRef) b = parse_ok ("http://127.0.0.1:8080/app.tar", NULL);
  g_autofree char *stripped = mv_url_strip_query (a->url);
  g_autofree char *plain = mv_url_strip_query ("https://h/p");

  g_assert_cmpint (a->kind, ==, MV_IMAGE_REF_ARCHIVE);
  g_assert_false (a->plain_http);
  g_assert_cmpstr (a->host, ==, "files.example.org");
  g_assert_cmpstr (stripped, ==, "https://files.example.org/img/app.tar");
  g_assert_cmpstr (plain, ==, "https://h/p");
  g_assert_true (b->plain_http);
}

static void
test_bad (void)
{
  g_autofree char *long_repo = g_strnfill (300, 'a');
  g_autofree char *too_long = g_strconcat ("h.org/", long_repo, NULL);
  g_autofree char *long_tag = g_strconcat ("h.org/a:", long_repo, NULL);
  const char *bad[] = {
    "", "busybox", "library/busybox:1", "docker.io", "h.org/", "h.org/UPPER", "h.org/a:",
    "h.org/a:-x", "h.org/a@sha256:abc", "h.org/a@sha256:" HEX "0", "h.org/a@md5:" HEX,
    "h.org/a//b", "h.org/a-", "h.org:0/a", "h.org:99999/a", "h.org:x/a", "[::1/a", "[zz]:1/a",
    "h_o.org/a", "oci:relative/path", "oci:/a/../b", "oci:/a/b:bad tag", "ftp://h/a.tar",
    "http://example.org/a.tar", "https://user:pw@h.org/a.tar", "https://h.org", "https://h.org/a b",
    too_long, long_tag,
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MvImageRef) ref = mv_image_ref_parse (bad[i], NULL, &error);

      if (ref != NULL)
        g_error ("\"%s\" was accepted", bad[i]);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    }
}

static void
test_digest (void)
{
  g_assert_true (mv_image_digest_is_valid ("sha256:" HEX));
  g_assert_false (mv_image_digest_is_valid ("sha256:" "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
  g_assert_false (mv_image_digest_is_valid (HEX));
  g_assert_false (mv_image_digest_is_valid (NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/image-ref/registry", test_registry);
  g_test_add_func ("/image-ref/insecure", test_insecure);
  g_test_add_func ("/image-ref/layout", test_layout);
  g_test_add_func ("/image-ref/archive", test_archive);
  g_test_add_func ("/image-ref/bad", test_bad);
  g_test_add_func ("/image-ref/digest", test_digest);
  return g_test_run ();
}
