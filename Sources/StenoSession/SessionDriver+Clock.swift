// The session driver's clock: the tick (`tick`: the machine's deadlines, the short audio batch,
// the stalled utterance, and what a server samples of a talker), and when the session next
// needs one (`wakeAt`), which `mutate` tells the host whenever it changes.

import StenoCore
import StenoSystem

/// What a tick found at a session.
public struct TickReport: Sendable, Hashable {
    /// The lag (received − analyzed) of a talker: a session that audio came to since the last
    /// tick or that has more than a block waiting; nil for a quiet one.
    public var lag: Double?
    /// Whether it streams at about real time (not a file sent faster): no more audio received
    /// than clock time since `start`, give or take a second.
    public var live = false
}

extension SessionDriver {
    // MARK: The tick

    /// The tick, when the session is due (or at any time: a tick that finds nothing due does
    /// nothing): the machine's clock (deadlines, progress), the audio batch and the stall. At
    /// `now`, or the clock's time.
    @discardableResult
    public func tick(now: Double? = nil) -> TickReport {
        let now = now ?? core.clock.now()
        return mutate { s in tick(now: now, &s) }
    }

    /// `tick(now:)` within a `mutate` of the host's (which reads more of the state at the same time).
    public func tick(now: Double, _ s: inout SessionState<Local>) -> TickReport {
        // The host's schedule has taken its entry out: it is told again, whatever the time.
        s.scheduledAt = nil
        let talking = s.heardSinceVisit || isBehind(s.machine)
        s.heardSinceVisit = false
        perform(s.machine.handle(.tick(now: now)), &s)
        tickAudio(now: now, &s)
        var report = TickReport()
        let m = s.machine
        if talking, let started = m.startedMonotonic {
            report.lag = m.backlogSeconds
            report.live = m.receivedSeconds <= (now - started) * 1.1 + 1
        }
        return report
    }

    /// More than a block waits for analysis: the session is behind (or its recognizer waits)
    /// and is ticked until it catches up. A remainder short of a block waits for more audio,
    /// which may never come: that alone is not behind.
    private func isBehind(_ m: SessionMachine) -> Bool { m.backlogSeconds > 0.128 + 0.01 }

    /// When the tick next has something to do here: at once (`-infinity`, the next tick) for a
    /// talker or a closed session; otherwise the earliest of the machine's next deadline or
    /// progress, the short batch's linger and the stall release; `infinity` when only an input
    /// can change that (a started session with no timer).
    func wakeAt(_ s: SessionState<Local>) -> Double {
        let m = s.machine
        if m.isClosed { return closedWakeAt(s) }
        if s.heardSinceVisit || isBehind(m) { return -.infinity }
        var due = m.nextTickDue
        if !s.batch.isEmpty { due = min(due, s.batch.since + core.options.batchLinger) }
        if let stallAt = stallDue(s) { due = min(due, stallAt) }
        return due
    }

    /// A short batch that has waited `batchLinger` goes to the pipeline (the client paused, or
    /// sends little).
    ///
    /// And a session whose audio stopped in the middle of speech (its connection dropped, the
    /// client stalled) would hold a shared decoder until audio came again, perhaps never:
    /// after `limits.stallSeconds` without audio, with everything received analyzed, what was
    /// heard is finalized and the decoder goes back to the pool. Audio that comes later starts
    /// a new utterance.
    private func tickAudio(now: Double, _ s: inout SessionState<Local>) {
        // Compared as `wakeAt` computes the due times, so a tick at one acts whatever the rounding.
        if !s.batch.isEmpty && now >= s.batch.since + core.options.batchLinger { submitBatch(&s) }
        guard let stallAt = stallDue(s), s.batch.isEmpty, now >= stallAt, !isBehind(s.machine) else { return }
        s.stallReleased = true
        let silent = now - s.quietSince
        submit { [self] pipeline throws(StenoError) in
            let events = try pipeline.finalize()
            if events.contains(where: { if case .final = $0 { true } else { false } }) {
                note(.stallFinalized(silentSeconds: silent))
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
    private func stallDue(_ s: SessionState<Local>) -> Double? {
        let stall = s.machine.configuration.limits.stallSeconds
        guard stall > 0, s.speaking, !s.stallReleased, s.machine.phase == .streaming else { return nil }
        return s.quietSince + stall
    }
}
