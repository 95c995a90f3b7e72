/* sql_grammar.c — a call's grammar compiled and cached in the backend (sql_grammar.h). */
#include "postgres.h"

#include "utils/memutils.h"

#include "engine/grammar/grammar.h"
#include "sql_grammar.h"

typedef struct CachedGrammar
{
	char	   *key;			/* kind byte + the source as given; NULL: empty slot */
	size_t		key_len;
	char	   *norm;			/* the normalized (tagged) source */
	size_t		norm_len;
	int64		max_bytes;		/* llm_grammar_max_bytes: -1 unbounded */
	uint64		last_use;
} CachedGrammar;

static MemoryContext cache_cxt = NULL;
static CachedGrammar cache[LLM_SQL_GRAMMAR_CACHE];
static uint64 cache_tick = 0;

/* The key of a grammar option: kind, then the source (choices length-prefixed, in the order given). */
static char *
grammar_key(const LlmCall *call, llm_grammar_kind kind, size_t *len)
{
	StringInfoData k;
	char		tag = (char) kind;

	initStringInfo(&k);
	appendBinaryStringInfo(&k, &tag, 1);
	if (kind == LLM_GRAMMAR_CHOICES)
		for (int i = 0; i < call->n_choices; i++)
		{
			uint32		n = (uint32) strlen(call->choices[i]);

			appendBinaryStringInfo(&k, (const char *) &n, 4);
			appendBinaryStringInfo(&k, call->choices[i], n);
		}
	else
	{
		const char *src = kind == LLM_GRAMMAR_REGEX ? call->regex : call->json_schema;

		appendBinaryStringInfo(&k, src, strlen(src));
	}
	*len = k.len;
	return k.data;
}

static void
raise_compile_error(llm_grammar_status st, const char *err)
{
	int			code = st == LLM_GRAMMAR_TOO_LARGE ? ERRCODE_PROGRAM_LIMIT_EXCEEDED :
		st == LLM_GRAMMAR_NO_MEMORY ? ERRCODE_OUT_OF_MEMORY : ERRCODE_INVALID_PARAMETER_VALUE;

	ereport(ERROR, (errcode(code), errmsg("%s", err)));
}

/*
 * Compile key (a tagged source) and return its normalized source in cache
 * memory, and its longest output in *max_bytes.
 */
static char *
compile_key(const char *key, size_t key_len, size_t *norm_len, int64 *max_bytes)
{
	llm_grammar *g = NULL;
	char		err[512];
	llm_grammar_status st = llm_grammar_compile_source(key, key_len, &g, err, sizeof(err));
	const char *src;
	char	   *norm;

	if (st != LLM_GRAMMAR_OK)
		raise_compile_error(st, err);
	src = llm_grammar_source(g, norm_len);
	*max_bytes = llm_grammar_max_bytes(g);
	norm = MemoryContextAllocExtended(cache_cxt, *norm_len, MCXT_ALLOC_NO_OOM);
	if (norm != NULL)
		memcpy(norm, src, *norm_len);
	llm_grammar_free(g);
	if (norm == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory keeping a grammar")));
	return norm;
}

void
llm_call_set_grammar(LlmCall *call)
{
	int			given = (call->choices != NULL) + (call->regex != NULL) + (call->json_schema != NULL);
	llm_grammar_kind kind;
	char	   *key;
	size_t		key_len;
	CachedGrammar *slot = NULL;
	char	   *out;

	if (given == 0)
		return;
	if (given > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("only one of choices, regex and json_schema can be given")));
	if (call->choices != NULL)
	{
		kind = LLM_GRAMMAR_CHOICES;
		if (call->n_choices == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("choices must not be empty")));
		for (int i = 0; i < call->n_choices; i++)
			if (call->choices[i] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("choices must not contain NULL")));
	}
	else
		kind = call->regex != NULL ? LLM_GRAMMAR_REGEX : LLM_GRAMMAR_JSON_SCHEMA;
	if (cache_cxt == NULL)
		cache_cxt = AllocSetContextCreate(TopMemoryContext, "llm grammar cache", ALLOCSET_SMALL_SIZES);

	key = grammar_key(call, kind, &key_len);
	for (int i = 0; i < LLM_SQL_GRAMMAR_CACHE; i++)
		if (cache[i].key != NULL && cache[i].key_len == key_len && memcmp(cache[i].key, key, key_len) == 0)
		{
			slot = &cache[i];
			break;
		}
	if (slot == NULL)
	{
		size_t		norm_len;
		int64		max_bytes;
		char	   *norm = compile_key(key, key_len, &norm_len, &max_bytes);

		slot = &cache[0];
		for (int i = 1; i < LLM_SQL_GRAMMAR_CACHE && slot->key != NULL; i++)
			if (cache[i].key == NULL || cache[i].last_use < slot->last_use)
				slot = &cache[i];
		if (slot->key != NULL)
		{
			pfree(slot->key);
			pfree(slot->norm);
			slot->key = NULL;
		}
		{
			char	   *k = MemoryContextAlloc(cache_cxt, key_len);

			memcpy(k, key, key_len);
			slot->key = k;
		}
		slot->key_len = key_len;
		slot->norm = norm;
		slot->norm_len = norm_len;
		slot->max_bytes = max_bytes;
	}
	slot->last_use = ++cache_tick;
	pfree(key);
	out = palloc(slot->norm_len);
	memcpy(out, slot->norm, slot->norm_len);
	call->req.grammar = out;
	call->req.grammar_len = slot->norm_len;
	call->grammar_max_bytes = slot->max_bytes;
}
