/* Who may have a volume (seed 002, State.HoldsReservations): any number
 * of machines read-only, or one writable while it holds reservations
 * (standby too). A start that would share it otherwise is Conflict, named,
 * before anything is recorded or the host is asked; and a spec naming a
 * volume the host lacks is NotFound at define. */
#include "fixture.h"

/* Every volume is there but "missing". */
static char *
fake_disk_path (MvVolumes *volumes, const char *name, GError **error)
{
  if (g_str_equal (name, "missing"))
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "No volume called %s", name), NULL;
  return g_strdup_printf ("/var/lib/fake/volumes/%s/disk.ext4", name);
}

static MvVolumes fake_volumes = { .disk_path = fake_disk_path };

static MvMachine *
define_mounting (Fixture *f, const char *id, const char *volume, gboolean read_only)
{
  MvSpec *spec = fixture_spec (id);
  MvMount *mount = g_new0 (MvMount, 1);

  mount->type = MV_MOUNT_VOLUME;
  mount->source = g_strdup (volume);
  mount->target = g_strdup ("/data");
  mount->read_only = read_only;
  g_ptr_array_add (spec->mounts, mount);
  f->host.volumes = &fake_volumes;
  return fixture_define (f, spec);
}

static void
assert_start_conflicts (Fixture *f, MvMachine *m, const char *holder)
{
  guint calls = fake_log_len (f->log);
  g_autofree char *start = g_strdup_printf ("runtime.start %s", m->id);
  MvState before = m->status->state;
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_START);

  g_assert_error (error, MV_ERROR, MV_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "volume data"));
  g_assert_nonnull (strstr (error->message, holder));
  g_assert_cmpint (fake_log_find (f->log, calls, start), <, 0);
  g_assert_cmpint (m->status->state, ==, before);
  g_assert_null (m->status->phase);
}

static void
test_writable_is_held (Fixture *f, gconstpointer data)
{
  MvMachine *a = define_mounting (f, "a", "data", FALSE);
  MvMachine *b = define_mounting (f, "b", "data", FALSE);
  MvMachine *c = define_mounting (f, "c", "data", TRUE);
  MvMachine *d = define_mounting (f, "d", "data", TRUE);
  MvMachine *other = define_mounting (f, "e", "other", FALSE);
  GError *error;

  error = fixture_request (f, a, MV_REQUEST_START);
  g_assert_no_error (error);
  assert_start_conflicts (f, b, "vm-a");
  assert_start_conflicts (f, c, "vm-a");
  /* Another volume is no one's business. */
  error = fixture_request (f, other, MV_REQUEST_START);
  g_assert_no_error (error);

  /* On standby it still holds it. */
  error = fixture_request (f, a, MV_REQUEST_STANDBY);
  g_assert_no_error (error);
  g_assert_cmpint (a->status->state, ==, MV_STATE_STANDBY);
  assert_start_conflicts (f, b, "vm-a");

  /* Stopped, it lets go; readers share, a writer waits for them. */
  error = fixture_request (f, a, MV_REQUEST_STOP);
  g_assert_no_error (error);
  error = fixture_request (f, c, MV_REQUEST_START);
  g_assert_no_error (error);
  error = fixture_request (f, d, MV_REQUEST_START);
  g_assert_no_error (error);
  assert_start_conflicts (f, b, "read-only");

  /* Asked again once they stop: it starts. */
  error = fixture_request (f, c, MV_REQUEST_STOP);
  g_assert_no_error (error);
  error = fixture_request (f, d, MV_REQUEST_STOP);
  g_assert_no_error (error);
  error = fixture_request (f, b, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (b->status->state, ==, MV_STATE_RUNNING);
}

static void
test_unknown_volume_refused (Fixture *f, gconstpointer data)
{
  MvSpec *spec = fixture_spec ("x");
  MvMount *mount = g_new0 (MvMount, 1);
  g_autoptr (GError) error = NULL;
  gboolean existed = FALSE;

  mount->type = MV_MOUNT_VOLUME;
  mount->source = g_strdup ("missing");
  mount->target = g_strdup ("/data");
  g_ptr_array_add (spec->mounts, mount);
  f->host.volumes = &fake_volumes;
  g_assert_null (mv_reconciler_define (f->rec, spec, FALSE, &existed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_assert_true (g_str_has_prefix (error->message, "mounts[0].source: "));
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/volumes/writable-is-held", test_writable_is_held);
  FIXTURE_TEST ("/volumes/unknown-volume-refused", test_unknown_volume_refused);
  return g_test_run ();
}
