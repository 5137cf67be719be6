import StenoCore
import Testing
@testable import steno

/// The bridges' parts that need no OBS nor YouTube: obs-websocket's messages, the pacing of
/// live captions (time passed in), YouTube's POSTs, sequence numbers and clock offset.
@Suite struct OBSWebSocketTests {
    @Test func authenticationIsObsWebsocketsDocumentedExample() {
        #expect(OBSWebSocket.authentication(password: "supersecretpassword", salt: "lM1GncleQOaCu9lT1yeUZhFYnqhsLLP1G5lAGo3ixaI=",
                                            challenge: "+IxH4CnCiqpX1rM9scsNynZzbOe4KhDeYcTNS3PDaeY=")
                == "1Ct943GAT+6YQUUX47Ia/ncufilbe6+oD6lY+5kaCu4=")
    }

    @Test func messages() {
        #expect(OBSWebSocket.message(#"{"op":0,"d":{"obsWebSocketVersion":"5.1.0","rpcVersion":1,"authentication":{"challenge":"c","salt":"s"}}}"#)
                == .hello(challenge: "c", salt: "s"))
        #expect(OBSWebSocket.message(#"{"op":0,"d":{"rpcVersion":1}}"#) == .hello(challenge: nil, salt: nil))
        #expect(OBSWebSocket.message(#"{"op":2,"d":{"negotiatedRpcVersion":1}}"#) == .identified)
        #expect(OBSWebSocket.message(#"{"op":7,"d":{"requestType":"SendStreamCaption","requestId":"steno-3","requestStatus":{"result":false,"code":501}}}"#)
                == .response(requestID: "steno-3", code: 501, comment: nil, data: nil))
        let event = OBSWebSocket.message(#"{"op":5,"d":{"eventType":"StreamStateChanged","eventIntent":64,"eventData":{"outputActive":true,"outputState":"OBS_WEBSOCKET_OUTPUT_STARTED"}}}"#)
        guard case .event("StreamStateChanged", let data)? = event else {
            Issue.record("\(String(describing: event))")
            return
        }
        #expect(data?["outputActive"] == .bool(true))
        #expect(OBSWebSocket.message("not json") == nil)
        #expect(OBSWebSocket.message(#"{"op":9,"d":{}}"#) == nil)
        #expect(OBSWebSocket.identify(password: "p", challenge: nil, salt: nil) == #"{"op":1,"d":{"rpcVersion":1,"eventSubscriptions":64}}"#)
        #expect(OBSWebSocket.request("SendStreamCaption", id: "steno-1", captionText: "a \"b\"\nc")
                == #"{"op":6,"d":{"requestType":"SendStreamCaption","requestId":"steno-1","requestData":{"captionText":"a \"b\"\nc"}}}"#)
    }
}

@Suite struct LiveCaptionsTests {
    static func final(_ start: Double, _ end: Double, _ text: String) -> RecognitionResult {
        RecognitionResult(range: TimeRange(start: start, end: end), text: text)
    }

    @Test func cuesArePacedByHowLongTheirWordsTookAndClearedWhenNothingFollows() {
        var captions = LiveCaptions(paced: true, clearAfter: 7, idleSettle: 0)
        // One long final at once: three cues of 32-column rows, in 608's characters.
        captions.final(Self.final(0, 9, "Voilà — the first words of a long sentence that takes far more than one caption to show on the screen"), now: 100)
        let first = captions.due(now: 100)
        #expect(first.count == 1)
        #expect(first[0].lines.allSatisfy { $0.count <= 32 } && first[0].lines.count <= 2)
        #expect(first[0].text.hasPrefix("Voilà — the first"))
        #expect(captions.due(now: 100.5).isEmpty)
        let hold = first[0].duration
        #expect(captions.nextDue == 100 + max(1, hold))
        var shown = first
        var now = 100.0
        while let next = captions.nextDue, shown.count < 10 {
            now = next
            let due = captions.due(now: now)
            shown += due
            if due.last?.lines.isEmpty == true { break }
        }
        // Every word once, then a clear 7 s after the last caption.
        #expect(shown.dropLast().flatMap { $0.lines }.joined(separator: " ").split(separator: " ").count == 21)
        #expect(shown.last?.lines == [])
    }

    @Test func shortCuesWaitForTheNextFinalUnlessToldNotTo() {
        var files = LiveCaptions(paced: false, idleSettle: 1.5)
        files.final(Self.final(0, 0.4, "Yes."), now: 10)
        #expect(files.due(now: 10).isEmpty)
        files.final(Self.final(0.6, 0.9, "No."), now: 10.5)
        #expect(files.due(now: 10.5).isEmpty)
        #expect(files.nextDue == 12)
        #expect(files.due(now: 12).map(\.text) == ["Yes. No."])
        var live = LiveCaptions(paced: true, idleSettle: 0)
        live.final(Self.final(0, 0.4, "Yes."), now: 10)
        #expect(live.due(now: 10).map(\.text) == ["Yes."])
    }

    @Test func liveWordsGrowAsTheyBecomeStable() {
        var captions = LiveCaptions(paced: true, liveWords: true, idleSettle: 0)
        captions.volatile("the quick", now: 0)
        #expect(captions.due(now: 0).isEmpty, "nothing is stable after one guess")
        captions.volatile("the quick brown", now: 0.2)
        #expect(captions.due(now: 0.2).map(\.text) == ["the quick"])
        captions.volatile("the quick brown fox", now: 0.3)
        #expect(captions.due(now: 0.3).isEmpty, "at most every half second")
        #expect(captions.nextDue == 0.7)
        #expect(captions.due(now: 0.7).map(\.text) == ["the quick brown"])
        captions.final(Self.final(0, 2, "The quick brown fox jumps over the lazy dog."), now: 1)
        #expect(captions.due(now: 1.2).map(\.text) == ["The quick brown fox jumps over\nthe lazy dog."])
        captions.final(Self.final(2, 4, "And then it ran away into the woods."), now: 3)
        // Two rows at most: the oldest row goes.
        #expect(captions.due(now: 3).map(\.text) == ["the lazy dog. And then it ran\naway into the woods."])
    }
}

@Suite struct YouTubeIngestionTests {
    @Test func postsKeepTheirSeqAndBodyUntilTaken() {
        var ingestion = YouTubeIngestion(url: "https://upload.youtube.com/closedcaption?cid=KEY")
        #expect(ingestion.next() == nil)
        ingestion.add(.init(spokenAt: 1_741_356_309.042, lines: ["Hello there,", "how are you?"]))
        let first = ingestion.next()
        #expect(first?.seq == 1)
        #expect(first?.body == "2025-03-07T14:05:09.042\nHello there,<br>how are you?\n")
        #expect(first.map(ingestion.address) == "https://upload.youtube.com/closedcaption?cid=KEY&seq=1")
        // Not answered: sent again as it was; what comes meanwhile waits.
        ingestion.add(.init(spokenAt: 1_741_356_312, lines: ["Fine."]))
        #expect(ingestion.answered(status: nil, body: "timeout", sentAt: 0, answeredAt: 0) == .retry)
        #expect(ingestion.answered(status: 503, body: "", sentAt: 0, answeredAt: 0) == .retry)
        #expect(ingestion.next()?.seq == 1)
        #expect(ingestion.next()?.body == first?.body)
        // Taken; YouTube's clock is 10 s ahead: the next caption is timed on it.
        #expect(ingestion.answered(status: 200, body: "2025-03-07T14:05:20.000", sentAt: 1_741_356_309.9, answeredAt: 1_741_356_310.1)
                == .taken)
        #expect(ingestion.clockOffset.map { abs($0 - 10) < 0.001 } == true)
        let second = ingestion.next()
        #expect(second?.seq == 2 && second?.body == "2025-03-07T14:05:22.000\nFine.\n")
        #expect(ingestion.answered(status: 400, body: "bad", sentAt: 0, answeredAt: 0) == .dropped(status: 400))
        #expect(ingestion.next() == nil)
    }

    @Test func manyCaptionsGoInFewPosts() {
        var ingestion = YouTubeIngestion(url: "http://127.0.0.1/closedcaption?cid=K")
        for index in 0..<45 { ingestion.add(.init(spokenAt: Double(index), lines: ["\(index)"])) }
        var seqs: [Int] = []
        while let post = ingestion.next() {
            seqs.append(post.seq)
            ingestion.answered(status: 200, body: "", sentAt: 0, answeredAt: 0)
        }
        #expect(seqs == [1, 2, 3])
    }
}
