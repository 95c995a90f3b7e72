/*
 * step.c — one step of the engine: the scheduler's plan becomes a
 * step description (llm_step_desc: token ids, positions, KV slots, block
 * tables and the rows whose logits are wanted, any number per sequence),
 * the model runs it, and each logits row goes to its request: a GENERATE
 * row through the request's logits processors to the sampler, the token
 * then to the sequence, the processors' state and the output
 * (output.c); SCORE rows to log-probabilities (logprob.h); the
 * last row of an EMBED request is a hidden row (llm_forward_out), its
 * final-norm state sent as the request's VECTOR.  Also the
 * test hooks that run one hand-made prefill through the same path.
 *
 * Where the backend can (llm_model_scan_logits), every logits row of the
 * step is scanned at once on its threads right after the forward: the
 * raw row's non-finite check, and the argmax that a greedy row without
 * logits processors samples (llm_sample's own answer for it), so the
 * driver thread no longer reads 16 x 262,144 floats twice while the
 * compute threads wait.  Rows that processors change, and rows of other
 * samplers, go through the sampler as before.
 *
 * Speculative decoding: before planning, while at most spec_max_batch
 * sequences run, each decoding GENERATE request may get draft tokens from
 * the engine's proposer (spec.h; prompt lookup, spec_lookup.h) that the
 * plan computes as extra rows of its sequence; the proposer hears how many
 * were accepted.
 * Its rows are then taken in order exactly as plain decoding takes one
 * row per step: the logits processors see the tokens accepted so far, the
 * sampler draws from the request's own RNG, the token is appended and
 * accepted by the processors; the next row is used only if the token just
 * drawn equals the draft token it was computed from.  A draft row is
 * computed as that token would be in plain decoding (a generated token:
 * decode_rows set; batch invariance does the rest), so greedy and seeded
 * output are bit-identical with or without speculation.  The scheduler
 * keeps the KV slots of accepted drafts and releases the rest.
 */
#include "engine_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample/logprob.h"

static int
grow_i32(int32_t **arr, int32_t *cap, int64_t need)
{
	int64_t		c = *cap ? *cap : 64;
	void	   *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	if (c > INT32_MAX)
		return -1;
	p = realloc(*arr, (size_t) c * sizeof(int32_t));
	if (p == NULL)
		return -1;
	*arr = p;
	*cap = (int32_t) c;
	return 0;
}

/* Size the step arrays and the logits buffer for plan p; -1 on out of memory. */
static int
reserve_step(llm_engine *e, const llm_sched_plan *p)
{
	if (p->n_tokens > e->cap_d_tokens)
	{
		int32_t		c;

		c = e->cap_d_tokens;
		if (grow_i32(&e->d_tokens, &c, p->n_tokens))
			return -1;
		c = e->cap_d_tokens;
		if (grow_i32(&e->d_pos, &c, p->n_tokens))
			return -1;
		c = e->cap_d_tokens;
		if (grow_i32(&e->d_slots, &c, p->n_tokens))
			return -1;
		if (e->local_pool != NULL)
		{
			c = e->cap_d_tokens;
			if (grow_i32(&e->d_slots_local, &c, p->n_tokens))
				return -1;
		}
		{
			uint8_t    *f = realloc(e->d_decode, (size_t) c);

			if (f == NULL)
				return -1;
			e->d_decode = f;
			f = realloc(e->d_forms, (size_t) c);
			if (f == NULL)
				return -1;
			e->d_forms = f;
		}
		e->cap_d_tokens = c;
	}
	if (p->n_entries + 1 > e->cap_d_seqs)
	{
		int32_t		c;

		c = e->cap_d_seqs;
		if (grow_i32(&e->d_seq_start, &c, p->n_entries + 1))
			return -1;
		c = e->cap_d_seqs;
		if (grow_i32(&e->d_seq_kv_len, &c, p->n_entries + 1))
			return -1;
		e->cap_d_seqs = c;
	}
	if (p->n_logits > e->cap_d_out || e->d_out_kind == NULL)
	{
		int32_t		c = e->cap_d_out;
		uint8_t    *k;

		if (grow_i32(&e->d_out_rows, &c, p->n_logits > 0 ? p->n_logits : 1))
			return -1;
		k = realloc(e->d_out_kind, (size_t) c);
		if (k == NULL)
			return -1;
		e->d_out_kind = k;
		e->cap_d_out = c;
	}
	if (e->local_pool != NULL)
	{
		int32_t		c = e->cap_d_tables;

		if (grow_i32(&e->d_block_tables_local, &c, (int64_t) p->n_entries * (p->max_blocks > 0 ? p->max_blocks : 1)))
			return -1;
	}
	if (grow_i32(&e->d_block_tables, &e->cap_d_tables,
				 (int64_t) p->n_entries * (p->max_blocks > 0 ? p->max_blocks : 1)))
		return -1;
	if (p->n_logits > e->cap_out)
	{
		float	   *l = realloc(e->logits, (size_t) p->n_logits * e->mc->n_vocab * sizeof(float));

		if (l == NULL)
			return -1;
		e->logits = l;
		e->cap_out = p->n_logits;
	}
	if (p->n_logits > e->cap_scan)
	{
		int32_t    *am = realloc(e->scan_argmax, (size_t) p->n_logits * sizeof(int32_t));
		uint8_t    *fin;

		if (am == NULL)
			return -1;
		e->scan_argmax = am;
		fin = realloc(e->scan_finite, (size_t) p->n_logits);
		if (fin == NULL)
			return -1;
		e->scan_finite = fin;
		e->cap_scan = p->n_logits;
	}
	return 0;
}

/* An EMBED request's rows are hidden rows (its vector); every other row is a logits row. */
static bool
entry_hidden(const llm_sched_entry *en)
{
	const live_request *r = en->seq->owner;

	return r != NULL && r->mode == LLM_MODE_EMBED;
}

/*
 * The LLM_ROW_* flags (backend.h) of the token at position pos of a
 * sequence whose prompt has n_prompt tokens: how llama.cpp computes it
 * when the prompt is one batch and every generated token a batch of one.
 */
static uint8_t
row_forms(int32_t pos, int32_t n_prompt, int32_t logits_from)
{
	if (pos >= n_prompt)
		return 0;
	return (uint8_t) ((pos < n_prompt - n_prompt % 4 ? LLM_ROW_GROUPED : 0) |
					  (n_prompt >= 8 ? LLM_ROW_WIDE : 0) |
					  (pos == n_prompt - 1 && logits_from >= pos ? LLM_ROW_TAIL_ALONE : 0));
}

/*
 * The step description of plan p.  Output rows: for each entry in order,
 * the rows of its tokens logits_from .. start + n - 1, p->n_logits rows in
 * all, each of kind d_out_kind (entry_hidden); the forward puts the logits
 * rows in plan order in the logits buffer, the hidden rows in plan order in
 * the hidden buffer (llm_forward_out).  *n_hidden: the hidden rows.
 */
static int
build_step(llm_engine *e, const llm_sched_plan *p, llm_step_desc *d, int32_t *n_hidden)
{
	int32_t		bs = e->cfg.block_size;
	int32_t		t = 0,
				n_out = 0,
				n_h = 0;

	if (reserve_step(e, p) != 0)
		return -1;
	for (int32_t i = 0; i < p->n_entries; i++)
	{
		const llm_sched_entry *en = &p->entries[i];
		const llm_seq *s = en->seq;
		int32_t		t0 = t;

		e->d_seq_start[i] = t;
		e->d_seq_kv_len[i] = en->start + en->n;
		for (int32_t k = 0; k < en->n; k++, t++)
		{
			int32_t		pos = en->start + k;

			e->d_tokens[t] = pos < s->n_tokens ? s->tokens[pos] : s->draft[pos - s->n_tokens];
			e->d_pos[t] = pos;
			e->d_slots[t] = s->blocks[pos / bs] * bs + pos % bs;
			e->d_decode[t] = pos >= s->n_prompt;
			e->d_forms[t] = row_forms(pos, s->n_prompt, en->logits_from);
		}
		memcpy(&e->d_block_tables[(size_t) i * p->max_blocks], s->blocks, (size_t) s->n_blocks * sizeof(int32_t));
		for (int32_t k = s->n_blocks; k < p->max_blocks; k++)
			e->d_block_tables[(size_t) i * p->max_blocks + k] = 0;
		if (e->local_pool != NULL)
		{
			/* the local group: its own slots; blocks freed behind the window read as 0, never used */
			int32_t    *lbt = &e->d_block_tables_local[(size_t) i * p->max_blocks];

			for (int32_t k = 0; k < p->max_blocks; k++)
				lbt[k] = k < s->n_blocks && s->lblocks[k] >= 0 ? s->lblocks[k] : 0;
			for (int32_t k = 0; k < en->n; k++)
			{
				int32_t		pos = en->start + k;

				e->d_slots_local[t0 + k] = lbt[pos / bs] * bs + pos % bs;
			}
		}
		for (int32_t pos = en->logits_from; pos < en->start + en->n; pos++)
		{
			bool		hidden = entry_hidden(en);

			e->d_out_kind[n_out] = hidden ? LLM_OUT_HIDDEN : LLM_OUT_LOGITS;
			e->d_out_rows[n_out++] = t0 + (pos - en->start);
			n_h += hidden;
		}
	}
	if (n_h > e->cap_hidden)
	{
		float	   *h = realloc(e->hidden, (size_t) n_h * e->mc->dim * sizeof(float));

		if (h == NULL)
			return -1;
		e->hidden = h;
		e->cap_hidden = n_h;
	}
	*n_hidden = n_h;
	e->d_seq_start[p->n_entries] = t;
	d->n_tokens = t;
	d->n_seqs = p->n_entries;
	d->token_ids = e->d_tokens;
	d->positions = e->d_pos;
	d->slots = e->d_slots;
	d->seq_start = e->d_seq_start;
	d->seq_kv_len = e->d_seq_kv_len;
	d->block_tables = e->d_block_tables;
	d->max_blocks_per_seq = p->max_blocks;
	d->out_rows = e->d_out_rows;
	d->n_out = n_out;
	d->decode_rows = e->d_decode;
	d->row_forms = e->d_forms;
	d->slots_local = e->local_pool != NULL ? e->d_slots_local : NULL;
	d->block_tables_local = e->local_pool != NULL ? e->d_block_tables_local : NULL;
	return n_out == p->n_logits ? 0 : -1;
}

static void
fail_request(llm_engine *e, live_request *r, llm_status st, const char *msg, llm_event_cb cb, void *arg)
{
	engine_output_error(r, st, msg, cb, arg);
	engine_drop_request(e, r);
}

static void
fail_all(llm_engine *e, llm_status st, const char *msg, llm_event_cb cb, void *arg)
{
	uint32_t	pos = 0;
	live_request *r;

	while ((r = engine_next_live(e, &pos)) != NULL)
		fail_request(e, r, st, msg, cb, arg);
}

/* Index in this step's logits buffer of the row at lg. */
static int32_t
logits_row(const llm_engine *e, const float *lg)
{
	return (int32_t) ((lg - e->logits) / e->mc->n_vocab);
}

/*
 * The test hook's poisoning, then the check every row passes first (the
 * backend's scan of the raw row when it made one); false: r failed.
 */
static bool
row_usable(llm_engine *e, live_request *r, float *lg, llm_event_cb cb, void *arg)
{
	bool		poisoned = false;

	if (e->poison_logits > 0)
	{
		e->poison_logits--;
		lg[0] = NAN;
		poisoned = true;
	}
	if (!(e->have_scan && !poisoned ? e->scan_finite[logits_row(e, lg)] != 0 :
		  llm_logits_all_finite(lg, e->mc->n_vocab)))
	{
		fail_request(e, r, LLM_ERR_NONFINITE, "non-finite logits produced by the model", cb, arg);
		return false;
	}
	return true;
}

static void
fail_processor(llm_engine *e, live_request *r, const llm_logits_processor *lp, llm_event_cb cb, void *arg)
{
	char		msg[128];

	snprintf(msg, sizeof(msg), "logits processor %s failed", lp->ops->name);
	fail_request(e, r, LLM_ERR_INVALID_PARAM, msg, cb, arg);
}

/*
 * GENERATE: one row -> processors (over the tokens accepted so far) ->
 * sampler -> the token appended, accepted by the processors, output.
 * False when r was dropped (failed or finished); *tok gets the token.
 */
static bool
sample_row(llm_engine *e, live_request *r, float *lg, llm_event_cb cb, void *arg, int32_t *tok_out)
{
	llm_seq    *seq = &r->seqs[0];
	const llm_sampling_params *p = &r->params;
	const llm_logits_processor *failed = NULL;
	int32_t		tok;

	if (!row_usable(e, r, lg, cb, arg))
		return false;
	if (llm_lp_chain_apply(&r->chain, lg, e->mc->n_vocab, seq->tokens, seq->n_tokens, e->lp_work,
						   &failed) != 0)
	{
		fail_processor(e, r, failed, cb, arg);
		return false;
	}
	/* greedy over an unprocessed row: the backend's scan has its argmax (what llm_sample returns) */
	if (p->temperature <= 0.0 && r->chain.n == 0 && e->have_scan)
		tok = e->scan_argmax[logits_row(e, lg)];
	else
		tok = llm_sample(&e->sampler, lg, p->temperature, p->top_k, p->top_p, p->min_p, &r->rng);
	*tok_out = tok;
	if (llm_seq_append(seq, tok) != 0)
	{
		fail_request(e, r, LLM_ERR_OUT_OF_MEMORY, "out of memory", cb, arg);
		return false;
	}
	if (llm_lp_chain_accept(&r->chain, tok, &failed) != 0)
	{
		fail_processor(e, r, failed, cb, arg);
		return false;
	}
	r->output_complete = llm_lp_chain_complete(&r->chain);
	if (engine_output_token(e, r, tok, cb, arg))
	{
		engine_drop_request(e, r);
		return false;
	}
	return true;
}

/*
 * GENERATE: the rows of an entry: its last token's, then one per draft
 * token.  Row j is used only when every draft before it was accepted: it
 * was computed from draft j - 1, which then equals the token drawn from row
 * j - 1, so its input is what plain decoding would have fed.
 */
static void
generate_rows(llm_engine *e, live_request *r, const llm_sched_entry *en, float *lg, llm_event_cb cb,
			  void *arg)
{
	llm_seq    *seq = en->seq;
	int32_t		d = en->n_draft;
	int32_t		accepted = 0;
	bool		live = true;

	for (int32_t j = 0; j <= d; j++, lg += e->mc->n_vocab)
	{
		int32_t		tok;

		live = sample_row(e, r, lg, cb, arg, &tok);
		if (!live || j == d || tok != r->draft[j])
			break;
		accepted++;
	}
	if (d == 0)
		return;
	r->n_draft_tokens += d;
	r->n_accepted_tokens += accepted;
	e->stats.draft_tokens += d;
	e->stats.accepted_tokens += accepted;
	if (!live)
		return;					/* dropped: its proposer state is forgotten with it */
	llm_spec_accepted(r->spec, r->spec_state, d, accepted);
	llm_sched_accept_drafts(e->sched, seq, accepted);
}

/*
 * Draft tokens for the step, while at most spec_max_batch sequences run:
 * for each GENERATE request whose sequence is decoding, a proposal that
 * leaves room for the token after it within max_len.
 */
static void
propose_drafts(llm_engine *e)
{
	uint32_t	pos = 0;
	live_request *r;

	e->n_drafted = 0;
	if (e->spec == NULL || llm_sched_n_running(e->sched) > e->cfg.spec_max_batch)
		return;
	while ((r = engine_next_live(e, &pos)) != NULL && e->n_drafted < e->cfg.spec_max_batch)
	{
		llm_seq    *seq = &r->seqs[0];
		int64_t		room;

		if (r->mode != LLM_MODE_GENERATE || seq->state != LLM_SEQ_RUNNING ||
			seq->n_tokens - seq->n_computed != 1)
			continue;
		room = r->max_len - seq->n_tokens - 1;
		seq->n_draft = llm_spec_propose_draft(r->spec, r->spec_state, seq->tokens, seq->n_tokens,
											  room < LLM_SPEC_MAX_TOKENS ? (int32_t) room : LLM_SPEC_MAX_TOKENS,
											  r->draft);
		if (seq->n_draft > 0)
		{
			seq->draft = r->draft;
			e->drafted[e->n_drafted++] = r;
		}
	}
}

/* The step is over: no sequence carries drafts into the next plan. */
static void
clear_drafts(llm_engine *e)
{
	for (int32_t i = 0; i < e->n_drafted; i++)
	{
		e->drafted[i]->seqs[0].n_draft = 0;
		e->drafted[i]->seqs[0].draft = NULL;
	}
	e->n_drafted = 0;
}

/*
 * SCORE with a shared prompt: the prompt's sequence computed its last row,
 * which predicts the first target of every continuation (the same row each
 * continuation's own sequence would compute: batch invariance).  Each
 * continuation scores it; one with no other target is done; each other
 * waiting one forks from the prompt's sequence (llm_sched_fork: full blocks
 * shared, the partly filled last block copied here with copy_blocks, local
 * group included) and will compute only its own tokens; where no block is
 * free for the copy it recomputes that block instead.  Then the prompt's
 * sequence leaves (its full blocks stay cached for the others).
 */
static void
prompt_rows(llm_engine *e, live_request *r, llm_seq *from, float *lg, llm_event_cb cb, void *arg)
{
	const llm_backend_ops *ops = e->backend->ops;
	bool		copy = e->score_sharing == LLM_SCORE_SHARE_COPY && ops->copy_blocks != NULL;
	int32_t		src[LLM_MAX_CONTINUATIONS],
				dst[LLM_MAX_CONTINUATIONS],
				lsrc[LLM_MAX_CONTINUATIONS],
				ldst[LLM_MAX_CONTINUATIONS];
	int			n_copy = 0,
				n_lcopy = 0;
	int32_t		q = from->n_prompt - 1;

	if (!row_usable(e, r, lg, cb, arg))
		return;
	for (int32_t k = 0; k < r->n_seqs; k++)
	{
		llm_seq    *seq = &r->seqs[k];
		score_part *sp = k < r->n_continuations ? &r->score[k] : NULL;
		llm_sched_block_copy c;

		if (seq == from || seq->fork_from != from)
			continue;
		if (k >= r->n_continuations)
		{
			/* a pair's chat: nothing of it is scored, it forks and computes its own ids */
			seq->fork_from = NULL;
		}
		else if (sp->n_scored == 0)
		{
			if (sp->n_lead == 0)
				sp->logprob += llm_logprob(lg, e->mc->n_vocab,
										   q + 1 < seq->n_tokens ? seq->tokens[q + 1] : sp->last_token);
			sp->n_scored = 1;
		}
		if (k < r->n_continuations)
		{
			seq->n_tail_logits = sp->n_targets - sp->n_scored;
			seq->fork_from = NULL;
			if (sp->n_scored == sp->n_targets)
			{
				llm_sched_remove(e->sched, seq);
				r->n_unscored--;
				continue;
			}
		}
		if (copy && llm_sched_fork(e->sched, seq, from, &c))
		{
			if (c.dst >= 0)
			{
				src[n_copy] = c.src;
				dst[n_copy++] = c.dst;
			}
			if (c.dst_local >= 0)
			{
				lsrc[n_lcopy] = c.src_local;
				ldst[n_lcopy++] = c.dst_local;
			}
		}
	}
	if ((n_copy > 0 && ops->copy_blocks(e->backend, LLM_KV_GROUP_GLOBAL, src, dst, n_copy) != 0) ||
		(n_lcopy > 0 && ops->copy_blocks(e->backend, LLM_KV_GROUP_LOCAL, lsrc, ldst, n_lcopy) != 0))
	{
		char		msg[600];

		snprintf(msg, sizeof(msg), "copying the prompt's KV block: %s", ops->last_error(e->backend));
		fail_request(e, r, LLM_ERR_BACKEND, msg, cb, arg);
		return;
	}
	e->stats.copied_blocks += n_copy + n_lcopy;
	llm_sched_remove(e->sched, from);
	if (r->n_unscored == 0)
	{
		engine_output_scores(r, cb, arg);
		engine_drop_request(e, r);
	}
}

/*
 * SCORE: rows of sequence k at tokens en->logits_from .. start + n - 1.  The
 * row at position q predicts target q + 1 - n_prompt of the continuation.
 * Rows of targets already scored (recomputed after a preemption) are
 * skipped; they are bit-identical anyway.  A fully scored sequence leaves
 * the scheduler at once (its blocks released, full ones staying cached for
 * its siblings); the last one finishes the request.
 */
static void
score_rows(llm_engine *e, live_request *r, const llm_sched_entry *en, float *lg, llm_event_cb cb,
		   void *arg)
{
	llm_seq    *seq = en->seq;
	score_part *sp;
	int32_t		V = e->mc->n_vocab;

	if (seq - r->seqs >= r->n_continuations)
	{
		prompt_rows(e, r, seq, lg, cb, arg);
		return;
	}
	sp = &r->score[seq - r->seqs];
	for (int32_t q = en->logits_from; q < en->start + en->n; q++, lg += V)
	{
		int32_t		j = q + 1 - sp->n_prompt;
		int32_t		target;

		if (!row_usable(e, r, lg, cb, arg))
			return;
		if (j < sp->n_scored)
			continue;
		if (j != sp->n_scored || j >= sp->n_targets)
		{
			fail_request(e, r, LLM_ERR_BACKEND, "internal error: scoring rows out of order", cb, arg);
			return;
		}
		target = q + 1 < seq->n_tokens ? seq->tokens[q + 1] : sp->last_token;
		/* a pair's prompt rest (n_lead) is computed, not scored: the score is its answer's */
		if (j >= sp->n_lead)
			sp->logprob += llm_logprob(lg, V, target);
		sp->n_scored++;
	}
	seq->n_tail_logits = sp->n_targets - sp->n_scored;
	if (sp->n_scored < sp->n_targets)
		return;
	llm_sched_remove(e->sched, seq);
	if (--r->n_unscored == 0)
	{
		engine_output_scores(r, cb, arg);
		engine_drop_request(e, r);
	}
}

/*
 * EMBED: the entry's hidden rows are the prompt rows logits_from .. start
 * + n - 1, in position order (new_embed asked for the last row, LAST, or
 * every row, MEAN and CLS; a request's rows may come over several steps
 * when its prefill is chunked).  Each used row is checked finite; MEAN adds
 * every row to the request's double sum in position order, CLS keeps row
 * 0, so the vector does not depend on chunking or batching.  Once the
 * prompt's last row is in: the vector (the mean, CLS row or last row),
 * L2-normalised when r->l2, sent as the request's VECTOR, and the request
 * is done.
 */
static void
embed_rows(llm_engine *e, live_request *r, const llm_sched_entry *en, const float *h, llm_event_cb cb,
		   void *arg)
{
	int32_t		dim = e->mc->dim;
	int32_t		end = en->start + en->n;
	int32_t		n_rows = end - en->logits_from;
	const float *v = h + (size_t) (n_rows - 1) * dim;
	float	   *out;

	if (r->pooling != LLM_POOLING_LAST)
	{
		/* rows of positions already pooled (a recompute) are skipped */
		for (int32_t pos = en->logits_from; pos < end; pos++)
		{
			const float *row = h + (size_t) (pos - en->logits_from) * dim;

			if (pos != r->n_pooled)
				continue;
			for (int32_t i = 0; i < dim; i++)
				if (!isfinite(row[i]))
				{
					fail_request(e, r, LLM_ERR_NONFINITE, "non-finite hidden state produced by the model", cb, arg);
					return;
				}
			if (r->pooling == LLM_POOLING_MEAN || pos == 0)
				for (int32_t i = 0; i < dim; i++)
					r->pool_sum[i] += row[i];
			r->n_pooled++;
		}
		/* a preempted sequence recomputes only the rows still wanted */
		r->seqs[0].n_tail_logits = r->n_prompt - r->n_pooled;
	}
	if (end != r->n_prompt)
	{
		if (r->pooling == LLM_POOLING_LAST)
			fail_request(e, r, LLM_ERR_BACKEND, "internal error: embedding row before the prompt's end", cb, arg);
		return;
	}
	if (r->pooling != LLM_POOLING_LAST && r->n_pooled != r->n_prompt)
	{
		fail_request(e, r, LLM_ERR_BACKEND, "internal error: embedding rows out of order", cb, arg);
		return;
	}
	if (r->pooling == LLM_POOLING_LAST)
		for (int32_t i = 0; i < dim; i++)
			if (!isfinite(v[i]))
			{
				fail_request(e, r, LLM_ERR_NONFINITE, "non-finite hidden state produced by the model", cb, arg);
				return;
			}
	/* the vector in the engine's hidden buffer row of this entry: rewritten in place, read by the event */
	out = (float *) v;
	if (r->pooling == LLM_POOLING_MEAN)
		for (int32_t i = 0; i < dim; i++)
			out[i] = (float) (r->pool_sum[i] / r->n_prompt);
	else if (r->pooling == LLM_POOLING_CLS)
		for (int32_t i = 0; i < dim; i++)
			out[i] = (float) r->pool_sum[i];
	if (r->l2)
	{
		double		ss = 0;
		double		norm;

		for (int32_t i = 0; i < dim; i++)
			ss += (double) out[i] * out[i];
		norm = sqrt(ss);
		if (norm < 1e-12)
			norm = 1e-12;
		for (int32_t i = 0; i < dim; i++)
			out[i] = (float) (out[i] / norm);
	}
	engine_output_vector(r, out, dim, cb, arg);
	engine_drop_request(e, r);
}

/*
 * Steps of at most this many tokens measure the model's fixed cost.  On a
 * CPU a step's time is not linear in its tokens: a few rows are bound by
 * reading the weights once, many by arithmetic, so a straight line fitted
 * to a mix of decode and prefill steps crosses n = 0 well above what a step
 * of one token takes (58 ms against about 6 ms measured on two AVX2 cores), and
 * the shared-step cap built on it let batch work make an interactive
 * step several times slower than alone.
 */
#define ENGINE_COST_SMALL_STEP 8

/*
 * One step's forward of n tokens took ms: update the moving least-squares
 * fit ms = fixed + per_token * n (exponential weights, 1/32 per step) and
 * hand it to the scheduler once the steps have varied enough to fit it.
 * The fixed cost handed on is the lower of the fit's and the one the small
 * steps show (their mean time less per_token times their mean size), once
 * there were any.
 */
static void
note_step_time(llm_engine *e, int32_t n, double ms)
{
	const double w = 1.0 / 32;
	double		var;

	if (n <= ENGINE_COST_SMALL_STEP)
	{
		if (e->cost_small_steps++ == 0)
		{
			e->cost_small_n = n;
			e->cost_small_t = ms;
		}
		else
		{
			e->cost_small_n += (n - e->cost_small_n) / 8;
			e->cost_small_t += (ms - e->cost_small_t) / 8;
		}
	}
	if (e->cost_steps++ == 0)
	{
		e->cost_n = n;
		e->cost_t = ms;
		e->cost_nn = (double) n * n;
		e->cost_nt = (double) n * ms;
		return;
	}
	e->cost_n += w * (n - e->cost_n);
	e->cost_t += w * (ms - e->cost_t);
	e->cost_nn += w * ((double) n * n - e->cost_nn);
	e->cost_nt += w * ((double) n * ms - e->cost_nt);
	var = e->cost_nn - e->cost_n * e->cost_n;
	if (var > 1.0)
	{
		double		per_token = (e->cost_nt - e->cost_n * e->cost_t) / var;

		if (per_token > 0)
		{
			double		fixed = e->cost_t - per_token * e->cost_n;

			if (e->cost_small_steps > 0 && e->cost_small_t - per_token * e->cost_small_n < fixed)
				fixed = e->cost_small_t - per_token * e->cost_small_n;
			llm_sched_set_step_cost(e->sched, fixed, per_token);
		}
	}
}

/*
 * Short steps (scheduler.h): after a step of batch work only, steer the
 * batch class's tokens per step towards batch_step_ms, raised to ten times
 * a small step's time once one was measured (so the fixed cost stays at
 * most a tenth of a batch step, also on a loaded host where every step is
 * slow).
 */
static void
note_batch_step(llm_engine *e, int32_t n, double ms)
{
	double		target = e->cfg.batch_step_ms;

	if (target > 0 && e->cost_small_steps > 0 && 10 * e->cost_small_t > target)
		target = 10 * e->cost_small_t;
	llm_sched_note_batch_step(e->sched, n, ms, target);
}

static llm_status
run_step(llm_engine *e, llm_event_cb cb, void *cb_arg)
{
	llm_sched_plan *p;
	llm_step_desc d;
	llm_forward_out out;
	char		err[512];
	float	   *lg,
			   *hv;
	int32_t		n_hidden,
				n_logits;
	double		t0,
				dt;

	engine_tokenize_admit(e, cb, cb_arg);	/* requests whose prompt was tokenized off the driver */
	engine_grammar_admit(e, cb, cb_arg);	/* requests whose grammar finished compiling */
	propose_drafts(e);
	if (llm_sched_plan_step(e->sched, &p) != 0)
	{
		fail_all(e, LLM_ERR_OUT_OF_MEMORY, "out of memory while scheduling", cb, cb_arg);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	for (int32_t i = 0; i < p->n_unfittable; i++)
	{
		llm_seq    *seq = p->unfittable[i];
		live_request *r = seq->owner;

		if (r->dropped)
			continue;			/* another sequence of the same request failed first */
		snprintf(err, sizeof(err), "sequence of %d tokens does not fit the KV cache (%d blocks of %d tokens); "
				 "raise llm.kv_cache_size", seq->n_tokens + (r->mode == LLM_MODE_GENERATE ? 1 : 0),
				 llm_block_pool_n_blocks(e->pool), e->cfg.block_size);
		fail_request(e, r, LLM_ERR_OUT_OF_MEMORY, err, cb, cb_arg);
	}
	e->stats.n_preemptions = llm_sched_n_preemptions(e->sched);
	if (p->n_entries == 0)
		return LLM_OK;
	if (build_step(e, p, &d, &n_hidden) != 0)
	{
		fail_all(e, LLM_ERR_OUT_OF_MEMORY, "out of memory building a step", cb, cb_arg);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	n_logits = p->n_logits - n_hidden;
	/* a step without hidden rows names no kinds: every row is a logits row */
	out.kind = n_hidden > 0 ? e->d_out_kind : NULL;
	out.logits = e->logits;
	out.hidden = e->hidden;
	t0 = engine_now_ms();
	if (llm_model_forward_out(e->model, &d, &out, err, sizeof(err)) != 0)
	{
		fail_all(e, LLM_ERR_BACKEND, err, cb, cb_arg);
		return LLM_ERR_BACKEND;
	}
	llm_sched_commit(e->sched, p);
	/* the forward's time, shared among the requests by their token rows */
	dt = engine_now_ms() - t0;
	/* every row's non-finite check and argmax at once, on the backend's threads */
	e->have_scan = n_logits > 0 &&
		llm_model_scan_logits(e->model, e->logits, n_logits, e->scan_argmax, e->scan_finite) == 0;
	note_step_time(e, p->n_tokens, dt);
	if (p->n_first_tokens == 0)
		note_batch_step(e, p->n_tokens, dt);
	for (int32_t i = 0; i < p->n_entries; i++)
	{
		live_request *o = (live_request *) p->entries[i].seq->owner;
		int32_t		end = p->entries[i].start + p->entries[i].n;
		int32_t		from = p->entries[i].start > o->n_prompt ? p->entries[i].start : o->n_prompt;

		o->busy_ms += dt * p->entries[i].n / p->n_tokens;
		/* a scoring sequence's rows past the prompt's ids are its continuation's */
		if (o->mode == LLM_MODE_SCORE && end > from)
			o->n_continuation_rows += end - from;
	}

	e->stats.n_steps++;
	if (p->n_first_tokens > 0)
	{
		e->stats.interactive_steps++;
		e->stats.interactive_step_tokens += p->n_tokens;
		e->stats.interactive_step_ms += dt;
	}
	else
	{
		e->stats.batch_steps++;
		e->stats.batch_step_tokens += p->n_tokens;
		e->stats.batch_step_ms += dt;
		if (dt > e->stats.batch_step_max_ms)
			e->stats.batch_step_max_ms = dt;
	}
	e->stats.last_batch_seqs = p->n_entries;
	e->stats.last_batch_tokens = p->n_tokens;
	e->stats.computed_tokens += p->n_tokens;
	e->stats.logits_rows += n_logits;
	if (p->n_entries > e->stats.max_batch_seqs)
		e->stats.max_batch_seqs = p->n_entries;

	lg = e->logits;
	hv = e->hidden;
	for (int32_t i = 0; i < p->n_entries; i++)
	{
		const llm_sched_entry *en = &p->entries[i];
		live_request *r = en->seq->owner;
		int32_t		n_rows = en->start + en->n - en->logits_from;
		float	   *rows = lg;
		const float *hrows = hv;

		/* rows in plan order, each kind in its own buffer (build_step) */
		if (entry_hidden(en))
			hv += (size_t) n_rows * e->mc->dim;
		else
			lg += (size_t) n_rows * e->mc->n_vocab;
		if (n_rows == 0 || r->dropped)
			continue;
		if (r->mode == LLM_MODE_SCORE)
			score_rows(e, r, en, rows, cb, cb_arg);
		else if (r->mode == LLM_MODE_EMBED)
			embed_rows(e, r, en, (float *) hrows, cb, cb_arg);
		else
			generate_rows(e, r, en, rows, cb, cb_arg);
	}
	return LLM_OK;
}

llm_status
llm_engine_step(llm_engine *e, llm_event_cb cb, void *cb_arg)
{
	llm_status	st;

	e->in_step = true;
	st = run_step(e, cb, cb_arg);
	clear_drafts(e);
	e->in_step = false;
	engine_free_dropped(e);
	return st;
}

/* ---------- test hooks ---------- */

llm_status
llm_engine_debug_prompt_logits_rows(llm_engine *e, const int32_t *ids, int32_t n, int32_t from,
									float *out, char *err, size_t errlen)
{
	llm_seq		seq;
	llm_sched_plan plan;
	llm_sched_entry en;
	llm_step_desc d;
	int32_t		bs = e->cfg.block_size;
	int32_t		nb = (n + bs - 1) / bs;
	llm_status	st = LLM_OK;
	int32_t		n_hidden;

	if (e->n_live > 0)
	{
		snprintf(err, errlen, "engine busy");
		return LLM_ERR_INVALID_PARAM;
	}
	if (n <= 0 || n >= e->cfg.n_ctx)
	{
		snprintf(err, errlen, "prompt length %d out of range", n);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	if (from < 0 || from >= n)
	{
		snprintf(err, errlen, "first logits row %d out of range [0, %d)", from, n);
		return LLM_ERR_INVALID_PARAM;
	}
	memset(&seq, 0, sizeof(seq));
	seq.tokens = (int32_t *) ids;
	seq.n_tokens = n;
	seq.n_prompt = n;
	seq.n_tail_logits = n - from;
	seq.blocks = malloc((size_t) nb * sizeof(int32_t));
	seq.lblocks = malloc((size_t) nb * sizeof(int32_t));
	if (seq.blocks == NULL || seq.lblocks == NULL)
	{
		free(seq.blocks);
		free(seq.lblocks);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	/* one chunk: every local block is read by some row, none can be freed */
	for (; seq.n_blocks < nb; seq.n_blocks++)
	{
		if ((seq.blocks[seq.n_blocks] = llm_block_alloc(e->pool)) < 0)
		{
			snprintf(err, errlen, "KV cache too small");
			st = LLM_ERR_OUT_OF_MEMORY;
			goto done;
		}
		if (e->local_pool != NULL && (seq.lblocks[seq.n_blocks] = llm_block_alloc(e->local_pool)) < 0)
		{
			llm_block_release(e->pool, seq.blocks[seq.n_blocks]);
			snprintf(err, errlen, "KV cache too small");
			st = LLM_ERR_OUT_OF_MEMORY;
			goto done;
		}
	}
	memset(&plan, 0, sizeof(plan));
	memset(&en, 0, sizeof(en));
	en.seq = &seq;
	en.start = 0;
	en.n = n;
	en.sample = true;
	en.logits_from = from;
	plan.entries = &en;
	plan.n_entries = 1;
	plan.n_tokens = n;
	plan.n_logits = n - from;
	plan.max_blocks = nb;
	if (build_step(e, &plan, &d, &n_hidden) != 0)
	{
		snprintf(err, errlen, "out of memory");
		st = LLM_ERR_OUT_OF_MEMORY;
		goto done;
	}
	e->have_scan = false;
	if (llm_model_forward(e->model, &d, e->logits, err, errlen) != 0)
	{
		st = LLM_ERR_BACKEND;
		goto done;
	}
	memcpy(out, e->logits, (size_t) (n - from) * e->mc->n_vocab * sizeof(float));
done:
	for (int32_t i = seq.n_blocks - 1; i >= 0; i--)
	{
		if (e->local_pool != NULL)
			llm_block_release(e->local_pool, seq.lblocks[i]);
		llm_block_release(e->pool, seq.blocks[i]);
	}
	free(seq.blocks);
	free(seq.lblocks);
	return st;
}

llm_status
llm_engine_debug_prompt_logits(llm_engine *e, const int32_t *ids, int32_t n, float *out,
							   char *err, size_t errlen)
{
	return llm_engine_debug_prompt_logits_rows(e, ids, n, n - 1, out, err, errlen);
}
