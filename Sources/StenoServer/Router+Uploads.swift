// OpenAI's REST uploads (`/v1/audio/transcriptions`, `/translations`): taken by the router,
// heard on threads of their own, answered through the transport when done.

import Foundation
import StenoTransport
import Synchronization

extension Router {
    /// OpenAI's transcription and translation uploads, heard on a thread of their own: at most
    /// one per worker at once (429 beyond), answered through the transport when done.
    func http(_ request: HTTPRequest, body: [UInt8], exchange: HTTPExchange) -> HTTPResponse? {
        let translate: Bool
        switch request.path {
        case OpenAITranscriptions.transcriptionsPath: translate = false
        case OpenAITranscriptions.translationsPath: translate = true
        default: return .plain(status: 405, headers: [("Allow", "GET, HEAD")])
        }
        if !policy.tokens.isEmpty && !policy.isAuthorized(headers: request.headers, query: request.query) {
            context.metrics.uploads.labels("401").increment()
            return OpenAITranscriptions.error(401, "a valid API key is required (Authorization: Bearer KEY)", code: "invalid_api_key")
        }
        if !options.allowedOrigins.isEmpty, let origin = request.headers["origin"], !options.allowedOrigins.contains(origin) {
            context.metrics.uploads.labels("403").increment()
            return OpenAITranscriptions.error(403, "origin \(origin) is not allowed", type: "permission_error")
        }
        // Live speech first: while another talker would not be kept up with, uploads wait.
        if let refusal = refusal(for: Self.streamPath) {
            context.metrics.uploads.labels("503").increment()
            return OpenAITranscriptions.error(503, "the server is \(refusal); try again later", type: "server_error")
        }
        let jobs = uploads
        guard jobs.take(limit: context.pool.workerCount) else {
            context.metrics.uploads.labels("429").increment()
            return OpenAITranscriptions.error(429, "as many files are being transcribed as the server has workers; try again shortly",
                                              code: "rate_limit_exceeded", type: "rate_limit_error")
        }
        let job = OpenAITranscriptions(engine: context.engine, models: context.sessionConfiguration.models,
                                       maxSeconds: context.sessionConfiguration.limits.maxSessionSeconds)
        let handle = context.handle
        let contentType = request.headers["content-type"] ?? ""
        let log = context.log
        let metrics = context.metrics
        Thread.detachNewThread {
            let stream = OpenAITranscriptions.Stream(head: { handle.respondStreaming(exchange, head: $0) },
                                                     write: { handle.write(exchange, $0, final: $1) })
            let response = job.answer(body: body, contentType: contentType, translate: translate, stream: stream)
            let status = response?.status ?? 200
            log.info("\(request.path): \(body.count) bytes answered \(status)\(response == nil ? " (streamed)" : "")")
            metrics.uploads.labels(String(status)).increment()
            if let response { handle.respond(exchange, response) }
            jobs.give()
        }
        return nil
    }
}

/// A count of jobs running, taken and given from any thread.
final class JobSlots: Sendable {
    private let running = Atomic<Int>(0)

    /// Takes a slot if fewer than `limit` are taken.
    func take(limit: Int) -> Bool {
        var current = running.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = running.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func give() { running.subtract(1, ordering: .acquiringAndReleasing) }
}
