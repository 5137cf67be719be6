// `SessionMachine`'s clock: when a tick next has anything to do (`nextTickDue`), and the
// tick itself (start deadline, idle timeout, session limit, resume expiry, progress).

extension SessionMachine {
    // MARK: The clock

    /// The earliest monotonic time at which a `.tick` could do anything: a deadline of `tick`
    /// below (start, idle, session limit, resume) or a `progress` owed because received or
    /// analyzed moved. Before it, a tick is a no-op, so a server with thousands of quiet
    /// sessions need only tick each one when this comes (or after its next input, which may
    /// move it): `infinity` when only an input can give a tick something to do. It may be
    /// early (a tick then does nothing), never late; it mirrors `tick`'s conditions one for one.
    public var nextTickDue: Double {
        let limits = configuration.limits
        let idleDue = limits.idleTimeoutSeconds > 0 && detachedSince == nil && !isReadingPaused
            ? lastActivity + limits.idleTimeoutSeconds : .infinity
        var due = Double.infinity
        switch stage {
        case .awaitingStart:
            if limits.startTimeoutSeconds > 0 { due = openedMonotonic + limits.startTimeoutSeconds }
            return min(due, idleDue)
        case .open:
            if limits.maxSessionSeconds > 0 { due = startedMonotonicTime + limits.maxSessionSeconds }
            if let since = detachedSince { due = min(due, since + limits.resumeSeconds) }
            if pendingFinalizes.isEmpty { due = min(due, idleDue) }
        case .ending:
            break
        case .closed:
            return .infinity
        }
        if receivedSeconds != lastProgressReceived || analyzedSeconds != lastProgressAnalyzed {
            due = min(due, lastProgressAt + configuration.progressInterval)
        }
        return due
    }

    mutating func tick(now: Double, into out: inout [SessionAction]) {
        let limits = configuration.limits
        // Each deadline is compared as `nextTickDue` computes it (x + T, not now − x), so a tick
        // at the due time acts whatever the rounding.
        let idleExpired = limits.idleTimeoutSeconds > 0 && now >= lastActivity + limits.idleTimeoutSeconds
            && detachedSince == nil && !isReadingPaused
        switch stage {
        case .awaitingStart:
            if limits.startTimeoutSeconds > 0 && now >= openedMonotonic + limits.startTimeoutSeconds {
                fail(.idle, "no \"start\" message within \(seconds(limits.startTimeoutSeconds)) s of connecting", into: &out)
            } else if idleExpired {
                fail(.idle, "no \"start\" message for \(seconds(limits.idleTimeoutSeconds)) s", into: &out)
            }
            return
        case .open:
            if limits.maxSessionSeconds > 0 && now >= startedMonotonicTime + limits.maxSessionSeconds {
                windDown(.sessionLimit, into: &out)
            } else if let since = detachedSince, now >= since + limits.resumeSeconds {
                windDown(.abandoned, into: &out)
            } else if idleExpired && pendingFinalizes.isEmpty {
                windDown(.idle, into: &out)
            }
        case .ending:
            break
        case .closed:
            return
        }
        // Progress while audio flows or analysis catches up.
        guard now >= lastProgressAt + configuration.progressInterval else { return }
        let received = receivedSeconds
        let analyzedNow = analyzedSeconds
        guard received != lastProgressReceived || analyzedNow != lastProgressAnalyzed else { return }
        lastProgressAt = now
        lastProgressReceived = received
        lastProgressAnalyzed = analyzedNow
        emit(.progress(received: received, analyzed: analyzedNow), into: &out)
    }
}
