import StenoCore
import StenoSpeech
import StenoSystem

/// One session's recognizer on the Whisper worker. Whisper is not a streaming model, so the
/// session's own speech detector (Silero VAD, or the energy detector: `SpeechDetection`) finds
/// utterances (`UtteranceGate`, with pre-roll and tail), and only their audio goes to the
/// worker: each utterance is heard whole for its final, and, while it goes on, what there is
/// of it for a volatile result (one request in flight at a time, so the cadence follows the
/// worker's load). While finals are awaited it owes them (`owesResults`: a finalize or `end` is
/// done only when they have come) but goes on taking audio, its detector finding the next
/// utterances; `wake` is called when the worker answers (its answers come through a
/// `Mailbox`), and finals are reported in the order of their utterances. Only once input has
/// ended does it wait (`isWaiting`) for the finals still to come. A finalize or
/// the maximum length cuts an utterance while speech goes on: what follows is the next one's.
/// Times are samples counted by the gate; the worker's are relative to each request's first
/// sample. Its text is Whisper's own (`RecognitionResult.written`).
public final class WhisperRecognizer: SpeechRecognizer {
    public let info: SpeechEngineInfo
    public var sampleRate: Int { Self.sampleRate }
    public static let sampleRate = 16_000

    /// Audio kept before the detector's onset, so no word's start is clipped: 0.5 s (Silero reports an
    /// onset where its speech begins; pocketsphinx's detector reports one earlier, by its -vad_prespeech of
    /// 0.2 s and more, and had 0.3 s).
    static let preRoll = 8_000
    /// Audio kept after the detector's end of speech.
    static let tail = 3_200
    /// An utterance is heard in pieces of at most this much (Whisper's window is 30 s), cut at
    /// the quietest point of their last 1.5 s (`UtteranceGate`), each going on from the one
    /// before it (the prompt's context).
    static let maximumUtterance = 16_000 * 25
    /// From this length on, an utterance's words that two volatiles in a row agree on are made
    /// final (LocalAgreement, as whisper_streaming does), so a long one's final does not wait
    /// for its end; shorter ones are heard whole, which Whisper does best. 4 s rather than 8:
    /// over babble, finals p95 1.6 s instead of 8.2 s at 20 dB, the same WER on clean speech,
    /// 2–4 more LibriVox words of 71 lost over pink noise and music (bench/README.md, "Noisy speech").
    /// It is also where a pause stops being held open (`UtteranceGate.longAfter`).
    static let commitAfter = 16_000 * 4
    /// Beam search for finals (volatiles take the greedy best path): measured on LibriVox, 4.2 %
    /// WER instead of 7.0 %, the batch floor's figure (bench/README.md, "Whisper streaming").
    static let finalBeam = 5
    /// Words this close to a volatile's end are not committed: the next volatile may still change them.
    static let commitMargin = 1.0
    /// Silence that ends speech for the detector (a pause: its final is asked for at once), and
    /// the silence from the pause's start that ends the utterance (`UtteranceGate.hangover`):
    /// pocketsphinx's detector's 0.5 s, so utterances are cut as they were, but each final's
    /// answer is mostly back when the utterance ends (≈ 0.3 s off every final's wait).
    static let pauseAfter = 0.2
    static let hangover = 8_000

    private let worker: WhisperWorker
    /// The session's utterances, their audio and its timeline.
    private let gate: UtteranceGate
    private let volatileResults: Bool
    /// Its finals' place in the worker's queue: a live session's, or an upload's behind live speech.
    private let finalPriority: Int
    /// The session's phrases, the first part of the decoder's prompt (Whisper's way of being
    /// told what to expect).
    let phrases: String?
    /// The tail of the session's finals, the prompt's second part (`contextCharacters`): a
    /// sentence cut at a pause goes on in the next utterance, and names stay spelled as before.
    var context = ""
    /// The audio of the last final, heard before the next utterance's where it helps.
    var heardBefore = HeardBefore()
    /// How much of the finals before an utterance it is told (whisper_streaming keeps ≈ 200 characters).
    static let contextCharacters = 200
    /// Readings each final carries (`RecognizerOptions.alternatives`; volatiles carry none), and the
    /// session's language: its own, auto, lanes, translation (`SessionLanguage`).
    let alternatives: Int
    var languages: SessionLanguage
    public let notices: [StenoError]

    /// The finals asked for and not yet reported, by their utterance's first sample (and
    /// through which sample), in order; and answers that came before an earlier one's.
    private(set) var awaited: [(start: Int, end: Int, open: Bool)] = []
    /// Cuts whose finals are not asked for yet, by their first sample: a final is asked for
    /// once the finals before it have come, so that its prompt holds them (the same words
    /// whatever the timing; at real time they have long come).
    private var unsent: [Int: ArraySlice<Float>] = [:]
    private var answered: [Int: Answer] = [:]
    /// A volatile is being heard (tests that must not depend on the machine's speed wait for it).
    private(set) var volatileInFlight = false
    private var lastVolatileAt = 0
    /// The last volatile's words for the utterance going on (times from its start), for LocalAgreement.
    private var lastVolatile: [Word] = []
    /// Where the utterance going on resumed after its last committed words (LocalAgreement): its
    /// volatiles go on carrying words and committing what two agree on, however short its rest
    /// (else each piece would wait for `commitAfter` again, and a talker who never pauses would
    /// see a final only every 8 s or more).
    private var committedThrough: Int?
    /// The last committed words' keys (`key`), which the rest's first words may repeat.
    private var committedTail: [String] = []
    private var done = false
    /// The pause a final was last asked for early in (its start).
    private var askedInPause: Int?
    /// The final asked for early in a pause of the utterance going on: its first sample, through
    /// which sample, and its answer once come; while in flight no volatile is asked for (it shows
    /// as one if speech goes on).
    private var early: (start: Int, end: Int, answer: Answer?)?
    private(set) var earlyInFlight = false
    /// An early final an utterance's cut took before its answer came: its start, its request's
    /// end, the cut's end, and at the end of input all the audio received, heard instead if
    /// the early final heard no words.
    private var earlyTaken: (start: Int, asked: Int, end: Int, whole: ArraySlice<Float>?)?
    /// Finals that came from a request asked for early (tests, and what it saves).
    public private(set) var earlyFinals = 0
    private let mailbox: Mailbox<Answer>
    /// Its requests the worker has not answered, by the token their answers carry: cancelled
    /// when the session goes.
    private var requests: [Int: UInt64] = [:]
    private var nextToken = 0

    init(worker: WhisperWorker, info: SpeechEngineInfo, options: RecognizerOptions,
         makeDetector: @escaping () throws(StenoError) -> any VoiceDetector,
         wake: @escaping @Sendable () -> Void) throws(StenoError) {
        self.worker = worker
        self.info = info
        self.volatileResults = options.volatileResults
        finalPriority = options.background ? Self.priorities.background : Self.priorities.final
        self.alternatives = options.alternatives
        self.languages = SessionLanguage(language: options.language, plan: options.languagePlan)
        (self.phrases, self.notices) = Self.prompt(options.vocabulary)
        self.gate = try UtteranceGate(sampleRate: Self.sampleRate, preRoll: Self.preRoll, tail: Self.tail,
                                      maximumLength: Self.maximumUtterance, hangover: Self.hangover, longAfter: Self.commitAfter,
                                      makeDetector: { () throws(StenoError) in try makeDetector() })
        self.mailbox = Mailbox(wake: wake)
    }

    deinit { worker.cancel(requests.values) }

    /// Analyzed through the end of the oldest utterance whose final the worker has not given
    /// yet (all received, when none): how far behind the worker is shows as the session's lag.
    public var analyzedSeconds: Double { seconds(awaited.first?.end ?? gate.received) }
    /// The worker's CPU seconds for this session's requests, answered so far.
    public private(set) var engineSeconds = 0.0
    /// Whether a final is still to come from the worker: `wake` says when to `proceed`.
    public var owesResults: Bool { !awaited.isEmpty }
    /// Whether it waits for the worker with nothing else to do: input has ended and finals are
    /// still to come (before that it goes on taking audio while they are heard).
    public var isWaiting: Bool { done && !awaited.isEmpty }

    public func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
        guard !done else { throw StenoError(.internal, "the recognizer has finished") }
        var events = try drain()
        events += hear(samples)
        // A final a pause asked for early may have come already: reported now (its wake came
        // before it was the final awaited, and no other will).
        events += try drain()
        return events
    }

    /// In a pause whose audio since is all quiet the utterance ends where the pause would end it,
    /// so its early final stands, unless that final heard no words: then all received is heard
    /// (at once, or when the early final's answer comes). Whisper may hear words in the whole
    /// that it dropped as no speech in the shorter cut (cards 004, "five five", heard to the
    /// pause's cut: "5", no-speech 0.73, dropped). Not in a quiet pause, all received is heard:
    /// the detector may not have decided on a word that began at the very end.
    public func endUtterance() throws(StenoError) -> [TranscriberEvent] {
        var events = try drain()
        var end = gate.received
        var whole: ArraySlice<Float>?
        if let pause = gate.pauseCut(), gate.isQuiet(from: pause.end), let early, early.start == pause.start,
           early.end == pause.end {
            switch early.answer?.result {
            case .success(let heard)? where heard.text.isEmpty: break
            case nil: (end, whole) = (pause.end, gate.audio(from: pause.start))
            default: end = pause.end
            }
        }
        if let cut = gate.cut(at: end) { askForFinal(cut, whole: whole) }
        events += try drain()
        return events
    }

    public func finish() throws(StenoError) -> [TranscriberEvent] {
        guard !done else { return try drain() }
        var events = try endUtterance()
        if let ended = gate.endSpeech() { events.append(ended) }
        done = true
        return events
    }

    public func cancel() {
        done = true
        worker.cancel(requests.values)
        requests.removeAll()
        awaited.removeAll()
        unsent.removeAll()
        answered.removeAll()
        early = nil
        earlyTaken = nil
        gate.discard()
    }

    public func proceed() throws(StenoError) -> [TranscriberEvent] { try drain() }

    public func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent] {
        var events = try endUtterance()
        if let ended = gate.endSpeech() { events.append(ended) }
        try gate.skip(samples)
        return events
    }

    // MARK: -

    /// New audio through the gate; the utterances it closed go for their finals.
    private func hear(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        let (events, cuts) = gate.hear(samples)
        for cut in cuts { askForFinal(cut) }
        askInPause()
        askForVolatile()
        return events
    }

    /// In a pause, the utterance's final as it will be cut if the pause ends it (once a pause,
    /// when the worker has no backlog, and room left for the final itself if speech comes back),
    /// once the tail after the pause's start is heard (the detector's pause, `pauseAfter`, is
    /// that long already: were it shorter, a final asked sooner would not hear the whole cut).
    private func askInPause() {
        let pending = worker.pendingCount
        guard let pause = gate.pauseStart, pause != askedInPause, !earlyInFlight, awaited.isEmpty,
              pending < Self.volatileBacklog, pending + 1 < worker.options.maximumPending,
              gate.received >= pause + Self.tail, let cut = gate.pauseCut(), !cut.samples.isEmpty else { return }
        askedInPause = pause
        let (start, end) = (cut.start, cut.end)
        let token = takeToken()
        let request = finalRequest(cut.samples, start: start)
        let id = worker.submit(request.samples, words: true, priority: finalPriority, volatile: false, prompt: request.prompt,
                               beam: Self.finalBeam, alternatives: alternatives, language: request.language,
                               extra: request.extra) { [mailbox] result in
            mailbox.post(Answer(token: token, final: false, early: true, start: start, end: end, result: result))
        }
        guard let id else { return }
        requests[token] = id
        earlyInFlight = true
        early = (start, end, nil)
        lastVolatileAt = end
    }

    /// A volatile result of the utterance so far, when none is in flight, no final is awaited
    /// (a volatile shown before an earlier final would break their order) and enough is new
    /// (`volatileSpacing`: each volatile hears all of the utterance again, so a long one's volatiles are
    /// spaced out to cost about as much per second of speech as a short one's); none while the
    /// worker has a backlog of its own (`volatileBacklog` requests unanswered): finals first.
    private func askForVolatile() {
        let received = gate.received
        let pending = worker.pendingCount
        guard volatileResults, !volatileInFlight, !earlyInFlight, awaited.isEmpty, let start = gate.utteranceStart,
              received - max(start, lastVolatileAt) >= Self.volatileSpacing(utterance: received - start, pending: pending),
              pending < Self.volatileBacklog else { return }
        let slice = gate.audio(from: start)
        let end = received
        volatileInFlight = true
        lastVolatileAt = received
        let long = start == committedThrough || received - start >= Self.commitAfter
        let token = takeToken()
        let (language, extra) = languages.request(seconds: seconds(slice.count))
        let id = worker.submit(slice, words: long, priority: Self.priorities.volatile, volatile: true, prompt: prompt, language: language,
                               minimumWindow: Self.volatileWindow, extra: extra) { [mailbox] result in
            mailbox.post(Answer(token: token, final: false, early: false, start: start, end: end, result: result))
        }
        if let id { requests[token] = id } else { volatileInFlight = false }  // the worker is full: no volatile this time
    }

    /// Sends an utterance the gate cut for its final (if it kept any of its audio). If speech
    /// goes on (a finalize, or the maximum length, cut it), what follows is the next utterance's.
    /// The final asked for early in this utterance's last pause stands for it if it heard all of
    /// it (the pause ended it).
    private func askForFinal(_ cut: UtteranceGate.Cut, whole: ArraySlice<Float>? = nil) {
        lastVolatile = []
        let asked = early
        early = nil
        guard !cut.samples.isEmpty else { return }
        let (start, end) = (cut.start, cut.end)
        awaited.append((start, end, cut.speechGoesOn))
        if let asked, asked.start == start, asked.end >= end {
            earlyFinals += 1
            if let answer = asked.answer {
                answered[start] = Answer(final: true, early: false, start: start, end: end, result: answer.result)
            } else {
                earlyTaken = (start, asked.end, end, whole)
            }
            return
        }
        unsent[start] = cut.samples
        sendNextFinal()
    }

    /// Asks for the oldest final still owed, if it is not asked for yet (the ones before it have come).
    private func sendNextFinal() {
        guard let first = awaited.first, let samples = unsent.removeValue(forKey: first.start) else { return }
        submitFinal(samples, start: first.start, end: first.end)
    }

    /// A final waits for room in a full worker rather than fail its session.
    private func submitFinal(_ samples: ArraySlice<Float>, start: Int, end: Int) {
        let token = takeToken()
        let request = finalRequest(samples, start: start)
        let id = worker.submit(request.samples, words: true, priority: finalPriority, volatile: false, prompt: request.prompt,
                               beam: Self.finalBeam, alternatives: alternatives,
                               language: request.language, waitIfFull: true, extra: request.extra) { [mailbox] result in
            mailbox.post(Answer(token: token, final: true, early: false, start: start, end: end, result: result))
        }
        if let id {
            requests[token] = id
        } else {
            // Posted as an answer would be, waking the session, which owes this final.
            let stopped = StenoError(.internal, "the Whisper worker was stopped")
            mailbox.post(Answer(token: token, final: true, early: false, start: start, end: end, result: .failure(stopped)))
        }
    }

    private func takeToken() -> Int {
        nextToken += 1
        return nextToken
    }

    /// The worker's answers that have come: finals in the order of their utterances; a volatile
    /// for the utterance still going on, if no final is awaited.
    private func drain() throws(StenoError) -> [TranscriberEvent] {
        let answers = mailbox.collect()
        var events: [TranscriberEvent] = []
        for answer in answers {
            requests[answer.token] = nil
            if case .success(let result) = answer.result { engineSeconds += result.seconds }
            if answer.final { answered[answer.start] = answer }
            if answer.early { takeEarly(answer) }
        }
        while let first = awaited.first, let answer = answered.removeValue(forKey: first.start) {
            awaited.removeFirst()
            var result = try answer.result.get()
            if first.start == committedThrough { result = Self.withoutRepeat(of: committedTail, result) }
            guard !result.text.isEmpty else { continue }
            if case .unheard(let scores) = languages.decide(result, settling: true) {
                events.append(.unheard(TimeRange(start: seconds(answer.start), end: seconds(answer.end)), scores: scores))
                continue
            }
            if first.open { result = Self.unclosed(result) }
            remember(result.text)
            let (offset, limit) = (seconds(answer.start), seconds(answer.end))
            func timed(_ words: [Word]) -> [Word] {
                words.map { w in
                    Word(w.text, range: TimeRange(start: min(limit, offset + w.range.start), end: min(limit, offset + w.range.end)),
                         confidence: w.confidence)
                }
            }
            let words = timed(result.words)
            let range = TimeRange(start: words.first?.range.start ?? offset, end: words.last?.range.end ?? limit)
            let original = result.original.map { Original(text: $0.text, words: timed($0.words), language: heardIn(result)) }
            events.append(.final(RecognitionResult(range: range, text: result.text, words: words,
                                                   alternatives: alternatives > 0 ? result.alternatives : [], written: true,
                                                   language: heardIn(result), original: original)))
            heardBefore.reported(start: first.start, end: first.end, text: result.text)
        }
        sendNextFinal()
        for answer in answers where !answer.final {
            if !answer.early { volatileInFlight = false }
            guard case .success(var result) = answer.result, awaited.isEmpty, answer.start == gate.utteranceStart else { continue }
            if answer.start == committedThrough { result = Self.withoutRepeat(of: committedTail, result) }
            guard !result.text.isEmpty, languages.decide(result, settling: false) == .heard else { continue }
            if let (commit, rest) = commitAgreed(result, answer) {
                guard let commit else {
                    // Its final comes from the worker: the volatile shows whole until then.
                    events.append(.volatile(RecognitionResult(range: TimeRange(start: seconds(answer.start), end: seconds(answer.end)),
                                                             text: result.text, written: true)))
                    continue
                }
                events.append(commit)
                // The volatile's other words stay showing, after the final.
                if let first = rest.first {
                    let range = TimeRange(start: min(seconds(answer.start) + first.range.start, seconds(answer.end)),
                                          end: seconds(answer.end))
                    events.append(.volatile(RecognitionResult(range: range, text: rest.map(\.text).joined(separator: " "),
                                                             written: true)))
                }
                continue
            }
            let range = TimeRange(start: seconds(answer.start), end: seconds(answer.end))
            events.append(.volatile(RecognitionResult(range: range, text: result.text, written: true)))
        }
        return events
    }

    /// An early final's answer: the final of the utterance whose cut took it, or kept in case
    /// the cut still comes (and, while speech goes on, shown as a volatile).
    private func takeEarly(_ answer: Answer) {
        earlyInFlight = false
        if let taken = earlyTaken, taken.start == answer.start, taken.asked == answer.end {
            earlyTaken = nil
            if let whole = taken.whole, case .success(let heard) = answer.result, heard.text.isEmpty,
               let index = awaited.firstIndex(where: { $0.start == taken.start }) {
                let end = taken.start + whole.count
                awaited[index].end = end
                submitFinal(whole, start: taken.start, end: end)
                return
            }
            answered[taken.start] = Answer(final: true, early: false, start: taken.start, end: taken.end, result: answer.result)
        } else if let asked = early, asked.start == answer.start, asked.end == answer.end {
            early?.answer = answer
        }
    }

    /// LocalAgreement: of a long utterance, the words this volatile and the last agree on, up to
    /// `commitMargin` before its end, become a final now, and the utterance goes on from the
    /// last one's end. A translation's are cut there and heard as a final (no event now): its
    /// final brings its original, which a volatile does not hear.
    private func commitAgreed(_ result: WhisperResult, _ answer: Answer) -> (TranscriberEvent?, ArraySlice<Word>)? {
        let limit = Double(answer.end - answer.start) / Double(Self.sampleRate) - Self.commitMargin
        let count = Self.agreed(lastVolatile, result.words, before: limit)
        guard count > 0 else {
            lastVolatile = result.words
            return nil
        }
        let offset = seconds(answer.start)
        let words = result.words[..<count].map { w in
            Word(w.text, range: TimeRange(start: offset + w.range.start, end: offset + w.range.end), confidence: w.confidence)
        }
        let end = answer.start + Int((result.words[count - 1].range.end * Double(Self.sampleRate)).rounded())
        let translated = languages.plan?.translate != nil
        if translated {
            awaited.append((answer.start, end, true))
            unsent[answer.start] = gate.audio(from: answer.start).prefix(end - answer.start)
        }
        gate.continueUtterance(from: end)
        lastVolatile = []
        committedThrough = end
        committedTail = Array((committedTail + words.map(Self.key)).suffix(Self.repeatable))
        heardBefore.forget()
        lastVolatileAt = end
        if translated {
            sendNextFinal()
            return (nil, result.words[count...])
        }
        let range = TimeRange(start: words[0].range.start, end: words[words.count - 1].range.end)
        remember(words.map(\.text).joined(separator: " "))
        let final = TranscriberEvent.final(RecognitionResult(range: range, text: words.map(\.text).joined(separator: " "),
                                                             words: words, written: true, language: heardIn(result)))
        return (final, result.words[count...])
    }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
