/* pg_llm 0.5 -> 0.6.  Each feature of 0.6 has its own block below, in the
   order the features landed; a fresh install of 0.6 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.6'" to load this file. \quit
