import Dispatch
import StenoCore
import StenoPrometheus
import StenoTransport
import StenoSystem

/// Broadcast channels: a `start` with `"channel":NAME` publishes the session's
/// `volatile`/`final`/`speech` events, and `/v1/listen?channel=NAME` viewers follow them.
///
/// - A viewer gets `joined`, the state of the channel's latest broadcast (`publisher`), every
///   final so far (backfill), the volatile showing, then the live events. Backfill and
///   subscription happen under the hub's lock, the same lock `publish` takes, so a viewer
///   never misses or repeats a final.
/// - Each viewer has its own bounded outbound queue in the transport. A viewer that does not
///   read overflows its own queue and is closed with 4008; the publisher and other viewers
///   never wait for it (`publish` only queues).
/// - One publisher at a time. While a channel has a live publisher, another `start` on it is
///   told so (a non-fatal error) and runs unpublished. When the publisher leaves, viewers
///   stay and are told how it left (`publisher` `ended` or `lost`); the next publisher's events
///   follow a fresh `joined` and `publisher` `live` (its timeline starts at 0).
/// - Each publisher's session is a *broadcast* with an id, its finals, its caption cues and
///   its HLS subtitle track (`HLSCaptionTrack`, fed as cues settle). The latest one is served
///   at the channel's own caption URLs; the `maxPastBroadcasts` before it by their id. The hub
///   keeps at most `maxIdleChannels` channels that have neither publisher nor viewers,
///   forgetting the oldest.
final class ChannelHub: Sendable {
    /// One publisher's time on a channel.
    struct Broadcast: Sendable {
        /// Also its HLS media sequence base: unique on the channel, across restarts too
        /// (seconds since 1970 at its start, or more).
        let id: String
        let session: String
        let startedAt: UTCTime
        var state: PublisherState = .live
        var endedAt: UTCTime?
        var includeWords: Bool
        /// The finals its viewers were sent, each as its event carried it (`EncodedEvent.result`):
        /// backfill, caption files, HLS cues, `/v1/channels`. Not the publishing session's
        /// transcript (`TranscriptAssembler.finals`; for a local session, this is a prefix of
        /// it, or all of it): the broadcast outlives its session (past broadcasts, files),
        /// another instance's has no session here (its finals come from Redis), and backfill runs
        /// under the hub's lock, which is taken under a session's and so can never take one.
        var finals: [RecognitionResult] = []
        /// The volatile showing (with text), for a viewer who joins mid-utterance.
        var showingVolatile: RecognitionResult?
        /// Its captions' cues and HLS track.
        var captions: CaptionTrack
        /// Its languages: the publisher's captions and, for a translated session, the original.
        var renditions = Renditions()
        /// The original's, when it carries one (made of its finals' `original`).
        var original: CaptionTrack?
        /// The instance whose publisher it is, when that is another one (played in from Redis
        /// by the `ChannelRelay`); nil: a session of this server.
        var origin: String? = nil
        /// The last caption floor handed to the relay (floors go out a second apart at most).
        var relayedFloor = 0.0
    }

    /// A channel as `/v1/channels` lists it.
    struct Summary: Sendable {
        var name: String
        var state: String
        var broadcast: String?
        var startedAt: UTCTime?
        var viewers: Int
        var finals: Int
        var languages: [String]
    }

    struct Channel {
        var current: Broadcast?
        /// Older broadcasts, oldest first.
        var past: [Broadcast] = []
        var viewers: Set<ConnectionID> = []
        /// The language each viewer that asked for one follows (`Renditions.choose`).
        var asked: [ConnectionID: String] = [:]
        /// The lowest media sequence number the next broadcast may use.
        var nextSequence = 0
        /// Order of becoming idle, for forgetting old channels.
        var idleSince: UInt64 = 0
        let counters: StenoMetrics.ChannelCounters

        var isLive: Bool { current?.state == .live }
        /// Whether its viewers hear of the relay's link (`relay` events): unless this
        /// instance's own publisher is live on it, what they see comes through Redis.
        var followsTheRelay: Bool { current.map { $0.origin != nil || $0.state != .live } ?? true }
    }

    struct State {
        var channels: [String: Channel] = [:]
        var viewerChannel: [ConnectionID: String] = [:]
        var idleCounter: UInt64 = 0
        /// The relay's reader has lost Redis (its `relayChanged`): kept here, under the lock
        /// that adds viewers, so that a viewer joining meanwhile is told exactly once.
        var relayDown = false
        /// Local sessions that asked for a channel another instance's publisher had: each is
        /// called (outside the lock) once that broadcast is over, to claim it again.
        var waiting: [String: [@Sendable () -> Void]] = [:]
    }

    let state = Locked(State())
    private let handle: any ConnectionSink
    private let metrics: StenoMetrics
    let maxIdleChannels: Int
    let maxPastBroadcasts: Int
    let layout: CaptionLayout
    let hls: HLSConfiguration
    /// Where local broadcasts are also written for the other instances (`--redis`); set
    /// before the server starts.
    private let relayBox = Locked<ChannelRelay?>(nil)
    var relay: ChannelRelay? {
        get { relayBox.withLock { $0 } }
        set { relayBox.withLock { $0 = newValue } }
    }

    init(handle: any ConnectionSink, metrics: StenoMetrics, maxIdleChannels: Int = 64, maxPastBroadcasts: Int = 4,
         layout: CaptionLayout = CaptionLayout(), hls: HLSConfiguration = HLSConfiguration()) {
        self.handle = handle
        self.metrics = metrics
        self.maxIdleChannels = maxIdleChannels
        self.maxPastBroadcasts = max(0, maxPastBroadcasts)
        self.layout = layout
        self.hls = hls
    }

    /// A session wants to publish on `name`. False if another live session holds it. `proof`:
    /// the digest of the session's resume token, kept with its lease in the cluster.
    func claim(_ name: String, session: String, startedAt: UTCTime, includeWords: Bool, renditions: Renditions = Renditions(),
               proof: String? = nil) -> Bool {
        let relay = self.relay
        return state.withLock { s in
            claim(name, session: session, startedAt: startedAt, includeWords: includeWords, renditions: renditions, origin: nil,
                  id: nil, relay: relay, proof: proof, &s)
        }
    }

    /// `claim` for a local session (`origin` nil) or another instance's broadcast `id`.
    func claim(_ name: String, session: String, startedAt: UTCTime, includeWords: Bool, renditions: Renditions = Renditions(),
               origin: String?, id: String?, relay: ChannelRelay?, proof: String? = nil, _ s: inout State) -> Bool {
        var channel = s.channels[name] ?? Channel(counters: metrics.channelCounters(name))
        if let current = channel.current, current.state == .live, current.session != session,
           origin == nil || current.origin == nil { return false }
        if let previous = channel.current {
            channel.past.append(previous)
            if channel.past.count > maxPastBroadcasts { channel.past.removeFirst(channel.past.count - maxPastBroadcasts) }
        }
        // Another instance's broadcast keeps its id, which is its HLS media sequence base too.
        let sequence = id.flatMap { Int($0) } ?? max(Int(startedAt.millisecondsSince1970 / 1000), channel.nextSequence)
        let track = CaptionTrack(cues: CaptionCueBuilder(layout: layout),
                                 hls: HLSCaptionTrack(configuration: hls, sequenceBase: sequence, startedAt: startedAt))
        var broadcast = Broadcast(id: String(sequence), session: session, startedAt: startedAt, includeWords: includeWords,
                                  captions: track)
        broadcast.origin = origin
        broadcast.renditions = renditions
        if renditions.original != nil { broadcast.original = track }
        channel.current = broadcast
        s.channels[name] = channel
        if origin == nil {
            relay?.enqueue(.live(broadcast: broadcast.id, startedAt: startedAt, includeWords: includeWords, renditions: renditions),
                           channel: name, session: session, proof: proof)
        }
        for viewer in channel.viewers {
            for event in welcome(viewer, channel: name, channel, now: startedAt) { deliver(event, to: viewer, counters: channel.counters) }
        }
        return true
    }

    /// An event of the publisher of `name` (called under the publisher's session lock, in
    /// `seq` order). A `final` event's result (`EncodedEvent.result`) is kept for backfill and
    /// captions, a `volatile`'s (with text) for viewers who join while it shows.
    func publish(_ event: EncodedEvent, on name: String, from session: String) {
        guard event.kind.isBroadcast else { return }
        let relay = self.relay
        state.withLock { s in
            // In place, holding no copy: a copy of the broadcast would copy its whole list of
            // finals per event.
            guard s.channels[name]?.current?.session == session, s.channels[name]?.current?.state == .live,
                  let viewers = s.channels[name]?.viewers, let counters = s.channels[name]?.counters else { return }
            if s.channels[name]?.current?.origin == nil {
                relay?.enqueue(.event(event), channel: name, session: session)
            }
            switch event.kind {
            case .final:
                if let final = event.result {
                    s.channels[name]?.current?.finals.append(final)
                    s.channels[name]?.current?.captions.add(final)
                    if let original = final.originalResult { s.channels[name]?.current?.original?.add(original) }
                }
                s.channels[name]?.current?.showingVolatile = nil
            case .volatile:
                // An empty volatile clears what showed.
                s.channels[name]?.current?.showingVolatile = event.result.flatMap { $0.text.isEmpty ? nil : $0 }
            default:
                break
            }
            guard let channel = s.channels[name], let current = channel.current, !channel.asked.isEmpty else {
                for viewer in viewers { deliver(event, to: viewer, counters: counters) }
                return
            }
            let original = Self.original(of: event, includeWords: current.includeWords)
            for viewer in viewers {
                if current.renditions.choose(channel.asked[viewer]) == .original {
                    if let original { deliver(original, to: viewer, counters: counters) }
                } else {
                    deliver(event, to: viewer, counters: counters)
                }
            }
        }
    }

    /// How far the publisher of `name` has got: no final still to come starts before
    /// `floor` (`SessionMachine.captionFloor`). Settles cues and publishes HLS segments.
    func advance(_ name: String, session: String, floor: Double) {
        let relay = self.relay
        state.withLock { s in
            guard s.channels[name]?.current?.session == session, s.channels[name]?.current?.state == .live else { return }
            if let relay, s.channels[name]?.current?.origin == nil, floor >= (s.channels[name]?.current?.relayedFloor ?? 0) + 1 {
                s.channels[name]?.current?.relayedFloor = floor
                relay.enqueue(.floor(floor), channel: name, session: session)
            }
            s.channels[name]?.current?.captions.settle(before: floor)
            s.channels[name]?.current?.original?.settle(before: floor)
        }
    }

    /// The publisher of `name` is gone: its broadcast is over after `duration` seconds of
    /// audio, `ended` or `lost` (`PublisherState.after`), and its viewers are told so.
    func release(_ name: String, session: String, state outcome: PublisherState, duration: Double, now: UTCTime) {
        let relay = self.relay
        let waiting = state.withLock { s -> [@Sendable () -> Void] in
            guard var channel = s.channels[name], var broadcast = channel.current, broadcast.session == session,
                  broadcast.state == .live else { return [] }
            broadcast.state = outcome == .live ? .lost : outcome
            if broadcast.origin == nil {
                relay?.enqueue(.end(state: broadcast.state, duration: duration, endedAt: now), channel: name, session: session)
            }
            broadcast.endedAt = now
            broadcast.showingVolatile = nil
            broadcast.captions.end(duration: duration)
            broadcast.original?.end(duration: duration)
            channel.nextSequence = broadcast.captions.hls.sequenceBase + broadcast.captions.hls.published
            channel.current = broadcast
            s.channels[name] = channel
            let event = ServerEvent.publisher(broadcast.state, broadcast: broadcast.id, startedAt: broadcast.startedAt).encoded()
            for viewer in channel.viewers { deliver(event, to: viewer, counters: channel.counters) }
            markIdleIfUnused(name, &s)
            return takeWaiting(name, &s)
        }
        // Local sessions that waited for the channel try again, on a thread of their own: this
        // may run under a session's lock, and they take theirs.
        for retry in waiting { DispatchQueue.global().async(execute: retry) }
    }

    /// A viewer connected: `joined`, the broadcast's state, backfill, and from now on the live events.
    /// `language`: the rendition it follows (`Renditions.choose`; nil, the publisher's own).
    func addViewer(_ id: ConnectionID, channel name: String, language: String? = nil, now: UTCTime) {
        state.withLock { s in
            var channel = s.channels[name] ?? Channel(counters: metrics.channelCounters(name))
            channel.viewers.insert(id)
            channel.asked[id] = language
            s.channels[name] = channel
            s.viewerChannel[id] = name
            channel.counters.viewers.increment()
            for event in welcome(id, channel: name, channel, now: now) { deliver(event, to: id, counters: channel.counters) }
            if s.relayDown && channel.followsTheRelay {
                deliver(ServerEvent.relay(up: false).encoded(), to: id, counters: channel.counters)
            }
        }
        metrics.viewersActive.increment()
    }

    /// A viewer's connection closed.
    func removeViewer(_ id: ConnectionID) {
        let removed = state.withLock { s -> Bool in
            guard let name = s.viewerChannel.removeValue(forKey: id) else { return false }
            if s.channels[name]?.viewers.remove(id) != nil { s.channels[name]?.counters.viewers.decrement() }
            s.channels[name]?.asked[id] = nil
            markIdleIfUnused(name, &s)
            return true
        }
        if removed { metrics.viewersActive.decrement() }
    }

    /// A viewer that is not reading (its writes stalled): closed with 4008 as if its queue had
    /// overflowed, and counted for its channel. False if `id` is no viewer.
    func dropSlowViewer(_ id: ConnectionID) -> Bool {
        let counters = state.withLock { s -> StenoMetrics.ChannelCounters? in
            s.viewerChannel[id].flatMap { s.channels[$0]?.counters }
        }
        guard let counters else { return false }
        metrics.closeSlowConsumer(id, on: handle)
        counters.dropped.increment()
        return true
    }

    /// Every viewer (to close them when the server drains).
    var viewers: [ConnectionID] { state.withLock { Array($0.viewerChannel.keys) } }

    /// Whether the hub knows `name`.
    func knows(_ name: String) -> Bool { state.withLock { $0.channels[name] != nil } }

    /// A broadcast of `name`: the latest (`id` nil) or the one with that id. Its finals, start
    /// and languages only (no copy of its track).
    func broadcast(_ name: String, id: String? = nil)
        -> (finals: [RecognitionResult], startedAt: UTCTime?, renditions: Renditions)? {
        state.withLock { s in
            guard let channel = s.channels[name] else { return nil }
            guard let id else {
                return (channel.current?.finals ?? [], channel.current?.startedAt, channel.current?.renditions ?? Renditions())
            }
            let all = channel.past + (channel.current.map { [$0] } ?? [])
            guard let found = all.first(where: { $0.id == id }) else { return nil }
            return (found.finals, found.startedAt, found.renditions)
        }
    }

    /// The broadcasts of `name`, oldest first: id, state, start, end, finals.
    func broadcasts(of name: String) -> [(id: String, state: PublisherState, startedAt: UTCTime, endedAt: UTCTime?, finals: Int)]? {
        state.withLock { s in
            guard let channel = s.channels[name] else { return nil }
            return (channel.past + (channel.current.map { [$0] } ?? [])).map {
                ($0.id, $0.state, $0.startedAt, $0.endedAt, $0.finals.count)
            }
        }
    }

    /// The live HLS playlist of `name`'s latest broadcast (empty and open while it has none) in
    /// `language` (`Renditions.choose`); nil for a channel the hub does not know or a language
    /// its broadcast does not carry. `query` goes on every segment URI.
    func playlist(_ name: String, language: String? = nil, query: String) -> String? {
        state.withLock { s in
            guard let channel = s.channels[name] else { return nil }
            guard let current = channel.current else {
                return HLSCaptionTrack(configuration: hls, sequenceBase: channel.nextSequence, startedAt: UTCTime(millisecondsSince1970: 0))
                    .playlist(query: query)
            }
            return Self.track(of: current, language: language)?.playlist(query: query)
        }
    }

    /// HLS segment `sequence` of `name` in `language`, from whichever of its broadcasts has it.
    func segment(_ name: String, sequence: Int, language: String? = nil) -> String? {
        state.withLock { s in
            guard let channel = s.channels[name] else { return nil }
            for broadcast in ([channel.current].compactMap { $0 } + channel.past.reversed()) {
                if let body = Self.track(of: broadcast, language: language)?.segment(sequence) { return body }
            }
            return nil
        }
    }

    /// Every channel the hub knows, by name.
    var summaries: [Summary] {
        state.withLock { s in
            s.channels.keys.sorted().map { name in
                let channel = s.channels[name]!
                return Summary(name: name, state: channel.current?.state.rawValue ?? "idle", broadcast: channel.current?.id,
                               startedAt: channel.current?.startedAt, viewers: channel.viewers.count,
                               finals: channel.current?.finals.count ?? 0, languages: channel.current?.renditions.names ?? [])
            }
        }
    }

    // MARK: - Other instances' broadcasts (from the ChannelRelay's reader thread)

    /// Channels with viewers here: the ones whose streams the relay follows.
    var viewedChannels: [String] {
        state.withLock { s in s.channels.compactMap { $0.value.viewers.isEmpty ? nil : $0.key } }
    }

    // MARK: -

    /// Queues an event for a viewer; a viewer whose queue is full is closed with 4008.
    func deliver(_ event: EncodedEvent, to viewer: ConnectionID, counters: StenoMetrics.ChannelCounters) {
        let result = handle.send(viewer, OutgoingMessage(event))
        if result == .overflow {
            metrics.closeSlowConsumer(viewer, on: handle)
            counters.dropped.increment()
        } else {
            metrics.eventSent(event.kind.rawValue)
            counters.events.increment()
        }
    }

    private func markIdleIfUnused(_ name: String, _ s: inout State) {
        guard var channel = s.channels[name], !channel.isLive, channel.viewers.isEmpty else { return }
        s.idleCounter += 1
        channel.idleSince = s.idleCounter
        s.channels[name] = channel
        let idle = s.channels.filter { !$0.value.isLive && $0.value.viewers.isEmpty }
        if idle.count > maxIdleChannels {
            let oldest = idle.sorted { $0.value.idleSince < $1.value.idleSince }.prefix(idle.count - maxIdleChannels)
            for (key, _) in oldest { s.channels.removeValue(forKey: key) }
        }
    }
}
