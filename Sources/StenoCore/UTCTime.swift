/// A wall-clock instant in UTC with millisecond resolution, written as ISO 8601
/// (`2025-03-07T14:05:09.042Z`). StenoCore never reads a clock: the server passes one in.
public struct UTCTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// From seconds since the Unix epoch (as `clock_gettime(CLOCK_REALTIME)` gives them);
    /// non-finite or absurd values are clamped to the years 0000...9999.
    public init(secondsSince1970 seconds: Double) {
        let ms = seconds.isFinite ? min(max(seconds * 1000, Double(Self.minMillis)), Double(Self.maxMillis)) : 0
        self.millisecondsSince1970 = CoreMath.floor(ms) ?? 0
    }

    /// 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z.
    static let minMillis: Int64 = -62_167_219_200_000
    static let maxMillis: Int64 = 253_402_300_799_999

    public static func < (lhs: UTCTime, rhs: UTCTime) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, always 24 characters (years outside 0000...9999 are clamped).
    public var iso8601: String {
        let ms = min(max(millisecondsSince1970, Self.minMillis), Self.maxMillis)
        // Floor division, so instants before 1970 land on the right day.
        var days = ms / 86_400_000
        var msOfDay = ms % 86_400_000
        if msOfDay < 0 {
            msOfDay += 86_400_000
            days -= 1
        }
        let (year, month, day) = Self.civilDate(daysSince1970: days)
        let hour = msOfDay / 3_600_000
        let minute = (msOfDay / 60_000) % 60
        let second = (msOfDay / 1000) % 60
        let milli = msOfDay % 1000
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T"
            + pad(hour, 2) + ":" + pad(minute, 2) + ":" + pad(second, 2) + "." + pad(milli, 3) + "Z"
    }

    public var description: String { iso8601 }

    /// Reads what `iso8601` writes (`YYYY-MM-DDTHH:MM:SS.mmmZ`; the fraction may have 0-9
    /// digits, read to the millisecond); nil for anything else.
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ from: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[from..<(from + count)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        let separators: [(Int, Character)] = [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":")]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1.asciiValue }),
              let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var millis: Int64 = 0
        if bytes.count > 20 {
            let digits = bytes.count - 21
            guard bytes[19] == UInt8(ascii: "."), (1...9).contains(digits), let fraction = number(20, min(digits, 3)),
                  number(20, digits) != nil else { return nil }
            millis = fraction * [100, 10, 1][min(digits, 3) - 1]
        }
        // Days from 1970-01-01 of a proleptic Gregorian date (the inverse of `civilDate`).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        self.init(millisecondsSince1970: ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
    }

    /// Proleptic Gregorian date of a day count from 1970-01-01, by the era arithmetic
    /// (400-year cycles of 146,097 days, years starting in March so leap days fall last).
    static func civilDate(daysSince1970: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = daysSince1970 + 719_468  // days since 0000-03-01
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0 = March
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}

/// Zero-padded decimal of a non-negative number.
private func pad(_ value: Int64, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
