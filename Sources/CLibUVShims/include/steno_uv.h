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

/* lws 4.1.6 on libuv closes its event pipe (an eventfd) twice when it is destroyed: in
 * lws_context_destroy, and again from the close callback of the pipe's poll handle on the
 * loop's next turn. In between the number is free, and a descriptor another thread opens
 * meanwhile gets it and is closed under it (see steno_uv.c). */

/* lws's event pipe on `loop`: its poll handle, lws's record of it, its descriptor. */
typedef struct {
    void *handle;
    void *wsi;
    int fd;
} steno_uv_event_pipe;

/* Before lws_context_destroy: finds the event pipe (fd -1 if there is none). */
steno_uv_event_pipe steno_uv_find_event_pipe(void *loop);

/* After lws_context_destroy, before the loop runs again: keeps the pipe's close callback
 * from closing the number a second time. Returns 1 when lws's record was marked closed
 * (no second close at all), 2 when the number was taken back for the second close to
 * close, 0 when neither could be done. */
int steno_uv_forget_event_pipe(void *loop, steno_uv_event_pipe pipe);

/* After a failed lws_create_context (which destroys what it made, its event pipe closed
 * once already): the same for every poll handle lws is closing. */
void steno_uv_forget_closing_pipes(void *loop);

#endif
