// How the session driver carries out its machine's actions under the session's lock: events
// to the host, the pipeline started, audio batched, gaps, finalizes and the end submitted,
// reading paused and resumed, the close; and, once the protocol has closed, the host told and
// the pipeline freed on its executor.

import StenoCore

extension SessionDriver {
    // MARK: Actions

    /// Carries out `actions` (and what they lead to), in order.
    public func perform(_ actions: [SessionAction], _ s: inout SessionState<Local>) {
        var queue = actions[...]
        while true {
            while let action = queue.popFirst() {
                switch action {
                case .send(let event):
                    queue.append(contentsOf: deliver(event, &s))
                case .startPipeline(let request):
                    startPipeline(request)
                    queue.append(contentsOf: starting(request, &s))
                case .submitAudio(let chunk):
                    note(.audioAccepted(seconds: chunk.duration))
                    heard(&s)
                    if s.batch.isEmpty { s.batch.since = s.quietSince }
                    s.batch.chunks.append(chunk)
                    s.batch.seconds += chunk.duration
                    if s.batch.seconds >= core.options.batchSeconds || s.batch.completesBlock(through: chunk.end) {
                        submitBatch(&s)
                    }
                case .pauseReading:
                    setReading(false, &s)
                case .resumeReading:
                    setReading(true, &s)
                case .submitGap(let duration):
                    heard(&s)
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
                    s.endSubmittedAt = core.clock.now()
                    submit(timed: .end) { pipeline throws(StenoError) in
                        (try pipeline.finish(), [.endCompleted])
                    }
                case .cancelPipeline:
                    _ = s.batch.take()
                    releasePipeline()
                case .close(let code, let reason):
                    close(code: code, reason: reason, &s)
                }
            }
            // What the host held back until the machine's actions were done (a codec that
            // waits to see whether speech ended after a final) goes now.
            let more = performed(&s)
            if more.isEmpty { break }
            queue.append(contentsOf: more)
        }
        if s.machine.isClosed && !s.closeCarriedOut {
            s.closeCarriedOut = true
            // Once the protocol has closed nothing more is published: the host frees what
            // another client may want next (a channel, a place among the live sessions).
            protocolClosed(&s)
            // And the pipeline goes now, on its executor: its recognizer's deinit takes the
            // lock that guards pocketsphinx's shared configuration, which a decoder being made
            // holds for a second or more; the session's last reference may be dropped on the
            // network thread.
            let work = core.work
            core.executor.finish(cancelling: false) {
                work.withValue { $0.pipeline = nil }
            }
        }
    }

    /// Audio, a gap or a declared silence came: the client is not quiet, and is a talker.
    private func heard(_ s: inout SessionState<Local>) {
        s.quietSince = core.clock.now()
        s.stallReleased = false
        s.heardSinceVisit = true
    }
}
