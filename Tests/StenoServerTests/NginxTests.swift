import Foundation
import StenoTestSupport
import Testing

/// docs/nginx/steno.conf as written, in front of a real server: TLS ended by nginx, the page
/// and the stream under a sub-path, WebSocket upgrades passed through. Only the ports, the
/// certificate and the paths nginx writes to are the test's own.
@Suite(.serialized) struct NginxTests {
    static let binary = "/usr/sbin/nginx"

    /// docs/nginx/steno.conf (this file is Tests/StenoServerTests/ below the root).
    static let documented: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return (try? String(contentsOfFile: path + "/docs/nginx/steno.conf", encoding: .utf8)) ?? ""
    }()

    @Test func thePageAndTheStreamUnderASubPathThroughTheDocumentedConfiguration() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary),
                     "nginx is not installed (scripts/bootstrap.sh test installs Debian's nginx-light)")
        try #require(!Self.documented.isEmpty, "cannot read docs/nginx/steno.conf")
        let server = try LiveServer()
        let certificate = try TestCertificate()
        defer { certificate.remove() }
        let nginx = try Nginx(documented: Self.documented, stenoPort: server.port, certificate: certificate)
        defer { nginx.stop() }

        // The page, under the sub-path, over TLS.
        let page = try HTTPTestClient.get(port: nginx.port, "/captions/", tls: true)
        #expect(page.status == 200, "\(page)\n\(nginx.errors)")
        #expect(page.bodyText.contains("<html") || page.bodyText.contains("<!doctype"), "\(page.bodyText.prefix(200))")
        let script = try HTTPTestClient.get(port: nginx.port, "/captions/steno-client.js", tls: true)
        #expect(script.status == 200, "\(script.status)")

        // A viewer and a publisher through nginx; the publisher's finals are those of the same
        // speech sent to the server directly.
        let input = FormatInputs.pcm24k
        let viewer = try StenoClient(port: nginx.port, path: "/captions/v1/listen?channel=nginx", tls: true)
        _ = try viewer.waitFor("joined")
        let client = try StenoClient(port: nginx.port, path: "/captions/v1/stream", tls: true)
        try client.start(input, extra: #""channel":"nginx""#)
        try client.send(audio: input.messages, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration, "through nginx")
        let direct = try StenoClient.transcribe(input, on: server)
        #expect(!client.events.finals.isEmpty)
        #expect(client.events.finals == direct.events.finals)
        #expect(try eventually(timeout: 60) {
            try viewer.readAvailable()
            return viewer.events.finals.count >= client.events.finals.count
        })
        #expect(viewer.events.finals == client.events.finals)
        try viewer.ws.close()
    }
}

/// nginx on a free loopback port, in the foreground, with docs/nginx/steno.conf in its `http`
/// block; stopped (and its files removed) by `stop`.
private final class Nginx {
    let port: Int
    let directory: URL
    private let pid: pid_t
    private var stopped = false

    init(documented: String, stenoPort: Int, certificate: TestCertificate) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("steno-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("temp"), withIntermediateDirectories: true)
        port = try freeLoopbackPort()
        let site = documented
            .replacingOccurrences(of: "listen 443 ssl;", with: "listen 127.0.0.1:\(port) ssl;")
            .replacingOccurrences(of: "/etc/ssl/certs/captions.example.org.pem", with: certificate.certificatePath)
            .replacingOccurrences(of: "/etc/ssl/private/captions.example.org.key", with: certificate.keyPath)
            .replacingOccurrences(of: "http://127.0.0.1:8080/", with: "http://127.0.0.1:\(stenoPort)/")
        let temp = directory.appendingPathComponent("temp").path
        let main = """
            daemon off;
            worker_processes 1;
            pid \(directory.path)/nginx.pid;
            error_log \(directory.path)/error.log warn;
            events { worker_connections 64; }
            http {
                access_log off;
                client_body_temp_path \(temp)/body;
                proxy_temp_path \(temp)/proxy;
                fastcgi_temp_path \(temp)/fastcgi;
                uwsgi_temp_path \(temp)/uwsgi;
                scgi_temp_path \(temp)/scgi;
                include \(directory.path)/steno.conf;
            }
            """
        try site.write(to: directory.appendingPathComponent("steno.conf"), atomically: true, encoding: .utf8)
        try main.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
        pid = try spawnQuietly(NginxTests.binary, ["-p", directory.path, "-c", directory.path + "/nginx.conf",
                                                 "-e", directory.path + "/error.log"])
        let deadline = Deadline(30)
        while !Self.accepts(port) {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                stopped = true
                throw TestClientError.protocolError("nginx exited: \(errors)")
            }
            if deadline.hasPassed {
                stop()
                throw TestClientError.protocolError("nginx did not listen on \(port): \(errors)")
            }
            usleep(20_000)
        }
    }

    deinit { stop() }

    var errors: String { (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? "" }

    func stop() {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGQUIT)  // nginx's graceful stop
        let deadline = Deadline(10)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) != pid {
            if deadline.hasPassed {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(20_000)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    private static func accepts(_ port: Int) -> Bool {
        guard let stream = try? TestStream.tcp(port: port) else { return false }
        stream.close()
        return true
    }
}
