/*
 * pretok.c — the pre-tokenizer table and llama.cpp's three ways of running
 * a regex (pretok.h).  The regex strings are llama.cpp's, verbatim
 * (src/llama-vocab.cpp of the llama-cpp-python 0.3.36 sdist).
 */
#include "pretok.h"
#include "unicode_data.h"
#include "engine/util/text_util.h"
#include "engine/util/utf8_encode.h"

#include <stdio.h>
#include <string.h>

/* ---------- llama.cpp's regexes ---------- */

#define LL_GPT2 \
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LL_CONTRACTIONS \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define LL_LLAMA3 \
	LL_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LL_LLAMA3_ORIG \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LL_QWEN2 \
	LL_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LL_QWEN35 \
	LL_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LL_DEFAULT_PUNCT	"[\\p{P}\\$\\+<=>\\^~\\|]+"
#define LL_FALCON_PUNCT		"[\\p{P}\\$\\+<=>\\^~\\|`]+"
#define LL_DIGIT			"\\p{N}"
#define LL_DIGITS			"\\p{N}+"
#define LL_THREE_DIGITS		"[0-9][0-9][0-9]"
#define LL_NEWLINE			"[\r\n]"
#define LL_CJK_HANGUL		"[一-龥ࠀ-一가-퟿]+"
#define LL_DEEPSEEK_LATIN \
	"\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
#define LL_DEEPSEEK_PUNCT	"\\s?[!-/:-~！-／：-～‘-‟　-。]+"
#define LL_TRAILING_SPACE	"\\s+$"
#define LL_DEEPSEEK3_CJK	"[一-龥぀-ゟ゠-ヿ]+"
#define LL_DEEPSEEK3 \
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define LL_TEKKEN \
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/*
 * PCRE2 (UTF + UCP) equivalents of the regexes llama.cpp splits by hand
 * (unicode_regex_split_custom_*), \s spelled as its White_Space set.  The
 * GPT-2 one also takes trailing whitespace, as llama.cpp's splitter does.
 */
#define WS "\\t-\\r\\x{85}\\p{Z}"
#define UCP_CONTRACTIONS "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"
#define UCP_TAIL \
	"| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

static const struct
{
	const char *llama;			/* llama.cpp's regex */
	const char *pcre;			/* what runs here */
}			ucp_regexes[] = {
	{LL_GPT2, "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
	"|[" WS "]+(?![^" WS "])|[" WS "]+"},
	{LL_LLAMA3, UCP_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" UCP_TAIL},
	{LL_LLAMA3_ORIG, UCP_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" UCP_TAIL},
	{LL_QWEN2, UCP_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" UCP_TAIL},
	{LL_QWEN35, UCP_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
	"| ?[^" WS "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"},
};

/* ---------- the table: one row per tokenizer.ggml.pre name ---------- */

static const pretok_spec pretok_specs[] = {
	/* name, regexes, ignore_merges, add_bos */
	{"default", {LL_DEFAULT_PUNCT, LL_GPT2, LL_DIGITS, LL_THREE_DIGITS}, false, false},
	{"llama3", {LL_LLAMA3}, true, true},
	{"llama-v3", {LL_LLAMA3}, true, true},
	{"llama-bpe", {LL_LLAMA3}, true, true},
	{"falcon3", {LL_LLAMA3}, true, true},
	{"pixtral", {LL_LLAMA3}, true, true},
	{"dbrx", {LL_LLAMA3}, false, false},
	{"smaug-bpe", {LL_LLAMA3}, false, false},
	{"qwen2", {LL_QWEN2}, false, false},
	{"deepseek-r1-qwen", {LL_QWEN2}, false, false},
	{"megrez", {LL_QWEN2}, false, false},
	{"stablelm2", {LL_QWEN2}, false, false},
	{"qwen35", {LL_QWEN35}, false, false},
	{"deepseek-llm", {LL_NEWLINE, LL_DEEPSEEK_LATIN, LL_DEEPSEEK_PUNCT, LL_TRAILING_SPACE, LL_CJK_HANGUL, LL_DIGITS},
	false, false},
	{"deepseek-coder", {LL_NEWLINE, "\\s?\\p{L}+", "\\s?\\p{P}+", LL_CJK_HANGUL, LL_DIGIT}, false, false},
	{"deepseek-v3", {"\\p{N}{1,3}", LL_DEEPSEEK3_CJK, LL_DEEPSEEK3}, false, false},
	{"falcon", {LL_FALCON_PUNCT, LL_GPT2, LL_THREE_DIGITS}, false, false},
	{"gpt-2", {LL_GPT2}, false, false},
	{"gpt2", {LL_GPT2}, false, false},
	{"phi-2", {LL_GPT2}, false, false},
	{"mpt", {LL_GPT2}, false, false},
	{"olmo", {LL_GPT2}, false, false},
	{"jais", {LL_GPT2}, false, false},
	{"starcoder", {LL_DIGIT, LL_GPT2}, false, false},
	{"refact", {LL_DIGIT, LL_GPT2}, false, false},
	{"command-r", {LL_DIGIT, LL_GPT2}, false, false},
	{"smollm", {LL_DIGIT, LL_GPT2}, false, false},
	{"codeshell", {LL_DIGIT, LL_GPT2}, false, false},
	{"exaone", {LL_DIGIT, LL_GPT2}, false, false},
	{"minerva-7b", {LL_DIGIT, LL_GPT2}, false, false},
	{"tekken", {LL_TEKKEN}, true, true},
};

#define N_SPECS (sizeof(pretok_specs) / sizeof(pretok_specs[0]))

const pretok_spec *
tok_pretok_find(const char *name, size_t len)
{
	for (size_t i = 0; i < N_SPECS; i++)
		if (strlen(pretok_specs[i].name) == len && memcmp(pretok_specs[i].name, name, len) == 0)
			return &pretok_specs[i];
	return NULL;
}

void
tok_pretok_names(char *buf, size_t cap)
{
	size_t		w = 0;

	if (cap == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < N_SPECS && w < cap; i++)
	{
		int			n = snprintf(buf + w, cap - w, "%s%s", i ? ", " : "", pretok_specs[i].name);

		if (n < 0)
			break;
		w += (size_t) n;
	}
}

/* ---------- llama.cpp's collapsed regexes ---------- */

/* The categories llama.cpp collapses, their byte and their ASCII members (unicode_regex_split's maps, verbatim). */
static const struct
{
	const char *name;
	uint16_t	flag;
}			ucat_names[] = {
	{"\\p{N}", UCD_NUMBER}, {"\\p{L}", UCD_LETTER}, {"\\p{P}", UCD_PUNCTUATION}, {"\\p{M}", UCD_MARK},
	{"\\p{S}", UCD_SYMBOL}, {"\\p{Lu}", UCD_LETTER}, {"\\p{Ll}", UCD_LETTER}, {"\\p{Lt}", UCD_LETTER},
	{"\\p{Lm}", UCD_LETTER}, {"\\p{Lo}", UCD_LETTER},
};

static char
ucat_byte(uint16_t flag)
{
	switch (flag)
	{
		case UCD_NUMBER:
			return (char) 0xD1;
		case UCD_LETTER:
			return (char) 0xD2;
		case UCD_PUNCTUATION:
			return (char) 0xD3;
		case UCD_MARK:
			return (char) 0xD4;
		case UCD_SYMBOL:
			return (char) 0xD5;
		default:
			return (char) 0xD0;
	}
}

static const char *
ucat_ascii(uint16_t flag)
{
	switch (flag)
	{
		case UCD_NUMBER:
			return "\x30-\x39";
		case UCD_LETTER:
			return "\x41-\x5A\x61-\x7A";
		case UCD_PUNCTUATION:
			return "\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D";
		case UCD_SYMBOL:
			return "\\\x24\\\x2B\x3C-\x3E\x5E\x60\\\x7C\\\x7E";
		default:
			return "";
	}
}

/* The category pattern ("\p{L}") starting at re[i], as llama.cpp reads one; its flag or 0. */
static uint16_t
ucat_at(const char *re, size_t len, size_t i, size_t *closing)
{
	const char *c;

	if (!(re[i] == '\\' && i + 3 < len && re[i + 1] == 'p' && re[i + 2] == '{'))
		return 0;
	c = memchr(re + i + 3, '}', len - i - 3);
	if (c == NULL || (size_t) (c - re) > i + 10)
		return 0;
	for (size_t k = 0; k < sizeof(ucat_names) / sizeof(ucat_names[0]); k++)
		if (strlen(ucat_names[k].name) == (size_t) (c - re) - i + 1 &&
			memcmp(ucat_names[k].name, re + i, (size_t) (c - re) - i + 1) == 0)
		{
			*closing = (size_t) (c - re);
			return ucat_names[k].flag;
		}
	return 0;
}

static bool
uses_categories(const char *re)
{
	size_t		len = strlen(re),
				closing;

	for (size_t i = 0; i < len; i++)
		if (ucat_at(re, len, i, &closing))
			return true;
	return false;
}

/*
 * llama.cpp's rewrite of a regex for the collapsed text: each category
 * becomes its byte plus its ASCII members, in brackets unless already
 * inside a class.  out has room for 8 * strlen(re) + 1 bytes.
 */
static size_t
collapse_regex(const char *re, char *out)
{
	size_t		len = strlen(re),
				w = 0;
	bool		inside = false;

	for (size_t i = 0; i < len; i++)
	{
		size_t		closing;
		uint16_t	flag;

		if (re[i] == '[' && (i == 0 || re[i - 1] != '\\'))
		{
			out[w++] = '[';
			inside = true;
			continue;
		}
		if (inside && re[i] == ']' && re[i - 1] != '\\')
		{
			out[w++] = ']';
			inside = false;
			continue;
		}
		if ((flag = ucat_at(re, len, i, &closing)) != 0)
		{
			const char *ascii = ucat_ascii(flag);

			if (!inside)
				out[w++] = '[';
			out[w++] = ucat_byte(flag);
			memcpy(out + w, ascii, strlen(ascii));
			w += strlen(ascii);
			if (!inside)
				out[w++] = ']';
			i = closing;
			continue;
		}
		out[w++] = re[i];
	}
	out[w] = '\0';
	return w;
}

bool
tok_pretok_compile(llm_tokenizer *t, const pretok_spec *spec, char *err, size_t errlen)
{
	for (int i = 0; i < MAX_REGEXES && spec->regex[i] != NULL; i++)
	{
		const char *re = spec->regex[i];
		const char *pattern = NULL;
		char		collapsed[4096];
		size_t		plen;
		uint32_t	opts;
		pretok_rx_mode mode;
		int			ec;
		PCRE2_SIZE	eo;
		pcre2_code *code;

		for (size_t k = 0; k < sizeof(ucp_regexes) / sizeof(ucp_regexes[0]); k++)
			if (strcmp(ucp_regexes[k].llama, re) == 0)
				pattern = ucp_regexes[k].pcre;
		if (pattern != NULL)
		{
			mode = PRETOK_RX_UCP;
			opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
			plen = strlen(pattern);
		}
		else if (uses_categories(re))
		{
			if (strlen(re) * 8 + 1 > sizeof(collapsed))
			{
				llm_set_err(err, errlen, "tokenizer: pre-tokenizer regex %d of '%s' is too long", i, spec->name);
				return false;
			}
			mode = PRETOK_RX_COLLAPSED;
			plen = collapse_regex(re, collapsed);
			pattern = collapsed;
			opts = PCRE2_DOLLAR_ENDONLY;	/* bytes, one per code point */
		}
		else
		{
			mode = PRETOK_RX_WIDE;
			pattern = re;
			plen = strlen(re);
			opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_DOLLAR_ENDONLY;
		}
		code = pcre2_compile((PCRE2_SPTR) pattern, plen, opts, &ec, &eo, NULL);
		if (code == NULL)
		{
			PCRE2_UCHAR msg[256];

			pcre2_get_error_message(ec, msg, sizeof(msg));
			llm_set_err(err, errlen, "tokenizer: cannot compile pre-tokenizer regex %d for '%s' at offset %zu: %s",
						i, spec->name, (size_t) eo, (const char *) msg);
			return false;
		}
		/* JIT is an optimisation only: fall back to the interpreter if unavailable */
		(void) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
		t->regex_mode[t->n_regex] = (uint8_t) mode;
		t->regex[t->n_regex++] = code;
	}
	return true;
}

/* ---------- subjects ---------- */

static uint32_t
decode_cp(const uint8_t *s, int n)
{
	switch (n)
	{
		case 2:
			return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
		case 3:
			return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
		case 4:
			return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
		default:
			return s[0];
	}
}

size_t
tok_pretok_subject(pretok_rx_mode mode, const char *text, size_t len, char *subj, uint32_t *map)
{
	const uint8_t *s = (const uint8_t *) text;
	size_t		w = 0;

	for (size_t i = 0; i < len;)
	{
		int			n = utf8_lead_len(s[i]);
		uint32_t	cp;

		if (n == 0 || i + (size_t) n > len)
			n = 1;				/* never for valid UTF-8 */
		cp = decode_cp(s + i, n);
		map[w] = (uint32_t) i;
		if (cp < 0x80)
			subj[w++] = (char) cp;
		else if (ucd_is_whitespace(cp))
			subj[w++] = 0x0B;	/* llama.cpp's stand-in for non-ASCII whitespace */
		else if (mode == PRETOK_RX_COLLAPSED)
		{
			uint16_t	f = ucd_flags(cp) & 0xFF;

			subj[w++] = ucat_byte(f == UCD_NUMBER || f == UCD_LETTER || f == UCD_PUNCTUATION ||
								  f == UCD_MARK || f == UCD_SYMBOL ? f : 0);
		}
		else
		{
			memcpy(subj + w, s + i, (size_t) n);
			for (int k = 1; k < n; k++)
				map[w + (size_t) k] = (uint32_t) (i + (size_t) k);
			w += (size_t) n;
		}
		i += (size_t) n;
	}
	map[w] = (uint32_t) len;
	return w;
}
