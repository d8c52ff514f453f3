/* The agent protocol's reader, as both ends run it on what the other
 * sends: the input is a stream of bytes, cut into frames one after the
 * other until one is not whole or not a frame; each frame's fields are
 * checked whole and then walked, nested ones included, reading every
 * value as each kind. */
#include "guest/protocol.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const uint8_t nested[] = { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK };

static void
walk (const uint8_t *data, size_t len, int depth)
{
  MvAgentFields fields;
  MvAgentField field;
  int r;

  mv_agent_fields_init (&fields, data, len);
  while ((r = mv_agent_fields_next (&fields, &field)) > 0)
    {
      char str[64];
      uint32_t u32;
      uint64_t u64;
      char *dup;

      if (field.value + field.len > data + len)
        abort ();
      mv_agent_field_u32 (&field, &u32);
      mv_agent_field_u64 (&field, &u64);
      mv_agent_field_str (&field, str, sizeof str);
      dup = mv_agent_field_strdup (&field);
      if (dup && strlen (dup) != field.len)
        abort ();
      free (dup);
      if ((field.tag == MV_AGENT_F_MOUNT || field.tag == MV_AGENT_F_HEALTH_CHECK) &&
          depth < MV_AGENT_NEST_MAX_DEPTH)
        walk (field.value, field.len, depth + 1);
    }
  /* A reader that checked the fields first never sees a broken one. */
  if (r < 0 && depth == 1)
    abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  while (size > 0)
    {
      MvAgentFrame frame;
      const char *why = NULL;
      long used = mv_agent_frame_parse (data, size, &frame, &why);

      if (used < 0 && !why)
        abort ();
      if (used <= 0)
        break;
      if ((size_t) used > size || frame.payload + frame.payload_len != data + used)
        abort ();
      mv_agent_type_name (frame.type);
      if (mv_agent_fields_valid (frame.payload, frame.payload_len, nested, sizeof nested))
        {
          MvAgentField field;

          walk (frame.payload, frame.payload_len, 1);
          mv_agent_frame_find (&frame, MV_AGENT_F_ARGV, &field);
        }
      data += used;
      size -= (size_t) used;
    }
  return 0;
}
