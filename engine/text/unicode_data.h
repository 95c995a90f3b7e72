/*
 * unicode_data.h — code point classes, lowercase and NFD maps exactly as
 * llama.cpp's unicode tables give them (unicode_data.c is generated from
 * llama.cpp's src/unicode-data.cpp by scripts/oracle/gen_unicode_data.py),
 * for encoders that must classify text as llama.cpp does (wordpiece.c).
 * The byte-level BPE regexes use PCRE2's own Unicode properties instead.
 * Tables are constant; every function is pure and thread-safe.
 */
#ifndef LLM_TEXT_UNICODE_DATA_H
#define LLM_TEXT_UNICODE_DATA_H

#include <stdint.h>
#include <stdbool.h>

/* General-category flags (llama.cpp's unicode_cpt_flags bits); one per code point. */
#define UCD_UNDEFINED	0x0001		/* Cn */
#define UCD_NUMBER		0x0002		/* \p{N} */
#define UCD_LETTER		0x0004		/* \p{L} */
#define UCD_SEPARATOR	0x0008		/* \p{Z} */
#define UCD_MARK		0x0010		/* \p{M} */
#define UCD_PUNCTUATION	0x0020		/* \p{P} */
#define UCD_SYMBOL		0x0040		/* \p{S} */
#define UCD_CONTROL		0x0080		/* \p{C} except Cn */

typedef struct ucd_flag_range
{
	uint32_t	start;			/* range runs to the next row's start - 1 */
	uint16_t	flags;
} ucd_flag_range;

typedef struct ucd_pair
{
	uint32_t	from;
	uint32_t	to;
} ucd_pair;

typedef struct ucd_nfd_range
{
	uint32_t	first;
	uint32_t	last;
	uint32_t	nfd;			/* first code point of the NFD decomposition */
} ucd_nfd_range;

/* The generated tables, sorted ascending (unicode_data.c). */
extern const int ucd_n_flag_ranges;
extern const int ucd_n_whitespace;
extern const int ucd_n_lower;
extern const int ucd_n_nfd;
extern const ucd_flag_range ucd_flag_ranges[];
extern const uint32_t ucd_whitespace[];
extern const ucd_pair ucd_lower[];
extern const ucd_nfd_range ucd_nfd[];

/* UCD_* category flag of cp (0 past U+10FFFF). */
uint16_t	ucd_flags(uint32_t cp);
/* Unicode White_Space (llama.cpp's \s). */
bool		ucd_is_whitespace(uint32_t cp);
/* Simple lowercase mapping (UnicodeData.txt), cp itself when none. */
uint32_t	ucd_tolower(uint32_t cp);
/* First code point of cp's canonical decomposition (the base letter of an accented one), cp itself when none. */
uint32_t	ucd_nfd_first(uint32_t cp);

#endif
