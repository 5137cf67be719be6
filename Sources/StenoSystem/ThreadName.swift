#if canImport(Glibc)
import Glibc
#endif

/// Names the calling thread as the system sees it (`/proc/PID/task/TID/comm`, `top -H`,
/// `steno-bench connections --threads`), at most 15 bytes. Foundation's `Thread.name` does not
/// reliably get there on Linux (given before `start()` it never does; set inside, one worker
/// of two kept the process's name), and `pthread_setname_np` is a GNU extension Swift's Glibc
/// module leaves out: the kernel's own file for it is written instead. Best effort.
public func nameCurrentThread(_ name: String) {
    #if os(Linux)
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    #endif
}
