// A `StreamSession`'s pipeline jobs on its lane: the recognizer and pipeline made, audio
// handed over in batches, the lane woken when a decoder is granted, each step run and its
// results fed back to the machine (`run`), the latency log, and the pipeline released.

import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem
import StenoWorkers

extension StreamSession {
    // MARK: Pipeline jobs (run on the lane)

    func startPipeline(_ request: StartRequest) {
        let engine = server.engine
        let dedicated = server.dedicatedRecognizers
        let metrics = server.metrics
        lane.submit { [self] in
            do throws(StenoError) {
                // Light: a front end of its own; a decoder is borrowed per utterance, and when
                // none is free the recognizer waits and `wake` brings the lane back.
                let options = RecognizerOptions(keepsDecoder: dedicated, vocabulary: request.vocabulary,
                                                alternatives: request.alternatives, model: request.model)
                let recognizer = try engine.makeRecognizer(options: options) { [weak self] in
                    self?.wake()
                }
                // How the phrases were taken (words left out) is the client's to know.
                for notice in recognizer.notices { input(.pipelineWarning(notice)) }
                let made = try TranscriptionPipeline(format: request.audio, recognizer: recognizer)
                metrics.recognizersCreated.increment()
                if request.audio.encoding == .opus { metrics.decodersCreated.increment() }
                work.withValue { $0.pipeline = made }
            } catch {
                server.log.error("session \(sessionID): cannot start the recognizer: \(error.message)")
                input(.pipelineFailed("the recognizer could not be started: \(error.message)"))
            }
        }
    }

    /// Whether the audio received through `time` completes the recognizer's next block.
    func blockIsIn(_ s: State, through time: Double) -> Bool {
        // Half a sample of slack at 16 kHz: chunk times are sums of durations.
        guard let at = s.flushAt else { return false }
        return time >= at - 0.00003
    }

    /// Hands the audio batch to the lane, as one job.
    func submitBatch(_ s: inout State) {
        guard !s.batch.isEmpty else { return }
        let chunks = s.batch
        s.batch.removeAll(keepingCapacity: true)
        s.batchSeconds = 0
        s.flushAt = nil
        submit(timed: .batch) { pipeline throws(StenoError) in
            var events: [TranscriberEvent] = []
            var warnings: [SessionInput] = []
            for chunk in chunks {
                let output = try pipeline.append(chunk.bytes)
                events += output.events
                if let warning = output.warning, !chunk.headerIsMalformed { warnings.append(.pipelineWarning(warning)) }
            }
            return (events, warnings)
        }
    }

    /// The recognizer can go on (a decoder was granted to it): its lane, parked while it
    /// waited, goes on with what it kept.
    private func wake() {
        lane.unpark { [self] in
            run { pipeline throws(StenoError) in (try pipeline.proceed(), []) }
        }
    }

    /// Queues a pipeline job (see `run`). `timed`: what it is, for the latency log.
    func submit(timed: TimedJob? = nil,
                        _ body: @escaping @Sendable (TranscriptionPipeline) throws(StenoError) -> ([TranscriberEvent], [SessionInput])) {
        let submitted = timed == nil ? 0 : SystemClock.now()
        lane.submit { [self] in run(body, timed: timed.map { ($0, submitted) }) }
    }

    /// Jobs whose finals the latency log follows (`steno-bench latency` reads it).
    enum TimedJob: String { case batch, end }

    /// Runs a pipeline step on the lane: `body` returns the recognizer events it made and the
    /// inputs to pass on (warnings), or that say its request is done (completions). The
    /// events go to the machine with how far analysis has got. While the recognizer waits for
    /// a decoder, completions are owed (a request is done only when its finals have come)
    /// and the lane parks until `wake`. A thrown error fails the session with `internal`; a
    /// missing pipeline (it failed to start, or was cancelled) does nothing.
    private func run(_ body: (TranscriptionPipeline) throws(StenoError) -> ([TranscriberEvent], [SessionInput]),
                     timed: (job: TimedJob, submitted: Double)? = nil) {
        let started = timed == nil ? 0 : SystemClock.now()
        var timing: (events: [TranscriberEvent], utterance: UtteranceTiming?)?
        var nextBlock: Double?
        let outcome: Result<([SessionInput], Bool), StenoError>? = work.withValue { w in
            guard let p = w.pipeline else { return nil }
            do throws(StenoError) {
                let (events, extra) = try body(p)
                // The engine's worker spent this for the session too: its demand, for admission.
                let spent = p.engineSeconds - w.engineCharged
                if spent > 0 {
                    lane.charge(busy: spent)
                    w.engineCharged += spent
                }
                if timed != nil && server.log.isEnabled(.debug) { timing = (events, p.lastUtteranceTiming) }
                nextBlock = p.secondsToNextBlock.map { p.receivedSeconds + $0 }
                var inputs: [SessionInput] = []
                var completions: [SessionInput] = []
                for input in extra {
                    switch input {
                    case .finalizeCompleted, .endCompleted: completions.append(input)
                    default: inputs.append(input)
                    }
                }
                let waiting = p.isWaiting
                // After `finish`, everything received was analyzed: say so exactly.
                let through = p.isFinished && !waiting ? p.receivedSeconds : p.analyzedSeconds
                inputs.insert(.results(events, analyzedThrough: through, now: SystemClock.now()), at: 0)
                w.owed += completions
                if !waiting {
                    inputs += w.owed
                    w.owed.removeAll()
                }
                return .success((inputs, waiting))
            } catch {
                p.cancel()
                w.pipeline = nil
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let (inputs, waiting))?:
            input(inputs, nextBlock: waiting ? nil : nextBlock)
            if let timed, let timing { logLatency(timed.job, submitted: timed.submitted, started: started, timing) }
            if waiting { lane.park() }
        case .failure(let error)?:
            server.log.error("session \(sessionID): pipeline failed: \(error.message)")
            input(.pipelineFailed(error.message))
        case nil:
            break
        }
    }

    /// One debug line per final of a timed job (and one per `end`), with where its utterance's
    /// end was seen and when each step happened (monotonic seconds), so that a final's latency
    /// can be cut into its parts: the silence the detector waited for, the rest of its block,
    /// the batch, the lane, the engine's end of utterance, the machine and the connection.
    private func logLatency(_ job: TimedJob, submitted: Double, started: Double,
                            _ timing: (events: [TranscriberEvent], utterance: UtteranceTiming?)) {
        let queued = SystemClock.now()
        func field(_ value: Double?) -> String { value.map { "\($0)" } ?? "-" }
        let finals = timing.events.compactMap { if case .final(let result) = $0 { result } else { nil } }
        guard !finals.isEmpty || job == .end else { return }
        let u = timing.utterance
        var line = "latency session=\(sessionID) job=\(job.rawValue) submitted=\(field(submitted)) started=\(field(started))"
        if let final = finals.last, let u {
            line += " final_end=\(field(final.range.end)) decided=\(field(u.detectorDecidedAt)) closed=\(field(u.closedAt))"
            line += " close=\(field(u.closeBegan)) search=\(field(u.endSearchSeconds)) words=\(field(u.wordsSeconds))"
            line += " alternatives=\(field(u.alternativesSeconds)) cpu=\(field(u.cpuSeconds))"
        }
        line += " queued=\(field(queued))"
        server.log.debug(line)
    }

    /// Drops queued work and gives the recognizer back (after a running job finishes).
    func releasePipeline() {
        lane.close(.cancel) { [work] in
            work.withValue { w in
                w.pipeline?.cancel()
                w.pipeline = nil
            }
        }
    }
}
