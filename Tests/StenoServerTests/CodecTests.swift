import StenoAudio
import StenoCore
import StenoTransport
import Testing
@testable import StenoServer

/// The route codecs in memory, events in and frames out: what Deepgram's and OpenAI's clients
/// get for each of Steno's events (Tests/interop drives them with the vendors' SDKs).
@Suite struct CodecTests {
    static let models = [ServedModel(engine: EngineInfo(name: "whisper", model: "whisper-tiny.en", language: "en", sampleRate: 16_000))]

    static func query(_ pairs: [(String, String)]) -> [QueryItem] { pairs.map { QueryItem(name: $0.0, value: $0.1) } }

    static func deepgram(_ extra: [(String, String)] = []) throws -> DeepgramCodec {
        let parsed = try DeepgramQuery.parse(query([("encoding", "linear16"), ("sample_rate", "16000")] + extra),
                                             models: models).get()
        return DeepgramCodec(query: parsed, requestID: "00000000-0000-4000-a000-000000000000")
    }

    static func objects(_ messages: [OutgoingMessage]) -> [JSONObject] {
        messages.compactMap { message in
            guard case .object(let o)? = try? JSONParser().parse(message.bytes) else { return nil }
            return o
        }
    }

    static func result(_ text: String, _ start: Double, _ end: Double) -> RecognitionResult {
        let words = text.split(separator: " ").enumerated().map { index, word in
            Word(String(word), range: TimeRange(start: start + Double(index) * 0.3, end: start + Double(index) * 0.3 + 0.25),
                 confidence: 0.9)
        }
        return RecognitionResult(range: TimeRange(start: start, end: end), text: text, words: words, written: true)
    }

    @Test func deepgramsQueryBecomesTheStart() throws {
        let parsed = try DeepgramQuery.parse(Self.query([
            ("encoding", "mulaw"), ("sample_rate", "8000"), ("interim_results", "true"), ("keyterm", "Marianne"),
            ("keywords", "Dashwood:2"), ("diarize", "true"), ("profanity_filter", "true"), ("model", "nova-3"),
        ]), models: Self.models).get()
        #expect(parsed.start.audio.encoding == .pcmS16LE && parsed.start.audio.sampleRate == 8000)
        #expect(parsed.companding == .muLaw && parsed.start.volatile && parsed.start.profanity == .mask)
        #expect(parsed.start.vocabulary?.phrases.count == 2)
        #expect(parsed.start.model == nil, "Deepgram's model names get the server's model for the language")
        let named = try DeepgramQuery.parse(Self.query([("encoding", "linear16"), ("sample_rate", "16000"),
                                                        ("model", "whisper-tiny.en")]), models: Self.models).get()
        #expect(named.start.model == "whisper-tiny.en")
        for refused in [[("encoding", "flac"), ("sample_rate", "48000")], [("encoding", "linear16")],
                        [("encoding", "linear16"), ("sample_rate", "16000"), ("vad_events", "yes")],
                        [("encoding", "linear16"), ("sample_rate", "16000"), ("utterance_end_ms", "500")],
                        [("encoding", "linear16"), ("sample_rate", "16000"), ("language", "multi")]] {
            #expect(throws: StenoError.self) { try DeepgramQuery.parse(Self.query(refused), models: Self.models).get() }
        }
    }

    @Test func aDeepgramFinalIsSpeechFinalWhenSpeechEndsWithIt() throws {
        var codec = try Self.deepgram([("utterance_end_ms", "1000"), ("punctuate", "true")])
        let final = Self.result("Hello there.", 1, 2)
        #expect(codec.encode(ServerEvent.final(final, includeWords: true).encoded()).isEmpty, "held for the batch")
        let out = Self.objects(codec.encode(ServerEvent.speech(.ended, at: 2.1).encoded()))
        #expect(out.map { $0["type"] } == [.string("Results"), .string("UtteranceEnd")])
        #expect(out[0]["speech_final"] == .bool(true) && out[0]["is_final"] == .bool(true))
        #expect(out[1]["last_word_end"] == .number(1.55))
        // A final the batch ends after is not.
        _ = codec.encode(ServerEvent.final(Self.result("Again", 3, 4), includeWords: true).encoded())
        let flushed = Self.objects(codec.flush())
        #expect(flushed.count == 1 && flushed[0]["speech_final"] == .bool(false))
        // No UtteranceEnd twice for the same words.
        #expect(Self.objects(codec.encode(ServerEvent.speech(.ended, at: 4.5).encoded())).map { $0["type"] } == [.string("UtteranceEnd")])
        #expect(codec.encode(ServerEvent.speech(.ended, at: 5).encoded()).isEmpty)
    }

    @Test func everyFinalizeIsAnsweredAndWordsAreRawWithoutPunctuate() throws {
        var codec = try Self.deepgram()
        #expect(codec.decode(.text(#"{"type":"Finalize"}"#)).count == 1)
        _ = codec.encode(ServerEvent.final(Self.result("Hello, world.", 0, 1), includeWords: true).encoded())
        let out = Self.objects(codec.encode(ServerEvent.finalized(through: 1).encoded()))
        #expect(out.count == 1 && out[0]["from_finalize"] == .bool(true))
        guard case .object(let channel)? = out[0]["channel"], case .array(let alternatives)? = channel["alternatives"],
              case .object(let first)? = alternatives.first else { Issue.record("no alternative"); return }
        #expect(first["transcript"] == .string("hello world"))
        // A Finalize with nothing to finalize: an empty final from it.
        _ = codec.decode(.text(#"{"type":"Finalize"}"#))
        let empty = Self.objects(codec.encode(ServerEvent.finalized(through: 1).encoded()))
        #expect(empty.count == 1 && empty[0]["from_finalize"] == .bool(true) && empty[0]["duration"] == .number(0))
    }

    @Test func deepgramAudioIsJoinedIntoWholeSamplesAndControlsAreRead() throws {
        var codec = try Self.deepgram()
        guard case .audio(let first)? = codec.decode(.binary([1, 2, 3])).first else { Issue.record("no audio"); return }
        #expect(first == [1, 2])
        guard case .audio(let second)? = codec.decode(.binary([4, 5])).first else { Issue.record("no audio"); return }
        #expect(second == [3, 4] && codec.decode(.binary([6])).count == 1)
        guard case .message(.end)? = codec.decode(.text(#"{"type":"CloseStream"}"#)).first,
              case .activity? = codec.decode(.text(#"{"type":"KeepAlive"}"#)).first,
              case .warning(let error)? = codec.decode(.text("nonsense")).first else { Issue.record("controls"); return }
        #expect(error.code == .badMessage)
        #expect(codec.close(code: 4010, reason: "idle") == (1011, "NET-0001"))
        #expect(codec.close(code: 1000, reason: "") == (1000, ""))
    }

    @Test func realtimeStartsWithTheFirstAudioInTheConfiguredFormat() {
        var codec = RealtimeCodec(sessionID: "sess_test")
        #expect(Self.objects(codec.opened().messages).first?["type"] == .string("session.created"))
        let update = #"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"format":{"type":"audio/pcmu"},"transcription":{"language":"en"},"turn_detection":null}}}}"#
        guard case .reply(let updated)? = codec.decode(.text(update)).first else { Issue.record("no reply"); return }
        #expect(Self.objects([updated]).first?["type"] == .string("session.updated"))
        let inputs = codec.decode(.text(#"{"type":"input_audio_buffer.append","audio":"/38="}"#))
        guard inputs.count == 2, case .message(.start(let start)) = inputs[0], case .audio(let pcm) = inputs[1] else {
            Issue.record("no start and audio: \(inputs)"); return
        }
        #expect(start.audio.sampleRate == 8000 && start.language == "en")
        #expect(pcm == G711.muLaw.pcmS16LE([0xFF, 0x7F]))
        // Too late to change the format now.
        guard case .reply(let refused)? = codec.decode(.text(#"{"type":"transcription_session.update","session":{"input_audio_format":"pcm16"}}"#)).first
        else { Issue.record("no reply"); return }
        #expect(Self.objects([refused]).first?["type"] == .string("error"))
    }

    @Test func realtimeItemsAreCommittedThenCompletedWithTheirDeltas() {
        var codec = RealtimeCodec(sessionID: "sess_test")
        let types = { (messages: [OutgoingMessage]) in Self.objects(messages).compactMap { o -> String? in
            if case .string(let t)? = o["type"] { t } else { nil } } }
        #expect(types(codec.encode(ServerEvent.speech(.started, at: 1).encoded())) == ["input_audio_buffer.speech_started"])
        let delta1 = Self.objects(codec.encode(ServerEvent.volatile(Self.result("He was", 1, 1.5), includeWords: true).encoded()))
        #expect(delta1.first?["delta"] == .string("He was"))
        // A volatile that revises adds nothing; the final says the rest.
        #expect(codec.encode(ServerEvent.volatile(Self.result("We were", 1, 1.6), includeWords: true).encoded()).isEmpty)
        let done = Self.objects(codec.encode(ServerEvent.final(Self.result("He was not.", 1, 2), includeWords: true).encoded()))
        #expect(done.map { $0["type"] } == [.string("input_audio_buffer.committed"),
                                              .string("conversation.item.input_audio_transcription.delta"),
                                              .string("conversation.item.input_audio_transcription.completed")])
        #expect(done[1]["delta"] == .string(" not.") && done[2]["transcript"] == .string("He was not."))
        #expect(done[0]["previous_item_id"] == .null)
    }

    @Test func g711DecodesItsReferenceValues() {
        #expect(G711.muLaw.linear(0xFF) == 0 && G711.muLaw.linear(0x7F) == 0)
        #expect(G711.muLaw.linear(0x00) == -32124 && G711.muLaw.linear(0x80) == 32124)
        #expect(G711.aLaw.linear(0xD5) == 8 && G711.aLaw.linear(0x55) == -8)
        #expect(G711.aLaw.linear(0xAA) == 32256 && G711.aLaw.linear(0x2A) == -32256)
    }
}

/// The form OpenAI's clients post, read back.
@Suite struct MultipartFormTests {
    @Test func readsFieldsAndFilesWhateverTheBytes() throws {
        let file: [UInt8] = [0, 13, 10, 45, 45, 255, 82, 73, 70, 70]  // NUL, CRLF, "--", not UTF-8
        var body = Array("--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n".utf8)
        body += Array("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a b.wav\"\r\nContent-Type: audio/wav\r\n\r\n".utf8)
        body += file + Array("\r\n--XyZ\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\nword\r\n".utf8)
        body += Array("--XyZ\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\nsegment\r\n--XyZ--\r\n".utf8)
        let form = try #require(MultipartForm(body: body, contentType: "multipart/form-data; boundary=XyZ"))
        #expect(form["model"]?.text == "whisper-1")
        #expect(form["file"]?.bytes == file && form["file"]?.filename == "a b.wav")
        #expect(form.all("timestamp_granularities[]").map(\.text) == ["word", "segment"])
        #expect(MultipartForm(body: body, contentType: "application/json") == nil)
        #expect(MultipartForm(body: Array("--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nno end".utf8),
                              contentType: "multipart/form-data; boundary=\"XyZ\"") == nil)
    }
}
