#if canImport(Glibc)
import Glibc
#endif

/// Writes to the standard streams without Foundation, flushing at once: the server's startup
/// line must reach a pipe (tests and supervisors read it) as soon as it is printed.
enum FileHandleOutput {
    static func stdout(_ text: String) {
        write(text, to: 1)
    }

    static func stderr(_ text: String) {
        write(text, to: 2)
    }

    static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    private static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}
