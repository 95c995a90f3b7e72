--
-- null_args: every function of the extension called with NULL for every
-- argument returns or raises a clean error: none may crash the backend.
-- A function that is not STRICT (a NULL model means the default one) must
-- check its own arguments; this lists the outcome of each, so a new
-- function is seen here too.  Skipped: functions without arguments,
-- procedures, window functions, those taking or returning internal or
-- trigger types (called by PostgreSQL itself).
--
CREATE TEMP TABLE null_outcomes(fn text, outcome text);
DO $$
DECLARE
  p record;
  args text;
  n bigint;
BEGIN
  FOR p IN
    SELECT f.oid, format('%s(%s%s)', f.proname, format_type(f.proargtypes[0], NULL),
                         CASE WHEN f.pronargs > 1 THEN format(', +%s', f.pronargs - 1) ELSE '' END) AS sig,
           f.pronargs, f.proargtypes, f.prokind
    FROM pg_proc f
    JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
    WHERE f.pronargs > 0 AND f.prokind IN ('f', 'a')
      AND f.prorettype NOT IN ('internal'::regtype, 'trigger'::regtype, 'event_trigger'::regtype)
      AND NOT EXISTS (SELECT 1 FROM unnest(f.proargtypes) t
                      WHERE t IN ('internal'::regtype, 'trigger'::regtype, 'anyelement'::regtype,
                                  'anyarray'::regtype, 'anycompatible'::regtype))
    ORDER BY 2
  LOOP
    SELECT string_agg(format('NULL::%s', format_type(t, NULL)), ', ' ORDER BY o)
      INTO args FROM unnest(p.proargtypes) WITH ORDINALITY AS a(t, o);
    BEGIN
      EXECUTE format('SELECT count(*) FROM (SELECT %s(%s)) s', p.oid::regproc, args) INTO n;
      INSERT INTO null_outcomes VALUES (p.sig, 'returns');
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO null_outcomes VALUES (p.sig, 'error ' || SQLSTATE);
    END;
  END LOOP;
END $$;
SELECT fn, outcome FROM null_outcomes ORDER BY fn;
-- the backend is alive and the worker serves
SELECT llm_generate('Say hi.', max_tokens => 2) IS NOT NULL AS still_serving;
