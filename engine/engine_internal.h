/*
 * engine_internal.h — what the engine's rooms share: the engine and the
 * live-request structs, and the few calls between rooms.  Not an API: only
 * engine/engine*.c include it; drivers use engine.h.
 *
 * Rooms (arrows: "calls into"; no cycles):
 *   engine_config.c   the one configuration: defaults, checks, resolution of
 *                     the 0 = auto values, equality
 *   output.c   a request's output: incremental detokenization, stop
 *                     strings across token boundaries, the events (TEXT,
 *                     FINISHED with usage or scores, ERROR)
 *   engine.c          -> engine_config.c, output.c: the request
 *                     table, engine and request lifecycle, submission
 *                     (prompt to ids, SCORE fan-out), the public API
 *   step.c     -> engine.c, output.c: one step: plan ->
 *                     step description -> forward -> logits processors ->
 *                     sample or score
 * output.c reports that a final event was sent; dropping the request
 * is the caller's (step.c's) business, so output never calls back
 * into the table.
 */
#ifndef LLM_ENGINE_INTERNAL_H
#define LLM_ENGINE_INTERNAL_H

#include <time.h>

#include "engine.h"

#include "kernels/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/sched/kv_block_pool.h"
#include "engine/sample/logits_processor.h"
#include "engine/grammar/lp_grammar.h"
#include "engine/model/model.h"
#include "engine/util/job_thread.h"
#include <stdatomic.h>
#include "engine/sample/sampler.h"
#include "engine/sched/scheduler.h"
#include "engine/spec/spec.h"
#include "engine/spec/spec_lookup.h"
#include "engine/text/tokenizer.h"

/*
 * One continuation of a SCORE request.  Its sequence (live_request.seqs[k])
 * holds the prompt's ids followed by the continuation's ids without the
 * last one: the logits at positions n_prompt - 1 .. n_tokens - 1 predict
 * the continuation's tokens, the last of which (last_token) is never fed.
 * With a prompt sequence (live_request.prompt_seq) the row at n_prompt - 1
 * is that sequence's, shared by every continuation.
 */
typedef struct score_part
{
	int32_t		n_targets;		/* continuation ids (+ end of turn) */
	int32_t		n_lead;			/* leading targets not summed (a pair's prompt rest, request.h) */
	int32_t		n_prompt;		/* ids before the targets: the request's, or its pair's chat */
	int32_t		last_token;		/* the final one of them */
	int32_t		n_scored;		/* leading targets scored so far */
	double		logprob;		/* sum of their natural log-probabilities */
} score_part;

/*
 * A request living in the engine, from submission to its final event.
 * Who writes which fields:
 *   engine.c (submission, then read-only): id, user_data, mode, params and
 *     stop, n_prompt, max_len, t_add, chain (the processors' own state moves
 *     only through llm_lp_chain_accept), seqs/n_seqs (array and scheduler
 *     membership), score[].n_targets/last_token, n_continuations,
 *     prompt_seq, dropped, next_dropped;
 *   engine.c, waiting for a grammar: grammar_wait, next_grammar_wait, the
 *     grammar's processor added last to chain, seqs[0] into the scheduler
 *     (engine_grammar_admit);
 *   engine.c, waiting for the tokenizer thread: tok_job, tokenize_only
 *     (engine_tokenize_admit);
 *   step.c: seqs[k].tokens (accepted tokens appended),
 *     seqs[k].n_tail_logits (lowered as rows are scored), rng, score[].n_scored
 *     and logprob, n_unscored, removal of a scored sequence from the scheduler,
 *     seqs[k].fork_from (cleared once the prompt's sequence is scored);
 *   output.c: detok, text, text_len, text_cap, emitted, answer_settled,
 *     n_generated,
 *     t_first;
 *   engine.c: spec and spec_state (the proposer's start at submission,
 *     forget in request_free); the proposer alone changes what spec_state
 *     points at (spec.h);
 *   step.c, speculation and accounting: draft (seqs[0].draft
 *     points at it while a step carries drafts), n_draft_tokens,
 *     n_accepted_tokens, busy_ms, n_continuation_rows.
 * The scheduler owns the llm_seq fields it documents (blocks, n_computed,
 * state, ...).
 */
typedef struct live_request
{
	uint64_t	id;
	void	   *user_data;
	llm_request_mode mode;
	llm_sampling_params params;	/* params.stop points at stop */
	char	  **stop;			/* owned copies of the stop strings */
	int32_t		n_prompt;		/* the prompt's ids (usage.prompt_tokens) */
	int64_t		max_len;		/* GENERATE: finish at this many tokens (prompt + output) */
	double		t_add;
	llm_lp_chain chain;			/* GENERATE: logits processors, in order */

	/* sequences in the scheduler: 1 for GENERATE, one per continuation for SCORE */
	llm_seq    *seqs;
	int32_t		n_seqs;

	/* step state */
	llm_rng		rng;
	score_part *score;			/* SCORE: [n_seqs] */
	int32_t		n_unscored;		/* SCORE: sequences not fully scored yet */

	/* output state */
	llm_detok	detok;
	char	   *text;			/* generated text so far (NUL-terminated), NULL until the first */
	size_t		text_len;
	size_t		text_cap;
	size_t		emitted;		/* bytes of text already sent as TEXT events, or stripped */
	/*
	 * GENERATE, request.h's strip_thinking for a chat prompt: no TEXT until
	 * answer_settled, when emitted jumps to the answer's start (output.c);
	 * think_opened: the prompt opened the section (thinking 1)
	 */
	bool		strip_thinking;
	bool		think_opened;
	bool		answer_settled;
	int32_t		n_generated;
	double		t_first;

	bool		dropped;		/* out of the table and the scheduler; freed after the step */
	struct live_request *next_dropped;

	/*
	 * GENERATE with a grammar: step.c sets output_complete after the
	 * processors' accept when the chain says the output is complete;
	 * output.c then finishes the request with "stop".
	 */
	bool		output_complete;
	/* SCORE with continuation_echo: the JSON array of the continuations (engine.c) */
	char	   *echo;
	size_t		echo_len;
	/*
	 * speculative decoding (spec.h): the engine's proposer and this
	 * request's state in it (GENERATE with speculation on; else NULL,
	 * nothing to forget), and accounting
	 */
	llm_spec_proposer *spec;
	void	   *spec_state;
	int32_t		draft[LLM_SPEC_MAX_TOKENS];
	int32_t		n_draft_tokens; /* proposed and computed, over the request's life */
	int32_t		n_accepted_tokens;
	double		busy_ms;		/* usage.busy_ms */
	int64_t		n_continuation_rows;	/* usage.continuation_tokens (step.c) */
	/*
	 * SCORE (engine.c): the continuations, score[0..n_continuations) and
	 * seqs[0..n_continuations); with prompt_seq (seqs[n_continuations], NULL
	 * when each continuation computes the prompt itself), the prompt's own
	 * sequence: computed once, its last row scores every continuation's
	 * first target (step.c), then each continuation's sequence forks
	 * from it (llm_sched_fork: full blocks shared, the partly filled last
	 * block copied) and computes only its own tokens.
	 */
	int32_t		n_continuations;
	llm_seq    *prompt_seq;
	/*
	 * With continuation answers (request.h) and a prompt sequence, each
	 * pair's chat has a sequence too, seqs[n_continuations + 1 + k]: it forks
	 * from prompt_seq and computes the rest of chat k once, its last row
	 * scores the first target of each of its answers' sequences, which then
	 * fork from it.  A sequence's source is its fork_from until it forks;
	 * the sequences at n_continuations and after are prompt sequences.
	 */
	/*
	 * GENERATE whose grammar was not compiled at submission (engine.c):
	 * the grammar store's reference, and the next request on the engine's
	 * grammar_waiting list.  While it is set the request waits for its
	 * grammar: its sequence is not in the scheduler (LLM_SEQ_DETACHED: never
	 * admitted, no KV blocks, no prefill) and its chain lacks the grammar.
	 * engine_grammar_admit clears it when the grammar is ready (the
	 * processor added last, the sequence added to the scheduler) or failed
	 * (the request failed); a drop gives it back to the store.
	 */
	llm_grammar_ref *grammar_wait;
	struct live_request *next_grammar_wait;
	/*
	 * A stand-in waiting for its prompt's ids from the tokenizer thread
	 * (engine.c): it holds the request's id in the table (so abort, a
	 * duplicate id and has_work see it) with one sequence that never enters
	 * the scheduler (LLM_SEQ_DETACHED), mode and params from the request,
	 * nothing else.  engine_tokenize_admit takes it out of the table and
	 * submits the request over the ids, or fails it with the error a
	 * submission tokenizing inline would have returned; a drop detaches it
	 * from its job.  tokenize_only: an llm_engine_tokenize_request, which
	 * ends with its TOKENS event.
	 */
	struct tokenize_job *tok_job;
	bool		tokenize_only;
	/*
	 * EMBED (requests.c new_embed, step.c embed_rows): the pooling and
	 * normalisation resolved against the model (LAST, MEAN or CLS; l2),
	 * and for MEAN and CLS the pooled state so far: pool_sum [dim] (double,
	 * rows added in position order) over the first n_pooled prompt rows.
	 */
	llm_pooling pooling;
	bool		l2;
	double	   *pool_sum;
	int32_t		n_pooled;
} live_request;

struct llm_engine
{
	/* engine.c: made by llm_engine_create, read-only afterwards */
	llm_engine_config cfg;		/* resolved (engine_config.c): no 0 = auto left */
	char	   *model_path;		/* cfg.model_path points here */
	char	   *device;			/* cfg.device points here */
	char	   *chat_template;	/* cfg.chat_template points here */
	gguf_file  *gguf;
	llm_tokenizer *tok;
	llm_chat_template chat;
	llm_backend *backend;
	llm_model  *model;
	const llm_model_config *mc;
	llm_block_pool *pool;
	llm_block_pool *local_pool; /* sliding-window layers' blocks (scheduler.h), or NULL */
	int64_t		pool_block_bytes;	/* bytes of one block of pool / local_pool */
	int64_t		local_block_bytes;
	uint8_t    *layer_local;	/* [n_layers] the geometry's local-group flags, or NULL */
	llm_sched  *sched;
	uint64_t	model_identity; /* mixed into every prefix-cache salt */
	int32_t		end_of_turn;	/* id continuation_eot appends, -1 if the model has none */
	llm_grammar_store *grammars;	/* compiled grammars, token index, masks (lp_grammar.h) */

	/* engine.c: live requests by id: open addressing, NULL empty, TOMB deleted */
	live_request **table;
	uint32_t	table_mask;
	int32_t		n_live;
	int32_t		n_tomb;
	int32_t		n_live_score;	/* live SCORE requests */
	uint64_t	n_private_salts;	/* prefix-cache salts handed to SCORE requests (caching off) */
	live_request *dropped;		/* dropped during the step, freed at its end */
	bool		in_step;

	/* step.c: buffers of one step */
	llm_sampler_scratch sampler;
	float	   *lp_work;		/* [n_vocab] scratch of the logits processors */
	float	   *logits;			/* [cap_out][n_vocab] host: the step's logits rows */
	int32_t		cap_out;
	/*
	 * The step's hidden rows (EMBED requests' last rows, llm_forward_out):
	 * [cap_hidden][dim] host, and each output row's kind [cap_d_out]
	 */
	float	   *hidden;
	int32_t		cap_hidden;
	uint8_t    *d_out_kind;
	int32_t    *d_tokens,
			   *d_pos,
			   *d_slots,
			   *d_seq_start,
			   *d_seq_kv_len,
			   *d_block_tables,
			   *d_out_rows,
			   *d_slots_local,	/* [cap_d_tokens], with local_pool */
			   *d_block_tables_local;	/* [cap_d_tables], with local_pool */
	uint8_t    *d_decode;		/* [cap_d_tokens] generated-token flags */
	uint8_t    *d_forms;		/* [cap_d_tokens] LLM_ROW_* flags (backend.h) */
	int32_t		cap_d_tokens,
				cap_d_seqs,
				cap_d_tables,
				cap_d_out;
	int			poison_logits;	/* test hook: rows left to poison (set by engine.c) */
	/* the step-time model (scheduler.h llm_sched_set_step_cost): moving moments of (tokens, ms) */
	double		cost_n,
				cost_t,
				cost_nn,
				cost_nt;
	int64_t		cost_steps;
	double		cost_small_n,	/* moving means over the steps of at most ENGINE_COST_SMALL_STEP tokens */
				cost_small_t;
	int64_t		cost_small_steps;
	llm_spec_proposer *spec;	/* engine.c: the draft proposer (spec.h), NULL with spec_tokens 0 */
	live_request **drafted;		/* [cfg.spec_max_batch] requests given drafts this step */
	int32_t		n_drafted;
	char		notes[256];		/* engine.c: llm_engine_notes */

	/*
	 * Counters: prompt_tokens by engine.c, completion_tokens by
	 * output.c, the per-step ones by step.c; the scheduler's
	 * and the pool's are read at llm_engine_get_stats.
	 */
	llm_engine_stats stats;
	/* engine.c: how SCORE requests share their prompt (llm_engine_debug_score_sharing) */
	llm_score_sharing score_sharing;
	/* engine.c: requests waiting for their grammar (live_request.grammar_wait), in submission order */
	live_request *grammar_waiting;
	int32_t		n_grammar_waiting;
	/*
	 * submit.c: the tokenizer thread (a job thread), its jobs not collected yet
	 * (a dropped stand-in's included), the stand-ins waiting for one, and
	 * the prompt size from which a submission is tokenized there
	 * (LLM_TOKENIZE_INLINE_BYTES unless a test changed it)
	 */
	llm_job_thread *tokenizer;
	int32_t		n_tokenize_jobs;
	int32_t		n_tokenizing;
	size_t		tokenize_inline_bytes;
	/*
	 * step.c: the backend's scan of this step's logits rows
	 * (llm_model_scan_logits: per row finite, and argmax for greedy rows
	 * without processors), valid while have_scan
	 */
	int32_t    *scan_argmax;	/* [cap_scan] */
	uint8_t    *scan_finite;	/* [cap_scan] */
	int32_t		cap_scan;
	bool		have_scan;
};

#define TOMB ((live_request *) (uintptr_t) 1)

/* ---------- engine_config.c ---------- */

/*
 * 0 when c is a valid configuration; else -1 + err, *field the offset of
 * the field at fault (engine.h, LLM_CONFIG_NO_FIELD).
 */
int			engine_config_check(const llm_engine_config *c, size_t *field, char *err, size_t errlen);

/* llm_kv_dtype (backend.h) named by c->kv_cache_dtype; -1 for a name engine_config_check rejects. */
int			engine_config_kv_dtype(const llm_engine_config *c);

/*
 * Fill c's 0 = auto values from the loaded model and backend: n_ctx (the
 * model's), n_threads (the backend's count, whatever was asked: all CPUs
 * for 0, 1 on a GPU), device (the backend's name for "auto"),
 * reserved_interactive (-1: max_running / 16, at least 1; never more than
 * max_running - 1),
 * kv_cache_bytes (enough for max_running full contexts, capped at 1 GiB),
 * rounded down to whole blocks of block_bytes.  0, or -1 + err and *field
 * (as engine_config_check) when the result is unusable (context below
 * LLM_MIN_N_CTX, fewer than 2 blocks, a budget over
 * llm_engine_check_kv_budget's share of memory).
 */
int			engine_config_resolve(llm_engine_config *c, const llm_model_config *mc,
								  const llm_backend *b, size_t block_bytes, size_t *field,
								  char *err, size_t errlen);

/* CPUs this process may run on (its affinity mask; the online count if unknown), >= 1. */
int			engine_online_cpus(void);

/* Monotonic clock in milliseconds (request timings). */
static inline double
engine_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---------- engine.c ---------- */

/*
 * Take r out of the table and the scheduler (its KV blocks released; full
 * ones stay cached).  During a step the memory lives until the step ends,
 * so plan entries of r's other sequences can still be looked at (their
 * state is LLM_SEQ_DETACHED).  Idempotent.
 */
void		engine_drop_request(llm_engine *e, live_request *r);
/* Free what engine_drop_request deferred (end of a step). */
void		engine_free_dropped(llm_engine *e);
/* The next live request at or after *pos in the table, advancing *pos; NULL at the end. */
live_request *engine_next_live(const llm_engine *e, uint32_t *pos);
/*
 * Start of a step: collect the grammar store's finished compiles (never
 * waits) and move each request whose grammar is now ready into the
 * scheduler with its processor, or fail it (ERROR through cb) if its
 * compile failed.  Only when the scheduler holds nothing at all and
 * requests wait for grammars does it wait, at most ENGINE_GRAMMAR_IDLE_MS,
 * for a compile to finish, so a driver stepping while only compiles are
 * in flight neither spins nor holds any other request.
 */
#define ENGINE_GRAMMAR_IDLE_MS 2.0
void		engine_grammar_admit(llm_engine *e, llm_event_cb cb, void *arg);
/*
 * Start of a step, before engine_grammar_admit: collect the tokenizer
 * thread's finished jobs (never waits) in the order they were queued and
 * submit each waiting request over its ids (its grammar may then make it
 * wait again), or fail it (ERROR through cb, the status and message the
 * inline submission would have returned); an llm_engine_tokenize_request
 * gets its TOKENS (or ERROR) event.  Only when the scheduler holds nothing
 * and requests wait for the tokenizer does it wait, at most
 * ENGINE_GRAMMAR_IDLE_MS, for a job to finish.
 */
void		engine_tokenize_admit(llm_engine *e, llm_event_cb cb, void *arg);

/* ---------- output.c ---------- */

/* Output state of a new request; 0 or -1 (out of memory). */
int			engine_output_init(live_request *r);
void		engine_output_free(live_request *r);

/*
 * A token of GENERATE request r was accepted (already appended to its
 * sequence): count it, detokenize, match stop strings, emit TEXT and, when
 * it ends the request (end of generation, a stop string, an output its
 * grammar says is complete (r->output_complete), max_tokens or the
 * context), FINISHED.  True when a final event was sent: drop r.
 */
bool		engine_output_token(llm_engine *e, live_request *r, int32_t tok, llm_event_cb cb, void *arg);
/* FINISHED of a SCORE request with its scores (after a TEXT of r->echo, if any); the caller drops r. */
void		engine_output_scores(live_request *r, llm_event_cb cb, void *arg);
/* TOKENS of an llm_engine_tokenize_request: ids[0..n); the caller drops r. */
void		engine_output_tokens(live_request *r, const int32_t *ids, int64_t n, llm_event_cb cb, void *arg);
/* VECTOR of an EMBED request: v[0..n) and usage; the caller drops r. */
void		engine_output_vector(live_request *r, const float *v, int32_t n, llm_event_cb cb, void *arg);
/* ERROR for r; the caller drops r. */
void		engine_output_error(live_request *r, llm_status st, const char *msg, llm_event_cb cb, void *arg);

/* ---------- requests.c, prompt.c, submit.c ---------- */

/* the tokenizer thread's nice value: the steps keep the CPU they share with it */
#define ENGINE_TOKENIZER_NICE 10

/*
 * Every token id a request's submission needs: the prompt's, and a SCORE
 * request's continuations' in order up to the first that fails.  Made by
 * tokenize_request from read-only engine state only (the tokenizer, the
 * chat template, end_of_turn), so on the driver or on the tokenizer thread
 * alike; consumed by submit_ids on the driver.
 */
typedef struct tokenized
{
	int32_t    *ids;			/* the prompt's (malloc'd) */
	int64_t		n;				/* their count; -1: the prompt failed (err) */
	int32_t   **cont;			/* SCORE: [n_seq], the first n_cont_ok set */
	int32_t    *n_cont;
	int32_t		n_cont_ok;
	/*
	 * SCORE: the continuations' sequences, n_continuations, or the pairs of
	 * continuation_answers (request.h); lead[k] (NULL: all 0) of cont[k]'s
	 * leading ids are the rest of pair k's prompt, computed but not scored.
	 */
	int32_t		n_seq;
	int32_t    *lead;
	llm_status	cont_st;		/* continuation n_cont_ok's failure (err), if any */
	char		err[1100];
} tokenized;

/*
 * One request's tokenization on the tokenizer thread.  The thread reads
 * only req (its own copy) and the engine's read-only tokenizer, chat
 * template and end_of_turn, and writes only out; owner is the driver's.
 */
typedef struct tokenize_job
{
	llm_job base;		/* first: the job thread's view of the job */
	const llm_engine *e;
	llm_request *req;			/* llm_request_copy of the submitted request */
	bool		text_only;		/* llm_engine_tokenize_request: req->prompt as plain text */
	live_request *owner;		/* driver: the waiting stand-in; NULL once it was dropped */
	atomic_bool dropped;		/* set with owner = NULL: a job not started yet is skipped */
	tokenized	out;
} tokenize_job;

live_request *engine_table_get(const llm_engine *e, uint64_t id);
int engine_table_rehash(llm_engine *e, uint32_t size);
int engine_table_put(llm_engine *e, live_request *r);
void engine_table_del(llm_engine *e, uint64_t id);
void engine_request_free(live_request *r);
void engine_grammar_wait_cancel(llm_engine *e, live_request *r);
int64_t engine_prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids, char *err, size_t errlen);
void engine_tokenized_free(tokenized *t);
void engine_tokenize_request(const llm_engine *e, const llm_request *req, tokenized *t);
live_request *engine_request_new(uint64_t id, void *user_data, const llm_request *req, int32_t n_prompt, int32_t n_seqs);
llm_status engine_submit_ids(llm_engine *e, uint64_t id, const llm_request *req, void *user_data, const tokenized *t, char *err, size_t errlen);
void engine_tokenize_wait_cancel(llm_engine *e, live_request *r);

#endif
