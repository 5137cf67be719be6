#ifndef STENO_LWS_H
#define STENO_LWS_H
#include <stddef.h>
#include <libwebsockets.h>

/* LWS_PRE is a macro Swift does not import: headroom lws_write needs before a payload. */
extern const size_t steno_lws_pre;

/* Where this libwebsockets looks for its event-loop plugins (libwebsockets-evlib_uv.so …):
 * LWS_INSTALL_LIBDIR from lws_config.h, fixed when the library was built. */
extern const char *const steno_lws_evlib_dir;

/* Lingering closes (ServiceLoop+Linger.swift). ioctl is variadic, which Swift cannot call.
 *
 * steno_socket_backlog: bytes received on socket fd and not read yet (FIONREAD), and bytes
 * written and not yet acknowledged by the peer (SIOCOUTQ). Returns 0, or -1 (errno) when
 * either cannot be read. */
int steno_socket_backlog(int fd, int *unread, int *unsent);

/* The client's keepalive under flow control (WebSocketClient), from TCP_INFO (getsockopt of
 * a struct Swift sees without the field: glibc's tcp_info predates it). *window: the receive
 * window the peer last advertised (0: it takes nothing more for now); *unanswered: the
 * zero-window probes it has not answered (a peer that is there answers each one at once);
 * *since_data: milliseconds since data last arrived from the peer (acknowledgements and probe
 * answers are not data). Returns 0, or -1 (errno) when the kernel does not say (a TCP_INFO
 * too old to carry it). */
int steno_socket_peer_window(int fd, unsigned *window, unsigned *unanswered, unsigned *since_data);

/* A descriptor of its own for socket fd (close-on-exec, nonblocking), its sending side shut
 * (the peer reads to the end of what was sent and then sees end of stream): libwebsockets'
 * later close(fd) then leaves the connection open. -1 (errno) on failure. */
int steno_linger_take(int fd);

/* Reads and discards what socket fd (nonblocking) has, at most `budget` bytes. Returns 1
 * while the connection is open (nothing more to read now, or the budget spent), 0 once the
 * peer has ended it (end of stream, or an error such as a reset); *discarded counts the
 * bytes read. */
int steno_linger_drain(int fd, size_t budget, size_t *discarded);

#endif
