import Glibc

/// CPU time of another process, from `/proc/PID/stat` (Linux): for the metrics of a worker
/// process this one started.
public enum ProcessCPU {
    /// User plus system seconds of `pid`, 0 if it cannot be read.
    public static func seconds(of pid: pid_t) -> Double {
        guard pid > 0, let file = fopen("/proc/\(pid)/stat", "r") else { return 0 }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 1024)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return 0 }
        let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // After the command's closing parenthesis: state, ppid, … utime is the 12th, stime the 13th.
        guard let close = line.lastIndex(of: ")") else { return 0 }
        let fields = line[line.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
