/* The agent protocol's frames and fields (protocol.h). */
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

#define FIELD_HEADER_BYTES 5

static uint32_t
get_be32 (const uint8_t *p)
{
  return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

static void
set_be32 (uint8_t *p, uint32_t v)
{
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

long
mv_agent_frame_parse (const uint8_t *buf, size_t len, MvAgentFrame *frame, const char **why)
{
  uint32_t body;

  if (len < 4)
    return 0;
  body = get_be32 (buf);
  if (body < MV_AGENT_FRAME_HEADER_BYTES - 4)
    {
      *why = "a frame shorter than its header";
      return -1;
    }
  if (body > MV_AGENT_FRAME_MAX_BYTES - 4)
    {
      *why = "a frame over the 4 MiB limit";
      return -1;
    }
  if (len - 4 < body)
    return 0;
  frame->type = buf[4];
  frame->channel = get_be32 (buf + 5);
  frame->payload = buf + MV_AGENT_FRAME_HEADER_BYTES;
  frame->payload_len = body - (MV_AGENT_FRAME_HEADER_BYTES - 4);
  return (long) body + 4;
}

void
mv_agent_fields_init (MvAgentFields *fields, const uint8_t *data, size_t len)
{
  fields->next = data;
  fields->end = data + len;
}

int
mv_agent_fields_next (MvAgentFields *fields, MvAgentField *field)
{
  size_t left = (size_t) (fields->end - fields->next);
  uint32_t len;

  if (left == 0)
    return 0;
  if (left < FIELD_HEADER_BYTES)
    return -1;
  len = get_be32 (fields->next + 1);
  if (len > left - FIELD_HEADER_BYTES)
    return -1;
  field->tag = fields->next[0];
  field->len = len;
  field->value = fields->next + FIELD_HEADER_BYTES;
  fields->next += FIELD_HEADER_BYTES + len;
  return 1;
}

static bool
is_nested (uint8_t tag, const uint8_t *nested, size_t n_nested)
{
  return nested && memchr (nested, tag, n_nested) != NULL;
}

static bool
fields_valid (const uint8_t *data, size_t len, const uint8_t *nested, size_t n_nested, int depth)
{
  MvAgentFields fields;
  MvAgentField field;
  int r;

  if (depth > MV_AGENT_NEST_MAX_DEPTH)
    return false;
  mv_agent_fields_init (&fields, data, len);
  while ((r = mv_agent_fields_next (&fields, &field)) > 0)
    if (is_nested (field.tag, nested, n_nested) &&
        !fields_valid (field.value, field.len, nested, n_nested, depth + 1))
      return false;
  return r == 0;
}

bool
mv_agent_fields_valid (const uint8_t *data, size_t len, const uint8_t *nested, size_t n_nested)
{
  return fields_valid (data, len, nested, n_nested, 1);
}

bool
mv_agent_field_u32 (const MvAgentField *field, uint32_t *out)
{
  if (field->len != 4)
    return false;
  *out = get_be32 (field->value);
  return true;
}

bool
mv_agent_field_u64 (const MvAgentField *field, uint64_t *out)
{
  if (field->len != 8)
    return false;
  *out = ((uint64_t) get_be32 (field->value) << 32) | get_be32 (field->value + 4);
  return true;
}

bool
mv_agent_field_str (const MvAgentField *field, char *out, size_t size)
{
  if (field->len >= size || memchr (field->value, '\0', field->len))
    return false;
  memcpy (out, field->value, field->len);
  out[field->len] = '\0';
  return true;
}

char *
mv_agent_field_strdup (const MvAgentField *field)
{
  char *out;

  if (memchr (field->value, '\0', field->len))
    return NULL;
  out = malloc ((size_t) field->len + 1);
  if (!out)
    return NULL;
  memcpy (out, field->value, field->len);
  out[field->len] = '\0';
  return out;
}

bool
mv_agent_frame_find (const MvAgentFrame *frame, uint8_t tag, MvAgentField *field)
{
  MvAgentFields fields;

  mv_agent_fields_init (&fields, frame->payload, frame->payload_len);
  while (mv_agent_fields_next (&fields, field) > 0)
    if (field->tag == tag)
      return true;
  return false;
}

bool
mv_agent_frame_u32 (const MvAgentFrame *frame, uint8_t tag, uint32_t *out)
{
  MvAgentField field;

  return mv_agent_frame_find (frame, tag, &field) && mv_agent_field_u32 (&field, out);
}

/* ---- building ---- */

void
mv_agent_buf_init (MvAgentBuf *buf)
{
  memset (buf, 0, sizeof *buf);
}

void
mv_agent_buf_clear (MvAgentBuf *buf)
{
  free (buf->data);
  mv_agent_buf_init (buf);
}

void
mv_agent_buf_consume (MvAgentBuf *buf, size_t n)
{
  if (n >= buf->len)
    {
      buf->len = 0;
      return;
    }
  memmove (buf->data, buf->data + n, buf->len - n);
  buf->len -= n;
}

static bool
reserve (MvAgentBuf *buf, size_t more)
{
  size_t cap;
  uint8_t *data;

  if (buf->failed)
    return false;
  if (buf->len - buf->frame_start + more > MV_AGENT_FRAME_MAX_BYTES)
    {
      buf->failed = true;
      return false;
    }
  if (buf->len + more <= buf->cap)
    return true;
  cap = buf->cap ? buf->cap : 4096;
  while (cap < buf->len + more)
    cap *= 2;
  data = realloc (buf->data, cap);
  if (!data)
    {
      buf->failed = true;
      return false;
    }
  buf->data = data;
  buf->cap = cap;
  return true;
}

void
mv_agent_buf_begin (MvAgentBuf *buf, uint8_t type, uint32_t channel)
{
  buf->failed = false;
  buf->depth = 0;
  buf->frame_start = buf->len;
  if (!reserve (buf, MV_AGENT_FRAME_HEADER_BYTES))
    return;
  set_be32 (buf->data + buf->len, 0);
  buf->data[buf->len + 4] = type;
  set_be32 (buf->data + buf->len + 5, channel);
  buf->len += MV_AGENT_FRAME_HEADER_BYTES;
}

void
mv_agent_buf_put (MvAgentBuf *buf, uint8_t tag, const void *value, size_t len)
{
  if (len > MV_AGENT_FRAME_MAX_BYTES || !reserve (buf, FIELD_HEADER_BYTES + len))
    {
      buf->failed = true;
      return;
    }
  buf->data[buf->len] = tag;
  set_be32 (buf->data + buf->len + 1, (uint32_t) len);
  if (len)
    memcpy (buf->data + buf->len + FIELD_HEADER_BYTES, value, len);
  buf->len += FIELD_HEADER_BYTES + len;
}

void
mv_agent_buf_put_str (MvAgentBuf *buf, uint8_t tag, const char *value)
{
  mv_agent_buf_put (buf, tag, value, strlen (value));
}

void
mv_agent_buf_put_u32 (MvAgentBuf *buf, uint8_t tag, uint32_t value)
{
  uint8_t be[4];

  set_be32 (be, value);
  mv_agent_buf_put (buf, tag, be, sizeof be);
}

void
mv_agent_buf_put_u64 (MvAgentBuf *buf, uint8_t tag, uint64_t value)
{
  uint8_t be[8];

  set_be32 (be, (uint32_t) (value >> 32));
  set_be32 (be + 4, (uint32_t) value);
  mv_agent_buf_put (buf, tag, be, sizeof be);
}

void
mv_agent_buf_open (MvAgentBuf *buf, uint8_t tag)
{
  if (buf->depth >= MV_AGENT_NEST_MAX_DEPTH - 1)
    buf->failed = true;
  if (!reserve (buf, FIELD_HEADER_BYTES))
    return;
  buf->data[buf->len] = tag;
  buf->nest[buf->depth++] = buf->len;
  buf->len += FIELD_HEADER_BYTES;
}

void
mv_agent_buf_close (MvAgentBuf *buf)
{
  size_t at;

  if (buf->failed || buf->depth == 0)
    {
      buf->failed = true;
      return;
    }
  at = buf->nest[--buf->depth];
  set_be32 (buf->data + at + 1, (uint32_t) (buf->len - at - FIELD_HEADER_BYTES));
}

bool
mv_agent_buf_end (MvAgentBuf *buf)
{
  if (buf->failed || buf->depth != 0)
    {
      if (buf->len > buf->frame_start)
        buf->len = buf->frame_start;
      buf->failed = false;
      buf->depth = 0;
      return false;
    }
  set_be32 (buf->data + buf->frame_start, (uint32_t) (buf->len - buf->frame_start - 4));
  buf->frame_start = buf->len;
  return true;
}

const char *
mv_agent_type_name (uint8_t type)
{
  switch (type)
    {
    case MV_AGENT_HELLO: return "HELLO";
    case MV_AGENT_CONFIG: return "CONFIG";
    case MV_AGENT_READY: return "READY";
    case MV_AGENT_FAILED: return "FAILED";
    case MV_AGENT_EXIT: return "EXIT";
    case MV_AGENT_EXIT_ACK: return "EXIT_ACK";
    case MV_AGENT_EXEC: return "EXEC";
    case MV_AGENT_EXEC_EXIT: return "EXEC_EXIT";
    case MV_AGENT_DATA: return "DATA";
    case MV_AGENT_EOF: return "EOF";
    case MV_AGENT_WINDOW: return "WINDOW";
    case MV_AGENT_SIGNAL: return "SIGNAL";
    case MV_AGENT_METADATA: return "METADATA";
    case MV_AGENT_HEALTH: return "HEALTH";
    case MV_AGENT_POWEROFF: return "POWEROFF";
    case MV_AGENT_PING: return "PING";
    case MV_AGENT_PONG: return "PONG";
    case MV_AGENT_USAGE: return "USAGE";
    case MV_AGENT_REIDENTIFY: return "REIDENTIFY";
    case MV_AGENT_RESIZE: return "RESIZE";
    case MV_AGENT_REIDENTIFIED: return "REIDENTIFIED";
    case MV_AGENT_OUTPUT: return "OUTPUT";
    default: return "unknown";
    }
}
