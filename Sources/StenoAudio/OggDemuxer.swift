// Ogg (RFC 3533) as a byte stream cut anywhere: the packets of its first logical stream, in
// order, as they complete. Deepgram's clients may stream Ogg Opus (`encoding=opus`, or a
// container without `encoding`); Steno's pipeline takes Opus packets one by one.

/// Packets out of Ogg pages fed in pieces.
public struct OggDemuxer: Sendable {
    private var buffer: [UInt8] = []
    private var partial: [UInt8] = []
    private var serial: UInt32?
    /// Bytes that were not Ogg (the stream is then refused by its user).
    public private(set) var isBroken = false

    /// The largest page: a header of 27 + 255 bytes and 255 segments of 255.
    static let maxPage = 27 + 255 + 255 * 255

    public init() {}

    /// Takes more of the stream; returns the packets it completed.
    public mutating func feed(_ bytes: [UInt8]) -> [[UInt8]] {
        guard !isBroken else { return [] }
        buffer += bytes
        var packets: [[UInt8]] = []
        var offset = 0
        while buffer.count - offset >= 27 {
            guard buffer[offset] == 0x4F, buffer[offset + 1] == 0x67, buffer[offset + 2] == 0x67, buffer[offset + 3] == 0x53,
                  buffer[offset + 4] == 0 else {
                isBroken = true
                return packets
            }
            let segments = Int(buffer[offset + 26])
            guard buffer.count - offset >= 27 + segments else { break }
            let lacing = buffer[(offset + 27)..<(offset + 27 + segments)]
            let bodyLength = lacing.reduce(0) { $0 + Int($1) }
            let pageLength = 27 + segments + bodyLength
            guard buffer.count - offset >= pageLength else { break }
            var pageSerial: UInt32 = 0
            for i in 0..<4 { pageSerial |= UInt32(buffer[offset + 14 + i]) << (8 * i) }
            if serial == nil { serial = pageSerial }
            if pageSerial == serial {
                var position = offset + 27 + segments
                for value in lacing {
                    partial += buffer[position..<(position + Int(value))]
                    position += Int(value)
                    if value < 255 {
                        packets.append(partial)
                        partial = []
                    }
                }
            }
            offset += pageLength
        }
        buffer.removeFirst(offset)
        if buffer.count > Self.maxPage { isBroken = true }
        return packets
    }
}
