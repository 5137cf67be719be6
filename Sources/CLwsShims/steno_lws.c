#include "steno_lws.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

const size_t steno_lws_pre = LWS_PRE;
const char *const steno_lws_evlib_dir = LWS_INSTALL_LIBDIR;

int steno_socket_backlog(int fd, int *unread, int *unsent) {
    if (ioctl(fd, FIONREAD, unread) < 0) return -1;
    if (ioctl(fd, SIOCOUTQ, unsent) < 0) return -1;
    return 0;
}

int steno_linger_take(int fd) {
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return -1;
    int flags = fcntl(own, F_GETFL);
    if (flags < 0 || fcntl(own, F_SETFL, flags | O_NONBLOCK) < 0) {
        int e = errno;
        close(own);
        errno = e;
        return -1;
    }
    /* lws has usually shut it already (not for TLS, where it sends close_notify instead, nor
     * after a write error); a second shutdown is harmless, and ENOTCONN is fine. */
    (void)shutdown(own, SHUT_WR);
    return own;
}

int steno_linger_drain(int fd, size_t budget, size_t *discarded) {
    char scratch[16384];
    *discarded = 0;
    while (*discarded < budget) {
        size_t want = budget - *discarded < sizeof scratch ? budget - *discarded : sizeof scratch;
        ssize_t n = recv(fd, scratch, want, MSG_DONTWAIT);
        if (n > 0) {
            *discarded += (size_t)n;
            continue;
        }
        if (n == 0) return 0;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
        return 0;
    }
    return 1;
}
