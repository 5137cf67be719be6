// The router's tick at a `StreamSession` (`visit`): the machine's clock, the short audio
// batch and the stalled utterance (`tickAudio`, `stallDue`), what the tick samples; and how
// the session tells the registry when it next needs one (`mutate`, `wakeAt`).

import StenoCore
import StenoSession
import StenoSystem

extension StreamSession {
    // MARK: The tick

    /// What the router's tick found at a session (`visit`).
    struct Visit {
        /// The lag (received − analyzed) of a talker: a session that audio came to since the
        /// last visit or that has more than a block waiting; nil for a quiet one.
        var lag: Double?
        /// Whether it streams at about real time (not a file sent faster): no more audio
        /// received than wall-clock time since `start`, give or take a second.
        var live = false
        /// How it went, once it has closed with no connection (the log line): it is forgotten.
        var closing: (line: String, seconds: Double)?
    }

    /// The router's tick, when this session is due (`SessionRegistry.takeDue`): the machine's
    /// clock (deadlines, progress), the audio batch and the stall (`tickAudio`), and what the
    /// tick samples; then the session says when it wants the next one.
    func visit(now: Double) -> Visit {
        mutate { s in
            // `takeDue` took its entry out: the registry is told again below, whatever the time.
            s.scheduledAt = nil
            let talking = s.heardSinceVisit || Self.isBehind(s.machine)
            s.heardSinceVisit = false
            perform(s.machine.handle(.tick(now: now)), &s)
            tickAudio(now: now, &s)
            var visit = Visit()
            let m = s.machine
            if talking, let started = m.startedMonotonic {
                visit.lag = m.backlogSeconds
                visit.live = m.receivedSeconds <= (now - started) * 1.1 + 1
            }
            if m.isClosed && s.connection == nil { visit.closing = summary(s) }
            return visit
        }
    }

    /// More than a block waits for analysis: the session is behind (or its recognizer waits for
    /// a decoder) and is ticked until it catches up. A remainder short of a block waits for
    /// more audio, which may never come: that alone is not behind.
    private static func isBehind(_ m: SessionMachine) -> Bool { m.backlogSeconds > batchSeconds + 0.01 }

    /// Runs `body` under the session's lock, then tells the registry when the session next
    /// needs a tick: every change that can move a deadline, start or stop a talker, or leave
    /// a batch comes through here.
    func mutate<R>(_ body: (inout State) -> R) -> R {
        state.withLock { s in
            let result = body(&s)
            let due = wakeAt(s)
            if due != s.scheduledAt {
                server.sessions.schedule(self, at: due)
                s.scheduledAt = due
            }
            return result
        }
    }

    /// When the tick next has something to do here: at once (`-infinity`, the next tick) for a
    /// talker or a closed session with no connection left to say so; otherwise the earliest
    /// of the machine's next deadline or progress, the short batch's linger and the stall
    /// release; `infinity` when only an input can change that (a closed session whose
    /// connection is closing, a started one with no timer).
    private func wakeAt(_ s: State) -> Double {
        let m = s.machine
        if m.isClosed { return s.connection == nil ? -.infinity : .infinity }
        if s.heardSinceVisit || Self.isBehind(m) { return -.infinity }
        var due = m.nextTickDue
        if !s.batch.isEmpty { due = min(due, s.batchSince + Self.batchLinger) }
        if let stallAt = stallDue(s) { due = min(due, stallAt) }
        return due
    }
    /// At the session's tick (`visit`). A short batch that has waited `batchLinger` goes to the
    /// lane (the client paused, or sends little).
    ///
    /// And a session whose audio stopped in the middle of speech (its connection dropped, the
    /// client stalled) would hold a shared decoder until audio came again, perhaps never:
    /// after `limits.stallSeconds` without audio, with everything received analyzed, what was
    /// heard is finalized and the decoder goes back to the pool. Audio that comes later starts
    /// a new utterance.
    private func tickAudio(now: Double, _ s: inout State) {
        // Compared as `wakeAt` computes the due times, so a tick at one acts whatever the rounding.
        if !s.batch.isEmpty && now >= s.batchSince + Self.batchLinger { submitBatch(&s) }
        guard let stallAt = stallDue(s), s.batch.isEmpty, now >= stallAt, !Self.isBehind(s.machine) else { return }
        s.stallReleased = true
        let silent = JSONWriter.secondsText(now - s.quietSince)
        submit { [self] pipeline throws(StenoError) in
            let events = try pipeline.finalize()
            if events.contains(where: { if case .final = $0 { true } else { false } }) {
                server.metrics.stalledUtterances.increment()
                server.log.debug("session \(sessionID): no audio for \(silent) s in the middle of speech; what was heard is final, its recognizer given back")
            }
            return (events, [])
        }
    }

    /// When the utterance in progress counts as stalled (`tickAudio`), if it can: speech is going
    /// on and the client has sent nothing for `limits.stallSeconds`. Not while the session is
    /// ending (it is finishing its utterance already), nor while a `finalize` is outstanding:
    /// its client may wait for `finalized` before it sends more, and the finalize waits for the
    /// pipeline (a re-recognition after a cut can wait for a decoder). A finalize of the stall's
    /// own, there, would end the utterance the cut began where the client never asked; so the
    /// clock starts again when the client is told `finalized`.
    private func stallDue(_ s: State) -> Double? {
        let stall = server.sessionConfiguration.limits.stallSeconds
        guard stall > 0, s.speaking, !s.stallReleased, s.machine.phase == .streaming else { return nil }
        return s.quietSince + stall
    }
}
