// The router's tick at a `StreamSession` (`visit`: the driver's tick, and what the router samples
// and whether the session is over), and how the session tells the registry when it next needs
// one (`schedule`, `closedWakeAt`).

import StenoCore
import StenoSession

extension StreamSession {
    // MARK: The tick

    /// What the router's tick found at a session (`visit`).
    struct Visit {
        /// The lag (received − analyzed) of a talker, nil for a quiet one (`TickReport`).
        var lag: Double?
        /// Whether it streams at about real time (`TickReport`).
        var live = false
        /// How it went, once it has closed with no connection (the log line): it is forgotten.
        var closing: (line: String, seconds: Double)?
    }

    /// The router's tick, when this session is due (`SessionRegistry.takeDue`), at `now`.
    func visit(now: Double) -> Visit {
        mutate { s in
            let report = tick(now: now, &s)
            var visit = Visit(lag: report.lag, live: report.live)
            if s.machine.isClosed && s.local.connection == nil { visit.closing = summary(s) }
            return visit
        }
    }

    /// The registry is told when the session next needs a tick, whenever that changes.
    func schedule(at due: Double, _ s: inout SessionState<Link>) {
        server.sessions.schedule(self, at: due)
    }

    /// A closed session is visited once more when its connection is gone, to be forgotten.
    func closedWakeAt(_ s: SessionState<Link>) -> Double {
        s.local.connection == nil ? -.infinity : .infinity
    }
}
