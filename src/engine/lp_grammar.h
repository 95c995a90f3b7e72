/*
 * lp_grammar.h — constrained decoding in the engine: the grammar store
 * (compiled grammars by tagged source, the vocabulary's token index, the
 * mask cache, mask timings) and the grammar logits processor built on it.
 *
 * One store per engine (engine.c), used by the engine's driver thread only.
 *
 * Grammars: a GENERATE request carries a tagged grammar source (request.h,
 * grammar.h llm_grammar_compile_source).  The store compiles each distinct
 * source once, on the driver thread inside llm_engine_submit, and keeps the
 * grammar while requests use it and afterwards as long as the bounds allow:
 * at most LLM_GRAMMAR_STORE_MAX grammars and LLM_GRAMMAR_STORE_BYTES of
 * their memory, the least recently used one not in use evicted first (a
 * grammar in use is never evicted, so a burst of distinct grammars may
 * exceed the bounds until its requests end).  The key is the source's bytes
 * (hash, then compared in full).  A driver that normalizes first (the SQL
 * functions send llm_grammar_source() of their own compile) makes equal
 * grammars written differently share one entry.  A compile's time is
 * bounded by grammar.h's state limits (worst cases measured in
 * docs/STRUCTURED_OUTPUT.md); realistic schemas take milliseconds.
 *
 * Token index: built from the tokenizer at the first grammar request (once
 * per model: the store lives and dies with the engine).
 *
 * Masks: per (grammar, state) in one llm_mask_cache of
 * LLM_GRAMMAR_MASK_CACHE_BYTES.  A mask is a pure function of its key, so
 * sharing the cache between requests keeps batch invariance.
 *
 * The processor of one request (llm_lp_grammar): apply() sets every logit
 * its current state does not allow to -INFINITY (end-of-generation ids are
 * allowed exactly in accepting states, special ids never); accept() advances
 * the state by the token's bytes (an end-of-generation token ends the output
 * and leaves the state as it is; a partial UTF-8 character simply leaves the
 * state between its bytes); complete() is true in an accepting state that
 * cannot continue.  apply() fails (-1) when no id is allowed (a vocabulary
 * that cannot continue the grammar) or memory runs out; accept() fails on an
 * id the mask did not allow, which only a processor after this one could
 * cause (the engine adds the grammar last).
 */
#ifndef LLM_LP_GRAMMAR_H
#define LLM_LP_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "grammar.h"
#include "logits_processor.h"
#include "request.h"
#include "tokenizer.h"

#define LLM_GRAMMAR_STORE_MAX			64
#define LLM_GRAMMAR_STORE_BYTES			((size_t) 256 << 20)
#define LLM_GRAMMAR_MASK_CACHE_BYTES	((size_t) 64 << 20)

typedef struct llm_grammar_store llm_grammar_store;

typedef struct llm_grammar_store_stats
{
	int64_t		compiles;		/* sources compiled */
	int64_t		hits;			/* processors whose grammar was already compiled */
	int64_t		evictions;
	int32_t		n_grammars;		/* held now */
	size_t		grammar_bytes;	/* their memory */
	double		compile_ms_total;
	double		compile_ms_max;
	double		index_ms;		/* building the token index (0 before the first grammar) */
	llm_mask_cache_stats masks;
	/* masked rows: mask lookup (computed on a cache miss) + applying it to the row */
	int64_t		n_masked;
	double		mask_us_mean;
	double		mask_us_p50;	/* from a histogram of 8 buckets per octave (+-5%) */
	double		mask_us_p99;
} llm_grammar_store_stats;

/* An empty store over tokenizer t (which must outlive it); NULL on out of memory. */
llm_grammar_store *llm_grammar_store_create(const llm_tokenizer *t);
void		llm_grammar_store_free(llm_grammar_store *s);

/*
 * The grammar processor of one request over the tagged source
 * src[0..len): the grammar compiled (or found in the store) and its start
 * state.  LLM_OK, or LLM_ERR_INVALID_PARAM (the source does not compile:
 * err names the construct), LLM_ERR_PROMPT_TOO_LONG (over a grammar limit),
 * LLM_ERR_OUT_OF_MEMORY.
 */
llm_status	llm_lp_grammar(llm_grammar_store *s, const char *src, size_t len,
						   llm_logits_processor **out, char *err, size_t errlen);

void		llm_grammar_store_get_stats(const llm_grammar_store *s, llm_grammar_store_stats *out);

#endif
