/*
 * lp_grammar.h — constrained decoding in the engine: the grammar store
 * (compiled grammars by tagged source, the vocabulary's token index, the
 * mask cache, mask timings, the compile thread) and the grammar logits
 * processor built on it.
 *
 * One store per engine (engine.c).  Every call below is made by the
 * engine's driver thread; the store owns one more thread, its compile
 * thread (pthread, started at the first grammar that needs a compile;
 * malloc'ed memory only, every signal blocked, never PostgreSQL), which
 * compiles sources and builds the token index so that the driver's step
 * never waits for either.
 *
 * Grammars: a GENERATE request carries a tagged grammar source (request.h,
 * grammar.h llm_grammar_compile_source).  llm_grammar_store_request finds
 * the source's entry or makes one and queues its compile (one job per
 * distinct source: a request for a source being compiled joins that
 * compile); it never compiles on the caller's thread.  An entry is PENDING
 * until the driver collects its finished compile (llm_grammar_store_poll,
 * which never waits: one atomic load when nothing finished), then READY
 * (the grammar) or FAILED (status and message of the compile; a failed
 * source is not kept: the next request for it compiles again).  A ready
 * reference becomes the request's processor (llm_lp_grammar_take) or is
 * given back (llm_grammar_store_release: a request aborted while waiting).
 * The store keeps a grammar while requests use it and afterwards as long
 * as the bounds allow: at most LLM_GRAMMAR_STORE_MAX entries and
 * LLM_GRAMMAR_STORE_BYTES of compiled grammars, the least recently used
 * READY one not in use evicted first.  A PENDING entry counts as in use
 * (it counts towards LLM_GRAMMAR_STORE_MAX and is never evicted, also when
 * every request waiting for it was aborted: the finished compile is then
 * kept like any unused grammar), so a burst of distinct grammars may
 * exceed the bounds until its requests end.  The key is the source's bytes
 * (hash, then compared in full).  A driver that normalizes first (the SQL
 * functions send llm_grammar_source() of their own compile) makes equal
 * grammars written differently share one entry.  A compile's time and
 * memory are bounded by grammar.h's limits (worst cases measured in
 * docs/STRUCTURED_OUTPUT.md); realistic schemas take milliseconds.
 *
 * Token index: built from the tokenizer (immutable, shared) on the compile
 * thread before the first compile, once per store (the store lives and dies
 * with the engine); no entry is READY before it, and the driver takes it
 * over, with the mask cache made beside it, at the poll that collects that
 * first compile.  A failure to build it fails that compile (out of memory)
 * and the next compile tries again.
 *
 * Threads and locks.  Driver thread only, no lock: the entries (hash
 * chains, states, references, LRU ticks), the bounds' counts, the token
 * index and mask cache once taken over, the statistics, the mask-time
 * histogram.  Under the store's mutex, shared with the compile thread: the
 * queue of compiles not started, the list of finished ones not collected
 * (with its count, also read without the lock by poll as an atomic), the
 * token index built but not taken over, the gate, the stop flag and whether
 * a compile is running.  A job's source is the entry's own copy, immutable
 * while the job lives; its result (grammar, status, message, time) is
 * written by the compile thread before the job goes on the finished list
 * and read by the driver only after taking it off; the compile thread never
 * touches an entry.
 *
 * Shutdown: llm_grammar_store_free stops the compile thread and joins it.
 * Compiles not started are dropped; a compile in progress (one at most)
 * runs to its end first, so the free can take as long as one compile at
 * grammar.h's limits plus, before the first compile, the token index:
 * 0.2-0.8 s measured for automata at the state limits on a loaded AVX2
 * core, 0.06-0.7 s for the index (49k to 262k tokens), milliseconds for
 * realistic grammars (docs/STRUCTURED_OUTPUT.md, "Grammar compile and
 * cache").  Freeing the engine (and so a model reload in the worker) waits
 * that long.
 *
 * Test seam (like PostgreSQL's injection points; only tests call it): the
 * gate.  While llm_grammar_store_debug_hold(s, true) holds it, the compile
 * thread starts no compile (one already running finishes), so a test can
 * keep requests waiting for their grammar for as many steps as it likes
 * and release them when it chooses, without timing anything.
 * llm_grammar_store_debug_drain waits (with the gate open) until every
 * queued compile has finished and collects them.
 *
 * Masks: per (grammar, state) in one llm_mask_cache of
 * LLM_GRAMMAR_MASK_CACHE_BYTES.  A mask is a pure function of its key, so
 * sharing the cache between requests keeps batch invariance.
 *
 * The processor of one request (llm_lp_grammar_take): apply() sets every logit
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
#include "engine/sample/logits_processor.h"
#include "engine/request.h"
#include "engine/text/tokenizer.h"

#define LLM_GRAMMAR_STORE_MAX			64
#define LLM_GRAMMAR_STORE_BYTES			((size_t) 256 << 20)
#define LLM_GRAMMAR_MASK_CACHE_BYTES	((size_t) 64 << 20)

typedef struct llm_grammar_store llm_grammar_store;

typedef struct llm_grammar_store_stats
{
	int64_t		compiles;		/* sources compiled (successfully) */
	int64_t		hits;			/* requests whose source was in the store, compiled or being compiled */
	int64_t		evictions;
	int32_t		n_grammars;		/* compiled grammars held now */
	size_t		grammar_bytes;	/* their memory */
	double		compile_ms_total;	/* of successful compiles, on the compile thread */
	double		compile_ms_max;
	double		index_ms;		/* building the token index (0 before the first grammar) */
	llm_mask_cache_stats masks;
	/* masked rows: mask lookup (computed on a cache miss) + applying it to the row */
	int64_t		n_masked;
	double		mask_us_mean;
	double		mask_us_p50;	/* from a histogram of 8 buckets per octave (+-5%) */
	double		mask_us_p99;
	/* the compile thread */
	int32_t		compiles_pending;	/* entries whose compile is queued, running or not collected yet */
	int32_t		requests_waiting;	/* references not yet a processor: requests waiting for a grammar */
	int64_t		compile_failures;	/* compiles that failed (their requests got the error) */
	double		wait_ms_max;	/* longest time from queueing a compile to collecting it */
} llm_grammar_store_stats;

/*
 * An empty store over tokenizer t (which must outlive it); NULL on out of
 * memory.  The compile thread starts with the first compile.
 */
llm_grammar_store *llm_grammar_store_create(const llm_tokenizer *t);
/* Stop and join the compile thread (see Shutdown), then free everything; processors must be gone. */
void		llm_grammar_store_free(llm_grammar_store *s);

/* A request's reference to the entry of its source (PENDING, READY or FAILED). */
typedef struct llm_grammar_ref llm_grammar_ref;

/*
 * The reference of one request to the tagged source src[0..len) (copied):
 * its entry found (a hit, whatever its state) or made, its compile queued.
 * Never compiles, never waits.  LLM_OK, or LLM_ERR_OUT_OF_MEMORY (no
 * memory for the entry, or the compile thread could not be started: err
 * says which).  Compile errors come later, from llm_lp_grammar_take.
 */
llm_status	llm_grammar_store_request(llm_grammar_store *s, const char *src, size_t len,
									  llm_grammar_ref **out, char *err, size_t errlen);

/* The entry is no longer PENDING: llm_lp_grammar_take gives the processor or the compile's error. */
bool		llm_grammar_ref_ready(const llm_grammar_ref *ref);

/*
 * The processor of a ready reference (which it consumes in every case):
 * the grammar at its start state.  LLM_OK, or the compile's error with its
 * message -- LLM_ERR_INVALID_PARAM (the source does not compile: err names
 * the construct), LLM_ERR_PROMPT_TOO_LONG (over a grammar limit),
 * LLM_ERR_OUT_OF_MEMORY -- the status and text a synchronous
 * llm_grammar_compile_source of the source gives; or LLM_ERR_OUT_OF_MEMORY
 * for the processor itself.  A reference not ready yet is refused
 * (LLM_ERR_INVALID_PARAM) and stays the caller's.
 */
llm_status	llm_lp_grammar_take(llm_grammar_store *s, llm_grammar_ref *ref, llm_logits_processor **out,
								char *err, size_t errlen);

/* Give back a reference that will never be taken (its request was dropped); the entry stays. */
void		llm_grammar_store_release(llm_grammar_store *s, llm_grammar_ref *ref);

/*
 * Collect the compiles the compile thread has finished (and the token index
 * with the first): their entries become READY or FAILED.  Never waits
 * (nothing finished: one atomic load).  Returns the number collected.
 */
int			llm_grammar_store_poll(llm_grammar_store *s);

/*
 * For a driver with nothing else to do: wait until a compile has finished
 * (not yet collected) or max_ms milliseconds have passed; true when one
 * has.  Returns at once when one already has or nothing is queued.
 */
bool		llm_grammar_store_wait(llm_grammar_store *s, double max_ms);

/* Test seam: hold (true) or open (false) the compile thread's gate (see above). */
void		llm_grammar_store_debug_hold(llm_grammar_store *s, bool hold);
/*
 * Test seam: with the gate open, wait until no compile is queued or
 * running, then poll.  False (nothing waited for) while the gate is held.
 */
bool		llm_grammar_store_debug_drain(llm_grammar_store *s);

void		llm_grammar_store_get_stats(const llm_grammar_store *s, llm_grammar_store_stats *out);

#endif
