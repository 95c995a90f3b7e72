/*
 * requests.c — the engine's requests: the request table (id -> live
 * request), a request's memory and drop (with its waits outside the
 * scheduler: for its grammar, for the tokenizer thread), and submission by
 * kind over token ids: GENERATE (and EMBED: one sequence, its last row a
 * hidden row), SCORE (one sequence per continuation; with two or more, the
 * prompt's own sequence they fork from), the grammar wait and its admission.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "backend_loader.h"
#include "kernels/cpu/backend_cpu.h"
#include "engine/grammar/json_min.h"
#include "kernels/quant_types.h"

/* ---------- request table ---------- */

static uint32_t
id_hash(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (uint32_t) id;
}

live_request *
engine_table_get(const llm_engine *e, uint64_t id)
{
	for (uint32_t i = id_hash(id) & e->table_mask;; i = (i + 1) & e->table_mask)
	{
		live_request *r = e->table[i];

		if (r == NULL)
			return NULL;
		if (r != TOMB && r->id == id)
			return r;
	}
}

int
engine_table_rehash(llm_engine *e, uint32_t size)
{
	live_request **old = e->table;
	uint32_t	old_size = e->table ? e->table_mask + 1 : 0;
	live_request **t = calloc(size, sizeof(live_request *));

	if (t == NULL)
		return -1;
	e->table = t;
	e->table_mask = size - 1;
	e->n_tomb = 0;
	for (uint32_t i = 0; i < old_size; i++)
		if (old[i] != NULL && old[i] != TOMB)
		{
			uint32_t	j = id_hash(old[i]->id) & e->table_mask;

			while (t[j] != NULL)
				j = (j + 1) & e->table_mask;
			t[j] = old[i];
		}
	free(old);
	return 0;
}

int
engine_table_put(llm_engine *e, live_request *r)
{
	uint32_t	size = e->table_mask + 1;
	uint32_t	i;

	if ((uint32_t) (e->n_live + e->n_tomb + 1) * 2 > size)
	{
		uint32_t	ns = size;

		while ((uint32_t) (e->n_live + 1) * 4 > ns)
			ns *= 2;
		if (engine_table_rehash(e, ns))
			return -1;
	}
	for (i = id_hash(r->id) & e->table_mask; e->table[i] != NULL && e->table[i] != TOMB;
		 i = (i + 1) & e->table_mask)
		;
	if (e->table[i] == TOMB)
		e->n_tomb--;
	e->table[i] = r;
	e->n_live++;
	return 0;
}

void
engine_table_del(llm_engine *e, uint64_t id)
{
	for (uint32_t i = id_hash(id) & e->table_mask;; i = (i + 1) & e->table_mask)
	{
		live_request *r = e->table[i];

		if (r == NULL)
			return;
		if (r != TOMB && r->id == id)
		{
			e->table[i] = TOMB;
			e->n_tomb++;
			e->n_live--;
			return;
		}
	}
}

live_request *
engine_next_live(const llm_engine *e, uint32_t *pos)
{
	for (; *pos <= e->table_mask; (*pos)++)
	{
		live_request *r = e->table[*pos];

		if (r != NULL && r != TOMB)
		{
			(*pos)++;
			return r;
		}
	}
	return NULL;
}

/* ---------- requests: memory, drop ---------- */

void
engine_request_free(live_request *r)
{
	if (r == NULL)
		return;
	for (int32_t k = 0; k < r->n_seqs; k++)
		llm_seq_free(&r->seqs[k]);
	free(r->seqs);
	free(r->score);
	if (r->stop)
		for (int i = 0; i < r->params.n_stop; i++)
			free(r->stop[i]);
	free(r->stop);
	llm_lp_chain_free(&r->chain);
	if (r->spec != NULL)
		llm_spec_forget(r->spec, r->spec_state);
	engine_output_free(r);
	free(r->echo);
	free(r->pool_sum);
	free(r);
}

/* Take r off the grammar_waiting list and give its reference back to the store. */
void
engine_grammar_wait_cancel(llm_engine *e, live_request *r)
{
	if (r->grammar_wait == NULL)
		return;
	for (live_request **p = &e->grammar_waiting; *p; p = &(*p)->next_grammar_wait)
		if (*p == r)
		{
			*p = r->next_grammar_wait;
			e->n_grammar_waiting--;
			break;
		}
	r->next_grammar_wait = NULL;
	llm_grammar_store_release(e->grammars, r->grammar_wait);
	r->grammar_wait = NULL;
}


/* A dropped stand-in leaves its job to finish on its own: collected and freed unseen. */
void
engine_tokenize_wait_cancel(llm_engine *e, live_request *r)
{
	if (r->tok_job == NULL)
		return;
	r->tok_job->owner = NULL;
	atomic_store(&r->tok_job->dropped, true);
	r->tok_job = NULL;
	e->n_tokenizing--;
}

void
engine_drop_request(llm_engine *e, live_request *r)
{
	bool		stand_in = r->tok_job != NULL || r->tokenize_only;

	if (r->dropped)
		return;
	engine_grammar_wait_cancel(e, r);
	engine_tokenize_wait_cancel(e, r);
	for (int32_t k = 0; k < r->n_seqs; k++)
		llm_sched_remove(e->sched, &r->seqs[k]);
	engine_table_del(e, r->id);
	/* a stand-in was never counted: only the request built from its ids is */
	if (r->mode == LLM_MODE_SCORE && !stand_in)
		e->n_live_score--;
	r->dropped = true;
	if (e->in_step)
	{
		r->next_dropped = e->dropped;
		e->dropped = r;
	}
	else
		engine_request_free(r);
}

void
engine_free_dropped(llm_engine *e)
{
	while (e->dropped)
	{
		live_request *r = e->dropped;

		e->dropped = r->next_dropped;
		engine_request_free(r);
	}
}

bool
llm_engine_abort(llm_engine *e, uint64_t id)
{
	live_request *r = engine_table_get(e, id);

	if (r == NULL)
		return false;
	engine_drop_request(e, r);
	return true;
}

bool
llm_engine_has_work(const llm_engine *e)
{
	return e->n_live > 0;
}

/* ---------- submission ---------- */

/* Continuation k's token ids (+ end of turn) into a malloc'd array (*ids, count *n). */
static llm_status
continuation_ids(const llm_engine *e, const llm_request *req, int k, int32_t **ids, int32_t *n,
				 char *err, size_t errlen)
{
	char		msg[512];
	int64_t		got = llm_engine_tokenize(e, req->continuations[k], req->continuation_lens[k], ids,
										  msg, sizeof(msg));

	if (got < 0)
	{
		snprintf(err, errlen, "continuation %d: %s", k + 1, msg);
		return LLM_ERR_INVALID_PARAM;
	}
	if (got + 1 > INT32_MAX)
	{
		free(*ids);
		snprintf(err, errlen, "continuation %d is too long", k + 1);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	if (req->continuation_eot)
	{
		int32_t    *more = realloc(*ids, (size_t) (got + 1) * sizeof(int32_t));

		if (more == NULL)
		{
			free(*ids);
			snprintf(err, errlen, "out of memory");
			return LLM_ERR_OUT_OF_MEMORY;
		}
		*ids = more;
		(*ids)[got++] = e->end_of_turn;
	}
	if (got == 0)
	{
		free(*ids);
		snprintf(err, errlen, "continuation %d has no tokens", k + 1);
		return LLM_ERR_INVALID_PARAM;
	}
	*n = (int32_t) got;
	return LLM_OK;
}


void
engine_tokenized_free(tokenized *t)
{
	free(t->ids);
	if (t->cont != NULL)
		for (int32_t k = 0; k < t->n_cont_ok; k++)
			free(t->cont[k]);
	free(t->cont);
	free(t->n_cont);
	free(t->lead);
	memset(t, 0, sizeof(*t));
}

/*
 * The pairs of a SCORE request with continuation answers (request.h) into
 * t, whose prompt ids were the prompt's alone: each end k's chat (user
 * message prompt + end k) rendered and tokenized as its own request's
 * prompt would be, each answer a as a continuation; t's prompt becomes the
 * longest common prefix of the chats' ids and pair (k, a) the rest of chat
 * k (lead, not scored) followed by answer a's ids.  Failures as
 * engine_tokenize_request's: a continuation's (cont_st, err).
 */
static void
tokenize_pairs(const llm_engine *e, const llm_request *req, tokenized *t)
{
	int32_t		na = req->continuation_answers;
	int32_t		nk = req->n_continuations - na;
	int32_t   **chat = calloc((size_t) nk, sizeof(int32_t *));
	int64_t    *n_chat = calloc((size_t) nk, sizeof(int64_t));
	int32_t   **ans = calloc((size_t) na, sizeof(int32_t *));
	int32_t    *n_ans = calloc((size_t) na, sizeof(int32_t));
	int32_t		k_done = 0,
				a_done = 0;
	int64_t		lcp;
	int32_t    *common;

	t->n_seq = nk * na;
	t->cont = calloc((size_t) t->n_seq, sizeof(int32_t *));
	t->n_cont = calloc((size_t) t->n_seq, sizeof(int32_t));
	t->lead = calloc((size_t) t->n_seq, sizeof(int32_t));
	if (chat == NULL || n_chat == NULL || ans == NULL || n_ans == NULL ||
		t->cont == NULL || t->n_cont == NULL || t->lead == NULL)
		goto oom;
	for (; a_done < na; a_done++)
	{
		t->cont_st = continuation_ids(e, req, nk + a_done, &ans[a_done], &n_ans[a_done], t->err, sizeof(t->err));
		if (t->cont_st != LLM_OK)
			goto done;
	}
	for (; k_done < nk; k_done++)
	{
		llm_request q = *req;
		size_t		len = req->prompt_len + req->continuation_lens[k_done];
		char	   *text = malloc(len);

		if (text == NULL)
			goto oom;
		memcpy(text, req->prompt, req->prompt_len);
		memcpy(text + req->prompt_len, req->continuations[k_done], req->continuation_lens[k_done]);
		q.prompt = text;
		q.prompt_len = len;
		n_chat[k_done] = engine_prompt_ids(e, &q, &chat[k_done], t->err, sizeof(t->err));
		free(text);
		if (n_chat[k_done] < 0)
		{
			chat[k_done] = NULL;
			t->cont_st = LLM_ERR_INVALID_PARAM;
			if (t->err[0] == '\0')
				snprintf(t->err, sizeof(t->err), "could not tokenize continuation %d", k_done + 1);
			goto done;
		}
	}
	lcp = n_chat[0];
	for (int32_t k = 1; k < nk; k++)
	{
		int64_t		i = 0;

		while (i < lcp && i < n_chat[k] && chat[k][i] == chat[0][i])
			i++;
		lcp = i;
	}
	for (int32_t k = 0; k < nk; k++)
		if (n_chat[k] - lcp + n_ans[na - 1] > INT32_MAX / 2 || lcp < 1)
		{
			t->cont_st = LLM_ERR_PROMPT_TOO_LONG;
			snprintf(t->err, sizeof(t->err), "continuation %d is too long", k + 1);
			goto done;
		}
	common = malloc((size_t) lcp * sizeof(int32_t));
	if (common == NULL)
		goto oom;
	memcpy(common, chat[0], (size_t) lcp * sizeof(int32_t));
	free(t->ids);
	t->ids = common;
	t->n = lcp;
	for (int32_t k = 0; k < nk; k++)
		for (int32_t a = 0; a < na; a++)
		{
			int32_t		s = k * na + a;
			int32_t		rest = (int32_t) (n_chat[k] - lcp);

			t->cont[s] = malloc((size_t) (rest + n_ans[a]) * sizeof(int32_t));
			if (t->cont[s] == NULL)
				goto oom;
			memcpy(t->cont[s], chat[k] + lcp, (size_t) rest * sizeof(int32_t));
			memcpy(t->cont[s] + rest, ans[a], (size_t) n_ans[a] * sizeof(int32_t));
			t->n_cont[s] = rest + n_ans[a];
			t->lead[s] = rest;
			t->n_cont_ok++;
		}
	t->cont_st = LLM_OK;
	goto done;
oom:
	t->cont_st = LLM_ERR_OUT_OF_MEMORY;
	snprintf(t->err, sizeof(t->err), "out of memory queueing request");
done:
	for (int32_t k = 0; k < k_done && chat != NULL; k++)
		free(chat[k]);
	for (int32_t a = 0; a < a_done && ans != NULL; a++)
		free(ans[a]);
	free(chat);
	free(n_chat);
	free(ans);
	free(n_ans);
}

/*
 * Tokenize req (validated) into t: the prompt (its error in t->err, or
 * "could not tokenize the prompt"), then, when it gave ids, a SCORE
 * request's continuations until one fails.
 */
void
engine_tokenize_request(const llm_engine *e, const llm_request *req, tokenized *t)
{
	memset(t, 0, sizeof(*t));
	t->n = engine_prompt_ids(e, req, &t->ids, t->err, sizeof(t->err));
	if (t->n < 0)
	{
		if (t->err[0] == '\0')
			snprintf(t->err, sizeof(t->err), "could not tokenize the prompt");
		return;
	}
	if (req->mode != LLM_MODE_SCORE || t->n == 0)
		return;
	if (req->continuation_answers > 0)
	{
		tokenize_pairs(e, req, t);
		return;
	}
	t->n_seq = req->n_continuations;
	t->cont = calloc((size_t) req->n_continuations, sizeof(int32_t *));
	t->n_cont = calloc((size_t) req->n_continuations, sizeof(int32_t));
	if (t->cont == NULL || t->n_cont == NULL)
	{
		t->cont_st = LLM_ERR_OUT_OF_MEMORY;
		snprintf(t->err, sizeof(t->err), "out of memory queueing request");
		return;
	}
	for (int32_t k = 0; k < req->n_continuations; k++)
	{
		t->cont_st = continuation_ids(e, req, k, &t->cont[k], &t->n_cont[k], t->err, sizeof(t->err));
		if (t->cont_st != LLM_OK)
			return;
		t->n_cont_ok++;
	}
}

live_request *
engine_request_new(uint64_t id, void *user_data, const llm_request *req, int32_t n_prompt, int32_t n_seqs)
{
	live_request *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->id = id;
	r->user_data = user_data;
	r->mode = req->mode;
	r->params = req->params;
	r->params.stop = NULL;
	r->params.n_stop = 0;
	/* a constrained output is exactly a string of its grammar: nothing is cut from it */
	r->strip_thinking = req->strip_thinking && req->mode == LLM_MODE_GENERATE && req->grammar_len == 0 &&
		(req->prompt_kind == LLM_PROMPT_TEXT || req->prompt_kind == LLM_PROMPT_MESSAGES);
	r->think_opened = req->thinking > 0;
	r->n_prompt = n_prompt;
	r->seqs = calloc((size_t) n_seqs, sizeof(llm_seq));
	if (r->seqs == NULL)
	{
		free(r);
		return NULL;
	}
	r->n_seqs = n_seqs;
	return r;
}

/*
 * The grammar processor of req, if it has a grammar, last in r's chain (so
 * no processor changes a row after the mask): now when the store holds the
 * grammar compiled, else r waits for it (r->grammar_wait; its compile runs
 * on the store's compile thread and engine_grammar_admit adds the
 * processor then).
 */
static llm_status
add_grammar(llm_engine *e, live_request *r, const llm_request *req, char *err, size_t errlen)
{
	llm_logits_processor *lp;
	llm_grammar_ref *ref;
	llm_status	st;

	if (req->grammar == NULL)
		return LLM_OK;
	st = llm_grammar_store_request(e->grammars, req->grammar, req->grammar_len, &ref, err, errlen);
	if (st != LLM_OK)
		return st;
	if (!llm_grammar_ref_ready(ref))
	{
		r->grammar_wait = ref;
		return LLM_OK;
	}
	st = llm_lp_grammar_take(e->grammars, ref, &lp, err, errlen);
	if (st != LLM_OK)
		return st;
	if (llm_lp_chain_add(&r->chain, lp) != 0)
	{
		snprintf(err, errlen, "out of memory queueing request");
		return LLM_ERR_OUT_OF_MEMORY;
	}
	return LLM_OK;
}

/* Put r, whose grammar is being compiled, at the end of the grammar_waiting list. */
static void
grammar_wait_push(llm_engine *e, live_request *r)
{
	live_request **p = &e->grammar_waiting;

	while (*p != NULL)
		p = &(*p)->next_grammar_wait;
	*p = r;
	r->next_grammar_wait = NULL;
	e->n_grammar_waiting++;
	r->seqs[0].state = LLM_SEQ_DETACHED;
}

/* The requests whose grammar is ready: into the scheduler with the processor, or failed. */
static void
admit_ready(llm_engine *e, llm_event_cb cb, void *arg)
{
	live_request **p = &e->grammar_waiting;
	live_request *r;

	while ((r = *p) != NULL)
	{
		llm_logits_processor *lp;
		llm_status	st;
		char		err[2048];

		if (!llm_grammar_ref_ready(r->grammar_wait))
		{
			p = &r->next_grammar_wait;
			continue;
		}
		*p = r->next_grammar_wait;
		r->next_grammar_wait = NULL;
		e->n_grammar_waiting--;
		st = llm_lp_grammar_take(e->grammars, r->grammar_wait, &lp, err, sizeof(err));
		r->grammar_wait = NULL;
		if (st == LLM_OK && llm_lp_chain_add(&r->chain, lp) != 0)
		{
			snprintf(err, sizeof(err), "out of memory queueing request");
			st = LLM_ERR_OUT_OF_MEMORY;
		}
		if (st == LLM_OK && llm_sched_add(e->sched, &r->seqs[0]) != 0)
		{
			snprintf(err, sizeof(err), "out of memory queueing request");
			st = LLM_ERR_OUT_OF_MEMORY;
		}
		if (st != LLM_OK)
		{
			/* the error a submission with the grammar compiled inline would have returned */
			engine_output_error(r, st, err, cb, arg);
			engine_drop_request(e, r);
		}
	}
}

void
engine_grammar_admit(llm_engine *e, llm_event_cb cb, void *arg)
{
	if (e->grammar_waiting == NULL)
		return;
	if (llm_grammar_store_poll(e->grammars) > 0)
		admit_ready(e, cb, arg);
	if (e->grammar_waiting != NULL &&
		llm_sched_n_waiting(e->sched) + llm_sched_n_running(e->sched) == 0 &&
		llm_grammar_store_wait(e->grammars, ENGINE_GRAMMAR_IDLE_MS) &&
		llm_grammar_store_poll(e->grammars) > 0)
		admit_ready(e, cb, arg);
}

/* The GENERATE request over prompt ids (owned by the caller); its status (err set). */
static llm_status
new_generate(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
			 const int32_t *ids, int32_t n, live_request **out, char *err, size_t errlen)
{
	const llm_sampling_params *p = &req->params;
	live_request *r = engine_request_new(id, user_data, req, n, 1);
	llm_seq    *seq;
	llm_status	st;

	*out = r;
	snprintf(err, errlen, "out of memory queueing request");
	if (r == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	if (p->n_stop > 0)
	{
		r->stop = calloc(p->n_stop, sizeof(char *));
		if (r->stop == NULL)
			return LLM_ERR_OUT_OF_MEMORY;
		r->params.n_stop = p->n_stop;
		for (int i = 0; i < p->n_stop; i++)
			if ((r->stop[i] = strdup(p->stop[i])) == NULL)
				return LLM_ERR_OUT_OF_MEMORY;
		r->params.stop = (const char *const *) r->stop;
	}
	if (llm_lp_chain_build(&r->chain, p) != 0)
		return LLM_ERR_OUT_OF_MEMORY;
	if ((st = add_grammar(e, r, req, err, errlen)) != LLM_OK)
		return st;
	seq = &r->seqs[0];
	seq->tokens = malloc((size_t) (n + 16) * sizeof(int32_t));
	if (seq->tokens == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	memcpy(seq->tokens, ids, (size_t) n * sizeof(int32_t));
	seq->n_tokens = n;
	seq->cap_tokens = n + 16;
	seq->n_prompt = n;
	seq->cache_salt = llm_prefix_salt(e->model_identity, p->cache_salt);
	seq->owner = r;
	seq->priority = (int32_t) req->priority;
	seq->session = req->session;
	if (e->spec != NULL)
	{
		if (llm_spec_start(e->spec, &r->spec_state) != 0)
			return LLM_ERR_OUT_OF_MEMORY;
		r->spec = e->spec;
	}
	r->max_len = (int64_t) n + p->max_tokens;
	if (r->max_len > e->cfg.n_ctx)
		r->max_len = e->cfg.n_ctx;
	llm_rng_seed(&r->rng, p->has_seed ? p->seed :
				 ((uint64_t) id * 0x9e3779b97f4a7c15ULL) ^ (uint64_t) (engine_now_ms() * 1e3));
	if (engine_output_init(r) != 0)
		return LLM_ERR_OUT_OF_MEMORY;
	return LLM_OK;
}

/*
 * The EMBED request over prompt ids (owned by the caller), at most
 * llm_engine_embed_max_tokens of them (engine_submit_ids truncated or
 * refused a longer one): one sequence of the prompt, no processors, no
 * speculation.  Its rows are hidden rows (step.c): the last one for LAST
 * pooling, every one for MEAN and CLS (n_tail_logits: so none is served
 * from the prefix cache).  On a model whose graph attends within a step
 * only (an encoder) the sequence is whole: computed in one step, never in
 * the prefix cache.  Its status (err set).
 */
static llm_status
new_embed(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
		  const int32_t *ids, int32_t n, live_request **out, char *err, size_t errlen)
{
	live_request *r = engine_request_new(id, user_data, req, n, 1);
	llm_seq    *seq;

	*out = r;
	snprintf(err, errlen, "out of memory queueing request");
	if (r == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	r->pooling = req->pooling == LLM_POOLING_MODEL ? llm_engine_embed_pooling(e) : req->pooling;
	r->l2 = req->normalize == LLM_EMBED_NORM_L2 ||
		(req->normalize == LLM_EMBED_NORM_MODEL && llm_engine_embed_normalizes(e));
	if (r->pooling != LLM_POOLING_LAST && (r->pool_sum = calloc((size_t) e->mc->dim, sizeof(double))) == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	seq = &r->seqs[0];
	seq->tokens = malloc((size_t) n * sizeof(int32_t));
	if (seq->tokens == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	memcpy(seq->tokens, ids, (size_t) n * sizeof(int32_t));
	seq->n_tail_logits = r->pooling == LLM_POOLING_LAST ? 0 : n;
	seq->whole = e->mc->whole_sequences;
	seq->n_tokens = n;
	seq->cap_tokens = n;
	seq->n_prompt = n;
	seq->cache_salt = llm_prefix_salt(e->model_identity, req->params.cache_salt);
	seq->owner = r;
	seq->priority = (int32_t) req->priority;
	seq->session = req->session;
	r->max_len = n;
	return LLM_OK;
}

/* r->echo: the JSON array of req's continuations ("[\"a\",\"b\"]"); 0 or -1. */
static int
echo_continuations(live_request *r, const llm_request *req)
{
	size_t		n = 2,
				at = 1;

	for (int32_t k = 0; k < req->n_continuations; k++)
		n += llm_json_write_string(req->continuations[k], req->continuation_lens[k], NULL, 0) + 1;
	r->echo = malloc(n + 1);
	if (r->echo == NULL)
		return -1;
	r->echo[0] = '[';
	for (int32_t k = 0; k < req->n_continuations; k++)
	{
		if (k > 0)
			r->echo[at++] = ',';
		at += llm_json_write_string(req->continuations[k], req->continuation_lens[k], r->echo + at, n - at);
	}
	r->echo[at++] = ']';
	r->echo[at] = '\0';
	r->echo_len = at;
	return 0;
}

/* A SCORE request's sequence of tokens[0..n): its class, session, salt and owner from r. */
static int
score_seq_init(llm_seq *seq, live_request *r, const llm_request *req, uint64_t salt, bool share_prefix,
			   int32_t n)
{
	seq->n_tokens = n;
	seq->cap_tokens = n;
	seq->tokens = malloc((size_t) n * sizeof(int32_t));
	seq->n_prompt = n;
	seq->share_prefix = share_prefix;
	seq->cache_salt = salt;
	seq->owner = r;
	seq->priority = (int32_t) req->priority;
	seq->session = req->session;
	return seq->tokens != NULL ? 0 : -1;
}

/*
 * The SCORE request over prompt ids: one sequence per continuation (see
 * score_part), and with two or more continuations the prompt's own
 * sequence (live_request.prompt_seq) they fork from, unless the sharing
 * is PER_CONTINUATION.  Every token of those sequences counts as prompt
 * (the backend computes them in the prompt order, as
 * llm_engine_debug_prompt_logits does, and a full block of them is
 * cacheable like any prompt block).  With prefix caching off the sequences
 * still share their prompt blocks, under a salt no other request uses.
 */
static llm_status
new_score(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
		  const tokenized *t, live_request **out, char *err, size_t errlen)
{
	const int32_t *ids = t->ids;
	int32_t		n = (int32_t) t->n;
	int32_t		nc = t->n_seq;
	bool		fork = nc > 1 && e->score_sharing != LLM_SCORE_SHARE_PER_CONTINUATION;
	int32_t		na = req->continuation_answers;
	int32_t		n_mid = fork && na > 0 ? nc / na : 0;
	live_request *r;
	uint64_t	salt;

	/* a pair's chat is its answers' own prompt sequence when it adds ids to the common prefix */
	for (int32_t k = 0; k < n_mid; k++)
		if (t->lead[k * na] < 1)
			n_mid = 0;
	r = engine_request_new(id, user_data, req, n, nc + (fork ? 1 : 0) + n_mid);

	*out = r;
	if (r == NULL || (r->score = calloc((size_t) nc, sizeof(score_part))) == NULL)
		goto oom;
	r->n_continuations = nc;
	if (e->cfg.prefix_caching)
		salt = llm_prefix_salt(e->model_identity, req->params.cache_salt);
	else
		salt = llm_prefix_salt(e->model_identity ^ 0x5c0e5c0e5c0e5c0eULL, ++e->n_private_salts);
	if (fork)
	{
		/* the prompt alone; its last row is the first scored row of every continuation */
		r->prompt_seq = &r->seqs[nc];
		if (score_seq_init(r->prompt_seq, r, req, salt, !e->cfg.prefix_caching, n) != 0)
			goto oom;
		memcpy(r->prompt_seq->tokens, ids, (size_t) n * sizeof(int32_t));
		r->prompt_seq->n_tail_logits = 1;
	}
	for (int32_t k = 0; k < nc; k++)
	{
		llm_seq    *seq = &r->seqs[k];
		const int32_t *cont = t->cont[k];
		int32_t		m = t->n_cont[k];
		int32_t		lead = t->lead != NULL ? t->lead[k] : 0;

		if (k >= t->n_cont_ok)
		{
			/* the continuation that could not be tokenized */
			snprintf(err, errlen, "%s", t->err);
			return t->cont_st;
		}
		if ((int64_t) n + m > e->cfg.n_ctx)
		{
			snprintf(err, errlen, "prompt of %d tokens plus continuation %d of %d tokens does not fit "
					 "the context length of %d tokens", n, k + 1, m, e->cfg.n_ctx);
			return LLM_ERR_PROMPT_TOO_LONG;
		}
		if (score_seq_init(seq, r, req, salt, !e->cfg.prefix_caching, n + m - 1) != 0)
			goto oom;
		memcpy(seq->tokens, ids, (size_t) n * sizeof(int32_t));
		memcpy(seq->tokens + n, cont, (size_t) (m - 1) * sizeof(int32_t));
		r->score[k].n_prompt = n;
		seq->fork_from = r->prompt_seq;
		if (n_mid > 0)
		{
			/* pair k / na: the rest of its chat is its prompt sequence's, the answer alone is scored */
			llm_seq    *mid = &r->seqs[nc + 1 + k / na];

			if (k % na == 0)
			{
				if (score_seq_init(mid, r, req, salt, !e->cfg.prefix_caching, n + lead) != 0)
					goto oom;
				memcpy(mid->tokens, seq->tokens, (size_t) (n + lead) * sizeof(int32_t));
				mid->n_tail_logits = 1;
				mid->fork_from = r->prompt_seq;
			}
			r->score[k].n_prompt = n + lead;
			seq->fork_from = mid;
			m -= lead;
			lead = 0;
		}
		seq->n_tail_logits = m;
		r->score[k].n_targets = m;
		r->score[k].n_lead = lead;
		r->score[k].last_token = cont[t->n_cont[k] - 1];
	}
	r->n_unscored = nc;
	if (req->continuation_echo && echo_continuations(r, req) != 0)
		goto oom;
	return LLM_OK;
oom:
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
}



static llm_status submit_ids(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
							 const tokenized *t, char *err, size_t errlen);

/*
 * The rest of a submission once req's ids are known (t, owned by the
 * caller): what only a model can refuse (a generating request on an
 * embedding model), an EMBED prompt over the embedding limit truncated or
 * refused (llm_request.truncate), then submit_ids.  The same on the
 * driver's inline path and for a request coming back from the tokenizer
 * thread.
 */
llm_status
engine_submit_ids(llm_engine *e, uint64_t id, const llm_request *req, void *user_data, const tokenized *t,
				  char *err, size_t errlen)
{
	tokenized	cut_t;
	int32_t    *cut = NULL;
	const int32_t *ids = t->ids;
	int64_t		n = t->n;
	llm_status	st;

	if (n > 0 && req->mode != LLM_MODE_EMBED && e->mc->no_output)
	{
		snprintf(err, errlen, "the model is an embedding model (%s, no output projection): it only embeds",
				 e->mc->arch);
		return LLM_ERR_INVALID_PARAM;
	}
	if (n > 0 && req->mode == LLM_MODE_EMBED && n > llm_engine_embed_max_tokens(e))
	{
		int32_t		most = llm_engine_embed_max_tokens(e);

		if (!req->truncate)
		{
			snprintf(err, errlen, "input of %lld tokens is too long to embed: at most %d tokens "
					 "(truncate to embed its first %d)", (long long) n, most, most);
			return LLM_ERR_PROMPT_TOO_LONG;
		}
		if ((cut = malloc((size_t) most * sizeof(int32_t))) == NULL)
		{
			snprintf(err, errlen, "out of memory queueing request");
			return LLM_ERR_OUT_OF_MEMORY;
		}
		memcpy(cut, ids, (size_t) most * sizeof(int32_t));
		/*
		 * keep the end token the tokenizer appended to a text (BERT's
		 * [SEP]): text never gives a control token, so a text prompt's last
		 * control token is one the tokenizer or the template added
		 */
		if (req->prompt_kind != LLM_PROMPT_TOKENS && llm_tokenizer_is_control(e->tok, ids[n - 1]))
			cut[most - 1] = ids[n - 1];
		memcpy(&cut_t, t, sizeof(cut_t));
		cut_t.ids = cut;
		cut_t.n = most;
		t = &cut_t;
	}
	st = submit_ids(e, id, req, user_data, t, err, errlen);
	free(cut);
	return st;
}

/* The checks on the ids, the request built and queued (or waiting for its grammar). */
static llm_status
submit_ids(llm_engine *e, uint64_t id, const llm_request *req, void *user_data, const tokenized *t,
		   char *err, size_t errlen)
{
	llm_status	st;
	const int32_t *ids = t->ids;
	int64_t		n = t->n;
	live_request *r = NULL;

	if (n < 0)
	{
		snprintf(err, errlen, "%s", t->err);
		return LLM_ERR_INVALID_PARAM;
	}
	if (n == 0)
	{
		snprintf(err, errlen, "prompt must not be empty");
		return LLM_ERR_EMPTY_PROMPT;
	}
	/* a generating prompt leaves room for one generated token; an embedded one needs none */
	if (n > INT32_MAX || n > e->cfg.n_ctx - (req->mode == LLM_MODE_EMBED ? 0 : 1))
	{
		int32_t		most = e->cfg.n_ctx - (req->mode == LLM_MODE_EMBED ? 0 : 1);

		snprintf(err, errlen, "prompt of %lld tokens does not fit the context length of %d tokens "
				 "(at most %d prompt tokens)", (long long) n, e->cfg.n_ctx, most);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	for (int64_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= e->mc->n_vocab)
		{
			snprintf(err, errlen, "token id %d out of range [0, %d)", ids[i], e->mc->n_vocab);
			return LLM_ERR_INVALID_PARAM;
		}
	if (engine_table_get(e, id) != NULL)
	{
		snprintf(err, errlen, "request id %llu is already live", (unsigned long long) id);
		return LLM_ERR_DUPLICATE_ID;
	}
	if (req->mode == LLM_MODE_SCORE)
		st = new_score(e, id, req, user_data, t, &r, err, errlen);
	else if (req->mode == LLM_MODE_EMBED)
		st = new_embed(e, id, req, user_data, ids, (int32_t) n, &r, err, errlen);
	else
		st = new_generate(e, id, req, user_data, ids, (int32_t) n, &r, err, errlen);
	if (st != LLM_OK)
	{
		if (r != NULL)
			engine_grammar_wait_cancel(e, r);
		engine_request_free(r);
		return st;
	}
	r->t_add = engine_now_ms();
	if (engine_table_put(e, r) != 0)
		goto oom;
	/* waiting for its grammar: its sequence joins the scheduler in engine_grammar_admit */
	if (r->grammar_wait != NULL)
		grammar_wait_push(e, r);
	/* a SCORE request's prompt sequence first: its continuations wait for it */
	for (int32_t k = -1; r->grammar_wait == NULL && k < r->n_seqs; k++)
	{
		llm_seq    *seq = k < 0 ? r->prompt_seq : &r->seqs[k];

		if (seq == NULL || (k >= 0 && seq == r->prompt_seq))
			continue;
		if (llm_sched_add(e->sched, seq) != 0)
		{
			/* removing a sequence never added only marks it detached */
			for (int32_t j = 0; j < r->n_seqs; j++)
				llm_sched_remove(e->sched, &r->seqs[j]);
			engine_table_del(e, id);
			goto oom;
		}
	}
	if (req->params.debug_poison_logits > 0)
		e->poison_logits = req->params.debug_poison_logits;
	if (r->mode == LLM_MODE_SCORE)
		e->n_live_score++;
	e->stats.prompt_tokens += n;
	return LLM_OK;

oom:
	engine_grammar_wait_cancel(e, r);
	engine_request_free(r);
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
}
