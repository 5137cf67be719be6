/// What a broadcast viewer (`/v1/listen?channel=NAME`) is sent when it joins, and which of
/// the publisher's events it is sent after that.
///
/// A viewer gets `joined`, then the channel's finals so far (backfill), then the volatile
/// result showing, then the publisher's live `volatile`/`final`/`speech` events. Its connection
/// numbers them in its own `seq`. To avoid missing or repeating a final, take the backfill and
/// subscribe to live events under the same lock as the publisher's events are published.
public enum ViewerWelcome {
    /// `joined`, then every final so far, then the volatile result showing (if any).
    /// `includeWords` should be the publisher's `words` choice.
    public static func events(channel: String, startedAt: UTCTime, backfill finals: [RecognitionResult],
                              showingVolatile: RecognitionResult? = nil, includeWords: Bool) -> [EncodedEvent] {
        var events: [EncodedEvent] = []
        events.reserveCapacity(finals.count + 2)
        events.append(ServerEvent.joined(channel: channel, startedAt: startedAt).encoded())
        for final in finals { events.append(ServerEvent.final(final, includeWords: includeWords).encoded()) }
        if let showingVolatile, !showingVolatile.text.isEmpty {
            events.append(ServerEvent.volatile(showingVolatile, includeWords: includeWords).encoded())
        }
        return events
    }
}
