/*
 * file_digest.h — the sha256 of a model file, for llm_model_info() and
 * llm_models: two servers compute the same text only if they load the same
 * bytes, and a path, size or modification time does not prove that.
 *
 * Worker-side glue (PostgreSQL's cryptohash, so OpenSSL where the server
 * was built with it); never called from compute threads.
 */
#ifndef LLM_FILE_DIGEST_H
#define LLM_FILE_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

/* Lowercase hex digest plus the terminator. */
#define LLM_SHA256_HEX_LEN (2 * 32 + 1)

/*
 * Reads the whole file at path and writes its sha256 to hex as lowercase hex.
 * Returns false with a reason in err (hex set to "") when the file cannot be
 * read or the hash fails; never raises.  Reads in 1 MiB chunks: a large file
 * costs I/O time (about a second per GB from the page cache), not memory.
 */
extern bool llm_file_sha256(const char *path, char hex[LLM_SHA256_HEX_LEN], char *err, size_t errlen);

#endif
