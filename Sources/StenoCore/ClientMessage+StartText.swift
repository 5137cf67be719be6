// The `start` text a client sends, beside the reading of it in ClientMessage.swift.

extension ClientMessage {
    /// The `start` text a client sends (what `parse` reads back): the one writer of it, for
    /// `steno send`, `steno transcribe` and the tests. `phrases` are sent as given (the server
    /// checks them); `format` is said only when it is not the default (readable), `profanity`
    /// only when given (nil: the server's default).
    public static func startText(_ audio: AudioFormat, language: String? = nil, model: String? = nil,
                                 channel: String? = nil, volatile: Bool = true, words: Bool = true,
                                 format: TextFormat = .readable, phrases: [String] = [], boost: Double? = nil,
                                 alternatives: Int = 0, profanity: ProfanityMode? = nil,
                                 continues: StartRequest.Continuation? = nil, lanes: [String] = [], translate: String? = nil) -> String {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.field("type", "start")
        w.key("audio")
        w.beginObject()
        w.field("encoding", audio.encoding.rawValue)
        w.field("sampleRate", integer: audio.sampleRate)
        w.field("channels", integer: audio.channels)
        w.endObject()
        if let language { w.field("language", language) }
        if let model { w.field("model", model) }
        w.field("volatile", volatile)
        w.field("words", words)
        if let channel { w.field("channel", channel) }
        if format != .readable { w.field("format", format.rawValue) }
        if let profanity { w.field("profanity", profanity.rawValue) }
        if !phrases.isEmpty {
            w.key("phrases")
            w.beginArray()
            for phrase in phrases { w.string(phrase) }
            w.endArray()
        }
        if let boost { w.key("boost"); w.number(boost) }
        if alternatives > 0 { w.field("alternatives", integer: alternatives) }
        if !lanes.isEmpty {
            w.key("languages")
            w.beginArray()
            for lane in lanes { w.string(lane) }
            w.endArray()
        }
        if let translate { w.field("translate", translate) }
        if let continues {
            w.key("continues")
            w.beginObject()
            w.field("session", continues.session)
            w.field("resumeToken", continues.resumeToken)
            w.endObject()
        }
        w.endObject()
        return w.text
    }
}
