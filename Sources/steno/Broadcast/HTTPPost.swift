import CCurlShims

/// One HTTP(S) POST through libcurl, blocking the calling thread (a bridge's own). Why a
/// wrapper: libcurl's options are set through a variadic C function (`steno_http_post`).
enum HTTPPost {
    struct Answer: Sendable, Equatable {
        var status: Int
        var body: String
    }

    /// The answer, or the reason there was none (DNS, connect, TLS, timeout, dropped).
    static func send(_ url: String, body: String, contentType: String = "text/plain; charset=utf-8",
                     timeout: Double = 10, caFile: String? = nil) -> Result<Answer, HTTPPostFailure> {
        var status = 0
        var response = [CChar](repeating: 0, count: 4096)
        var error = [CChar](repeating: 0, count: 512)
        let bytes = Array(body.utf8)
        let responseCapacity = response.count
        let errorCapacity = error.count
        let result = bytes.withUnsafeBytes { raw in
            steno_http_post(url, contentType, raw.baseAddress, raw.count, Int(timeout * 1000), caFile, &status,
                            &response, responseCapacity, &error, errorCapacity)
        }
        guard result == 0 else {
            return .failure(HTTPPostFailure(message: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return .success(Answer(status: status, body: String(decoding: response.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
    }
}

struct HTTPPostFailure: Error, Equatable {
    var message: String
}
