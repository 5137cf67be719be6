import Foundation

// What every test that starts a program needs, once.

/// A port nobody listens on now (bound to port 0 and closed again): for a program that cannot
/// be told to pick one itself and say which.
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestClientError.io("socket", errno) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard ok else { throw TestClientError.io("bind", errno) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Spawn attributes for a child that starts with no signal blocked and every handler at its
/// default: the test runner's threads block some signals (SIGTERM among them) and ignore
/// SIGPIPE, and a child that inherited that would never stop when told to.
public func withCleanSignals<T>(_ body: (UnsafePointer<posix_spawnattr_t>) throws -> T) rethrows -> T {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    return try body(&attributes)
}
