// What passes between `SessionMachine` and the server: the audio it accepts (`AudioChunk`),
// what it tells the server to do (`SessionAction`), and everything that can happen to a
// session (`SessionInput`).

/// A binary frame of audio accepted for the pipeline.
public struct AudioChunk: Sendable, Hashable {
    /// The frame as received: whole PCM sample frames, or one Opus packet.
    public var bytes: [UInt8]
    /// Where the chunk begins on the session timeline, in seconds.
    public var start: Double
    /// Its duration in seconds (PCM: frames / rate; Opus: from the TOC, see `headerIsMalformed`).
    public var duration: Double
    /// Where it ends: the audio received through it, as the machine counts it (one division of a
    /// whole sample count, so that it is exactly a time the pipeline names in its own samples;
    /// `start + duration` may be a rounding away).
    public var end: Double
    /// Opus only: the packet's header is unreadable. Pass it to the decoder anyway (it conceals
    /// it); its `duration` is that of the last good packet. The client was already sent a
    /// `bad_audio` for it, so the decoder should not report it again.
    public var headerIsMalformed: Bool

    public init(bytes: [UInt8], start: Double, duration: Double, end: Double, headerIsMalformed: Bool = false) {
        self.bytes = bytes
        self.start = start
        self.duration = duration
        self.end = end
        self.headerIsMalformed = headerIsMalformed
    }
}

/// What the server must do, in the order given.
public enum SessionAction: Sendable, Hashable {
    /// Queue this event on the connection, which numbers it (`seq`) as it delivers it.
    case send(EncodedEvent)
    /// Create the decode/recognize pipeline for this request. `ready` is sent right after;
    /// if the pipeline cannot be made, feed `.pipelineFailed`.
    case startPipeline(StartRequest)
    /// Hand this audio to the pipeline (after decoding/resampling as its format says).
    case submitAudio(AudioChunk)
    /// Finalize everything through `through` (seconds); then feed `.finalizeCompleted`
    /// after delivering the finals it produced.
    case submitFinalize(through: Double)
    /// End of input: finalize everything; then feed `.endCompleted` after delivering its finals.
    case submitEnd
    /// The next `duration` seconds of the timeline have no audio (a declared gap, or silence
    /// the client did not send): end the utterance in progress and go on after it.
    case submitGap(duration: Double)
    /// The client, instead of `start`, asks to continue the detached session of the request on
    /// this connection. If it may, this machine is dropped and the session's own machine gets
    /// `.attached`; if not, feed `.resumeRejected`.
    case resume(ResumeRequest)
    /// Stop the pipeline and discard audio not yet analyzed. Nothing is fed back.
    case cancelPipeline
    /// Stop reading the client's socket: `limits.bufferSeconds` of audio wait for analysis
    /// (TCP backpressure on the client). Said once; `resumeReading` follows.
    case pauseReading
    /// Read the socket again: the backlog has drained to half the buffer (hysteresis).
    case resumeReading
    /// Close the WebSocket with this code after the queued events are sent.
    /// `reason` is short ASCII (≤ 123 bytes). Nothing follows a close.
    case close(code: UInt16, reason: String)
}

/// Everything that can happen to a session.
public enum SessionInput: Sendable, Hashable {
    /// A complete text frame. `now` is monotonic seconds; `wallClock` is used for `startedAt`.
    case text(String, now: Double, wallClock: UTCTime)
    /// A complete text frame as raw bytes (validated as UTF-8 here).
    case textBytes([UInt8], now: Double, wallClock: UTCTime)
    /// A client message a route's codec has already read from the wire (a Deepgram client's
    /// `Finalize`, or the `start` its handshake's query made): as `.text`, without the parsing.
    case message(ClientMessage, now: Double, wallClock: UTCTime)
    /// A frame a route's codec took whole (a keep-alive): the client is there, nothing else.
    case activity(now: Double)
    /// A route's codec cannot take the client's stream (a container it does not read): the
    /// session fails with this error (a fatal code), started or not.
    case refused(StenoError)
    /// A complete binary frame.
    case audio([UInt8], now: Double)
    /// The transport refused a frame over `limits.maxFrameBytes` without assembling it.
    case frameTooLarge(bytes: Int)
    /// The pipeline's recognizer events, in order, and how far analysis has got (seconds;
    /// `infinity`: everything received, as this machine counted it).
    case results([TranscriberEvent], analyzedThrough: Double?, now: Double)
    /// The pipeline finished the oldest outstanding `submitFinalize` (its finals were fed before).
    case finalizeCompleted
    /// The pipeline finished `submitEnd` (its finals were fed before).
    case endCompleted
    /// A non-fatal problem the pipeline wants the client told about (e.g. `bad_audio` for an
    /// undecodable Opus packet). A fatal code is treated as a failure with that code.
    case pipelineWarning(StenoError)
    /// The pipeline broke (a bug or resource failure) → `internal`, close 1011.
    case pipelineFailed(String)
    /// Periodic clock tick (monotonic seconds): progress, idle timeout, session limit.
    case tick(now: Double)
    /// The server is draining: finalize, deliver finals, then `shutting_down` / 1001.
    case shutdown
    /// The drain took too long: `shutting_down` / 1001 now.
    case shutdownDeadline
    /// The connection's unsent events went over `limits.outboundBytes` → `slow_consumer` / 4008.
    /// While detached (the events held for a resume went over it): the session can no longer
    /// be resumed whole, and ends as if its grace period were over (its finals still made).
    case outboundOverflow
    /// The peer closed or the socket broke: stop everything, send nothing.
    case peerClosed
    /// The connection dropped and the client may resume the session (`limits.resumeSeconds`):
    /// a started session is detached; one awaiting `start` ends as with `.peerClosed`.
    case connectionLost(now: Double)
    /// A client resumed this detached session on a new connection.
    case attached(now: Double)
    /// The `resume` this connection asked for cannot be granted (why, in plain words).
    case resumeRejected(String)
}
