import Testing
@testable import StenoCore

@Suite struct ClientMessageTests {
    func error(_ text: String) -> StenoError? {
        do {
            _ = try ClientMessage.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func parsesAFullStart() throws {
        let message = try ClientMessage.parse("""
            {"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},
             "language":"en-US","volatile":false,"words":false,"channel":"studio-a"}
            """)
        let format = try AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1)
        #expect(message == .start(StartRequest(audio: format, language: "en-US", volatile: false,
                                               words: false, channel: "studio-a")))
    }

    @Test func theStartWriterIsReadBackAsWritten() throws {
        let format = try AudioFormat(encoding: .opus, sampleRate: 48000, channels: 2)
        let text = ClientMessage.startText(format, language: "en-GB", model: "legal", channel: "hall-1", volatile: false,
                                           words: false, format: .raw, phrases: ["John Dashwood"], boost: 2, alternatives: 3)
        guard case .start(let request) = try ClientMessage.parse(text) else { Issue.record("not a start: \(text)"); return }
        var expected = StartRequest(audio: format, language: "en-GB", volatile: false, words: false, channel: "hall-1", format: .raw)
        expected.vocabulary = try Vocabulary(phrases: ["John Dashwood"], boost: 2)
        expected.alternatives = 3
        expected.model = "legal"
        #expect(request == expected)
        // Defaults: the plain start parses to the request's defaults.
        #expect(try ClientMessage.parse(ClientMessage.startText(format)) == .start(StartRequest(audio: format)))
    }

    @Test func startDefaults() throws {
        let message = try ClientMessage.parse(#"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":2}}"#)
        guard case .start(let request) = message else { Issue.record("not a start"); return }
        #expect(request.audio.encoding == .opus)
        #expect(request.audio.channels == 2)
        #expect(request.language == nil)
        #expect(request.volatile)
        #expect(request.words)
        #expect(request.channel == nil)
    }

    @Test func nullMeansAbsentForOptionalFields() throws {
        let message = try ClientMessage.parse(
            #"{"type":"start","audio":{"encoding":"pcm_f32le","sampleRate":8000,"channels":1},"channel":null,"volatile":null}"#)
        guard case .start(let request) = message else { Issue.record("not a start"); return }
        #expect(request.channel == nil)
        #expect(request.volatile)
    }

    @Test func ignoresUnknownFields() throws {
        #expect(try ClientMessage.parse(#"{"type":"end","future":{"x":[1]}}"#) == .end)
    }

    @Test func parsesControlMessages() throws {
        #expect(try ClientMessage.parse(#"{"type":"finalize"}"#) == .finalize(through: nil))
        #expect(try ClientMessage.parse(#"{"type":"finalize","through":12.5}"#) == .finalize(through: 12.5))
        #expect(try ClientMessage.parse(#"{"type":"end"}"#) == .end)
        #expect(try ClientMessage.parse(#"{"type":"cancel"}"#) == .cancel)
        #expect(try ClientMessage.parse(utf8: Array(#"{"type":"cancel"}"#.utf8)) == .cancel)
    }

    @Test(arguments: [
        ("hello", "not valid JSON: unexpected character 'h', expected a value (at byte 0)"),
        ("[1]", "expected a JSON object, not an array"),
        ("\"start\"", "expected a JSON object, not a string"),
        ("{}", "field \"type\" is missing"),
        (#"{"type":3}"#, "field \"type\" must be a string"),
        (#"{"type":"pause"}"#, "unknown message type \"pause\"; expected start, resume, finalize, end, cancel, gap or silence"),
        (#"{"type":"start"}"#, "field \"audio\" is missing"),
        (#"{"type":"start","audio":[]}"#, "field \"audio\" must be an object"),
        (#"{"type":"start","audio":{"sampleRate":16000,"channels":1}}"#, "field \"audio.encoding\" is missing"),
        (#"{"type":"start","audio":{"encoding":1,"sampleRate":16000,"channels":1}}"#,
         "field \"audio.encoding\" must be a string"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":"16000","channels":1}}"#,
         "field \"audio.sampleRate\" must be a number"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000.5,"channels":1}}"#,
         "field \"audio.sampleRate\" must be an integer"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000}}"#, "field \"audio.channels\" is missing"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1},"volatile":"yes"}"#,
         "field \"volatile\" must be true or false"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1},"words":1}"#,
         "field \"words\" must be true or false"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1},"language":7}"#,
         "field \"language\" must be a string"),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1},"language":"english please"}"#,
         "field \"language\" must be a language tag such as \"en-US\", not \"english please\""),
        (#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1},"channel":"a/b"}"#,
         "field \"channel\" must be 1-64 letters, digits, '-', '_' or '.', not \"a/b\""),
        (#"{"type":"finalize","through":"end"}"#, "field \"through\" must be a number"),
        (#"{"type":"finalize","through":-1}"#, "field \"through\" must be a time in seconds, 0 or more"),
    ])
    func badMessages(_ text: String, _ message: String) {
        #expect(error(text) == StenoError(.badMessage, message))
    }

    @Test func badFieldsWinOverUnsupportedAudio() {
        // The request is malformed and asks for an unsupported rate: malformed is reported (non-fatal).
        #expect(error(#"{"type":"start","audio":{"encoding":"opus","sampleRate":44100,"channels":1},"words":"no"}"#)?.code
            == .badMessage)
    }

    @Test(arguments: [
        (#"{"encoding":"mp3","sampleRate":16000,"channels":1}"#, "encoding must be pcm_s16le, pcm_f32le or opus, not \"mp3\""),
        (#"{"encoding":"opus","sampleRate":44100,"channels":1}"#, "Opus sample rate must be 8000, 12000, 16000, 24000 or 48000 Hz, not 44100"),
        (#"{"encoding":"pcm_s16le","sampleRate":96000,"channels":1}"#, "PCM sample rate must be 8000-48000 Hz, not 96000"),
        (#"{"encoding":"pcm_s16le","sampleRate":16000,"channels":6}"#, "channels must be 1 or 2, not 6"),
        (#"{"encoding":"pcm_s16le","sampleRate":16000,"channels":0}"#, "channels must be 1 or 2, not 0"),
        (#"{"encoding":"pcm_s16le","sampleRate":1e30,"channels":1}"#, "the sample rate is out of range"),
    ])
    func unsupportedAudio(_ audio: String, _ message: String) {
        #expect(error(#"{"type":"start","audio":"# + audio + "}") == StenoError(.unsupportedAudio, message))
    }

    @Test(arguments: ["a", "studio-a", "Studio_A.2", String(repeating: "x", count: 64), "..a", "-"])
    func validChannelNames(_ name: String) {
        #expect(ChannelName.isValid(name))
    }

    @Test(arguments: ["", ".", "..", "a b", "a/b", "é", "a?b", String(repeating: "x", count: 65), "a\u{0}"])
    func invalidChannelNames(_ name: String) {
        #expect(!ChannelName.isValid(name))
        #expect(throws: StenoError.self) { try ChannelName.validate(name) }
    }

    @Test func languageTags() {
        for tag in ["en", "en-US", "en_us", "zh-Hant-TW", "sr-Latn-RS", "es-419"] {
            #expect(LanguageTag.isWellFormed(tag), "\(tag)")
        }
        for tag in ["", "e", "english please", "en--US", "en-", "1en", "en-toolongsubtag", "é"] {
            #expect(!LanguageTag.isWellFormed(tag), "\(tag)")
        }
    }

    @Test func languageMatchingIsByPrimaryLanguage() {
        #expect(LanguageTag.serves("en-US", requested: "en-US"))
        #expect(LanguageTag.serves("en-US", requested: "en"))
        #expect(LanguageTag.serves("en-US", requested: "EN_gb"))
        #expect(!LanguageTag.serves("en-US", requested: "fr-FR"))
        #expect(!LanguageTag.serves("en-US", requested: "eng"))
        // A multilingual model serves every language.
        #expect(LanguageTag.serves(LanguageTag.multilingual, requested: "de-DE"))
        #expect(LanguageTag.serves("mul", requested: "en"))
        #expect(!LanguageTag.serves("mul", requested: ""))
    }
}

/// `start`'s `continues` (the session a talker lost, with its token) and the digest that proves
/// the token to another instance without keeping it.
@Suite struct ContinuesTests {
    @Test func continuesIsWrittenAndReadBack() throws {
        let format = try AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1)
        let previous = StartRequest.Continuation(session: "abc123", resumeToken: "t0k3n")
        let text = ClientMessage.startText(format, channel: "hall", continues: previous)
        guard case .start(let request) = try ClientMessage.parse(text) else { Issue.record("not a start: \(text)"); return }
        #expect(request.continues == previous && request.channel == "hall")
        guard case .start(let plain) = try ClientMessage.parse(ClientMessage.startText(format)) else { return }
        #expect(plain.continues == nil)
    }

    @Test(arguments: [
        (#""continues":"abc""#, "field \"continues\" must be an object"),
        (#""continues":{"session":"abc"}"#, "field \"continues.resumeToken\" is missing"),
        (#""continues":{"session":1,"resumeToken":"t"}"#, "field \"continues.session\" must be a string"),
    ])
    func aBadContinuesIsABadMessage(field: String, message: String) {
        let text = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"# + field + "}"
        do {
            _ = try ClientMessage.parse(text)
            Issue.record("parsed: \(text)")
        } catch {
            #expect(error.code == .badMessage && error.message == message, "\(error.message)")
        }
    }
}
