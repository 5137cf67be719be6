#include "steno_lws.h"

const size_t steno_lws_pre = LWS_PRE;
