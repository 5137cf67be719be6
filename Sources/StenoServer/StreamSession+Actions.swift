// How a `StreamSession` carries out what its driver asks of the server, under the session's
// lock: each event queued on the connection (or held while detached) and published to the
// channel, the channel claimed when the session starts and freed when it closes, reading paused
// and resumed, the close.

import Dispatch
import StenoCore
import StenoSession
import StenoSystem
import StenoTransport

extension StreamSession {
    // MARK: The driver's requests

    /// The pipeline starts: the session's channel is claimed, if it asked for one.
    func starting(_ request: StartRequest, _ s: inout SessionState<Link>) -> [SessionAction] {
        var actions: [SessionAction] = []
        if let channel = request.channel {
            let model = server.sessionConfiguration.models.first { $0.engine.model == request.model }
            let renditions = Renditions(request: request, modelLanguage: model?.engine.language)
            if let previous = request.continues {
                // Its talker lost `previous` with its instance: that broadcast's lease is this
                // session's at once if the token proves it (else it expires as it would).
                server.channels.relay?.takeOver(channel, for: sessionID, from: previous)
            }
            if server.channels.claim(channel, session: sessionID, startedAt: s.machine.startedAt ?? core.clock.wall(),
                                     includeWords: request.words, renditions: renditions, proof: channelProof) {
                s.local.channel = channel
            } else if server.channels.waitForRemotePublisher(channel, retry: { [weak self] in self?.claimWaitedChannel() }) {
                // Another instance's publisher has it, perhaps one whose instance has just died
                // (its talker may be this very client, come back here): this one publishes
                // once that broadcast is over, what it said meanwhile included.
                s.local.waitingFor = (channel, request.words, renditions)
                actions = s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                    "channel \"\(channel)\" already has a publisher on another instance; this session is published once that one is gone")))
            } else {
                actions = s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                    "channel \"\(channel)\" already has a publisher; this session is not published")))
            }
        }
        server.log.info("session \(sessionID) \(s.local.connection.map(String.init(describing:)) ?? "") started: \(request.audio) from \(remoteAddress)"
            + (request.channel.map { " on channel \($0)" } ?? ""))
        return actions
    }

    func setReading(_ reading: Bool, _ s: inout SessionState<Link>) {
        if let connection = s.local.connection { server.handle.setReading(connection, reading) }
    }

    func close(code: UInt16, reason: String, _ s: inout SessionState<Link>) {
        if let connection = s.local.connection {
            let (wireCode, wireReason) = s.local.codec.close(code: code, reason: reason)
            server.handle.close(connection, code: wireCode, reason: wireReason, discardQueued: code == 4008)
        }
    }

    /// What the codec held back for the end of the batch goes to the client now.
    func performed(_ s: inout SessionState<Link>) -> [SessionAction] {
        let messages = s.local.codec.flush()
        return messages.isEmpty ? [] : send(messages, &s)
    }

    /// Once the protocol has closed nothing more is published: the channel is free for the next
    /// publisher now, not when this connection has finished closing; and the session no longer
    /// counts among the live ones.
    func protocolClosed(_ s: inout SessionState<Link>) {
        releaseChannel(&s)
        if s.local.waitingFor != nil { waitForChannelAfterClose() }
        server.sessions.closed(self)
    }

    /// A talker whose instance died may finish its speech here before the dead publisher's lease
    /// has expired: its finals still reach the channel's viewers once the channel is free. The
    /// session is kept for that until twice the lease and 10 s more have passed (a dead
    /// instance's lease is noticed expired within a lease and two looks, later on a loaded
    /// machine; a publisher still there after that is alive, and this session not published).
    private func waitForChannelAfterClose() {
        let wait = 2 * (server.channels.relay?.settings.lease ?? 0) + 10
        DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [self] in
            mutate { s in
                if let (channel, _, _) = s.local.waitingFor {
                    server.log.info("session \(sessionID) was not published: channel \(channel) still has a publisher on another instance")
                }
                s.local.waitingFor = nil
            }
        }
    }

    /// The channel this session waited for is free here now (its other instance's publisher
    /// is gone): it claims it, and its finals so far are the broadcast's first. A session that
    /// has closed meanwhile publishes all its finals and its end at once.
    func claimWaitedChannel() {
        mutate { s in
            guard let (channel, words, renditions) = s.local.waitingFor, s.local.channel == nil else { return }
            guard server.channels.claim(channel, session: sessionID, startedAt: s.machine.startedAt ?? core.clock.wall(),
                                        includeWords: words, renditions: renditions, proof: channelProof) else {
                // Another instance's publisher again: wait for it too; a local one: give up.
                if !server.channels.waitForRemotePublisher(channel, retry: { [weak self] in self?.claimWaitedChannel() }) {
                    s.local.waitingFor = nil
                }
                return
            }
            s.local.channel = channel
            s.local.waitingFor = nil
            for final in s.machine.finals {
                server.channels.publish(ServerEvent.final(final, includeWords: words).encoded(), on: channel, from: sessionID)
            }
            server.log.info("session \(sessionID) publishes on channel \(channel) now (\(s.machine.finals.count) finals so far)")
            if s.machine.isClosed { releaseChannel(&s) }
        }
    }

    /// Frees the session's channel for the next publisher (once its last event is published).
    private func releaseChannel(_ s: inout SessionState<Link>) {
        guard let channel = s.local.channel else { return }
        server.channels.release(channel, session: sessionID, state: .after(s.machine.phase),
                                duration: s.machine.receivedSeconds, now: core.clock.wall())
        s.local.channel = nil
    }

    /// Another instance's publisher holds `channel` (the cluster's lease, `ChannelRelay`): this
    /// session is not published after all, and is told so as a second publisher on one
    /// instance is.
    func channelTakenElsewhere(_ channel: String) {
        mutate { s in
            guard s.local.channel == channel, !s.machine.isClosed else { return }
            s.local.channel = nil
            perform(s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                "channel \"\(channel)\" already has a publisher on another instance; this session is not published"))), &s)
        }
    }

    /// Queues one event; returns what the machine says to do if the client is not reading.
    func deliver(_ event: EncodedEvent, _ s: inout SessionState<Link>) -> [SessionAction] {
        server.metrics.eventSent(event.kind.rawValue)
        if let code = event.errorCode { server.metrics.errorSent(code) }
        switch event.kind {
        case .ended:
            if let at = s.endSubmittedAt { server.metrics.endLatencySeconds.observe(core.clock.now() - at) }
        default:
            break
        }
        if let channel = s.local.channel, event.kind.isBroadcast {
            server.channels.publish(event, on: channel, from: sessionID)
        }
        // A closed session's channel is free before the client can read that it is over (its
        // finals are published by then): a client that starts the next publisher on `ended`
        // must find the channel free.
        // Likewise its place among the live sessions: a client that reads `ended` and connects
        // again must not be refused as if this session still counted.
        if s.machine.isClosed && (event.kind == .ended || event.kind == .cancelled || event.kind == .error) {
            releaseChannel(&s)
            server.sessions.closed(self)
        }
        return send(s.local.codec.encode(event), &s)
    }

    /// Queues messages on the connection (or holds them while detached); returns what the
    /// machine says to do if the client is not reading.
    func send(_ messages: [OutgoingMessage], _ s: inout SessionState<Link>) -> [SessionAction] {
        var result = SendResult.queued
        for message in messages where result != .overflow {
            result = s.local.connection.map { server.handle.send($0, message) } ?? .closed
            if result == .closed && !s.machine.isClosed && !s.machine.resumeForfeited {
                // No connection, or it just went (its `closed` is on its way): held for the client
                // that resumes. Bounded like a connection's queue; beyond it the session cannot be
                // resumed and ends, its events going only to its channel (`outboundOverflow`).
                result = s.local.held.enqueue(message, size: message.byteCount, delivery: message.delivery) == .overflow
                    ? .overflow : .queued
            }
        }
        if result == .overflow {
            let detached = s.machine.isDetached
            let actions = s.machine.handle(.outboundOverflow)
            if detached && s.machine.resumeForfeited {
                // Nobody will have them now.
                _ = s.local.held.drained()
                server.log.info("session \(sessionID): more events made while its client was away than are kept "
                                + "for it (\(server.sessionConfiguration.limits.outboundBytes) bytes); it cannot be resumed and is ending")
            }
            return actions
        }
        return []
    }
}
