// How `SessionMachine` takes a client's text messages: the frame checked and parsed, each
// message by the stage it comes in (`receiveText`), the `start` accepted with the model it
// chose (`accept`, `model(for:among:)`), and `cancel`.

extension SessionMachine {
    // MARK: Text messages

    mutating func receiveText(byteCount: Int, now: Double, wallClock: UTCTime,
                                      into out: inout [SessionAction],
                                      parse: () throws(StenoError) -> ClientMessage) {
        lastActivity = max(lastActivity, now)
        guard byteCount <= configuration.limits.maxFrameBytes else {
            fail(.tooLarge, "a text frame of \(byteCount) bytes is over the limit of \(configuration.limits.maxFrameBytes) bytes",
                 into: &out)
            return
        }
        let message: ClientMessage
        do {
            message = try parse()
        } catch {
            switch error.code {
            case .unsupportedAudio where isStarted:
                // A second start, however malformed its audio.
                fail(.notStarted, "the session has already started; \"start\" may only come first", into: &out)
            case let code where code.isFatal:
                fail(code, error.message, into: &out)
            default:
                emit(.error(error), into: &out)
            }
            return
        }

        switch (stage, message) {
        case (.closed, _):
            return
        case (.awaitingStart, .start(let request)):
            accept(request, now: now, wallClock: wallClock, into: &out)
        case (.awaitingStart, .resume(let request)):
            out.append(.resume(request))
        case (.awaitingStart, _):
            fail(.notStarted, "\"\(message.typeName)\" before \"start\"; start must be the first message", into: &out)
        case (_, .start), (_, .resume):
            fail(.notStarted, "the session has already started; \"\(message.typeName)\" may only come first", into: &out)
        case (_, .cancel):
            cancel(into: &out)
        case (.open, .finalize(let through)):
            let received = receivedSeconds
            let t = TranscriptAssembler.quantize(min(through ?? received, received), otherwise: received)
            pendingFinalizes.append(t)
            out.append(.submitFinalize(through: t))
        case (.open, .end):
            stage = .ending(.requested)
            out.append(.submitEnd)
        case (.open, .gap(let duration)):
            let start = receivedSeconds
            let units = max(1, Int64((duration * unitRate).rounded()))
            receivedUnits += units
            out.append(.submitGap(duration: Double(units) / unitRate))
            emit(.gap(start: start, end: receivedSeconds), into: &out)
            regulateReading(now: now, into: &out)
        case (.open, .silence(let duration)):
            let units = max(1, Int64((duration * unitRate).rounded()))
            receivedUnits += units
            lastActivity = max(lastActivity, now)
            out.append(.submitGap(duration: Double(units) / unitRate))
            regulateReading(now: now, into: &out)
        case (.ending(.requested), .silence):
            if !warnedAudioAfterEnd {
                warnedAudioAfterEnd = true
                emit(.error(StenoError(.badMessage, "audio after \"end\" is ignored")), into: &out)
            }
        case (.ending, .silence):
            break
        case (.ending, .gap):
            emit(.error(StenoError(.badMessage, "the session is ending; \"gap\" is ignored")), into: &out)
        case (.ending, .finalize):
            emit(.error(StenoError(.badMessage, "the session is ending; \"finalize\" is ignored")), into: &out)
        case (.ending, .end):
            emit(.error(StenoError(.badMessage, "the session is already ending; \"end\" is ignored")), into: &out)
        }
    }

    private mutating func accept(_ request: StartRequest, now: Double, wallClock: UTCTime,
                                 into out: inout [SessionAction]) {
        guard request.multichannel == nil else {
            // The server's route makes a session per channel; one session cannot hear them apart.
            emit(.error(StenoError(.badMessage, "multichannel is not served here (a session of its own per channel is the server's)")),
                 into: &out)
            return
        }
        let chosen: ServedModel
        switch Self.model(for: request, among: configuration.models) {
        case .success(let model): chosen = model
        case .failure(let error):
            emit(.error(error), into: &out)
            return
        }
        if let vocabulary = request.vocabulary, !chosen.phones.isEmpty,
           let error = vocabulary.unknownPhones(in: chosen.phones) {
            emit(.error(error), into: &out)
            return
        }
        var request = request
        request.model = chosen.engine.model
        self.request = request
        assembler = TranscriptAssembler(options: .init(volatile: request.volatile, words: request.words,
                                                       format: request.format,
                                                       profanity: request.profanity ?? configuration.profanity))
        unitRate = request.audio.encoding == .opus ? Double(OpusPacket.sampleRate) : Double(request.audio.sampleRate)
        startedAt = wallClock
        startedMonotonicTime = now
        stage = .open
        out.append(.startPipeline(request))
        emit(.ready(ReadyInfo(session: id, startedAt: wallClock, engine: chosen.engine,
                              limits: configuration.limits, resumeToken: resumeToken)), into: &out)
    }

    /// The model a `start` asks for: by name, else the first that serves its language, else
    /// the default; a `bad_message` naming what this server has otherwise.
    public static func model(for request: StartRequest, among models: [ServedModel]) -> Result<ServedModel, StenoError> {
        if let plan = request.languagePlan {
            // Auto, lanes and translation: a multilingual model (the one named, if it is one).
            let multilingual = models.filter { $0.engine.language == LanguageTag.multilingual }
            let what = plan.translate != nil ? "translation" : plan.auto ? "\"language\":\"auto\"" : "\"languages\""
            if let name = request.model {
                guard let model = multilingual.first(where: { $0.engine.model == name }) else {
                    return .failure(StenoError(.badMessage, "\(what) needs a multilingual model, and \"\(clippedForError(name))\" is not one"
                        + " (see /v1/models)"))
                }
                return .success(model)
            }
            guard let model = multilingual.first else {
                return .failure(StenoError(.badMessage, "\(what) needs a multilingual model; this server has none (see /v1/models)"))
            }
            return .success(model)
        }
        if let name = request.model {
            guard let model = models.first(where: { $0.engine.model == name }) else {
                return .failure(StenoError(.badMessage, "model \"\(clippedForError(name))\" is not available; this server has "
                    + models.map(\.engine.model).joined(separator: ", ") + " (see /v1/models)"))
            }
            if let language = request.language, !LanguageTag.serves(model.engine.language, requested: language) {
                return .failure(StenoError(.badMessage,
                    "model \"\(name)\" recognizes \(model.engine.language), not \"\(clippedForError(language))\""))
            }
            return .success(model)
        }
        if let language = request.language {
            guard let model = models.first(where: { LanguageTag.serves($0.engine.language, requested: language) }) else {
                var served: [String] = []
                for model in models where !served.contains(model.engine.language) { served.append(model.engine.language) }
                return .failure(StenoError(.badMessage,
                    "language \"\(clippedForError(language))\" is not available; this server recognizes \(served.joined(separator: ", "))"))
            }
            return .success(model)
        }
        return .success(models[0])
    }

    private mutating func cancel(into out: inout [SessionAction]) {
        let through = analyzedSeconds
        assembler.discardVolatile()
        pendingFinalizes.removeAll()
        stage = .closed(.cancelled)
        out.append(.cancelPipeline)
        emit(.cancelled(through: through), into: &out)
        closeConnection(into: &out)
    }
}
