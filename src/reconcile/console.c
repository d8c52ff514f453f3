/* Remote console access (seed 004): a caller allowed to read a machine
 * asks for a console and is given a token, which opens one session of the
 * console bridge (daemon/console-bridge.c) within its lifetime.
 *
 * A token is 32 random bytes, shown once (in hexadecimal) and kept only as its
 * SHA-256 digest, in memory: nothing of it reaches the disk. It names its
 * machine and mode, is taken by the first session that shows it, and is
 * kept as used (or expired) for one more lifetime so that a second try
 * is told why.
 *
 * A login session is let in by the guest's agent only with a console key
 * (MvConsoleKey) in the guest's metadata: a one-time secret made for the
 * token, whose digest the metadata document carries within the 8 KiB it
 * keeps for them. The key goes when the token expires unused or when its
 * session ends; a daemon that restarts gives guests their metadata
 * without the keys of the tokens it forgot. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "core/workload.h"

#include <sys/random.h>

#define TOKEN_BYTES  32

typedef enum {
  TOKEN_LIVE,
  TOKEN_TAKEN,
  TOKEN_EXPIRED,
} TokenState;

typedef struct {
  MvReconciler  *rec;
  char          *digest;       /* of the token: the table's key */
  char          *machine_id;
  MvConsoleMode  mode;
  guint32        uid;          /* the caller's */
  gint64         expires_at;   /* µs since the epoch */
  guint          timer;
  TokenState     state;
  MvConsoleKey  *key;          /* login: its key, the machine's while it is there */
  char          *secret;       /* login: the key's secret */
} Token;

static void
token_free (Token *token)
{
  mv_reconciler_remove_timeout (token->rec, &token->timer);
  g_free (token->digest);
  g_free (token->machine_id);
  mv_console_key_free (token->key);
  if (token->secret)
    memset (token->secret, 0, strlen (token->secret));
  g_free (token->secret);
  g_free (token);
}

void
mv_console_grant_free (MvConsoleGrant *grant)
{
  if (!grant)
    return;
  g_free (grant->machine_id);
  g_free (grant->user);
  if (grant->secret)
    memset (grant->secret, 0, strlen (grant->secret));
  g_free (grant->secret);
  g_free (grant->key);
  g_free (grant);
}

static GHashTable *
tokens_of (MvReconciler *rec)
{
  if (!rec->console_tokens)
    rec->console_tokens = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                                 (GDestroyNotify) token_free);
  return rec->console_tokens;
}

static char *
sha256_hex (const void *data, gsize len)
{
  return g_compute_checksum_for_data (G_CHECKSUM_SHA256, data, len);
}

static char *
hex_of (const guint8 *bytes, gsize len)
{
  GString *text = g_string_sized_new (2 * len + 1);

  for (gsize i = 0; i < len; i++)
    g_string_append_printf (text, "%02x", bytes[i]);
  return g_string_free (text, FALSE);
}

static gboolean
random_bytes (guint8 *out, gsize len, GError **error)
{
  gsize got = 0;

  while (got < len)
    {
      ssize_t n = getrandom (out + got, len - got, 0);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return mv_error_set (error, MV_ERROR_FAILED, "getrandom: %s", g_strerror (errno));
      got += (gsize) n;
    }
  return TRUE;
}

/* The machine's keys without @key: true if it had it. */
static gboolean
drop_key (MvMachine *machine, const char *key)
{
  for (guint i = 0; machine->console_keys && i < machine->console_keys->len; i++)
    if (g_str_equal (((MvConsoleKey *) machine->console_keys->pdata[i])->key, key))
      {
        g_ptr_array_remove_index (machine->console_keys, i);
        return TRUE;
      }
  return FALSE;
}

static void
forget_key (MvReconciler *rec, const char *machine_id, const char *key)
{
  MvMachine *machine = mv_reconciler_lookup (rec, machine_id);

  if (machine && drop_key (machine, key))
    mv_reconciler_update_guest (machine);
}

/* A token's lifetime is over: an unused one's key goes; its digest is
 * kept one more lifetime, to tell a late caller why. */
static gboolean
on_token_due (gpointer data)
{
  Token *token = data;
  MvReconciler *rec = token->rec;

  token->timer = 0;
  if (token->state == TOKEN_EXPIRED)
    {
      g_hash_table_remove (rec->console_tokens, token->digest);
      return G_SOURCE_REMOVE;
    }
  if (token->state == TOKEN_LIVE && token->key)
    forget_key (rec, token->machine_id, token->key->key);
  token->state = TOKEN_EXPIRED;
  token->timer = mv_reconciler_timeout (rec, rec->options.console_token_seconds * 1000,
                                        on_token_due, token);
  return G_SOURCE_REMOVE;
}

static gboolean
check_bounds (MvMachine *machine, guint32 uid, GError **error)
{
  GHashTableIter iter;
  Token *token;
  guint mine = 0, its = 0;

  g_hash_table_iter_init (&iter, tokens_of (machine->reconciler));
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &token))
    {
      if (token->state != TOKEN_LIVE)
        continue;
      its += g_str_equal (token->machine_id, machine->id);
      mine += token->uid == uid;
    }
  if (its >= MV_CONSOLE_TOKENS_PER_MACHINE)
    return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED, "Machine %s has %u console tokens "
                         "that are not used yet, the most it may have; try again once they "
                         "are used or expire", machine->config->spec->name, its);
  if (mine >= MV_CONSOLE_TOKENS_PER_CALLER)
    return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED, "The caller (UID %u) has %u "
                         "console tokens that are not used yet, the most a caller may have",
                         uid, mine);
  return TRUE;
}

/* Who a login session runs as: root, or the workload's user. */
static char *
login_user (MvMachine *machine)
{
  g_autoptr (MvSpec) workload = NULL;

  if (machine->reconciler->options.console_login_root)
    return g_strdup ("root");
  workload = mv_spec_with_image_defaults (machine->config->spec, machine->config->image_config);
  return g_strdup (workload->user && *workload->user ? workload->user : "root");
}

/* A console key for a login session into @machine, in its keys and its
 * guest's metadata; or MV_ERROR_RESOURCE_EXHAUSTED if the reserve has no
 * room for it, and nothing changed. */
static gboolean
add_key (MvMachine *machine, gint64 expires_at, MvConsoleKey **key_out, char **secret_out,
         GError **error)
{
  guint8 bytes[MV_CONSOLE_SECRET_CHARS / 2];
  g_autofree char *digest = NULL, *secret = NULL;
  MvConsoleKey *key;
  gsize size;

  if (!random_bytes (bytes, sizeof bytes, error))
    return FALSE;
  secret = hex_of (bytes, sizeof bytes);
  memset (bytes, 0, sizeof bytes);
  digest = sha256_hex (secret, strlen (secret));
  key = g_new0 (MvConsoleKey, 1);
  key->key = g_strconcat ("sha256:", digest, NULL);
  key->user = login_user (machine);
  key->expires = expires_at / G_USEC_PER_SEC;
  if (!machine->console_keys)
    machine->console_keys = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_console_key_free);
  g_ptr_array_add (machine->console_keys, key);
  size = mv_console_keys_size (machine->console_keys);
  if (size > MV_CONSOLE_KEYS_MAX_BYTES)
    {
      g_ptr_array_remove_index (machine->console_keys, machine->console_keys->len - 1);
      return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED, "console keys: machine %s's "
                           "metadata keeps %d bytes for them, and its %u keys fill it; try again "
                           "once a login session ends or its token expires",
                           machine->config->spec->name, MV_CONSOLE_KEYS_MAX_BYTES,
                           machine->console_keys->len);
    }
  *key_out = g_new0 (MvConsoleKey, 1);
  (*key_out)->key = g_strdup (key->key);
  (*key_out)->user = g_strdup (key->user);
  (*key_out)->expires = key->expires;
  *secret_out = g_steal_pointer (&secret);
  return TRUE;
}

gboolean
mv_reconciler_request_console (MvMachine *machine, MvConsoleMode mode, guint32 uid, char **token_out,
                               gint64 *expires_at, GError **error)
{
  MvReconciler *rec = machine->reconciler;
  guint8 bytes[TOKEN_BYTES];
  g_autofree char *text = NULL;
  MvRuntime *runtime;
  Token *token;

  if (rec->options.console_token_seconds == 0)
    return mv_error_set (error, MV_ERROR_UNAVAILABLE, "The console bridge is off on this host "
                         "([console] listen is empty)");
  if (machine->status->state != MV_STATE_RUNNING || !machine->status->vmm)
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "Machine %s is %s: only a running "
                         "machine's console is opened", machine->config->spec->name,
                         mv_state_to_string (machine->status->state));
  if (!(runtime = mv_reconciler_runtime_for (machine, error)))
    return FALSE;
  if (mode == MV_CONSOLE_SERIAL && !runtime->open_console)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "mode: %s machines have no serial "
                         "console", runtime->type);
  if (mode == MV_CONSOLE_LOGIN &&
      (!runtime->has_agent || !runtime->exec || !runtime->has_agent (runtime, machine->config->spec)))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "mode: login sessions are opened by "
                         "microvmd's agent, and machine %s's guest boots without it",
                         machine->config->spec->name);
  if (!check_bounds (machine, uid, error) || !random_bytes (bytes, sizeof bytes, error))
    return FALSE;

  token = g_new0 (Token, 1);
  token->rec = rec;
  token->machine_id = g_strdup (machine->id);
  token->mode = mode;
  token->uid = uid;
  token->expires_at = g_get_real_time () +
                      (gint64) rec->options.console_token_seconds * G_USEC_PER_SEC;
  if (mode == MV_CONSOLE_LOGIN &&
      !add_key (machine, token->expires_at, &token->key, &token->secret, error))
    {
      token_free (token);
      return FALSE;
    }
  /* Hexadecimal: safe in a URL's query and on a command line as it is
   * (never taken for an option). */
  text = hex_of (bytes, sizeof bytes);
  memset (bytes, 0, sizeof bytes);
  token->digest = sha256_hex (text, strlen (text));
  token->timer = mv_reconciler_timeout (rec, rec->options.console_token_seconds * 1000,
                                        on_token_due, token);
  g_hash_table_replace (tokens_of (rec), token->digest, token);
  if (token->key)
    mv_reconciler_update_guest (machine);
  mv_machine_log (machine, G_LOG_LEVEL_INFO, "Machine %s: a %s console token for UID %u",
                  machine->config->spec->name, mode == MV_CONSOLE_LOGIN ? "login" : "serial",
                  uid);
  *token_out = g_steal_pointer (&text);
  *expires_at = token->expires_at;
  return TRUE;
}

MvConsoleGrant *
mv_reconciler_take_console (MvReconciler *rec, const char *text, const char *machine_name,
                            GError **error)
{
  g_autofree char *digest = NULL;
  MvConsoleGrant *grant;
  MvMachine *machine;
  Token *token;

  if (!text || strlen (text) > 128)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "token: none, or not one this "
                         "daemon gave"), NULL;
  digest = sha256_hex (text, strlen (text));
  token = g_hash_table_lookup (tokens_of (rec), digest);
  if (!token)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "token: not one this daemon gave, "
                         "or long expired"), NULL;
  if (token->state == TOKEN_TAKEN)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "token: used already; a token "
                         "opens one session"), NULL;
  if (token->state == TOKEN_EXPIRED || g_get_real_time () >= token->expires_at)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "token: expired; ask for another "
                         "with RequestConsole"), NULL;
  machine = mv_reconciler_lookup (rec, token->machine_id);
  /* A client that names the machine it means is not let into another;
   * the token stays unused. */
  if (machine_name && (!machine || (!g_str_equal (machine_name, machine->id) &&
                                    !g_str_equal (machine_name, machine->config->spec->name))))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "token: for another machine than "
                         "%.64s", machine_name), NULL;
  token->state = TOKEN_TAKEN;
  if (!machine || machine->status->state != MV_STATE_RUNNING)
    {
      if (token->key)
        forget_key (rec, token->machine_id, token->key->key);
      return mv_error_set (error, MV_ERROR_INVALID_STATE, "The token's machine %s",
                           machine ? "is not running" : "is gone"), NULL;
    }
  grant = g_new0 (MvConsoleGrant, 1);
  grant->machine_id = g_strdup (token->machine_id);
  grant->mode = token->mode;
  if (token->key)
    {
      grant->user = g_strdup (token->key->user);
      grant->key = g_strdup (token->key->key);
      grant->secret = g_steal_pointer (&token->secret);
    }
  return grant;
}

void
mv_reconciler_console_ended (MvReconciler *rec, const MvConsoleGrant *grant)
{
  if (grant->key)
    forget_key (rec, grant->machine_id, grant->key);
}

void
mv_reconciler_console_free (MvReconciler *rec)
{
  g_clear_pointer (&rec->console_tokens, g_hash_table_unref);
}
