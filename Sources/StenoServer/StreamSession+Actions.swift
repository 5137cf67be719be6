// How a `StreamSession` carries out its machine's actions under its lock: the pipeline
// started and its channel claimed, audio batched, gaps, finalizes and the end submitted,
// reading paused and resumed, the close; each event queued on the connection (or held while
// detached) and published to the channel, and the channel released.

import StenoCore
import StenoSession
import StenoSystem
import StenoTransport

extension StreamSession {
    // MARK: Actions

    /// Carries out `actions`, and tells the registry once the protocol has closed.
    func perform(_ actions: [SessionAction], _ s: inout State) {
        carryOut(actions, &s)
        if s.machine.isClosed && leaveLiveCount() { server.sessions.closed(self) }
    }

    private func carryOut(_ actions: [SessionAction], _ s: inout State) {
        var queue = actions[...]
        while let action = queue.popFirst() {
            switch action {
            case .send(let event):
                queue.append(contentsOf: send(event, &s))
            case .startPipeline(let request):
                startPipeline(request)
                if let channel = request.channel {
                    if server.channels.claim(channel, session: sessionID, startedAt: s.machine.startedAt ?? SystemClock.wall(),
                                             includeWords: request.words) {
                        s.channel = channel
                    } else {
                        queue.append(contentsOf: s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                            "channel \"\(channel)\" already has a publisher; this session is not published"))))
                    }
                }
                server.log.info("session \(sessionID) \(s.connection.map(String.init(describing:)) ?? "") started: \(request.audio) from \(remoteAddress)"
                    + (request.channel.map { " on channel \($0)" } ?? ""))
            case .submitAudio(let chunk):
                server.metrics.audioReceivedSeconds.add(chunk.duration)
                s.quietSince = SystemClock.now()
                s.stallReleased = false
                s.heardSinceVisit = true
                if s.batch.isEmpty { s.batchSince = s.quietSince }
                s.batch.append(chunk)
                s.batchSeconds += chunk.duration
                if s.batchSeconds >= Self.batchSeconds || !Self.batchesAudio || blockIsIn(s, through: chunk.start + chunk.duration) {
                    submitBatch(&s)
                }
            case .pauseReading:
                if let connection = s.connection { server.handle.setReading(connection, false) }
            case .resumeReading:
                if let connection = s.connection { server.handle.setReading(connection, true) }
            case .submitGap(_, let duration):
                s.quietSince = SystemClock.now()
                s.stallReleased = false
                s.heardSinceVisit = true
                submitBatch(&s)
                submit { pipeline throws(StenoError) in
                    (try pipeline.gap(seconds: duration), [])
                }
            case .resume(let request):
                s.resumeRequest = request
            case .submitFinalize(let through):
                submitBatch(&s)
                submit { pipeline throws(StenoError) in
                    (try pipeline.finalize(through: through), [.finalizeCompleted])
                }
            case .submitEnd:
                submitBatch(&s)
                s.endSubmittedAt = SystemClock.now()
                submit(timed: .end) { pipeline throws(StenoError) in
                    (try pipeline.finish(), [.endCompleted])
                }
            case .cancelPipeline:
                s.batch.removeAll()
                s.batchSeconds = 0
                releasePipeline()
            case .close(let code, let reason):
                if let connection = s.connection {
                    server.handle.close(connection, code: code, reason: reason, discardQueued: code == 4008)
                }
            }
        }
        // Once the protocol has closed nothing more is published: the channel is free for the
        // next publisher now, not when this connection has finished closing.
        if s.machine.isClosed { releaseChannel(&s) }
        // And the pipeline goes now, on the lane: its recognizer's deinit takes the lock that
        // guards pocketsphinx's shared configuration, which a decoder being made holds for a
        // second or more; the session's last reference may be dropped on the lws thread.
        if s.machine.isClosed && !s.pipelineRetired {
            s.pipelineRetired = true
            lane.close(.drain) { [work] in
                work.withValue { $0.pipeline = nil }
            }
        }
    }

    /// Frees the session's channel for the next publisher (once its last event is published).
    private func releaseChannel(_ s: inout State) {
        guard let channel = s.channel else { return }
        server.channels.release(channel, session: sessionID, state: .after(s.machine.phase),
                                duration: s.machine.receivedSeconds, now: SystemClock.wall())
        s.channel = nil
    }

    /// Another instance's publisher holds `channel` (the cluster's lease, `ChannelRelay`): this
    /// session is not published after all, and is told so as a second publisher on one
    /// instance is.
    func channelTakenElsewhere(_ channel: String) {
        mutate { s in
            guard s.channel == channel, !s.machine.isClosed else { return }
            s.channel = nil
            perform(s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                "channel \"\(channel)\" already has a publisher on another instance; this session is not published"))), &s)
        }
    }

    /// Queues one event; returns what the machine says to do if the client is not reading.
    private func send(_ event: EncodedEvent, _ s: inout State) -> [SessionAction] {
        server.metrics.eventSent(event.kind.rawValue)
        if let code = event.errorCode { server.metrics.errorSent(code) }
        switch event.kind {
        case .ended:
            if let at = s.endSubmittedAt { server.metrics.endLatencySeconds.observe(SystemClock.now() - at) }
        default:
            break
        }
        let message = OutgoingMessage(event)
        if let channel = s.channel, event.kind.isBroadcast {
            server.channels.publish(event, final: event.kind == .final ? s.machine.finals.last : nil,
                                    volatile: s.machine.showingVolatile, on: channel, from: sessionID)
        }
        // A closed session's channel is free before the client can read that it is over (its
        // finals are published by then): a client that starts the next publisher on `ended`
        // must find the channel free.
        // Likewise its place among the live sessions: a client that reads `ended` and connects
        // again must not be refused as if this session still counted.
        if s.machine.isClosed && (event.kind == .ended || event.kind == .cancelled || event.kind == .error) {
            releaseChannel(&s)
            if leaveLiveCount() { server.sessions.closed(self) }
        }
        var result = s.connection.map { server.handle.send($0, message) } ?? .closed
        if result == .closed && !s.machine.isClosed && !s.machine.resumeForfeited {
            // No connection, or it just went (its `closed` is on its way): held for the client
            // that resumes. Bounded like a connection's queue; beyond it the session cannot be
            // resumed and ends, its events going only to its channel (`outboundOverflow`).
            result = s.held.enqueue(message, size: message.byteCount, delivery: message.delivery) == .overflow
                ? .overflow : .queued
        }
        if result == .overflow {
            let detached = s.machine.isDetached
            let actions = s.machine.handle(.outboundOverflow)
            if detached && s.machine.resumeForfeited {
                // Nobody will have them now.
                _ = s.held.drained()
                server.log.info("session \(sessionID): more events made while its client was away than are kept "
                                + "for it (\(server.sessionConfiguration.limits.outboundBytes) bytes); it cannot be resumed and is ending")
            }
            return actions
        }
        return []
    }
}
