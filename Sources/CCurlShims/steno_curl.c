#include "steno_curl.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct sink {
    char *buffer;
    size_t capacity;
    size_t used;
};

static size_t steno_curl_write(char *data, size_t size, size_t count, void *user) {
    struct sink *sink = user;
    size_t bytes = size * count;
    if (sink->capacity > 0) {
        size_t room = sink->capacity - 1 - sink->used;
        size_t take = bytes < room ? bytes : room;
        memcpy(sink->buffer + sink->used, data, take);
        sink->used += take;
        sink->buffer[sink->used] = 0;
    }
    return bytes;
}

static pthread_once_t steno_curl_once = PTHREAD_ONCE_INIT;

static void steno_curl_global_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int steno_http_request(const char *url, const char *content_type, const void *body, size_t length,
                       const char *authorization, long timeout_ms, const char *ca_file, long *status,
                       char *response, size_t response_capacity, char *error, size_t error_capacity) {
    pthread_once(&steno_curl_once, steno_curl_global_init);
    if (response_capacity > 0) response[0] = 0;
    if (error_capacity > 0) error[0] = 0;
    CURL *curl = curl_easy_init();
    if (!curl) {
        if (error_capacity > 0) strncpy(error, "libcurl could not start", error_capacity - 1);
        return -1;
    }
    char message[CURL_ERROR_SIZE] = {0};
    char header[1024];
    struct curl_slist *headers = NULL;
    if (body) {
        snprintf(header, sizeof header, "Content-Type: %s", content_type);
        headers = curl_slist_append(headers, header);
        // No "Expect: 100-continue" round trip before small bodies.
        headers = curl_slist_append(headers, "Expect:");
    }
    if (authorization) {
        snprintf(header, sizeof header, "Authorization: %s", authorization);
        headers = curl_slist_append(headers, header);
    }
    struct sink sink = {response, response_capacity, 0};

    curl_easy_setopt(curl, CURLOPT_URL, url);
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)length);
    }
    if (headers) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, steno_curl_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, message);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (ca_file) curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file);

    CURLcode code = curl_easy_perform(curl);
    int result = 0;
    if (code == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    } else {
        if (error_capacity > 0) {
            strncpy(error, message[0] ? message : curl_easy_strerror(code), error_capacity - 1);
            error[error_capacity - 1] = 0;
        }
        result = -1;
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return result;
}
