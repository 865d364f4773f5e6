#ifndef ADLER32_H
#define ADLER32_H

#include <stddef.h>
#include <stdint.h>

/* adler32 returns the Adler-32 checksum of len bytes at data, continuing
 * from adler (1 for a fresh checksum). */
uint32_t adler32(uint32_t adler, const unsigned char *data, size_t len);

#endif
