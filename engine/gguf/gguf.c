/*
 * gguf.c — validating GGUF v2/v3 reader (see gguf.h).
 *
 * Layout (GGUF specification, ggml/docs/gguf.md; behaviour cross-checked
 * against ggml/src/gguf.cpp): little-endian
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x { string key, u32 type, value },
 *   n_tensors x { string name, u32 n_dims, n_dims x i64 ne, u32 type, u64 offset },
 *   padding to general.alignment (u32, default 32), tensor data.
 * A string is u64 length + bytes (no NUL).  v2 has the same layout as v3;
 * v1 (32-bit counts) is rejected.
 *
 * Every read goes through a cursor that checks "n <= size - pos" before
 * touching memory, and every count is compared with the minimum number of
 * bytes its items need in the remaining file before anything is allocated,
 * so a hostile header cannot make us read out of bounds or allocate
 * unbounded memory.  Keys and tensor names are indexed by open-addressing
 * hash tables (duplicate detection + O(1) lookups).
 */
#include "gguf.h"
#include "engine/util/hash.h"
#include "engine/util/text_util.h"
#include "kernels/quant_types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian values with memcpy; big-endian hosts are not supported"
#endif

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_KEY_LEN 65535	/* spec: keys are at most 2^16-1 bytes */
#define GGUF_MAX_TENSOR_NAME ((int) sizeof(((gguf_tensor *) 0)->name) - 1)

/* Smallest serialized sizes, used to bound counts before allocating. */
#define MIN_KV_BYTES (8 + 4 + 1)	/* empty-ish key len, type, 1-byte value */
#define MIN_TENSOR_INFO_BYTES (8 + 4 + 8 + 4 + 8)	/* name len, n_dims, 1 dim, type, offset */

struct gguf_file
{
	const uint8_t *base;
	size_t		size;
	bool		mapped;			/* base is our mmap (munmap on close) */
	uint32_t	version;
	uint64_t	alignment;
	uint64_t	data_offset;	/* start of the tensor data section */

	uint64_t	n_kv;
	gguf_kv    *kvs;
	uint64_t	n_tensors;
	gguf_tensor *tensors;

	/* open-addressing hash tables of indices+1 (0 = empty); size power of 2 */
	llm_hash_index kv_index;	/* kvs by FNV-1a 64 of the key */
	llm_hash_index tensor_index;	/* tensors by FNV-1a 64 of the name */
};

/* Bounds-checked reader over [base, base+size). */
typedef struct reader
{
	const uint8_t *base;
	size_t		size;
	size_t		pos;
	char	   *err;
	size_t		errlen;
} reader;

static inline size_t
reader_left(const reader *r)
{
	return r->size - r->pos;
}

/* Point *out at the next n bytes and advance; false (with message) if short. */
static bool
read_span(reader *r, uint64_t n, const uint8_t **out, const char *what)
{
	if (n > reader_left(r))
	{
		llm_set_err(r->err, r->errlen,
				"gguf: truncated file: %s needs %llu bytes at offset %zu but only %zu remain (file size %zu)",
				what, (unsigned long long) n, r->pos, reader_left(r), r->size);
		return false;
	}
	*out = r->base + r->pos;
	r->pos += (size_t) n;
	return true;
}

static bool
read_u32(reader *r, uint32_t *v, const char *what)
{
	const uint8_t *p;

	if (!read_span(r, 4, &p, what))
		return false;
	memcpy(v, p, 4);
	return true;
}

static bool
read_u64(reader *r, uint64_t *v, const char *what)
{
	const uint8_t *p;

	if (!read_span(r, 8, &p, what))
		return false;
	memcpy(v, p, 8);
	return true;
}

/* Read a GGUF string (u64 length + bytes), length limited to max_len. */
static bool
read_str(reader *r, gguf_str *s, uint64_t max_len, const char *what)
{
	uint64_t	len;
	const uint8_t *p;
	size_t		at = r->pos;

	if (!read_u64(r, &len, what))
		return false;
	if (len > max_len)
	{
		llm_set_err(r->err, r->errlen, "gguf: %s at offset %zu: length %llu exceeds the limit %llu",
				what, at, (unsigned long long) len, (unsigned long long) max_len);
		return false;
	}
	if (!read_span(r, len, &p, what))
		return false;
	s->ptr = (const char *) p;
	s->len = len;
	return true;
}

/* Serialized size of one scalar of type t, 0 for string/array/unknown. */
static size_t
scalar_size(uint32_t t)
{
	switch (t)
	{
		case GGUF_VT_UINT8:
		case GGUF_VT_INT8:
		case GGUF_VT_BOOL:
			return 1;
		case GGUF_VT_UINT16:
		case GGUF_VT_INT16:
			return 2;
		case GGUF_VT_UINT32:
		case GGUF_VT_INT32:
		case GGUF_VT_FLOAT32:
			return 4;
		case GGUF_VT_UINT64:
		case GGUF_VT_INT64:
		case GGUF_VT_FLOAT64:
			return 8;
		default:
			return 0;
	}
}

/* Key lookups in kv_index: a key of len bytes (not NUL-terminated). */
typedef struct key_ref
{
	const char *p;
	size_t		len;
} key_ref;

static bool
kv_key_eq(const void *ctx, uint32_t id, const void *key)
{
	const gguf_str *o = &((const gguf_file *) ctx)->kvs[id].key;
	const key_ref *k = key;

	return o->len == k->len && memcmp(o->ptr, k->p, k->len) == 0;
}

static bool
tensor_name_eq(const void *ctx, uint32_t id, const void *key)
{
	return strcmp(((const gguf_file *) ctx)->tensors[id].name, (const char *) key) == 0;
}

/* Printable prefix of a key for messages (keys are not NUL-terminated). */
static int
msg_len(uint64_t len)
{
	return len > 80 ? 80 : (int) len;
}

/*
 * Read one kv (key, type, value) at r; arrays of strings get kv->strs.
 */
static bool
read_kv(reader *r, uint64_t i, gguf_kv *kv)
{
	uint32_t	type;
	const uint8_t *p;
	char		what[64];

	snprintf(what, sizeof(what), "key of kv %llu", (unsigned long long) i);
	if (!read_str(r, &kv->key, GGUF_MAX_KEY_LEN, what))
		return false;
	if (kv->key.len == 0)
	{
		llm_set_err(r->err, r->errlen, "gguf: kv %llu has an empty key", (unsigned long long) i);
		return false;
	}
	if (memchr(kv->key.ptr, '\0', kv->key.len) != NULL)
	{
		llm_set_err(r->err, r->errlen, "gguf: kv %llu: key contains a NUL byte", (unsigned long long) i);
		return false;
	}
	if (!read_u32(r, &type, "kv value type"))
		return false;
	if (type > GGUF_VT_FLOAT64)
	{
		llm_set_err(r->err, r->errlen, "gguf: key '%.*s': unknown value type %u",
				msg_len(kv->key.len), kv->key.ptr, type);
		return false;
	}
	kv->type = (gguf_value_type) type;
	kv->data = r->base + r->pos;

	if (type == GGUF_VT_STRING)
	{
		gguf_str	s;

		return read_str(r, &s, UINT64_MAX, "string value");
	}
	if (type != GGUF_VT_ARRAY)
		return read_span(r, scalar_size(type), &p, "scalar value");

	/* array: element type, count, elements */
	{
		uint32_t	et;
		uint64_t	n;

		if (!read_u32(r, &et, "array element type") || !read_u64(r, &n, "array length"))
			return false;
		if (et == GGUF_VT_ARRAY)
		{
			llm_set_err(r->err, r->errlen, "gguf: key '%.*s': nested arrays are not supported",
					msg_len(kv->key.len), kv->key.ptr);
			return false;
		}
		if (et > GGUF_VT_FLOAT64)
		{
			llm_set_err(r->err, r->errlen, "gguf: key '%.*s': unknown array element type %u",
					msg_len(kv->key.len), kv->key.ptr, et);
			return false;
		}
		kv->arr_type = (gguf_value_type) et;
		kv->arr_n = n;
		kv->data = r->base + r->pos;

		if (et == GGUF_VT_STRING)
		{
			/* each string needs at least its 8-byte length */
			if (n > reader_left(r) / 8)
			{
				llm_set_err(r->err, r->errlen,
						"gguf: key '%.*s': string array length %llu cannot fit in the %zu bytes left",
						msg_len(kv->key.len), kv->key.ptr, (unsigned long long) n, reader_left(r));
				return false;
			}
			kv->strs = malloc((size_t) (n ? n : 1) * sizeof(gguf_str));
			if (kv->strs == NULL)
			{
				llm_set_err(r->err, r->errlen, "gguf: out of memory for %llu strings",
						(unsigned long long) n);
				return false;
			}
			for (uint64_t j = 0; j < n; j++)
			{
				uint64_t	len;

				/* inlined read_str: this loop runs ~100k times for a vocab */
				if (reader_left(r) < 8)
					return read_str(r, &kv->strs[j], UINT64_MAX, "string array element");
				memcpy(&len, r->base + r->pos, 8);
				if (len > reader_left(r) - 8)
					return read_str(r, &kv->strs[j], UINT64_MAX, "string array element");
				kv->strs[j].ptr = (const char *) r->base + r->pos + 8;
				kv->strs[j].len = len;
				r->pos += 8 + (size_t) len;
			}
			return true;
		}
		else
		{
			size_t		es = scalar_size(et);

			if (n > reader_left(r) / es)
			{
				llm_set_err(r->err, r->errlen,
						"gguf: key '%.*s': array of %llu x %zu-byte elements cannot fit in the %zu bytes left",
						msg_len(kv->key.len), kv->key.ptr, (unsigned long long) n, es, reader_left(r));
				return false;
			}
			return read_span(r, n * es, &p, "array data");
		}
	}
}

/* Read one tensor info; validates shape, type and size (not offsets). */
static bool
read_tensor_info(reader *r, uint64_t i, gguf_tensor *t)
{
	gguf_str	name;
	uint32_t	n_dims;
	uint64_t	offset;
	int64_t		rows = 1;
	const llm_type_info *ti;
	size_t		row_bytes;
	char		what[64];

	snprintf(what, sizeof(what), "name of tensor %llu", (unsigned long long) i);
	if (!read_str(r, &name, GGUF_MAX_TENSOR_NAME, what))
		return false;
	if (name.len == 0 || memchr(name.ptr, '\0', name.len) != NULL)
	{
		llm_set_err(r->err, r->errlen, "gguf: tensor %llu: name is empty or contains a NUL byte",
				(unsigned long long) i);
		return false;
	}
	memcpy(t->name, name.ptr, name.len);
	t->name[name.len] = '\0';

	if (!read_u32(r, &n_dims, "tensor n_dims"))
		return false;
	if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
	{
		llm_set_err(r->err, r->errlen, "gguf: tensor '%s': n_dims %u not in 1..%d",
				t->name, n_dims, GGUF_MAX_DIMS);
		return false;
	}
	t->n_dims = n_dims;
	for (int d = 0; d < GGUF_MAX_DIMS; d++)
		t->ne[d] = 1;
	for (uint32_t d = 0; d < n_dims; d++)
	{
		uint64_t	v;

		if (!read_u64(r, &v, "tensor dimension"))
			return false;
		if (v == 0 || v > (uint64_t) INT64_MAX)
		{
			llm_set_err(r->err, r->errlen, "gguf: tensor '%s': dimension %u is %lld (must be > 0)",
					t->name, d, (long long) (int64_t) v);
			return false;
		}
		t->ne[d] = (int64_t) v;
	}
	/* total element count must fit in int64 */
	{
		int64_t		total = 1;

		for (int d = 0; d < GGUF_MAX_DIMS; d++)
		{
			if (t->ne[d] > INT64_MAX / total)
			{
				llm_set_err(r->err, r->errlen,
						"gguf: tensor '%s': shape [%lld, %lld, %lld, %lld] overflows int64",
						t->name, (long long) t->ne[0], (long long) t->ne[1],
						(long long) t->ne[2], (long long) t->ne[3]);
				return false;
			}
			total *= t->ne[d];
		}
	}
	if (!read_u32(r, &t->type, "tensor type") || !read_u64(r, &offset, "tensor offset"))
		return false;
	t->offset = offset;

	ti = llm_type_get(t->type);
	if (ti == NULL)
	{
		llm_set_err(r->err, r->errlen, "gguf: tensor '%s': unknown tensor type %u", t->name, t->type);
		return false;
	}
	row_bytes = llm_type_row_bytes(t->type, t->ne[0]);
	if (row_bytes == 0)
	{
		llm_set_err(r->err, r->errlen,
				"gguf: tensor '%s': ne[0] = %lld is not a multiple of the %s block size %d",
				t->name, (long long) t->ne[0], ti->name, ti->block_elems);
		return false;
	}
	rows = t->ne[1] * t->ne[2] * t->ne[3];	/* cannot overflow: checked above */
	if ((uint64_t) rows > UINT64_MAX / row_bytes)
	{
		llm_set_err(r->err, r->errlen, "gguf: tensor '%s': byte size overflows", t->name);
		return false;
	}
	t->nbytes = (uint64_t) rows * row_bytes;
	return true;
}

static int
cmp_tensor_offset(const void *a, const void *b)
{
	const gguf_tensor *x = *(const gguf_tensor *const *) a;
	const gguf_tensor *y = *(const gguf_tensor *const *) b;

	return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* Build the key index; false on duplicate key. */
static bool
index_keys(gguf_file *f, char *err, size_t errlen)
{
	if (!llm_hash_index_init(&f->kv_index, f->n_kv, 16))
	{
		llm_set_err(err, errlen, "gguf: out of memory");
		return false;
	}
	for (uint64_t i = 0; i < f->n_kv; i++)
	{
		const gguf_str *k = &f->kvs[i].key;
		key_ref		ref = {k->ptr, k->len};
		uint32_t   *slot = llm_hash_index_slot(&f->kv_index, llm_fnv1a64(k->ptr, k->len), kv_key_eq, f, &ref);

		if (*slot != 0)
		{
			llm_set_err(err, errlen, "gguf: duplicate key '%.*s' (kv %llu)",
					msg_len(k->len), k->ptr, (unsigned long long) i);
			return false;
		}
		*slot = (uint32_t) (i + 1);
	}
	return true;
}

/* Build the tensor-name index; false on duplicate name. */
static bool
index_tensors(gguf_file *f, char *err, size_t errlen)
{
	if (!llm_hash_index_init(&f->tensor_index, f->n_tensors, 16))
	{
		llm_set_err(err, errlen, "gguf: out of memory");
		return false;
	}
	for (uint64_t i = 0; i < f->n_tensors; i++)
	{
		const char *name = f->tensors[i].name;
		uint32_t   *slot = llm_hash_index_slot(&f->tensor_index, llm_fnv1a64(name, strlen(name)),
											   tensor_name_eq, f, name);

		if (*slot != 0)
		{
			llm_set_err(err, errlen, "gguf: duplicate tensor name '%s' (tensor %llu)",
					name, (unsigned long long) i);
			return false;
		}
		*slot = (uint32_t) (i + 1);
	}
	return true;
}

/* Check tensor offsets against alignment, file size and each other. */
static bool
place_tensors(gguf_file *f, char *err, size_t errlen)
{
	uint64_t	data_size = f->size - f->data_offset;
	const gguf_tensor **sorted;

	for (uint64_t i = 0; i < f->n_tensors; i++)
	{
		gguf_tensor *t = &f->tensors[i];

		if (t->offset % f->alignment != 0)
		{
			llm_set_err(err, errlen, "gguf: tensor '%s': offset %llu is not a multiple of the alignment %llu",
					t->name, (unsigned long long) t->offset, (unsigned long long) f->alignment);
			return false;
		}
		if (t->offset > data_size || t->nbytes > data_size - t->offset)
		{
			/* report absolute file offsets unless their sum would wrap */
			if (t->nbytes > UINT64_MAX - f->data_offset
				|| t->offset > UINT64_MAX - f->data_offset - t->nbytes)
				llm_set_err(err, errlen,
						"gguf: tensor '%s': data at offset %llu + %llu bytes past end of file (size %zu)",
						t->name, (unsigned long long) t->offset,
						(unsigned long long) t->nbytes, f->size);
			else
				llm_set_err(err, errlen,
						"gguf: tensor '%s': data [%llu, %llu) past end of file (size %zu)",
						t->name, (unsigned long long) (f->data_offset + t->offset),
						(unsigned long long) (f->data_offset + t->offset + t->nbytes), f->size);
			return false;
		}
		t->data = f->base + f->data_offset + t->offset;
	}

	if (f->n_tensors < 2)
		return true;
	sorted = malloc(f->n_tensors * sizeof(*sorted));
	if (sorted == NULL)
	{
		llm_set_err(err, errlen, "gguf: out of memory");
		return false;
	}
	for (uint64_t i = 0; i < f->n_tensors; i++)
		sorted[i] = &f->tensors[i];
	qsort(sorted, f->n_tensors, sizeof(*sorted), cmp_tensor_offset);
	for (uint64_t i = 1; i < f->n_tensors; i++)
	{
		const gguf_tensor *a = sorted[i - 1];
		const gguf_tensor *b = sorted[i];

		/* a->offset + a->nbytes <= data_size: no overflow */
		if (a->offset + a->nbytes > b->offset)
		{
			llm_set_err(err, errlen,
					"gguf: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
					a->name, (unsigned long long) a->offset,
					(unsigned long long) (a->offset + a->nbytes),
					b->name, (unsigned long long) b->offset,
					(unsigned long long) (b->offset + b->nbytes));
			free(sorted);
			return false;
		}
	}
	free(sorted);
	return true;
}

/* Parse and validate f->base[0..size); fills f.  False + message on error. */
static bool
parse(gguf_file *f, char *err, size_t errlen)
{
	reader		r = {f->base, f->size, 0, err, errlen};
	const uint8_t *magic;
	uint64_t	n_tensors,
				n_kv;
	const gguf_kv *akv;

	if (!read_span(&r, 4, &magic, "magic"))
		return false;
	if (memcmp(magic, "GGUF", 4) != 0)
	{
		llm_set_err(err, errlen, "gguf: bad magic %02x %02x %02x %02x (expected \"GGUF\")",
				magic[0], magic[1], magic[2], magic[3]);
		return false;
	}
	if (!read_u32(&r, &f->version, "version"))
		return false;
	if (f->version != 2 && f->version != 3)
	{
		llm_set_err(err, errlen, "gguf: unsupported version %u (only 2 and 3 are supported%s)",
				f->version,
				(f->version & 0xFFFF) == 0 ? "; big-endian file?" : "");
		return false;
	}
	if (!read_u64(&r, &n_tensors, "tensor count") || !read_u64(&r, &n_kv, "kv count"))
		return false;
	if (n_kv > reader_left(&r) / MIN_KV_BYTES || n_kv >= UINT32_MAX)
	{
		llm_set_err(err, errlen, "gguf: kv count %llu cannot fit in the %zu bytes left (file size %zu)",
				(unsigned long long) n_kv, reader_left(&r), f->size);
		return false;
	}
	if (n_tensors > reader_left(&r) / MIN_TENSOR_INFO_BYTES || n_tensors >= UINT32_MAX)
	{
		llm_set_err(err, errlen, "gguf: tensor count %llu cannot fit in the %zu bytes left (file size %zu)",
				(unsigned long long) n_tensors, reader_left(&r), f->size);
		return false;
	}

	f->kvs = calloc(n_kv ? n_kv : 1, sizeof(gguf_kv));
	if (f->kvs == NULL)
	{
		llm_set_err(err, errlen, "gguf: out of memory for %llu kvs", (unsigned long long) n_kv);
		return false;
	}
	for (uint64_t i = 0; i < n_kv; i++)
	{
		f->n_kv = i + 1;		/* so gguf_close frees kvs[i].strs */
		if (!read_kv(&r, i, &f->kvs[i]))
			return false;
	}
	if (!index_keys(f, err, errlen))
		return false;

	/* alignment: spec says u32, power of two */
	f->alignment = GGUF_DEFAULT_ALIGNMENT;
	akv = gguf_find_kv(f, "general.alignment");
	if (akv != NULL)
	{
		uint32_t	a;

		if (akv->type != GGUF_VT_UINT32)
		{
			llm_set_err(err, errlen, "gguf: general.alignment has value type %d, expected uint32 (4)",
					(int) akv->type);
			return false;
		}
		memcpy(&a, akv->data, 4);
		if (a == 0 || (a & (a - 1)) != 0)
		{
			llm_set_err(err, errlen, "gguf: general.alignment %u is not a power of two", a);
			return false;
		}
		f->alignment = a;
	}

	/* tensor infos may be fewer bytes now; recheck the count bound */
	if (n_tensors > reader_left(&r) / MIN_TENSOR_INFO_BYTES)
	{
		llm_set_err(err, errlen, "gguf: tensor count %llu cannot fit in the %zu bytes left (file size %zu)",
				(unsigned long long) n_tensors, reader_left(&r), f->size);
		return false;
	}
	f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof(gguf_tensor));
	if (f->tensors == NULL)
	{
		llm_set_err(err, errlen, "gguf: out of memory for %llu tensors", (unsigned long long) n_tensors);
		return false;
	}
	f->n_tensors = n_tensors;
	for (uint64_t i = 0; i < n_tensors; i++)
		if (!read_tensor_info(&r, i, &f->tensors[i]))
			return false;
	if (!index_tensors(f, err, errlen))
		return false;

	/* data section starts at the next multiple of the alignment */
	{
		uint64_t	pad = (f->alignment - r.pos % f->alignment) % f->alignment;

		f->data_offset = (uint64_t) r.pos + pad;
		if (f->data_offset > f->size)
		{
			if (n_tensors == 0)
				f->data_offset = f->size;	/* no data: padding is optional */
			else
			{
				llm_set_err(err, errlen,
						"gguf: tensor data section starts at %llu, past end of file (size %zu)",
						(unsigned long long) f->data_offset, f->size);
				return false;
			}
		}
	}
	return place_tensors(f, err, errlen);
}

/*
 * Validate buf[0..len) as a GGUF file; shared by both open functions.
 * On failure releases everything except the mapping (the caller's).
 */
static gguf_file *
open_common(const uint8_t *buf, size_t len, bool mapped, char *err, size_t errlen)
{
	gguf_file  *f = calloc(1, sizeof(gguf_file));

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (f == NULL)
	{
		llm_set_err(err, errlen, "gguf: out of memory");
		return NULL;
	}
	f->base = buf;
	f->size = len;
	f->mapped = false;
	if (!parse(f, err, errlen))
	{
		if (err != NULL && errlen > 0 && err[0] == '\0')
			llm_set_err(err, errlen, "gguf: invalid file");
		gguf_close(f);
		return NULL;
	}
	f->mapped = mapped;
	return f;
}

/*
 * Map path read-only and validate it (see gguf.h).  Errors: open/stat/mmap
 * failures (with strerror), not a regular file, and everything parse()
 * rejects; the message is prefixed with the path.
 */
gguf_file *
gguf_open(const char *path, char *err, size_t errlen)
{
	int			fd;
	struct stat st;
	void	   *map;
	gguf_file  *f;
	char		msg[512];

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
	{
		llm_set_err(err, errlen, "gguf: cannot open \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0)
	{
		llm_set_err(err, errlen, "gguf: cannot stat \"%s\": %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode))
	{
		llm_set_err(err, errlen, "gguf: \"%s\" is not a regular file", path);
		close(fd);
		return NULL;
	}
	if (st.st_size < 8)
	{
		llm_set_err(err, errlen, "gguf: \"%s\" is too small (%lld bytes) to be a GGUF file",
				path, (long long) st.st_size);
		close(fd);
		return NULL;
	}
	map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
	{
		llm_set_err(err, errlen, "gguf: cannot mmap \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	f = open_common(map, (size_t) st.st_size, true, msg, sizeof(msg));
	if (f == NULL)
	{
		llm_set_err(err, errlen, "%s (file \"%s\")", msg, path);
		munmap(map, (size_t) st.st_size);
		return NULL;
	}
	return f;
}

/* Validate a caller-owned buffer (kept alive until gguf_close). */
gguf_file *
gguf_open_buffer(const void *buf, size_t len, char *err, size_t errlen)
{
	if (buf == NULL && len > 0)
	{
		llm_set_err(err, errlen, "gguf: NULL buffer");
		return NULL;
	}
	return open_common(buf, len, false, err, errlen);
}

/* Free everything; unmap when gguf_open mapped the file.  NULL is a no-op. */
void
gguf_close(gguf_file *f)
{
	if (f == NULL)
		return;
	if (f->kvs != NULL)
	{
		for (uint64_t i = 0; i < f->n_kv; i++)
			free(f->kvs[i].strs);
		free(f->kvs);
	}
	free(f->tensors);
	llm_hash_index_free(&f->kv_index);
	llm_hash_index_free(&f->tensor_index);
	if (f->mapped)
		munmap((void *) f->base, f->size);
	free(f);
}

uint32_t
gguf_version(const gguf_file *f)
{
	return f->version;
}

uint64_t
gguf_n_kv(const gguf_file *f)
{
	return f->n_kv;
}

/* kv i, or NULL when i >= n_kv. */
const gguf_kv *
gguf_kv_at(const gguf_file *f, uint64_t i)
{
	return i < f->n_kv ? &f->kvs[i] : NULL;
}

/* kv named key (exact byte match), or NULL. */
const gguf_kv *
gguf_find_kv(const gguf_file *f, const char *key)
{
	key_ref		ref;
	int64_t		id;

	if (f->kv_index.slots == NULL || key == NULL)
		return NULL;
	ref.p = key;
	ref.len = strlen(key);
	id = llm_hash_index_find(&f->kv_index, llm_fnv1a64(key, ref.len), kv_key_eq, f, &ref);
	return id < 0 ? NULL : &f->kvs[id];
}

/* Value of a numeric scalar of type t at p as int64; false for non-integers. */
static bool
load_int(gguf_value_type t, const uint8_t *p, int64_t *out)
{
	switch (t)
	{
		case GGUF_VT_UINT8:
		case GGUF_VT_BOOL:
			*out = *p;
			return true;
		case GGUF_VT_INT8:
			*out = (int8_t) *p;
			return true;
		case GGUF_VT_UINT16:
			{
				uint16_t	v;

				memcpy(&v, p, 2);
				*out = v;
				return true;
			}
		case GGUF_VT_INT16:
			{
				int16_t		v;

				memcpy(&v, p, 2);
				*out = v;
				return true;
			}
		case GGUF_VT_UINT32:
			{
				uint32_t	v;

				memcpy(&v, p, 4);
				*out = v;
				return true;
			}
		case GGUF_VT_INT32:
			{
				int32_t		v;

				memcpy(&v, p, 4);
				*out = v;
				return true;
			}
		case GGUF_VT_UINT64:
			{
				uint64_t	v;

				memcpy(&v, p, 8);
				if (v > (uint64_t) INT64_MAX)
					return false;
				*out = (int64_t) v;
				return true;
			}
		case GGUF_VT_INT64:
			memcpy(out, p, 8);
			return true;
		default:
			return false;
	}
}

/* Value of a numeric scalar of type t at p as double; false for non-numbers. */
static bool
load_float(gguf_value_type t, const uint8_t *p, double *out)
{
	int64_t		iv;

	if (t == GGUF_VT_FLOAT32)
	{
		float		v;

		memcpy(&v, p, 4);
		*out = v;
		return true;
	}
	if (t == GGUF_VT_FLOAT64)
	{
		memcpy(out, p, 8);
		return true;
	}
	if (t == GGUF_VT_UINT64)
	{
		uint64_t	v;

		memcpy(&v, p, 8);
		*out = (double) v;
		return true;
	}
	if (t != GGUF_VT_BOOL && load_int(t, p, &iv))
	{
		*out = (double) iv;
		return true;
	}
	return false;
}

/* Integer (or bool) scalar; uint64 values above INT64_MAX are refused. */
bool
gguf_get_int(const gguf_file *f, const char *key, int64_t *out)
{
	const gguf_kv *kv = gguf_find_kv(f, key);

	return kv != NULL && load_int(kv->type, kv->data, out);
}

/* Float or integer scalar as double. */
bool
gguf_get_float(const gguf_file *f, const char *key, double *out)
{
	const gguf_kv *kv = gguf_find_kv(f, key);

	return kv != NULL && load_float(kv->type, kv->data, out);
}

/* Bool scalar (any non-zero byte is true). */
bool
gguf_get_bool(const gguf_file *f, const char *key, bool *out)
{
	const gguf_kv *kv = gguf_find_kv(f, key);

	if (kv == NULL || kv->type != GGUF_VT_BOOL)
		return false;
	*out = kv->data[0] != 0;
	return true;
}

/* String scalar (kv->data points at its serialized u64 length + bytes). */
bool
gguf_get_str(const gguf_file *f, const char *key, gguf_str *out)
{
	const gguf_kv *kv = gguf_find_kv(f, key);

	if (kv == NULL || kv->type != GGUF_VT_STRING)
		return false;
	memcpy(&out->len, kv->data, 8);
	out->ptr = (const char *) kv->data + 8;
	return true;
}

/* Array kv whose elements have elem_type, or NULL. */
const gguf_kv *
gguf_get_arr(const gguf_file *f, const char *key, gguf_value_type elem_type)
{
	const gguf_kv *kv = gguf_find_kv(f, key);

	if (kv == NULL || kv->type != GGUF_VT_ARRAY || kv->arr_type != elem_type)
		return NULL;
	return kv;
}

/*
 * Element i of a numeric array as int64 (floats truncated toward zero and
 * saturated to the int64 range, NaN 0: the file's values are untrusted and
 * an out-of-range conversion is undefined; 0 for strings).
 */
int64_t
gguf_arr_int(const gguf_kv *kv, uint64_t i)
{
	size_t		es = scalar_size(kv->arr_type);
	int64_t		iv;
	double		dv;

	if (kv->type != GGUF_VT_ARRAY || es == 0 || i >= kv->arr_n)
		return 0;
	if (load_int(kv->arr_type, kv->data + i * es, &iv))
		return iv;
	if (load_float(kv->arr_type, kv->data + i * es, &dv))
	{
		if (dv != dv)
			return 0;
		if (dv >= 9223372036854775807.0)
			return INT64_MAX;
		if (dv <= -9223372036854775808.0)
			return INT64_MIN;
		return (int64_t) dv;
	}
	return 0;
}

/* Element i of a numeric array as double (0 for strings). */
double
gguf_arr_float(const gguf_kv *kv, uint64_t i)
{
	size_t		es = scalar_size(kv->arr_type);
	double		dv;

	if (kv->type != GGUF_VT_ARRAY || es == 0 || i >= kv->arr_n)
		return 0;
	if (load_float(kv->arr_type, kv->data + i * es, &dv))
		return dv;
	if (kv->arr_type == GGUF_VT_BOOL)
		return kv->data[i] != 0;
	return 0;
}

uint64_t
gguf_n_tensors(const gguf_file *f)
{
	return f->n_tensors;
}

/* Tensor i, or NULL when i >= n_tensors. */
const gguf_tensor *
gguf_tensor_at(const gguf_file *f, uint64_t i)
{
	return i < f->n_tensors ? &f->tensors[i] : NULL;
}

/* Tensor named name, or NULL. */
const gguf_tensor *
gguf_find_tensor(const gguf_file *f, const char *name)
{
	int64_t		id;

	if (f->tensor_index.slots == NULL || name == NULL)
		return NULL;
	id = llm_hash_index_find(&f->tensor_index, llm_fnv1a64(name, strlen(name)), tensor_name_eq, f, name);
	return id < 0 ? NULL : &f->tensors[id];
}

bool
gguf_str_eq(gguf_str s, const char *lit)
{
	size_t		n = strlen(lit);

	return s.len == n && memcmp(s.ptr, lit, n) == 0;
}
