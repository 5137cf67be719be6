import Foundation

/// An HTTP response as read off the wire: status line, header fields, body.
public struct TestHTTPResponse: Equatable, Sendable, CustomStringConvertible {
    public var version = ""
    public var status = 0
    public var reason = ""
    public var headers: [(name: String, value: String)] = []
    public var body: [UInt8] = []

    public init() {}

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let n = name.lowercased()
        return headers.first { $0.name.lowercased() == n }?.value
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    public var description: String { "HTTP \(status) \(reason) \(headers.map { "\($0.name): \($0.value)" }) body \(body.count) bytes" }

    public static func == (a: TestHTTPResponse, b: TestHTTPResponse) -> Bool {
        a.status == b.status && a.reason == b.reason && a.body == b.body
            && a.headers.elementsEqual(b.headers) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Reads a status line and header fields from `stream` (not the body).
    public static func readHead(from stream: TestStream, deadline: Deadline) throws -> TestHTTPResponse {
        let head = try stream.read(through: Array("\r\n\r\n".utf8), deadline: deadline, limit: 64 * 1024)
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw TestClientError.protocolError("empty HTTP response head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let code = Int(parts[1]) else {
            throw TestClientError.protocolError("bad status line: \(statusLine)")
        }
        var r = TestHTTPResponse()
        r.version = String(parts[0])
        r.status = code
        r.reason = parts.count > 2 ? String(parts[2]) : ""
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw TestClientError.protocolError("bad header line: \(line)") }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            r.headers.append((name: String(line[..<colon]), value: value))
        }
        return r
    }

    /// Reads the body that follows the head: `Content-Length` bytes, or (without it)
    /// everything until the server closes. A HEAD response has no body.
    public mutating func readBody(from stream: TestStream, deadline: Deadline, isHead: Bool = false) throws {
        if isHead || status == 101 || status == 204 || status == 304 { return }
        if let length = header("content-length").flatMap({ Int($0) }) {
            body = try stream.read(exactly: length, deadline: deadline)
        } else {
            body = try stream.readToEnd(deadline: deadline)
        }
    }
}

/// One-shot HTTP/1.1 requests over a fresh connection.
public enum HTTPTestClient {
    public static func request(port: Int, method: String = "GET", path: String, headers: [(String, String)] = [],
                        body: [UInt8]? = nil, tls: Bool = false, timeout: Double = 5) throws -> TestHTTPResponse {
        let stream = tls ? try TestStream.tls(port: port) : try TestStream.tcp(port: port)
        defer { stream.close() }
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (n, v) in headers { text += "\(n): \(v)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        let deadline = Deadline(timeout)
        try stream.write(Array(text.utf8) + (body ?? []), timeout: timeout)
        var response = try TestHTTPResponse.readHead(from: stream, deadline: deadline)
        try response.readBody(from: stream, deadline: deadline, isHead: method == "HEAD")
        return response
    }

    public static func get(port: Int, _ path: String, headers: [(String, String)] = [], tls: Bool = false) throws -> TestHTTPResponse {
        try request(port: port, path: path, headers: headers, tls: tls)
    }
}
