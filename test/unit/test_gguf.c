/*
 * test_gguf.c — GGUF reader (engine/gguf/gguf.c) and type table
 * (kernels/quant_types.c).
 *
 * 1. quant_types row sizes (hand-computed from the block layouts).
 * 2. A small valid GGUF built in memory by a minimal writer: every accessor.
 * 3. Malformed files: every truncated prefix, bad magic/version, absurd
 *    counts and lengths, bad tensor shapes/types/offsets, duplicates, nested
 *    arrays, bad alignment; each must fail with a message, never crash.
 * 4. Deterministic random byte flips (no crash; accepted files must keep all
 *    pointers inside the buffer).
 * 5. Numeric array elements as integers: floats out of the int64 range
 *    saturate, NaN gives 0 (an out-of-range conversion would be undefined).
 * 6. The real model (LLM_TEST_MODEL, default models/SmolLM2-135M-Instruct.Q4_1.gguf):
 *    metadata and truncated copies in /tmp that must fail; counted as
 *    skipped when the model is absent.
 *
 * Buffers passed to gguf_open_buffer are malloc'd with their exact size so
 * AddressSanitizer (when enabled) catches any read past the end.
 */
#include "engine/gguf/gguf.h"
#include "kernels/quant_types.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------- minimal GGUF writer ---------- */

typedef struct wbuf
{
	uint8_t    *p;
	size_t		len;
	size_t		cap;
} wbuf;

static void
w_bytes(wbuf *w, const void *src, size_t n)
{
	if (w->len + n > w->cap)
	{
		size_t		cap = w->cap ? w->cap : 256;

		while (cap < w->len + n)
			cap *= 2;
		w->p = realloc(w->p, cap);
		if (w->p == NULL)
		{
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
		w->cap = cap;
	}
	if (n > 0)
		memcpy(w->p + w->len, src, n);
	w->len += n;
}

static void
w_u8(wbuf *w, uint8_t v)
{
	w_bytes(w, &v, 1);
}

static void
w_u32(wbuf *w, uint32_t v)
{
	w_bytes(w, &v, 4);
}

static void
w_u64(wbuf *w, uint64_t v)
{
	w_bytes(w, &v, 8);
}

static void
w_f32(wbuf *w, float v)
{
	w_bytes(w, &v, 4);
}

static void
w_f64(wbuf *w, double v)
{
	w_bytes(w, &v, 8);
}

static void
w_str(wbuf *w, const char *s)
{
	w_u64(w, strlen(s));
	w_bytes(w, s, strlen(s));
}

/* key + value type; the caller writes the value */
static void
w_key(wbuf *w, const char *key, uint32_t type)
{
	w_str(w, key);
	w_u32(w, type);
}

#define AUTO_OFFSET UINT64_MAX

typedef struct tspec
{
	const char *name;
	uint32_t	n_dims;
	int64_t		ne[5];
	uint32_t	type;
	uint64_t	offset;			/* AUTO_OFFSET: next aligned position */
} tspec;

/* What to put in the metadata beyond the standard kvs. */
typedef enum kv_variant
{
	KV_PLAIN,
	KV_DUP_KEY,
	KV_NESTED_ARRAY,
	KV_UNKNOWN_TYPE,
	KV_UNKNOWN_ARRAY_TYPE,
	KV_LONG_KEY,
	KV_EMPTY_KEY,
	KV_ALIGN_WRONG_TYPE
} kv_variant;

typedef struct fspec
{
	const char *magic;			/* NULL: "GGUF" */
	uint32_t	version;		/* 0: 3 */
	uint32_t	alignment;		/* 0: no general.alignment key */
	kv_variant	kvs;
	const tspec *tensors;
	int			n_tensors;
	int64_t		data_extra;		/* bytes added to (or cut from) the data section */
} fspec;

static const tspec default_tensors[] = {
	{"a.f32", 2, {4, 2}, LLM_TYPE_F32, AUTO_OFFSET},	/* 32 bytes */
	{"b.q8_0", 2, {32, 2}, LLM_TYPE_Q8_0, AUTO_OFFSET},	/* 68 bytes */
	{"c.q4_1", 1, {64}, LLM_TYPE_Q4_1, AUTO_OFFSET},	/* 40 bytes */
};

static uint64_t
tspec_nbytes(const tspec *t)
{
	uint64_t	rows = 1;			/* wraps for absurd shapes; fine here */

	for (uint32_t d = 1; d < t->n_dims && d < 4; d++)
		rows *= (uint64_t) t->ne[d];
	return llm_type_row_bytes(t->type, t->ne[0]) * rows;
}

/* Serialize spec into w (w must be empty). */
static void
build_file(wbuf *w, const fspec *s)
{
	uint32_t	align = s->alignment ? s->alignment : 32;
	uint64_t	n_kv = 10 + (s->alignment ? 1 : 0) + (s->kvs != KV_PLAIN ? 1 : 0);
	uint64_t	next = 0,
				data_end = 0;
	uint64_t   *offsets = calloc(s->n_tensors + 1, sizeof(uint64_t));
	char	   *longkey;

	w_bytes(w, s->magic ? s->magic : "GGUF", 4);
	w_u32(w, s->version ? s->version : 3);
	w_u64(w, s->n_tensors);
	w_u64(w, n_kv);

	w_key(w, "general.architecture", GGUF_VT_STRING);
	w_str(w, "llama");
	if (s->alignment)
	{
		w_key(w, "general.alignment", GGUF_VT_UINT32);
		w_u32(w, s->alignment);
	}
	w_key(w, "test.u32", GGUF_VT_UINT32);
	w_u32(w, 30);
	w_key(w, "test.i8", GGUF_VT_INT8);
	w_u8(w, (uint8_t) -5);
	w_key(w, "test.f32", GGUF_VT_FLOAT32);
	w_f32(w, 1e-5f);
	w_key(w, "test.f64", GGUF_VT_FLOAT64);
	w_f64(w, 100000.0);
	w_key(w, "test.bool", GGUF_VT_BOOL);
	w_u8(w, 1);
	w_key(w, "test.u64big", GGUF_VT_UINT64);
	w_u64(w, (UINT64_C(1) << 63) + 1);
	w_key(w, "test.strs", GGUF_VT_ARRAY);
	w_u32(w, GGUF_VT_STRING);
	w_u64(w, 3);
	w_str(w, "a");
	w_str(w, "");
	w_str(w, "h\xc3\xa9llo");
	w_key(w, "test.i32s", GGUF_VT_ARRAY);
	w_u32(w, GGUF_VT_INT32);
	w_u64(w, 3);
	w_u32(w, 1);
	w_u32(w, (uint32_t) -2);
	w_u32(w, 3);
	w_key(w, "test.empty", GGUF_VT_ARRAY);
	w_u32(w, GGUF_VT_STRING);
	w_u64(w, 0);

	switch (s->kvs)
	{
		case KV_PLAIN:
			break;
		case KV_DUP_KEY:
			w_key(w, "test.u32", GGUF_VT_UINT32);
			w_u32(w, 31);
			break;
		case KV_NESTED_ARRAY:
			w_key(w, "test.nested", GGUF_VT_ARRAY);
			w_u32(w, GGUF_VT_ARRAY);
			w_u64(w, 1);
			w_u32(w, GGUF_VT_UINT8);
			w_u64(w, 1);
			w_u8(w, 7);
			break;
		case KV_UNKNOWN_TYPE:
			w_key(w, "test.weird", 13);
			w_u32(w, 0);
			break;
		case KV_UNKNOWN_ARRAY_TYPE:
			w_key(w, "test.weirdarr", GGUF_VT_ARRAY);
			w_u32(w, 77);
			w_u64(w, 1);
			w_u32(w, 0);
			break;
		case KV_LONG_KEY:
			longkey = malloc(70001);
			memset(longkey, 'k', 70000);
			longkey[70000] = '\0';
			w_key(w, longkey, GGUF_VT_UINT8);
			w_u8(w, 1);
			free(longkey);
			break;
		case KV_EMPTY_KEY:
			w_key(w, "", GGUF_VT_UINT8);
			w_u8(w, 1);
			break;
		case KV_ALIGN_WRONG_TYPE:
			w_key(w, "general.alignment", GGUF_VT_UINT64);
			w_u64(w, 32);
			break;
	}

	for (int i = 0; i < s->n_tensors; i++)
	{
		const tspec *t = &s->tensors[i];

		offsets[i] = t->offset == AUTO_OFFSET ? next : t->offset;
		w_str(w, t->name);
		w_u32(w, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims && d < 5; d++)
			w_u64(w, (uint64_t) t->ne[d]);
		w_u32(w, t->type);
		w_u64(w, offsets[i]);
		if (offsets[i] + tspec_nbytes(t) > data_end)
			data_end = offsets[i] + tspec_nbytes(t);
		next = (offsets[i] + tspec_nbytes(t) + align - 1) / align * align;
	}
	/* padding, then data bytes with a recognisable pattern */
	while (w->len % align != 0)
		w_u8(w, 0);
	{
		int64_t		n = (int64_t) data_end + s->data_extra;

		for (int64_t i = 0; i < n; i++)
			w_u8(w, (uint8_t) (i * 7 + 3));
	}
	free(offsets);
}

/* Exact-size heap copy of [p, p+n) (so ASan sees overruns). */
static uint8_t *
exact_copy(const uint8_t *p, size_t n)
{
	uint8_t    *c = malloc(n ? n : 1);

	if (n)
		memcpy(c, p, n);
	return c;
}

/*
 * Build spec, try to open it; returns true when the open FAILED with a
 * message containing expect (if non-NULL).  The message goes to msg.
 */
static bool
rejects(const fspec *s, const char *expect, char *msg, size_t msglen)
{
	wbuf		w = {0};
	uint8_t    *buf;
	gguf_file  *f;
	bool		ok;

	build_file(&w, s);
	buf = exact_copy(w.p, w.len);
	f = gguf_open_buffer(buf, w.len, msg, msglen);
	ok = (f == NULL && msg[0] != '\0' && (expect == NULL || strstr(msg, expect) != NULL));
	if (f != NULL)
		snprintf(msg, msglen, "(opened successfully)");
	gguf_close(f);
	free(buf);
	free(w.p);
	return ok;
}

static bool
rejects_raw(const wbuf *w, const char *expect, char *msg, size_t msglen)
{
	uint8_t    *buf = exact_copy(w->p, w->len);
	gguf_file  *f = gguf_open_buffer(buf, w->len, msg, msglen);
	bool		ok = (f == NULL && msg[0] != '\0' && (expect == NULL || strstr(msg, expect) != NULL));

	if (f != NULL)
		snprintf(msg, msglen, "(opened successfully)");
	gguf_close(f);
	free(buf);
	return ok;
}

/* ---------- 1. quant_types ---------- */

static void
test_quant_types(void)
{
	CHECK(llm_type_row_bytes(LLM_TYPE_F32, 576) == 2304, "F32 row of 576 = 2304 bytes");
	CHECK(llm_type_row_bytes(LLM_TYPE_F16, 3) == 6, "F16 row of 3 = 6 bytes");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q4_1, 576) == 18 * 20, "Q4_1 row of 576 = 18 blocks x 20");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q8_0, 576) == 18 * 34, "Q8_0 row of 576 = 18 blocks x 34");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q4_0, 32) == 18, "Q4_0 block = 18 bytes");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q4_K, 512) == 2 * 144, "Q4_K row of 512 = 2 x 144");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q6_K, 256) == 210, "Q6_K block = 210 bytes");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q4_1, 33) == 0, "Q4_1 row of 33 (not a block multiple) = 0");
	CHECK(llm_type_row_bytes(LLM_TYPE_Q4_K, 32) == 0, "Q4_K row of 32 = 0");
	CHECK(llm_type_row_bytes(LLM_TYPE_F32, 0) == 0 && llm_type_row_bytes(LLM_TYPE_F32, -4) == 0,
		  "row of 0 or negative elements = 0");
	CHECK(llm_type_get(4) == NULL && llm_type_get(5) == NULL, "removed ids 4, 5 are unknown");
	CHECK(llm_type_get(LLM_TYPE_COUNT_) == NULL && llm_type_get(UINT32_MAX) == NULL,
		  "ids >= LLM_TYPE_COUNT_ are unknown");
	CHECK(llm_type_row_bytes(4, 32) == 0, "row bytes of an unknown type = 0");
	CHECK(llm_type_get(LLM_TYPE_Q8_0) != NULL && strcmp(llm_type_get(LLM_TYPE_Q8_0)->name, "Q8_0") == 0,
		  "type 8 is named Q8_0");
}

/* ---------- 2. small valid file ---------- */

static void
test_small_valid(void)
{
	fspec		s = {.tensors = default_tensors, .n_tensors = 3};
	wbuf		w = {0};
	uint8_t    *buf;
	char		err[512];
	gguf_file  *f;
	int64_t		iv;
	double		dv;
	bool		bv;
	gguf_str	sv;
	const gguf_kv *kv;
	const gguf_tensor *t;

	build_file(&w, &s);
	buf = exact_copy(w.p, w.len);
	f = gguf_open_buffer(buf, w.len, err, sizeof(err));
	if (!CHECK(f != NULL, "small valid file opens (%s)", f ? "" : err))
	{
		free(buf);
		free(w.p);
		return;
	}
	CHECK(gguf_version(f) == 3, "version 3");
	CHECK(gguf_n_kv(f) == 10, "10 kvs");
	CHECK(gguf_kv_at(f, 10) == NULL && gguf_kv_at(f, 0) != NULL, "gguf_kv_at bounds");
	CHECK(gguf_get_str(f, "general.architecture", &sv) && gguf_str_eq(sv, "llama"),
		  "general.architecture = llama");
	CHECK(gguf_get_int(f, "test.u32", &iv) && iv == 30, "test.u32 = 30");
	CHECK(gguf_get_int(f, "test.i8", &iv) && iv == -5, "test.i8 = -5 (sign-extended)");
	CHECK(gguf_get_float(f, "test.f32", &dv) && dv == (double) 1e-5f, "test.f32 = 1e-5");
	CHECK(gguf_get_float(f, "test.f64", &dv) && dv == 100000.0, "test.f64 = 1e5");
	CHECK(gguf_get_float(f, "test.u32", &dv) && dv == 30.0, "get_float accepts integers");
	CHECK(!gguf_get_int(f, "test.f32", &iv), "get_int refuses a float");
	CHECK(!gguf_get_int(f, "test.u64big", &iv), "get_int refuses uint64 > INT64_MAX");
	CHECK(gguf_get_float(f, "test.u64big", &dv) && dv > 9.2e18, "get_float reads a big uint64");
	CHECK(gguf_get_bool(f, "test.bool", &bv) && bv, "test.bool = true");
	CHECK(!gguf_get_bool(f, "test.u32", &bv), "get_bool refuses an integer");
	CHECK(!gguf_get_str(f, "test.u32", &sv), "get_str refuses an integer");
	CHECK(!gguf_get_int(f, "no.such.key", &iv) && gguf_find_kv(f, "no.such.key") == NULL,
		  "absent key");
	CHECK(gguf_find_kv(f, "test.u3") == NULL && gguf_find_kv(f, "test.u32x") == NULL,
		  "prefix/extension of a key is not a match");

	kv = gguf_get_arr(f, "test.strs", GGUF_VT_STRING);
	CHECK(kv != NULL && kv->arr_n == 3 && kv->strs != NULL
		  && gguf_str_eq(kv->strs[0], "a") && kv->strs[1].len == 0
		  && gguf_str_eq(kv->strs[2], "h\xc3\xa9llo"),
		  "string array [a, \"\", h\xc3\xa9llo]");
	CHECK(gguf_get_arr(f, "test.strs", GGUF_VT_INT32) == NULL, "string array is not an int32 array");
	kv = gguf_get_arr(f, "test.i32s", GGUF_VT_INT32);
	CHECK(kv != NULL && kv->arr_n == 3 && gguf_arr_int(kv, 0) == 1 && gguf_arr_int(kv, 1) == -2
		  && gguf_arr_int(kv, 2) == 3 && gguf_arr_float(kv, 1) == -2.0,
		  "int32 array [1, -2, 3]");
	kv = gguf_get_arr(f, "test.empty", GGUF_VT_STRING);
	CHECK(kv != NULL && kv->arr_n == 0, "empty string array");

	CHECK(gguf_n_tensors(f) == 3 && gguf_tensor_at(f, 3) == NULL, "3 tensors");
	t = gguf_find_tensor(f, "b.q8_0");
	CHECK(t != NULL && t->type == LLM_TYPE_Q8_0 && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2
		  && t->ne[2] == 1 && t->ne[3] == 1 && t->nbytes == 68 && t->offset == 32,
		  "b.q8_0: Q8_0 [32, 2], 68 bytes at offset 32");
	t = gguf_find_tensor(f, "c.q4_1");
	CHECK(t != NULL && t->offset == 128 && t->nbytes == 40
		  && (const uint8_t *) t->data + t->nbytes == buf + w.len,
		  "c.q4_1 is the last 40 bytes of the file");
	t = gguf_find_tensor(f, "a.f32");
	CHECK(t != NULL && ((const uint8_t *) t->data - buf) % 32 == 0
		  && ((const uint8_t *) t->data)[0] == 3 && ((const uint8_t *) t->data)[1] == 10,
		  "a.f32 data is aligned and holds the written pattern");
	CHECK(gguf_find_tensor(f, "a.f3") == NULL && gguf_find_tensor(f, "") == NULL, "absent tensor");
	gguf_close(f);
	free(buf);
	free(w.p);

	/* version 2, custom alignment 64, no tensors */
	{
		fspec		s2 = {.version = 2, .alignment = 64, .tensors = default_tensors, .n_tensors = 3};
		fspec		s0 = {.n_tensors = 0};

		w = (wbuf) {0};
		build_file(&w, &s2);
		buf = exact_copy(w.p, w.len);
		f = gguf_open_buffer(buf, w.len, err, sizeof(err));
		t = f ? gguf_find_tensor(f, "c.q4_1") : NULL;
		CHECK(f != NULL && gguf_version(f) == 2 && t != NULL && t->offset == 192
			  && ((const uint8_t *) t->data - buf) % 64 == 0,
			  "version 2 file with general.alignment 64 opens (%s)", f ? "" : err);
		gguf_close(f);
		free(buf);
		free(w.p);

		w = (wbuf) {0};
		build_file(&w, &s0);
		buf = exact_copy(w.p, w.len);
		f = gguf_open_buffer(buf, w.len, err, sizeof(err));
		CHECK(f != NULL && gguf_n_tensors(f) == 0, "file without tensors opens (%s)", f ? "" : err);
		gguf_close(f);
		free(buf);
		free(w.p);
	}
}

/* ---------- 3. malformed files ---------- */

static void
test_truncations(void)
{
	fspec		s = {.alignment = 64, .tensors = default_tensors, .n_tensors = 3};
	wbuf		w = {0};
	size_t		n_bad = 0,
				n_nomsg = 0;
	char		err[512];

	build_file(&w, &s);
	for (size_t len = 0; len < w.len; len++)
	{
		uint8_t    *buf = exact_copy(w.p, len);
		gguf_file  *f;

		err[0] = '\0';
		f = gguf_open_buffer(buf, len, err, sizeof(err));
		if (f != NULL)
		{
			if (n_bad++ == 0)
				printf("# prefix of %zu bytes opened\n", len);
			gguf_close(f);
		}
		else if (err[0] == '\0')
			n_nomsg++;
		free(buf);
	}
	CHECK(n_bad == 0 && n_nomsg == 0,
		  "all %zu truncated prefixes rejected with a message (%zu opened, %zu without message)",
		  w.len, n_bad, n_nomsg);
	/* a tiny errlen must still be NUL-terminated and not overflow */
	{
		char		tiny[4] = {'x', 'x', 'x', 'x'};
		uint8_t    *buf = exact_copy(w.p, 10);

		CHECK(gguf_open_buffer(buf, 10, tiny, 3) == NULL && tiny[2] == '\0' && tiny[3] == 'x',
			  "errlen 3: message truncated and NUL-terminated");
		CHECK(gguf_open_buffer(buf, 10, NULL, 0) == NULL, "NULL err buffer is accepted");
		free(buf);
	}
	free(w.p);
}

static void
test_malformed(void)
{
	char		msg[512];
	int64_t		big = INT64_C(1) << 40;

	/* header */
	{
		fspec		s = {.magic = "GGUX", .tensors = default_tensors, .n_tensors = 3};

		CHECK(rejects(&s, "magic", msg, sizeof(msg)), "bad magic: %s", msg);
		s.magic = NULL;
		s.version = 1;
		CHECK(rejects(&s, "version 1", msg, sizeof(msg)), "version 1: %s", msg);
		s.version = 99;
		CHECK(rejects(&s, "version 99", msg, sizeof(msg)), "version 99: %s", msg);
		s.version = 0x03000000;
		CHECK(rejects(&s, "version", msg, sizeof(msg)), "byte-swapped version 3: %s", msg);
	}
	/* absurd counts and lengths, written raw */
	{
		wbuf		w = {0};

		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, 0);
		w_u64(&w, UINT64_C(1) << 60);
		w_key(&w, "a", GGUF_VT_UINT8);
		w_u8(&w, 1);
		CHECK(rejects_raw(&w, "kv count", msg, sizeof(msg)), "n_kv = 2^60: %s", msg);
		free(w.p);

		w = (wbuf) {0};
		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, UINT64_C(1) << 60);
		w_u64(&w, 0);
		w_u64(&w, 0);
		CHECK(rejects_raw(&w, "tensor count", msg, sizeof(msg)), "n_tensors = 2^60: %s", msg);
		free(w.p);

		w = (wbuf) {0};
		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, 0);
		w_u64(&w, 1);
		w_u64(&w, UINT64_C(1) << 60);	/* key length */
		w_bytes(&w, "abcdefgh", 8);
		CHECK(rejects_raw(&w, "length", msg, sizeof(msg)), "key length 2^60: %s", msg);
		free(w.p);

		w = (wbuf) {0};
		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, 0);
		w_u64(&w, 1);
		w_key(&w, "s", GGUF_VT_STRING);
		w_u64(&w, UINT64_MAX);	/* value length */
		w_bytes(&w, "abcdefgh", 8);
		CHECK(rejects_raw(&w, "truncated", msg, sizeof(msg)), "string value length 2^64-1: %s", msg);
		free(w.p);

		w = (wbuf) {0};
		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, 0);
		w_u64(&w, 1);
		w_key(&w, "arr", GGUF_VT_ARRAY);
		w_u32(&w, GGUF_VT_STRING);
		w_u64(&w, UINT64_C(1) << 60);
		w_str(&w, "x");
		CHECK(rejects_raw(&w, "cannot fit", msg, sizeof(msg)), "string array count 2^60: %s", msg);
		free(w.p);

		w = (wbuf) {0};
		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, 0);
		w_u64(&w, 1);
		w_key(&w, "arr", GGUF_VT_ARRAY);
		w_u32(&w, GGUF_VT_UINT64);
		w_u64(&w, UINT64_C(1) << 61);	/* 2^61 * 8 wraps to 0 in 64 bits */
		w_u64(&w, 1);
		CHECK(rejects_raw(&w, "cannot fit", msg, sizeof(msg)), "uint64 array count 2^61: %s", msg);
		free(w.p);

		w = (wbuf) {0};
		w_bytes(&w, "GGUF", 4);
		w_u32(&w, 3);
		w_u64(&w, 0);
		w_u64(&w, 1);
		w_key(&w, "arr", GGUF_VT_ARRAY);
		w_u32(&w, GGUF_VT_STRING);
		w_u64(&w, 2);
		w_u64(&w, 1);
		w_bytes(&w, "x", 1);
		w_u64(&w, UINT64_MAX - 3);	/* second element length */
		w_bytes(&w, "abc", 3);
		CHECK(rejects_raw(&w, "truncated", msg, sizeof(msg)), "string array element length ~2^64: %s", msg);
		free(w.p);
	}
	/* metadata */
	{
		fspec		s = {.tensors = default_tensors, .n_tensors = 3};

		s.kvs = KV_DUP_KEY;
		CHECK(rejects(&s, "duplicate key 'test.u32'", msg, sizeof(msg)), "duplicate key: %s", msg);
		s.kvs = KV_NESTED_ARRAY;
		CHECK(rejects(&s, "nested", msg, sizeof(msg)), "nested array: %s", msg);
		s.kvs = KV_UNKNOWN_TYPE;
		CHECK(rejects(&s, "unknown value type 13", msg, sizeof(msg)), "unknown value type: %s", msg);
		s.kvs = KV_UNKNOWN_ARRAY_TYPE;
		CHECK(rejects(&s, "unknown array element type 77", msg, sizeof(msg)), "unknown array type: %s", msg);
		s.kvs = KV_LONG_KEY;
		CHECK(rejects(&s, "exceeds the limit", msg, sizeof(msg)), "70000-byte key: %s", msg);
		s.kvs = KV_EMPTY_KEY;
		CHECK(rejects(&s, "empty key", msg, sizeof(msg)), "empty key: %s", msg);
		s.kvs = KV_ALIGN_WRONG_TYPE;
		CHECK(rejects(&s, "general.alignment", msg, sizeof(msg)), "general.alignment as uint64: %s", msg);
		s.kvs = KV_PLAIN;
		s.alignment = 48;
		CHECK(rejects(&s, "not a power of two", msg, sizeof(msg)), "general.alignment 48: %s", msg);
	}
	/* tensors */
	{
		tspec		t[3];
		fspec		s = {.tensors = t, .n_tensors = 3};

#define RESET_T() memcpy(t, default_tensors, sizeof(t))
		RESET_T();
		t[2].offset = 4096;
		s.data_extra = -(4096 + 40 - 100);	/* data ends after b.q8_0 */
		CHECK(rejects(&s, "past end of file", msg, sizeof(msg)), "tensor offset past end: %s", msg);
		s.data_extra = 0;
		RESET_T();
		s.data_extra = -1;
		CHECK(rejects(&s, "tensor 'c.q4_1': data [", msg, sizeof(msg)), "last tensor 1 byte short: %s", msg);
		s.data_extra = 0;
		RESET_T();
		t[2].offset = UINT64_MAX - 31;	/* aligned, offset + size wraps */
		CHECK(rejects(&s, "past end of file", msg, sizeof(msg)), "tensor offset near 2^64: %s", msg);
		RESET_T();
		t[1].offset = 40;
		CHECK(rejects(&s, "not a multiple of the alignment", msg, sizeof(msg)), "misaligned offset: %s", msg);
		RESET_T();
		t[1].offset = 0;
		CHECK(rejects(&s, "overlap", msg, sizeof(msg)), "overlapping tensors: %s", msg);
		RESET_T();
		t[2].offset = 64;		/* b.q8_0 is [32, 100) */
		CHECK(rejects(&s, "overlap", msg, sizeof(msg)), "partly overlapping tensors: %s", msg);
		RESET_T();
		t[1].type = 4;
		CHECK(rejects(&s, "unknown tensor type 4", msg, sizeof(msg)), "tensor type 4: %s", msg);
		RESET_T();
		t[1].type = 1000;
		CHECK(rejects(&s, "unknown tensor type 1000", msg, sizeof(msg)), "tensor type 1000: %s", msg);
		RESET_T();
		t[1].ne[0] = 33;
		CHECK(rejects(&s, "not a multiple of the Q8_0 block size 32", msg, sizeof(msg)),
			  "ne[0] = 33 for Q8_0: %s", msg);
		RESET_T();
		t[0].n_dims = 5;
		t[0].ne[2] = t[0].ne[3] = t[0].ne[4] = 1;
		CHECK(rejects(&s, "n_dims 5", msg, sizeof(msg)), "n_dims 5: %s", msg);
		RESET_T();
		t[0].n_dims = 0;
		CHECK(rejects(&s, "n_dims 0", msg, sizeof(msg)), "n_dims 0: %s", msg);
		RESET_T();
		t[0].ne[1] = 0;
		CHECK(rejects(&s, "must be > 0", msg, sizeof(msg)), "ne[1] = 0: %s", msg);
		RESET_T();
		t[0].ne[1] = -2;
		CHECK(rejects(&s, "must be > 0", msg, sizeof(msg)), "ne[1] = -2: %s", msg);
		RESET_T();
		t[0].n_dims = 4;
		t[0].ne[0] = 4;
		t[0].ne[1] = t[0].ne[2] = t[0].ne[3] = big;
		CHECK(rejects(&s, "overflows", msg, sizeof(msg)), "shape [4, 2^40, 2^40, 2^40]: %s", msg);
		RESET_T();
		t[0].n_dims = 2;
		t[0].ne[0] = INT64_C(1) << 32;
		t[0].ne[1] = INT64_C(1) << 30;	/* 2^62 elements fit, 2^64 bytes do not */
		CHECK(rejects(&s, NULL, msg, sizeof(msg)), "F32 [2^32, 2^30] (2^64 bytes): %s", msg);
		RESET_T();
		t[2].name = "a.f32";
		CHECK(rejects(&s, "duplicate tensor name 'a.f32'", msg, sizeof(msg)), "duplicate tensor name: %s", msg);
		RESET_T();
		t[2].name = "t.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
		CHECK(rejects(&s, "exceeds the limit", msg, sizeof(msg)), "tensor name of %zu bytes: %s",
			  strlen(t[2].name), msg);
		RESET_T();
		t[2].name = "";
		CHECK(rejects(&s, "empty", msg, sizeof(msg)), "empty tensor name: %s", msg);
		RESET_T();
		{
			/* a 127-byte name is the longest accepted */
			static char name127[128];
			fspec		ok = s;
			wbuf		w = {0};
			gguf_file  *f;
			uint8_t    *buf;

			memset(name127, 'n', 127);
			t[2].name = name127;
			build_file(&w, &ok);
			buf = exact_copy(w.p, w.len);
			f = gguf_open_buffer(buf, w.len, msg, sizeof(msg));
			CHECK(f != NULL && gguf_find_tensor(f, name127) != NULL, "127-byte tensor name accepted");
			gguf_close(f);
			free(buf);
			free(w.p);
		}
#undef RESET_T
	}
}

/* ---------- 4. random mutations ---------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t
rng_next(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/*
 * Walk everything an accepted file exposes; count pointers outside
 * [buf, buf+len).  Touching the bytes lets ASan flag bad reads.
 */
static size_t
walk_file(const gguf_file *f, const uint8_t *buf, size_t len, unsigned *sink)
{
	size_t		bad = 0;

#define INSIDE(p, n) ((const uint8_t *) (p) >= buf && (uint64_t) (n) <= len \
					  && (size_t) ((const uint8_t *) (p) - buf) <= len - (n))
	for (uint64_t i = 0; i < gguf_n_kv(f); i++)
	{
		const gguf_kv *kv = gguf_kv_at(f, i);
		char		key[256];
		gguf_str	s;
		int64_t		iv;
		double		dv;

		if (!INSIDE(kv->key.ptr, kv->key.len))
			bad++;
		snprintf(key, sizeof(key), "%.*s", (int) (kv->key.len < 255 ? kv->key.len : 255), kv->key.ptr);
		if (kv->key.len < 255 && gguf_find_kv(f, key) != kv)
			bad++;
		if (gguf_get_str(f, key, &s))
		{
			if (!INSIDE(s.ptr, s.len))
				bad++;
			else
				for (uint64_t j = 0; j < s.len; j++)
					*sink += (uint8_t) s.ptr[j];
		}
		(void) gguf_get_int(f, key, &iv);
		(void) gguf_get_float(f, key, &dv);
		if (kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_STRING)
		{
			for (uint64_t j = 0; j < kv->arr_n; j++)
			{
				if (!INSIDE(kv->strs[j].ptr, kv->strs[j].len))
					bad++;
				else if (kv->strs[j].len > 0)
					*sink += (uint8_t) kv->strs[j].ptr[kv->strs[j].len - 1];
			}
		}
		else if (kv->type == GGUF_VT_ARRAY)
		{
			for (uint64_t j = 0; j < kv->arr_n; j++)
				*sink += (unsigned) gguf_arr_int(kv, j) + (unsigned) gguf_arr_float(kv, j);
		}
	}
	for (uint64_t i = 0; i < gguf_n_tensors(f); i++)
	{
		const gguf_tensor *t = gguf_tensor_at(f, i);

		if (!INSIDE(t->data, t->nbytes) || t->nbytes == 0 || gguf_find_tensor(f, t->name) != t)
			bad++;
		else
			*sink += ((const uint8_t *) t->data)[0] + ((const uint8_t *) t->data)[t->nbytes - 1];
	}
#undef INSIDE
	return bad;
}

static void
test_mutations(void)
{
	fspec		s = {.tensors = default_tensors, .n_tensors = 3};
	wbuf		w = {0};
	size_t		n_ok = 0,
				n_rej = 0,
				n_bad = 0,
				n_nomsg = 0;
	unsigned	sink = 0;
	int			n_mut = getenv("GGUF_TEST_MUTATIONS") ? atoi(getenv("GGUF_TEST_MUTATIONS")) : 2000;

	build_file(&w, &s);
	for (int m = 0; m < n_mut; m++)
	{
		uint8_t    *buf = exact_copy(w.p, w.len);
		int			n_flips = 1 + (int) (rng_next() % 4);
		char		err[256];
		gguf_file  *f;

		for (int k = 0; k < n_flips; k++)
		{
			size_t		pos = rng_next() % w.len;
			uint64_t	r = rng_next();

			if (r % 8 == 0 && pos + 8 <= w.len)
			{
				/* overwrite a whole u64 with something large/odd */
				uint64_t	v = rng_next() >> (r % 64);

				memcpy(buf + pos, &v, 8);
			}
			else
				buf[pos] ^= (uint8_t) (1 + (r >> 8) % 255);
		}
		err[0] = '\0';
		f = gguf_open_buffer(buf, w.len, err, sizeof(err));
		if (f != NULL)
		{
			n_ok++;
			n_bad += walk_file(f, buf, w.len, &sink);
			gguf_close(f);
		}
		else
		{
			n_rej++;
			if (err[0] == '\0')
				n_nomsg++;
		}
		free(buf);
	}
	printf("# mutations: %zu accepted, %zu rejected (sink %u)\n", n_ok, n_rej, sink);
	CHECK(n_bad == 0 && n_nomsg == 0 && n_ok + n_rej == (size_t) n_mut && n_rej > 0,
		  "%d random mutations: no crash, %zu out-of-file pointers, %zu rejections without message",
		  n_mut, n_bad, n_nomsg);
	free(w.p);
}

/* ---------- 5. numeric arrays as integers ---------- */

static void
test_float_array_int(void)
{
	static const double d[] = {1e30, -1e30, NAN, 2.9, -2.9, 9223372036854775807.0};
	static const float fl[] = {3e38f, -0.5f};
	wbuf		w = {0};
	uint8_t    *buf;
	char		err[256] = "";
	gguf_file  *f;
	const gguf_kv *kv;

	w_bytes(&w, "GGUF", 4);
	w_u32(&w, 3);
	w_u64(&w, 0);
	w_u64(&w, 2);
	w_key(&w, "t.f64s", GGUF_VT_ARRAY);
	w_u32(&w, GGUF_VT_FLOAT64);
	w_u64(&w, 6);
	for (int i = 0; i < 6; i++)
		w_f64(&w, d[i]);
	w_key(&w, "t.f32s", GGUF_VT_ARRAY);
	w_u32(&w, GGUF_VT_FLOAT32);
	w_u64(&w, 2);
	for (int i = 0; i < 2; i++)
		w_f32(&w, fl[i]);
	buf = exact_copy(w.p, w.len);
	f = gguf_open_buffer(buf, w.len, err, sizeof(err));
	if (CHECK(f != NULL, "float arrays: file opens (%s)", f ? "ok" : err))
	{
		kv = gguf_get_arr(f, "t.f64s", GGUF_VT_FLOAT64);
		CHECK(kv && gguf_arr_int(kv, 0) == INT64_MAX && gguf_arr_int(kv, 1) == INT64_MIN
			  && gguf_arr_int(kv, 5) == INT64_MAX,
			  "float64 +-1e30 and 2^63 as int64 saturate (%lld, %lld, %lld)",
			  kv ? (long long) gguf_arr_int(kv, 0) : 0, kv ? (long long) gguf_arr_int(kv, 1) : 0,
			  kv ? (long long) gguf_arr_int(kv, 5) : 0);
		CHECK(kv && gguf_arr_int(kv, 2) == 0, "float64 NaN as int64 is 0");
		CHECK(kv && gguf_arr_int(kv, 3) == 2 && gguf_arr_int(kv, 4) == -2, "float64 2.9 / -2.9 truncate to 2 / -2");
		kv = gguf_get_arr(f, "t.f32s", GGUF_VT_FLOAT32);
		CHECK(kv && gguf_arr_int(kv, 0) == INT64_MAX && gguf_arr_int(kv, 1) == 0,
			  "float32 3e38 saturates, -0.5 truncates to 0");
		gguf_close(f);
	}
	free(buf);
	free(w.p);
}

/* ---------- 6. the real model ---------- */

/* Copy the first n bytes of src to a temp file; returns its path (static). */
static const char *
write_prefix(FILE *src, size_t n)
{
	static char path[64];
	FILE	   *out;
	char		chunk[1 << 16];
	size_t		left = n;

	snprintf(path, sizeof(path), "/tmp/test_gguf_trunc_%d.gguf", (int) getpid());
	out = fopen(path, "wb");
	if (out == NULL)
		return NULL;
	rewind(src);
	while (left > 0)
	{
		size_t		want = left < sizeof(chunk) ? left : sizeof(chunk);
		size_t		got = fread(chunk, 1, want, src);

		if (got == 0 || fwrite(chunk, 1, got, out) != got)
			break;
		left -= got;
	}
	fclose(out);
	return left == 0 ? path : NULL;
}

static void
test_real_model(void)
{
	const char *path = getenv("LLM_TEST_MODEL");
	char		err[512];
	gguf_file  *f;
	int64_t		iv;
	double		dv;
	gguf_str	sv;
	const gguf_kv *kv;
	const gguf_tensor *t;
	FILE	   *fp;
	long		size;

	if (path == NULL || path[0] == '\0')
		path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(path, R_OK) != 0)
	{
		SKIP("real model checks: %s not found (set LLM_TEST_MODEL)", path);
		return;
	}
	CHECK(gguf_open("/nonexistent/model.gguf", err, sizeof(err)) == NULL
		  && strstr(err, "cannot open") != NULL, "missing file: %s", err);
	CHECK(gguf_open("/tmp", err, sizeof(err)) == NULL && strstr(err, "not a regular file") != NULL,
		  "directory: %s", err);

	f = gguf_open(path, err, sizeof(err));
	if (!CHECK(f != NULL, "open %s (%s)", path, f ? "ok" : err))
		return;
	CHECK(gguf_version(f) == 3, "version 3");
	CHECK(gguf_get_str(f, "general.architecture", &sv) && gguf_str_eq(sv, "llama"), "architecture llama");
	CHECK(gguf_get_int(f, "llama.block_count", &iv) && iv == 30, "llama.block_count = 30");
	CHECK(gguf_get_int(f, "llama.embedding_length", &iv) && iv == 576, "llama.embedding_length = 576");
	CHECK(gguf_get_int(f, "llama.attention.head_count_kv", &iv) && iv == 3, "head_count_kv = 3");
	CHECK(gguf_get_float(f, "llama.rope.freq_base", &dv) && dv == 100000.0, "rope freq_base = 1e5");
	CHECK(gguf_get_float(f, "llama.attention.layer_norm_rms_epsilon", &dv) && dv == (double) 1e-5f,
		  "rms eps = 1e-5");
	CHECK(gguf_get_str(f, "tokenizer.ggml.model", &sv) && gguf_str_eq(sv, "gpt2"), "tokenizer model gpt2");
	CHECK(gguf_get_int(f, "tokenizer.ggml.bos_token_id", &iv) && iv == 1, "bos = 1");
	kv = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING);
	CHECK(kv != NULL && kv->arr_n == 49152 && kv->strs != NULL
		  && gguf_str_eq(kv->strs[0], "<|endoftext|>") && gguf_str_eq(kv->strs[1], "<|im_start|>"),
		  "49152 token strings, [0] = <|endoftext|>, [1] = <|im_start|>");
	kv = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING);
	CHECK(kv != NULL && kv->arr_n == 48900 && kv->strs[0].len > 0, "48900 merges");
	kv = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_INT32);
	CHECK(kv != NULL && kv->arr_n == 49152, "49152 token types");
	CHECK(gguf_n_tensors(f) == 272, "272 tensors (got %llu)", (unsigned long long) gguf_n_tensors(f));
	t = gguf_find_tensor(f, "token_embd.weight");
	CHECK(t != NULL && t->type == LLM_TYPE_Q8_0 && t->n_dims == 2 && t->ne[0] == 576 && t->ne[1] == 49152
		  && t->nbytes == (uint64_t) 49152 * 18 * 34,
		  "token_embd.weight Q8_0 [576, 49152]");
	t = gguf_find_tensor(f, "blk.0.attn_q.weight");
	CHECK(t != NULL && t->type == LLM_TYPE_Q4_1 && t->ne[0] == 576 && t->ne[1] == 576,
		  "blk.0.attn_q.weight Q4_1 [576, 576]");
	t = gguf_find_tensor(f, "output_norm.weight");
	CHECK(t != NULL && t->type == LLM_TYPE_F32 && t->n_dims == 1 && t->ne[0] == 576, "output_norm.weight F32 [576]");
	CHECK(gguf_find_tensor(f, "output.weight") == NULL, "no output.weight (tied embeddings)");
	gguf_close(f);

	/* byte flips in the real model's metadata and tensor infos */
	{
		FILE	   *in = fopen(path, "rb");
		long		n = -1;
		uint8_t    *buf = NULL;
		size_t		meta_end = 0,
					n_ok = 0,
					n_bad = 0;
		unsigned	sink = 0;
		const int	n_mut = 300;

		if (in != NULL && fseek(in, 0, SEEK_END) == 0 && (n = ftell(in)) > 0)
		{
			buf = malloc((size_t) n);
			rewind(in);
			if (buf != NULL && fread(buf, 1, (size_t) n, in) != (size_t) n)
			{
				free(buf);
				buf = NULL;
			}
		}
		if (in != NULL)
			fclose(in);
		f = buf ? gguf_open_buffer(buf, (size_t) n, err, sizeof(err)) : NULL;
		if (CHECK(f != NULL, "real model opens from a heap buffer"))
		{
			/* metadata ends where the first tensor's data begins */
			meta_end = (size_t) n;
			for (uint64_t i = 0; i < gguf_n_tensors(f); i++)
			{
				size_t		at = (size_t) ((const uint8_t *) gguf_tensor_at(f, i)->data - buf);

				if (at < meta_end)
					meta_end = at;
			}
			gguf_close(f);
			for (int m = 0; m < n_mut; m++)
			{
				size_t		pos[4];
				uint8_t		old[4];
				int			k = 1 + (int) (rng_next() % 4);

				for (int j = 0; j < k; j++)
				{
					pos[j] = rng_next() % meta_end;
					old[j] = buf[pos[j]];
					buf[pos[j]] ^= (uint8_t) (1 + rng_next() % 255);
				}
				f = gguf_open_buffer(buf, (size_t) n, err, sizeof(err));
				if (f != NULL)
				{
					n_ok++;
					n_bad += walk_file(f, buf, (size_t) n, &sink);
					gguf_close(f);
				}
				for (int j = k - 1; j >= 0; j--)
					buf[pos[j]] = old[j];
			}
			printf("# real-model mutations in the first %zu bytes: %zu accepted (sink %u)\n",
				   meta_end, n_ok, sink);
			CHECK(n_bad == 0, "%d metadata mutations of the real model: no crash, %zu out-of-file pointers",
				  n_mut, n_bad);
		}
		free(buf);
	}

	/* truncated copies must fail cleanly */
	fp = fopen(path, "rb");
	if (!CHECK(fp != NULL, "reopen model for truncation tests"))
		return;
	fseek(fp, 0, SEEK_END);
	size = ftell(fp);
	{
		size_t		cuts[] = {1 << 20, 16, 24, 4096, (size_t) size / 2, (size_t) size - 1};

		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		{
			const char *tmp = write_prefix(fp, cuts[i]);

			if (!CHECK(tmp != NULL, "write %zu-byte prefix to /tmp", cuts[i]))
				continue;
			f = gguf_open(tmp, err, sizeof(err));
			CHECK(f == NULL && err[0] != '\0', "model truncated to %zu bytes rejected: %s", cuts[i], err);
			gguf_close(f);
			unlink(tmp);
		}
	}
	fclose(fp);
}

int
main(void)
{
	test_quant_types();
	test_small_valid();
	test_truncations();
	test_malformed();
	test_mutations();
	test_float_array_int();
	test_real_model();
	return unit_done();
}
