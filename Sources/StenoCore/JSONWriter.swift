// Writing JSON: `JSONWriter`, which builds compact text in a byte buffer for the server's
// events, managing commas and escapes itself and writing numbers exactly as asked (times
// with millisecond precision). The values it can write whole are in JSON.swift.

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
