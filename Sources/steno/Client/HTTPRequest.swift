import CCurlShims

/// One HTTP(S) request through libcurl, blocking the calling thread (a bridge's own, or a
/// command's). Why a wrapper: libcurl's options are set through a variadic C function
/// (`steno_http_request`).
enum HTTPRequest {
    struct Answer: Sendable, Equatable {
        var status: Int
        var body: String
    }

    /// POSTs `body`; the answer, or the reason there was none (DNS, connect, TLS, timeout, dropped).
    static func post(_ url: String, body: String, contentType: String = "text/plain; charset=utf-8",
                     timeout: Double = 10, caFile: String? = nil) -> Result<Answer, HTTPRequestFailure> {
        send(url, body: Array(body.utf8), contentType: contentType, authorization: nil, timeout: timeout, caFile: caFile)
    }

    /// GETs `url` (at most 1 MiB of its answer is read).
    static func get(_ url: String, authorization: String? = nil, timeout: Double = 10,
                    caFile: String? = nil) -> Result<Answer, HTTPRequestFailure> {
        send(url, body: nil, contentType: "", authorization: authorization, timeout: timeout, caFile: caFile)
    }

    private static func send(_ url: String, body: [UInt8]?, contentType: String, authorization: String?, timeout: Double,
                             caFile: String?) -> Result<Answer, HTTPRequestFailure> {
        var status = 0
        var response = [CChar](repeating: 0, count: body == nil ? 1 << 20 : 4096)
        var error = [CChar](repeating: 0, count: 512)
        let responseCapacity = response.count
        let errorCapacity = error.count
        let result: Int32
        if let body {
            // A POST needs a non-NULL body pointer even when it is empty (NULL means GET).
            result = body.withUnsafeBytes { raw in
                steno_http_request(url, contentType, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), raw.count, authorization,
                                   Int(timeout * 1000), caFile, &status, &response, responseCapacity, &error, errorCapacity)
            }
        } else {
            result = steno_http_request(url, contentType, nil, 0, authorization, Int(timeout * 1000), caFile, &status,
                                        &response, responseCapacity, &error, errorCapacity)
        }
        func text(_ bytes: [CChar]) -> String {
            String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        guard result == 0 else { return .failure(HTTPRequestFailure(message: text(error))) }
        return .success(Answer(status: status, body: text(response)))
    }
}

struct HTTPRequestFailure: Error, Equatable {
    var message: String
}
