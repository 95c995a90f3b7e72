/*
 * spm.c — SentencePiece BPE (tokenizer.ggml.model = "llama":
 * Llama 1/2, Mistral, Gemma), as llama.cpp encodes it (src/llama-vocab.cpp,
 * llm_tokenizer_spm_session and llama_vocab::impl::tokenize, case
 * LLAMA_VOCAB_TYPE_SPM), so that ids are identical for the same GGUF:
 *
 *  1. Every ASCII space becomes U+2581 "▁" (llama_escape_whitespace); with
 *     add_space_prefix a space is put before a fragment that starts the
 *     text or follows a special token.  There is no pre-tokenizer regex.
 *  2. The fragment starts as one symbol per UTF-8 character.  Every adjacent
 *     pair whose concatenated text is a token is queued with that token's
 *     score; the highest score is merged first, the leftmost pair on equal
 *     scores (llm_bigram_spm::comparator), and the pairs around the merged
 *     symbol are queued anew.  A queued pair is stale once either symbol
 *     changed (llama.cpp compares the summed length; symbol lengths only
 *     grow, so that is the same test).
 *  3. A final symbol that is a token gives its id; any other (always one
 *     character never merged, for valid UTF-8) gives the byte-fallback token
 *     of each of its bytes, <0xNN>, else the one-byte token
 *     (llama_vocab::byte_to_token).  llama.cpp's rev_merge re-segmentation
 *     only applies to merged symbols that are not tokens, which cannot occur
 *     since only pairs that form tokens are merged.
 *
 * One deliberate difference: a pair that would form a CONTROL or UNKNOWN
 * token is never merged and such a single character is never emitted, so
 * plain text can never produce a control id.  For Gemma 3's vocabulary no
 * control token can be assembled from smaller tokens, so the ids are the
 * same as llama.cpp's.
 */
#include "spm.h"
#include "engine/util/binary_heap.h"
#include "engine/util/text_util.h"

#include <stdlib.h>
#include <string.h>

static const char spm_space[3] = {(char) 0xE2, (char) 0x96, (char) 0x81};	/* U+2581 */

/* Whether id is a token text may produce: a vocabulary id, not CONTROL / UNKNOWN. */
static inline bool
plain_token(const llm_tokenizer *t, int32_t id)
{
	return id >= 0 && id < t->n_vocab &&
		t->tok_type[id] != TOKTYPE_CONTROL && t->tok_type[id] != TOKTYPE_UNKNOWN;
}

static int
hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Byte value of a "<0xNN>" text, or -1. */
static int
byte_token_value(const char *p, size_t n)
{
	int			hi,
				lo;

	if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>')
		return -1;
	hi = hexdigit(p[3]);
	lo = hexdigit(p[4]);
	return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void
tok_spm_free(llm_tokenizer *t)
{
	free(t->score);
}

bool
tok_spm_setup(llm_tokenizer *t, const gguf_file *f, char *err, size_t errlen)
{
	const gguf_kv *scores = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VT_FLOAT32);
	bool		int_scores = false;
	static const char hex[] = "0123456789ABCDEF";
	bool		b;

	if (scores == NULL)
	{
		scores = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VT_INT32);	/* llama.cpp takes these too */
		int_scores = true;
	}

	/*
	 * llama.cpp takes scores of 0 when the key is missing, which leaves the
	 * merge order to position alone; no real SentencePiece GGUF lacks them,
	 * so a file without them is treated as malformed.
	 */
	if (scores == NULL || scores->arr_n < (uint64_t) t->n_vocab)
	{
		llm_set_err(err, errlen, "tokenizer: SentencePiece vocabulary (tokenizer.ggml.model \"llama\") without "
					"a float32 or int32 tokenizer.ggml.scores entry per token");
		return false;
	}
	t->score = malloc(sizeof(float) * (size_t) t->n_vocab);
	if (t->score == NULL)
	{
		llm_set_err(err, errlen, "tokenizer: out of memory");
		return false;
	}
	for (int32_t i = 0; i < t->n_vocab; i++)
		t->score[i] = int_scores ? (float) gguf_arr_int(scores, (uint64_t) i) :
			(float) gguf_arr_float(scores, (uint64_t) i);

	/* llama.cpp: true for SPM unless tokenizer.ggml.add_space_prefix says otherwise */
	t->add_space_prefix = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b) ? b : true;

	for (int c = 0; c < 256; c++)
	{
		char		name[6] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>'};
		char		one = (char) c;
		int32_t		id = tok_str_lookup(t, name, sizeof(name));

		if (id < 0 || id >= t->n_vocab)
			id = tok_str_lookup(t, &one, 1);
		if (id < 0 || id >= t->n_vocab)
		{
			llm_set_err(err, errlen, "tokenizer: SentencePiece vocabulary has no byte-fallback token for byte 0x%02X", c);
			return false;
		}
		t->spm_byte_tok[c] = id;
	}
	return true;
}

/*
 * As llama.cpp's token_to_piece for SPM: CONTROL, UNKNOWN and USER_DEFINED
 * tokens stand for their text, BYTE tokens <0xNN> for byte NN, UNUSED for
 * nothing, normal tokens for their text with ▁ turned back into spaces.
 */
uint64_t
tok_spm_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out)
{
	uint8_t		ty = t->tok_type[id];
	uint64_t	w = 0;

	if (ty == TOKTYPE_CONTROL || ty == TOKTYPE_UNKNOWN || ty == TOKTYPE_USER_DEFINED)
	{
		memcpy(out, p, n);
		return n;
	}
	if (ty == TOKTYPE_UNUSED)
		return 0;
	if (ty == TOKTYPE_BYTE)
	{
		int			v = byte_token_value(p, n);

		if (v >= 0)
		{
			out[0] = (char) v;
			return 1;
		}
	}
	for (size_t i = 0; i < n; i++)
	{
		if (i + 3 <= n && memcmp(p + i, spm_space, 3) == 0)
		{
			out[w++] = ' ';
			i += 2;
		}
		else
			out[w++] = p[i];
	}
	return w;
}

typedef struct spm_pair
{
	float		score;
	int32_t		left;			/* symbol indexes */
	int32_t		right;
	int32_t		id;				/* token of the merged text */
	uint32_t	size;			/* bytes of the merged text when queued */
} spm_pair;

typedef struct spm_state
{
	const char *text;			/* escaped fragment */
	uint32_t   *start;			/* per symbol: byte offset and length (0 = merged away) */
	uint32_t   *len;
	int32_t    *prev;
	int32_t    *next;
	int32_t    *id;				/* token of the symbol's text, or -1 */
	spm_pair   *heap_items;		/* storage of heap */
	llm_heap	heap;			/* pending merges */
} spm_state;

/* Max-heap order: higher score first, then the leftmost pair. */
static bool
pair_before(const void *pa, const void *pb)
{
	const spm_pair *a = pa;
	const spm_pair *b = pb;

	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

/* Queue symbols left, right (adjacent) if their concatenated text is a token. */
static void
try_pair(const llm_tokenizer *t, spm_state *s, int32_t left, int32_t right)
{
	spm_pair	p;
	uint32_t	size;
	int32_t		id;

	if (left < 0 || right < 0)
		return;
	size = s->len[left] + s->len[right];
	id = tok_str_lookup(t, s->text + s->start[left], size);
	if (!plain_token(t, id))
		return;
	p.score = t->score[id];
	p.left = left;
	p.right = right;
	p.id = id;
	p.size = size;
	llm_heap_push(&s->heap, &p);
}

static int
utf8_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if ((b & 0xE0) == 0xC0)
		return 2;
	if ((b & 0xF0) == 0xE0)
		return 3;
	if ((b & 0xF8) == 0xF0)
		return 4;
	return 1;
}

bool
tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len, bool prefix_space, emitter *e)
{
	size_t		n_esc = 0,
				cap_esc = 3 * (len + 1);
	char	   *esc;
	size_t		n_sym = 0;
	spm_state	s;
	bool		ok = false;

	if (len == 0 && !prefix_space)
		return true;
	memset(&s, 0, sizeof(s));
	esc = malloc(cap_esc);
	if (esc == NULL)
		return false;
	if (prefix_space)
	{
		memcpy(esc, spm_space, 3);
		n_esc = 3;
	}
	for (size_t i = 0; i < len; i++)
	{
		if (text[i] == ' ')
		{
			memcpy(esc + n_esc, spm_space, 3);
			n_esc += 3;
		}
		else
			esc[n_esc++] = text[i];
	}

	/* at most one symbol per byte; each merge queues at most two pairs */
	s.text = esc;
	s.start = malloc(sizeof(uint32_t) * n_esc);
	s.len = malloc(sizeof(uint32_t) * n_esc);
	s.prev = malloc(sizeof(int32_t) * n_esc);
	s.next = malloc(sizeof(int32_t) * n_esc);
	s.id = malloc(sizeof(int32_t) * n_esc);
	s.heap_items = malloc(sizeof(spm_pair) * (3 * n_esc + 1));
	if (!s.start || !s.len || !s.prev || !s.next || !s.id || !s.heap_items)
		goto done;
	llm_heap_init(&s.heap, s.heap_items, sizeof(spm_pair), pair_before);

	for (size_t off = 0; off < n_esc;)
	{
		size_t		k = (size_t) utf8_len((uint8_t) esc[off]);
		int32_t		id;

		if (k > n_esc - off)
			k = n_esc - off;
		id = tok_str_lookup(t, esc + off, k);
		s.start[n_sym] = (uint32_t) off;
		s.len[n_sym] = (uint32_t) k;
		s.prev[n_sym] = (int32_t) n_sym - 1;
		s.id[n_sym] = plain_token(t, id) ? id : -1;
		off += k;
		s.next[n_sym] = off == n_esc ? -1 : (int32_t) n_sym + 1;
		n_sym++;
	}
	for (size_t i = 1; i < n_sym; i++)
		try_pair(t, &s, (int32_t) i - 1, (int32_t) i);

	while (s.heap.n > 0)
	{
		spm_pair	p;
		int32_t		l,
					r;

		llm_heap_pop(&s.heap, &p);
		l = p.left;
		r = p.right;

		if (s.len[l] == 0 || s.len[r] == 0 || s.len[l] + s.len[r] != p.size)
			continue;			/* a side was merged since: stale */
		s.len[l] += s.len[r];
		s.len[r] = 0;
		s.id[l] = p.id;
		s.next[l] = s.next[r];
		if (s.next[r] >= 0)
			s.prev[s.next[r]] = l;
		try_pair(t, &s, s.prev[l], l);
		try_pair(t, &s, l, s.next[l]);
	}

	for (int32_t i = n_sym > 0 ? 0 : -1; i >= 0; i = s.next[i])
	{
		if (s.id[i] >= 0)
			emit(e, s.id[i]);
		else
			for (uint32_t k = 0; k < s.len[i]; k++)
				emit(e, t->spm_byte_tok[(uint8_t) esc[s.start[i] + k]]);
	}
	ok = true;

done:
	free(s.start);
	free(s.len);
	free(s.prev);
	free(s.next);
	free(s.id);
	free(s.heap_items);
	free(esc);
	return ok;
}
