// Deepgram's `multichannel=true`: each channel of the stream is its own recognition (a call's
// two sides, an interview with a microphone each). The connection hosts one session per channel,
// each a `StreamSession` like any other: the group splits the interleaved audio among them, and
// stands between them and the connection (`MemberSink`): they all write to it, it is read while
// every one of them wants it read, and it closes once the last of them has closed.

import StenoCore
import StenoSystem
import StenoTransport

/// The sessions of one multichannel connection.
final class ChannelGroup: Sendable {
    let connection: ConnectionID
    let count: Int
    /// Bytes of one channel's sample as it comes (2 for 16-bit PCM, 1 for G.711).
    let sampleBytes: Int
    private let sink: any ConnectionSink
    /// The interleaved audio as sent, digested for the one `Metadata`.
    let audioDigest = SHA256.Stream()

    private struct State {
        var partial: [UInt8] = []
        var closed: [Bool]
        var reading: [Bool]
        var close: (code: UInt16, reason: String)?
        var ended = 0
    }
    private let state: Locked<State>

    init(connection: ConnectionID, count: Int, sampleBytes: Int, sink: any ConnectionSink) {
        self.connection = connection
        self.count = count
        self.sampleBytes = sampleBytes
        self.sink = sink
        state = Locked(State(closed: Array(repeating: false, count: count), reading: Array(repeating: true, count: count)))
    }

    /// Each channel's bytes of an interleaved frame (whole sample frames; the rest waits for the
    /// next frame).
    func split(_ bytes: [UInt8]) -> [[UInt8]] {
        audioDigest.update(bytes)
        let frame = sampleBytes * count
        let whole = state.withLock { s -> [UInt8] in
            var all = s.partial + bytes
            let cut = all.count - all.count % frame
            s.partial = Array(all[cut...])
            all.removeLast(all.count - cut)
            return all
        }
        var channels = Array(repeating: [UInt8](), count: count)
        for index in channels.indices { channels[index].reserveCapacity(whole.count / count) }
        var offset = 0
        while offset < whole.count {
            for channel in 0..<count {
                channels[channel] += whole[(offset + channel * sampleBytes)..<(offset + (channel + 1) * sampleBytes)]
            }
            offset += frame
        }
        return channels
    }

    /// A member's session has ended: true for the last, which says `Metadata` for them all.
    func memberEnded() -> Bool {
        state.withLock { s in
            s.ended += 1
            return s.ended == count
        }
    }

    /// The sink member `index` writes through.
    func member(_ index: Int) -> MemberSink { MemberSink(group: self, index: index) }

    fileprivate func send(_ message: OutgoingMessage) -> SendResult { sink.send(connection, message) }

    fileprivate func close(_ index: Int, code: UInt16, reason: String, discardQueued: Bool) {
        let last = state.withLock { s -> (code: UInt16, reason: String)? in
            guard !s.closed[index] else { return nil }
            s.closed[index] = true
            // The first close that is not a normal end says how the connection ends.
            if s.close == nil || s.close?.code == 1000 { s.close = (code, reason) }
            return s.closed.allSatisfy { $0 } || discardQueued ? s.close : nil
        }
        if let last { sink.close(connection, code: last.code, reason: last.reason, discardQueued: discardQueued) }
    }

    fileprivate func setReading(_ index: Int, _ reading: Bool) {
        let all = state.withLock { s -> Bool in
            s.reading[index] = reading
            return s.reading.allSatisfy { $0 }
        }
        sink.setReading(connection, all)
    }

    fileprivate func queuedBytes() -> Int? { sink.queuedBytes(connection) }
}

/// One member session's view of the connection (its `ServerContext.handle`).
struct MemberSink: ConnectionSink {
    let group: ChannelGroup
    let index: Int

    func send(_ id: ConnectionID, _ message: OutgoingMessage) -> SendResult { group.send(message) }
    func close(_ id: ConnectionID, code: UInt16, reason: String, discardQueued: Bool) {
        group.close(index, code: code, reason: reason, discardQueued: discardQueued)
    }
    func setReading(_ id: ConnectionID, _ reading: Bool) { group.setReading(index, reading) }
    func queuedBytes(_ id: ConnectionID) -> Int? { group.queuedBytes() }
    // Multichannel sessions are not resumed.
    func retainWritten(_ id: ConnectionID, bytes: Int) {}
    func adopt(_ id: ConnectionID, _ backlog: OutboundBacklog, after ordinal: UInt64, retaining bytes: Int) -> Bool { false }
    func detach(_ id: ConnectionID) -> OutboundBacklog? { nil }
}
