#define _GNU_SOURCE
#include "steno_uv.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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

/* ---- The event pipe's double close ---------------------------------------------------
 *
 * lws_destroy_event_pipe (lws 4.1.6, with an event library whose handles close
 * asynchronously) calls uv_close on the pipe's poll handle, whose callback will close
 * wsi->desc.sockfd, and then lws_plat_pipe_close, which closes the same number at once. Then
 * lws_context_destroy closes every connection (their callbacks run), and only on the loop's
 * next turn the callback closes the number again. Whoever opened a descriptor in between
 * (another server's connection, a client socket: threads do) loses it.
 *
 * The fix is lws's own: after the first close, its record of the pipe should say the
 * descriptor is gone (desc.sockfd = LWS_SOCK_INVALID), and then the callback closes nothing.
 * lws exports no setter, but it exports the getter, lws_get_socket_fd, whose whole body on
 * x86-64 is `test %rdi,%rdi; je; mov OFFSET(%rdi),%eax; ret`: the field's offset is read
 * from there, checked against what the getter returns, and the field is set. If the code
 * does not have that shape (another build or architecture), the number is taken back
 * instead: F_DUPFD hands out the lowest free number at or above the one asked, so getting
 * exactly it means nobody else holds it, and the second close then closes our copy (when
 * somebody got it first, nothing can be done). */

struct lws;

static long sockfd_offset(void) {
    int (*getter)(struct lws *) = (int (*)(struct lws *))dlsym(RTLD_DEFAULT, "lws_get_socket_fd");
    if (!getter) return -1;
    const unsigned char *p = (const unsigned char *)(uintptr_t)getter;
#if defined(__x86_64__)
    if (p[0] == 0x48 && p[1] == 0x85 && p[2] == 0xff && p[3] == 0x74) {
        const unsigned char *q = p + 5;
        if (q[0] == 0x8b && q[1] == 0x87 && q[6] == 0xc3) {
            int32_t offset;
            memcpy(&offset, q + 2, sizeof offset);
            return offset >= 0 ? offset : -1;
        }
        if (q[0] == 0x8b && q[1] == 0x47 && q[3] == 0xc3) return (long)(int8_t)q[2] >= 0 ? (int8_t)q[2] : -1;
    }
#endif
    (void)p;
    return -1;
}

static int socket_fd(void *wsi) {
    int (*getter)(struct lws *) = (int (*)(struct lws *))dlsym(RTLD_DEFAULT, "lws_get_socket_fd");
    return getter ? getter((struct lws *)wsi) : -1;
}

static int is_eventfd(int fd) {
    char path[64], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return strcmp(target, "anon_inode:[eventfd]") == 0;
}

static void find_pipe(uv_handle_t *handle, void *arg) {
    steno_uv_event_pipe *found = arg;
    if (handle->type != UV_POLL || uv_is_closing(handle) || found->fd >= 0) return;
    uv_os_fd_t fd;
    struct stat st;
    if (uv_fileno(handle, &fd) != 0 || fstat(fd, &st) != 0 || S_ISSOCK(st.st_mode)) return;
    if (!is_eventfd(fd) || !handle->data || socket_fd(handle->data) != fd) return;
    found->handle = handle;
    found->wsi = handle->data;
    found->fd = fd;
}

steno_uv_event_pipe steno_uv_find_event_pipe(void *loop) {
    steno_uv_event_pipe found = { NULL, NULL, -1 };
    uv_walk((uv_loop_t *)loop, find_pipe, &found);
    return found;
}

/* Marks lws's record closed if its descriptor field can be found and holds `fd`. */
static int mark_closed(void *wsi, int fd) {
    long offset = sockfd_offset();
    if (offset < 0 || socket_fd(wsi) != fd) return 0;
    int *field = (int *)((char *)wsi + offset);
    if (*field != fd) return 0;
    *field = -1;
    if (socket_fd(wsi) == -1) return 1;
    *field = fd;
    return 0;
}

/* Takes the free number `fd` back with a descriptor of our own (/dev/null), for the second
 * close to close. */
static int take_back(int fd) {
    int keeper = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (keeper < 0) return 0;
    int copy = fcntl(keeper, F_DUPFD_CLOEXEC, fd);
    close(keeper);
    if (copy == fd) return 2;
    if (copy >= 0) close(copy);
    return 0;
}

int steno_uv_forget_event_pipe(void *loop, steno_uv_event_pipe pipe) {
    (void)loop;
    if (pipe.fd < 0 || !pipe.handle || !uv_is_closing((uv_handle_t *)pipe.handle)) return 0;
    if (mark_closed(pipe.wsi, pipe.fd)) return 1;
    struct stat st;
    if (fstat(pipe.fd, &st) == 0) return 0;  /* somebody else's already */
    return take_back(pipe.fd);
}

static void forget_closing(uv_handle_t *handle, void *arg) {
    (void)arg;
    if (handle->type != UV_POLL || !uv_is_closing(handle) || !handle->data) return;
    int fd = socket_fd(handle->data);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0) {
        /* Open: a socket is taken to be lws's own (a listener), which the callback closes
         * once; anything else is somebody else's, on the number of the pipe lws closed. */
        if (S_ISSOCK(st.st_mode)) return;
        mark_closed(handle->data, fd);
        return;
    }
    if (!mark_closed(handle->data, fd)) take_back(fd);
}

void steno_uv_forget_closing_pipes(void *loop) {
    uv_walk((uv_loop_t *)loop, forget_closing, NULL);
}
