/* SHA-256 (FIPS 180-4), for the agent, which has the C library only: it
 * checks a temporary console key against the digest in its metadata. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define MV_SHA256_BYTES 32

void mv_sha256 (const void *data, size_t len, uint8_t digest[MV_SHA256_BYTES]);
/* The digest in lower-case hexadecimal: @hex holds 2 * MV_SHA256_BYTES + 1. */
void mv_sha256_hex (const void *data, size_t len, char hex[2 * MV_SHA256_BYTES + 1]);
