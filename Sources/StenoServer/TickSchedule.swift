/// When each session next needs the router's tick: a binary min-heap of (due time, session)
/// with one entry per session, indexed by the session so that moving or removing its entry is
/// O(log n). The tick takes only the entries that are due, so its work is the sessions that
/// have something to do (audio coming in or waiting, a batch to hand on, a deadline reached),
/// not every connected one: 10,000 quiet sessions cost it nothing between their deadlines.
///
/// A value type with no lock and no clock: `SessionRegistry` keeps it under its lock, and the
/// times are whatever the sessions say (monotonic seconds; `-infinity`: the next tick).
struct TickSchedule<Item: AnyObject> {
    private struct Entry {
        var due: Double
        let item: Item
    }

    private var heap: [Entry] = []
    /// Where each item's entry is in `heap`.
    private var position: [ObjectIdentifier: Int] = [:]

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }

    /// The time `item` is due at, if it has an entry.
    func due(_ item: Item) -> Double? { position[ObjectIdentifier(item)].map { heap[$0].due } }

    /// Puts `item` at `due`, moving its entry if it has one; `infinity` removes it (nothing
    /// will be due until it says otherwise).
    mutating func set(_ item: Item, at due: Double) {
        let key = ObjectIdentifier(item)
        guard due < .infinity else {
            remove(item)
            return
        }
        if let at = position[key] {
            let old = heap[at].due
            guard old != due else { return }
            heap[at].due = due
            if due < old { siftUp(at) } else { siftDown(at) }
        } else {
            heap.append(Entry(due: due, item: item))
            position[key] = heap.count - 1
            siftUp(heap.count - 1)
        }
    }

    mutating func remove(_ item: Item) {
        guard let at = position.removeValue(forKey: ObjectIdentifier(item)) else { return }
        let last = heap.removeLast()
        guard at < heap.count else { return }
        heap[at] = last
        position[ObjectIdentifier(last.item)] = at
        siftDown(at)
        siftUp(at)
    }

    /// Takes out every item due at or before `now`, earliest first.
    mutating func takeDue(_ now: Double) -> [Item] {
        var taken: [Item] = []
        while let first = heap.first, first.due <= now {
            taken.append(first.item)
            remove(first.item)
        }
        return taken
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].due < heap[parent].due else { return }
            swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            let right = left + 1
            let smaller = right < heap.count && heap[right].due < heap[left].due ? right : left
            guard heap[smaller].due < heap[parent].due else { return }
            swapAt(parent, smaller)
            parent = smaller
        }
    }

    private mutating func swapAt(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        position[ObjectIdentifier(heap[a].item)] = a
        position[ObjectIdentifier(heap[b].item)] = b
    }
}
