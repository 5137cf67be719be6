import StenoCore
import StenoPrometheus
import StenoSession
import StenoSpeech
import StenoSystem
import StenoTransport
import StenoWorkers
import Synchronization

/// The session layer on top of the transport: it routes upgrades and HTTP requests to
/// sessions, viewers and endpoints, ticks them, and decides admission and draining.
/// Not `Sendable`: the transport calls it on the lws service thread only, and its own state
/// (`pendingUpgrades`, `draining`) is touched nowhere else.
final class Router: TransportDelegate {
    static let streamPath = SessionRoute.streamPath
    static let listenPath = SessionRoute.listenPath

    let context: ServerContext
    let options: ServerOptions
    let policy: HandshakePolicy
    /// Who may read `/metrics` (its tokens only; no paths of its own).
    private let metricsPolicy: HandshakePolicy
    /// The web client's files, served for paths no route takes.
    private let staticFiles: StaticFiles?
    let registry: SessionRegistry
    /// When upgrades were accepted whose connection has not opened yet: they count against
    /// capacity for a few seconds (an accepted handshake that never completes expires).
    private var pendingUpgrades: [Double] = []
    var draining = false
    /// Who a connection comes from (`X-Forwarded-For` from trusted proxies only).
    private let clientAddress: ClientAddress
    /// What each open connection is, decided when it opens: a callback goes to its handler
    /// without asking every table in turn.
    private var routes: [ConnectionID: Route] = [:]

    private enum Route {
        /// The conformance echo route (`ServerOptions.echoPath`).
        case echo
        /// A session (`/v1/stream`): the registry knows which one is on it now (a resume moves it).
        case stream
        /// A viewer of a channel (`/v1/listen`).
        case viewer
    }
    /// Whether another talker would fit in the workers' time and be kept within the lag target
    /// (measured at each tick); sessions are named by object identity.
    var admission = Admission<ObjectIdentifier>()
    /// Whether the log last said the server was busy (a handshake can make it busy between ticks).
    private var announcedBusy = false
    /// Uploads being transcribed (Router+Uploads.swift).
    let uploads = JobSlots()
    /// Multichannel connections: their group and its sessions, one per channel.
    var groups: [ConnectionID: (group: ChannelGroup, sessions: [StreamSession])] = [:]

    init(context: ServerContext, options: ServerOptions, registry: SessionRegistry) {
        self.context = context
        self.options = options
        self.registry = registry
        self.staticFiles = options.webRoot.isEmpty ? nil : StaticFiles(root: options.webRoot)
        self.admission.lagTarget = options.lagTarget
        self.admission.utilizationTarget = options.admitUtilization
        self.policy = HandshakePolicy(
            paths: SessionRoute.paths,
            tokens: Set(options.tokens),
            viewerTokens: Set(options.viewerTokens),
            viewerPaths: [Self.listenPath],
            allowedOrigins: options.allowedOrigins.isEmpty ? nil : Set(options.allowedOrigins))
        self.metricsPolicy = HandshakePolicy(paths: [], tokens: Set(options.metricsTokens))
        self.clientAddress = ClientAddress(trustedProxies: options.trustedProxies)
    }

    private var sessionCount: Int { registry.count }
    private var allSessions: [StreamSession] { registry.all }

    // MARK: TransportDelegate (lws thread)

    func decideUpgrade(_ request: UpgradeRequest) -> UpgradeDecision {
        if let echo = options.echoPath, request.path == echo {
            return draining ? .reject(status: 503, headers: [("Retry-After", String(policy.retryAfterSeconds))]) : .accept
        }
        let session = route(request.path, request.query) != nil
        var decision = admission(path: request.path, query: request.query, headers: request.headers)
        switch decision {
        case .accept, .acceptNaming:
            if session { pendingUpgrades.append(context.clock.now()) }
            // A browser's Deepgram client sent its key as the subprotocols "token, KEY": it
            // needs "token" named back.
            if session, request.path == Self.listenPath, let offered = request.headers["sec-websocket-protocol"],
               offered.split(separator: ",").first.map({ $0.filter { $0 != " " && $0 != "\t" } }) == "token" {
                decision = .acceptNaming(subprotocol: "token")
            }
        case .reject(let response):
            let reason: String? = switch response.status {
            case 401: "unauthorized"
            case 403: "forbidden_origin"
            case 503: draining ? "draining" : admission.isBusy ? "overload" : "capacity"
            default: nil
            }
            if let reason { context.metrics.handshakesRefused.labels(reason).increment() }
        }
        return decision
    }

    func refusedMalformedUpgrade(status: Int) {
        context.metrics.handshakesRefused.labels(status == 431 ? "header_too_large" : "malformed").increment()
    }

    func refusedMessage(_ id: ConnectionID) {
        context.metrics.messagesRefused.increment()
        context.log.warning("connection \(id) closed (1013): the memory for unfinished messages is full")
    }

    func refusedConnection(_ refusal: ConnectionRefusal) {
        context.metrics.handshakesRefused.labels(refusal == .addressLimit ? "address_limit" : "handshake_budget").increment()
    }

    /// What an upgrade to `path` would get now: the one place that decides routes, tokens,
    /// origins, capacity and draining, for handshakes and for the plain-GET diagnosis.
    private func admission(path: String, query: [QueryItem], headers: HTTPHeaders) -> UpgradeDecision {
        var request = UpgradeRequest(path: path, query: query, headers: headers)
        switch route(path, query) {
        case .refused(let refusal)?:
            return .reject(refusal)
        case .session?:
            // Every protocol's session is admitted as a session, with a session's tokens.
            request.path = Self.streamPath
        case nil:
            if path == Self.listenPath, !ChannelName.isValid(request.queryValue("channel") ?? "") {
                return .reject(HTTPResponse(status: 400,
                    text: "400 Bad Request: /v1/listen needs ?channel=NAME (1-64 letters, digits, '-', '_', '.'), "
                        + "or Deepgram's parameters (model, encoding …)\n"))
            }
            if path == Self.listenPath, let language = request.queryValue("language"), !Renditions.isValidChoice(language) {
                return .reject(HTTPResponse(status: 400,
                    text: "400 Bad Request: language must be a BCP 47 tag (en, it) or \"original\"\n"))
            }
        }
        let refusal = self.refusal(for: request.path, resuming: request.queryValue("resume"))
        let decision = policy.evaluate(request, hasCapacity: refusal == nil)
        guard case .reject(let response) = decision, response.status == 503, let refusal else { return decision }
        // The 503 says why and when to come back, in a form a page can read (`GET /v1/stream`).
        var w = JSONWriter(capacity: 48)
        w.beginObject()
        w.field("status", refusal)
        w.field("retryAfter", integer: policy.retryAfterSeconds)
        w.endObject()
        return .reject(HTTPResponse(status: 503, contentType: "application/json", body: w.bytes,
                                    headers: response.headers))
    }

    /// Why a new connection to `path` would be refused for lack of room: "draining" while the
    /// server shuts down, "full" at the connection limit (`maxSessions`), "busy" while the
    /// measured load says another talker would not be kept up with; nil when it fits.
    ///
    /// A client coming back for its session (`?resume=SESSION`, the id of one not ended) adds
    /// no talker and no session, so only draining refuses it: the one client that must not be
    /// turned away by the load is the one whose session is still running here.
    func refusal(for path: String, resuming sessionID: String? = nil) -> String? {
        if draining { return "draining" }
        guard path == Self.streamPath else { return nil }
        if let sessionID, let session = registry.session(id: sessionID), !session.isClosed { return nil }
        let now = context.clock.now()
        pendingUpgrades.removeAll { now - $0 > 5 }
        // Sessions whose protocol has closed (ended, cancelled, failed) hold nothing and take
        // no more input, even while their connection finishes closing.
        if registry.liveCount + pendingUpgrades.count >= options.maxSessions { return "full" }
        return admission.isBusy ? "busy" : nil
    }

    func opened(_ id: ConnectionID, request: UpgradeRequest) {
        if let echo = options.echoPath, request.path == echo {
            routes[id] = .echo
            return
        }
        let now = context.clock.now()
        let remoteAddress = clientAddress.describe(peer: request.remoteAddress, forwardedFor: request.headers["x-forwarded-for"])
        if request.path == Self.listenPath, let name = request.queryValue("channel") {
            routes[id] = .viewer
            context.channels.addViewer(id, channel: name, language: request.queryValue("language"), now: context.clock.wall())
            context.log.info("viewer \(id) joined channel \(name) from \(remoteAddress)")
            return
        }
        if !pendingUpgrades.isEmpty { pendingUpgrades.removeFirst() }
        guard case .session(let route)? = self.route(request.path, request.query) else { return }
        routes[id] = .stream
        var members: [StreamSession] = []
        if let channels = route.channels {
            // One session per channel, each writing through the group (ChannelGroup.swift).
            let group = ChannelGroup(connection: id, count: channels.count, sampleBytes: channels.sampleBytes, sink: context.handle)
            for index in 0..<channels.count {
                var server = context
                server.handle = group.member(index)
                members.append(StreamSession(connection: id, remoteAddress: remoteAddress, server: server,
                                             route: SessionRoute(codec: channels.codec(index, group), limits: route.limits)))
            }
            groups[id] = (group, members)
        } else {
            members = [StreamSession(connection: id, remoteAddress: remoteAddress, server: context, route: route)]
        }
        for session in members {
            registry.add(session, on: id)
            admission.opened(ObjectIdentifier(session), now: now)
            context.metrics.sessionsTotal.increment()
            session.opened()
            if draining { session.input(.shutdown) }
        }
    }


    /// The protocol of a session upgrade (nil: not a session; a refusal: its query cannot be served).
    private func route(_ path: String, _ query: [QueryItem]) -> SessionRoute.Choice? {
        SessionRoute.choose(path: path, query: query, models: context.sessionConfiguration.models)
    }

    func received(_ id: ConnectionID, _ message: IncomingMessage) {
        switch routes[id] {
        case .echo:
            let reply: OutgoingMessage = switch message {
            case .text(let t): .text(t)
            case .binary(let b): .binary(b)
            }
            if context.handle.send(id, reply) == .overflow {
                context.handle.close(id, code: 4008, reason: "slow_consumer", discardQueued: true)
            }
        case .stream:
            if let (group, sessions) = groups[id] {
                switch message {
                case .binary(let bytes):
                    for (session, part) in zip(sessions, group.split(bytes)) { session.received(.binary(part)) }
                case .text:
                    for session in sessions { session.received(message) }
                }
            } else if case .text(let text) = message, text.contains("\"multichannel\""), let single = registry[id],
                      single.isAwaitingStart, case .start(let request)? = try? ClientMessage.parse(text),
                      request.multichannel != nil {
                splitChannels(id, replacing: single, request)
            } else {
                registry[id]?.received(message)
            }
        case .viewer:
            let error = ServerEvent.error(StenoError(.badMessage, "a viewer of a channel cannot send messages"))
            let sent = context.handle.send(id, OutgoingMessage(error.encoded()))
            if sent == .overflow {
                // Like any must-deliver event that does not fit: the viewer is not reading.
                context.metrics.closeSlowConsumer(id, on: context.handle)
            } else {
                context.metrics.errorSent(.badMessage)
            }
        case nil:
            break
        }
    }

    func tooLarge(_ id: ConnectionID, limit: Int) {
        if routes[id] == .stream, let sessions = members(id) ?? registry[id].map({ [$0] }) {
            for session in sessions { session.input(.frameTooLarge(bytes: limit + 1)) }
        } else {
            context.handle.close(id, code: 1009, reason: "too_large")
        }
    }

    /// A connection that has taken no byte for `--write-stall-seconds` while events waited for
    /// it is not reading: a slow consumer, closed with 4008 as when its queue overflows.
    func writeStalled(_ id: ConnectionID) {
        if routes[id] == .stream, let sessions = members(id) ?? registry[id].map({ [$0] }) {
            context.metrics.writeStalls.increment()
            for session in sessions {
                context.log.info("session \(session.sessionID) on \(id): nothing written for \(options.writeStall?.inSeconds ?? 0) s; closed as a slow consumer")
                session.input(.outboundOverflow)
            }
        } else if routes[id] == .viewer, context.channels.dropSlowViewer(id) {
            context.metrics.writeStalls.increment()
            context.log.info("viewer \(id): nothing written for \(options.writeStall?.inSeconds ?? 0) s; closed as a slow consumer")
        }
    }

    func closed(_ id: ConnectionID, backlog: OutboundBacklog?) {
        switch routes.removeValue(forKey: id) {
        case .echo, nil:
            return
        case .stream:
            guard let carried = registry.disconnect(id) else { return }
            for session in groups.removeValue(forKey: id)?.sessions ?? [carried] {
                switch session.transportClosed(id, backlog: backlog) {
                case .detached:
                    context.log.info("session \(session.sessionID) lost its connection \(id); it may be resumed")
                case .closed(let line, let seconds):
                    forget(session, line: line, seconds: seconds)
                }
            }
        case .viewer:
            context.channels.removeViewer(id)
            context.log.info("viewer \(id) left")
        }
    }

    func http(_ request: HTTPRequest) -> HTTPResponse? {
        switch request.path {
        case "/readyz":
            // Readiness for a load balancer: 200 while a new session would be admitted.
            // Not ready either while the engine's worker restarts (sessions keep their audio meanwhile).
            let refusal = refusal(for: Self.streamPath) ?? (context.engine.isReady ? nil : "engine not ready")
            var w = JSONWriter(capacity: 48)
            w.beginObject()
            w.field("status", refusal ?? "ready")
            if refusal != nil { w.field("retryAfter", integer: policy.retryAfterSeconds) }
            w.endObject()
            return HTTPResponse(status: refusal == nil ? 200 : 503, contentType: "application/json", body: w.bytes,
                                headers: [("Cache-Control", "no-store")]
                                    + (refusal == nil ? [] : [("Retry-After", String(policy.retryAfterSeconds))]))
        case Self.streamPath, Self.listenPath, SessionRoute.realtimePath:
            // A plain GET of a WebSocket route says what the handshake would get (browsers
            // cannot read the status of a refused handshake): 426 when it would be accepted.
            switch admission(path: request.path, query: request.query, headers: request.headers) {
            case .accept, .acceptNaming:
                return .plain(status: 426, headers: [("Upgrade", "websocket"), ("Cache-Control", "no-store")])
            case .reject(var response):
                response.headers.append((name: "Cache-Control", value: "no-store"))
                return response
            }
        case "/healthz":
            var w = JSONWriter(capacity: 96)
            w.beginObject()
            w.field("status", draining ? "draining" : "ok")
            w.field("version", StenoServer.version)
            w.field("sessions", integer: sessionCount)
            w.field("viewers", integer: context.channels.viewers.count)
            w.endObject()
            return HTTPResponse(status: draining ? 503 : 200, contentType: "application/json", body: w.bytes,
                                headers: [("Cache-Control", "no-store")])
        case "/v1/models":
            return HTTPResponse(status: 200, contentType: "application/json", body: modelsDocument(),
                                headers: [("Cache-Control", "no-store")])
        case "/metrics":
            if !metricsPolicy.tokens.isEmpty && !metricsPolicy.isAuthorized(headers: request.headers, query: request.query) {
                return .plain(status: 401, headers: [("WWW-Authenticate", "Bearer"), ("Cache-Control", "no-store")])
            }
            updateSampledMetrics()
            return HTTPResponse(status: 200, contentType: MetricsRegistry.contentType,
                                body: Array(context.metrics.registry.exposition().utf8),
                                headers: [("Cache-Control", "no-store")])
        default:
            break
        }
        if request.path == ChannelRoutes.prefix || request.path.hasPrefix(ChannelRoutes.prefix + "/") {
            // A channel's captions are as private as the channel: the same tokens as /v1/listen.
            if !policy.tokens.isEmpty && !policy.isAuthorized(headers: request.headers, query: request.query, readOnly: true) {
                return .plain(status: 401, headers: [("WWW-Authenticate", "Bearer"), ("Cache-Control", "no-store")])
            }
            return ChannelRoutes(channels: context.channels,
                                 allowedOrigins: options.allowedOrigins.isEmpty ? nil : Set(options.allowedOrigins))
                .response(to: request)
        }
        return staticFiles?.response(for: request.path)
    }

    func tick() { tick(now: context.clock.now()) }

    /// The tick at monotonic `now` (tests choose it). Only the sessions due are visited (each
    /// says when it next is: `SessionRegistry.schedule`), so a tick costs the talkers and the
    /// deadlines reached, not every connected session. The lag histogram and admission see
    /// every talker (a session with audio coming or more than a block waiting): a quiet one
    /// has no lag to tell, and admission counts only lags over a block anyway.
    func tick(now: Double) {
        var lags: [Double] = []
        var work: [(ObjectIdentifier, Double)] = []
        for session in registry.takeDue(now) {
            let visit = session.visit(now: now)
            // Only a session with something to do has worked since its last visit.
            work.append((ObjectIdentifier(session), session.laneBusySeconds))
            if let lag = visit.lag {
                // A client sending a file faster than real time is behind by its own doing (flow
                // control holds it): only live streams tell whether another talker would keep up.
                if visit.live { lags.append(lag) }
                context.metrics.lagSeconds.observe(lag)
            }
            // A detached session that has finished (not resumed in time, or drained) has no
            // connection whose close would say so.
            if let (line, seconds) = visit.closing { forget(session, line: line, seconds: seconds) }
        }
        if options.lagTarget > 0 {
            admission.measure(now: now, load: context.engine.load, lags: lags, work: work,
                              workers: context.pool.workerCount)
        }
        if admission.isBusy != announcedBusy {
            announcedBusy = admission.isBusy
            context.log.info(admission.isBusy
                ? "busy (\(admission.reason?.rawValue ?? "")): new sessions are refused (projected utilization \(JSONWriter.secondsText(admission.utilization)) with a talker at \(JSONWriter.secondsText(admission.talkerDemand)), lag \(JSONWriter.secondsText(admission.lag)) s, \(context.engine.load.waiting) waiting for a recognizer)"
                : "no longer busy: new sessions are admitted (projected utilization \(JSONWriter.secondsText(admission.utilization)))")
        }
        context.metrics.admissionBusy.set(admission.isBusy ? 1 : 0)
        context.metrics.admissionUtilization.set(admission.utilization)
        context.metrics.admissionTalkerDemand.set(admission.talkerDemand)
        context.metrics.admissionSpeechCost.set(admission.speechCost)
        context.metrics.admissionSpeechFraction.set(admission.speechFraction)
        context.metrics.admissionNewcomersTalking.set(admission.newcomersTalking)
    }

    private func forget(_ session: StreamSession, line: String, seconds: Double) {
        registry.remove(session)
        admission.closed(ObjectIdentifier(session))
        context.log.info(line)
        context.metrics.sessionDurationSeconds.observe(seconds)
    }

    /// The server is shutting down: new connections are refused with 503, sessions finalize.
    func startDraining() {
        guard !draining else { return }
        draining = true
        context.log.info("draining: finalizing \(sessionCount) sessions; new connections are refused")
        for session in allSessions { session.input(.shutdown) }
        // Viewers stay until the sessions are done (StenoServer.drain closes them): the finals
        // the drain produces are theirs too.
    }

    // MARK: -

    private func updateSampledMetrics() {
        var queued = 0
        var buffered = 0.0
        for session in allSessions {
            queued += session.connection.flatMap { context.handle.queuedBytes($0) } ?? 0
            buffered += session.bufferedSeconds
        }
        for viewer in context.channels.viewers {
            queued += context.handle.queuedBytes(viewer) ?? 0
        }
        context.metrics.outboundQueueBytes.set(Double(queued))
        context.metrics.inboundBufferedAudioSeconds.set(buffered)
    }
}

