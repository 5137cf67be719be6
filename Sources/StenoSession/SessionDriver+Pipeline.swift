// The session driver's pipeline jobs, on its executor: the recognizer and pipeline made, audio
// handed over in batches, the jobs woken when the recognizer can go on, each step run and its
// results fed back to the machine (`run`), the latency note, and the pipeline released.

import StenoCore
import StenoSpeech

/// Jobs whose finals the latency note follows (`steno-bench latency` reads the server's log).
enum TimedJob: String { case batch, end }

extension SessionDriver {
    // MARK: Pipeline jobs

    /// Makes the recognizer and the pipeline, as the executor's first job.
    func startPipeline(_ request: StartRequest) {
        let core = core
        core.executor.enqueue { [self] in
            do throws(StenoError) {
                // Light: a front end of its own; a decoder is borrowed per utterance, and when
                // none is free the recognizer waits and `wake` brings the jobs back.
                // A session that asked for no volatile results pays for no volatiles.
                var options = RecognizerOptions(volatileResults: request.volatile,
                                                keepsDecoder: core.options.keepsDecoder, vocabulary: request.vocabulary,
                                                alternatives: request.alternatives, model: request.model,
                                                language: request.language)
                options.languagePlan = request.languagePlan
                options.background = request.background
                let recognizer = try core.engine.makeRecognizer(options: options) { [weak self] in
                    self?.wake()
                }
                // How the phrases were taken (words left out) is the client's to know.
                for notice in recognizer.notices { input(.pipelineWarning(notice)) }
                let made = try TranscriptionPipeline(format: request.audio, recognizer: recognizer)
                note(.pipelineMade(opus: request.audio.encoding == .opus))
                core.work.withValue { $0.pipeline = made }
            } catch {
                note(.pipelineFailed(starting: true, message: error.message))
                input(.pipelineFailed("the recognizer could not be started: \(error.message)"))
            }
        }
    }

    /// Hands the audio batch to the pipeline, as one job.
    func submitBatch(_ s: inout SessionState<Local>) {
        guard !s.batch.isEmpty else { return }
        let chunks = s.batch.take()
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

    /// The recognizer can go on (a decoder was granted, its engine answered): its jobs, paused
    /// while it waited, go on with what it kept.
    private func wake() {
        core.executor.resume { [self] in
            run { pipeline throws(StenoError) in (try pipeline.proceed(), []) }
        }
    }

    /// Queues a pipeline step (see `run`). `timed`: what it is, for the latency note.
    func submit(timed: TimedJob? = nil,
                _ body: @escaping @Sendable (TranscriptionPipeline) throws(StenoError) -> ([TranscriberEvent], [SessionInput])) {
        let submitted = timed == nil ? 0 : core.clock.now()
        core.executor.enqueue { [self] in run(body, timed: timed.map { ($0, submitted) }) }
    }

    /// Runs a pipeline step: `body` returns the recognizer events it made and the inputs to pass
    /// on (warnings), or that say its request is done (completions). The events go to the
    /// machine with how far analysis has got. While the recognizer waits, completions are owed
    /// (a request is done only when its finals have come) and the jobs pause until `wake`. A
    /// thrown error fails the session with `internal`; a missing pipeline (it failed to start,
    /// or was cancelled) does nothing. A recognizer that owes results from elsewhere but does not
    /// wait goes on taking audio; its completions are owed all the same.
    private func run(_ body: (TranscriptionPipeline) throws(StenoError) -> ([TranscriberEvent], [SessionInput]),
                     timed: (job: TimedJob, submitted: Double)? = nil) {
        let clock = core.clock
        let started = timed == nil ? 0 : clock.now()
        let timesJobs = timed != nil && logsLatency
        var timing: (events: [TranscriberEvent], utterance: UtteranceTiming?)?
        var nextBlock: Double?
        let outcome: Result<([SessionInput], Bool), StenoError>? = core.work.withValue { w in
            guard let p = w.pipeline else { return nil }
            do throws(StenoError) {
                let (events, extra) = try body(p)
                // The engine's worker spent this for the session too: its demand, for admission.
                let spent = p.engineSeconds - w.engineCharged
                if spent > 0 {
                    core.executor.charge(busy: spent)
                    w.engineCharged += spent
                }
                if timesJobs { timing = (events, p.lastUtteranceTiming) }
                nextBlock = p.nextBlockAt
                var inputs: [SessionInput] = []
                var completions: [SessionInput] = []
                for input in extra {
                    switch input {
                    case .finalizeCompleted, .endCompleted: completions.append(input)
                    default: inputs.append(input)
                    }
                }
                let waiting = p.isWaiting
                let owing = p.owesResults
                // After `finish`, everything received was analyzed (the machine knows how much).
                let through = p.isFinished && !owing ? Double.infinity : p.analyzedSeconds
                inputs.insert(.results(events, analyzedThrough: through, now: clock.now()), at: 0)
                // A finalize or end is done once the finals it asked for have come.
                w.owed += completions
                if !owing {
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
            pipelineInput(inputs, nextBlock: waiting ? nil : nextBlock)
            if let timed, let timing { noteLatency(timed.job, submitted: timed.submitted, started: started, timing) }
            if waiting { core.executor.pause() }
        case .failure(let error)?:
            note(.pipelineFailed(starting: false, message: error.message))
            input(.pipelineFailed(error.message))
        case nil:
            break
        }
    }

    /// One line per final of a timed job (and one per `end`), with where its utterance's end was
    /// seen and when each step happened (monotonic seconds), so that a final's latency can be
    /// cut into its parts: the silence the detector waited for, the rest of its block, the
    /// batch, the executor, the engine's end of utterance, the machine and the connection.
    private func noteLatency(_ job: TimedJob, submitted: Double, started: Double,
                             _ timing: (events: [TranscriberEvent], utterance: UtteranceTiming?)) {
        let queued = core.clock.now()
        func field(_ value: Double?) -> String { value.map { "\($0)" } ?? "-" }
        let finals = timing.events.compactMap { if case .final(let result) = $0 { result } else { nil } }
        guard !finals.isEmpty || job == .end else { return }
        let u = timing.utterance
        var line = "latency session=\(core.read { $0.machine.id }) job=\(job.rawValue) submitted=\(field(submitted)) started=\(field(started))"
        if let final = finals.last, let u {
            line += " final_end=\(field(final.range.end)) decided=\(field(u.detectorDecidedAt)) closed=\(field(u.closedAt))"
            line += " close=\(field(u.closeBegan)) search=\(field(u.endSearchSeconds)) words=\(field(u.wordsSeconds))"
            line += " alternatives=\(field(u.alternativesSeconds)) cpu=\(field(u.cpuSeconds))"
        }
        line += " queued=\(field(queued))"
        note(.latency(line))
    }

    /// Drops queued work and gives the recognizer back (after a running job finishes).
    func releasePipeline() {
        let work = core.work
        core.executor.finish(cancelling: true) {
            work.withValue { w in
                w.pipeline?.cancel()
                w.pipeline = nil
            }
        }
    }
}
