#include "steno_ps.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sphinxbase/err.h>

static _Atomic(FILE *) steno_ps_log = NULL;
static _Thread_local char steno_ps_error[512];

static void steno_ps_log_callback(void *user_data, err_lvl_t level, const char *fmt, ...) {
    (void)user_data;
    FILE *out = atomic_load(&steno_ps_log);
    int keep = level >= ERR_ERROR;
    if (out == NULL && !keep)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (keep) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        size_t used = strlen(steno_ps_error);
        if (used == 0)
            snprintf(steno_ps_error, sizeof steno_ps_error, "%s", line);
        else if (used + 3 < sizeof steno_ps_error)
            snprintf(steno_ps_error + used, sizeof steno_ps_error - used, "; %s", line);
    }
    if (out != NULL)
        fputs(line, out);
}

void steno_ps_install_log_callback(void) {
    err_set_callback(steno_ps_log_callback, NULL);
}

int steno_ps_set_log_file(const char *path) {
    FILE *out = NULL;
    if (path != NULL) {
        out = fopen(path, "a");
        if (out == NULL)
            return -1;
        setvbuf(out, NULL, _IOLBF, 0);
    }
    /* sphinxbase also prints some things (the configuration) straight to its own log
       stream; NULL there disables them. */
    err_set_logfp(out);
    /* The previous file is flushed but never closed: another thread may be writing to it. */
    FILE *old = atomic_exchange(&steno_ps_log, out);
    if (old != NULL)
        fflush(old);
    return 0;
}

const char *steno_ps_last_error(void) { return steno_ps_error; }

void steno_ps_clear_last_error(void) { steno_ps_error[0] = '\0'; }
