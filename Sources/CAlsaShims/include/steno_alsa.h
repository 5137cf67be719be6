#ifndef STENO_ALSA_H
#define STENO_ALSA_H
#include <alsa/asoundlib.h>

/* ALSA prints its own errors to stderr through a handler of a variadic type, which Swift
   cannot define: keep them quiet (every failure is reported by its return code, which the
   caller turns into a message of its own). */
void steno_alsa_quiet_errors(void);

#endif
