import Testing
@testable import StenoCore

// MARK: - Results, finalize, end, cancel

@Suite struct SessionFlowTests {
    @Test func readingPausesAtTheBufferAndResumesAtHalfOfIt() {
        var h = Harness(limits: SessionLimits(bufferSeconds: 2))
        h.start()
        #expect(h.audio(Harness.pcm(seconds: 1)) == ["audio 0+1"])
        #expect(h.audio(Harness.pcm(seconds: 1)) == ["audio 1+1", "pause"])
        #expect(h.machine.isReadingPaused)
        // What was already in flight is still taken, and the pause is not repeated.
        #expect(h.audio(Harness.pcm(seconds: 0.5)) == ["audio 2+0.5"])
        #expect(h.results([], analyzed: 1) == [], "1.5 s still waiting")
        #expect(h.results([], analyzed: 1.5) == ["resume"], "down to half the buffer")
        #expect(!h.machine.isReadingPaused)
        #expect(h.results([], analyzed: 2.5) == [])
        #expect(h.audio(Harness.pcm(seconds: 2)) == ["audio 2.5+2", "pause"])
        // Closing needs no resume: nothing follows a close.
        #expect(h.text(#"{"type":"cancel"}"#).last == "close 1000 cancelled")
    }

    @Test func resultsBecomeEventsWithIncreasingSeq() {
        var h = Harness()
        h.start()
        h.stream(seconds: 2)
        #expect(h.results([.speechStarted(at: 0.3), .volatile(result(0.3, 0.9, "hel"))]) == [
            #"{"type":"speech","seq":2,"state":"started","at":0.3}"#,
            #"{"type":"volatile","seq":3,"start":0.3,"end":0.9,"text":"hel","words":[]}"#])
        #expect(h.results([.final(result(0.3, 1.1, "hello", [word("hello", 0.3, 1.1, 0.8)])), .speechEnded(at: 1.2)],
                          analyzed: 1.5) == [
            #"{"type":"final","seq":4,"start":0.3,"end":1.1,"text":"hello","words":[{"word":"hello","start":0.3,"end":1.1,"confidence":0.8}]}"#,
            #"{"type":"speech","seq":5,"state":"ended","at":1.2}"#])
        #expect(h.machine.finals.map(\.text) == ["hello"])
        #expect(h.machine.analyzedSeconds == 1.5)
    }

    @Test func textIsReadableUnlessRawIsAsked() {
        var h = Harness()
        h.start(format: nil)
        h.stream(seconds: 2)
        #expect(h.results([.final(result(0.3, 1.1, "i saw it", [word("i", 0.3, 0.5), word("saw", 0.5, 0.8), word("it", 0.8, 1.1)])),
                           .speechEnded(at: 1.2)], analyzed: 1.5) == [
            #"{"type":"final","seq":2,"start":0.3,"end":1.1,"text":"I saw it.","words":[{"word":"I","start":0.3,"end":0.5,"confidence":0.9},{"word":"saw","start":0.5,"end":0.8,"confidence":0.9},{"word":"it.","start":0.8,"end":1.1,"confidence":0.9}]}"#,
            #"{"type":"speech","seq":3,"state":"ended","at":1.2}"#])
    }

    @Test func volatileAndWordsFollowTheStartRequest() {
        var h = Harness()
        h.start(extra: #","volatile":false,"words":false"#)
        h.stream(seconds: 1)
        #expect(h.results([.volatile(result(0, 0.5, "hel")), .final(result(0, 0.6, "hello", [word("hello", 0, 0.6)]))])
            == [#"{"type":"final","seq":2,"start":0,"end":0.6,"text":"hello"}"#])
        #expect(h.machine.includesWords == false)
    }

    @Test func finalizeRepliesWithItsFinalsThenFinalized() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1.5)
        #expect(h.text(#"{"type":"finalize"}"#) == ["finalize 1.5"])
        #expect(h.machine.phase == .finalizing)
        // Audio after the message does not move T.
        h.stream(seconds: 0.5)
        h.results([.final(result(0.2, 1.4, "hello there"))])
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":3,"through":1.5}"#])
        #expect(h.machine.phase == .streaming)
        // A stray completion is ignored.
        #expect(h.feed(.finalizeCompleted) == [])
    }

    @Test func finalizeThroughIsClampedToWhatWasReceived() {
        var h = Harness()
        h.start()
        h.stream(seconds: 2)
        #expect(h.text(#"{"type":"finalize","through":0.75}"#) == ["finalize 0.75"])
        #expect(h.text(#"{"type":"finalize","through":99}"#) == ["finalize 2"])
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":2,"through":0.75}"#])
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":3,"through":2}"#])
    }

    @Test func finalizeWithoutAFinalClearsAVolatileItCovers() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([.volatile(result(0.2, 0.8, "mm"))])
        h.text(#"{"type":"finalize"}"#)
        #expect(h.feed(.finalizeCompleted) == [
            #"{"type":"volatile","seq":3,"start":0.2,"end":0.2,"text":"","words":[]}"#,
            #"{"type":"finalized","seq":4,"through":1}"#])
    }

    @Test func finalizeKeepsAVolatileAfterItsThrough() {
        var h = Harness()
        h.start()
        h.stream(seconds: 3)
        h.results([.final(result(0, 1, "one")), .volatile(result(2.1, 2.9, "tw"))])
        h.text(#"{"type":"finalize","through":2}"#)
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":4,"through":2}"#])
        #expect(h.machine.showingVolatile?.text == "tw")
    }

    @Test func endDeliversFinalsThenEndedThenCloses() {
        var h = Harness()
        h.start()
        h.stream(seconds: 2.5)
        #expect(h.text(#"{"type":"end"}"#) == ["end"])
        #expect(h.machine.phase == .ending(.requested))
        h.results([.volatile(result(1.5, 2.4, "goodby"))])
        #expect(h.results([.final(result(1.5, 2.4, "goodbye"))], analyzed: 2.5).count == 1)
        #expect(h.feed(.endCompleted) == [#"{"type":"ended","seq":4,"duration":2.5}"#, "close 1000 ended"])
        #expect(h.machine.phase == .ended)
        for input in everyInput { #expect(h.feed(input) == []) }
    }

    @Test func endClearsAVolatileNothingFinalized() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([.volatile(result(0.5, 0.9, "uh"))])
        h.text(#"{"type":"end"}"#)
        #expect(h.feed(.endCompleted) == [
            #"{"type":"volatile","seq":3,"start":0.5,"end":0.5,"text":"","words":[]}"#,
            #"{"type":"ended","seq":4,"duration":1}"#, "close 1000 ended"])
    }

    @Test func endAnswersOutstandingFinalizesFirst() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.text(#"{"type":"finalize"}"#)
        h.text(#"{"type":"end"}"#)
        #expect(h.feed(.endCompleted) == [#"{"type":"finalized","seq":2,"through":1}"#,
                                          #"{"type":"ended","seq":3,"duration":1}"#, "close 1000 ended"])
    }

    @Test func afterEnd() {
        var h = Harness()
        h.start()
        h.text(#"{"type":"end"}"#)
        // Audio: dropped; told once.
        #expect(h.audio(Harness.pcm(seconds: 0.1)) == [errorEvent(2, .badMessage, "audio after \"end\" is ignored")])
        #expect(h.audio(Harness.pcm(seconds: 0.1)) == [])
        #expect(h.machine.receivedSeconds == 0)
        #expect(h.text(#"{"type":"finalize"}"#) == [errorEvent(3, .badMessage, "the session is ending; \"finalize\" is ignored")])
        #expect(h.text(#"{"type":"end"}"#) == [errorEvent(4, .badMessage, "the session is already ending; \"end\" is ignored")])
        // Cancel is honoured.
        #expect(h.text(#"{"type":"cancel"}"#) == ["cancelPipeline", #"{"type":"cancelled","seq":5,"through":0}"#,
                                                  "close 1000 cancelled"])
        #expect(h.feed(.endCompleted) == [])
    }

    @Test func cancelSendsOnlyCancelledThroughWhatWasAnalyzed() {
        var h = Harness()
        h.start()
        h.stream(seconds: 3)
        h.results([.final(result(0, 1.2, "one")), .volatile(result(1.3, 1.8, "tw"))], analyzed: 1.9)
        #expect(h.text(#"{"type":"cancel"}"#) == ["cancelPipeline", #"{"type":"cancelled","seq":4,"through":1.9}"#,
                                                  "close 1000 cancelled"])
        #expect(h.machine.phase == .cancelled)
        // Late pipeline output is discarded, the volatile is never cleared on the wire.
        #expect(h.results([.final(result(1.3, 2.0, "two"))], analyzed: 2.5) == [])
        #expect(h.machine.finals.map(\.text) == ["one"])
    }

    @Test func cancelThroughUsesTheLastFinalWhenAnalysisWasNotReported() {
        var h = Harness()
        h.start()
        h.stream(seconds: 3)
        h.results([.final(result(0, 2.2, "one"))])
        #expect(h.text(#"{"type":"cancel"}"#)[1] == #"{"type":"cancelled","seq":3,"through":2.2}"#)
    }

    @Test func cancelWhileFinalizingDropsTheFinalize() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.text(#"{"type":"finalize"}"#)
        #expect(h.text(#"{"type":"cancel"}"#).last == "close 1000 cancelled")
        #expect(h.feed(.finalizeCompleted) == [])
    }
}
