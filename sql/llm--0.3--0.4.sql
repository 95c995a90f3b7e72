/* pg_llm 0.3 -> 0.4.  Each feature of 0.4 has its own block below, in the
   order the features landed; a fresh install of 0.4 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.4'" to load this file. \quit
