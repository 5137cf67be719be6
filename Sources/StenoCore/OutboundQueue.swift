// Outbound flow control for one connection, independent of any transport: `OutboundQueue`
// holds messages not yet written to the socket, bounded in bytes. Messages with the same
// replacement key (a `volatile` caption, a `progress` report) supersede each other while
// unsent; everything else must be delivered, so when it does not fit the queue says so
// instead of dropping it. (Inbound flow control is the session machine's: `pauseReading`.)

/// How a queued outbound message may be treated before it is sent.
public enum OutboundDelivery: Hashable, Sendable {
    /// Must reach the client (finals, control events, errors).
    case mustDeliver
    /// Superseded by a newer message with the same key while still unsent
    /// (e.g. `"volatile"`, `"progress"`).
    case replaceable(key: String)
}

/// A FIFO of outbound messages with a byte limit.
///
/// Replacement removes the older unsent message and appends the newer one at the
/// tail, so messages still leave in the order they were produced (a replaced
/// `volatile` never jumps ahead of a `final` enqueued after it).
///
/// When a message does not fit, `enqueue` returns `.overflow` and leaves the queue
/// unchanged: nothing is dropped silently; the caller decides (the protocol closes
/// the connection with 4008).
public struct OutboundQueue<Element> {
    public enum EnqueueResult: Equatable, Sendable {
        /// Appended.
        case queued
        /// Appended, and an older unsent message with the same key was removed.
        case replaced
        /// Did not fit under the byte limit; the queue is unchanged.
        case overflow
    }

    fileprivate struct Slot {
        var element: Element
        var size: Int
        var key: String?
    }

    /// The most bytes the queue holds.
    public let byteLimit: Int
    /// Bytes of the messages now queued.
    public private(set) var byteCount = 0
    /// Messages now queued.
    public private(set) var count = 0

    // Slots in arrival order; a replaced slot becomes nil. `slots[i]` has sequence
    // number `base + i`; `head` is the first slot not yet dequeued.
    private var slots: [Slot?] = []
    private var head = 0
    private var base = 0
    private var keyed: [String: Int] = [:]  // replacement key -> sequence number

    public init(byteLimit: Int) {
        precondition(byteLimit > 0, "byteLimit must be positive")
        self.byteLimit = byteLimit
    }

    public var isEmpty: Bool { count == 0 }

    /// Adds `element` of `size` bytes at the tail.
    public mutating func enqueue(_ element: Element, size: Int, delivery: OutboundDelivery = .mustDeliver) -> EnqueueResult {
        precondition(size >= 0, "size must not be negative")
        var key: String?
        var replacedSeq: Int?
        var freed = 0
        if case .replaceable(let k) = delivery {
            key = k
            if let seq = keyed[k], let old = slots[seq - base] {
                replacedSeq = seq
                freed = old.size
            }
        }
        let newCount = byteCount - freed + size
        if newCount > byteLimit { return .overflow }

        if let seq = replacedSeq {
            slots[seq - base] = nil
            count -= 1
        }
        let seq = base + slots.count
        slots.append(Slot(element: element, size: size, key: key))
        if let key { keyed[key] = seq }
        count += 1
        byteCount = newCount
        return replacedSeq == nil ? .queued : .replaced
    }

    /// Removes and returns the oldest message.
    public mutating func dequeue() -> Element? {
        while head < slots.count {
            let seq = base + head
            let slot = slots[head]
            slots[head] = nil
            head += 1
            guard let slot else { continue }
            count -= 1
            byteCount -= slot.size
            if let key = slot.key, keyed[key] == seq { keyed[key] = nil }
            compactIfWorthIt()
            return slot.element
        }
        compactIfWorthIt()
        return nil
    }

    /// Removes and returns every message, oldest first.
    public mutating func drained() -> [Element] {
        var all: [Element] = []
        all.reserveCapacity(count)
        while let element = dequeue() { all.append(element) }
        return all
    }

    /// The oldest message, left in place.
    public func peek() -> Element? {
        var i = head
        while i < slots.count {
            if let slot = slots[i] { return slot.element }
            i += 1
        }
        return nil
    }

    /// Empties the queue; returns how many messages were discarded.
    @discardableResult
    public mutating func removeAll() -> Int {
        let discarded = count
        slots.removeAll(keepingCapacity: true)
        keyed.removeAll(keepingCapacity: true)
        base += head
        head = 0
        count = 0
        byteCount = 0
        return discarded
    }

    private mutating func compactIfWorthIt() {
        if head == slots.count {
            base += head
            head = 0
            slots.removeAll(keepingCapacity: true)
        } else if head >= 64 && head * 2 >= slots.count {
            slots.removeFirst(head)
            base += head
            head = 0
        }
    }
}

extension OutboundQueue: Sendable where Element: Sendable {}
extension OutboundQueue.Slot: Sendable where Element: Sendable {}
