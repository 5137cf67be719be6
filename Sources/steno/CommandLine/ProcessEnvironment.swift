#if canImport(Glibc)
import Glibc
#endif

enum ProcessEnvironment {
    /// The process's environment variables.
    static func current() -> [String: String] {
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let pair = String(cString: pointer)
            if let eq = pair.firstIndex(of: "=") {
                environment[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
            }
            entry += 1
        }
        return environment
    }
}
