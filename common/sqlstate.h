/*
 * sqlstate.h — the SQLSTATE of each engine status (request.h's llm_status):
 * one table, used wherever a status becomes an ERROR (the SQL functions'
 * option check, the worker's answers).
 */
#ifndef LLM_SQLSTATE_H
#define LLM_SQLSTATE_H

#include "postgres.h"

#include "engine/request.h"

/* MAKE_SQLSTATE code of s (XX000 internal_error for anything not listed). */
extern int	llm_status_sqlstate(llm_status s);

#endif
