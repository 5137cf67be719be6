import Testing

// End-to-end test support: what a session must satisfy, how it may end, how alike two
// transcripts are.

/// How a client that floods the server and never reads ends: with the 4008 close frame, or,
/// when its unread flood is still in the server's socket as the server closes, with a TCP
/// reset that takes the close frame (waiting in the client's full receive buffer) with it.
/// A client that does not read cannot be promised the frame; the tests check the server's
/// decision through its `slow_consumer` count as well.
func expectSlowConsumerClose(_ client: StenoClient, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(client.isClosed, "\(what): still open", sourceLocation: sourceLocation)
    #expect(client.closeCode == 4008 || client.closeCode == nil,
            "\(what): close \(client.closeCode.map(String.init) ?? "none")", sourceLocation: sourceLocation)
}

/// What every session must satisfy (docs/protocol.md): `ready` first; `seq` 1, 2, 3 … with no gaps;
/// finals in increasing, non-overlapping ranges with their words inside; every time inside the
/// audio; a (non-empty) volatile followed by another volatile or a final.
func expectWellFormed(_ events: [WireEvent], audio duration: Double, _ what: String = "",
                      sourceLocation: SourceLocation = #_sourceLocation) {
    let slack = 0.0015
    // `ready` first (only errors about messages before `start` may precede it).
    let firstOther = events.first { $0.type != "error" }
    #expect(firstOther?.type == "ready", "\(what): first event \(firstOther?.description ?? "none")", sourceLocation: sourceLocation)
    let seqs = events.map(\.seq)
    #expect(seqs == Array(1...max(1, events.count)).prefix(events.count).map { $0 },
            "\(what): seq \(seqs)", sourceLocation: sourceLocation)
    func inside(_ t: Double) -> Bool { t >= 0 && t <= duration + slack }
    var lastFinalEnd = 0.0
    var pendingVolatile: WireEvent?
    for event in events {
        switch event.type {
        case "final", "volatile":
            guard let r = event.result else {
                Issue.record("\(what): malformed result \(event)", sourceLocation: sourceLocation)
                continue
            }
            #expect(r.start <= r.end && inside(r.start) && inside(r.end), "\(what): times of \(event)", sourceLocation: sourceLocation)
            for w in r.words {
                #expect(w.start <= w.end && w.start >= r.start - slack && w.end <= r.end + slack,
                        "\(what): word \(w.word) [\(w.start)–\(w.end)] outside \(r)", sourceLocation: sourceLocation)
            }
            if event.type == "final" {
                #expect(r.start >= lastFinalEnd - slack, "\(what): final \(r) overlaps the previous one ending at \(lastFinalEnd)",
                        sourceLocation: sourceLocation)
                #expect(!r.text.isEmpty, "\(what): empty final", sourceLocation: sourceLocation)
                lastFinalEnd = r.end
                pendingVolatile = nil
            } else {
                pendingVolatile = r.text.isEmpty ? nil : event
            }
        case "speech":
            #expect(inside(event.number("at") ?? -1), "\(what): \(event)", sourceLocation: sourceLocation)
        case "progress":
            let received = event.number("received") ?? -1, analyzed = event.number("analyzed") ?? -1
            #expect(analyzed >= 0 && analyzed <= received + slack && inside(received), "\(what): \(event)",
                    sourceLocation: sourceLocation)
        default:
            break
        }
    }
    if let pendingVolatile, events.last?.type != "cancelled" {
        Issue.record("\(what): volatile \(pendingVolatile) is followed by neither a volatile nor a final",
                     sourceLocation: sourceLocation)
    }
}

/// What a client saw, to hand from a client's thread to the test's (expectations must be
/// checked on the test's own thread to count).
struct SessionRecord: Sendable {
    var events: [WireEvent]
    var closeCode: UInt16?
    var closeReason: String
    var blockedWrites: Int
}

extension StenoClient {
    var record: SessionRecord {
        SessionRecord(events: events, closeCode: closeCode, closeReason: closeReason, blockedWrites: blockedWrites)
    }
}

func expectEndedNormally(_ client: StenoClient, audio duration: Double, _ what: String = "", allowErrors: Bool = false,
                         sourceLocation: SourceLocation = #_sourceLocation) {
    expectEndedNormally(client.record, audio: duration, what, allowErrors: allowErrors, sourceLocation: sourceLocation)
}

func expectFatal(_ client: StenoClient, _ code: String, close: UInt16, _ what: String = "",
                 sourceLocation: SourceLocation = #_sourceLocation) {
    expectFatal(client.record, code, close: close, what, sourceLocation: sourceLocation)
}

/// A session that ended normally: well formed, `ended` last with the duration, close 1000.
func expectEndedNormally(_ client: SessionRecord, audio duration: Double, _ what: String = "", allowErrors: Bool = false,
                         sourceLocation: SourceLocation = #_sourceLocation) {
    expectWellFormed(client.events, audio: duration, what, sourceLocation: sourceLocation)
    #expect(client.events.last?.type == "ended", "\(what): last event \(client.events.last?.description ?? "none")",
            sourceLocation: sourceLocation)
    if let ended = client.events.last, ended.type == "ended" {
        #expect(abs((ended.number("duration") ?? -1) - duration) < 0.0015, "\(what): \(ended) for \(duration) s",
                sourceLocation: sourceLocation)
    }
    #expect(client.closeCode == 1000, "\(what): close \(client.closeCode.map(String.init) ?? "none") \(client.closeReason)",
            sourceLocation: sourceLocation)
    #expect(allowErrors || client.events.errors.isEmpty, "\(what): errors \(client.events.errors)", sourceLocation: sourceLocation)
}

/// A session that ended with a fatal error: it is the last event, then the close with its code.
func expectFatal(_ client: SessionRecord, _ code: String, close: UInt16, _ what: String = "",
                 sourceLocation: SourceLocation = #_sourceLocation) {
    let last = client.events.last
    #expect(last?.type == "error" && last?.errorCode == code && last?.bool("fatal") == true,
            "\(what): last event \(last?.description ?? "none"), expected a fatal \(code)", sourceLocation: sourceLocation)
    #expect(client.closeCode == close, "\(what): close \(client.closeCode.map(String.init) ?? "none") \(client.closeReason), expected \(close)",
            sourceLocation: sourceLocation)
    let seqs = client.events.map(\.seq)
    #expect(seqs == Array(0..<seqs.count).map { $0 + 1 }, "\(what): seq \(seqs)", sourceLocation: sourceLocation)
}

/// The words two transcripts share, as a fraction of the longer one's (order-aware: the
/// longest common subsequence).
func wordOverlap(_ a: [String], _ b: [String]) -> Double {
    guard !a.isEmpty || !b.isEmpty else { return 1 }
    var row = [Int](repeating: 0, count: b.count + 1)
    for x in a {
        var previousDiagonal = 0
        for (j, y) in b.enumerated() {
            let above = row[j + 1]
            row[j + 1] = x == y ? previousDiagonal + 1 : max(row[j + 1], row[j])
            previousDiagonal = above
        }
    }
    return Double(row[b.count]) / Double(max(a.count, b.count))
}
