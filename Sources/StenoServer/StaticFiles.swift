import Foundation
import StenoTransport

/// Files of the web client, served from one directory.
///
/// Written by hand rather than with an lws mount: the mount would answer on its own
/// (before the delegate sees the request), and its protection against `..` relies on
/// lws's URI normalisation alone. Here every request path is checked segment by
/// segment and the resolved real path must stay inside the real root, so a symlink
/// out of the root is refused too. Anything refused is a plain 404.
struct StaticFiles: Sendable {
    /// Real (symlink-free) path of the root, without a trailing slash.
    let root: String
    /// Files larger than this are not served (the web client is a few small files).
    let maxFileSize: Int

    init?(root: String, maxFileSize: Int = 64 << 20) {
        guard let real = StaticFiles.realPath(root) else { return nil }
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: real, isDirectory: &isDir), isDir.boolValue else { return nil }
        self.root = real == "/" ? "" : real
        self.maxFileSize = maxFileSize
    }

    /// The file for a request path (already percent-decoded once by lws), or nil.
    func file(for path: String) -> (path: String, contentType: String)? {
        guard path.hasPrefix("/"), !path.contains("\0"), !path.contains("\\") else { return nil }
        var segments: [Substring] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            // No dot files or dot segments; and nothing that decodes (again) to one,
            // in case something upstream decoded only once.
            if segment.hasPrefix(".") { return nil }
            if segment.contains("%") {
                guard let decoded = String(segment).removingPercentEncoding else { return nil }
                if decoded.hasPrefix(".") || decoded.contains("/") || decoded.contains("\\") { return nil }
            }
            segments.append(segment)
        }
        var candidate = root + "/" + segments.joined(separator: "/")
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: candidate, isDirectory: &isDir) else { return nil }
        if isDir.boolValue {
            candidate += candidate.hasSuffix("/") ? "index.html" : "/index.html"
        }
        guard let real = StaticFiles.realPath(candidate), real.hasPrefix(root + "/") else { return nil }
        var st = stat()
        guard stat(real, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_size) <= maxFileSize else { return nil }
        return (real, StaticFiles.contentType(forPath: real))
    }

    /// A response for GET or HEAD of `path`, or nil when there is no such file.
    func response(for path: String) -> HTTPResponse? {
        guard let file = file(for: path), let data = FileManager.default.contents(atPath: file.path) else { return nil }
        return HTTPResponse(status: 200, contentType: file.contentType, body: [UInt8](data),
                            headers: [("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-cache")])
    }

    static func contentType(forPath path: String) -> String {
        let ext = path.split(separator: "/").last.flatMap { name -> Substring? in
            guard let dot = name.lastIndex(of: ".") else { return nil }
            return name[name.index(after: dot)...]
        }.map { $0.lowercased() } ?? ""
        switch ext {
        case "html", "htm": return "text/html; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "json", "map": return "application/json"
        case "wasm": return "application/wasm"
        case "ico": return "image/x-icon"
        case "txt": return "text/plain; charset=utf-8"
        case "vtt": return "text/vtt; charset=utf-8"
        default: return "application/octet-stream"
        }
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
