import Testing
@testable import StenoCore

@Suite struct TranscriptAssemblerTests {
    func emptyVolatile(_ at: Double, words: Bool = true) -> ServerEvent {
        .volatile(result(at, at, ""), includeWords: words)
    }

    @Test func volatileOnlyWhenTextChanges() {
        var t = TranscriptAssembler()
        #expect(t.consume(.volatile(result(0.5, 1.0, "hel"))) == [.volatile(result(0.5, 1.0, "hel"), includeWords: true)])
        #expect(t.consume(.volatile(result(0.5, 1.2, "hel"))) == [])
        #expect(t.consume(.volatile(result(0.5, 1.2, " hel  "))) == [])
        #expect(t.consume(.volatile(result(0.5, 1.4, "hello"))) == [.volatile(result(0.5, 1.4, "hello"), includeWords: true)])
        #expect(t.showingVolatile?.text == "hello")
    }

    @Test func emptyPartialClearsOnlyWhenShowing() {
        var t = TranscriptAssembler()
        #expect(t.consume(.volatile(result(0, 0, ""))) == [])
        _ = t.consume(.volatile(result(0.5, 1.0, "um")))
        #expect(t.consume(.volatile(result(0.5, 1.0, "  "))) == [emptyVolatile(0.5)])
        #expect(t.showingVolatile == nil)
        #expect(t.consume(.volatile(result(0.5, 1.0, ""))) == [])
    }

    @Test func finalSupersedesAVolatileItCovers() {
        var t = TranscriptAssembler()
        _ = t.consume(.volatile(result(0.5, 1.0, "hel")))
        let final = result(0.5, 1.2, "hello")
        #expect(t.consume(.final(final)) == [.final(final, includeWords: true)])
        #expect(t.showingVolatile == nil)
        // The same guess again after the final is news to the client: sent.
        #expect(t.consume(.volatile(result(1.3, 1.5, "hel"))).count == 1)
    }

    @Test func finalThatDoesNotCoverTheVolatileIsFollowedByAClear() {
        var t = TranscriptAssembler()
        _ = t.consume(.volatile(result(0.5, 2.0, "hello there")))
        let final = result(0.5, 1.2, "hello")
        #expect(t.consume(.final(final)) == [.final(final, includeWords: true), emptyVolatile(1.2)])
        #expect(t.showingVolatile == nil)
    }

    @Test func blankFinalIsDroppedAndClearsTheVolatile() {
        var t = TranscriptAssembler()
        _ = t.consume(.volatile(result(0.5, 1.0, "mm")))
        #expect(t.consume(.final(result(0.5, 1.0, "  ", [word(" ", 0.5, 1.0)]))) == [emptyVolatile(0.5)])
        #expect(t.finals.isEmpty)
        #expect(t.lastFinalEnd == 0)
        #expect(t.consume(.final(result(1, 2, ""))) == [])
    }

    @Test func finalWithoutTextTakesItsWords() {
        var t = TranscriptAssembler()
        let events = t.consume(.final(result(0, 1, "", [word("hi", 0, 0.4), word("there", 0.4, 1)])))
        #expect(t.finals.map(\.text) == ["hi there"])
        #expect(events.count == 1)
    }

    @Test func finalsNeverOverlapOrGoBack() {
        var t = TranscriptAssembler()
        _ = t.consume(.final(result(1.0, 2.0, "one")))
        // Starts before the previous end: start clamped to 2.0.
        #expect(t.consume(.final(result(1.5, 3.0, "two"))) == [.final(result(2.0, 3.0, "two"), includeWords: true)])
        // Entirely in the past: pinned at the previous end, zero length.
        #expect(t.consume(.final(result(0.2, 0.8, "three"))) == [.final(result(3.0, 3.0, "three"), includeWords: true)])
        // End before start.
        #expect(t.consume(.final(result(5.0, 4.0, "four"))) == [.final(result(5.0, 5.0, "four"), includeWords: true)])
        var previousEnd = 0.0
        for final in t.finals {
            #expect(final.range.start >= previousEnd)
            #expect(final.range.end >= final.range.start)
            previousEnd = final.range.end
        }
    }

    @Test func timesAreOnTheMillisecondGridAndNonNegative() {
        var t = TranscriptAssembler()
        let events = t.consume(.final(result(-0.5, 1.23456, "x", [word("x", .nan, 1.0004, 0.5)])))
        #expect(events == [.final(result(0, 1.235, "x", [word("x", 0, 1.0, 0.5)]), includeWords: true)])
        #expect(t.consume(.speechStarted(at: 2.00049)) == [.speech(.started, at: 2.0)])
        #expect(t.consume(.speechEnded(at: -3)) == [.speech(.ended, at: 0)])
        #expect(t.consume(.speechEnded(at: .infinity)) == [.speech(.ended, at: 1.235)])
    }

    @Test func wordsAreClampedIntoTheirFinal() {
        var t = TranscriptAssembler()
        let raw = result(1.0, 2.0, "a b c", [word("a", 0.5, 1.2, 1.5), word("b", 1.5, 1.4, -1), word("c", 1.9, 2.6)])
        _ = t.consume(.final(raw))
        let words = t.finals[0].words
        #expect(words == [word("a", 1.0, 1.2, 1.0), word("b", 1.5, 1.5, 0), word("c", 1.9, 2.0)])
        for w in words { #expect(t.finals[0].range.contains(w.range)) }
    }

    @Test func volatileIsClampedAfterTheLastFinal() {
        var t = TranscriptAssembler()
        _ = t.consume(.final(result(0, 2, "one")))
        #expect(t.consume(.volatile(result(1.5, 2.5, "tw"))) == [.volatile(result(2, 2.5, "tw"), includeWords: true)])
    }

    @Test func volatileOffSendsNoVolatilesNorClears() {
        var t = TranscriptAssembler(options: .init(volatile: false, words: true))
        #expect(t.consume(.volatile(result(0, 1, "hel"))) == [])
        #expect(t.consume(.final(result(0, 0.5, "hello"))) == [.final(result(0, 0.5, "hello"), includeWords: true)])
        #expect(t.consume(.final(result(1, 1, ""))) == [])
        #expect(t.clearVolatile() == [])
    }

    @Test func wordsOffOmitsWordsOnTheWireButKeepsThem() {
        var t = TranscriptAssembler(options: .init(volatile: true, words: false))
        let r = result(0, 1, "hi", [word("hi", 0, 1)])
        #expect(t.consume(.final(r)) == [.final(r, includeWords: false)])
        #expect(t.finals[0].words.count == 1)
        #expect(!ServerEvent.final(r, includeWords: false).encoded(seq: 1).text.contains("words"))
    }

    /// A translation's original is written as its translation is: trimmed, its words inside the
    /// final, lowered for raw text, never lost to the format.
    @Test func aTranslationsOriginalIsWrittenAsTheTranslationIs() {
        for format in [TextFormat.raw, .readable] {
            var t = TranscriptAssembler(options: .init(format: format))
            var heard = result(1, 2, "Good day.", [word("Good", 1, 1.5), word("day.", 1.5, 2)])
            heard.written = true
            heard.language = "de"
            heard.original = Original(text: " Guten Tag. ", words: [word("Guten", 0.9, 1.5), word("Tag.", 1.5, 2.4)], language: "de")
            _ = t.consume(.final(heard))
            let original = t.finals.first?.original
            #expect(original?.text == (format == .raw ? "guten tag" : "Guten Tag."), "\(format)")
            #expect(original?.words.map(\.range) == [TimeRange(start: 1, end: 1.5), TimeRange(start: 1.5, end: 2)], "\(format)")
            #expect(original?.language == "de")
        }
    }

    @Test func aFinalKeepsTheLanguageItWasHeardInThroughEveryFormat() {
        for format in [TextFormat.raw, .readable] {
            for profanity in [ProfanityMode.keep, .mask, .remove] {
                var t = TranscriptAssembler(options: .init(format: format, profanity: profanity))
                var heard = result(0, 1, "Guten Tag.", [word("Guten", 0, 0.5), word("Tag.", 0.5, 1)])
                heard.written = true
                heard.language = "de"
                _ = t.consume(.final(heard))
                #expect(t.finals.map(\.language) == ["de"], "\(format) \(profanity)")
            }
        }
        // Blank or spaced tags are not a language.
        var t = TranscriptAssembler()
        var spaced = result(0, 1, "hi")
        spaced.language = " fr "
        var blank = result(1, 2, "there")
        blank.language = "  "
        _ = t.consume(.final(spaced))
        _ = t.consume(.final(blank))
        #expect(t.finals.map(\.language) == ["fr", nil])
    }

    @Test func clearVolatileBeforeATime() {
        var t = TranscriptAssembler()
        _ = t.consume(.volatile(result(3, 4, "later")))
        #expect(t.clearVolatile(before: 3) == [])
        #expect(t.clearVolatile(before: 3.5) == [emptyVolatile(3)])
        #expect(t.clearVolatile() == [])
        _ = t.consume(.volatile(result(5, 6, "again")))
        t.discardVolatile()
        #expect(t.showingVolatile == nil)
    }
}
