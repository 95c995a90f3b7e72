/*
 * unit.h — minimal TAP-style assertions for the engine's C unit tests.
 * Each CHECK prints "ok N - ..." or "not ok N - ..."; SKIP prints
 * "ok N # SKIP ..." for a check this machine cannot run (say why), counted
 * apart.  unit_done() prints the plan and the summary line
 * "N passed, N failed, N skipped" (test/run-unit reads its
 * "N passed, N failed" prefix) and returns the exit code.
 */
#ifndef LLM_UNIT_H
#define LLM_UNIT_H

#include <stdio.h>
#include <stdarg.h>

static int	unit_n_pass, unit_n_fail, unit_n_skip;

static inline int
unit_check(int ok, const char *file, int line, const char *fmt, ...)
{
	va_list		ap;

	printf("%s %d - ", ok ? "ok" : "not ok", unit_n_pass + unit_n_fail + unit_n_skip + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (!ok)
		printf("  # at %s:%d", file, line);
	printf("\n");
	fflush(stdout);
	if (ok)
		unit_n_pass++;
	else
		unit_n_fail++;
	return ok;
}

static inline void
unit_skip(const char *fmt, ...)
{
	va_list		ap;

	printf("ok %d # SKIP ", unit_n_pass + unit_n_fail + unit_n_skip + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	unit_n_skip++;
}

#define CHECK(cond, ...) unit_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* A check that cannot run here (e.g. an instruction set this CPU lacks); counted as skipped. */
#define SKIP(...) unit_skip(__VA_ARGS__)

static inline int
unit_done(void)
{
	printf("1..%d\n", unit_n_pass + unit_n_fail + unit_n_skip);
	printf("%d passed, %d failed, %d skipped\n", unit_n_pass, unit_n_fail, unit_n_skip);
	return unit_n_fail ? 1 : 0;
}

#endif
