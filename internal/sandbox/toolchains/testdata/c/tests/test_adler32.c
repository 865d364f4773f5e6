#include <stdio.h>
#include <string.h>
#include "adler32.h"

static int failures;

static void check(const char *name, const char *input, uint32_t want)
{
	uint32_t got = adler32(1, (const unsigned char *)input, strlen(input));
	if (got != want) {
		printf("FAIL: %s: adler32(\"%s\") = %08x, want %08x\n", name, input, got, want);
		failures++;
	} else {
		printf("PASS: %s\n", name);
	}
}

int main(void)
{
	check("empty", "", 0x00000001u);
	check("a", "a", 0x00620062u);
	check("abc", "abc", 0x024d0127u);
	check("wikipedia", "Wikipedia", 0x11e60398u);

	/* Streaming in two halves gives the same checksum. */
	const char *s = "Wikipedia";
	uint32_t half = adler32(1, (const unsigned char *)s, 4);
	uint32_t whole = adler32(half, (const unsigned char *)s + 4, strlen(s) - 4);
	if (whole != 0x11e60398u) {
		printf("FAIL: streaming: %08x\n", whole);
		failures++;
	} else {
		printf("PASS: streaming\n");
	}
	return failures ? 1 : 0;
}
