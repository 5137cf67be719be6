#include "steno_uv.h"
#include <stdlib.h>
#include <uv.h>

void *steno_uv_loop_new(void) {
    uv_loop_t *loop = malloc(sizeof *loop);
    if (!loop) return NULL;
    if (uv_loop_init(loop) != 0) {
        free(loop);
        return NULL;
    }
    return loop;
}

int steno_uv_run_once(void *loop) {
    return uv_run((uv_loop_t *)loop, UV_RUN_ONCE);
}

int steno_uv_run_until_done(void *loop) {
    return uv_run((uv_loop_t *)loop, UV_RUN_DEFAULT);
}

static void count_handle(uv_handle_t *handle, void *arg) {
    (void)handle;
    (*(int *)arg)++;
}

int steno_uv_open_handles(void *loop) {
    int n = 0;
    uv_walk((uv_loop_t *)loop, count_handle, &n);
    return n;
}

static void close_handle(uv_handle_t *handle, void *arg) {
    (void)arg;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

int steno_uv_loop_free(void *loop) {
    uv_loop_t *l = (uv_loop_t *)loop;
    /* Whatever is still open (nothing, after a clean lws teardown) is closed here, so that
     * uv_loop_close can succeed and the memory is not left to handles. */
    uv_walk(l, close_handle, NULL);
    uv_run(l, UV_RUN_DEFAULT);
    int result = uv_loop_close(l);
    if (result == 0) free(l);
    return result;
}
