import Testing
@testable import StenoCore

@Suite struct OutboundQueueTests {
    private func drain(_ q: inout OutboundQueue<String>) -> [String] {
        var out: [String] = []
        while let e = q.dequeue() { out.append(e) }
        return out
    }

    @Test func dequeuesInOrderAndCountsBytes() {
        var q = OutboundQueue<String>(byteLimit: 100)
        #expect(q.enqueue("a", size: 10) == .queued)
        #expect(q.enqueue("b", size: 20) == .queued)
        #expect(q.enqueue("c", size: 30) == .queued)
        #expect(q.count == 3)
        #expect(q.byteCount == 60)
        #expect(q.peek() == "a")
        #expect(q.dequeue() == "a")
        #expect(q.byteCount == 50)
        #expect(drain(&q) == ["b", "c"])
        #expect(q.isEmpty)
        #expect(q.byteCount == 0)
        #expect(q.dequeue() == nil)
    }

    @Test func mustDeliverOverflowIsReportedAndNothingIsDropped() {
        var q = OutboundQueue<String>(byteLimit: 100)
        #expect(q.enqueue("f1", size: 60) == .queued)
        #expect(q.enqueue("f2", size: 40) == .queued)  // exactly at the limit fits
        #expect(q.enqueue("f3", size: 1) == .overflow)
        #expect(q.count == 2)
        #expect(q.byteCount == 100)
        #expect(drain(&q) == ["f1", "f2"])
    }

    @Test func aMessageLargerThanTheLimitOverflowsEvenWhenEmpty() {
        var q = OutboundQueue<String>(byteLimit: 10)
        #expect(q.enqueue("big", size: 11) == .overflow)
        #expect(q.isEmpty)
    }

    @Test func newerReplaceableReplacesUnsentOlderAndMovesToTheTail() {
        var q = OutboundQueue<String>(byteLimit: 1000)
        #expect(q.enqueue("v1", size: 10, delivery: .replaceable(key: "volatile")) == .queued)
        #expect(q.enqueue("final1", size: 10) == .queued)
        #expect(q.enqueue("p1", size: 5, delivery: .replaceable(key: "progress")) == .queued)
        #expect(q.enqueue("v2", size: 12, delivery: .replaceable(key: "volatile")) == .replaced)
        #expect(q.enqueue("p2", size: 5, delivery: .replaceable(key: "progress")) == .replaced)
        #expect(q.count == 3)
        #expect(q.byteCount == 27)
        // The newer volatile does not jump ahead of the final enqueued after v1.
        #expect(drain(&q) == ["final1", "v2", "p2"])
    }

    @Test func aSentReplaceableIsNotReplacedAgain() {
        var q = OutboundQueue<String>(byteLimit: 1000)
        _ = q.enqueue("v1", size: 10, delivery: .replaceable(key: "volatile"))
        #expect(q.dequeue() == "v1")
        #expect(q.enqueue("v2", size: 10, delivery: .replaceable(key: "volatile")) == .queued)
        #expect(q.enqueue("v3", size: 10, delivery: .replaceable(key: "volatile")) == .replaced)
        #expect(drain(&q) == ["v3"])
    }

    @Test func replacementFreesTheOlderMessagesBytesBeforeCheckingTheLimit() {
        var q = OutboundQueue<String>(byteLimit: 100)
        _ = q.enqueue("final", size: 50)
        _ = q.enqueue("v1", size: 50, delivery: .replaceable(key: "volatile"))
        #expect(q.enqueue("v2", size: 50, delivery: .replaceable(key: "volatile")) == .replaced)
        #expect(q.enqueue("v3", size: 51, delivery: .replaceable(key: "volatile")) == .overflow)
        #expect(drain(&q) == ["final", "v2"])
    }

    @Test func removeAllDiscardsEverything() {
        var q = OutboundQueue<String>(byteLimit: 100)
        _ = q.enqueue("a", size: 10)
        _ = q.enqueue("v", size: 10, delivery: .replaceable(key: "volatile"))
        #expect(q.removeAll() == 2)
        #expect(q.isEmpty && q.byteCount == 0)
        #expect(q.enqueue("v2", size: 10, delivery: .replaceable(key: "volatile")) == .queued)
        #expect(drain(&q) == ["v2"])
    }

    @Test func longRunsStayOrderedAcrossCompaction() {
        let volatileBase = 1_000_000
        var q = OutboundQueue<Int>(byteLimit: 1 << 20)
        var expected: [Int] = []
        var got: [Int] = []
        for i in 0..<5000 {
            if i % 7 == 0 {
                _ = q.enqueue(volatileBase + i, size: 3, delivery: .replaceable(key: "volatile"))
            } else {
                _ = q.enqueue(i, size: 3)
                expected.append(i)
            }
            if i % 3 == 0, let e = q.dequeue() { got.append(e) }
        }
        while let e = q.dequeue() { got.append(e) }
        #expect(got.filter { $0 < volatileBase } == expected)
        #expect(q.byteCount == 0)
        // A delivered volatile was the newest one at that moment, so they come out increasing.
        let volatiles = got.filter { $0 >= volatileBase }
        #expect(volatiles == volatiles.sorted())
        #expect(volatiles.last == volatileBase + 4998)
    }
}
