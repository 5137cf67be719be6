/* epoll for the benchmark's many-connection client: Glibc's Swift module leaves it out. */
#include <sys/epoll.h>
