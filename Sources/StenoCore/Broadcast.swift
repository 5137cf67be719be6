/// The event stream of one broadcast viewer (`/v1/listen?channel=NAME`).
///
/// A viewer gets `joined`, then the channel's finals so far (backfill), then the publisher's
/// live `volatile`/`final`/`speech` events. The viewer's events carry its own `seq` 1, 2, 3 …
/// This type only numbers and filters; the server keeps one per viewer, with its own bounded
/// queue. To avoid missing or repeating a final, take the backfill and subscribe to live
/// events under the same lock as the publisher's session.
public struct ViewerFeed: Sendable {
    public let channel: String
    public let startedAt: UTCTime
    private var nextSeq: UInt64 = 1

    public init(channel: String, startedAt: UTCTime) {
        self.channel = channel
        self.startedAt = startedAt
    }

    /// `joined`, then every final so far, then the volatile result showing (if any), numbered
    /// from the viewer's next seq. `includeWords` should be the publisher's `words` choice.
    public mutating func welcome(backfill finals: [RecognitionResult], showingVolatile: RecognitionResult? = nil,
                                 includeWords: Bool) -> [EncodedEvent] {
        var events: [EncodedEvent] = []
        events.reserveCapacity(finals.count + 2)
        events.append(next(.joined(channel: channel, startedAt: startedAt)))
        for final in finals { events.append(next(.final(final, includeWords: includeWords))) }
        if let showingVolatile, !showingVolatile.text.isEmpty {
            events.append(next(.volatile(showingVolatile, includeWords: includeWords)))
        }
        return events
    }

    /// The publisher's event renumbered for this viewer, or nil when viewers do not get that
    /// kind (only volatile, final and speech are relayed).
    public mutating func relay(_ event: EncodedEvent) -> EncodedEvent? {
        guard event.kind.isBroadcast else { return nil }
        defer { nextSeq += 1 }
        return event.resequenced(nextSeq)
    }

    private mutating func next(_ event: ServerEvent) -> EncodedEvent {
        defer { nextSeq += 1 }
        return event.encoded(seq: nextSeq)
    }
}
