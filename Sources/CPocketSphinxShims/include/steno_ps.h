#ifndef STENO_PS_H
#define STENO_PS_H

/* sphinxbase reports through err_cb_f, a variadic callback type that Swift cannot implement.
   This installs one (once per process) that keeps the errors of the calling
   thread, so that a failed ps_init can say why, and that writes every message to the log
   file set below, or nowhere. */
void steno_ps_install_log_callback(void);

/* Where the callback above writes pocketsphinx messages: a file opened for appending, or
   nothing when path is NULL; also sphinxbase's own log stream (err_set_logfp), which it
   prints its configuration to. Process-wide; call it while no decoder is being made.
   Returns 0, or -1 if the file cannot be opened (logging is then left as it was). */
int steno_ps_set_log_file(const char *path);

/* The errors pocketsphinx reported on the calling thread since the last
   steno_ps_clear_last_error(), joined by "; " (at most 511 bytes), or "" if none. Valid until
   the next message on this thread. */
const char *steno_ps_last_error(void);
void steno_ps_clear_last_error(void);

#endif
