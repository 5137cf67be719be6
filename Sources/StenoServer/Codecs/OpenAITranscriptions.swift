// OpenAI's REST transcription API: `POST /v1/audio/transcriptions` (and `/translations`) with a
// multipart form holding the file, as the `openai` SDK and every tool built on it post it. The
// file is decoded by FFmpeg's libraries (`MediaFile`), heard by a session of its own on the
// server's engine (the same recognizer and worker as live sessions), and answered in the
// format asked for. docs/protocol.md, "OpenAI's transcription API", says what maps to what.

import Foundation
import StenoAudio
import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem
import StenoTransport

/// One upload's transcription, run on a thread of its own (it takes as long as the file
/// takes to hear), answered through the transport when done.
struct OpenAITranscriptions: Sendable {
    static let transcriptionsPath = "/v1/audio/transcriptions"
    static let translationsPath = "/v1/audio/translations"
    /// OpenAI's limit on an uploaded file.
    static let maxFileBytes = 25 * 1024 * 1024
    static let sampleRate = 16_000

    enum ResponseFormat: String, CaseIterable {
        case json, text, srt, vtt
        case verboseJSON = "verbose_json"
    }

    let engine: any SpeechEngine
    let models: [ServedModel]
    /// The longest audio taken (the session limit).
    let maxSeconds: Double

    /// Where a streamed answer goes: its head, then pieces of its body (`true`: the last).
    struct Stream: Sendable {
        let head: @Sendable (HTTPResponse) -> Void
        let write: @Sendable ([UInt8], Bool) -> Void
    }

    /// Answers one request (its form whole in `body`); nil when the answer went to `stream`
    /// (`stream=true`: server-sent events as the finals come).
    func answer(body: [UInt8], contentType: String, translate: Bool, stream streamTo: Stream) -> HTTPResponse? {
        guard let form = MultipartForm(body: body, contentType: contentType) else {
            return Self.error(400, "the body must be multipart/form-data with a \"file\"")
        }
        guard let file = form["file"] else { return Self.error(400, "a \"file\" is required", param: "file") }
        guard file.bytes.count <= Self.maxFileBytes else {
            return Self.error(413, "the file is \(file.bytes.count) bytes; the limit is \(Self.maxFileBytes) bytes", param: "file")
        }
        let formatName = form["response_format"]?.text ?? "json"
        guard let format = ResponseFormat(rawValue: formatName) else {
            return Self.error(400, "response_format must be json, text, srt, vtt or verbose_json, not \"\(clippedForError(formatName))\"",
                              param: "response_format")
        }
        let stream = form["stream"]?.text.lowercased() == "true"
        let granularities = Set(form.all("timestamp_granularities[]").map(\.text))
        let samples: [Float]
        do throws(MediaFile.Failure) {
            samples = try MediaFile.decode(file.bytes, sampleRate: Self.sampleRate, maxSeconds: maxSeconds)
        } catch {
            switch error {
            case .tooLong:
                return Self.error(400, "the audio is longer than this server takes (\(Int(maxSeconds)) s)", param: "file")
            case .unreadable(let why):
                return Self.error(400, "\(why) (\(file.filename ?? "the file"))", param: "file", code: "invalid_value")
            }
        }
        let requested = form["model"]?.text
        let model = requested.flatMap { name in models.contains { $0.engine.model == name } ? name : nil }
        var language = form["language"]?.text
        if language?.isEmpty == true { language = nil }
        var phrases: [String] = []
        if let prompt = form["prompt"]?.text, !prompt.isEmpty, (try? Vocabulary(phrases: [prompt])) != nil { phrases = [prompt] }
        if stream {
            // Each final as it is heard; a session that cannot start is still a plain error.
            var started = false
            let sent = Locked(0)
            let outcome = transcribe(samples, model: model, language: translate ? nil : language, phrases: phrases,
                                     translate: translate, starting: {
                started = true
                streamTo.head(HTTPResponse(status: 200, contentType: "text/event-stream", body: [],
                                           headers: [("Cache-Control", "no-store")]))
            }, onFinal: { final in
                let index = sent.withLock { n -> Int in n += 1; return n - 1 }
                streamTo.write(Array(Self.sse(["type": .string("transcript.text.delta"),
                                               "delta": .string((index > 0 ? " " : "") + final.text)]).utf8), false)
            })
            switch outcome {
            case .success(let finals):
                let text = finals.map(\.text).joined(separator: " ")
                streamTo.write(Array(Self.sse(["type": .string("transcript.text.done"), "text": .string(text)]).utf8), true)
                return nil
            case .failure(let error) where started:
                streamTo.write(Array(Self.sse(["type": .string("error"), "error": .object(JSONObject([
                    "message": .string(error.message), "type": .string("server_error")]))]).utf8), true)
                return nil
            case .failure(let error):
                return Self.error(error.code == .internal ? 500 : 400, error.message)
            }
        }
        let heard: [RecognitionResult]
        switch transcribe(samples, model: model, language: translate ? nil : language, phrases: phrases, translate: translate) {
        case .success(let finals): heard = finals
        case .failure(let error): return Self.error(error.code == .internal ? 500 : 400, error.message)
        }
        let duration = Double(samples.count) / Double(Self.sampleRate)
        let text = heard.map(\.text).joined(separator: " ")
        let spoken = heard.compactMap(\.language).first ?? language
            ?? models.first { $0.engine.model == model }?.engine.language ?? models[0].engine.language
        switch format {
        case .text:
            return HTTPResponse(status: 200, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8))
        case .srt, .vtt:
            let rendered = Captions.render(heard, as: format == .srt ? .srt : .webVTT, offset: 0)
            return HTTPResponse(status: 200, contentType: format == .srt ? "application/x-subrip" : "text/vtt",
                                body: Array(rendered.utf8))
        case .json:
            var object: [(String, JSONValue)] = [("text", .string(text))]
            if !translate { object.append(("usage", Self.usage(duration))) }
            return Self.json(object)
        case .verboseJSON:
            var object: [(String, JSONValue)] = [
                ("task", .string(translate ? "translate" : "transcribe")), ("language", .string(spoken)),
                ("duration", .number(Self.rounded(duration))), ("text", .string(text)),
            ]
            if granularities.isEmpty || granularities.contains("segment") {
                object.append(("segments", .array(heard.enumerated().map { Self.segment($0.offset, $0.element) })))
            }
            if granularities.contains("word") {
                object.append(("words", .array(heard.flatMap(\.words).map { word in
                    .object(JSONObject(["word": .string(word.text), "start": .number(Self.rounded(word.range.start)),
                                        "end": .number(Self.rounded(word.range.end))]))
                })))
            }
            if !translate { object.append(("usage", Self.usage(duration))) }
            return Self.json(object)
        }
    }

    /// The finals of `samples` heard by a session of their own.
    private func transcribe(_ samples: [Float], model: String?, language: String?, phrases: [String], translate: Bool,
                            starting: () -> Void = {}, onFinal: ((RecognitionResult) -> Void)? = nil)
        -> Result<[RecognitionResult], StenoError> {
        let session = LocalSession(engine: engine, id: "rest")
        if let onFinal {
            session.onEvent = { event in if case .final(let result, _)? = event.event { onFinal(result) } }
        }
        let format = try! AudioFormat(encoding: .pcmF32LE, sampleRate: Self.sampleRate, channels: 1)
        var request = StartRequest(audio: format, language: language, volatile: false, words: true)
        request.model = model
        request.vocabulary = phrases.isEmpty ? nil : try? Vocabulary(phrases: phrases)
        if translate { request.languagePlan = LanguagePlan(translate: "en") }
        // Behind live speech in the engine's queue.
        request.background = true
        session.start(request)
        guard session.phase != .awaitingStart else {
            let refusal = session.events.lazy.compactMap { $0.event }.compactMap { event -> StenoError? in
                if case .error(let error) = event { error } else { nil }
            }.first
            return .failure(refusal ?? StenoError(.badMessage, "the transcription could not start"))
        }
        starting()
        let chunk = Self.sampleRate  // a second a frame
        var index = 0
        while index < samples.count {
            let piece = samples[index..<min(index + chunk, samples.count)]
            var bytes = [UInt8](repeating: 0, count: piece.count * 4)
            bytes.withUnsafeMutableBytes { raw in
                for (i, sample) in piece.enumerated() { raw.storeBytes(of: sample.bitPattern.littleEndian, toByteOffset: 4 * i, as: UInt32.self) }
            }
            session.send(audio: bytes)
            index += chunk
        }
        session.end()
        guard session.closeCode == 1000 else {
            return .failure(StenoError(.internal, "the transcription failed (close \(session.closeCode.map(String.init) ?? "none"))"))
        }
        return .success(session.finals)
    }

    // MARK: Writing

    private static func segment(_ id: Int, _ final: RecognitionResult) -> JSONValue {
        let confidences = final.words.map(\.validConfidence)
        let mean = confidences.isEmpty ? 1 : confidences.reduce(0, +) / Double(confidences.count)
        return .object(JSONObject([
            "id": .number(Double(id)), "seek": .number(0), "start": .number(rounded(final.range.start)),
            "end": .number(rounded(final.range.end)), "text": .string(final.text), "tokens": .array([]),
            "temperature": .number(0), "avg_logprob": .number(rounded(log(max(mean, 1e-6)))),
            "compression_ratio": .number(1), "no_speech_prob": .number(0),
        ]))
    }

    private static func usage(_ seconds: Double) -> JSONValue {
        .object(JSONObject(["type": .string("duration"), "seconds": .number(rounded(seconds))]))
    }

    private static func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    private static func sse(_ fields: KeyValuePairs<String, JSONValue>) -> String {
        "data: " + JSONValue.object(JSONObject(fields)).jsonText + "\n\n"
    }

    private static func json(_ pairs: [(String, JSONValue)]) -> HTTPResponse {
        var object = JSONObject()
        for (key, value) in pairs { object[key] = value }
        return HTTPResponse(status: 200, contentType: "application/json", body: Array(JSONValue.object(object).jsonText.utf8))
    }

    /// An error as OpenAI's clients read it: `{"error":{"message","type","param","code"}}`.
    static func error(_ status: Int, _ message: String, param: String? = nil, code: String? = nil,
                      type: String = "invalid_request_error") -> HTTPResponse {
        let body = JSONValue.object(JSONObject(["error": .object(JSONObject([
            "message": .string(message), "type": .string(type),
            "param": param.map { .string($0) } ?? .null, "code": code.map { .string($0) } ?? .null,
        ]))]))
        return HTTPResponse(status: status, contentType: "application/json", body: Array(body.jsonText.utf8))
    }
}
