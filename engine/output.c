/*
 * output.c — what a request says: incremental detokenization of its
 * accepted tokens, stop strings matched on the text across token boundaries
 * (a tail that may still grow into a stop string is held back), and the
 * events (TEXT deltas, FINISHED with usage or scores, VECTOR, ERROR).  It never
 * drops a request: its callers do, after a final event (engine_internal.h).
 */
#define _GNU_SOURCE
#include "engine_internal.h"
#include "engine/text/thinking.h"

#include <stdlib.h>
#include <string.h>

int
engine_output_init(live_request *r)
{
	llm_detok_init(&r->detok);
	r->text_cap = 256;
	r->text = malloc(r->text_cap);
	if (r->text == NULL)
		return -1;
	r->text[0] = '\0';
	r->text_len = 0;
	r->emitted = 0;
	return 0;
}

void
engine_output_free(live_request *r)
{
	free(r->text);
	r->text = NULL;
}

static void
fill_usage(const live_request *r, llm_usage *u, double t_now)
{
	/* the prompt's own sequence, else the first, computes (or finds) the prompt */
	const llm_seq *ps = r->prompt_seq != NULL ? r->prompt_seq : &r->seqs[0];

	memset(u, 0, sizeof(*u));
	u->prompt_tokens = r->n_prompt;
	u->cached_tokens = ps->n_cached_tokens < r->n_prompt ? ps->n_cached_tokens : r->n_prompt;
	u->completion_tokens = r->n_generated;
	u->ttft_ms = r->n_generated > 0 ? r->t_first - r->t_add : 0.0;
	u->total_ms = t_now - r->t_add;
	for (int32_t k = 0; k < r->n_seqs; k++)
		u->n_preemptions += r->seqs[k].n_preemptions;
	u->busy_ms = r->busy_ms;
	u->draft_tokens = r->n_draft_tokens;
	u->accepted_tokens = r->n_accepted_tokens;
	u->continuation_tokens = (int32_t) (r->n_continuation_rows < INT32_MAX ? r->n_continuation_rows : INT32_MAX);
}

static void
event_init(llm_event *ev, const live_request *r, llm_event_kind kind)
{
	memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	ev->request_id = r->id;
	ev->user_data = r->user_data;
	ev->token_id = -1;
}

void
engine_output_tokens(live_request *r, const int32_t *ids, int64_t n, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	event_init(&ev, r, LLM_EVENT_TOKENS);
	ev.ids = ids;
	ev.n_ids = n;
	fill_usage(r, &ev.usage, engine_now_ms());
	cb(&ev, arg);
}

void
engine_output_vector(live_request *r, const float *v, int32_t n, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	event_init(&ev, r, LLM_EVENT_VECTOR);
	ev.finish_reason = LLM_FINISH_STOP;
	ev.vector = v;
	ev.n_vector = n;
	fill_usage(r, &ev.usage, engine_now_ms());
	cb(&ev, arg);
}

void
engine_output_error(live_request *r, llm_status st, const char *msg, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	event_init(&ev, r, LLM_EVENT_ERROR);
	ev.status = st;
	ev.text = msg;
	ev.text_len = strlen(msg);
	fill_usage(r, &ev.usage, engine_now_ms());
	cb(&ev, arg);
}

static void
emit_finish(live_request *r, llm_finish_reason why, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	event_init(&ev, r, LLM_EVENT_FINISHED);
	ev.finish_reason = why;
	fill_usage(r, &ev.usage, engine_now_ms());
	cb(&ev, arg);
}

void
engine_output_scores(live_request *r, llm_event_cb cb, void *arg)
{
	double		scores[LLM_MAX_CONTINUATIONS];
	llm_event	ev;

	for (int32_t k = 0; k < r->n_continuations; k++)
		scores[k] = r->score[k].logprob;
	if (r->echo != NULL)
	{
		event_init(&ev, r, LLM_EVENT_TEXT);
		ev.text = r->echo;
		ev.text_len = r->echo_len;
		cb(&ev, arg);
	}
	event_init(&ev, r, LLM_EVENT_FINISHED);
	ev.finish_reason = LLM_FINISH_STOP;
	ev.scores = scores;
	ev.n_scores = r->n_continuations;
	fill_usage(r, &ev.usage, engine_now_ms());
	cb(&ev, arg);
}

static int
text_append(live_request *r, const char *s, size_t n)
{
	if (r->text_len + n + 1 > r->text_cap)
	{
		size_t		c = r->text_cap * 2;
		char	   *p;

		while (c < r->text_len + n + 1)
			c *= 2;
		p = realloc(r->text, c);
		if (p == NULL)
			return -1;
		r->text = p;
		r->text_cap = c;
	}
	memcpy(r->text + r->text_len, s, n);
	r->text_len += n;
	r->text[r->text_len] = '\0';
	return 0;
}

/*
 * Stop-string handling on the text: returns the offset of the earliest match
 * starting in the newly added region, or -1; *safe gets how many bytes can
 * be emitted now (all but a tail that may still grow into a stop string).
 */
static int64_t
find_stop(const live_request *r, size_t old_len, size_t *safe)
{
	int64_t		best = -1;
	size_t		hold = 0;

	*safe = r->text_len;
	if (r->params.n_stop == 0)
		return -1;
	for (int i = 0; i < r->params.n_stop; i++)
	{
		const char *st = r->stop[i];
		size_t		sl = strlen(st);
		size_t		from = old_len >= sl - 1 ? old_len - (sl - 1) : 0;
		const char *hit;

		if (sl <= r->text_len)
		{
			hit = memmem(r->text + from, r->text_len - from, st, sl);
			if (hit && (best < 0 || hit - r->text < best))
				best = hit - r->text;
		}
		/* longest suffix of text that is a proper prefix of st */
		for (size_t k = (sl - 1 < r->text_len ? sl - 1 : r->text_len); k > hold; k--)
			if (memcmp(r->text + r->text_len - k, st, k) == 0)
			{
				hold = k;
				break;
			}
	}
	*safe = r->text_len - hold;
	return best;
}

/*
 * strip_thinking: while the answer's start is unknown nothing goes out
 * (upto becomes emitted); once text[0..upto) settles it, or at the end
 * (final) where llm_thinking_answer_offset decides, emission jumps to it.
 */
static size_t
answer_upto(live_request *r, size_t upto, bool final)
{
	size_t		off;

	if (!llm_thinking_prefix_settled(r->text, upto, r->think_opened, &off))
	{
		if (!final)
			return r->emitted;
		off = llm_thinking_answer_offset(r->text, upto, r->think_opened);
	}
	r->answer_settled = true;
	r->emitted = off;
	return upto;
}

static void
emit_text(live_request *r, size_t upto, bool final, int32_t token, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	if (r->strip_thinking && !r->answer_settled)
		upto = answer_upto(r, upto, final);
	event_init(&ev, r, LLM_EVENT_TEXT);
	ev.token_id = token;
	if (upto > r->emitted)
	{
		ev.text = r->text + r->emitted;
		ev.text_len = upto - r->emitted;
		r->emitted = upto;
	}
	else
		ev.text = "";
	cb(&ev, arg);
}

bool
engine_output_token(llm_engine *e, live_request *r, int32_t tok, llm_event_cb cb, void *arg)
{
	char		buf[256];
	int			nb;
	size_t		old_len = r->text_len;
	size_t		safe;
	int64_t		stop_at;

	if (r->n_generated == 0)
		r->t_first = engine_now_ms();
	r->n_generated++;
	e->stats.completion_tokens++;
	if (!r->params.ignore_eos && llm_tokenizer_is_eog(e->tok, tok))
	{
		nb = llm_detok_flush(&r->detok, buf, sizeof(buf));
		if (nb > 0)
			text_append(r, buf, (size_t) nb);
		stop_at = find_stop(r, old_len, &safe);
		emit_text(r, stop_at >= 0 ? (size_t) stop_at : r->text_len, true, tok, cb, arg);
		emit_finish(r, LLM_FINISH_STOP, cb, arg);
		return true;
	}
	nb = llm_detok_push(e->tok, &r->detok, tok, buf, sizeof(buf));
	if (nb > 0 && text_append(r, buf, (size_t) nb) != 0)
	{
		engine_output_error(r, LLM_ERR_OUT_OF_MEMORY, "out of memory", cb, arg);
		return true;
	}
	stop_at = find_stop(r, old_len, &safe);
	if (stop_at >= 0)
	{
		r->text_len = (size_t) stop_at;
		r->text[r->text_len] = '\0';
		emit_text(r, r->text_len, true, tok, cb, arg);
		emit_finish(r, LLM_FINISH_STOP, cb, arg);
		return true;
	}
	if (r->output_complete || r->seqs[0].n_tokens >= r->max_len)
	{
		/*
		 * Cut by the length limit: the bytes of a character the next
		 * tokens would have completed are dropped, never shown as U+FFFD
		 * (the detokenizer holds back only an incomplete UTF-8 sequence).
		 */
		emit_text(r, r->text_len, true, tok, cb, arg);
		/* a complete output ends with stop even on the last token max_tokens allows */
		emit_finish(r, r->output_complete ? LLM_FINISH_STOP : LLM_FINISH_LENGTH, cb, arg);
		return true;
	}
	emit_text(r, safe, false, tok, cb, arg);
	return false;
}
