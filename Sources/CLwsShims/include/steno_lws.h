#ifndef STENO_LWS_H
#define STENO_LWS_H
#include <stddef.h>
#include <libwebsockets.h>

/* LWS_PRE is a macro Swift does not import: headroom lws_write needs before a payload. */
extern const size_t steno_lws_pre;

#endif
