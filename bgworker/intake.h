/*
 * intake.h — the worker's requests: intake of the messages a channel
 * delivers (decoded by protocol.c, then llm_engine_submit, tokenize,
 * detokenize or abort) and routing of the engine's events back to the
 * requesting channel as responses.
 *
 * Every request living in the engine is owned here, listed under the
 * channel slot it came from, from its submission to its final event, its
 * abort, or its slot's channel being dropped.  Statuses become SQLSTATEs by
 * src/sqlstate.h's table; what happens to each request is noted in the
 * statistics (src/stats.h).  A request with a grammar that finishes with
 * "length" is answered with ERROR 54000 instead of its text: its output is
 * incomplete under the grammar, so it is no valid result (the statistics
 * still record the "length" finish).
 */
#ifndef LLM_INTAKE_H
#define LLM_INTAKE_H

#include "postgres.h"

#include "engine.h"

/* Set up for n_slots channel slots (memory from cxt). */
extern void intake_init(int n_slots, MemoryContext cxt);

/*
 * The engine requests go to from now on; NULL while no model is loaded:
 * requests are then answered with ERROR model_sqlstate naming model_error.
 */
extern void intake_set_engine(llm_engine *e, int model_sqlstate, const char *model_error);

/* Handle one request message received on slot's channel. */
extern void intake_message(int slot, const void *data, Size len);

/* llm_engine_step's event callback. */
extern void intake_on_event(const llm_event *ev, void *cb_arg);

/* Slot's channel is being dropped: abort its requests in the engine (no answers). */
extern void intake_abort_slot(int slot);

/* Fail every live request with an ERROR (the engine is about to be replaced). */
extern void intake_fail_all(int sqlstate, const char *message);

#endif
