/*
 * gguf.h — read-only, validated view of a GGUF v3 model file.
 *
 * Follows the GGUF specification (ggml/docs/gguf.md): header, key/value
 * metadata, tensor infos, aligned tensor data (general.alignment, default 32).
 * The file is mmap'ed; every count, length, offset, type and size is checked
 * against the file size before use, so a malformed file yields NULL plus a
 * message, never a crash or an out-of-bounds read.  No PostgreSQL headers.
 */
#ifndef LLM_GGUF_H
#define LLM_GGUF_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

typedef enum gguf_value_type
{
	GGUF_VT_UINT8 = 0,
	GGUF_VT_INT8 = 1,
	GGUF_VT_UINT16 = 2,
	GGUF_VT_INT16 = 3,
	GGUF_VT_UINT32 = 4,
	GGUF_VT_INT32 = 5,
	GGUF_VT_FLOAT32 = 6,
	GGUF_VT_BOOL = 7,
	GGUF_VT_STRING = 8,
	GGUF_VT_ARRAY = 9,
	GGUF_VT_UINT64 = 10,
	GGUF_VT_INT64 = 11,
	GGUF_VT_FLOAT64 = 12
} gguf_value_type;

/* A string inside the mapped file: NOT NUL-terminated. */
typedef struct gguf_str
{
	const char *ptr;
	uint64_t	len;
} gguf_str;

typedef struct gguf_kv
{
	gguf_str	key;
	gguf_value_type type;
	/* for GGUF_VT_ARRAY: element type and count; arrays of arrays are rejected */
	gguf_value_type arr_type;
	uint64_t	arr_n;
	/* the value (scalar) or first array element, inside the map */
	const uint8_t *data;
	/* for string arrays: arr_n entries, built at open time */
	gguf_str   *strs;
} gguf_kv;

#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor
{
	char		name[128];		/* NUL-terminated copy; longer names are rejected */
	uint32_t	n_dims;
	int64_t		ne[GGUF_MAX_DIMS];	/* ne[0] = elements per row (innermost); unused dims = 1 */
	uint32_t	type;			/* llm_type id (kernels/quant_types.h) */
	uint64_t	offset;			/* relative to the data section */
	uint64_t	nbytes;			/* validated: rows * llm_type_row_bytes(type, ne[0]) */
	const void *data;			/* inside the map */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/*
 * Open and validate path.  Returns NULL and writes a message into err
 * (errlen bytes, always NUL-terminated) on any failure: missing file, bad
 * magic, version other than 2/3, truncated data, counts beyond what the file
 * can hold, unknown value or tensor types, duplicate keys/tensor names,
 * misaligned or overlapping tensor data, data past the end of the file.
 */
gguf_file  *gguf_open(const char *path, char *err, size_t errlen);

/* Same over a caller-owned buffer (kept alive until gguf_close); for tests. */
gguf_file  *gguf_open_buffer(const void *buf, size_t len, char *err, size_t errlen);

void		gguf_close(gguf_file *f);

uint32_t	gguf_version(const gguf_file *f);
uint64_t	gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);

/*
 * Typed lookups: false when the key is absent or has an incompatible type.
 * gguf_get_int accepts any integer type (and bool); gguf_get_float any
 * float or integer type.
 */
bool		gguf_get_int(const gguf_file *f, const char *key, int64_t *out);
bool		gguf_get_float(const gguf_file *f, const char *key, double *out);
bool		gguf_get_bool(const gguf_file *f, const char *key, bool *out);
bool		gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Array of strings (kv->strs) or of numbers; NULL if absent or other type. */
const gguf_kv *gguf_get_arr(const gguf_file *f, const char *key, gguf_value_type elem_type);
/* Element i of a numeric array kv as int64/double (caller checks i < arr_n). */
int64_t		gguf_arr_int(const gguf_kv *kv, uint64_t i);	/* floats saturated, NaN 0 */
double		gguf_arr_float(const gguf_kv *kv, uint64_t i);

uint64_t	gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* True when s equals the NUL-terminated lit. */
bool		gguf_str_eq(gguf_str s, const char *lit);

#endif
