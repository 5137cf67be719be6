import StenoCore

/// One frame of the hand-off between Steno and its Whisper worker (scripts/whisper_worker.py,
/// whose docstring is the other half of this contract): little-endian `u32` length of the
/// rest, `u8` kind, `u64` request id, `u32` JSON length, the JSON, then a payload (a request's
/// 16 kHz mono 16-bit PCM). One type encodes and decodes it, so the two cannot drift.
public struct WhisperFrame: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        case hello = 0, request = 1, result = 2, error = 3
        /// Worker → server: the ids of the batch it starts hearing now (`{"ids":[…]}`).
        case started = 4
        /// Server → worker: requests not to hear (`{"ids":[…]}`): their sessions are gone.
        case cancel = 5
    }

    public var kind: Kind
    public var id: UInt64
    public var json: [UInt8]
    public var payload: [UInt8]

    /// The most bytes after the length field a frame may have (the worker's own limit: 30 s of
    /// audio and 64 KiB of JSON).
    public static let maximumLength = 13 + 64 * 1024 + 16_000 * 2 * 30

    public init(kind: Kind, id: UInt64, json: [UInt8], payload: [UInt8] = []) {
        self.kind = kind
        self.id = id
        self.json = json
        self.payload = payload
    }

    /// A request for `samples` (16 kHz mono, -1...1; clipped) with `options` as JSON text.
    public static func request(id: UInt64, options: String, samples: ArraySlice<Float>) -> WhisperFrame {
        var pcm: [UInt8] = []
        pcm.reserveCapacity(samples.count * 2)
        for sample in samples {
            let clipped = sample.isNaN ? 0 : min(max(sample, -1), 1)
            let value = UInt16(bitPattern: Int16((clipped * 32767).rounded()))
            pcm.append(UInt8(value & 0xFF))
            pcm.append(UInt8(value >> 8))
        }
        return WhisperFrame(kind: .request, id: id, json: Array(options.utf8), payload: pcm)
    }

    /// A cancel of the requests `ids`.
    public static func cancel(_ ids: [UInt64]) -> WhisperFrame {
        WhisperFrame(kind: .cancel, id: 0, json: Array(#"{"ids":[\#(ids.map(String.init).joined(separator: ","))]}"#.utf8))
    }

    /// The frame as it goes on the pipe, length first.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        let rest = 13 + json.count + payload.count
        out.reserveCapacity(4 + rest)
        Self.append(UInt64(rest), bytes: 4, to: &out)
        out.append(kind.rawValue)
        Self.append(id, bytes: 8, to: &out)
        Self.append(UInt64(json.count), bytes: 4, to: &out)
        out += json
        out += payload
        return out
    }

    /// The length a frame's first four bytes announce, or an error past `maximumLength`.
    public static func length(header: [UInt8]) throws(StenoError) -> Int {
        guard header.count == 4 else { throw StenoError(.internal, "a Whisper frame header is 4 bytes") }
        let length = Int(read(header, at: 0, bytes: 4))
        guard length >= 13, length <= maximumLength else {
            throw StenoError(.internal, "the Whisper worker sent a frame of \(length) bytes")
        }
        return length
    }

    /// A frame from the bytes after its length field.
    public init(rest: [UInt8]) throws(StenoError) {
        guard rest.count >= 13, let kind = Kind(rawValue: rest[0]) else {
            throw StenoError(.internal, "the Whisper worker sent a frame of an unknown kind")
        }
        let jsonLength = Int(Self.read(rest, at: 9, bytes: 4))
        guard 13 + jsonLength <= rest.count else {
            throw StenoError(.internal, "the Whisper worker sent a frame whose JSON overruns it")
        }
        self.kind = kind
        self.id = Self.read(rest, at: 1, bytes: 8)
        self.json = Array(rest[13 ..< 13 + jsonLength])
        self.payload = Array(rest[(13 + jsonLength)...])
    }

    private static func append(_ value: UInt64, bytes: Int, to out: inout [UInt8]) {
        for i in 0..<bytes { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    private static func read(_ bytes: [UInt8], at offset: Int, bytes count: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<count { value |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        return value
    }
}
