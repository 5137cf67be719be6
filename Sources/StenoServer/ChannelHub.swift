import StenoCore
import StenoTransport
import Synchronization

/// Broadcast channels: a `start` with `"channel":NAME` publishes the session's
/// `volatile`/`final`/`speech` events, and `/v1/listen?channel=NAME` viewers follow them.
///
/// - A viewer gets `joined`, then every final so far (backfill), then the volatile showing,
///   then the live events. Backfill and subscription happen under the hub's lock, the same
///   lock `publish` takes, so a viewer never misses or repeats a final.
/// - Each viewer has its own bounded outbound queue in the transport. A viewer that does not
///   read overflows its own queue and is closed with 4008; the publisher and other viewers
///   never wait for it (`publish` only queues).
/// - One publisher at a time. While a channel has a live publisher, another `start` on it is
///   told so (a non-fatal error) and runs unpublished. When the publisher leaves, viewers
///   stay; the next publisher's events follow a fresh `joined` (its timeline starts at 0).
/// - A channel keeps its finals for `/v1/channels/NAME/captions.vtt|.srt` after its
///   publisher leaves; the hub keeps at most `maxIdleChannels` channels that have neither
///   publisher nor viewers, forgetting the oldest.
final class ChannelHub: Sendable {
    private struct Channel {
        var publisher: String?
        var startedAt: UTCTime?
        var includeWords = true
        var finals: [RecognitionResult] = []
        var showingVolatile: RecognitionResult?
        var viewers: Set<ConnectionID> = []
        /// Order of becoming idle, for forgetting old channels.
        var idleSince: UInt64 = 0
    }

    private struct State {
        var channels: [String: Channel] = [:]
        var viewerChannel: [ConnectionID: String] = [:]
        var idleCounter: UInt64 = 0
    }

    private let state = Mutex(State())
    private let handle: any ConnectionSink
    private let metrics: StenoMetrics
    let maxIdleChannels: Int

    init(handle: any ConnectionSink, metrics: StenoMetrics, maxIdleChannels: Int = 64) {
        self.handle = handle
        self.metrics = metrics
        self.maxIdleChannels = maxIdleChannels
    }

    /// A session wants to publish on `name`. False if another live session holds it.
    func claim(_ name: String, session: String, startedAt: UTCTime, includeWords: Bool) -> Bool {
        state.withLock { s in
            var channel = s.channels[name] ?? Channel()
            if let holder = channel.publisher, holder != session { return false }
            channel.publisher = session
            channel.startedAt = startedAt
            channel.includeWords = includeWords
            channel.finals = []
            channel.showingVolatile = nil
            let joined = ViewerWelcome.events(channel: name, startedAt: startedAt, backfill: [], includeWords: includeWords)
            for viewer in channel.viewers {
                for event in joined { deliver(event, to: viewer, &s) }
            }
            s.channels[name] = channel
            return true
        }
    }

    /// An event of the publisher of `name` (called under the publisher's session lock, in
    /// `seq` order). `final` is the result a `final` event carries, for backfill.
    func publish(_ event: EncodedEvent, final: RecognitionResult?, volatile: RecognitionResult?,
                 on name: String, from session: String) {
        guard event.kind.isBroadcast else { return }
        state.withLock { s in
            guard let viewers = s.channels[name]?.viewers, s.channels[name]?.publisher == session else { return }
            // In place: a copy of the channel would copy its whole list of finals per event.
            switch event.kind {
            case .final:
                if let final { s.channels[name]?.finals.append(final) }
                s.channels[name]?.showingVolatile = nil
            case .volatile:
                s.channels[name]?.showingVolatile = volatile
            default:
                break
            }
            for viewer in viewers { deliver(event, to: viewer, &s) }
        }
    }

    /// The publisher of `name` is gone.
    func release(_ name: String, session: String) {
        state.withLock { s in
            guard var channel = s.channels[name], channel.publisher == session else { return }
            channel.publisher = nil
            channel.showingVolatile = nil
            s.channels[name] = channel
            markIdleIfUnused(name, &s)
        }
    }

    /// A viewer connected: `joined`, backfill, and from now on the live events.
    func addViewer(_ id: ConnectionID, channel name: String, now: UTCTime) {
        state.withLock { s in
            var channel = s.channels[name] ?? Channel()
            channel.viewers.insert(id)
            s.channels[name] = channel
            s.viewerChannel[id] = name
            let welcome = ViewerWelcome.events(channel: name, startedAt: channel.startedAt ?? now, backfill: channel.finals,
                                               showingVolatile: channel.showingVolatile, includeWords: channel.includeWords)
            for event in welcome { deliver(event, to: id, &s) }
        }
        metrics.viewersActive.increment()
    }

    /// A viewer's connection closed.
    func removeViewer(_ id: ConnectionID) {
        let removed = state.withLock { s -> Bool in
            guard let name = s.viewerChannel.removeValue(forKey: id) else { return false }
            s.channels[name]?.viewers.remove(id)
            markIdleIfUnused(name, &s)
            return true
        }
        if removed { metrics.viewersActive.decrement() }
    }

    /// Whether `id` is a viewer.
    func isViewer(_ id: ConnectionID) -> Bool { state.withLock { $0.viewerChannel[id] != nil } }

    /// Every viewer (to close them when the server drains).
    var viewers: [ConnectionID] { state.withLock { Array($0.viewerChannel.keys) } }

    /// The channel's finals so far, or nil for a channel the hub does not know.
    func finals(of name: String) -> [RecognitionResult]? {
        state.withLock { $0.channels[name]?.finals }
    }

    // MARK: -

    /// Queues an event for a viewer; a viewer whose queue is full is closed with 4008.
    private func deliver(_ event: EncodedEvent, to viewer: ConnectionID, _ s: inout State) {
        let result = handle.send(viewer, OutgoingMessage(event))
        if result == .overflow {
            metrics.closeSlowConsumer(viewer, on: handle)
        } else {
            metrics.eventSent(event.kind.rawValue)
        }
    }

    private func markIdleIfUnused(_ name: String, _ s: inout State) {
        guard var channel = s.channels[name], channel.publisher == nil, channel.viewers.isEmpty else { return }
        s.idleCounter += 1
        channel.idleSince = s.idleCounter
        s.channels[name] = channel
        let idle = s.channels.filter { $0.value.publisher == nil && $0.value.viewers.isEmpty }
        if idle.count > maxIdleChannels {
            let oldest = idle.sorted { $0.value.idleSince < $1.value.idleSince }.prefix(idle.count - maxIdleChannels)
            for (key, _) in oldest { s.channels.removeValue(forKey: key) }
        }
    }
}
