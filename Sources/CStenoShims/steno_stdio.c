#include <stdio.h>
#include "steno_stdio.h"

void steno_line_buffer_stdout(void) { setvbuf(stdout, NULL, _IOLBF, 0); }
