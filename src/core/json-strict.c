/* A strict JSON reader: one iterative pass over the text that holds it to
 * RFC 8259 and to limits, and builds the daemon's own read-only document
 * (json-tree.h) as it goes; json-glib's tree is made from that. Pure. */
#include "json-strict.h"
#include "json-tree.h"
#include "errors.h"
#include "text.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* A key in an error message is cut to this; the path of keys as a whole
 * keeps its innermost part within MV_EXCERPT_MAX_BYTES. */
#define KEY_EXCERPT_BYTES 24

/* An object with more members than this finds a repeated key through a
 * hash table of its keys rather than by walking them. */
#define KEYS_WALKED 32


typedef struct {
  gboolean    object;
  guint       index;       /* arrays: the element being read */
  GHashTable *keys;        /* objects, when only checking: the keys seen, decoded; when
                            * building, past KEYS_WALKED members: theirs */
  MvJson     *value;       /* when building: the object or array */
  MvJson     *last;        /* ...and its last value so far */
  const char *key;         /* objects: the key being read, in @keys or the document;
                            * NULL between */
  guint       key_length;  /* ...in bytes, when building */
} Level;

typedef struct {
  const char         *text;
  gsize               length;
  gsize               pos;
  const MvJsonLimits *limits;
  const char         *what;
  Level              *levels;
  guint               depth;
  GString            *key;         /* when only checking: the key being decoded */
  MvJsonDoc          *doc;         /* where the values go; NULL when only checking */
  GString            *string;      /* when building: a string with escapes, decoded */
  MvJson             *root;        /* when building: the value, once read */
  gboolean            escaped;     /* an escape was read since this was last cleared */
} Scanner;

typedef enum {
  EXPECT_VALUE,          /* a value must come */
  EXPECT_VALUE_OR_END,   /* just after '[' */
  EXPECT_KEY,            /* just after ',' in an object */
  EXPECT_KEY_OR_END,     /* just after '{' */
  EXPECT_COLON,
  AFTER_VALUE,
} State;

static gboolean
not_json (Scanner *s, gsize at, GError **error, const char *format, ...) G_GNUC_PRINTF (4, 5);

static gboolean
not_json (Scanner *s, gsize at, GError **error, const char *format, ...)
{
  g_autofree char *reason = NULL;
  va_list args;

  va_start (args, format);
  reason = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "%s: not JSON at byte %" G_GSIZE_FORMAT
               ": %s", s->what, at, reason);
  return FALSE;
}

/* Where the scanner is, as the fields of a spec are named in messages:
 * disks[0].path. */
static char *
current_path (Scanner *s)
{
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GString) path = g_string_new (NULL);
  gsize budget = MV_EXCERPT_MAX_BYTES;
  guint first;

  for (guint i = 0; i < s->depth; i++)
    {
      const Level *level = &s->levels[i];

      if (!level->object)
        g_ptr_array_add (parts, g_strdup_printf ("[%u]", level->index));
      else if (level->key != NULL)
        {
          g_autofree char *key = mv_text_excerpt (level->key, -1, KEY_EXCERPT_BYTES);

          g_ptr_array_add (parts, g_strdup_printf ("%s%s", parts->len > 0 ? "." : "", key));
        }
      else
        break;
    }
  /* The innermost part says most; what does not fit goes from the front. */
  first = parts->len;
  while (first > 0 && strlen (g_ptr_array_index (parts, first - 1)) <= budget)
    {
      budget -= strlen (g_ptr_array_index (parts, first - 1));
      first--;
    }
  if (first > 0)
    g_string_append (path, "…");
  for (guint i = first; i < parts->len; i++)
    {
      const char *part = g_ptr_array_index (parts, i);

      g_string_append (path, i == first && part[0] == '.' ? part + 1 : part);
    }
  return g_string_free (g_steal_pointer (&path), FALSE);
}

/* A refusal of what the text says rather than how: named by the field. */
static gboolean
refused (Scanner *s, gsize at, GError **error, const char *format, ...) G_GNUC_PRINTF (4, 5);

static gboolean
refused (Scanner *s, gsize at, GError **error, const char *format, ...)
{
  g_autofree char *reason = NULL;
  g_autofree char *path = current_path (s);
  va_list args;

  va_start (args, format);
  reason = g_strdup_vprintf (format, args);
  va_end (args);
  if (*path != '\0')
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "%s: %s: %s", s->what, path, reason);
  else
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                 "%s: at byte %" G_GSIZE_FORMAT ": %s", s->what, at, reason);
  return FALSE;
}

static gboolean
at_end (Scanner *s)
{
  return s->pos >= s->length;
}

static guchar
peek (Scanner *s)
{
  return at_end (s) ? '\0' : (guchar) s->text[s->pos];
}

static void
skip_whitespace (Scanner *s)
{
  while (!at_end (s))
    {
      guchar c = s->text[s->pos];

      if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
        return;
      s->pos++;
    }
}

static gboolean
is_word_char (guchar c)
{
  return g_ascii_isalnum (c) || c == '_' || c == '$';
}

static gsize
word_length (Scanner *s)
{
  gsize n = 0;

  while (s->pos + n < s->length && is_word_char (s->text[s->pos + n]))
    n++;
  return n;
}

/* Why the byte at the scanner is not what @expected says should come. */
static gboolean
unexpected (Scanner *s, const char *expected, GError **error)
{
  guchar c = peek (s);

  if (at_end (s))
    return not_json (s, s->pos, error, "the text ends where %s should come", expected);
  if (c == '/' || c == '#')
    return not_json (s, s->pos, error, "comments are not allowed");
  if (c == '\'')
    return not_json (s, s->pos, error, "single quotes are not allowed (strings take double quotes)");
  if (c == 0xEF && s->pos + 2 < s->length && (guchar) s->text[s->pos + 1] == 0xBB &&
      (guchar) s->text[s->pos + 2] == 0xBF)
    return not_json (s, s->pos, error, "a byte order mark is not allowed");
  if (c >= 0x21 && c < 0x7F)
    return not_json (s, s->pos, error, "'%c' where %s should come", c, expected);
  return not_json (s, s->pos, error, "byte 0x%02x where %s should come", c, expected);
}

static int
hex_value (guchar c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Reads the four hex digits of a \u escape at the scanner. */
static gboolean
read_hex4 (Scanner *s, gsize escape_at, gunichar *out, GError **error)
{
  gunichar value = 0;

  for (guint i = 0; i < 4; i++)
    {
      int digit = s->pos < s->length ? hex_value (s->text[s->pos]) : -1;

      if (digit < 0)
        return not_json (s, escape_at, error, "\\u takes four hex digits");
      value = value * 16 + (gunichar) digit;
      s->pos++;
    }
  *out = value;
  return TRUE;
}

/* The escape at the scanner, just past its backslash; decoded into
 * @decoded when that is not NULL. */
static gboolean
read_escape (Scanner *s, GString *decoded, GError **error)
{
  gsize escape_at = s->pos - 1;
  guchar c = peek (s);
  gunichar value;

  if (at_end (s))
    return not_json (s, escape_at, error, "a string is not closed");
  s->pos++;
  switch (c)
    {
    case '"': case '\\': case '/':
      value = c;
      break;
    case 'b':
      value = '\b';
      break;
    case 'f':
      value = '\f';
      break;
    case 'n':
      value = '\n';
      break;
    case 'r':
      value = '\r';
      break;
    case 't':
      value = '\t';
      break;
    case 'u':
      if (!read_hex4 (s, escape_at, &value, error))
        return FALSE;
      if (value == 0)
        return refused (s, escape_at, error, "\\u0000 (NUL) is not allowed in a string");
      if (value >= 0xDC00 && value <= 0xDFFF)
        return refused (s, escape_at, error,
                        "\\u%04X is a lone surrogate, not a character", value);
      if (value >= 0xD800 && value <= 0xDBFF)
        {
          gunichar low;

          if (s->pos + 1 >= s->length || s->text[s->pos] != '\\' || s->text[s->pos + 1] != 'u')
            return refused (s, escape_at, error,
                            "\\u%04X is a lone surrogate, not a character", value);
          s->pos += 2;
          if (!read_hex4 (s, s->pos - 2, &low, error))
            return FALSE;
          if (low < 0xDC00 || low > 0xDFFF)
            return refused (s, escape_at, error,
                            "\\u%04X is a lone surrogate, not a character", value);
          value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
        }
      break;
    default:
      if (c >= 0x21 && c < 0x7F)
        return not_json (s, escape_at, error, "\\%c is not a JSON escape", c);
      return not_json (s, escape_at, error, "a backslash before byte 0x%02x is not a JSON escape", c);
    }
  s->escaped = TRUE;
  if (decoded != NULL)
    g_string_append_unichar (decoded, value);
  return TRUE;
}

/* The length of the UTF-8 sequence at @p (@left bytes remain), or 0 if
 * it is not one: RFC 3629's table, so no overlong forms, no surrogates
 * and nothing past U+10FFFF. */
static guint
utf8_sequence (const guchar *p, gsize left)
{
  guchar lo = 0x80, hi = 0xBF;
  guint n;

  if (p[0] >= 0xC2 && p[0] <= 0xDF)
    n = 2;
  else if (p[0] >= 0xE0 && p[0] <= 0xEF)
    {
      n = 3;
      if (p[0] == 0xE0)
        lo = 0xA0;
      else if (p[0] == 0xED)
        hi = 0x9F;
    }
  else if (p[0] >= 0xF0 && p[0] <= 0xF4)
    {
      n = 4;
      if (p[0] == 0xF0)
        lo = 0x90;
      else if (p[0] == 0xF4)
        hi = 0x8F;
    }
  else
    return 0;
  if (left < n || p[1] < lo || p[1] > hi)
    return 0;
  for (guint i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xBF)
      return 0;
  return n;
}

/* The bytes a string holds as they are: ASCII but the control
 * characters, the quote and the backslash. */
static const gboolean plain_in_string[256] = {
  [0x20 ... 0x21] = TRUE, [0x23 ... 0x5b] = TRUE, [0x5d ... 0x7f] = TRUE,
};

/* The string at the scanner (on its opening quote); decoded into
 * @decoded when that is not NULL. */
static gboolean
read_string (Scanner *s, GString *decoded, GError **error)
{
  gsize start = s->pos;
  gsize run;           /* where the bytes not yet copied to @decoded begin */

  s->pos++;
  run = s->pos;
  for (;;)
    {
      const guchar *p;
      guint n;

      /* Most bytes are plain ASCII and need no closer look. */
      while (s->pos < s->length && plain_in_string[(guchar) s->text[s->pos]])
        s->pos++;
      p = (const guchar *) s->text + s->pos;
      if (at_end (s))
        return not_json (s, start, error, "a string is not closed");
      if (*p == '"' || *p == '\\')
        {
          if (decoded != NULL)
            g_string_append_len (decoded, s->text + run, s->pos - run);
          s->pos++;
          if (*p == '"')
            return TRUE;
          if (!read_escape (s, decoded, error))
            return FALSE;
          run = s->pos;
          continue;
        }
      if (*p < 0x20)
        return not_json (s, s->pos, error,
                         "a raw control character (0x%02x) in a string; write it as an escape",
                         *p);
      n = *p < 0x80 ? 1 : utf8_sequence (p, s->length - s->pos);
      if (n == 0)
        return not_json (s, s->pos, error, "not valid UTF-8");
      s->pos += n;
    }
}

/* The string at the scanner, read for a document: *@text points to its
 * bytes in the text itself when it holds no escape (most do), else to
 * them decoded in @s->string; not ended. */
static gboolean
read_text (Scanner *s, const char **text, gsize *length, GError **error)
{
  gsize start = s->pos;

  s->escaped = FALSE;
  if (!read_string (s, NULL, error))
    return FALSE;
  if (!s->escaped)
    {
      *text = s->text + start + 1;
      *length = s->pos - start - 2;
      return TRUE;
    }
  /* Read again, decoding: it was found whole the first time. */
  s->pos = start;
  g_string_truncate (s->string, 0);
  if (!read_string (s, s->string, error))
    g_return_val_if_reached (FALSE);
  *text = s->string->str;
  *length = s->string->len;
  return TRUE;
}

static gboolean
read_digits (Scanner *s, const char *after, gsize at, GError **error)
{
  if (!g_ascii_isdigit (peek (s)))
    return not_json (s, at, error, "a digit must follow %s", after);
  while (g_ascii_isdigit (peek (s)))
    s->pos++;
  return TRUE;
}

/* json-glib saturates integers past 64 bits and turns 1e400 into an
 * infinity it cannot write back; such numbers are refused here. */
static gboolean
read_number (Scanner *s, MvJson **made, GError **error)
{
  gsize start = s->pos;
  gboolean integral = TRUE;
  gboolean too_large;
  char number[64];
  g_autofree char *long_number = NULL;
  const char *digits;
  gint64 integer = 0;
  double real = 0;

  if (peek (s) == '-')
    {
      s->pos++;
      if (peek (s) == 'I')
        return not_json (s, start, error, "NaN and Infinity are not JSON numbers");
    }
  if (peek (s) == '0')
    {
      s->pos++;
      if (g_ascii_isdigit (peek (s)))
        return not_json (s, start, error, "a number may not have leading zeros");
    }
  else if (!read_digits (s, "'-'", start, error))
    return FALSE;
  if (peek (s) == '.')
    {
      s->pos++;
      integral = FALSE;
      if (!read_digits (s, "'.'", start, error))
        return FALSE;
    }
  if (peek (s) == 'e' || peek (s) == 'E')
    {
      s->pos++;
      integral = FALSE;
      if (peek (s) == '+' || peek (s) == '-')
        s->pos++;
      if (!read_digits (s, "the exponent", start, error))
        return FALSE;
    }

  /* Most numbers are short: they are copied to the stack to be ended. */
  if (s->pos - start < sizeof number)
    {
      memcpy (number, s->text + start, s->pos - start);
      number[s->pos - start] = '\0';
      digits = number;
    }
  else
    digits = long_number = g_strndup (s->text + start, s->pos - start);
  if (integral)
    {
      errno = 0;
      integer = g_ascii_strtoll (digits, NULL, 10);
      too_large = errno == ERANGE;
    }
  else
    too_large = isinf (real = g_ascii_strtod (digits, NULL));
  if (too_large)
    return refused (s, start, error, "the number at byte %" G_GSIZE_FORMAT " is too large to hold"
                    " (integers fit in 64 bits, other numbers in a double)", start);
  if (s->doc != NULL)
    {
      *made = mv_json_doc_add_value (s->doc, integral ? MV_JSON_INTEGER : MV_JSON_REAL);
      if (integral)
        (*made)->integer = integer;
      else
        (*made)->real = real;
    }
  return TRUE;
}

static gboolean
read_literal (Scanner *s, MvJson **made, GError **error)
{
  static const char *const literals[] = { "true", "false", "null" };
  gsize n = word_length (s);

  for (guint i = 0; i < G_N_ELEMENTS (literals); i++)
    if (n == strlen (literals[i]) && memcmp (s->text + s->pos, literals[i], n) == 0)
      {
        s->pos += n;
        if (s->doc != NULL)
          {
            *made = mv_json_doc_add_value (s->doc, i == 2 ? MV_JSON_NULL : MV_JSON_BOOLEAN);
            (*made)->boolean = i == 0;
          }
        return TRUE;
      }
  if ((n == 3 && memcmp (s->text + s->pos, "NaN", 3) == 0) ||
      (n == 8 && memcmp (s->text + s->pos, "Infinity", 8) == 0))
    return not_json (s, s->pos, error, "NaN and Infinity are not JSON numbers");
  return not_json (s, s->pos, error,
                   "a bare word is not a JSON value (strings take double quotes)");
}

static gboolean
push (Scanner *s, gboolean object, MvJson *container, GError **error)
{
  Level *level;

  if (s->depth >= s->limits->max_depth)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: nesting depth %u is more than the limit of %u",
                   s->what, s->depth + 1, s->limits->max_depth);
      return FALSE;
    }
  level = &s->levels[s->depth++];
  *level = (Level) { .object = object, .value = container };
  if (s->doc == NULL && object)
    level->keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  s->pos++;
  return TRUE;
}

static void
pop (Scanner *s)
{
  Level *level = &s->levels[--s->depth];

  g_clear_pointer (&level->keys, g_hash_table_unref);
  level->value = NULL;
  level->last = NULL;
  level->key = NULL;
  s->pos++;
}

/* Links @value in after the last value of @level. */
static void
attach_value (Level *level, MvJson *value)
{
  MvJson *container = level->value;

  value->index = container->count++;
  if (level->object)
    {
      value->name = level->key;
      value->name_length = level->key_length;
      if (level->keys != NULL)
        g_hash_table_add (level->keys, (char *) value->name);
    }
  if (level->last == NULL)
    container->first = value;
  else
    level->last->next = value;
  level->last = value;
}

/* Puts @value where the scanner is: the root, the next element of an
 * array or the value of the key just read. */
static void
attach (Scanner *s, MvJson *value)
{
  if (s->depth == 0)
    s->root = value;
  else
    attach_value (&s->levels[s->depth - 1], value);
}

static gboolean
read_value (Scanner *s, State *state, GError **error)
{
  guchar c = peek (s);
  MvJson *made = NULL;

  *state = AFTER_VALUE;
  switch (c)
    {
    case '{':
    case '[':
      *state = c == '{' ? EXPECT_KEY_OR_END : EXPECT_VALUE_OR_END;
      /* In its place first: it is filled in from the level it opens. */
      if (s->doc != NULL && s->depth < s->limits->max_depth)
        {
          made = mv_json_doc_add_value (s->doc, c == '{' ? MV_JSON_OBJECT : MV_JSON_ARRAY);
          attach (s, made);
        }
      return push (s, c == '{', made, error);
    case '"':
      if (s->doc == NULL)
        return read_string (s, NULL, error);
      {
        const char *text;
        gsize length;

        if (!read_text (s, &text, &length, error))
          return FALSE;
        made = mv_json_doc_add_value (s->doc, MV_JSON_STRING);
        made->string = mv_json_doc_add_text (s->doc, text, length);
      }
      break;
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
      if (!read_number (s, &made, error))
        return FALSE;
      break;
    case '+':
      return not_json (s, s->pos, error, "a number may not start with '+'");
    case '.':
      return not_json (s, s->pos, error, "a number must start with a digit");
    case ',':
    case ']':
    case '}':
      return not_json (s, s->pos, error, "a value is missing before '%c'", c);
    default:
      if (!g_ascii_isalpha (c))
        return unexpected (s, "a value", error);
      if (!read_literal (s, &made, error))
        return FALSE;
      break;
    }
  if (made != NULL)
    attach (s, made);
  return TRUE;
}

static gboolean
duplicate_key (Scanner *s, gsize start, const char *key, gsize length, GError **error)
{
  g_autofree char *excerpt = mv_text_excerpt (key, length, KEY_EXCERPT_BYTES);

  return refused (s, start, error, "the key \"%s\" appears twice", excerpt);
}

/* The key at the scanner, read into the document: the level points to
 * the document's copy, which becomes its member's name. */
static gboolean
read_document_key (Scanner *s, Level *level, GError **error)
{
  gsize start = s->pos;
  const char *text;
  const char *key;
  gsize length;

  if (!read_text (s, &text, &length, error))
    return FALSE;
  key = mv_json_doc_add_text (s->doc, text, length);
  if (level->keys != NULL)
    {
      if (g_hash_table_contains (level->keys, key))
        return duplicate_key (s, start, key, length, error);
    }
  else
    mv_json_each (member, level->value)
      if (member->name_length == length && memcmp (member->name, key, length) == 0)
        return duplicate_key (s, start, key, length, error);
  level->key = key;
  level->key_length = length;
  if (level->keys == NULL && level->value->count >= KEYS_WALKED)
    {
      level->keys = g_hash_table_new (g_str_hash, g_str_equal);
      mv_json_each (member, level->value)
        g_hash_table_add (level->keys, (char *) member->name);
    }
  return TRUE;
}

static gboolean
read_key (Scanner *s, GError **error)
{
  Level *level = &s->levels[s->depth - 1];
  gsize start = s->pos;
  guchar c = peek (s);

  level->key = NULL;
  if (c != '"')
    {
      if (c == '}')
        return not_json (s, s->pos, error, "trailing commas are not allowed");
      if (g_ascii_isalpha (c) || c == '_' || c == '$')
        return not_json (s, s->pos, error, "object keys are strings in double quotes");
      return unexpected (s, "a key in double quotes", error);
    }
  if (s->doc != NULL)
    return read_document_key (s, level, error);
  g_string_truncate (s->key, 0);
  if (!read_string (s, s->key, error))
    return FALSE;
  if (g_hash_table_contains (level->keys, s->key->str))
    return duplicate_key (s, start, s->key->str, s->key->len, error);
  level->key = g_strdup (s->key->str);
  g_hash_table_add (level->keys, (char *) level->key);
  return TRUE;
}

/* After a value inside an array or object: ',' or the closing bracket. */
static gboolean
read_separator (Scanner *s, State *state, GError **error)
{
  Level *level = &s->levels[s->depth - 1];
  char close = level->object ? '}' : ']';
  guchar c = peek (s);

  if (c == (guchar) close)
    {
      pop (s);
      *state = AFTER_VALUE;
      return TRUE;
    }
  if (c != ',')
    {
      if (at_end (s))
        return not_json (s, s->pos, error, "the text ends inside an %s",
                         level->object ? "object" : "array");
      return unexpected (s, level->object ? "',' or '}'" : "',' or ']'", error);
    }
  s->pos++;
  skip_whitespace (s);
  if (peek (s) == (guchar) close)
    return not_json (s, s->pos - 1, error, "trailing commas are not allowed");
  if (level->object)
    *state = EXPECT_KEY;
  else
    {
      level->index++;
      *state = EXPECT_VALUE;
    }
  return TRUE;
}

static gboolean
scan (Scanner *s, GError **error)
{
  State state = EXPECT_VALUE;

  skip_whitespace (s);
  if (at_end (s))
    return not_json (s, s->pos, error, "the document is empty");

  for (;;)
    {
      gboolean ok = TRUE;

      skip_whitespace (s);
      switch (state)
        {
        case EXPECT_VALUE_OR_END:
          if (peek (s) == ']')
            {
              pop (s);
              state = AFTER_VALUE;
              break;
            }
          G_GNUC_FALLTHROUGH;
        case EXPECT_VALUE:
          ok = read_value (s, &state, error);
          break;
        case EXPECT_KEY_OR_END:
          if (peek (s) == '}')
            {
              pop (s);
              state = AFTER_VALUE;
              break;
            }
          G_GNUC_FALLTHROUGH;
        case EXPECT_KEY:
          ok = read_key (s, error);
          state = EXPECT_COLON;
          break;
        case EXPECT_COLON:
          if (peek (s) != ':')
            return unexpected (s, "':' after a key", error);
          s->pos++;
          state = EXPECT_VALUE;
          break;
        case AFTER_VALUE:
          if (s->depth == 0)
            {
              if (at_end (s))
                return TRUE;
              if (peek (s) == '/' || peek (s) == '#')
                return not_json (s, s->pos, error, "comments are not allowed");
              return not_json (s, s->pos, error, "only one value is allowed, and more follows it");
            }
          ok = read_separator (s, &state, error);
          break;
        }
      if (!ok)
        return FALSE;
    }
}

/* Scans @text; builds its document into @s->doc unless that is NULL. */
static gboolean
read_document (Scanner *s, const char *text, gssize length, const MvJsonLimits *limits,
               const char *what, GError **error)
{
  g_autofree Level *levels = NULL;
  Level stack_levels[64];
  g_autoptr(GString) key = NULL;
  g_autoptr(GString) string = NULL;
  guint max_depth = MAX (limits->max_depth, 1);
  gboolean ok;

  s->length = length < 0 ? strlen (text) : (gsize) length;
  if (s->length > limits->max_bytes)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: %" G_GSIZE_FORMAT " bytes is more than the limit of %" G_GSIZE_FORMAT,
                   what, s->length, limits->max_bytes);
      return FALSE;
    }
  s->text = text != NULL ? text : "";
  s->limits = limits;
  s->what = what;
  /* Records and specs nest a few dozen deep at most: their levels fit on
   * the stack, and ten thousand records at a start need no allocation. */
  if (max_depth <= G_N_ELEMENTS (stack_levels))
    s->levels = stack_levels;
  else
    s->levels = levels = g_new (Level, max_depth);
  if (s->doc != NULL)
    s->string = string = g_string_new (NULL);
  else
    s->key = key = g_string_new (NULL);

  ok = scan (s, error);
  /* A failure leaves levels open. */
  while (s->depth > 0)
    g_clear_pointer (&s->levels[--s->depth].keys, g_hash_table_unref);
  s->levels = NULL;
  return ok;
}

gboolean
mv_json_check (const char *text, gssize length, const MvJsonLimits *limits, const char *what,
               GError **error)
{
  Scanner s = { 0 };

  g_return_val_if_fail (text != NULL || length == 0, FALSE);
  g_return_val_if_fail (limits != NULL && what != NULL, FALSE);

  return read_document (&s, text, length, limits, what, error);
}

MvJsonDoc *
mv_json_read (const char *text, gssize length, const MvJsonLimits *limits, const char *what,
              GError **error)
{
  g_autoptr(MvJsonDoc) doc = NULL;
  Scanner s = { 0 };
  gsize size;

  g_return_val_if_fail (text != NULL || length == 0, NULL);
  g_return_val_if_fail (limits != NULL && what != NULL, NULL);

  /* A document's values take about twice its text: most of it in one
   * block. A text past the limit is refused before any of it is made. */
  size = length < 0 ? strlen (text) : (gsize) length;
  s.doc = doc = mv_json_doc_new (size <= limits->max_bytes ? size * 2 + 256 : 0);
  if (!read_document (&s, text, (gssize) size, limits, what, error))
    return NULL;
  mv_json_doc_set_root (doc, s.root);
  return g_steal_pointer (&doc);
}

JsonNode *
mv_json_parse (const char *text, gssize length, const MvJsonLimits *limits, const char *what,
               GError **error)
{
  g_autoptr(MvJsonDoc) doc = mv_json_read (text, length, limits, what, error);

  return doc != NULL ? mv_json_to_node (mv_json_doc_root (doc)) : NULL;
}
