#ifndef STENO_SHIMS_H
#define STENO_SHIMS_H
#include "steno_opus.h"
#include "steno_lws.h"
#include "steno_stdio.h"
#include "steno_ps.h"
#endif
