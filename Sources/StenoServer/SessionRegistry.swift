import StenoSystem
import StenoTransport

/// The `/v1/stream` sessions: by id (for `resume`), and by the connection carrying each
/// (a session detached from its connection is in the first only), which of them are live,
/// and when each next needs the router's tick (`schedule`). Written on the lws thread, by a
/// session taking over another's connection on resume, and by sessions rescheduling
/// themselves or closing from any thread; read from any thread (`StenoServer` watches it
/// while draining).
///
/// It is the one owner of how many sessions there are: `count` (open, connected or
/// detached: `/healthz`, and `steno_sessions_active` at each scrape) and `liveCount` (not
/// closed: capacity at each handshake, draining) are read here, not counted beside it.
final class SessionRegistry: Sendable {
    private struct State {
        var byID: [String: StreamSession] = [:]
        var byConnection: [ConnectionID: StreamSession] = [:]
        /// The ids of the sessions in `byID` whose protocol has not closed: a session leaves
        /// when it closes (`closed`) or leaves the registry, whichever comes first, so its
        /// count is kept as sessions come and go (counting them was O(sessions) per
        /// handshake, most of a 2-core server's time once 10,000 were connected).
        var live: Set<String> = []
        /// When each session wants its next tick: sessions put themselves here after every
        /// change (`StreamSession.wakeAt`), and the tick takes those due.
        var schedule = TickSchedule<StreamSession>()
    }

    private let state = Locked(State())

    func add(_ session: StreamSession, on connection: ConnectionID) {
        state.withLock { s in
            s.byID[session.sessionID] = session
            s.byConnection[connection] = session
            s.live.insert(session.sessionID)
            // Its first tick says when it wants the next (its start deadline, at least).
            s.schedule.set(session, at: -.infinity)
        }
    }

    /// `session` next needs a tick at `due` (monotonic seconds; `-infinity`: at the next tick;
    /// `infinity`: only after an input). Called by the session under its own lock (lock order
    /// session → registry) whenever what it is waiting for may have changed; ignored once it
    /// has left the registry, so a late input cannot bring a forgotten session back.
    func schedule(_ session: StreamSession, at due: Double) {
        state.withLock { s in
            guard s.byID[session.sessionID] === session else { return }
            s.schedule.set(session, at: due)
        }
    }

    /// Takes out the sessions due at or before `now`: the router visits them (each puts itself
    /// back for its next tick). Sessions made due again during the visits wait for the next tick.
    func takeDue(_ now: Double) -> [StreamSession] {
        state.withLock { $0.schedule.takeDue(now) }
    }

    /// When `session` is due (nil: not scheduled), for tests.
    func due(_ session: StreamSession) -> Double? { state.withLock { $0.schedule.due(session) } }

    /// `session`'s protocol has closed: it no longer counts as live. Called from under the
    /// session's own lock (lock order session → registry, as `schedule`), before its terminal
    /// event is handed to its connection; again is harmless.
    func closed(_ session: StreamSession) {
        state.withLock { s in
            guard s.byID[session.sessionID] === session else { return }
            s.live.remove(session.sessionID)
        }
    }

    /// The session `connection` carries.
    subscript(connection: ConnectionID) -> StreamSession? { state.withLock { $0.byConnection[connection] } }

    /// The session with this id, connected or not.
    func session(id: String) -> StreamSession? { state.withLock { $0.byID[id] } }

    /// `connection` no longer carries a session; returns the one it carried.
    func disconnect(_ connection: ConnectionID) -> StreamSession? {
        state.withLock { $0.byConnection.removeValue(forKey: connection) }
    }

    /// Forgets a session (it has closed and has no connection).
    func remove(_ session: StreamSession) {
        state.withLock { s in
            if s.byID[session.sessionID] === session {
                s.byID[session.sessionID] = nil
                s.live.remove(session.sessionID)
            }
            s.schedule.remove(session)
        }
    }

    /// `resumed` took over `connection`, which carried `placeholder` (a session that never
    /// started and is dropped).
    func replace(_ placeholder: StreamSession, by resumed: StreamSession, on connection: ConnectionID) {
        state.withLock { s in
            if s.byID[placeholder.sessionID] === placeholder {
                s.byID[placeholder.sessionID] = nil
                s.live.remove(placeholder.sessionID)
            }
            s.schedule.remove(placeholder)
            s.byConnection[connection] = resumed
        }
    }

    /// Sessions, connected or detached.
    var count: Int { state.withLock { $0.byID.count } }
    /// Sessions whose protocol has not closed yet (capacity counts these; draining waits for them).
    var liveCount: Int { state.withLock { $0.live.count } }
    /// Every session.
    var all: [StreamSession] { state.withLock { Array($0.byID.values) } }
}
