/* The agent protocol's framing, fields and builder (src/guest/protocol.c). */
#include <glib.h>
#include <string.h>

#include "guest/protocol.h"

static const uint8_t nested[] = { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK };

static void
put_be32 (uint8_t *p, uint32_t v)
{
  p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static void
test_parse_whole_and_partial (void)
{
  MvAgentBuf b;
  MvAgentFrame frame;
  const char *why = NULL;
  uint32_t version = 0;

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_HELLO, 7);
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_VERSION, 1);
  g_assert_true (mv_agent_buf_end (&b));
  g_assert_cmpuint (b.len, ==, MV_AGENT_FRAME_HEADER_BYTES + 5 + 4);

  g_assert_cmpint (mv_agent_frame_parse (b.data, b.len, &frame, &why), ==, (long) b.len);
  g_assert_cmpuint (frame.type, ==, MV_AGENT_HELLO);
  g_assert_cmpuint (frame.channel, ==, 7);
  g_assert_cmpuint (frame.payload_len, ==, 9);
  g_assert_true (mv_agent_frame_u32 (&frame, MV_AGENT_F_VERSION, &version));
  g_assert_cmpuint (version, ==, 1);

  /* Every proper prefix is "not yet". */
  for (size_t len = 0; len < b.len; len++)
    g_assert_cmpint (mv_agent_frame_parse (b.data, len, &frame, &why), ==, 0);
  mv_agent_buf_clear (&b);
}

static void
test_parse_bad_lengths (void)
{
  uint8_t buf[16] = { 0 };
  MvAgentFrame frame;
  const char *why = NULL;

  put_be32 (buf, MV_AGENT_FRAME_HEADER_BYTES - 5);
  g_assert_cmpint (mv_agent_frame_parse (buf, sizeof buf, &frame, &why), ==, -1);
  g_assert_nonnull (why);

  why = NULL;
  put_be32 (buf, MV_AGENT_FRAME_MAX_BYTES - 3);
  g_assert_cmpint (mv_agent_frame_parse (buf, sizeof buf, &frame, &why), ==, -1);
  g_assert_nonnull (why);

  /* The largest length allowed is only "not yet". */
  put_be32 (buf, MV_AGENT_FRAME_MAX_BYTES - 4);
  g_assert_cmpint (mv_agent_frame_parse (buf, sizeof buf, &frame, &why), ==, 0);
}

static void
test_fields (void)
{
  /* tag 1, len 4, value; then tag 2, len 3 but only 2 bytes */
  uint8_t data[] = { 1, 0, 0, 0, 4, 'a', 'b', 'c', 'd', 2, 0, 0, 0, 3, 'x', 'y' };
  MvAgentFields fields;
  MvAgentField field;
  char str[8];

  mv_agent_fields_init (&fields, data, sizeof data);
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, 1);
  g_assert_cmpuint (field.tag, ==, 1);
  g_assert_true (mv_agent_field_str (&field, str, sizeof str));
  g_assert_cmpstr (str, ==, "abcd");
  g_assert_false (mv_agent_field_str (&field, str, 4));
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, -1);
  g_assert_false (mv_agent_fields_valid (data, sizeof data, NULL, 0));
  g_assert_true (mv_agent_fields_valid (data, 9, NULL, 0));
  /* A field header cut short. */
  g_assert_false (mv_agent_fields_valid (data, 3, NULL, 0));
  g_assert_true (mv_agent_fields_valid (data, 0, NULL, 0));

  /* A string with a NUL in it is not one. */
  data[6] = '\0';
  mv_agent_fields_init (&fields, data, 9);
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, 1);
  g_assert_false (mv_agent_field_str (&field, str, sizeof str));
  g_assert_null (mv_agent_field_strdup (&field));
}

/* MOUNT inside MOUNT inside ...: @depth levels, the innermost empty. */
static GByteArray *
nest (int depth)
{
  GByteArray *inner = g_byte_array_new ();

  for (int i = 0; i < depth; i++)
    {
      GByteArray *outer = g_byte_array_new ();
      uint8_t header[5] = { MV_AGENT_F_MOUNT };

      put_be32 (header + 1, inner->len);
      g_byte_array_append (outer, header, 5);
      g_byte_array_append (outer, inner->data, inner->len);
      g_byte_array_unref (inner);
      inner = outer;
    }
  return inner;
}

static void
test_nested_depth (void)
{
  g_autoptr (GByteArray) ok = nest (MV_AGENT_NEST_MAX_DEPTH - 1);
  g_autoptr (GByteArray) deep = nest (MV_AGENT_NEST_MAX_DEPTH + 1);
  g_autoptr (GByteArray) broken = nest (2);

  g_assert_true (mv_agent_fields_valid (ok->data, ok->len, nested, sizeof nested));
  g_assert_false (mv_agent_fields_valid (deep->data, deep->len, nested, sizeof nested));
  /* Not nested for a reader that does not know the tag. */
  g_assert_true (mv_agent_fields_valid (deep->data, deep->len, NULL, 0));
  /* An inner field that is not whole. */
  broken->data[9] = 1;
  g_assert_false (mv_agent_fields_valid (broken->data, broken->len, nested, sizeof nested));
  g_assert_true (mv_agent_fields_valid (broken->data, broken->len, NULL, 0));
}

static void
test_builder_round_trip (void)
{
  MvAgentBuf b;
  MvAgentFrame frame;
  MvAgentFields fields, inner;
  MvAgentField field;
  const char *why = NULL;
  uint64_t size = 0;
  uint32_t mode = 0;
  char str[64];

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&b, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_open (&b, MV_AGENT_F_MOUNT);
  mv_agent_buf_put_str (&b, MV_AGENT_F_MOUNT_TYPE, "tmpfs");
  mv_agent_buf_put_u64 (&b, MV_AGENT_F_SIZE, G_GUINT64_CONSTANT (0x100000000));
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_MODE, 01777);
  mv_agent_buf_close (&b);
  mv_agent_buf_put_str (&b, MV_AGENT_F_ARGV, "-c");
  g_assert_true (mv_agent_buf_end (&b));
  /* A second frame after it, in the same buffer. */
  mv_agent_buf_begin (&b, MV_AGENT_PING, 0);
  g_assert_true (mv_agent_buf_end (&b));

  g_assert_cmpint (mv_agent_frame_parse (b.data, b.len, &frame, &why), >, 0);
  g_assert_true (mv_agent_fields_valid (frame.payload, frame.payload_len, nested, sizeof nested));
  mv_agent_fields_init (&fields, frame.payload, frame.payload_len);
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, 1);
  g_assert_true (mv_agent_field_str (&field, str, sizeof str));
  g_assert_cmpstr (str, ==, "sh");
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, 1);
  g_assert_cmpuint (field.tag, ==, MV_AGENT_F_MOUNT);
  mv_agent_fields_init (&inner, field.value, field.len);
  g_assert_cmpint (mv_agent_fields_next (&inner, &field), ==, 1);
  g_assert_true (mv_agent_field_str (&field, str, sizeof str));
  g_assert_cmpstr (str, ==, "tmpfs");
  g_assert_cmpint (mv_agent_fields_next (&inner, &field), ==, 1);
  g_assert_true (mv_agent_field_u64 (&field, &size));
  g_assert_cmpuint (size, ==, G_GUINT64_CONSTANT (0x100000000));
  g_assert_false (mv_agent_field_u32 (&field, &mode));
  g_assert_cmpint (mv_agent_fields_next (&inner, &field), ==, 1);
  g_assert_true (mv_agent_field_u32 (&field, &mode));
  g_assert_cmpuint (mode, ==, 01777);
  g_assert_cmpint (mv_agent_fields_next (&inner, &field), ==, 0);
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, 1);
  g_assert_true (mv_agent_field_str (&field, str, sizeof str));
  g_assert_cmpstr (str, ==, "-c");
  g_assert_cmpint (mv_agent_fields_next (&fields, &field), ==, 0);
  mv_agent_buf_clear (&b);
}

static void
test_builder_over_limit (void)
{
  MvAgentBuf b;
  g_autofree uint8_t *big = g_malloc0 (MV_AGENT_FRAME_MAX_BYTES / 2);
  MvAgentFrame frame;
  const char *why = NULL;
  size_t before;

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_PING, 0);
  g_assert_true (mv_agent_buf_end (&b));
  before = b.len;

  mv_agent_buf_begin (&b, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put (&b, MV_AGENT_F_CONTENT, big, MV_AGENT_FRAME_MAX_BYTES / 2);
  mv_agent_buf_put (&b, MV_AGENT_F_CONTENT, big, MV_AGENT_FRAME_MAX_BYTES / 2);
  g_assert_false (mv_agent_buf_end (&b));
  /* The failed frame is dropped; the one before it stays whole. */
  g_assert_cmpuint (b.len, ==, before);
  g_assert_cmpint (mv_agent_frame_parse (b.data, b.len, &frame, &why), ==, (long) before);

  /* The builder works again for the next frame. */
  mv_agent_buf_begin (&b, MV_AGENT_PONG, 0);
  g_assert_true (mv_agent_buf_end (&b));
  g_assert_cmpuint (b.len, ==, before + MV_AGENT_FRAME_HEADER_BYTES);

  /* Nesting past the limit fails too. */
  mv_agent_buf_begin (&b, MV_AGENT_CONFIG, 0);
  for (int i = 0; i < MV_AGENT_NEST_MAX_DEPTH; i++)
    mv_agent_buf_open (&b, MV_AGENT_F_MOUNT);
  for (int i = 0; i < MV_AGENT_NEST_MAX_DEPTH; i++)
    mv_agent_buf_close (&b);
  g_assert_false (mv_agent_buf_end (&b));
  g_assert_cmpuint (b.len, ==, before + MV_AGENT_FRAME_HEADER_BYTES);
  mv_agent_buf_clear (&b);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/protocol/parse", test_parse_whole_and_partial);
  g_test_add_func ("/agent/protocol/parse-bad-lengths", test_parse_bad_lengths);
  g_test_add_func ("/agent/protocol/fields", test_fields);
  g_test_add_func ("/agent/protocol/nested-depth", test_nested_depth);
  g_test_add_func ("/agent/protocol/builder", test_builder_round_trip);
  g_test_add_func ("/agent/protocol/builder-over-limit", test_builder_over_limit);
  return g_test_run ();
}
