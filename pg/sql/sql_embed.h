/*
 * sql_embed.h — embeddings from SQL: how llm_embed builds its request and
 * what its finished request becomes, for the function table (sql_args.c),
 * so the function, llm_embed(text[]) and the LLM Batch node build and read
 * an embedding call the same way.  The SQL functions themselves
 * (llm_embed, llm_similarity, llm_rerank, llm_chunk, llm_cosine_distance)
 * are in sql_embed.c; docs/EMBEDDINGS.md "## SQL" is their reference.
 */
#ifndef LLM_SQL_EMBED_H
#define LLM_SQL_EMBED_H

#include "sql_args.h"

/*
 * llm_embed's call (the contract of llm_call_build_text): an EMBED request
 * (request.h) of the input as raw text (no chat template), pooled as the
 * engine pools it, on the model => alias; truncate => true sets
 * req.truncate (an input over the model's limit is cut to it), else such
 * an input fails with 54000.  False for a NULL input.
 */
extern bool llm_call_build_embed(const LlmArgMap *map, const NullableDatum *args, int nargs,
								 LlmCall *call, LlmResult **refused);

/*
 * A finished EMBED request's value: a one-dimensional real[] (lower bound
 * 1) of the vector's floats; a failure raises its SQLSTATE, or with
 * on_error_null gives *isnull.
 */
/*
 * Make a call whose options are read (a job's stored ones) an EMBED of raw
 * text: the request llm_call_build_embed builds, before its prompt is set.
 */
extern void llm_call_make_embed(LlmCall *call);

extern Datum llm_vector_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);

#endif
