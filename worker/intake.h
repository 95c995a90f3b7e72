/*
 * intake.h — the worker's requests: intake of the messages a channel
 * delivers (decoded by protocol.c, then llm_engine_submit, tokenize,
 * detokenize or abort) and routing of the engine's events back to the
 * requesting channel as responses.
 *
 * Every request is routed by the model alias it names to that model's
 * engine.  Every request living in an engine is owned here, listed under
 * the channel slot it came from, from its submission to its final event, its
 * abort, or its slot's channel being dropped.  Asynchronous requests
 * (channel/mailbox.h) come from the store instead of a channel, are routed
 * the same way, belong to no slot (a backend's exit does not end them) and
 * end in the store; when their engine is destroyed (reload, alias removed)
 * they go back to the store's queue, so they are routed again and the next
 * engine of their alias runs them (an alias gone by then fails them).
 * Statuses become SQLSTATEs by
 * common/sqlstate.h's table; what happens to each request is noted in the
 * statistics (common/stats.h).  A request with a grammar that finishes with
 * "length" is answered with ERROR 54000 instead of its text: its output is
 * incomplete under the grammar, so it is no valid result (the statistics
 * still record the "length" finish).  An llm_tokenize() text of at least
 * LLM_TOKENIZE_INLINE_BYTES is tokenized on the engine's tokenizer thread
 * as a request of its own (listed under its slot like any other, no
 * statistics), answered from its TOKENS or ERROR event; a shorter one is
 * answered at once.
 *
 * Every request has one sink for its answers (text, the final answer,
 * tokens, an error; what to do when its engine goes away): its channel's
 * outbox, or for an asynchronous request its store entry.  Every path that
 * ends a request (final event, refusal, abort, cancel, engine destroyed)
 * ends it through one function that notes its usage and outcome and frees
 * it, so the statistics of a request do not depend on where it came from.
 */
#ifndef LLM_INTAKE_H
#define LLM_INTAKE_H

#include "postgres.h"

#include "engine/engine.h"

/*
 * Where a request naming model alias (NULL: the default model) goes: its
 * engine and model row (registry.h), or NULL with the SQLSTATE and message
 * to answer with (worker/models.h's models_route).
 */
typedef llm_engine *(*IntakeRouteFn) (const char *alias, int *row, int *sqlstate, char *msg, size_t msglen);

/* Set up for n_slots channel slots (memory from cxt), requests routed by route. */
extern void intake_init(int n_slots, MemoryContext cxt, IntakeRouteFn route);

/* Handle one request message received on slot's channel. */
extern void intake_message(int slot, const void *data, Size len);

/* llm_engine_step's event callback. */
extern void intake_on_event(const llm_event *ev, void *cb_arg);

/* Slot's channel is being dropped: abort its requests in the engine (no answers). */
extern void intake_abort_slot(int slot);

/*
 * Fail every live request of engine e with an ERROR (e is about to be
 * destroyed); asynchronous ones are queued again in the store instead.
 */
extern void intake_fail_engine(llm_engine *e, int sqlstate, const char *message);

/* Take new asynchronous requests of the store into the engine, abort the cancelled ones. */
extern void intake_async(uint32 generation);

/*
 * Store the outcomes of the asynchronous requests that ended in the last
 * engine step (their results and errors); called after the statistics
 * that count them are published.
 */
extern void intake_async_deliver(void);

#endif
