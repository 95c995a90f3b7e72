--
-- extract_realtext: llm_extract on Debian changelog entries (real text from
-- installed packages' changelog.Debian files).  A schema whose string
-- pattern has an unbounded count (`+`) has no longest output, so a small
-- max_tokens can cut the JSON value: the WARNING of on_error => 'null' says
-- where it was cut, after how many tokens and with which finish reason.
-- Bounding the pattern ({m,n}) gives the schema a longest output, and
-- llm_extract's default max_tokens (NULL) is then at least that long.
--
CREATE TABLE changelog (id int PRIMARY KEY, body text);
INSERT INTO changelog VALUES (26, $cl$git (1:2.39.2-1) unstable; urgency=medium

  * new upstream point release (see RelNotes/2.39.2.txt).  Addresses
    CVE-2023-22490 and CVE-2023-23946.

 -- Jonathan Nieder <jrnieder@gmail.com>  Wed, 15 Feb 2023 17:08:12 -0800$cl$);
INSERT INTO changelog VALUES (39, $cl$openssl (3.0.11-1~deb12u2) bookworm-security; urgency=medium

  * CVE-2023-5363 (Incorrect cipher key and IV length processing).

 -- Sebastian Andrzej Siewior <sebastian@breakpoint.cc>  Mon, 23 Oct 2023 19:52:22 +0200$cl$);
INSERT INTO changelog VALUES (13, $cl$debianutils (2.15.4) unstable; urgency=low

  * Strip .comment section from binaries.
  * Update French man pages with portion of patch from Nicolas
    François.  closes: #346587.

 -- Clint Adams <schizo@debian.org>  Sun,  2 Apr 2006 21:36:32 -0400$cl$);
INSERT INTO changelog VALUES (28, $cl$curl (7.74.0-1) unstable; urgency=medium

  * New upstream release
    + Fix inferior OCSP verification as per CVE-2020-8286 (Closes: #977161)
      https://curl.se/docs/CVE-2020-8286.html
    + Fix FTP wildcard stack overflow as per CVE-2020-8285 (Closes: #977162)
      https://curl.se/docs/CVE-2020-8285.html
    + Fix trusting FTP PASV responses as per CVE-2020-8284 (Closes: #977163)
      https://curl.se/docs/CVE-2020-8284.html
  * Update debian/watch to new upstream download page layout
  * Update 12_use-python3-in-tests.patch due to renamed file
  * Refresh patches
  * Fix cross-build due to python build dependencies.
    Thanks to Helmut Grohne for the patch (Closes: #969004)
  * Fix formatting in some man pages.
    Thanks to Bjarni Ingi Gislason for the patch (Closes: #963559)
  * Update list of documentation files to install
  * Update symbols
  * Bump Standards-Version to 4.5.1 (no changes needed)
  * Drop removed file from d/copyright

 -- Alessandro Ghedini <ghedo@debian.org>  Thu, 31 Dec 2020 15:22:05 +0100$cl$);
-- unbounded CVE ids: the curl entry's four ids take 75 tokens (one token per
-- digit in this vocabulary), more than max_tokens 64: NULL with a WARNING
SELECT id, r
FROM (SELECT id, llm_extract(body, '{"type": "object",
        "properties": {"kind": {"enum": ["security", "bugfix", "feature", "packaging"]},
                       "cves": {"type": "array", "maxItems": 4,
                                "items": {"type": "string", "pattern": "CVE-[0-9]{4}-[0-9]+"}},
                       "urgent": {"type": "boolean"}},
        "required": ["kind", "cves", "urgent"]}', max_tokens => 64, on_error => 'null') AS r
      FROM changelog ORDER BY id) q
ORDER BY id;
-- the same cut with on_error => 'raise' (the default): ERROR 54000, same text
SELECT try_sql($$SELECT llm_extract(body, '{"type": "object",
        "properties": {"kind": {"enum": ["security", "bugfix", "feature", "packaging"]},
                       "cves": {"type": "array", "maxItems": 4,
                                "items": {"type": "string", "pattern": "CVE-[0-9]{4}-[0-9]+"}},
                       "urgent": {"type": "boolean"}},
        "required": ["kind", "cves", "urgent"]}', max_tokens => 64) FROM changelog WHERE id = 28$$);
-- bounded ids ({4,7}): the schema's longest output is 120 bytes, so the
-- default max_tokens (at least 256) always completes it: all four ids
SELECT llm_extract(body, '{"type": "object",
        "properties": {"kind": {"enum": ["security", "bugfix", "feature", "packaging"]},
                       "cves": {"type": "array", "maxItems": 4,
                                "items": {"type": "string", "pattern": "CVE-[0-9]{4}-[0-9]{4,7}"}},
                       "urgent": {"type": "boolean"}},
        "required": ["kind", "cves", "urgent"]}') AS bounded
FROM changelog WHERE id = 28;
-- maxLength bounds the unbounded pattern as well
SELECT llm_extract(body, '{"type": "object",
        "properties": {"kind": {"enum": ["security", "bugfix", "feature", "packaging"]},
                       "cves": {"type": "array", "maxItems": 4,
                                "items": {"type": "string", "pattern": "CVE-[0-9]{4}-[0-9]+", "maxLength": 16}},
                       "urgent": {"type": "boolean"}},
        "required": ["kind", "cves", "urgent"]}') AS bounded_by_length
FROM changelog WHERE id = 28;
-- the default max_tokens follows the schema's bound: a 300-digit build id
-- (one token per digit) needs more than 256 tokens; its bound is 315 bytes,
-- so the default call completes where max_tokens 256 cuts it
SELECT llm_stat_reset();
SELECT length(llm_extract(body, '{"type": "object", "properties": {"build_id": {"type": "string", "pattern": "[0-9]{300}"}},
                                  "required": ["build_id"]}') ->> 'build_id') AS build_id_digits
FROM changelog WHERE id = 13;
SELECT outcome, completion_tokens > 256 AS above_old_default, completion_tokens <= 315 AS within_bound
FROM llm_recent_requests() ORDER BY seq;
SELECT llm_extract(body, '{"type": "object", "properties": {"build_id": {"type": "string", "pattern": "[0-9]{300}"}},
                           "required": ["build_id"]}', max_tokens => 256, on_error => 'null') AS cut_at_256
FROM changelog WHERE id = 13;
-- the SQL default is NULL: the bound of a bounded schema, else 256
SELECT pg_get_function_arg_default('llm_extract'::regproc, 4) AS max_tokens_default;
DROP TABLE changelog;
SELECT wait_idle();
