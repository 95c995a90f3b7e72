/*
 * sql_inputs.c — what a generation function reads besides its options
 * (sql_args.h): the messages jsonb of llm_chat and llm_chat_stream, and a
 * function's own arguments by name (the notify => channel of llm_submit and
 * llm_enrich).
 */
#include "postgres.h"

#include "catalog/pg_proc.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/syscache.h"

#include "sql_args.h"

static void
invalid_arg(const char *msg)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

/* A string member of a jsonb object, UTF-8; NULL if missing or not a string. */
static char *
jsonb_object_string(JsonbContainer *obj, const char *key)
{
	JsonbValue	v;
	char	   *s;

	if (getKeyJsonValueFromContainer(obj, key, strlen(key), &v) == NULL || v.type != jbvString)
		return NULL;
	s = pnstrdup(v.val.string.val, v.val.string.len);
	return pg_server_to_any(s, strlen(s), PG_UTF8);
}

/*
 * The number of messages of a messages array, its shape checked (room left
 * for a system message).
 */
int
llm_jsonb_messages_count(Jsonb *jb)
{
	int			n;

	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		invalid_arg("messages must be a JSON array of {\"role\": ..., \"content\": ...} objects");
	n = JB_ROOT_COUNT(jb);
	if (n == 0)
		invalid_arg("messages must not be empty");
	if (n + 1 > LLM_MAX_MESSAGES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("at most %d messages are allowed", LLM_MAX_MESSAGES - 1)));
	return n;
}

/* The messages of jb (llm_jsonb_messages_count checked) into msgs: their count. */
int
llm_jsonb_messages(Jsonb *jb, llm_chat_message *msgs)
{
	int			n = JB_ROOT_COUNT(jb);

	for (int i = 0; i < n; i++)
	{
		JsonbValue *elem = getIthJsonbValueFromContainer(&jb->root, i);
		char	   *role;
		char	   *content;

		if (elem == NULL || elem->type != jbvBinary ||
			!JsonContainerIsObject(elem->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %d is not a JSON object", i + 1)));
		role = jsonb_object_string(elem->val.binary.data, "role");
		content = jsonb_object_string(elem->val.binary.data, "content");
		if (role == NULL || content == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %d must have string \"role\" and \"content\" members", i + 1)));
		if (strcmp(role, "system") != 0 && strcmp(role, "user") != 0 &&
			strcmp(role, "assistant") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %d has unknown role \"%s\"", i + 1, role),
					 errhint("Roles are \"system\", \"user\" and \"assistant\".")));
		msgs[i].role = role;
		msgs[i].content = content;
		msgs[i].content_len = strlen(content);
	}
	return n;
}

/*
 * The messages of llm_chat and llm_chat_stream:
 * [{"role": "system"|"user"|"assistant", "content": "..."}, ...] (OpenAI
 * style); the system option, if given, is put before them.  The shape of
 * the jsonb is checked here (with room for the system message), the
 * request by llm_call_set_messages.
 */
void
llm_call_set_messages_jsonb(LlmCall *call, Jsonb *jb)
{
	int			n = llm_jsonb_messages_count(jb);
	int			k = 0;
	llm_chat_message *msgs;

	msgs = palloc(sizeof(llm_chat_message) * (n + 1));
	if (call->req.system)
	{
		msgs[k].role = "system";
		msgs[k].content = call->req.system;
		msgs[k].content_len = call->req.system_len;
		k++;
	}
	k += llm_jsonb_messages(jb, msgs + k);
	llm_call_set_messages(call, msgs, k);
}

/* ---------- a function's own arguments ---------- */

int
llm_arg_position(FunctionCallInfo fcinfo, const char *name)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	bool		isnull;
	Datum		names_d;
	Datum		modes_d;
	char	  **names = NULL;
	int			n;
	int			pos = -1;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	names_d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargnames, &isnull);
	if (isnull)
		names_d = PointerGetDatum(NULL);
	modes_d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargmodes, &isnull);
	if (isnull)
		modes_d = PointerGetDatum(NULL);
	n = get_func_input_arg_names(names_d, modes_d, &names);
	for (int i = 0; i < n && i < PG_NARGS(); i++)
		if (names[i] && strcmp(names[i], name) == 0)
			pos = i;
	ReleaseSysCache(tup);
	return pos;
}

char *
llm_notify_channel_arg(FunctionCallInfo fcinfo)
{
	int			pos = llm_arg_position(fcinfo, "notify");
	char	   *channel;

	if (pos < 0 || PG_ARGISNULL(pos))
		return NULL;
	channel = text_to_cstring(PG_GETARG_TEXT_PP(pos));
	/* pg_notify's checks and messages (commands/async.c), made before anything is stored */
	if (channel[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("channel name cannot be empty")));
	if (strlen(channel) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("channel name too long")));
	return channel;
}
