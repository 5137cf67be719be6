#ifndef STENO_UV_H
#define STENO_UV_H

/* The few libuv calls the transport makes to own the event loop libwebsockets runs on (a
 * "foreign loop"), behind an opaque pointer so that Swift never imports <uv.h>. */

/* A new, initialized loop; NULL if it could not be made. */
void *steno_uv_loop_new(void);

/* Runs the loop once: waits for events (or the next timer) and handles them. Returns
 * nonzero while the loop has active handles. */
int steno_uv_run_once(void *loop);

/* Runs the loop until it has nothing left to do (every handle closed or stopped). */
int steno_uv_run_until_done(void *loop);

/* Closes every handle still open, runs their close callbacks, closes and frees the loop.
 * Returns the result of uv_loop_close (0 when the loop closed). */
int steno_uv_loop_free(void *loop);

/* Handles on the loop that are still open (for checks that a teardown left none). */
int steno_uv_open_handles(void *loop);

#endif
