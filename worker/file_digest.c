/*
 * file_digest.c — sha256 of a model file (file_digest.h).
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "utils/resowner.h"

#include "file_digest.h"

#define DIGEST_CHUNK (1024 * 1024)

bool
llm_file_sha256(const char *path, char hex[LLM_SHA256_HEX_LEN], char *err, size_t errlen)
{
	static const char digits[] = "0123456789abcdef";
	ResourceOwner saved = CurrentResourceOwner;
	ResourceOwner owner;
	pg_cryptohash_ctx *ctx = NULL;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint8	   *buf = NULL;
	int			fd;
	bool		ok = false;

	hex[0] = '\0';
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
	{
		snprintf(err, errlen, "could not open \"%s\": %m", path);
		return false;
	}

	/*
	 * The backend's cryptohash registers its context with the current
	 * resource owner (so an error frees it); the worker's loop has none, so
	 * the hash gets its own for its lifetime.
	 */
	owner = ResourceOwnerCreate(NULL, "llm model digest");
	CurrentResourceOwner = owner;
	buf = palloc_extended(DIGEST_CHUNK, MCXT_ALLOC_NO_OOM);
	ctx = pg_cryptohash_create(PG_SHA256);
	if (buf == NULL || ctx == NULL || pg_cryptohash_init(ctx) < 0)
	{
		snprintf(err, errlen, "could not start a sha256 hash: %s",
				 ctx ? pg_cryptohash_error(ctx) : "out of memory");
		goto done;
	}
	for (;;)
	{
		ssize_t		got = read(fd, buf, DIGEST_CHUNK);

		if (got < 0)
		{
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "could not read \"%s\": %m", path);
			goto done;
		}
		if (got == 0)
			break;
		if (pg_cryptohash_update(ctx, buf, (size_t) got) < 0)
		{
			snprintf(err, errlen, "sha256 of \"%s\" failed: %s", path, pg_cryptohash_error(ctx));
			goto done;
		}
	}
	if (pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
	{
		snprintf(err, errlen, "sha256 of \"%s\" failed: %s", path, pg_cryptohash_error(ctx));
		goto done;
	}
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
	{
		hex[2 * i] = digits[digest[i] >> 4];
		hex[2 * i + 1] = digits[digest[i] & 0xf];
	}
	hex[2 * PG_SHA256_DIGEST_LENGTH] = '\0';
	ok = true;
done:
	if (ctx)
		pg_cryptohash_free(ctx);
	if (buf)
		pfree(buf);
	close(fd);
	CurrentResourceOwner = saved;
	ResourceOwnerRelease(owner, RESOURCE_RELEASE_BEFORE_LOCKS, false, true);
	ResourceOwnerRelease(owner, RESOURCE_RELEASE_LOCKS, false, true);
	ResourceOwnerRelease(owner, RESOURCE_RELEASE_AFTER_LOCKS, false, true);
	ResourceOwnerDelete(owner);
	return ok;
}
