// A small, strict JSON reader (RFC 8259) and a writer tuned for the server's events.
//
// Why our own: the client's text frames are untrusted, and we want exact control of
// limits (size, nesting depth), of error messages in plain words, and of how numbers are
// written (times with millisecond precision, never `1.2000000000000002`). No Foundation.

// MARK: - Values

/// A parsed JSON value.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// Every JSON number, as the nearest `Double` (finite: out-of-range numbers are rejected).
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A short name of the value's kind for error messages: "a string", "an object" …
    public var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// This value written as compact JSON text (keys in their original order).
    public var jsonText: String {
        var writer = JSONWriter()
        writer.value(self)
        return writer.text
    }
}

/// A JSON object: members by key, plus the order the keys appeared in.
/// Keys are unique (the parser rejects duplicates). Equality ignores key order.
public struct JSONObject: Sendable, Hashable {
    public private(set) var keys: [String] = []
    private var members: [String: JSONValue] = [:]

    public init() {}

    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        for (key, value) in pairs { self[key] = value }
    }

    public var count: Int { keys.count }

    /// The member named `key`, or nil. Setting a new key appends it to `keys`; setting nil removes it.
    public subscript(key: String) -> JSONValue? {
        get { members[key] }
        set {
            if let newValue {
                if members.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if members.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool { lhs.members == rhs.members }
    public func hash(into hasher: inout Hasher) { hasher.combine(members) }
}

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

    /// Limits suited to client control messages (small and shallow).
    public static let messages = JSONParser(maxDepth: 16, maxBytes: 64 * 1024)

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

private let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

private func hex2(_ byte: UInt8) -> String {
    String(decoding: [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]], as: UTF8.self)
}

// MARK: - Writing

/// Builds compact JSON text in a byte buffer, managing commas itself.
///
/// Guarantees: output is valid JSON when calls are balanced (`beginObject`/`endObject`,
/// `key` before every value inside an object); strings are escaped (quotes, backslash,
/// every control character, U+2028/U+2029); numbers are finite (non-finite numbers are
/// written as `0`, since JSON has no NaN or infinity).
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    /// One entry per open container: whether it already has a member.
    private var hasMember: [Bool] = []
    private var afterKey = false

    public init(capacity: Int = 128) {
        bytes.reserveCapacity(capacity)
    }

    /// The text written so far.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        if let last = hasMember.last {
            if last { bytes.append(UInt8(ascii: ",")) }
            hasMember[hasMember.count - 1] = true
        }
    }

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        hasMember.append(false)
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        _ = hasMember.popLast()
    }

    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        hasMember.append(false)
    }

    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        _ = hasMember.popLast()
    }

    /// Writes an object key; the next value call writes its value.
    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    public mutating func string(_ value: String) {
        separate()
        appendQuoted(value)
    }

    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: value ? Self.trueBytes : Self.falseBytes)
    }

    public mutating func null() {
        separate()
        bytes.append(contentsOf: Self.nullBytes)
    }

    public mutating func integer<T: BinaryInteger>(_ value: T) {
        separate()
        appendInteger(value)
    }

    /// A number rounded to `places` decimals (0...9), trailing zeros dropped:
    /// `decimal(1.2000000000000002, places: 3)` writes `1.2`; `decimal(3.0, places: 3)` writes `3`.
    public mutating func decimal(_ value: Double, places: Int) {
        separate()
        appendDecimal(value, places: places)
    }

    /// A time in seconds with millisecond precision (`12.345`, `1.2`, `0`).
    public mutating func seconds(_ value: Double) {
        decimal(value, places: 3)
    }

    /// Seconds written as `seconds(_:)` writes them, as text: for logs, messages and help.
    public static func secondsText(_ value: Double) -> String {
        var w = JSONWriter(capacity: 16)
        w.seconds(value)
        return w.text
    }

    /// Any number: integral values up to 2^53 as integers, others in Swift's shortest form.
    public mutating func number(_ value: Double) {
        separate()
        appendNumber(value)
    }

    /// Writes a whole `JSONValue`.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .number(let n): number(n)
        case .string(let s): string(s)
        case .array(let items):
            beginArray()
            for item in items { self.value(item) }
            endArray()
        case .object(let object):
            beginObject()
            for name in object.keys {
                if let member = object[name] {
                    key(name)
                    self.value(member)
                }
            }
            endObject()
        }
    }

    // Convenience for object members.
    public mutating func field(_ name: String, _ value: String) { key(name); string(value) }
    public mutating func field(_ name: String, _ value: Bool) { key(name); bool(value) }
    public mutating func field(_ name: String, integer value: Int) { key(name); integer(value) }
    public mutating func field(_ name: String, seconds value: Double) { key(name); seconds(value) }

    private static let trueBytes: [UInt8] = Array("true".utf8)
    private static let falseBytes: [UInt8] = Array("false".utf8)
    private static let nullBytes: [UInt8] = Array("null".utf8)

    private mutating func appendQuoted(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        for scalar in string.unicodeScalars {
            let v = scalar.value
            switch v {
            case 0x22: bytes.append(0x5C); bytes.append(0x22)
            case 0x5C: bytes.append(0x5C); bytes.append(0x5C)
            case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(0x5C); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(0x5C); bytes.append(UInt8(ascii: "f"))
            case 0x00..<0x20, 0x7F, 0x2028, 0x2029:
                appendUnicodeEscape(UInt16(v))
            case 0x20..<0x7F:
                bytes.append(UInt8(v))
            default:
                UTF8.encode(scalar) { bytes.append($0) }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendUnicodeEscape(_ unit: UInt16) {
        bytes.append(0x5C)
        bytes.append(UInt8(ascii: "u"))
        bytes.append(hexDigits[Int((unit >> 12) & 0xF)] | 0x20)
        bytes.append(hexDigits[Int((unit >> 8) & 0xF)] | 0x20)
        bytes.append(hexDigits[Int((unit >> 4) & 0xF)] | 0x20)
        bytes.append(hexDigits[Int(unit & 0xF)] | 0x20)
    }

    private mutating func appendNumber(_ value: Double) {
        guard value.isFinite else {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        if value.magnitude < 9_007_199_254_740_992, let integer = CoreMath.exactInteger(value) {
            appendInteger(integer)
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
    }

    private mutating func appendInteger<T: BinaryInteger>(_ value: T) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        appendMagnitude(UInt64(clamping: value.magnitude))
    }

    private mutating func appendMagnitude(_ magnitude: UInt64) {
        var digits: [UInt8] = []
        var rest = magnitude
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10))
            rest /= 10
        } while rest > 0
        bytes.append(contentsOf: digits.reversed())
    }

    private mutating func appendDecimal(_ value: Double, places rawPlaces: Int) {
        let places = min(max(rawPlaces, 0), 9)
        var scale: UInt64 = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = value.isFinite ? value * Double(scale) : 0
        // Beyond the range where every integer is exact, print the number as it is.
        guard scaled.magnitude < 9.0e15, let integer = CoreMath.nearest(scaled) else {
            appendNumber(value)
            return
        }
        if integer < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = integer.magnitude
        appendMagnitude(magnitude / scale)
        var fraction = magnitude % scale
        guard fraction != 0 else { return }
        var width = places
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        bytes.append(UInt8(ascii: "."))
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: width)
        var index = width - 1
        while fraction > 0 && index >= 0 {
            digits[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: fraction % 10)
            fraction /= 10
            index -= 1
        }
        bytes.append(contentsOf: digits)
    }
}
