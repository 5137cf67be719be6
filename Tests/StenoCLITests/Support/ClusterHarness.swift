import Foundation
import StenoCore
import StenoTestSupport
import Testing
@testable import steno

// Several `steno serve` processes behind Debian's HAProxy, all on loopback ports, run by the
// tests and stopped after them (SIGKILL when a test fails half-way: `StenoCommand`'s deinit).

/// A `steno serve` process on 127.0.0.1.
final class ServeInstance: @unchecked Sendable {
    /// What ends utterances in the instances (`steno serve`'s default, not `steno
    /// transcribe`'s): their finals are `steno transcribe`'s with it.
    static let endpointing = EndpointingFlag.text(EndpointingFlag.serverDefault)
    let command: StenoCommand
    let port: Int
    let arguments: [String]

    /// Starts `steno serve ARGUMENTS` on `port` (0: any free one) and waits for its address.
    init(_ arguments: [String], port: Int = 0) throws {
        self.arguments = arguments
        let command = try StenoCommand(["serve", "--engine", "pocketsphinx", "--host", "127.0.0.1", "--port", "\(port)", "--recognizers", "2",
                                        "--workers", "1", "--lag-target", "0", "--keepalive", "0",
                                        "--log-level", "info"] + arguments)
        self.command = command
        try command.wait(for: "the address steno serve listens on", timeout: 60) {
            command.stdout.text.contains("listening on http://127.0.0.1:")
        }
        let line = command.stdout.text
        guard let range = line.range(of: "listening on http://127.0.0.1:"),
              let found = Int(line[range.upperBound...].prefix { $0.isNumber }) else {
            throw TestClientError.protocolError("steno serve said: \(line)")
        }
        self.port = found
    }

    /// The same instance started again on its port (a rolling restart).
    func restarted() throws -> ServeInstance { try ServeInstance(arguments, port: port) }

    var log: String { command.stderr.text }
    /// Transcription sessions its log says started.
    var sessionsStarted: Int { log.components(separatedBy: " started: ").count - 1 }

    func terminate() { kill(command.pid, SIGTERM) }
    @discardableResult
    func finish(timeout: Double = 60) throws -> Int32 { try command.finish(timeout: timeout) }

    func stop() {
        guard command.isRunning else { return }
        kill(command.pid, SIGKILL)
        _ = try? command.finish(timeout: 10)
    }
}

/// HAProxy running docs/haproxy/steno.cfg: the documented file, with the instances' and its
/// own loopback addresses, a test certificate, and without the lines that need root.
final class HAProxy: @unchecked Sendable {
    static let binary = "/usr/sbin/haproxy"
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: binary) }
    static let missing = "haproxy is not installed (scripts/bootstrap.sh test installs Debian's haproxy)"

    /// The address HAProxy connects to the instances from, so that they can tell it from a
    /// client on 127.0.0.1 (`--trusted-proxy 127.0.0.2`): all of 127/8 is this machine's.
    static let sourceAddress = "127.0.0.2"

    /// docs/haproxy/steno.cfg (this file is Tests/StenoCLITests/Support/ below the root).
    static let documentedConfiguration: String = {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        guard let text = try? String(contentsOfFile: path + "/docs/haproxy/steno.cfg", encoding: .utf8) else {
            fatalError("cannot read docs/haproxy/steno.cfg")
        }
        return text
    }()

    let port: Int
    let command: StenoCommand
    let directory: URL
    let certificate: TestCertificate
    var url: String { "wss://127.0.0.1:\(port)" }
    var caPath: String { certificate.certificatePath }

    /// `talkerChecks` false: the talkers' backend without health checks, so that only
    /// `retry-on` keeps a talker off a full instance (what covers the seconds between checks).
    init(instances: [Int], talkerChecks: Bool = true) throws {
        certificate = try TestCertificate()
        directory = certificate.directory
        // HAProxy reads the certificate and its key from one file.
        let pem = directory.appendingPathComponent("haproxy.pem").path
        let bundle = try String(contentsOfFile: certificate.certificatePath, encoding: .utf8)
            + (try String(contentsOfFile: certificate.keyPath, encoding: .utf8))
        try bundle.write(toFile: pem, atomically: true, encoding: .utf8)
        port = try freeLoopbackPort()
        let configuration = try Self.configuration(port: port, certificate: pem, instances: instances, talkerChecks: talkerChecks,
                                                   directory: directory.path)
        let file = directory.appendingPathComponent("steno.cfg").path
        try configuration.write(toFile: file, atomically: true, encoding: .utf8)
        // -db: in the foreground, not a daemon, so that the test holds its process.
        let command = try StenoCommand(["-db", "-f", file], executable: Self.binary)
        self.command = command
        let port = self.port
        try command.wait(for: "haproxy to listen", timeout: 30) { canConnect(port: port) }
    }

    /// The documented configuration made to run here.
    static func configuration(port: Int, certificate: String, instances: [Int], talkerChecks: Bool = true,
                              directory: String) throws -> String {
        var lines: [String] = []
        var backend = ""
        for line in documentedConfiguration.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("backend ") { backend = String(line.dropFirst("backend ".count)) }
            if line.contains("# not in the test") { continue }
            if line.hasPrefix("global") {
                lines.append(String(line))
                lines.append("    log stdout format raw local0")
                lines.append("    stats socket \(directory)/admin.sock mode 600 level admin")
                continue
            }
            if line.hasPrefix("    maxconn ") {
                // This machine's open-file limit is not a production one.
                lines.append("    maxconn 2000")
                continue
            }
            if line.contains("bind :443 ssl crt /etc/haproxy/certs/steno.pem") {
                lines.append(line.replacingOccurrences(of: "bind :443 ssl crt /etc/haproxy/certs/steno.pem",
                                                       with: "bind 127.0.0.1:\(port) ssl crt \(certificate)"))
                continue
            }
            if line.contains("default-server") {
                let server = !talkerChecks && backend == "talkers" ? line.replacingOccurrences(of: " check ", with: " ") : String(line)
                lines.append(server + " source \(sourceAddress)")
                continue
            }
            if let m = line.firstMatch(of: /server steno(\d) 10\.0\.0\.1\d:8080/) {
                let index = Int(m.1)! - 1
                guard index < instances.count else { continue }
                lines.append(line.replacingCharacters(in: m.range, with: "server steno\(index + 1) 127.0.0.1:\(instances[index])"))
                continue
            }
            lines.append(String(line))
        }
        let text = lines.joined(separator: "\n")
        guard text.contains("127.0.0.1:\(port) ssl"), text.contains("127.0.0.1:\(instances[0])") else {
            throw TestClientError.protocolError("docs/haproxy/steno.cfg no longer has the lines the test replaces")
        }
        return text
    }

    /// HAProxy's log lines (its `httplog` of every request).
    var log: [String] { command.stdout.lines }

    /// The talkers' handshakes HAProxy logged: the server that took each and how many times
    /// it was retried (the last of httplog's connection counts, `+N` when redispatched).
    var talkerHandshakes: [(server: String, retries: Int)] {
        log.compactMap { line in
            guard line.contains("\"GET /v1/stream"), let server = line.firstMatch(of: /talkers\/(steno\d)/),
                  let counts = line.firstMatch(of: /\ \d+\/\d+\/\d+\/\d+\/\+?(\d+)\ /) else { return nil }
            return (String(server.1), Int(counts.1) ?? 0)
        }
    }

    /// A command to HAProxy's runtime API (its stats socket), and its answer.
    @discardableResult
    func runtime(_ command: String) throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestClientError.protocolError("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(directory.appendingPathComponent("admin.sock").path.utf8CString)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, c) in path.prefix(raw.count - 1).enumerated() { raw[i] = UInt8(bitPattern: c) }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw TestClientError.protocolError("cannot reach HAProxy's stats socket: \(errno)") }
        let line = Array((command + "\n").utf8)
        guard write(fd, line, line.count) == line.count else { throw TestClientError.protocolError("write: \(errno)") }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            answer += buffer.prefix(n)
        }
        return String(decoding: answer, as: UTF8.self)
    }

    func stop() {
        if command.isRunning {
            kill(command.pid, SIGTERM)
            _ = try? command.finish(timeout: 10)
        }
        certificate.remove()
    }
}


/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
