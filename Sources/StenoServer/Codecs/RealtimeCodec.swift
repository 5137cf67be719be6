// OpenAI's Realtime API in a transcription session (`/v1/realtime?intent=transcription`), as
// the `openai` SDK and the frameworks built on it speak it: JSON text frames both ways, audio
// as base64 in `input_audio_buffer.append`, the session configured by `session.update` (and the
// beta's `transcription_session.update`), and back the buffer's speech and commit events and
// each item's transcription as `delta`s and `completed`. docs/protocol.md, "OpenAI's Realtime
// API", says what maps to what.

import Foundation
import StenoAudio
import StenoCore
import StenoTransport

/// A session's protocol when its client speaks OpenAI's Realtime API (transcription).
struct RealtimeCodec: SessionCodec {
    /// What `session.update` set. The session starts with the first audio, in the format then
    /// configured (PCM 24 kHz unless the client said G.711).
    struct Settings: Sendable {
        var companding: G711?
        var language: String?
        var prompt: String?
        var keywords: [String] = []
        var model = "whisper-1"
        /// Server VAD (`turn_detection`): speech events and commits from Steno's detector;
        /// nil (`turn_detection: null`) the client commits.
        var serverVAD = true
        var sampleRate: Int { companding == nil ? 24_000 : 8_000 }
    }

    let sessionID: String
    private var settings = Settings()
    private var started = false
    private var nextEvent = 0
    private var nextItem = 0
    /// The item in progress (its audio heard, its transcript not complete), the one before it,
    /// the item of the last `speech_started`, and the text sent as `delta`s of the current one.
    private var item: String?
    private var previousItem: String?
    private var speechItem: String?
    private var sentText = ""
    /// Commits not yet answered, and whether a final answered the oldest.
    private var committing = 0
    private var finalSinceCommit = false
    /// Bytes of a sample that has not come whole yet.
    private var partialSample: [UInt8] = []

    init(sessionID: String = "sess_" + StreamSession.makeID(length: 20)) {
        self.sessionID = sessionID
    }

    /// Realtime sessions: no resume (its clients do not know it), no start deadline (the
    /// session starts with the first audio, which may come later) and no idle timeout (a
    /// Realtime session waits for its client; the transport's pings find dead peers).
    static func limits(_ limits: SessionLimits) -> SessionLimits {
        var limits = limits
        limits.resumeSeconds = 0
        limits.startTimeoutSeconds = 0
        limits.idleTimeoutSeconds = 0
        return limits
    }

    mutating func opened() -> (messages: [OutgoingMessage], inputs: [CodecInput]) {
        ([sessionEvent("session.created", beta: false)], [])
    }

    // MARK: Client → server

    mutating func decode(_ message: IncomingMessage) -> [CodecInput] {
        guard case .text(let text) = message else {
            return [.reply(error("invalid_request_error", "binary frames are not part of this API: send audio as input_audio_buffer.append"))]
        }
        guard case .object(let event)? = try? JSONParser(maxDepth: 16, maxBytes: 16 << 20).parse(text),
              case .string(let type)? = event["type"] else {
            return [.reply(error("invalid_request_error", "a client event must be a JSON object with a \"type\""))]
        }
        let clientEvent = event["event_id"].flatMap { if case .string(let id) = $0 { id } else { nil } }
        switch type {
        case "input_audio_buffer.append":
            guard case .string(let base64)? = event["audio"], let data = Data(base64Encoded: base64) else {
                return [.reply(error("invalid_request_error", "audio must be base64", param: "audio", clientEvent))]
            }
            var inputs: [CodecInput] = []
            if !started {
                started = true
                inputs.append(.message(.start(startRequest)))
            }
            var pcm = settings.companding.map { $0.pcmS16LE([UInt8](data)) } ?? partialSample + [UInt8](data)
            partialSample = []
            if pcm.count % 2 == 1 { partialSample = [pcm.removeLast()] }
            if !pcm.isEmpty { inputs.append(.audio(pcm)) }
            return inputs
        case "input_audio_buffer.commit":
            guard started else {
                return [.reply(error("invalid_request_error", "the input audio buffer is empty: nothing to commit",
                                     code: "input_audio_buffer_commit_empty", clientEvent))]
            }
            committing += 1
            return [.message(.finalize(through: nil))]
        case "input_audio_buffer.clear":
            // Audio already heard is transcribed all the same (choice): the answer says it is cleared.
            return [.reply(serverEvent(["type": .string("input_audio_buffer.cleared")]))]
        case "session.update", "transcription_session.update":
            guard case .object(let session)? = event["session"] else {
                return [.reply(error("invalid_request_error", "\(type) needs a \"session\" object", param: "session", clientEvent))]
            }
            let beta = type == "transcription_session.update"
            if let refusal = update(session, beta: beta) {
                return [.reply(error("invalid_request_error", refusal, param: "session", clientEvent))]
            }
            return [.reply(sessionEvent(beta ? "transcription_session.updated" : "session.updated", beta: beta))]
        default:
            return [.reply(error("invalid_request_error",
                "\"\(clippedForError(type))\" is not an event of a transcription session on this server", clientEvent))]
        }
    }

    /// Applies a `session.update`; says why not when it cannot.
    private mutating func update(_ session: JSONObject, beta: Bool) -> String? {
        var next = settings
        func string(_ value: JSONValue?) -> String? { if case .string(let s)? = value { s } else { nil } }
        let transcription: JSONObject?
        let format: String?
        let turnDetection: JSONValue?
        if beta {
            format = string(session["input_audio_format"])
            if case .object(let t)? = session["input_audio_transcription"] { transcription = t } else { transcription = nil }
            turnDetection = session["turn_detection"]
        } else {
            if let type = string(session["type"]), type != "transcription" {
                return "this server has transcription sessions only, not \"\(clippedForError(type))\""
            }
            var input: JSONObject?
            if case .object(let audio)? = session["audio"], case .object(let i)? = audio["input"] { input = i }
            if case .object(let f)? = input?["format"] {
                format = string(f["type"]) ?? "audio/pcm"
                if case .number(let rate)? = f["rate"], rate != 24_000 { return "audio/pcm is 24000 Hz here, not \(rate)" }
            } else {
                format = nil
            }
            if case .object(let t)? = input?["transcription"] { transcription = t } else { transcription = nil }
            turnDetection = input?["turn_detection"]
        }
        switch format {
        case nil: break
        case "audio/pcm"?, "pcm16"?: next.companding = nil
        case "audio/pcmu"?, "g711_ulaw"?: next.companding = .muLaw
        case "audio/pcma"?, "g711_alaw"?: next.companding = .aLaw
        case let other?: return "audio format \"\(clippedForError(other))\" is not supported (audio/pcm, audio/pcmu, audio/pcma)"
        }
        if let transcription {
            if let model = string(transcription["model"]) { next.model = model }
            if let language = string(transcription["language"]) { next.language = language }
            if let prompt = string(transcription["prompt"]) { next.prompt = prompt }
            if case .array(let words)? = transcription["keywords"] { next.keywords = words.compactMap { string($0) } }
        }
        switch turnDetection {
        case .null?: next.serverVAD = false
        case .object?: next.serverVAD = true
        default: break
        }
        if started && (next.companding != settings.companding || next.language != settings.language
                       || next.prompt != settings.prompt || next.keywords != settings.keywords) {
            return "the audio format, language, prompt and keywords are set before the first audio; they cannot change after it"
        }
        settings = next
        return nil
    }

    /// The session's `start`, from the settings.
    private var startRequest: StartRequest {
        // The settings were checked as they came: PCM at 24 or 8 kHz, mono.
        let format = (try? AudioFormat(encoding: .pcmS16LE, sampleRate: settings.sampleRate, channels: 1))
            ?? (try! AudioFormat(encoding: .pcmS16LE, sampleRate: 16_000, channels: 1))
        var request = StartRequest(audio: format, language: settings.language, volatile: true, words: true)
        // A prompt's words and the keywords are phrases Steno listens for.
        let phrases = settings.keywords + (settings.prompt.map { [$0] } ?? [])
        if !phrases.isEmpty { request.vocabulary = try? Vocabulary(phrases: phrases) }
        return request
    }

    // MARK: Server → client

    mutating func encode(_ event: EncodedEvent) -> [OutgoingMessage] {
        guard let typed = event.event else { return [] }
        var out: [OutgoingMessage] = []
        switch typed {
        case .speech(.started, let at) where settings.serverVAD:
            let id = openItem()
            speechItem = id
            out.append(serverEvent(["type": .string("input_audio_buffer.speech_started"),
                                "audio_start_ms": .number(milliseconds(at)), "item_id": .string(id)]))
        case .speech(.ended, let at) where settings.serverVAD:
            guard let id = speechItem ?? item else { break }
            speechItem = nil
            out.append(serverEvent(["type": .string("input_audio_buffer.speech_stopped"),
                                "audio_end_ms": .number(milliseconds(at)), "item_id": .string(id)]))
        case .volatile(let result, _):
            guard !result.text.isEmpty else { break }
            let id = item ?? openItem()
            if let delta = delta(to: result.text) { out.append(deltaEvent(delta, item: id)) }
        case .final(let result, _):
            if committing > 0 { finalSinceCommit = true }
            out += complete(transcript: result.text, seconds: result.range.end - result.range.start)
        case .finalized:
            guard committing > 0 else { break }
            committing -= 1
            // Every commit is answered: with nothing heard, by an empty transcript.
            if !finalSinceCommit { out += complete(transcript: "", seconds: 0) }
            finalSinceCommit = false
        case .error(let stenoError):
            out.append(error(stenoError.code.isFatal ? "server_error" : "invalid_request_error", stenoError.message,
                             code: stenoError.code.rawValue))
        case .lowConfidence:
            out.append(error("invalid_request_error", String(decoding: event.bytes, as: UTF8.self), code: ErrorCode.lowConfidence.rawValue))
        default:
            break
        }
        return out
    }

    func flush() -> [OutgoingMessage] { [] }

    func close(code: UInt16, reason: String) -> (code: UInt16, reason: String) { (code, reason) }

    // MARK: -

    /// The current item committed (if it was not) and its transcript complete.
    private mutating func complete(transcript: String, seconds: Double) -> [OutgoingMessage] {
        let id = item ?? openItem()
        var out: [OutgoingMessage] = []
        var committed: [String: JSONValue] = ["type": .string("input_audio_buffer.committed"), "item_id": .string(id)]
        committed["previous_item_id"] = previousItem.map { .string($0) } ?? .null
        out.append(serverEvent(committed))
        if let delta = delta(to: transcript) { out.append(deltaEvent(delta, item: id)) }
        out.append(serverEvent(["type": .string("conversation.item.input_audio_transcription.completed"),
                            "item_id": .string(id), "content_index": .number(0), "transcript": .string(transcript),
                            "usage": .object(JSONObject(["type": .string("duration"), "seconds": .number(max(0, seconds))]))]))
        previousItem = id
        item = nil
        sentText = ""
        return out
    }

    /// What `text` adds to what was sent of the item, if it goes on from it (a volatile that
    /// revised earlier words adds nothing until the final says them).
    private mutating func delta(to text: String) -> String? {
        guard text.hasPrefix(sentText), text.count > sentText.count else { return nil }
        let added = String(text.dropFirst(sentText.count))
        sentText = text
        return added
    }

    private mutating func deltaEvent(_ delta: String, item id: String) -> OutgoingMessage {
        serverEvent(["type": .string("conversation.item.input_audio_transcription.delta"), "item_id": .string(id),
                 "content_index": .number(0), "delta": .string(delta)])
    }

    private mutating func openItem() -> String {
        nextItem += 1
        let id = "item_\(sessionID.dropFirst(5))\(nextItem)"
        item = id
        sentText = ""
        return id
    }

    private func milliseconds(_ seconds: Double) -> Double { (max(0, seconds) * 1000).rounded() }

    private mutating func sessionEvent(_ type: String, beta: Bool) -> OutgoingMessage {
        let s = settings
        let language: JSONValue = s.language.map { .string($0) } ?? .null
        let vad: JSONValue = s.serverVAD
            ? .object(JSONObject(["type": .string("server_vad"), "threshold": .number(0.5),
                                  "prefix_padding_ms": .number(300), "silence_duration_ms": .number(500)]))
            : .null
        var transcription = JSONObject(["model": .string(s.model), "language": language])
        transcription["prompt"] = s.prompt.map { .string($0) }
        let session: JSONObject
        if beta {
            session = JSONObject(["id": .string(sessionID), "object": .string("realtime.transcription_session"),
                                  "input_audio_format": .string(s.companding == .muLaw ? "g711_ulaw" : s.companding == .aLaw ? "g711_alaw" : "pcm16"),
                                  "input_audio_transcription": .object(transcription), "turn_detection": vad,
                                  "modalities": .array([.string("text")])])
        } else {
            var format = JSONObject(["type": .string(s.companding == .muLaw ? "audio/pcmu" : s.companding == .aLaw ? "audio/pcma" : "audio/pcm")])
            if s.companding == nil { format = JSONObject(["type": .string("audio/pcm"), "rate": .number(24_000)]) }
            let input = JSONObject(["format": .object(format), "transcription": .object(transcription), "turn_detection": vad])
            session = JSONObject(["type": .string("transcription"), "id": .string(sessionID),
                                  "object": .string("realtime.transcription_session"),
                                  "audio": .object(JSONObject(["input": .object(input)]))])
        }
        return serverEvent(["type": .string(type), "session": .object(session)])
    }

    private mutating func error(_ type: String, _ text: String, code: String? = nil, param: String? = nil,
                                _ clientEvent: String? = nil) -> OutgoingMessage {
        var body: [String: JSONValue] = ["type": .string(type), "message": .string(text)]
        body["code"] = code.map { .string($0) } ?? .null
        body["param"] = param.map { .string($0) } ?? .null
        body["event_id"] = clientEvent.map { .string($0) } ?? .null
        return serverEvent(["type": .string("error"), "error": .object(JSONObject(orderedPairs(body)))])
    }

    /// A server event with its `event_id`.
    private mutating func serverEvent(_ fields: [String: JSONValue]) -> OutgoingMessage {
        nextEvent += 1
        var pairs = [("event_id", JSONValue.string("event_\(sessionID.dropFirst(5))\(nextEvent)"))]
        pairs += orderedPairs(fields)
        return OutgoingMessage(kind: .text, bytes: Array(JSONValue.object(JSONObject(pairs)).jsonText.utf8))
    }

    /// `type` first, the rest by name: the same bytes every time.
    private func orderedPairs(_ fields: [String: JSONValue]) -> [(String, JSONValue)] {
        fields.sorted { ($0.key == "type" ? "" : $0.key) < ($1.key == "type" ? "" : $1.key) }
    }
}

extension JSONObject {
    /// An object of these members, in this order.
    fileprivate init(_ pairs: [(String, JSONValue)]) {
        self.init()
        for (key, value) in pairs { self[key] = value }
    }
}
