/* utf8_text.c — database encoding <-> UTF-8 for text crossing the channel (utf8_text.h). */
#include "postgres.h"

#include "catalog/namespace.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "utf8_text.h"

char *
llm_text_to_utf8(text *t)
{
	char	   *s = text_to_cstring(t);

	return pg_server_to_any(s, strlen(s), PG_UTF8);
}

text *
llm_utf8_to_text(const char *s, int len)
{
	int			db_encoding = GetDatabaseEncoding();
	Oid			proc;
	StringInfoData out;

	if (db_encoding == PG_UTF8 || db_encoding == PG_SQL_ASCII)
	{
		(void) pg_verify_mbstr(PG_UTF8, s, len, false);
		return cstring_to_text_with_len(s, len);
	}
	proc = FindDefaultConversionProc(PG_UTF8, db_encoding);
	if (!OidIsValid(proc))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("no conversion from UTF8 to %s", GetDatabaseEncodingName())));
	initStringInfo(&out);
	while (len > 0)
	{
		int			converted;
		int			char_len;

		enlargeStringInfo(&out, len * MAX_CONVERSION_GROWTH + 1);
		converted = pg_do_encoding_conversion_buf(proc, PG_UTF8, db_encoding,
												  (unsigned char *) s, len,
												  (unsigned char *) out.data + out.len,
												  out.maxlen - out.len, true);
		out.len += strlen(out.data + out.len);
		s += converted;
		len -= converted;
		if (len <= 0)
			break;
		/* s starts with a character the database encoding lacks */
		appendStringInfoChar(&out, '?');
		char_len = Min(pg_utf_mblen((const unsigned char *) s), len);
		s += char_len;
		len -= char_len;
	}
	return cstring_to_text_with_len(out.data, out.len);
}

char *
llm_utf8_to_cstring(const char *s, int len)
{
	return text_to_cstring(llm_utf8_to_text(s, len));
}
