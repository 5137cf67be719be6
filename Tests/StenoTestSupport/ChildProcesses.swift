import Foundation

// What every test that starts a program needs, once.

/// A socket listening on 127.0.0.1 at a port the kernel chose, and that port.
public func loopbackListener(backlog: Int32 = 16) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestClientError.io("socket", errno) }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else {
        let error = errno
        close(fd)
        throw TestClientError.io("bind/listen", error)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A port nobody listens on now (listened on and closed again): for a program that cannot
/// be told to pick one itself and say which.
public func freeLoopbackPort() throws -> Int {
    let (fd, port) = try loopbackListener(backlog: 1)
    close(fd)
    return port
}

// Starting a program (`spawnChild`, `SpawnedChild`, `ChildStream`, `waitForExit`,
// `exitStatus(fromWaitStatus:)`, `runChild`) is StenoSystem's (ChildProcess.swift): the server
// starts festival the same way.
