import StenoCore
import StenoSession
import StenoSpeech
import StenoTransport
import StenoWorkers
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// What every session of a server shares.
struct ServerContext: Sendable {
    /// The connections: the transport's handle, or one in memory in tests.
    var handle: any ConnectionSink
    let engine: any SpeechEngine
    let pool: WorkerPool
    let metrics: StenoMetrics
    let log: Log
    let channels: ChannelHub
    /// Every `/v1/stream` session, for resume and draining.
    let sessions: SessionRegistry
    let sessionConfiguration: SessionConfiguration
    /// How sessions are driven: audio batches, recognizers kept to the end
    /// (`ServerOptions.audioBatchSeconds`, `dedicatedRecognizers`).
    var driver = DriverOptions()
    /// The time sessions and the router read (a manual one in memory tests).
    var clock: any TimeSource = SystemTime()
    /// Written events kept per connection for a client that resumes (`ServerOptions.resumeRetainedBytes`).
    var resumeRetainedBytes = ServerOptions.documentedResumeBytes
}


extension OutgoingMessage {
    /// An event as a text message; its connection writes its `seq` as it sends it.
    init(_ event: EncodedEvent) {
        self.init(kind: .text, bytes: event.bytes, delivery: event.delivery, ordinalSlot: SeqSlot(event.seqDigits))
    }
}

extension StenoMetrics {
    /// A viewer whose queue overflowed is not reading: counted, and closed with 4008 at once,
    /// its queue discarded. (Sessions go through their state machine instead.)
    func closeSlowConsumer(_ id: ConnectionID, on handle: any ConnectionSink) {
        errorSent(.slowConsumer)
        handle.close(id, code: ErrorCode.slowConsumer.closeCode ?? 4008, reason: "slow_consumer", discardQueued: true)
    }
}
