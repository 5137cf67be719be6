// Reading JSON: the strict RFC 8259 parser with its limits (`JSONParser`), the error it
// throws, in plain words with a byte offset (`JSONError`), and the cursor that does the
// work over the UTF-8 input (`JSONReader`, private to this file). The values it makes are
// in JSON.swift.

// MARK: - Reading

/// Why a text is not acceptable JSON: a message in plain words and the byte offset it refers to.
public struct JSONError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// Offset in the UTF-8 input where the problem was found.
    public var offset: Int

    public init(_ message: String, at offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(message) (at byte \(offset))" }
}

/// A strict RFC 8259 parser with limits.
///
/// Guarantees: never traps on any input; recursion depth is bounded by `maxDepth`;
/// inputs longer than `maxBytes` are refused before parsing. Strict means: no comments,
/// no trailing commas, no leading zeros, no `NaN`/`Infinity`, no byte-order mark, no
/// control characters inside strings, valid UTF-8 only, no lone surrogates in `\u` escapes,
/// no duplicate keys in an object, nothing but whitespace after the value.
public struct JSONParser: Sendable {
    /// Maximum nesting of arrays and objects (the top-level container is depth 1).
    public var maxDepth: Int
    /// Maximum input size in bytes.
    public var maxBytes: Int

    public init(maxDepth: Int = 32, maxBytes: Int = 1 << 20) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }

    public func parse(_ text: String) throws(JSONError) -> JSONValue {
        var copy = text
        let result: Result<JSONValue, JSONError> = copy.withUTF8 { buffer in
            self.parseBuffer(buffer)
        }
        return try result.get()
    }

    public func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        let result: Result<JSONValue, JSONError> = bytes.withUnsafeBufferPointer { buffer in
            self.parseBuffer(buffer)
        }
        return try result.get()
    }

    private func parseBuffer(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONError> {
        guard buffer.count <= maxBytes else {
            return .failure(JSONError("the text is larger than \(maxBytes) bytes", at: 0))
        }
        var reader = JSONReader(bytes: buffer, maxDepth: maxDepth)
        do throws(JSONError) {
            reader.skipWhitespace()
            let value = try reader.readValue(depth: 0)
            reader.skipWhitespace()
            if reader.position < buffer.count {
                throw JSONError("unexpected \(reader.describeByte(at: reader.position)) after the JSON value",
                                at: reader.position)
            }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }
}

/// The cursor over the input. Lives only inside `JSONParser.parseBuffer`.
private struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var position = 0
    var scratch: [UInt8] = []

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    var atEnd: Bool { position >= bytes.count }

    func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    func describeByte(at offset: Int) -> String {
        guard offset < bytes.count else { return "end of input" }
        let byte = bytes[offset]
        if byte >= 0x21 && byte < 0x7F { return "character '\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(hex2(byte))"
    }

    func unexpected(_ expecting: String) -> JSONError {
        if atEnd { return JSONError("unexpected end of input, expected \(expecting)", at: position) }
        return JSONError("unexpected \(describeByte(at: position)), expected \(expecting)", at: position)
    }

    mutating func readValue(depth: Int) throws(JSONError) -> JSONValue {
        guard let byte = peek() else { throw unexpected("a value") }
        switch byte {
        case UInt8(ascii: "{"): return try readObject(depth: depth + 1)
        case UInt8(ascii: "["): return try readArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): try readLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try readLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try readLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try readNumber())
        default: throw unexpected("a value")
        }
    }

    mutating func readLiteral(_ word: StaticString) throws(JSONError) {
        let start = position
        let count = word.utf8CodeUnitCount
        let literal = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for i in 0..<count {
            guard position < bytes.count, bytes[position] == literal[i] else {
                position = start
                throw unexpected("a value")
            }
            position += 1
        }
    }

    mutating func enter(_ depth: Int) throws(JSONError) {
        if depth > maxDepth {
            throw JSONError("nesting is deeper than \(maxDepth) levels", at: position)
        }
    }

    mutating func readObject(depth: Int) throws(JSONError) -> JSONValue {
        try enter(depth)
        position += 1  // {
        var object = JSONObject()
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            position += 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw unexpected("a string key") }
            let keyOffset = position
            let key = try readString()
            if object[key] != nil {
                throw JSONError("duplicate key \"\(clippedForError(key))\"", at: keyOffset)
            }
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw unexpected("':' after a key") }
            position += 1
            skipWhitespace()
            object[key] = try readValue(depth: depth)
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"): position += 1; return .object(object)
            default: throw unexpected("',' or '}' in an object")
            }
        }
    }

    mutating func readArray(depth: Int) throws(JSONError) -> JSONValue {
        try enter(depth)
        position += 1  // [
        var array: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            position += 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try readValue(depth: depth))
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): position += 1; return .array(array)
            default: throw unexpected("',' or ']' in an array")
            }
        }
    }

    mutating func readDigits() -> Int {
        let start = position
        while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { position += 1 }
        return position - start
    }

    mutating func readNumber() throws(JSONError) -> Double {
        let start = position
        if peek() == UInt8(ascii: "-") { position += 1 }
        guard let first = peek(), first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else {
            throw unexpected("a digit")
        }
        if first == UInt8(ascii: "0") {
            position += 1
            if let next = peek(), next >= UInt8(ascii: "0"), next <= UInt8(ascii: "9") {
                throw JSONError("numbers must not have leading zeros", at: start)
            }
        } else {
            _ = readDigits()
        }
        if peek() == UInt8(ascii: ".") {
            position += 1
            guard readDigits() > 0 else { throw unexpected("a digit after the decimal point") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard readDigits() > 0 else { throw unexpected("a digit in the exponent") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONError("number \(text.prefix(40)) is out of range", at: start)
        }
        return value
    }

    /// Reads a string starting at its opening quote; validates UTF-8 and escapes.
    mutating func readString() throws(JSONError) -> String {
        let start = position
        position += 1  // opening quote
        let contentStart = position
        // Fast path: no escapes.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[contentStart..<position])
                position += 1
                guard let string = String(validating: slice, as: UTF8.self) else {
                    throw JSONError("a string is not valid UTF-8", at: start)
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 {
                throw JSONError("control character 0x\(hex2(byte)) in a string must be escaped", at: position)
            }
            position += 1
        }
        // Slow path: copy what we have, then decode escapes.
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[contentStart..<position]))
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                guard let string = String(validating: scratch, as: UTF8.self) else {
                    throw JSONError("a string is not valid UTF-8", at: start)
                }
                return string
            }
            if byte < 0x20 {
                throw JSONError("control character 0x\(hex2(byte)) in a string must be escaped", at: position)
            }
            if byte != UInt8(ascii: "\\") {
                scratch.append(byte)
                position += 1
                continue
            }
            let escapeOffset = position
            position += 1
            guard let kind = peek() else { break }
            position += 1
            switch kind {
            case UInt8(ascii: "\""): scratch.append(0x22)
            case UInt8(ascii: "\\"): scratch.append(0x5C)
            case UInt8(ascii: "/"): scratch.append(0x2F)
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                let unit = try readHex4(escapeOffset)
                var scalarValue = UInt32(unit)
                if unit >= 0xD800 && unit <= 0xDBFF {
                    guard peek() == UInt8(ascii: "\\"), position + 1 < bytes.count,
                          bytes[position + 1] == UInt8(ascii: "u") else {
                        throw JSONError("\\u escape is a lone surrogate", at: escapeOffset)
                    }
                    position += 2
                    let low = try readHex4(escapeOffset)
                    guard low >= 0xDC00 && low <= 0xDFFF else {
                        throw JSONError("\\u escape is a lone surrogate", at: escapeOffset)
                    }
                    scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else if unit >= 0xDC00 && unit <= 0xDFFF {
                    throw JSONError("\\u escape is a lone surrogate", at: escapeOffset)
                }
                guard let scalar = Unicode.Scalar(scalarValue) else {
                    throw JSONError("invalid \\u escape", at: escapeOffset)
                }
                UTF8.encode(scalar) { scratch.append($0) }
            default:
                throw JSONError("invalid escape in a string", at: escapeOffset)
            }
        }
        throw JSONError("unterminated string", at: start)
    }

    mutating func readHex4(_ escapeOffset: Int) throws(JSONError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = peek() else { throw JSONError("invalid \\u escape", at: escapeOffset) }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONError("invalid \\u escape", at: escapeOffset)
            }
            value = value << 4 | UInt16(digit)
            position += 1
        }
        return value
    }
}

private func hex2(_ byte: UInt8) -> String {
    String(decoding: [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]], as: UTF8.self)
}
