#include "steno_lws.h"

const size_t steno_lws_pre = LWS_PRE;
const char *const steno_lws_evlib_dir = LWS_INSTALL_LIBDIR;
