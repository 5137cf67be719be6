/// Where a channel's broadcast is: its publisher is streaming (`live`, also while a dropped
/// connection may still be resumed), ended it (`ended`: `end` or `cancel`, or the server ended
/// it in order: the session limit, a shutdown), or went away without ending it (`lost`: the
/// connection dropped and was not resumed in time, the publisher stopped reading or sending,
/// or its session failed).
public enum PublisherState: String, Sendable, Hashable {
    case live, ended, lost

    /// How a publisher's session that closed in `phase` leaves its broadcast.
    public static func after(_ phase: SessionPhase) -> PublisherState {
        switch phase {
        case .ended, .cancelled, .failed(.sessionLimit), .failed(.shuttingDown): return .ended
        case .awaitingStart, .streaming, .finalizing, .ending: return .live
        case .failed, .disconnected: return .lost
        }
    }
}

/// What a broadcast viewer (`/v1/listen?channel=NAME`) is sent when it joins, and which of
/// the publisher's events it is sent after that.
///
/// A viewer gets `joined`, then the channel's finals so far (backfill), then the volatile
/// result showing, then the publisher's live `volatile`/`final`/`speech` events. Its connection
/// numbers them in its own `seq`. To avoid missing or repeating a final, take the backfill and
/// subscribe to live events under the same lock as the publisher's events are published.
public enum ViewerWelcome {
    /// `joined`, then the state of the channel's latest broadcast (`publisher`, if it had
    /// one), then every final so far, then the volatile result showing (if any).
    /// `includeWords` should be the publisher's `words` choice.
    public static func events(channel: String, startedAt: UTCTime, backfill finals: [RecognitionResult],
                              showingVolatile: RecognitionResult? = nil, includeWords: Bool,
                              publisher: (state: PublisherState, broadcast: String)? = nil) -> [EncodedEvent] {
        var events: [EncodedEvent] = []
        events.reserveCapacity(finals.count + 3)
        events.append(ServerEvent.joined(channel: channel, startedAt: startedAt).encoded())
        if let publisher {
            events.append(ServerEvent.publisher(publisher.state, broadcast: publisher.broadcast, startedAt: startedAt).encoded())
        }
        for final in finals { events.append(ServerEvent.final(final, includeWords: includeWords).encoded()) }
        if let showingVolatile, !showingVolatile.text.isEmpty {
            events.append(ServerEvent.volatile(showingVolatile, includeWords: includeWords).encoded())
        }
        return events
    }
}
