/*
 * bpe.c — the byte-level BPE encoder (tokenizer.ggml.model = "gpt2") and
 * its pre-tokenizers, over the vocabulary of vocab.c.
 *
 * Behaviour follows llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) so that
 * ids are token-for-token identical for the same GGUF:
 *
 * Byte-level BPE:
 *  1. Pre-tokenization: the regex list selected by tokenizer.ggml.pre
 *     (pretok.c's table) is applied in sequence; each regex splits every
 *     piece produced by the previous one, and the text between matches is
 *     kept as a piece of its own.  A regex never sees past the end of the
 *     piece it splits (so a lookahead at a piece end behaves as at end of
 *     text).  Regexes run in PCRE2 (JIT when available), over the piece
 *     itself or over the form of it llama.cpp's regex sees (pretok.h).
 *  2. Each piece's bytes are mapped to GPT-2's printable byte alphabet
 *     (bytes_to_unicode, Radford et al. 2019, openai/gpt-2 encoder.py); the
 *     piece starts as one symbol per byte and adjacent symbol pairs are merged
 *     lowest merge rank first (leftmost on ties) until no pair has a rank.
 *     Strings are interned, so a merge is a lookup of an (id, id) pair.
 *  3. A final symbol that is not a vocabulary entry falls back to the
 *     single-byte tokens of its encoded text (as llama.cpp does).
 *
 * CONTROL and UNKNOWN tokens are never recognised in text (the front door
 * splits USER_DEFINED tokens out before a fragment reaches the encoder).
 */
#include "bpe.h"
#include "pretok.h"
#include "engine/util/binary_heap.h"
#include "engine/util/text_util.h"
#include "engine/util/utf8_encode.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t
pair_hash(uint64_t key)
{
	key ^= key >> 31;
	key *= 0x9E3779B97F4A7C15ull;
	key ^= key >> 29;
	return key;
}

/* ---------- merges ---------- */

static const merge_entry *
merge_find(const llm_tokenizer *t, int32_t left, int32_t right)
{
	uint64_t	key = (((uint64_t) (uint32_t) left << 32) | (uint32_t) right) + 1;
	uint64_t	i = pair_hash(key) & t->merges_mask;

	for (;;)
	{
		const merge_entry *e = &t->merges[i];

		if (e->key == 0)
			return NULL;
		if (e->key == key)
			return e;
		i = (i + 1) & t->merges_mask;
	}
}

/* Record merge (left, right) -> result at rank; the first (lowest) rank wins. */
static void
merge_add(llm_tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t result)
{
	uint64_t	key = (((uint64_t) (uint32_t) left << 32) | (uint32_t) right) + 1;
	uint64_t	i = pair_hash(key) & t->merges_mask;

	for (;;)
	{
		merge_entry *e = &t->merges[i];

		if (e->key == key)
			return;
		if (e->key == 0)
		{
			e->key = key;
			e->rank = rank;
			e->result = result;
			return;
		}
		i = (i + 1) & t->merges_mask;
	}
}

/* ---------- construction ---------- */

/*
 * GPT-2 bytes_to_unicode: printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF) map to themselves, the other 68 bytes to U+0100.. in order.
 */
static void
build_byte_alphabet(llm_tokenizer *t)
{
	int			next_cp = 256;

	for (int i = 0; i < 512; i++)
		t->cp_byte[i] = -1;
	for (int b = 0; b < 256; b++)
	{
		bool		printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
			(b >= 0xAE && b <= 0xFF);
		uint32_t	cp = printable ? (uint32_t) b : (uint32_t) next_cp++;

		t->byte_enc_len[b] = (uint8_t) llm_utf8_encode(cp, (uint8_t *) t->byte_enc[b]);
		t->cp_byte[cp] = (int16_t) b;
	}
}

/*
 * Byte-decoded text of a normal token: each code point through the inverse
 * byte map.  CONTROL and USER_DEFINED tokens stand for their text as is.
 */
uint64_t
tok_bpe_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out)
{
	uint64_t	w = 0;
	size_t		i = 0;

	if (t->tok_type[id] == TOKTYPE_CONTROL || t->tok_type[id] == TOKTYPE_USER_DEFINED)
	{
		memcpy(out, p, n);
		return n;
	}

	while (i < n)
	{
		uint8_t		b = (uint8_t) p[i];
		int			len = utf8_lead_len(b);
		uint32_t	cp;

		if (len == 0 || i + len > n)
		{
			out[w++] = (char) b;	/* malformed vocabulary text: pass through */
			i++;
			continue;
		}
		if (len == 1)
			cp = b;
		else if (len == 2)
			cp = ((b & 0x1Fu) << 6) | (p[i + 1] & 0x3F);
		else if (len == 3)
			cp = ((b & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3F);
		else
			cp = ((b & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) |
				((p[i + 2] & 0x3Fu) << 6) | (p[i + 3] & 0x3F);
		if (cp < 512 && t->cp_byte[cp] >= 0)
			out[w++] = (char) t->cp_byte[cp];
		else
		{
			memcpy(out + w, p + i, len);	/* not a byte symbol: keep as text */
			w += len;
		}
		i += len;
	}
	return w;
}

/* ---------- setup ---------- */

const pretok_spec *
tok_bpe_pretok(const gguf_file *f, char *err, size_t errlen)
{
	gguf_str	pre;
	const pretok_spec *spec;
	char		names[1024];

	if (!gguf_get_str(f, "tokenizer.ggml.pre", &pre))
	{
		pre.ptr = "default";
		pre.len = 7;
	}
	if ((spec = tok_pretok_find(pre.ptr, (size_t) pre.len)) != NULL)
		return spec;
	tok_pretok_names(names, sizeof(names));
	llm_set_err(err, errlen, "tokenizer: unsupported pre-tokenizer tokenizer.ggml.pre = '%.*s' (known: %s)",
			(int) (pre.len > 64 ? 64 : pre.len), pre.ptr, names);
	return NULL;
}

bool
tok_bpe_pretok_add_bos(const pretok_spec *spec)
{
	return spec->add_bos;
}

const gguf_kv *
tok_bpe_merges(const gguf_file *f, char *err, size_t errlen)
{
	const gguf_kv *merges = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING);

	if (merges == NULL || merges->strs == NULL || merges->arr_n > (1u << 24))
	{
		llm_set_err(err, errlen, "tokenizer: tokenizer.ggml.merges missing, too large or not a string array");
		return NULL;
	}
	return merges;
}

bool
tok_bpe_setup(llm_tokenizer *t, const pretok_spec *spec, const gguf_kv *merges, char *err, size_t errlen)
{
	uint64_t	n_merges = merges->arr_n;
	uint64_t	mslots = 1024;

	build_byte_alphabet(t);
	while (mslots < n_merges * 2)
		mslots <<= 1;
	t->merges = calloc(mslots, sizeof(merge_entry));
	t->merges_mask = mslots - 1;
	if (t->merges == NULL)
		goto oom;

	/* merges "left right": intern both sides and the merged string */
	for (uint64_t i = 0; i < n_merges; i++)
	{
		gguf_str	m = merges->strs[i];
		const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
		size_t		ll,
					rl;
		int32_t		l,
					r,
					res;
		char		stackbuf[256];
		char	   *joined;

		if (sp == NULL)
			continue;			/* malformed entry: llama.cpp never matches it either */
		ll = (size_t) (sp - m.ptr);
		rl = m.len - ll - 1;
		l = tok_str_add(t, m.ptr, ll, false);
		r = tok_str_add(t, sp + 1, rl, false);
		joined = (ll + rl <= sizeof(stackbuf)) ? stackbuf : malloc(ll + rl);
		if (l < 0 || r < 0 || joined == NULL)
			goto oom;
		memcpy(joined, m.ptr, ll);
		memcpy(joined + ll, sp + 1, rl);
		res = tok_str_add(t, joined, ll + rl, false);
		if (joined != stackbuf)
			free(joined);
		if (res < 0)
			goto oom;
		merge_add(t, l, r, (int32_t) i, res);
	}

	for (int b = 0; b < 256; b++)
	{
		char		c = (char) b;
		int32_t		id = tok_str_lookup(t, &c, 1);

		t->byte_sym[b] = tok_str_lookup(t, t->byte_enc[b], t->byte_enc_len[b]);
		t->raw_byte_tok[b] = (id >= 0 && id < t->n_vocab) ? id : -1;
	}

	if (!tok_pretok_compile(t, spec, err, errlen))
		return false;
	t->ignore_merges = spec->ignore_merges;
	return true;

oom:
	llm_set_err(err, errlen, "tokenizer: out of memory building the vocabulary");
	return false;
}

void
tok_bpe_free(llm_tokenizer *t)
{
	for (int i = 0; i < t->n_regex; i++)
		pcre2_code_free(t->regex[i]);
	free(t->merges);
}

/* ---------- encoding ---------- */

typedef struct piece
{
	size_t		start;
	size_t		end;
} piece;

typedef struct bigram
{
	int32_t		rank;
	int32_t		left;
	int32_t		right;
	uint32_t	left_len;		/* symbol lengths when queued: stale if changed */
	uint32_t	right_len;
	int32_t		result;			/* string id of the merged pair */
} bigram;

/* Scratch space for one llm_tokenize call, grown as needed. */
struct tok_bpe_scratch
{
	piece	   *pieces[2];
	size_t		n_pieces[2];
	size_t		cap_pieces[2];
	/* per-symbol arrays for the current piece */
	int32_t    *sym_id;
	uint32_t   *sym_start;
	uint32_t   *sym_len;
	int32_t    *sym_prev;
	int32_t    *sym_next;
	size_t		cap_syms;
	bigram	   *heap_items;		/* storage of heap */
	llm_heap	heap;			/* pending merges of the current piece */
	char	   *enc;			/* byte-encoded piece text (ignore_merges lookup) */
	size_t		cap_enc;
	char	   *subj;			/* a piece as a collapsed or wide regex sees it */
	uint32_t   *subj_map;		/* subject offset -> piece offset */
	size_t		cap_subj;
	pcre2_match_data *md;
};

typedef struct tok_bpe_scratch scratch;

/* The arrays sized by reserve_syms. */
static void
free_syms(scratch *s)
{
	free(s->sym_id);
	free(s->sym_start);
	free(s->sym_len);
	free(s->sym_prev);
	free(s->sym_next);
	free(s->heap_items);
	free(s->enc);
}

tok_bpe_scratch *
tok_bpe_scratch_new(void)
{
	scratch    *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	if ((s->md = pcre2_match_data_create(4, NULL)) == NULL)
	{
		free(s);
		return NULL;
	}
	return s;
}

void
tok_bpe_scratch_free(scratch *s)
{
	if (s == NULL)
		return;
	free(s->pieces[0]);
	free(s->pieces[1]);
	free(s->subj);
	free(s->subj_map);
	free_syms(s);
	if (s->md)
		pcre2_match_data_free(s->md);
	free(s);
}

static bool
push_piece(scratch *s, int which, size_t start, size_t end)
{
	if (s->n_pieces[which] == s->cap_pieces[which])
	{
		size_t		cap = s->cap_pieces[which] ? s->cap_pieces[which] * 2 : 256;
		piece	   *p = realloc(s->pieces[which], cap * sizeof(piece));

		if (p == NULL)
			return false;
		s->pieces[which] = p;
		s->cap_pieces[which] = cap;
	}
	s->pieces[which][s->n_pieces[which]].start = start;
	s->pieces[which][s->n_pieces[which]].end = end;
	s->n_pieces[which]++;
	return true;
}

static bool
reserve_syms(scratch *s, size_t n)
{
	if (n <= s->cap_syms)
		return true;
	free_syms(s);
	s->sym_id = malloc(n * sizeof(int32_t));
	s->sym_start = malloc(n * sizeof(uint32_t));
	s->sym_len = malloc(n * sizeof(uint32_t));
	s->sym_prev = malloc(n * sizeof(int32_t));
	s->sym_next = malloc(n * sizeof(int32_t));
	/* each merge queues at most two new pairs on top of the n - 1 initial ones */
	s->heap_items = malloc((3 * n + 4) * sizeof(bigram));
	s->cap_enc = 2 * n;
	s->enc = malloc(s->cap_enc);
	s->cap_syms = n;
	if (!s->sym_id || !s->sym_start || !s->sym_len || !s->sym_prev || !s->sym_next ||
		!s->heap_items || !s->enc)
	{
		s->cap_syms = 0;
		return false;
	}
	return true;
}

/* Min-heap order of llama.cpp's bigram queue: lower rank first, then leftmost. */
static bool
bigram_before(const void *pa, const void *pb)
{
	const bigram *a = pa;
	const bigram *b = pb;

	return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void
queue_pair(const llm_tokenizer *t, scratch *s, int32_t left, int32_t right)
{
	const merge_entry *m;
	bigram		b;

	if (left < 0 || right < 0 || s->sym_id[left] < 0 || s->sym_id[right] < 0)
		return;
	m = merge_find(t, s->sym_id[left], s->sym_id[right]);
	if (m == NULL)
		return;
	b.rank = m->rank;
	b.left = left;
	b.right = right;
	b.left_len = s->sym_len[left];
	b.right_len = s->sym_len[right];
	b.result = m->result;
	llm_heap_push(&s->heap, &b);
}

/* BPE-merge one pre-token piece text[0..n) and emit its ids. */
static bool
bpe_piece(const llm_tokenizer *t, scratch *s, const uint8_t *text, size_t n, emitter *e)
{
	int32_t		first = 0;

	if (n == 0)
		return true;
	if (!reserve_syms(s, n))
		return false;

	if (t->ignore_merges)
	{
		size_t		w = 0;
		int32_t		id;

		for (size_t i = 0; i < n; i++)
		{
			memcpy(s->enc + w, t->byte_enc[text[i]], t->byte_enc_len[text[i]]);
			w += t->byte_enc_len[text[i]];
		}
		id = tok_str_lookup(t, s->enc, w);
		if (id >= 0 && id < t->n_vocab)
		{
			emit(e, id);
			return true;
		}
	}

	/* one symbol per byte: GPT-2 encoding maps each byte to one code point */
	for (size_t i = 0; i < n; i++)
	{
		s->sym_id[i] = t->byte_sym[text[i]];
		s->sym_start[i] = (uint32_t) i;
		s->sym_len[i] = 1;
		s->sym_prev[i] = (int32_t) i - 1;
		s->sym_next[i] = (i + 1 < n) ? (int32_t) i + 1 : -1;
	}
	llm_heap_init(&s->heap, s->heap_items, sizeof(bigram), bigram_before);
	for (size_t i = 1; i < n; i++)
		queue_pair(t, s, (int32_t) i - 1, (int32_t) i);

	while (s->heap.n > 0)
	{
		bigram		b;
		int32_t		l,
					r;

		llm_heap_pop(&s->heap, &b);
		l = b.left;
		r = b.right;

		if (s->sym_len[l] != b.left_len || s->sym_len[r] != b.right_len ||
			s->sym_len[l] == 0 || s->sym_len[r] == 0)
			continue;			/* outdated pair */
		s->sym_id[l] = b.result;
		s->sym_len[l] += s->sym_len[r];
		s->sym_len[r] = 0;
		s->sym_next[l] = s->sym_next[r];
		if (s->sym_next[r] >= 0)
			s->sym_prev[s->sym_next[r]] = l;
		queue_pair(t, s, s->sym_prev[l], l);
		queue_pair(t, s, l, s->sym_next[l]);
	}

	for (int32_t i = first; i >= 0; i = s->sym_next[i])
	{
		int32_t		id = s->sym_id[i];

		if (id >= 0 && id < t->n_vocab)
			emit(e, id);
		else
		{
			/* not a token: single-byte tokens of the encoded text, skipping misses */
			for (uint32_t k = 0; k < s->sym_len[i]; k++)
			{
				uint8_t		b = text[s->sym_start[i] + k];

				for (int j = 0; j < t->byte_enc_len[b]; j++)
				{
					int32_t		bt = t->raw_byte_tok[(uint8_t) t->byte_enc[b][j]];

					if (bt >= 0)
						emit(e, bt);
				}
			}
		}
	}
	return true;
}

/* Room for a subject of n bytes and its offset map. */
static bool
reserve_subject(scratch *s, size_t n)
{
	if (n + 1 <= s->cap_subj)
		return true;
	free(s->subj);
	free(s->subj_map);
	s->subj = malloc(n + 1);
	s->subj_map = malloc((n + 1) * sizeof(uint32_t));
	s->cap_subj = (s->subj && s->subj_map) ? n + 1 : 0;
	return s->cap_subj != 0;
}

/*
 * Split every piece of s->pieces[from] with regex r of t into
 * s->pieces[to]: matches and the gaps between them each become a piece.  A
 * regex of the collapsed or wide kind runs over the piece's subject
 * (tok_pretok_subject) and its offsets are mapped back.  -1 on error.
 */
static int
split_pieces(const llm_tokenizer *t, scratch *s, int r, const char *text,
			 int from, int to, char *err, size_t errlen)
{
	const pcre2_code *re = t->regex[r];
	pretok_rx_mode mode = (pretok_rx_mode) t->regex_mode[r];

	s->n_pieces[to] = 0;
	for (size_t pi = 0; pi < s->n_pieces[from]; pi++)
	{
		piece		p = s->pieces[from][pi];
		PCRE2_SPTR	subj = (PCRE2_SPTR) (text + p.start);
		size_t		len = p.end - p.start;
		const uint32_t *map = NULL;
		size_t		pos = 0;
		size_t		prev_end = 0;

		if (mode != PRETOK_RX_UCP)
		{
			if (!reserve_subject(s, len))
				goto oom;
			len = tok_pretok_subject(mode, text + p.start, len, s->subj, s->subj_map);
			subj = (PCRE2_SPTR) s->subj;
			map = s->subj_map;
		}
		while (pos < len)
		{
			int			rc = pcre2_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK, s->md, NULL);
			PCRE2_SIZE *ov;

			if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
				rc = pcre2_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s->md, NULL);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0)
			{
				PCRE2_UCHAR msg[256];

				pcre2_get_error_message(rc, msg, sizeof(msg));
				llm_set_err(err, errlen, "tokenizer: pre-tokenizer regex failed: %s", (const char *) msg);
				return -1;
			}
			ov = pcre2_get_ovector_pointer(s->md);
			if (ov[1] == ov[0])
			{
				/* empty match: step over one character, leave it in the gap */
				pos = ov[0] + 1;
				while (mode != PRETOK_RX_COLLAPSED && pos < len && (subj[pos] & 0xC0) == 0x80)
					pos++;
				continue;
			}
			if (ov[0] > prev_end &&
				!push_piece(s, to, p.start + (map ? map[prev_end] : prev_end), p.start + (map ? map[ov[0]] : ov[0])))
				goto oom;
			if (!push_piece(s, to, p.start + (map ? map[ov[0]] : ov[0]), p.start + (map ? map[ov[1]] : ov[1])))
				goto oom;
			prev_end = pos = ov[1];
		}
		if (prev_end < len && !push_piece(s, to, p.start + (map ? map[prev_end] : prev_end), p.end))
			goto oom;
	}
	return 0;

oom:
	llm_set_err(err, errlen, "tokenizer: out of memory");
	return -1;
}

/* Pre-tokenize text[0..len) with the regexes and BPE every piece.  0, or -1 + err. */
int
tok_bpe_encode(const llm_tokenizer *t, scratch *s, const char *text, size_t len, emitter *e,
			   char *err, size_t errlen)
{
	int			cur = 0;

	s->n_pieces[0] = 0;
	if (!push_piece(s, 0, 0, len))
		goto oom;
	for (int r = 0; r < t->n_regex; r++)
	{
		if (split_pieces(t, s, r, text, cur, 1 - cur, err, errlen) < 0)
			return -1;
		cur = 1 - cur;
	}
	for (size_t i = 0; i < s->n_pieces[cur]; i++)
	{
		piece		p = s->pieces[cur][i];

		if (!bpe_piece(t, s, (const uint8_t *) text + p.start, p.end - p.start, e))
			goto oom;
	}
	return 0;

oom:
	llm_set_err(err, errlen, "tokenizer: out of memory");
	return -1;
}
