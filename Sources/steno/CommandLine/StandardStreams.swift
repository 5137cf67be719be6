#if canImport(Glibc)
import Glibc
#endif

/// Unbuffered writes to the standard output and error descriptors (1 and 2): each call is
/// written at once, so the server's startup line reaches a pipe (tests and supervisors read
/// it) as soon as it is printed, and a caption line reaches the program it is piped into.
enum StandardStreams {
    static func stdout(_ text: String) {
        write(text, to: 1)
    }

    static func stderr(_ text: String) {
        write(text, to: 2)
    }

    static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Columns of the terminal on `fd`, or nil when it is not one.
    static func terminalWidth(_ fd: Int32) -> Int? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    private static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                // The reader of a pipe left (`steno listen | head`): nobody is reading the
                // captions any more. (Where SIGPIPE is not ignored, it has ended us already.)
                if n < 0 && errno == EPIPE && fd == 1 { exit(141) }
                return
            }
            offset += n
        }
    }
}
