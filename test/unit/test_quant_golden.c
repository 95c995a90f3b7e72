/*
 * test_quant_golden.c — the reference dequantization (llm_dequantize_row)
 * of every weight type the CPU backend computes with, against the gguf
 * Python package's gguf.quants.dequantize on random blocks: bit for bit.
 *
 * Golden file: test/golden/quant/dequant.tsv (scripts/oracle/
 * make_quant_golden.py; LLM_GOLDEN_DIR overrides test/golden).  Every type
 * whose llm_type_info says supported must have rows there, so a type
 * added to the table without a golden fails here.
 */
#include "unit.h"
#include "kernels/quant_types.h"
#include "kernels/cpu/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* hex text of 2*n digits -> n bytes; false on a bad digit */
static bool
unhex(const char *s, size_t len, uint8_t *out)
{
	for (size_t i = 0; i + 1 < len; i += 2)
	{
		int			hi = hexval(s[i]),
					lo = hexval(s[i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (uint8_t) (hi << 4 | lo);
	}
	return len % 2 == 0;
}

static uint32_t
type_by_name(const char *name)
{
	for (uint32_t t = 0; t < LLM_TYPE_COUNT_; t++)
	{
		const llm_type_info *ti = llm_type_get(t);

		if (ti != NULL && strcmp(ti->name, name) == 0)
			return t;
	}
	return UINT32_MAX;
}

int
main(void)
{
	const char *dir = getenv("LLM_GOLDEN_DIR");
	char		path[1024];
	FILE	   *f;
	static char line[1 << 20];
	int			rows_of[LLM_TYPE_COUNT_] = {0};

	snprintf(path, sizeof(path), "%s/quant/dequant.tsv", dir ? dir : "test/golden");
	f = fopen(path, "r");
	CHECK(f != NULL, "golden file %s opens", path);
	if (f == NULL)
		return unit_done();
	while (fgets(line, sizeof(line), f))
	{
		char	   *name = strtok(line, "\t\n"),
				   *ns,
				   *raw,
				   *ref;
		uint32_t	t;
		int64_t		n;
		size_t		rb;
		uint8_t    *blocks;
		float	   *want,
				   *got;
		int64_t		diff = 0,
					first = -1;

		if (name == NULL || name[0] == '#')
			continue;
		ns = strtok(NULL, "\t\n");
		raw = strtok(NULL, "\t\n");
		ref = strtok(NULL, "\t\n");
		t = type_by_name(name);
		n = ns ? strtoll(ns, NULL, 10) : 0;
		rb = llm_type_row_bytes(t, n);
		if (!CHECK(t != UINT32_MAX && rb > 0 && raw && ref && strlen(raw) == 2 * rb &&
				   strlen(ref) == 8 * (size_t) n, "%s: golden row well-formed", name))
			continue;
		blocks = malloc(rb);
		want = malloc(sizeof(float) * n);
		got = malloc(sizeof(float) * n);
		CHECK(unhex(raw, 2 * rb, blocks) && unhex(ref, 8 * (size_t) n, (uint8_t *) want),
			  "%s: golden hex decodes", name);
		if (CHECK(llm_dequantize_row(t, blocks, got, n), "%s: llm_dequantize_row accepts the type", name))
		{
			for (int64_t i = 0; i < n; i++)
				if (memcmp(&got[i], &want[i], 4) != 0)
				{
					if (first < 0)
						first = i;
					diff++;
				}
			CHECK(diff == 0, "%s: %lld elements bit-identical to gguf.quants.dequantize "
				  "(%lld differ; first at %lld: %.9g vs %.9g)", name, (long long) n, (long long) diff,
				  (long long) first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
		}
		rows_of[t]++;
		free(blocks);
		free(want);
		free(got);
	}
	fclose(f);
	for (uint32_t t = 0; t < LLM_TYPE_COUNT_; t++)
	{
		const llm_type_info *ti = llm_type_get(t);

		if (ti != NULL && ti->supported)
			CHECK(rows_of[t] > 0, "%s (supported) has golden rows (%d)", ti->name, rows_of[t]);
	}
	return unit_done();
}
