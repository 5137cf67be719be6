// ChannelHub's side of the cluster (`ChannelRelay`): other instances' broadcasts played in from
// Redis, a local broadcast withdrawn when another instance holds the channel, one whose
// publisher's instance is gone (its lease expired) ended as lost, and the local sessions that
// wait to publish on a channel such a broadcast held.

import Dispatch
import StenoCore
import StenoSystem

extension ChannelHub {
    /// Whether the channel's broadcast from another instance writes words (how to read its events).
    func remoteIncludesWords(_ name: String) -> Bool {
        state.withLock { $0.channels[name]?.current?.includeWords ?? true }
    }

    /// An entry another instance wrote for its publisher `session` on `name`.
    func applyRemote(_ entry: RelayEntry, channel name: String, session: String, instance: String) {
        switch entry {
        case .live(let id, let startedAt, let includeWords, let renditions):
            state.withLock { s in
                // Said again (after Redis came back): nothing new.
                if let current = s.channels[name]?.current, current.session == session, current.id == id { return }
                _ = claim(name, session: session, startedAt: startedAt, includeWords: includeWords, renditions: renditions, origin: instance,
                          id: id, relay: nil, &s)
            }
        case .event(let event):
            guard isRemote(name, session: session) else { return }
            publish(event, on: name, from: session)
        case .floor(let floor):
            guard isRemote(name, session: session) else { return }
            advance(name, session: session, floor: floor)
        case .end(let outcome, let duration, let endedAt):
            guard isRemote(name, session: session) else { return }
            release(name, session: session, state: outcome, duration: duration, now: endedAt ?? SystemClock.wall())
        }
    }

    private func isRemote(_ name: String, session: String) -> Bool {
        state.withLock { s in
            guard let current = s.channels[name]?.current else { return false }
            return current.session == session && current.origin != nil
        }
    }

    /// The relay no longer follows `name` (no viewers here): its other instances' broadcasts
    /// are forgotten, so that following it again starts from the stream afresh.
    func forgetRemote(_ name: String) {
        state.withLock { s in
            guard var channel = s.channels[name] else { return }
            channel.past.removeAll { $0.origin != nil }
            if channel.current?.origin != nil { channel.current = channel.past.popLast() }
            s.channels[name] = channel
            if channel.current == nil && channel.past.isEmpty && channel.viewers.isEmpty { s.channels[name] = nil }
        }
    }

    /// A local broadcast another instance's publisher holds the channel for: it ends here,
    /// `lost` to its viewers, and nothing of it goes to the relay.
    func withdraw(_ name: String, session: String) {
        state.withLock { s in _ = markLost(name, session: session, remote: false, &s) }
    }

    /// `session`'s live broadcast on `name` (another instance's if `remote`, a local one if
    /// not) is over: `lost` to its viewers. False if there is no such broadcast.
    private func markLost(_ name: String, session: String, remote: Bool, _ s: inout State) -> Bool {
        guard var channel = s.channels[name], var broadcast = channel.current, broadcast.session == session,
              (broadcast.origin != nil) == remote, broadcast.state == .live else { return false }
        broadcast.state = .lost
        broadcast.endedAt = SystemClock.wall()
        broadcast.showingVolatile = nil
        channel.current = broadcast
        s.channels[name] = channel
        let event = ServerEvent.publisher(.lost, broadcast: broadcast.id, startedAt: broadcast.startedAt).encoded()
        for viewer in channel.viewers { deliver(event, to: viewer, counters: channel.counters) }
        return true
    }

    /// The relay lost (or got back) Redis: the viewers that follow another instance's
    /// broadcast (or none yet) are told, and so is every viewer that joins such a channel
    /// until the link is back.
    func relayChanged(up: Bool) {
        let event = ServerEvent.relay(up: up).encoded()
        state.withLock { s in
            guard s.relayDown == up else { return }
            s.relayDown = !up
            for channel in s.channels.values where channel.followsTheRelay {
                for viewer in channel.viewers { deliver(event, to: viewer, counters: channel.counters) }
            }
        }
    }

    /// Another instance's live broadcast on `name`, by its session, if there is one (the
    /// relay's reader asks whether its publisher still holds the lease).
    func remotePublisher(_ name: String) -> String? {
        state.withLock { s in
            guard let current = s.channels[name]?.current, current.origin != nil, current.state == .live else { return nil }
            return current.session
        }
    }

    /// Another instance's broadcast whose publisher no longer holds the channel's lease (its
    /// instance died, or it lost Redis for longer than a lease): it is over here, `lost` to its
    /// viewers, and the local sessions waiting for the channel are called to claim it.
    func remoteGone(_ name: String, session: String) {
        let callbacks = state.withLock { s -> [@Sendable () -> Void] in
            guard markLost(name, session: session, remote: true, &s) else { return [] }
            return takeWaiting(name, &s)
        }
        for callback in callbacks { DispatchQueue.global().async(execute: callback) }
    }

    /// A local session could not claim `name` because another instance's publisher has it:
    /// `retry` is called once that broadcast is over here (`remoteGone`, or its end), unless the
    /// channel has no remote publisher now (then at once). False: the holder is a local session.
    func waitForRemotePublisher(_ name: String, retry: @escaping @Sendable () -> Void) -> Bool {
        let (waits, now) = state.withLock { s -> (Bool, Bool) in
            guard let current = s.channels[name]?.current, current.state == .live else { return (true, true) }
            guard current.origin != nil else { return (false, false) }
            s.waiting[name, default: []].append(retry)
            return (true, false)
        }
        // Called under the asking session's lock: it tries again on a thread of its own.
        if now { DispatchQueue.global().async(execute: retry) }
        return waits
    }

    /// The local sessions waiting for `name` (its remote broadcast ended), taken out of the
    /// state to be called after the lock is let go.
    func takeWaiting(_ name: String, _ s: inout State) -> [@Sendable () -> Void] {
        s.waiting.removeValue(forKey: name) ?? []
    }
}
