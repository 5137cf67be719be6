// Deepgram's live streaming API (`wss://…/v1/listen`), as its SDKs and the frameworks built on
// them speak it: audio in binary frames, the control messages `KeepAlive`, `Finalize` and
// `CloseStream`, and back `Results` (interim and final), `SpeechStarted`, `UtteranceEnd`,
// `Metadata` and `Error`, with Deepgram's close codes. The session is configured by the
// handshake's query (`DeepgramQuery`). docs/protocol.md, "Deepgram's live API", says what maps
// to what.

import StenoAudio
import StenoCore
import StenoTransport

/// A session's protocol when its client speaks Deepgram's live API.
struct DeepgramCodec: SessionCodec {
    let query: DeepgramQuery
    /// Deepgram's request id for the session (a UUID).
    let requestID: String
    /// The audio as the client sent it, digested for `Metadata`'s `sha256`.
    let audioDigest = SHA256.Stream()
    /// Bytes of a sample frame that has not come whole yet.
    private var partialFrame: [UInt8] = []
    /// Raw samples: the bytes of one sample frame, and the G.711 law to expand; nil while a
    /// container's header has not said (or for Ogg Opus, whose packets go as they are).
    private var frameBytes: Int?
    /// A container's stream: its first bytes until they say which, then an Ogg demuxer.
    private var sniffed: [UInt8] = []
    private var ogg: OggDemuxer?
    private var oggPackets = 0
    /// A WAV whose samples are not 16-bit: converted to 32-bit float.
    private var wav: WAVHeader?
    /// The final last seen, kept until it is known whether speech ended with it (`speech_final`).
    private var heldFinal: RecognitionResult?
    /// `Finalize` messages not yet answered (`from_finalize`), and whether a final answered the oldest.
    private var finalizing = 0
    private var finalSinceFinalize = false
    /// The end of the last word sent in a final, and the last `UtteranceEnd` said.
    private var lastWordEnd: Double?
    private var utteranceEndSaid: Double?
    /// What `ready` said: the model serving the session, and when it started.
    private var engine: EngineInfo?
    private var startedAt: UTCTime?

    /// With `multichannel=true`: this session's channel and its group (which says `Metadata`
    /// once, for every channel).
    let channel: Int
    let group: ChannelGroup?

    init(query: DeepgramQuery, requestID: String = DeepgramCodec.makeRequestID(), channel: Int = 0, group: ChannelGroup? = nil) {
        self.query = query
        self.requestID = requestID
        self.channel = channel
        self.group = group
        if case .samples = query.input { frameBytes = 2 * query.start.audio.channels }
    }

    /// Deepgram's session limits: no resume (its clients do not know it), and closed with
    /// `NET-0001` after 10 s without audio or `KeepAlive`.
    static func limits(_ limits: SessionLimits) -> SessionLimits {
        var limits = limits
        limits.resumeSeconds = 0
        limits.idleTimeoutSeconds = 10
        return limits
    }

    // MARK: Client → server

    /// The session starts as the connection opens, as its query said; a container's once its
    /// header has come.
    func opened() -> (messages: [OutgoingMessage], inputs: [CodecInput]) {
        query.input == .container ? ([], []) : ([], [.message(.start(query.start))])
    }

    mutating func decode(_ message: IncomingMessage) -> [CodecInput] {
        switch message {
        case .binary(let bytes):
            // A multichannel connection's audio is digested whole, by its group.
            if group == nil { audioDigest.update(bytes) }
            if query.input == .container && frameBytes == nil { return container(bytes) }
            return samples(bytes)
        case .text(let text):
            return control(text)
        }
    }

    /// Raw samples, joined into whole sample frames (a client may cut its buffers anywhere).
    private mutating func samples(_ bytes: [UInt8]) -> [CodecInput] {
            guard let frameBytes else { return [] }
            var pcm = query.companding.map { $0.pcmS16LE(bytes) } ?? bytes
            if !partialFrame.isEmpty {
                pcm = partialFrame + pcm
                partialFrame = []
            }
            let whole = pcm.count - pcm.count % frameBytes
            if whole < pcm.count {
                partialFrame = Array(pcm[whole...])
                pcm.removeLast(pcm.count - whole)
            }
            if let wav, !pcm.isEmpty {
                let floats = pcm.withUnsafeBytes { wav.decode($0) }
                pcm = floats.withUnsafeBytes { Array($0) }
            }
            return pcm.isEmpty ? [.activity] : [.audio(pcm)]
    }

    /// A container's bytes: its header read first (WAV's chunks up to `data`, Ogg Opus's
    /// `OpusHead`), then its audio.
    private mutating func container(_ bytes: [UInt8]) -> [CodecInput] {
        if var demuxer = ogg {
            let packets = demuxer.feed(bytes)
            ogg = demuxer
            if demuxer.isBroken { return [.refused(StenoError(.unsupportedAudio, "the Ogg stream is damaged"))] }
            var inputs: [CodecInput] = []
            for packet in packets {
                oggPackets += 1
                if oggPackets == 1 {
                    // OpusHead: "OpusHead", version, channels, pre-skip, input rate …
                    guard packet.count >= 19, packet.starts(with: Array("OpusHead".utf8)), (1...2).contains(Int(packet[9])),
                          let format = try? AudioFormat(encoding: .opus, sampleRate: 48_000, channels: Int(packet[9])) else {
                        return [.refused(StenoError(.unsupportedAudio, "the Ogg stream is not Opus in one or two channels"))]
                    }
                    var start = query.start
                    start.audio = format
                    inputs.append(.message(.start(start)))
                } else if oggPackets > 2 {  // the second is OpusTags
                    inputs.append(.audio(packet))
                }
            }
            return inputs.isEmpty ? [.activity] : inputs
        }
        sniffed += bytes
        guard sniffed.count >= 12 else { return [.activity] }
        if sniffed.starts(with: Array("OggS".utf8)) {
            ogg = OggDemuxer()
            let all = sniffed
            sniffed = []
            return container(all)
        }
        guard sniffed.starts(with: Array("RIFF".utf8)), Array(sniffed[8..<12]) == Array("WAVE".utf8) else {
            return [.refused(StenoError(.unsupportedAudio,
                "without an encoding the audio must be WAV or Ogg Opus; give encoding and sample_rate for raw audio"))]
        }
        let parsed: WAVHeader?
        do throws(StenoError) {
            parsed = try WAVHeader.parse(sniffed, complete: false)
        } catch {
            return [.refused(StenoError(.unsupportedAudio, error.message))]
        }
        guard let header = parsed else {
            if sniffed.count > 64 * 1024 { return [.refused(StenoError(.unsupportedAudio, "the WAV header is over 64 KB"))] }
            return [.activity]
        }
        // 16-bit samples go as they are; any other WAV format as 32-bit float.
        let plain = header.bitsPerSample == 16 && !header.isFloat
        guard let format = try? AudioFormat(encoding: plain ? .pcmS16LE : .pcmF32LE, sampleRate: header.sampleRate,
                                            channels: header.channels) else {
            return [.refused(StenoError(.unsupportedAudio, "WAV at \(header.sampleRate) Hz in \(header.channels) channels: "
                                        + "this server takes 8000-48000 Hz, one or two channels"))]
        }
        var start = query.start
        start.audio = format
        frameBytes = header.bytesPerFrame
        wav = plain ? nil : header
        let rest = Array(sniffed[header.dataOffset...])
        sniffed = []
        return [.message(.start(start))] + samples(rest)
    }

    private mutating func control(_ text: String) -> [CodecInput] {
            let type: String?
            if case .object(let object)? = try? JSONParser(maxDepth: 8, maxBytes: 64 * 1024).parse(text),
               case .string(let name)? = object["type"] {
                type = name
            } else {
                type = nil
            }
            switch type {
            case "KeepAlive"?:
                return [.activity]
            case "Finalize"?:
                finalizing += 1
                return [.message(.finalize(through: nil))]
            case "CloseStream"?:
                return [.message(.end)]
            case let other?:
                return [.warning(StenoError(.badMessage,
                    "message type \"\(clippedForError(other))\" is not one this server takes (KeepAlive, Finalize, CloseStream)"))]
            case nil:
                return [.warning(StenoError(.badMessage, "a text message must be a JSON object with a \"type\""))]
            }
    }

    // MARK: Server → client

    mutating func encode(_ event: EncodedEvent) -> [OutgoingMessage] {
        guard let typed = event.event else { return [] }
        if case .speech(.ended, _) = typed {
            var out = heldFinal.map { [results($0, isFinal: true, speechFinal: true)] } ?? []
            heldFinal = nil
            if query.utteranceEnd, let end = lastWordEnd, end != utteranceEndSaid {
                utteranceEndSaid = end
                out.append(timed("UtteranceEnd", "last_word_end", end))
            }
            return out
        }
        var out = flush()
        switch typed {
        case .ready(let info):
            engine = info.engine
            startedAt = info.startedAt
        case .volatile(let result, _):
            if query.interim && !result.text.isEmpty { out.append(results(result, isFinal: false, speechFinal: false)) }
        case .final(let result, _):
            heldFinal = result
        case .speech(.started, let at):
            if query.vadEvents { out.append(timed("SpeechStarted", "timestamp", at)) }
        case .finalized(let through):
            guard finalizing > 0 else { break }
            finalizing -= 1
            if !finalSinceFinalize {
                // Deepgram answers every Finalize: with nothing heard, an empty final says it is done.
                out.append(results(RecognitionResult(range: TimeRange(start: through, end: through), text: ""),
                                   isFinal: true, speechFinal: false, fromFinalize: true))
            }
            finalSinceFinalize = false
        case .ended(let duration):
            // One Metadata for the connection: the last channel's session to end says it.
            if group?.memberEnded() ?? true { out.append(metadata(duration: duration)) }
        case .error(let error):
            var w = JSONWriter(capacity: 160)
            w.beginObject()
            w.field("type", "Error")
            w.field("variant", error.code == .badMessage ? "SchemaError" : error.code.rawValue)
            w.field("description", error.message)
            w.field("code", error.code.rawValue)
            w.endObject()
            out.append(message(w))
        default:
            break
        }
        return out
    }

    mutating func flush() -> [OutgoingMessage] {
        guard let final = heldFinal else { return [] }
        heldFinal = nil
        return [results(final, isFinal: true, speechFinal: false)]
    }

    /// Deepgram's codes where it has them: 1011 `NET-0001` when no audio came for 10 s, 1008
    /// `DATA-0000` for audio that cannot be taken; Steno's own otherwise.
    func close(code: UInt16, reason: String) -> (code: UInt16, reason: String) {
        switch code {
        case ErrorCode.idle.closeCode: return (1011, "NET-0001")
        case ErrorCode.unsupportedAudio.closeCode: return (1008, "DATA-0000")
        default: return (code, reason)
        }
    }

    // MARK: -

    private mutating func results(_ result: RecognitionResult, isFinal: Bool, speechFinal: Bool,
                                  fromFinalize: Bool? = nil) -> OutgoingMessage {
        let fromFinalize = fromFinalize ?? (isFinal && finalizing > 0)
        if isFinal {
            if finalizing > 0 { finalSinceFinalize = true }
            if let last = result.words.last { lastWordEnd = last.range.end }
        }
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.field("type", "Results")
        channelIndex(&w, key: "channel_index")
        w.field("duration", seconds: max(0, result.range.end - result.range.start))
        w.field("start", seconds: result.range.start)
        w.field("is_final", isFinal)
        w.field("speech_final", speechFinal)
        w.field("from_finalize", fromFinalize)
        w.key("channel")
        w.beginObject()
        w.key("alternatives")
        w.beginArray()
        w.beginObject()
        let raw = result.words.map { ReadableText.lowered(word: $0.text) }
        let transcript = query.punctuate ? result.text : raw.filter { !$0.isEmpty }.joined(separator: " ")
        w.field("transcript", transcript)
        let confidences = result.words.map(\.validConfidence)
        w.key("confidence")
        w.decimal(confidences.isEmpty ? 0 : confidences.reduce(0, +) / Double(confidences.count), places: 3)
        if let language = result.language {
            w.key("languages")
            w.beginArray()
            w.string(language)
            w.endArray()
        }
        w.key("words")
        w.beginArray()
        for (word, rawWord) in zip(result.words, raw) where !rawWord.isEmpty {
            w.beginObject()
            w.field("word", rawWord)
            w.field("start", seconds: word.range.start)
            w.field("end", seconds: word.range.end)
            w.key("confidence")
            w.decimal(word.validConfidence, places: 3)
            w.field("punctuated_word", query.punctuate ? word.text : rawWord)
            if let language = result.language { w.field("language", language) }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        w.endArray()
        w.endObject()
        w.key("metadata")
        w.beginObject()
        w.field("request_id", requestID)
        w.key("model_info")
        modelInfo(&w)
        w.field("model_uuid", modelUUID)
        w.endObject()
        w.endObject()
        return message(w)
    }

    private func metadata(duration: Double) -> OutgoingMessage {
        var w = JSONWriter(capacity: 400)
        w.beginObject()
        w.field("type", "Metadata")
        w.field("transaction_key", "deprecated")
        w.field("request_id", requestID)
        w.field("sha256", (group?.audioDigest ?? audioDigest).hex())
        w.field("created", (startedAt ?? UTCTime(millisecondsSince1970: 0)).iso8601)
        w.field("duration", seconds: duration)
        w.field("channels", integer: group?.count ?? 1)
        w.key("models")
        w.beginArray()
        w.string(modelUUID)
        w.endArray()
        w.key("model_info")
        w.beginObject()
        w.key(modelUUID)
        modelInfo(&w)
        w.endObject()
        w.endObject()
        return message(w)
    }

    private func modelInfo(_ w: inout JSONWriter) {
        w.beginObject()
        w.field("name", engine?.model ?? query.model)
        w.field("version", "steno")
        w.field("arch", engine?.name ?? "steno")
        w.endObject()
    }

    /// A stable id for the model serving the session, in a UUID's shape.
    private var modelUUID: String { Self.uuidShape(SHA256.hex(engine?.model ?? query.model)) }

    /// `SpeechStarted` and `UtteranceEnd`: a type, the channel, one time.
    private func timed(_ type: String, _ key: String, _ seconds: Double) -> OutgoingMessage {
        var w = JSONWriter(capacity: 96)
        w.beginObject()
        w.field("type", type)
        channelIndex(&w, key: "channel")
        w.field(key, seconds: seconds)
        w.endObject()
        return message(w)
    }

    private func channelIndex(_ w: inout JSONWriter, key: String) {
        w.key(key)
        w.beginArray()
        w.integer(channel)
        w.integer(group?.count ?? 1)
        w.endArray()
    }

    private func message(_ w: JSONWriter) -> OutgoingMessage { OutgoingMessage(kind: .text, bytes: w.bytes) }

    /// A random version 4 UUID.
    static func makeRequestID() -> String {
        var generator = SystemRandomNumberGenerator()
        var hex = (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }
            .map { String(repeating: "0", count: 16 - $0.count) + $0 }.joined()
        hex = String(hex.prefix(12)) + "4" + String(hex.dropFirst(13).prefix(3)) + "a" + String(hex.dropFirst(17))
        return uuidShape(hex)
    }

    /// 32 hex digits (or more: the first 32) as 8-4-4-4-12.
    static func uuidShape(_ hex: String) -> String {
        let h = Array(hex.prefix(32))
        return [h[0..<8], h[8..<12], h[12..<16], h[16..<20], h[20..<32]].map { String($0) }.joined(separator: "-")
    }
}
