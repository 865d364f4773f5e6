#include "config.h"
#include "adler32.h"

#if !HAVE_STDINT_H
#error "stdint.h is required"
#endif

#define MOD_ADLER 65521u

uint32_t adler32(uint32_t adler, const unsigned char *data, size_t len)
{
	uint32_t a = adler & 0xffffu, b = adler >> 16;
	for (size_t i = 0; i < len; i++) {
		a = (a + data[i]) % MOD_ADLER;
		b = (b + a) % MOD_ADLER;
	}
	return (b << 16) | a;
}
