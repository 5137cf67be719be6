import Testing
@testable import StenoCore

// MARK: - Clock, limits, failures

@Suite struct SessionLifecycleTests {
    @Test func progressAtMostOncePerIntervalWhileAudioFlows() {
        var h = Harness()
        h.start()
        #expect(h.tick(at: 101) == [])  // nothing received yet
        h.stream(seconds: 0.5)
        #expect(h.tick(at: 101.5) == [#"{"type":"progress","seq":2,"received":0.5,"analyzed":0}"#])
        h.stream(seconds: 0.5)
        #expect(h.tick(at: 102.0) == [])  // too soon
        #expect(h.tick(at: 102.5) == [#"{"type":"progress","seq":3,"received":1,"analyzed":0}"#])
        #expect(h.tick(at: 103.5) == [])  // nothing changed
        h.results([], analyzed: 1)
        #expect(h.tick(at: 103.6) == [#"{"type":"progress","seq":4,"received":1,"analyzed":1}"#])
        #expect(h.sent.last?.isReplaceable == true)
    }

    @Test func progressContinuesWhileEnding() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.text(#"{"type":"end"}"#)
        h.results([], analyzed: 0.5)
        #expect(h.tick(at: 101).first?.contains(#""type":"progress""#) == true)
    }

    @Test func idleBeforeStartClosesAtOnce() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 10, startTimeoutSeconds: 0))
        #expect(h.tick(at: 109.9) == [])
        #expect(h.tick(at: 110) == [errorEvent(1, .idle, "no \"start\" message for 10 s"), "close 4010 idle"])
    }

    @Test func aConnectionThatNeverStartsIsClosedAtTheStartDeadlineWhateverItSends() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 0, startTimeoutSeconds: 5))
        h.now = 102
        #expect(h.text(#"{"type":"nonsense"}"#).first?.contains("bad_message") == true)
        h.now = 104.9
        #expect(h.text("not json").first?.contains("bad_message") == true)
        #expect(h.tick(at: 104.99) == [])
        #expect(h.tick(at: 105) == [errorEvent(3, .idle, "no \"start\" message within 5 s of connecting"), "close 4010 idle"])
        // Once started, the deadline is over.
        var started = Harness(limits: SessionLimits(idleTimeoutSeconds: 0, startTimeoutSeconds: 5))
        started.start()
        #expect(started.tick(at: 200) == [])
    }

    @Test func idleInASessionFinalizesFirst() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 10))
        h.start()
        h.stream(seconds: 1)
        h.now = 105
        h.text(#"{"type":"pause"}"#)  // any frame counts as activity
        #expect(h.tick(at: 114.9).contains("end") == false)
        #expect(h.tick(at: 115) == ["end"])
        #expect(h.machine.phase == .ending(.idle))
        #expect(h.results([.final(result(0, 0.8, "last words"))]).count == 1)
        #expect(h.feed(.endCompleted) == [errorEvent(5, .idle, "no audio and no message for 10 s"), "close 4010 idle"])
        #expect(h.machine.phase == .failed(.idle))
    }

    @Test func analysisProgressIsNotIdleness() {
        // A buffer the audio fits in: reading is not paused (which would stop the clock).
        var h = Harness(limits: SessionLimits(bufferSeconds: 60, idleTimeoutSeconds: 10))
        h.start()
        h.stream(seconds: 30)
        h.now = 108
        h.results([], analyzed: 5)
        #expect(h.tick(at: 117).contains("end") == false)
        #expect(h.tick(at: 118).contains("end"))
    }

    /// protocol.md: idle time is not counted while the server itself holds the client back.
    /// A session paused at its buffer whose analysis stalls (it waits for a decoder, on a loaded
    /// machine) is not idle however long that takes; the clock starts again at the resume.
    @Test func noIdleWhileReadingIsPausedAndTheClockRestartsAtTheResume() {
        var h = Harness(limits: SessionLimits(bufferSeconds: 2, idleTimeoutSeconds: 10))
        h.start()
        #expect(h.audio(Harness.pcm(seconds: 2)) == ["audio 0+2", "pause"])
        #expect(h.tick(at: 200).contains("end") == false)
        #expect(h.machine.nextTickDue > 200)
        h.now = 250
        #expect(h.results([], analyzed: 1) == ["resume"])
        #expect(h.tick(at: 259.9).contains("end") == false)
        #expect(h.tick(at: 260).contains("end"))
    }

    @Test func noIdleWhileAFinalizeIsOutstanding() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 10))
        h.start()
        h.text(#"{"type":"finalize"}"#)
        #expect(h.tick(at: 200) == [])
        h.feed(.finalizeCompleted)
        #expect(h.tick(at: 201) == ["end"])
    }

    @Test func sessionLimitFinalizesThenCloses4009() {
        var h = Harness(limits: SessionLimits(maxSessionSeconds: 60, idleTimeoutSeconds: 0))
        h.start()
        h.stream(seconds: 1)
        #expect(h.tick(at: 159.9).contains("end") == false)
        #expect(h.tick(at: 160).first == "end")
        // Audio during the wind-down is dropped silently.
        #expect(h.audio(Harness.pcm(seconds: 1)) == [])
        h.results([.final(result(0, 1, "bye"))])
        #expect(h.feed(.endCompleted) == [errorEvent(4, .sessionLimit, "the session reached its maximum duration of 60 s"),
                                          "close 4009 session_limit"])
    }

    @Test func zeroMeansNoLimit() {
        var h = Harness(limits: SessionLimits(maxSessionSeconds: 0, idleTimeoutSeconds: 0))
        h.start()
        #expect(h.tick(at: 1e9) == [])
    }

    @Test func shutdown() {
        var waiting = Harness()
        #expect(waiting.feed(.shutdown) == [errorEvent(1, .shuttingDown, "the server is shutting down"),
                                            "close 1001 shutting_down"])

        var streaming = Harness()
        streaming.start()
        streaming.stream(seconds: 1)
        #expect(streaming.feed(.shutdown) == ["end"])
        #expect(streaming.feed(.shutdown) == [])
        streaming.results([.final(result(0, 1, "finals first"))])
        #expect(streaming.feed(.endCompleted) == [errorEvent(3, .shuttingDown, "the server is shutting down"),
                                                  "close 1001 shutting_down"])

        var ending = Harness()
        ending.start()
        ending.text(#"{"type":"end"}"#)
        #expect(ending.feed(.shutdown) == [])
        #expect(ending.feed(.endCompleted).last == "close 1000 ended")

        var slow = Harness()
        slow.start()
        slow.feed(.shutdown)
        #expect(slow.feed(.shutdownDeadline) == ["cancelPipeline",
            errorEvent(2, .shuttingDown, "the server is shutting down"), "close 1001 shutting_down"])
    }

    @Test func outboundOverflowIsSlowConsumer() {
        var h = Harness()
        h.start()
        #expect(h.feed(.outboundOverflow) == ["cancelPipeline",
            errorEvent(2, .slowConsumer, "the client is not reading: over 1048576 bytes of events unsent"),
            "close 4008 slow_consumer"])
    }

    @Test func pipelineFailureIsInternalAfterTheFinalsSoFar() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([.final(result(0, 1, "kept"))])
        #expect(h.feed(.pipelineFailed("recognizer crashed")) == ["cancelPipeline",
            errorEvent(3, .internal, "recognizer crashed"), "close 1011 internal"])
        #expect(h.sent.map(\.kind) == [.ready, .final, .error])
    }

    @Test func pipelineWarnings() {
        var h = Harness()
        h.start("opus", rate: 48000)
        #expect(h.feed(.pipelineWarning(StenoError(.badAudio, "undecodable Opus packet; concealed")))
            == [errorEvent(2, .badAudio, "undecodable Opus packet; concealed")])
        #expect(h.feed(.pipelineWarning(StenoError(.internal, "decoder gone"))).last == "close 1011 internal")
    }

    @Test func peerClosedStopsEverythingSilently() {
        var h = Harness()
        h.start()
        #expect(h.feed(.peerClosed) == ["cancelPipeline"])
        #expect(h.machine.phase == .disconnected)
        for input in everyInput { #expect(h.feed(input) == []) }

        var early = Harness()
        #expect(early.feed(.peerClosed) == [])
    }
}

// MARK: - Invariants under arbitrary input

@Suite struct SessionInvariantTests {
    /// Any sequence of inputs: seq is 1, 2, 3 … in order; a fatal error is followed by a close
    /// with its code; a close is the last action ever; nothing traps.
    @Test func randomInputSequencesKeepTheRules() throws {
        var rng: UInt64 = 12345
        func next(_ n: Int) -> Int {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return Int((rng >> 33) % UInt64(n))
        }
        let texts = [
            #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#,
            #"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":1},"volatile":false}"#,
            #"{"type":"start","audio":{"encoding":"opus","sampleRate":44100,"channels":1}}"#,
            #"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":1},"language":"de"}"#,
            #"{"type":"finalize"}"#, #"{"type":"finalize","through":0.5}"#, #"{"type":"end"}"#, #"{"type":"cancel"}"#,
            "{", #"{"type":"x"}"#, "[]",
        ]
        for _ in 0..<400 {
            var h = Harness(limits: SessionLimits(maxSessionSeconds: 50, idleTimeoutSeconds: 20))
            var analyzed = 0.0
            for _ in 0..<40 {
                switch next(12) {
                case 0, 1: h.text(texts[next(texts.count)])
                case 2, 3, 4:
                    let sizes = [0, 1, 2, 3, 320, 321, 641]
                    let packet = [UInt8](repeating: UInt8(next(256)), count: sizes[next(sizes.count)])
                    h.audio(packet)
                case 5:
                    analyzed += Double(next(100)) / 100
                    let t = Double(next(500)) / 100
                    let events: [TranscriberEvent] = [
                        .volatile(result(t, t + 0.5, ["", "a", "a b"][next(3)])),
                        .final(result(t, t + Double(next(100)) / 100, ["", "x", "x y"][next(3)])),
                        .speechStarted(at: t), .speechEnded(at: t),
                    ]
                    h.results([events[next(events.count)]], analyzed: analyzed)
                case 6: h.feed(.finalizeCompleted)
                case 7: h.feed(.endCompleted)
                case 8: h.tick(at: h.now + Double(next(30)))
                case 9: h.feed([.shutdown, .shutdownDeadline, .outboundOverflow, .peerClosed,
                                .pipelineFailed("boom"), .pipelineWarning(StenoError(.badAudio, "w"))][next(6)])
                default: h.tick(at: h.now + 0.5)
                }
            }
            // seq is gapless and ordered.
            #expect(h.sent.enumerated().allSatisfy { $0.element.seq == UInt64($0.offset + 1) })
            // A close is last and unique; a fatal error is immediately followed by its close.
            let closes = h.all.indices.filter { if case .close = h.all[$0] { return true } else { return false } }
            #expect(closes.count <= 1)
            if let close = closes.first { #expect(close == h.all.count - 1) }
            for (index, action) in h.all.enumerated() {
                guard case .send(let event) = action, event.kind == .error,
                      case .object(let object) = try JSONParser().parse(event.bytes),
                      object["fatal"] == .bool(true),
                      case .string(let codeName) = object["code"], let code = ErrorCode(rawValue: codeName) else { continue }
                #expect(index + 1 < h.all.count)
                if index + 1 < h.all.count {
                    #expect(h.all[index + 1] == .close(code: code.closeCode ?? 0, reason: code.rawValue))
                }
            }
            // Finals on the wire never overlap.
            var lastEnd = 0.0
            for event in h.sent where event.kind == .final {
                guard case .object(let object) = try JSONParser().parse(event.bytes),
                      case .number(let start) = object["start"], case .number(let end) = object["end"] else { continue }
                #expect(start >= lastEnd && end >= start)
                lastEnd = end
            }
        }
    }
}
