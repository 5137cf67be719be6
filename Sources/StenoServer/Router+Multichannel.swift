// Connections that are several sessions, one per channel: Deepgram's `multichannel=true`
// (made as the connection opens) and `start`'s `multichannel` (made when that `start` comes).

import StenoCore
import StenoTransport

extension Router {
    /// A `start` with `multichannel`: the connection's session becomes one per channel, each
    /// started with the request for one channel, its events tagged with it (`StenoChannelCodec`).
    func splitChannels(_ id: ConnectionID, replacing single: StreamSession, _ request: StartRequest) {
        guard let count = request.multichannel else { return }
        registry.remove(single)
        admission.closed(ObjectIdentifier(single))
        single.lane.close(.cancel)
        let group = ChannelGroup(connection: id, count: count, sampleBytes: request.audio.encoding == .pcmF32LE ? 4 : 2,
                                 sink: context.handle)
        var each = request
        each.multichannel = nil
        var sessions: [StreamSession] = []
        for index in 0..<count {
            var server = context
            server.handle = group.member(index)
            let session = StreamSession(connection: id, remoteAddress: single.remoteAddress, server: server,
                                        route: SessionRoute(codec: StenoChannelCodec(channel: index), limits: Self.unresumable))
            sessions.append(session)
            registry.add(session, on: id)
            admission.opened(ObjectIdentifier(session), now: context.clock.now())
            if index > 0 { context.metrics.sessionsTotal.increment() }
        }
        groups[id] = (group, sessions)
        for session in sessions {
            session.input(.message(.start(each), now: context.clock.now(), wallClock: context.clock.wall()))
            if draining { session.input(.shutdown) }
        }
    }

    /// A multichannel connection's sessions are not resumed (one resume token for them all would be a new protocol).
    private static let unresumable: @Sendable (SessionLimits) -> SessionLimits = { limits in
        var limits = limits
        limits.resumeSeconds = 0
        return limits
    }

    /// The sessions of a multichannel connection, if `id` is one.
    func members(_ id: ConnectionID) -> [StreamSession]? { groups[id]?.sessions }
}
