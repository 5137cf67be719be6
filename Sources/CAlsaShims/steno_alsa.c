#include "steno_alsa.h"

static void steno_alsa_ignore(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

void steno_alsa_quiet_errors(void) { snd_lib_error_set_handler(steno_alsa_ignore); }
