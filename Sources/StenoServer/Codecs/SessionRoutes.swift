// Which wire protocol an upgrade speaks, decided from its path and query before anything else:
// Steno's own on /v1/stream, Deepgram's live API on /v1/listen without `channel` (Steno's
// viewers always name one), OpenAI's Realtime transcription on /v1/realtime. A new protocol is
// a codec and a case here.

import StenoCore
import StenoTransport

extension SessionRoute {
    /// An upgrade's session route, or why its query cannot be served.
    enum Choice {
        case session(SessionRoute)
        case refused(HTTPResponse)
    }

    static let streamPath = "/v1/stream"
    static let listenPath = "/v1/listen"
    static let realtimePath = "/v1/realtime"

    /// The paths whose upgrades carry a session (or, on /v1/listen, a viewer).
    static let paths: Set<String> = [streamPath, listenPath, realtimePath]

    /// The route of an upgrade to `path` with `query`: nil when it is not a session (a viewer of
    /// a channel, or another path); the HTTP refusal when the query cannot be served.
    static func choose(path: String, query: [QueryItem], models: [ServedModel]) -> Choice? {
        switch path {
        case streamPath:
            return .session(.steno)
        case listenPath:
            // A viewer names its channel; a Deepgram client names its model (the SDKs always
            // do) or its audio. Neither: a viewer that forgot its channel (400 in the router).
            guard !query.contains(where: { $0.name == "channel" }),
                  query.contains(where: { $0.name != "token" }) else { return nil }
            switch DeepgramQuery.parse(query, models: models) {
            case .success(let parsed):
                var route = SessionRoute(codec: DeepgramCodec(query: parsed), limits: DeepgramCodec.limits)
                if parsed.channels > 1 {
                    let requestID = DeepgramCodec.makeRequestID()
                    route.channels = (parsed.channels, parsed.companding == nil ? 2 : 1, { index, group in
                        DeepgramCodec(query: parsed, requestID: requestID, channel: index, group: group)
                    })
                }
                return .session(route)
            case .failure(let error):
                return .refused(refusal(["err_code": "Bad Request", "err_msg": error.message]))
            }
        case realtimePath:
            guard query.first(where: { $0.name == "intent" })?.value == "transcription" else {
                return .refused(refusal(nil, openAI: "this server has transcription sessions only: connect with ?intent=transcription"))
            }
            return .session(SessionRoute(codec: RealtimeCodec(), limits: RealtimeCodec.limits))
        default:
            return nil
        }
    }

    /// A 400 with the error body the protocol's clients read (Deepgram's, or OpenAI's).
    private static func refusal(_ fields: KeyValuePairs<String, String>?, openAI message: String? = nil) -> HTTPResponse {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        if let message {
            w.key("error")
            w.beginObject()
            w.field("message", message)
            w.field("type", "invalid_request_error")
            w.key("param")
            w.null()
            w.key("code")
            w.null()
            w.endObject()
        }
        for (key, value) in fields ?? [:] { w.field(key, value) }
        w.endObject()
        return HTTPResponse(status: 400, contentType: "application/json", body: w.bytes)
    }
}
