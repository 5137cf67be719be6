import Foundation
import StenoCore
import Testing
@testable import StenoServer
import StenoTestSupport

/// What is decided at the handshake (capacity, tokens, origins) and the HTTP side of the
/// server (/healthz, /metrics, the web client, 404s).
@Suite struct ServerAccessTests {
    static let endgame = FormatInputs.pcm24k

    private func refusal(_ server: LiveServer, path: String = "/v1/stream", headers: [(String, String)] = []) throws -> TestHTTPResponse? {
        switch try WebSocketTestClient.attempt(port: server.port, path: path, headers: headers, timeout: 30) {
        case .upgraded(let client):
            client.disconnect()
            return nil
        case .refused(let response):
            return response
        }
    }

    @Test func atMaxSessionsTheNextHandshakeGets503WithRetryAfterUntilOneEnds() throws {
        let server = try LiveServer { $0.maxSessions = 2 }
        let first = try server.connect()
        try first.start(Self.endgame)
        let second = try server.connect()
        try second.start(Self.endgame)

        let refused = try #require(try refusal(server), "a third session was accepted")
        #expect(refused.status == 503)
        #expect(Int(refused.header("retry-after") ?? "") ?? 0 > 0, "\(refused)")
        #expect(refused.bodyText.contains(#""status":"full""#), "\(refused.bodyText)")
        // Readiness and a page's plain GET of the route say the same.
        let ready = try server.get("/readyz")
        #expect(ready.status == 503 && ready.bodyText.contains(#""status":"full""#), "\(ready.bodyText)")
        #expect(ready.header("retry-after") != nil)
        let probe = try server.get("/v1/stream")
        #expect(probe.status == 503 && probe.bodyText.contains(#""retryAfter":"#), "\(probe.bodyText)")
        // Viewers are not transcription sessions.
        #expect(try refusal(server, path: "/v1/listen?channel=x") == nil)

        try first.end()
        #expect(first.closeCode == 1000)
        #expect(eventually { server.server.sessionCount < 2 })
        let third = try server.connect()
        try third.start(Self.endgame)
        try third.end()
        #expect(third.closeCode == 1000)
        try second.end()
        let metrics = try server.metrics()
        #expect(metrics[#"steno_handshakes_refused_total{reason="capacity"}"#] == 1)
    }

    @Test func aPlainGetOfTheRoutesSaysWhatTheHandshakeWouldGet() throws {
        let server = try LiveServer { $0.tokens = ["s3cret-token"] }
        #expect(try server.get("/readyz").status == 200)
        let missing = try server.get("/v1/stream")
        #expect(missing.status == 401 && missing.header("www-authenticate") == "Bearer")
        #expect(try server.get("/v1/stream?token=wrong").status == 401)
        let fine = try server.get("/v1/stream?token=s3cret-token")
        #expect(fine.status == 426 && fine.header("upgrade") == "websocket", "\(fine)")
        #expect(try server.get("/v1/listen?token=s3cret-token").status == 400, "no channel")
        #expect(try server.get("/v1/listen?channel=x&token=s3cret-token").status == 426)
        // Nothing was refused at a handshake.
        let metrics = try server.metrics()
        #expect(metrics[#"steno_handshakes_refused_total{reason="unauthorized"}"#] == 0)
    }

    @Test func metricsCanAskForATokenWhileHealthAndReadinessStayOpen() throws {
        let server = try LiveServer { $0.metricsTokens = ["scrape-me"] }
        let refused = try server.get("/metrics")
        #expect(refused.status == 401 && refused.header("www-authenticate") == "Bearer")
        #expect(try server.get("/metrics?token=wrong").status == 401)
        #expect(try server.get("/metrics", headers: [("Authorization", "Bearer scrape-me")]).status == 200)
        let byQuery = try server.get("/metrics?token=scrape-me")
        #expect(byQuery.status == 200 && byQuery.bodyText.contains("steno_sessions_active"))
        #expect(try server.get("/healthz").status == 200)
        #expect(try server.get("/readyz").status == 200)
        // Session tokens are not metrics tokens: without --token, streaming stays open.
        let client = try server.connect()
        try client.start(Self.endgame)
        try client.end()
        #expect(client.closeCode == 1000)
    }

    @Test func theBufferedAudioGaugeIsZeroOnceAnalysisHasCaughtUp() throws {
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(Self.endgame)
        try client.send(audio: Self.endgame.messages, of: Self.endgame)
        try client.send(#"{"type":"finalize"}"#)
        _ = try client.waitFor("finalized")
        #expect(eventually { (try? server.metrics()["steno_inbound_buffered_audio_seconds"]) == 0 },
                "buffered: \(((try? server.metrics())?["steno_inbound_buffered_audio_seconds"]).map { "\($0) s" } ?? "not in /metrics")")
        try client.end()
    }

    @Test func aSessionThatHasEndedNoLongerCountsAgainstCapacity() throws {
        let server = try LiveServer { $0.maxSessions = 1 }
        for round in 0..<4 {
            let client = try server.connect()
            // Like a client that is done once it has its `ended` and does not bother with
            // the closing handshake.
            client.ws.autoCloseReply = false
            try client.start(Self.endgame)
            try client.send(#"{"type":"end"}"#)
            _ = try client.waitFor("ended")
            let refused = try refusal(server)
            #expect(refused == nil, "round \(round): the next session after ended got HTTP \(refused?.status ?? 0)")
            client.disconnect()
            #expect(eventually { server.server.sessionCount == 0 })
        }
    }

    @Test func withTokensAMissingOrWrongTokenGets401AndTheRightOneWorks() throws {
        let server = try LiveServer { $0.tokens = ["s3cret-token"] }
        for (path, headers) in [
            ("/v1/stream", []),
            ("/v1/stream", [("Authorization", "Bearer wrong")]),
            ("/v1/stream", [("Authorization", "Bearer s3cret-toke")]),
            ("/v1/stream?token=wrong", []),
            ("/v1/stream?token=", []),
            ("/v1/listen?channel=studio-a", []),
        ] as [(String, [(String, String)])] {
            let response = try #require(try refusal(server, path: path, headers: headers), "\(path) \(headers) was accepted")
            #expect(response.status == 401, "\(path) \(headers): \(response)")
        }
        for (path, headers) in [
            ("/v1/stream", [("Authorization", "Bearer s3cret-token")]),
            ("/v1/stream?token=s3cret-token", []),
        ] as [(String, [(String, String)])] {
            let client = try server.connect(path: path, headers: headers)
            try client.start(Self.endgame)
            try client.end()
            #expect(client.closeCode == 1000, "\(path)")
        }
        #expect(try refusal(server, path: "/v1/listen?channel=studio-a&token=s3cret-token") == nil)
        let metrics = try server.metrics()
        #expect(metrics[#"steno_handshakes_refused_total{reason="unauthorized"}"#] == 6)
    }

    @Test func withTokensAChannelsCaptionFilesNeedATokenTooAndViewerTokensOnlyView() throws {
        let server = try LiveServer {
            $0.tokens = ["s3cret-token"]
            $0.viewerTokens = ["look-only"]
        }
        let input = Self.endgame
        let client = try server.connect(path: "/v1/stream?token=s3cret-token")
        try client.start(input, extra: #""channel":"studio-a""#)
        try client.send(audio: input.messages, of: input)
        try client.end()
        let words = client.events.finals.map(\.text).joined(separator: " ")
        #expect(!words.isEmpty)

        for (path, headers) in [
            ("/v1/channels/studio-a/captions.txt", []),
            ("/v1/channels/studio-a/captions.vtt?token=wrong", []),
            ("/v1/channels/studio-a/captions.srt", [("Authorization", "Bearer wrong")]),
            ("/v1/channels/unknown/captions.txt", []), // 401 before 404: no probing for names
        ] as [(String, [(String, String)])] {
            let response = try server.get(path, headers: headers)
            #expect(response.status == 401 && response.header("WWW-Authenticate") == "Bearer", "\(path): \(response)")
        }
        for (path, headers) in [
            ("/v1/channels/studio-a/captions.txt?token=s3cret-token", []),
            ("/v1/channels/studio-a/captions.txt", [("Authorization", "Bearer s3cret-token")]),
        ] as [(String, [(String, String)])] {
            let response = try server.get(path, headers: headers)
            #expect(response.status == 200, "\(path): \(response)")
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(client.events.finals.allSatisfy { text.contains($0.text) }, "\(path): \(text)")
        }
        #expect(try server.get("/v1/channels/unknown/captions.txt?token=s3cret-token").status == 404)

        // A viewer token follows channels and reads their captions, and cannot publish.
        #expect(try server.get("/v1/channels/studio-a/captions.vtt?token=look-only").status == 200)
        #expect(try server.get("/v1/channels/studio-a/captions.vtt", headers: [("Authorization", "Bearer look-only")]).status == 200)
        #expect(try refusal(server, path: "/v1/listen?channel=studio-a&token=look-only") == nil)
        for (path, headers) in [
            ("/v1/stream?token=look-only", []),
            ("/v1/stream", [("Authorization", "Bearer look-only")]),
        ] as [(String, [(String, String)])] {
            let response = try #require(try refusal(server, path: path, headers: headers), "\(path) \(headers) was accepted")
            #expect(response.status == 401, "\(path): \(response)")
        }
        #expect(try server.get("/healthz").status == 200, "health checks need no token")
    }

    @Test func anOriginNotAllowedGets403() throws {
        let server = try LiveServer { $0.allowedOrigins = ["https://captions.example"] }
        let response = try #require(try refusal(server, headers: [("Origin", "https://evil.example")]))
        #expect(response.status == 403)
        let viewer = try #require(try refusal(server, path: "/v1/listen?channel=a", headers: [("Origin", "http://localhost:8080")]))
        #expect(viewer.status == 403)
        // The allowed origin, and a client that is not a browser (no Origin), get in.
        #expect(try refusal(server, headers: [("Origin", "https://captions.example")]) == nil)
        #expect(try refusal(server) == nil)
    }

    @Test func readyAnnouncesTheEngineAndTheLimitsTheServerRunsWith() throws {
        let server = try LiveServer {
            $0.limits.maxFrameBytes = 32768
            $0.limits.bufferSeconds = 2.5
            $0.limits.maxSessionSeconds = 600
            $0.limits.idleTimeoutSeconds = 45
            $0.limits.outboundBytes = 262_144
        }
        let client = try server.connect()
        let ready = try client.start(Self.endgame)
        guard case .object(let engine)? = ready.object["engine"], case .object(let limits)? = ready.object["limits"] else {
            Issue.record("ready without engine or limits: \(ready)")
            return
        }
        #expect(engine["name"] == .string("pocketsphinx") && engine["language"] == .string("en-US"))
        #expect(engine["sampleRate"] == .number(16000))
        #expect(limits["maxFrameBytes"] == .number(32768) && limits["bufferSeconds"] == .number(2.5))
        #expect(limits["maxSessionSeconds"] == .number(600) && limits["idleTimeoutSeconds"] == .number(45))
        #expect(limits["outboundBytes"] == .number(262_144))
        try client.end()
    }

    @Test func healthzReportsSessionsAndViewers() throws {
        let server = try LiveServer()
        var response = try server.get("/healthz")
        #expect(response.status == 200)
        #expect(response.header("content-type")?.hasPrefix("application/json") == true)
        guard case .object(let idle) = try JSONParser().parse(response.bodyText) else {
            Issue.record("not an object: \(response.bodyText)")
            return
        }
        #expect(idle["status"] == .string("ok"))
        #expect(idle["version"] == .string(StenoServer.version))
        #expect(idle["sessions"] == .number(0) && idle["viewers"] == .number(0))

        let session = try server.connect()
        try session.start(Self.endgame)
        let viewer = try server.connect(path: "/v1/listen?channel=health")
        _ = try viewer.waitFor("joined")
        response = try server.get("/healthz")
        let parsed = try JSONParser().parse(response.bodyText)
        guard case .object(let busy) = parsed else {
            Issue.record("not an object: \(response.bodyText)")
            return
        }
        #expect(busy["sessions"] == .number(1) && busy["viewers"] == .number(1), "\(response.bodyText)")
        try session.end()
    }

    @Test func metricsCountSessionsAudioEventsAndErrors() throws {
        let input = Self.endgame
        let server = try LiveServer()
        let client = try server.connect()
        try client.send("not json")
        _ = try client.waitFor("error")
        try client.start(input)
        try client.send(audio: input.messages, of: input)
        try client.end()
        #expect(eventually { server.server.sessionCount == 0 })

        let response = try server.get("/metrics")
        #expect(response.status == 200)
        #expect(response.header("content-type")?.hasPrefix("text/plain") == true)
        #expect(response.bodyText.contains("# TYPE steno_sessions_total counter"))
        let m = LiveServer.parseMetrics(response.bodyText)
        #expect(m["steno_sessions_total"] == 1)
        #expect(m["steno_sessions_active"] == 0)
        #expect(abs((m["steno_audio_received_seconds_total"] ?? 0) - input.duration) < 0.01, "\(m["steno_audio_received_seconds_total"] ?? -1)")
        #expect(abs((m["steno_audio_analyzed_seconds_total"] ?? 0) - input.duration) < 0.01)
        let count = { (type: String) in client.events.filter { $0.type == type }.count }
        for type in ["ready", "final", "ended", "error"] {
            #expect(m[#"steno_events_sent_total{type="\#(type)"}"#] == Double(count(type)), "\(type)")
        }
        #expect(m[#"steno_errors_total{code="bad_message"}"#] == 1)
        #expect(m["steno_session_duration_seconds_count"] == 1)
        #expect((m["steno_recognizers_created_total"] ?? 0) >= 1)
    }

    @Test func theWebClientIsServedAndUnknownPathsAndTraversalGet404() throws {
        let server = try LiveServer()
        let index = try server.get("/")
        #expect(index.status == 200)
        #expect(index.header("content-type")?.hasPrefix("text/html") == true, "\(index)")
        #expect(index.bodyText.lowercased().contains("<html"))
        let script = try server.get("/steno-client.js")
        #expect(script.status == 200)
        #expect(script.header("content-type")?.contains("javascript") == true, "\(script)")
        #expect(!script.body.isEmpty)

        for path in ["/nope", "/v1/nope", "/v1/channels/none/captions.vtt", "/../Package.swift", "/%2e%2e/Package.swift",
                     "/..%2fPackage.swift", "/web-client/../../Package.swift", "/%2e%2e%2f%2e%2e%2fetc/passwd",
                     "/....//Package.swift", "/index.html/../../Package.swift"] {
            let response = try server.get(path)
            #expect(response.status == 404, "\(path): \(response)")
            #expect(!response.bodyText.contains("PackageDescription") && !response.bodyText.contains("root:"), "\(path)")
        }
        // A path that is only a WebSocket endpoint, asked over plain HTTP.
        #expect(try server.get("/v1/stream").status != 200)
    }
}
