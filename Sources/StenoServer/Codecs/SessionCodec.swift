// The seam between a session and the wire protocol its route speaks. The session machine takes
// client messages and gives typed events (`ServerEvent`, carried in `EncodedEvent.event`); a
// codec, chosen by the route when the connection opens, reads the client's frames into those
// messages and writes the events in its protocol, with its close codes. Steno's own protocol is
// `StenoCodec` (the machine's JSON as it is); Deepgram's live API is `DeepgramCodec`. Adding a
// protocol is a codec, a `SessionRoute` and its place in `Router.route(for:)`.

import StenoCore
import StenoTransport

/// What a client's frame is to the session, once its codec has read it.
enum CodecInput: Sendable {
    /// A text frame in Steno's protocol: the machine parses it (and answers its errors).
    case text(String)
    /// A message already read from the codec's protocol.
    case message(ClientMessage)
    /// Audio in the session's declared format.
    case audio([UInt8])
    /// A frame the codec took whole (a keep-alive): the client is there.
    case activity
    /// A non-fatal problem with the frame, for the client in the codec's protocol.
    case warning(StenoError)
    /// The codec's own answer to the frame, for the client (OpenAI's `session.updated`).
    case reply(OutgoingMessage)
    /// The stream cannot be taken (a container the codec does not read): the session fails
    /// with this error, started or not.
    case refused(StenoError)
}

/// A session's wire protocol: how its client's frames are read and its events written.
/// Kept with the session and used under its lock, so it may keep state (a final held back
/// until the end of the batch, the audio bytes that did not make a whole sample).
protocol SessionCodec: Sendable {
    /// What the protocol says and does as the connection opens: messages for the client (OpenAI's
    /// `session.created`) and inputs for the session (the `start` Deepgram's query made).
    mutating func opened() -> (messages: [OutgoingMessage], inputs: [CodecInput])
    /// What the client's frame means.
    mutating func decode(_ message: IncomingMessage) -> [CodecInput]
    /// The frames that carry `event` (none: the protocol has no such event).
    mutating func encode(_ event: EncodedEvent) -> [OutgoingMessage]
    /// What was held back for the end of a batch of events.
    mutating func flush() -> [OutgoingMessage]
    /// The close a session's close becomes in this protocol.
    func close(code: UInt16, reason: String) -> (code: UInt16, reason: String)
}

/// Steno's own protocol (docs/protocol.md): frames and events as the machine reads and writes them.
struct StenoCodec: SessionCodec {
    func opened() -> (messages: [OutgoingMessage], inputs: [CodecInput]) { ([], []) }

    func decode(_ message: IncomingMessage) -> [CodecInput] {
        switch message {
        case .text(let text): return [.text(text)]
        case .binary(let bytes): return [.audio(bytes)]
        }
    }

    func encode(_ event: EncodedEvent) -> [OutgoingMessage] { [OutgoingMessage(event)] }

    func flush() -> [OutgoingMessage] { [] }

    func close(code: UInt16, reason: String) -> (code: UInt16, reason: String) { (code, reason) }
}

/// Steno's protocol for one channel's session of a multichannel connection (`start`'s
/// `multichannel`): every event carries `"channel": i`, and a volatile replaces only its own
/// channel's unsent one.
struct StenoChannelCodec: SessionCodec {
    let channel: Int

    func opened() -> (messages: [OutgoingMessage], inputs: [CodecInput]) { ([], []) }

    func decode(_ message: IncomingMessage) -> [CodecInput] { StenoCodec().decode(message) }

    func encode(_ event: EncodedEvent) -> [OutgoingMessage] {
        guard event.bytes.last == UInt8(ascii: "}") else { return [OutgoingMessage(event)] }
        let bytes = event.bytes.dropLast() + Array(",\"channel\":\(channel)}".utf8)
        let delivery: OutboundDelivery = event.isReplaceable ? .replaceable(key: "\(event.kind.rawValue)#\(channel)") : .mustDeliver
        return [OutgoingMessage(kind: .text, bytes: Array(bytes), delivery: delivery, ordinalSlot: SeqSlot(event.seqDigits))]
    }

    func flush() -> [OutgoingMessage] { [] }

    func close(code: UInt16, reason: String) -> (code: UInt16, reason: String) { (code, reason) }
}

/// How a connection that carries a session came: which protocol it speaks, and the limits it
/// runs under (Deepgram: no resume, 10 s without audio).
struct SessionRoute: Sendable {
    var codec: any SessionCodec
    var limits: @Sendable (SessionLimits) -> SessionLimits
    /// A connection that is several sessions, one per channel (Deepgram's `multichannel`): how
    /// many, the bytes of a channel's sample, and each member's codec.
    var channels: (count: Int, sampleBytes: Int, codec: @Sendable (Int, ChannelGroup) -> any SessionCodec)?

    static let steno = SessionRoute(codec: StenoCodec(), limits: { $0 })
}
