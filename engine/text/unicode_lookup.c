/*
 * unicode_lookup.c — binary searches over llama.cpp's unicode tables
 * (unicode_data.h), with the ASCII cases answered first.
 */
#include "unicode_data.h"

uint16_t
ucd_flags(uint32_t cp)
{
	int			lo = 0,
				hi = ucd_n_flag_ranges - 1;

	if (cp >= 0x110000)
		return 0;
	/* the last row (start U+110000) closes the table: find the row with start <= cp < next start */
	while (hi - lo > 1)
	{
		int			mid = (lo + hi) / 2;

		if (ucd_flag_ranges[mid].start <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return ucd_flag_ranges[lo].flags;
}

bool
ucd_is_whitespace(uint32_t cp)
{
	int			lo = 0,
				hi = ucd_n_whitespace - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (ucd_whitespace[mid] == cp)
			return true;
		if (ucd_whitespace[mid] < cp)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return false;
}

uint32_t
ucd_tolower(uint32_t cp)
{
	int			lo = 0,
				hi = ucd_n_lower - 1;

	if (cp < 0x80)
		return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (ucd_lower[mid].from == cp)
			return ucd_lower[mid].to;
		if (ucd_lower[mid].from < cp)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return cp;
}

uint32_t
ucd_nfd_first(uint32_t cp)
{
	int			lo = 0,
				hi = ucd_n_nfd - 1;

	if (cp < 0xC0)
		return cp;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (cp < ucd_nfd[mid].first)
			hi = mid - 1;
		else if (cp > ucd_nfd[mid].last)
			lo = mid + 1;
		else
			return ucd_nfd[mid].nfd;
	}
	return cp;
}
