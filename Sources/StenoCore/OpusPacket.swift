/// Reads an Opus packet's duration from its header (RFC 6716 §3.1), without decoding.
///
/// The server counts seconds of Opus audio received on its network thread with this.
/// Only the TOC byte and, for code 3, the frame-count byte are read; frame lengths inside
/// the packet are not checked (the decoder does that and conceals what it cannot decode).
public enum OpusPacket {
    /// Samples per second Opus durations are counted in.
    public static let sampleRate = 48_000

    /// Longest packet RFC 6716 allows: 120 ms.
    public static let maxSamples = 5_760

    /// Duration of one frame, in 48 kHz samples, for a TOC configuration number (0...31):
    /// SILK-only 0...11 → 10/20/40/60 ms, hybrid 12...15 → 10/20 ms, CELT-only 16...31 → 2.5/5/10/20 ms.
    public static func frameSamples(config: Int) -> Int? {
        switch config {
        case 0...11: return [480, 960, 1920, 2880][config & 3]
        case 12...15: return [480, 960][config & 1]
        case 16...31: return [120, 240, 480, 960][config & 3]
        default: return nil
        }
    }

    /// The number of frames a packet holds, or nil if its header is malformed
    /// (empty packet, code 3 without its frame-count byte, or code 3 with 0 frames).
    public static func frameCount<Bytes: Collection<UInt8>>(_ packet: Bytes) -> Int? {
        guard let toc = packet.first else { return nil }
        switch toc & 0x03 {
        case 0: return 1
        case 1, 2: return 2
        default:
            let second = packet.index(after: packet.startIndex)
            guard second != packet.endIndex else { return nil }
            let count = Int(packet[second] & 0x3F)
            return count == 0 ? nil : count
        }
    }

    /// The packet's duration in 48 kHz samples, or nil if the header is malformed:
    /// empty, code 3 with no frame-count byte or 0 frames, or more than 120 ms in total.
    public static func samples<Bytes: Collection<UInt8>>(_ packet: Bytes) -> Int? {
        guard let toc = packet.first,
              let perFrame = frameSamples(config: Int(toc >> 3)),
              let frames = frameCount(packet) else { return nil }
        let total = perFrame * frames
        return total <= maxSamples ? total : nil
    }

    /// The packet's duration in seconds, or nil if the header is malformed.
    public static func duration<Bytes: Collection<UInt8>>(_ packet: Bytes) -> Double? {
        samples(packet).map { Double($0) / Double(sampleRate) }
    }
}
