#include "listing.h"
#include "reconcile/reconciler.h"

#include <string.h>

typedef struct {
  guint32     id;      /* offsets of the NUL-terminated strings in the text */
  guint32     name;
  guint32     path;
  guint32     id_len;
  guint32     name_len;
  const char *state;   /* mv_state_to_string()'s */
} Entry;

struct _MvListing {
  gboolean  valid;
  GArray   *entries;   /* Entry, in name order */
  GString  *text;      /* every entry's strings, one after another */
};

MvListing *
mv_listing_new (void)
{
  MvListing *listing = g_new0 (MvListing, 1);

  listing->entries = g_array_new (FALSE, FALSE, sizeof (Entry));
  listing->text = g_string_new (NULL);
  return listing;
}

void
mv_listing_free (MvListing *listing)
{
  if (!listing)
    return;
  g_array_unref (listing->entries);
  g_string_free (listing->text, TRUE);
  g_free (listing);
}

void
mv_listing_invalidate (MvListing *listing)
{
  listing->valid = FALSE;
}

void
mv_listing_state_changed (MvListing *listing, MvMachineView *view)
{
  if (listing->valid && view->listed > 0)
    g_array_index (listing->entries, Entry, view->listed - 1).state =
      mv_state_to_string (mv_machine_shown_status (view->machine)->state);
}

static guint32
add_text (GString *text, const char *value)
{
  guint32 at = (guint32) text->len;

  g_string_append_len (text, value, (gssize) strlen (value) + 1);
  return at;
}

static void
build (MvListing *listing, MvBusService *service)
{
  g_autoptr (GPtrArray) sorted = mv_reconciler_list (mv_bus_service_reconciler (service));

  g_array_set_size (listing->entries, sorted->len);
  g_string_truncate (listing->text, 0);
  for (guint i = 0; i < sorted->len; i++)
    {
      MvMachine *machine = sorted->pdata[i];
      MvMachineView *view = mv_bus_view (service, machine);
      Entry *entry = &g_array_index (listing->entries, Entry, i);

      entry->id = add_text (listing->text, machine->id);
      entry->id_len = (guint32) (listing->text->len - entry->id - 1);
      entry->name = add_text (listing->text, mv_machine_shown_config (machine)->spec->name);
      entry->name_len = (guint32) (listing->text->len - entry->name - 1);
      entry->path = add_text (listing->text, view->path);
      entry->state = mv_state_to_string (mv_machine_shown_status (machine)->state);
      view->listed = i + 1;
    }
  listing->valid = TRUE;
}

/* Copies @len bytes of @value as a string. The listing's strings were
 * checked when their records were admitted (an id is hex, a name valid
 * UTF-8 without control characters, a state one of ours), so sd-bus need
 * not check them again for every call: that check was a third of the
 * reply's making. */
static int
append_checked (sd_bus_message *reply, const char *value, gsize len)
{
  char *space;
  int r = sd_bus_message_append_string_space (reply, len, &space);

  if (r >= 0)
    memcpy (space, value, len);
  return r;
}

int
mv_listing_append (MvListing *listing, MvBusService *service, sd_bus_message *reply)
{
  const char *text;
  int r;

  if (!listing->valid)
    build (listing, service);
  text = listing->text->str;
  r = sd_bus_message_open_container (reply, 'a', "(ssso)");
  for (guint i = 0; r >= 0 && i < listing->entries->len; i++)
    {
      const Entry *entry = &g_array_index (listing->entries, Entry, i);

      /* Field by field: appending "(ssso)" whole parses the signature
       * again for every machine. */
      r = sd_bus_message_open_container (reply, 'r', "ssso");
      if (r >= 0)
        r = append_checked (reply, text + entry->id, entry->id_len);
      if (r >= 0)
        r = append_checked (reply, text + entry->name, entry->name_len);
      if (r >= 0)
        r = append_checked (reply, entry->state, strlen (entry->state));
      if (r >= 0)
        r = sd_bus_message_append_basic (reply, 'o', text + entry->path);
      if (r >= 0)
        r = sd_bus_message_close_container (reply);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  return r;
}
