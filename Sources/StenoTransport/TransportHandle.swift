import CLibWebSockets
import Foundation
import StenoCore
import StenoSystem
import Synchronization

/// The thread-safe side of the transport: what the session layer, worker threads
/// and the delegate call to act on connections.
///
/// Every method may be called from any thread, including the lws service thread
/// inside a delegate callback. Calls never touch a `wsi`: they change state under a
/// lock and leave a command for the service thread, then wake it with
/// `lws_cancel_service` (the one lws call that is safe from other threads). The
/// service thread runs the commands in `LWS_CALLBACK_EVENT_WAIT_CANCELLED`, or, when
/// the caller is the service thread itself, right after the delegate returns.
public final class TransportHandle: Sendable {
    // `Locked`, not `Mutex`: ThreadSanitizer cannot see a `Mutex` on Linux (StenoSystem.Locked).
    let state: Locked<SharedState>
    /// `pthread_self()` of the service thread while it runs, else 0.
    let serviceThread = Atomic<UInt>(0)
    let outboundByteLimit: Int

    init(outboundByteLimit: Int) {
        self.outboundByteLimit = outboundByteLimit
        state = Locked(SharedState())
    }

    /// Queues `message` for `id`. Returns `.overflow` (nothing queued) when the
    /// connection's outbound limit would be exceeded; the caller then closes it with
    /// 4008. Messages to one connection leave in the order `send` was called.
    @discardableResult
    public func send(_ id: ConnectionID, _ message: OutgoingMessage) -> SendResult {
        let wake = !isServiceThread
        return state.withLock { s -> SendResult in
            // In place (no copy of the connection's queue is ever held, so enqueuing
            // never copies its storage).
            let outcome = s.modify(id) { c -> (SendResult, Bool)? in
                if c.closeRequest != nil { return nil }
                let result = c.outbound.enqueue(message, size: message.byteCount, delivery: message.delivery)
                if result == .overflow { return (.overflow, false) }
                let schedule = !c.writeScheduled
                c.writeScheduled = true
                return (result == .replaced ? .replaced : .queued, schedule)
            }
            guard let outcome = outcome ?? nil else { return .closed }
            if outcome.1 { s.post(.writable(id), wake: wake) }
            return outcome.0
        }
    }

    /// Closes `id` with a WebSocket close `code` and `reason` (at most 123 bytes of
    /// UTF-8; longer is cut) once the messages already queued have been written, or
    /// at once when `discardQueued` (e.g. 4008 for a client that does not read).
    /// Sends after this return `.closed`; received messages are no longer delivered.
    /// If the queue cannot be flushed within `closeFlushTimeout`, the connection is
    /// cut without a close frame.
    public func close(_ id: ConnectionID, code: UInt16, reason: String = "", discardQueued: Bool = false) {
        let wake = !isServiceThread
        // Codes RFC 6455 forbids on the wire (1004-1006, 1015, <1000, ≥5000) become 1011.
        let code = TransportHandle.mayBeSent(code) ? code : 1011
        state.withLock { s in
            let first = s.modify(id) { c -> Bool in
                if c.closeRequest != nil { return false }
                c.closeRequest = (code, reason)
                if discardQueued { c.outbound.removeAll() }
                return true
            }
            if first == true { s.post(.close(id), wake: wake) }
        }
    }

    /// Answers a POST the delegate took to answer later (`TransportDelegate.http(_:body:exchange:)`),
    /// from any thread; nothing if its client has gone.
    public func respond(_ exchange: HTTPExchange, _ response: HTTPResponse) {
        let wake = !isServiceThread
        state.withLock { $0.post(.respond(exchange, response, streaming: false), wake: wake) }
    }

    /// Starts a streamed answer to a POST: `head`'s status and headers now (no length: the
    /// body ends when the connection closes), its body in `write`s as it is made (server-sent
    /// events of a transcription as its finals come).
    public func respondStreaming(_ exchange: HTTPExchange, head: HTTPResponse) {
        let wake = !isServiceThread
        state.withLock { $0.post(.respond(exchange, head, streaming: true), wake: wake) }
    }

    /// More of a streamed answer; `final`: the last, after which the connection closes.
    public func write(_ exchange: HTTPExchange, _ bytes: [UInt8], final: Bool) {
        let wake = !isServiceThread
        state.withLock { $0.post(.write(exchange, bytes, final: final), wake: wake) }
    }

    /// Stops (`false`) or resumes (`true`) reading from `id`'s socket: TCP
    /// backpressure on the client. Messages libwebsockets already read may still be
    /// delivered after a pause; nothing is lost on resume.
    public func setReading(_ id: ConnectionID, _ reading: Bool) {
        let wake = !isServiceThread
        state.withLock { s in
            guard s.connections[id] != nil else { return }
            s.post(.setReading(id, reading), wake: wake)
        }
    }

    /// Runs `body` on the service thread with the delegate, soon (right after the current
    /// callback when called from the service thread): how other threads hand the session
    /// layer work that must happen where its state lives.
    public func perform(_ body: @escaping @Sendable (any TransportDelegate) -> Void) {
        let wake = !isServiceThread
        state.withLock { s in s.post(.perform(body), wake: wake) }
    }

    /// The port the server listens on, once started.
    public var port: Int? { state.withLock { $0.port } }

    /// Open WebSocket connections.
    public var connectionCount: Int { state.withLock { $0.connections.count } }

    /// Unsent outbound bytes of `id`, or nil when it is not open.
    public func queuedBytes(_ id: ConnectionID) -> Int? {
        state.withLock { $0.connections[id]?.outbound.byteCount }
    }

    static func mayBeSent(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    public var isServiceThread: Bool {
        let t = serviceThread.load(ordering: .acquiring)
        return t != 0 && pthread_equal(pthread_t(t), pthread_self()) != 0
    }

    // MARK: used by the service thread

    func register(_ id: ConnectionID) {
        let limit = outboundByteLimit
        state.withLock { s in
            s.connections[id] = SharedConnection(outbound: OutboundQueue(byteLimit: limit))
        }
    }

    /// Forgets `id`; returns what it left behind if it kept its written messages.
    func unregister(_ id: ConnectionID) -> OutboundBacklog? {
        // The queue (and its frames) is released outside the lock.
        guard var removed = state.withLock({ s in s.connections.removeValue(forKey: id) }) else { return nil }
        guard removed.retention > 0 else { return nil }
        var unsent: [OutgoingMessage] = []
        while let message = removed.outbound.dequeue() { unsent.append(message) }
        return OutboundBacklog(written: Array(removed.written[removed.writtenStart...]), unsent: unsent,
                               lastOrdinal: removed.ordinalsWritten)
    }

    /// Takes `id` away from whoever was using it and drops the connection at once (no close
    /// frame): sends to it return `.closed` from now on, its `closed` callback will come with
    /// no backlog, and what it left behind is returned now (if it kept its written messages).
    /// For a client that resumed its session on a new connection while the old one still
    /// looked open.
    public func detach(_ id: ConnectionID) -> OutboundBacklog? {
        let wake = !isServiceThread
        let backlog = unregister(id)
        state.withLock { s in s.post(.kill(id), wake: wake) }
        return backlog
    }

    /// Keeps up to `bytes` of the numbered messages most recently written to `id`, so that a
    /// client that loses its connection can be sent again what it may not have received
    /// (`closed` then hands the delegate an `OutboundBacklog`). 0 keeps none.
    public func retainWritten(_ id: ConnectionID, bytes: Int) {
        state.withLock { s in _ = s.modify(id) { $0.retention = max(0, bytes) } }
    }

    /// Continues on `id` (a new connection) what another connection left behind: `id`'s
    /// numbering goes on from the backlog's, and it first sends the backlog's written
    /// messages after `ordinal` (with their numbers) and its unsent ones. `id` keeps written
    /// messages as the old connection did. False, and nothing changes, if the backlog no
    /// longer holds everything after `ordinal` (see `OutboundBacklog.canReplay`) or `id` has
    /// already numbered messages.
    public func adopt(_ id: ConnectionID, _ backlog: OutboundBacklog, after ordinal: UInt64, retaining bytes: Int) -> Bool {
        guard backlog.canReplay(after: ordinal) else { return false }
        let wake = !isServiceThread
        let replay = backlog.replay(after: ordinal)
        return state.withLock { s -> Bool in
            let adopted = s.modify(id) { c -> Bool in
                guard c.ordinalsWritten == 0, c.closeRequest == nil else { return false }
                c.ordinalsWritten = backlog.lastOrdinal
                c.retention = max(0, bytes)
                c.written = backlog.written.filter { $0.ordinal <= ordinal }
                c.writtenStart = 0
                c.writtenBytes = c.written.reduce(0) { $0 + $1.frame.payloadCount }
                // In front of anything queued meanwhile (nothing numbered was: see the guard).
                var queue = OutboundQueue<OutgoingMessage>(byteLimit: c.outbound.byteLimit)
                for message in replay + c.outbound.drained() {
                    _ = queue.enqueue(message, size: message.byteCount, delivery: message.delivery)
                }
                c.outbound = queue
                let schedule = !c.writeScheduled && !queue.isEmpty
                if schedule { c.writeScheduled = true }
                return true
            } ?? false
            if adopted, s.connections[id]?.writeScheduled == true { s.post(.writable(id), wake: wake) }
            return adopted
        }
    }

    /// The close requested for `id`, if any.
    func closeRequest(_ id: ConnectionID) -> (code: UInt16, reason: String)? {
        state.withLock { $0.connections[id]?.closeRequest }
    }

    /// The next frame to write to `id` (numbered, if its message has an ordinal slot), and
    /// whether more are queued after it.
    func takeNext(_ id: ConnectionID) -> (frame: FrameBuffer?, kind: OutgoingMessage.Kind, more: Bool) {
        let (taken, more, ordinal, frame) = state.withLock { s -> (OutgoingMessage?, Bool, UInt64, FrameBuffer?) in
            s.modify(id) { c -> (OutgoingMessage?, Bool, UInt64, FrameBuffer?) in
                let message = c.outbound.dequeue()
                let more = !c.outbound.isEmpty
                c.writeScheduled = more
                guard let message else { return (nil, more, 0, nil) }
                var ordinal: UInt64 = 0
                if message.ordinalSlot != nil {
                    c.ordinalsWritten += 1
                    ordinal = c.ordinalsWritten
                }
                guard c.retention > 0, ordinal > 0 || message.written != nil else { return (message, more, ordinal, nil) }
                // A kept message is made into its frame here, under the lock, to be kept too.
                let frame = message.written?.frame ?? FrameBuffer(message, ordinal: ordinal)
                c.keep(frame, ordinal: message.written?.ordinal ?? ordinal, kind: message.kind)
                return (message, more, ordinal, frame)
            } ?? (nil, false, 0, nil)
        }
        guard let message = taken else { return (nil, .text, more) }
        if let frame { return (frame, message.kind, more) }
        if let written = message.written { return (written.frame, message.kind, more) }
        // The one copy of the bytes, into the frame, outside the lock.
        return (FrameBuffer(message, ordinal: ordinal), message.kind, more)
    }

    func takeCommands() -> [ServiceCommand] {
        state.withLock { s in
            s.wakePending = false
            if s.commands.isEmpty { return [] }
            let taken = s.commands
            s.commands.removeAll(keepingCapacity: true)
            return taken
        }
    }

    func serviceStarted(context: OpaquePointer, port: Int) {
        serviceThread.store(UInt(pthread_self()), ordering: .releasing)
        state.withLock { s in
            s.context = LwsContextRef(pointer: context)
            s.port = port
        }
    }

    /// Called before the context is destroyed: nobody may signal it any more.
    func serviceStopping() {
        state.withLock { s in s.context = nil }
    }

    func serviceEnded() {
        serviceThread.store(0, ordering: .releasing)
        let dropped = state.withLock { s -> ([ConnectionID: SharedConnection], [ServiceCommand]) in
            let d = (s.connections, s.commands)
            s.connections = [:]
            s.commands = []
            s.wakePending = false
            return d
        }
        _ = dropped
    }

    /// Wakes the service thread (used by `stop()`).
    func wake() {
        state.withLock { s in
            if let c = s.context { lws_cancel_service(c.pointer) }
        }
    }
}

/// A `lws_context` pointer that may be handed to `lws_cancel_service` from any
/// thread. `@unchecked Sendable` because that is the only use made of it off the
/// service thread, and it is cleared (under the lock) before the context is
/// destroyed.
struct LwsContextRef: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Per-connection state shared between callers of `send` and the service thread.
struct SharedConnection: Sendable {
    var outbound: OutboundQueue<OutgoingMessage>
    /// The close requested (code and reason, sent once the queue is written): no more sends.
    var closeRequest: (code: UInt16, reason: String)?
    /// The service thread has been (or will be) asked for a WRITEABLE callback.
    var writeScheduled = false
    /// Numbered messages taken for writing so far (the last one's ordinal): the one count
    /// behind every `seq` a client sees.
    var ordinalsWritten: UInt64 = 0
    /// Bytes of written numbered messages to keep (`retainWritten`); 0 keeps none.
    var retention = 0
    /// The kept messages, oldest first from `writtenStart`.
    var written: [(ordinal: UInt64, frame: FrameBuffer, kind: OutgoingMessage.Kind)] = []
    var writtenStart = 0
    var writtenBytes = 0

    /// Keeps a written frame, forgetting the oldest beyond `retention` bytes.
    mutating func keep(_ frame: FrameBuffer, ordinal: UInt64, kind: OutgoingMessage.Kind) {
        written.append((ordinal, frame, kind))
        writtenBytes += frame.payloadCount
        while writtenBytes > retention, writtenStart < written.count - 1 {
            writtenBytes -= written[writtenStart].frame.payloadCount
            writtenStart += 1
        }
        if writtenStart > 64 && writtenStart * 2 > written.count {
            written.removeFirst(writtenStart)
            writtenStart = 0
        }
    }

    init(outbound: OutboundQueue<OutgoingMessage>) {
        self.outbound = outbound
    }
}

enum ServiceCommand: Sendable {
    case writable(ConnectionID)
    case close(ConnectionID)
    /// Drop the connection now, without a close frame.
    case kill(ConnectionID)
    case setReading(ConnectionID, Bool)
    case perform(@Sendable (any TransportDelegate) -> Void)
    /// The answer to a POST the delegate took to answer later (`streaming`: its head only;
    /// its body comes in `write`s).
    case respond(HTTPExchange, HTTPResponse, streaming: Bool)
    /// More of a streamed answer's body; `final`: the last of it.
    case write(HTTPExchange, [UInt8], final: Bool)
}

struct SharedState: Sendable {
    var connections: [ConnectionID: SharedConnection] = [:]
    var commands: [ServiceCommand] = []
    /// A wake-up is pending (the service thread will look at `commands`).
    var wakePending = false
    var context: LwsContextRef?
    var port: Int?

    /// Runs `body` on connection `id` in place; nil when there is no such connection.
    mutating func modify<R>(_ id: ConnectionID, _ body: (inout SharedConnection) -> R) -> R? {
        guard connections[id] != nil else { return nil }
        return body(&connections[id]!)
    }

    mutating func post(_ command: ServiceCommand, wake: Bool) {
        commands.append(command)
        if wakePending { return }
        if !wake {
            // On the service thread no wake-up is needed: it drains the commands as
            // soon as the delegate returns.
            wakePending = true
        } else if let c = context {
            lws_cancel_service(c.pointer)
            wakePending = true
        }
        // Not running yet: the service thread drains the commands when it starts.
    }
}
