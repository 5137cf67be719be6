#ifndef STENO_LWS_H
#define STENO_LWS_H
#include <stddef.h>
#include <libwebsockets.h>

/* LWS_PRE is a macro Swift does not import: headroom lws_write needs before a payload. */
extern const size_t steno_lws_pre;

/* Where this libwebsockets looks for its event-loop plugins (libwebsockets-evlib_uv.so …):
 * LWS_INSTALL_LIBDIR from lws_config.h, fixed when the library was built. */
extern const char *const steno_lws_evlib_dir;

#endif
