import Foundation
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// The WebSocket client wire format written by hand, for the one-thread epoll clients
// (`SilentClients` of `connections`, `EpollTalkers` of `capacity`): a non-blocking connect,
// the upgrade request, the end of an HTTP head, masked client frames, server frames.

/// The upgrade request with a fixed key (``upgradeAccept`` is the answer it expects).
func upgradeRequest(port: Int) -> [UInt8] {
    Array(("GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\n"
        + "Connection: Upgrade\r\nSec-WebSocket-Key: \(upgradeKey)\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)
}

private let upgradeKey = "c3Rlbm8tY29ubmVjdGlvbg=="

/// The `Sec-WebSocket-Accept` the server owes ``upgradeRequest(port:)``.
let upgradeAccept = Data(SHA1.hash(Array((upgradeKey + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()

/// A non-blocking TCP socket (TCP_NODELAY) connecting to 127.0.0.1:`port`: the descriptor, or
/// why not. The connect completes when the socket turns writable (then check SO_ERROR).
func connectNonBlocking(port: Int) -> Result<Int32, TalkerError> {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return .failure(TalkerError("socket: \(String(cString: strerror(errno)))")) }
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let r = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if r != 0 && errno != EINPROGRESS {
        let why = String(cString: strerror(errno))
        close(fd)
        return .failure(TalkerError("connect: \(why)"))
    }
    return .success(fd)
}

/// The error a non-blocking connect ended with (0: connected).
func connectError(_ fd: Int32) -> Int32 {
    var error: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
    return error
}

/// Where the blank line ending an HTTP head starts in `bytes`, if it came.
func httpHeadEnd(_ bytes: [UInt8]) -> Int? {
    guard bytes.count >= 4 else { return nil }
    for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
        return i
    }
    return nil
}

/// A masked client frame (RFC 6455 §5.3), FIN set.
func maskedFrame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
    let mask: [UInt8] = [0x5a, 0x17, 0xc3, 0x88]
    var out: [UInt8] = [0x80 | opcode]
    out.reserveCapacity(payload.count + 14)
    if payload.count < 126 {
        out.append(0x80 | UInt8(payload.count))
    } else if payload.count < 65536 {
        out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
    } else {
        out.append(0x80 | 127)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((payload.count >> shift) & 0xff)) }
    }
    out += mask
    for (i, b) in payload.enumerated() { out.append(b ^ mask[i % 4]) }
    return out
}

/// One frame as the server sent it (unmasked if it was masked).
struct ServerFrame {
    var fin: Bool
    var opcode: UInt8
    var payload: [UInt8]
}

/// Takes the first whole frame off the front of `input`, or nil while it has not all come.
func takeServerFrame(_ input: inout [UInt8]) -> ServerFrame? {
    guard input.count >= 2 else { return nil }
    let masked = input[1] & 0x80 != 0
    var length = Int(input[1] & 0x7f)
    var at = 2
    if length == 126 {
        guard input.count >= 4 else { return nil }
        length = Int(input[2]) << 8 | Int(input[3])
        at = 4
    } else if length == 127 {
        guard input.count >= 10 else { return nil }
        length = (2..<10).reduce(0) { $0 << 8 | Int(input[$1]) }
        at = 10
    }
    let maskAt = at
    if masked { at += 4 }
    guard input.count >= at + length else { return nil }
    var payload = Array(input[at..<(at + length)])
    if masked {
        for i in payload.indices { payload[i] ^= input[maskAt + i % 4] }
    }
    let frame = ServerFrame(fin: input[0] & 0x80 != 0, opcode: input[0] & 0x0f, payload: payload)
    input.removeFirst(at + length)
    return frame
}
