#ifndef STENO_CURL_H
#define STENO_CURL_H

#include <stddef.h>

/// One HTTP(S) request with libcurl: what Swift cannot do itself (`curl_easy_setopt` is variadic).
/// A POST of `body` (`length` bytes, `content_type`) when `body` is not NULL, else a GET, to
/// `url`, with `Authorization: authorization` when that is not NULL; waits at most
/// `timeout_ms`; on an answer, sets `*status` and copies up to `response_capacity - 1` bytes
/// of its body into `response` (NUL-terminated) and returns 0; on a failure (no answer: DNS,
/// connect, TLS, timeout, the connection dropped), returns -1 with libcurl's message in
/// `error`. `ca_file`, when not NULL, is the PEM of the authorities to trust instead of the
/// system's.
int steno_http_request(const char *url, const char *content_type, const void *body, size_t length,
                       const char *authorization, long timeout_ms, const char *ca_file, long *status,
                       char *response, size_t response_capacity, char *error, size_t error_capacity);

#endif
