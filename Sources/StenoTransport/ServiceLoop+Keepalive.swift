// The service thread's once-a-second pass over its connections (`scanConnections`, run
// from the tick): pings for keepalive, hang-ups on peers gone silent, heartbeats to peers
// whose reading is paused, write stalls reported to the delegate, and frame headers that
// announce more than the message limit (`announcedTooMuch`).

import CLibWebSockets

extension ServiceLoop {
    // MARK: - Keepalive and write stalls (on ticks)

    /// Once a second, one pass over all connections for both checks below (pings and hang-ups
    /// come up to a second late, stalls are found up to a second late).
    ///
    /// Keepalive: pings each WebSocket `keepAliveSeconds` after it was last heard from, and
    /// hangs up on one silent for twice that plus 10 s: how peers that vanished without a FIN
    /// (a phone off the network) are noticed. Done here instead of by lws's retry policy, whose
    /// per-connection timers cost O(connections) each time one is moved (see
    /// `LwsContextStorage.makeContext`). A connection whose reading is paused (flow control:
    /// the server is behind with its audio) is left alone, since what its peer sends waits
    /// unread; its clock starts again when reading resumes.
    ///
    /// Heartbeat: a peer whose reading is paused, with nothing on its way to it, is pinged every
    /// `pausedHeartbeat` whatever the keepalive: its client (`WebSocketClient.keepAliveTick`)
    /// sees its writes held back and data still coming, so it can tell a server that is
    /// behind from a hung one.
    ///
    /// Write stalls: reports to the delegate each connection whose outbound data (Steno's
    /// queue, or what lws holds after a partial write) has waited `writeStallSeconds` with
    /// nothing written: a peer that does not read, caught before its queue fills (at caption
    /// rates a viewer's 1 MiB can take hours). A write clears the clock (`writeable`; not a
    /// heartbeat). Closing connections are left to their own flush deadline.
    func scanConnections() {
        let keepAliveSeconds = configuration.keepAliveSeconds
        let stallSeconds = configuration.writeStallSeconds
        let now = ContinuousClock.now
        guard now - lastScan >= .seconds(1) else { return }
        lastScan = now
        let ping = Duration.seconds(keepAliveSeconds)
        let hangUp = Duration.seconds(2 * keepAliveSeconds + 10)
        let stallLimit = Duration.milliseconds(Int(stallSeconds * 1000))
        var stalled: [ConnectionID] = []
        var tooLarge: [ConnectionID] = []
        for c in connections.values where c.closing == nil {
            if announcedTooMuch(c) {
                tooLarge.append(c.id)
                continue
            }
            let pending = (handle.queuedBytes(c.id) ?? 0) > 0 || lws_partial_buffered(c.wsi) != 0
            if c.readingPaused && !pending && !c.pingDue && now - (c.heartbeatAt ?? c.lastHeard) >= Self.pausedHeartbeat {
                c.heartbeatAt = now
                c.pingDue = true
                lws_callback_on_writable(c.wsi)
            }
            if keepAliveSeconds > 0 && !c.readingPaused {
                let silent = now - c.lastHeard
                if silent >= hangUp {
                    configuration.log(.info, "connection \(c.id) silent for \(silent.components.seconds) s; hung up")
                    c.closing = .cut
                    closing.insert(c.id)
                    lws_set_timeout(c.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                    continue
                } else if silent >= ping && !c.pinged {
                    c.pinged = true
                    c.pingDue = true
                    lws_callback_on_writable(c.wsi)
                }
            }
            guard stallSeconds > 0 else { continue }
            guard pending else {
                c.stalledSince = nil
                continue
            }
            guard let since = c.stalledSince else {
                c.stalledSince = now
                continue
            }
            if now - since >= stallLimit {
                c.stalledSince = nil
                stalled.append(c.id)
            }
        }
        for id in tooLarge.sorted() { delegate.tooLarge(id, limit: configuration.maxMessageSize) }
        for id in stalled.sorted() {
            configuration.log(.info, "connection \(id) has not taken a byte for \(stallSeconds) s while data waited for it")
            delegate.writeStalled(id)
        }
        if !stalled.isEmpty || !tooLarge.isEmpty { drainCommands() }
    }

    /// How often a peer whose reading is paused is pinged (`scanConnections`).
    static let pausedHeartbeat = Duration.seconds(5)
}
