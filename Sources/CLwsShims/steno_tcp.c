/* Apart from steno_lws.c: <linux/tcp.h> (for tcpi_snd_wnd, which glibc's <netinet/tcp.h>
 * lacks) cannot be included beside <netinet/tcp.h>, which libwebsockets.h brings. */
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

int steno_socket_peer_window(int fd, unsigned *window, unsigned *unanswered, unsigned *since_data) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) < 0) return -1;
    if (length < offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof info.tcpi_snd_wnd) {
        errno = ENOPROTOOPT;
        return -1;
    }
    *window = info.tcpi_snd_wnd;
    *unanswered = info.tcpi_probes;
    *since_data = info.tcpi_last_data_recv;
    return 0;
}
