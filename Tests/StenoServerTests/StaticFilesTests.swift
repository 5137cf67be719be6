import Foundation
import StenoCore
import StenoTestSupport
import StenoTransport
import Testing
@testable import StenoServer

/// A temporary directory tree for static-file tests:
///   base/secret.txt            (outside the root)
///   base/root/…                (the web root)
final class WebRootFixture {
    let base: URL
    let root: URL
    let bigFile: [UInt8]

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("steno-webroot-\(UUID().uuidString)")
        let root = base.appendingPathComponent("root")
        let bigFile = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        self.base = base
        self.root = root
        self.bigFile = bigFile
        let fm = FileManager.default
        try fm.createDirectory(at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        func write(_ path: String, _ text: String) throws {
            try Data(text.utf8).write(to: root.appendingPathComponent(path))
        }
        try write("index.html", "<!doctype html><title>steno</title>")
        try write("app.js", "console.log('app')")
        try write("module.mjs", "export const x = 1")
        try write("style.css", "body{}")
        try write("logo.svg", "<svg/>")
        try write("data.json", "{}")
        try write("notes.txt", "notes")
        try write("sub/index.html", "<p>sub</p>")
        try write(".hidden", "hidden")
        try Data([0x89, 0x50, 0x4e, 0x47]).write(to: root.appendingPathComponent("icon.png"))
        try Data([0, 0x61, 0x73, 0x6d]).write(to: root.appendingPathComponent("engine.wasm"))
        try Data([0, 0, 1, 0]).write(to: root.appendingPathComponent("favicon.ico"))
        try Data(bigFile).write(to: root.appendingPathComponent("big.bin"))
        try Data("TOP SECRET".utf8).write(to: base.appendingPathComponent("secret.txt"))
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("link-out.txt").path,
                                  withDestinationPath: base.appendingPathComponent("secret.txt").path)
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("dir-out").path, withDestinationPath: base.path)
    }

    deinit { try? FileManager.default.removeItem(at: base) }
}

/// The web client's files through a real transport: content types, and every way out of the
/// root refused (libwebsockets decodes the path before `StaticFiles` sees it).
@Suite struct StaticFilesTests {
    static func server(_ fixture: WebRootFixture? = nil) throws -> TestServer {
        var settings = TestControl.Settings()
        settings.routes["/healthz"] = HTTPResponse(status: 200, contentType: "application/json",
                                                   text: #"{"status":"ok","sessions":0}"#, headers: [("X-Steno", "yes")])
        let files = fixture.flatMap { StaticFiles(root: $0.root.path) }
        settings.files = { path in files?.response(for: path) }
        return try TestServer(settings)
    }

    @Test func staticFilesHaveTheirContentTypes() throws {
        let fixture = try WebRootFixture()
        let server = try Self.server(fixture)
        let expected: [(String, String)] = [
            ("/", "text/html; charset=utf-8"),
            ("/index.html", "text/html; charset=utf-8"),
            ("/app.js", "text/javascript; charset=utf-8"),
            ("/module.mjs", "text/javascript; charset=utf-8"),
            ("/style.css", "text/css; charset=utf-8"),
            ("/logo.svg", "image/svg+xml"),
            ("/icon.png", "image/png"),
            ("/data.json", "application/json"),
            ("/engine.wasm", "application/wasm"),
            ("/favicon.ico", "image/x-icon"),
            ("/notes.txt", "text/plain; charset=utf-8"),
            ("/sub/", "text/html; charset=utf-8"),
            ("/sub", "text/html; charset=utf-8"),
        ]
        for (path, type) in expected {
            let r = try HTTPTestClient.get(port: server.port, path)
            #expect(r.status == 200, "\(path)")
            #expect(r.header("Content-Type") == type, "\(path)")
        }
        #expect(try HTTPTestClient.get(port: server.port, "/").bodyText == "<!doctype html><title>steno</title>")
        #expect(try HTTPTestClient.get(port: server.port, "/sub").bodyText == "<p>sub</p>")
        #expect(try HTTPTestClient.get(port: server.port, "/icon.png").body == [0x89, 0x50, 0x4e, 0x47])

        let big = try HTTPTestClient.get(port: server.port, "/big.bin")
        #expect(big.header("Content-Type") == "application/octet-stream")
        #expect(big.body == fixture.bigFile)

        let head = try HTTPTestClient.request(port: server.port, method: "HEAD", path: "/big.bin")
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == String(fixture.bigFile.count))

        // The delegate's routes come first.
        #expect(try HTTPTestClient.get(port: server.port, "/healthz").header("X-Steno") == "yes")
    }

    @Test func pathTraversalIsRefusedWith404() throws {
        let fixture = try WebRootFixture()
        let server = try Self.server(fixture)
        let attempts = [
            "/../secret.txt",
            "/sub/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2E%2E/secret.txt",
            "/sub/%2e%2e/%2e%2e/secret.txt",
            "/..%2fsecret.txt",
            "/%2e%2e%2fsecret.txt",
            "/%252e%252e/secret.txt",
            "/sub/..%5c..%5csecret.txt",
            "//secret.txt",
            "/link-out.txt",
            "/dir-out/secret.txt",
            "/.hidden",
            "/./.hidden",
            "/nothing-here.html",
            "/etc/passwd",
            "\(fixture.base.path)/secret.txt",
        ]
        for path in attempts {
            let r = try HTTPTestClient.get(port: server.port, path)
            #expect(r.status == 404, "\(path) → \(r.status)")
            #expect(!r.bodyText.contains("TOP SECRET"), "\(path)")
        }
        // An encoded NUL: lws's parser drops the connection without an answer.
        #expect(throws: TestClientError.self) { try HTTPTestClient.get(port: server.port, "/index.html%00.png") }
        // Dot segments that stay inside the root are fine.
        #expect(try HTTPTestClient.get(port: server.port, "/sub/%2e%2e/notes.txt").bodyText == "notes")
        // Still serving.
        #expect(try HTTPTestClient.get(port: server.port, "/notes.txt").bodyText == "notes")
    }

    @Test func withoutAWebRootEverythingUnknownIs404() throws {
        let server = try Self.server()
        #expect(try HTTPTestClient.get(port: server.port, "/").status == 404)
        #expect(try HTTPTestClient.get(port: server.port, "/index.html").status == 404)
    }
}
