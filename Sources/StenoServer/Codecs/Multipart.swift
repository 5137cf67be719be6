// multipart/form-data (RFC 7578), as OpenAI's clients post files: the parts of a body by name,
// each with its filename (for a file) and its bytes.

/// A form's parts.
struct MultipartForm: Sendable {
    struct Part: Sendable {
        var name: String
        var filename: String?
        var bytes: [UInt8]
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    var parts: [Part]

    /// The first part named `name`.
    subscript(name: String) -> Part? { parts.first { $0.name == name } }

    /// Every part named `name` (a repeated field such as `timestamp_granularities[]`).
    func all(_ name: String) -> [Part] { parts.filter { $0.name == name } }

    /// Reads `body` as sent with `contentType` (`multipart/form-data; boundary=…`); nil when it
    /// is not such a form.
    init?(body: [UInt8], contentType: String) {
        guard contentType.lowercased().hasPrefix("multipart/form-data"),
              let boundaryParameter = contentType.split(separator: ";").map({ $0.drop { $0 == " " } })
                .first(where: { $0.lowercased().hasPrefix("boundary=") }) else { return nil }
        var boundary = String(boundaryParameter.dropFirst("boundary=".count))
        if boundary.hasPrefix("\""), boundary.hasSuffix("\""), boundary.count >= 2 { boundary = String(boundary.dropFirst().dropLast()) }
        guard !boundary.isEmpty else { return nil }
        let delimiter = Array(("--" + boundary).utf8)
        var parts: [Part] = []
        guard var position = Self.find(delimiter, in: body, from: 0) else { return nil }
        while true {
            position += delimiter.count
            // "--" after a delimiter ends the form.
            if position + 1 < body.count, body[position] == UInt8(ascii: "-"), body[position + 1] == UInt8(ascii: "-") { break }
            guard let headEnd = Self.find(Array("\r\n\r\n".utf8), in: body, from: position),
                  let next = Self.find([13, 10] + delimiter, in: body, from: headEnd + 4) else { return nil }
            let head = String(decoding: body[position..<headEnd], as: UTF8.self)
            var name: String?
            var filename: String?
            for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-disposition:") {
                name = Self.parameter("name", in: line)
                filename = Self.parameter("filename", in: line)
            }
            if let name { parts.append(Part(name: name, filename: filename, bytes: Array(body[(headEnd + 4)..<next]))) }
            position = next + 2
        }
        self.parts = parts
    }

    private static func parameter(_ key: String, in line: Substring) -> String? {
        for piece in line.split(separator: ";") {
            let trimmed = piece.drop { $0 == " " }
            guard trimmed.lowercased().hasPrefix(key + "=") else { continue }
            var value = trimmed.dropFirst(key.count + 1)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            return String(value)
        }
        return nil
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        var i = start
        let first = needle[0]
        while i <= haystack.count - needle.count {
            if haystack[i] == first {
                var j = 1
                while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}
