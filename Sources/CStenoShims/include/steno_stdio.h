#ifndef STENO_STDIO_H
#define STENO_STDIO_H

/* stdout is a mutable C global that Swift 6 strict concurrency will not touch:
   make it line-buffered, so tables printed to a pipe or a file appear line by line. */
void steno_line_buffer_stdout(void);

#endif
