/// Where a message's number stands in its bytes: the decimal digits at `digits`, which
/// whoever delivers the message replaces with the number it gives it (an event's `seq`).
///
/// The one place a number is written into a message: `EncodedEvent.numbered` (local sessions,
/// tests), and the server's connections as they write each frame (StenoTransport writes it
/// straight into the frame's buffer, behind the headroom libwebsockets needs, so the message is
/// copied once).
public struct SeqSlot: Sendable, Hashable {
    /// The bytes the number replaces; within the message.
    public let digits: Range<Int>

    public init(_ digits: Range<Int>) {
        self.digits = digits
    }

    /// How many bytes a message of `byteCount` bytes has once numbered `seq`.
    public func count(numbering byteCount: Int, seq: UInt64) -> Int {
        byteCount - digits.count + Self.width(seq)
    }

    /// Writes `bytes` numbered `seq` to `out`, which has room for `count(numbering:seq:)` bytes:
    /// the bytes before the slot, the decimal digits of `seq`, then the bytes after the slot,
    /// each byte written once. Returns where the digits now are.
    @discardableResult
    public func write(_ bytes: [UInt8], seq: UInt64, to out: UnsafeMutableRawPointer) -> SeqSlot {
        let width = Self.width(seq)
        bytes.withUnsafeBytes { source in
            guard let base = source.baseAddress else { return }
            out.copyMemory(from: base, byteCount: digits.lowerBound)
            (out + digits.lowerBound + width).copyMemory(from: base + digits.upperBound,
                                                         byteCount: bytes.count - digits.upperBound)
        }
        var rest = seq
        var at = digits.lowerBound + width
        repeat {
            at -= 1
            out.storeBytes(of: UInt8(ascii: "0") + UInt8(rest % 10), toByteOffset: at, as: UInt8.self)
            rest /= 10
        } while rest > 0
        return SeqSlot(digits.lowerBound..<(digits.lowerBound + width))
    }

    /// `bytes` numbered `seq`, and where the digits now are.
    public func numbered(_ bytes: [UInt8], seq: UInt64) -> (bytes: [UInt8], slot: SeqSlot) {
        var slot = self
        let total = count(numbering: bytes.count, seq: seq)
        let out = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            // At least one byte (the number's first digit), so there is an address.
            slot = write(bytes, seq: seq, to: UnsafeMutableRawPointer(buffer.baseAddress!))
            initialized = total
        }
        return (out, slot)
    }

    /// Decimal digits of `value`.
    private static func width(_ value: UInt64) -> Int {
        var rest = value
        var count = 1
        while rest >= 10 {
            rest /= 10
            count += 1
        }
        return count
    }
}
