import Foundation
import StenoCore
import StenoServer

/// obs-websocket 5 (built into OBS Studio 28 and later), as far as a caption feeder speaks it:
/// `Hello` (op 0) with an authentication challenge, `Identify` (op 1), `Identified` (op 2),
/// `Request` (op 6) and `RequestResponse` (op 7), the `StreamStateChanged` event (op 5).
enum OBSWebSocket {
    /// JSON over text frames.
    static let subprotocol = "obswebsocket.json"
    static let rpcVersion = 1
    /// The `Outputs` event subscription (StreamStateChanged).
    static let outputsEvents = 1 << 6

    /// Request statuses and close codes the feeder acts on.
    static let success = 100
    static let outputNotRunning = 501
    static let authenticationFailed: UInt16 = 4009
    static let unsupportedRPCVersion: UInt16 = 4010

    enum Message: Equatable {
        /// The server's greeting; `challenge` and `salt` when it asks for a password.
        case hello(challenge: String?, salt: String?)
        case identified
        case response(requestID: String, code: Int, comment: String?, data: JSONObject?)
        case event(type: String, data: JSONObject?)
    }

    /// A message from OBS; nil for anything else.
    static func message(_ text: String) -> Message? {
        guard let value = try? JSONParser(maxDepth: 32, maxBytes: 1 << 20).parse(text), case .object(let root) = value,
              case .number(let op)? = root["op"], case .object(let d)? = root["d"] else { return nil }
        func string(_ object: JSONObject?, _ key: String) -> String? {
            if case .string(let s)? = object?[key] { return s }
            return nil
        }
        func object(_ object: JSONObject?, _ key: String) -> JSONObject? {
            if case .object(let o)? = object?[key] { return o }
            return nil
        }
        switch op {
        case 0:
            let auth = object(d, "authentication")
            return .hello(challenge: string(auth, "challenge"), salt: string(auth, "salt"))
        case 2:
            return .identified
        case 5:
            guard let type = string(d, "eventType") else { return nil }
            return .event(type: type, data: object(d, "eventData"))
        case 7:
            guard let id = string(d, "requestId"), let status = object(d, "requestStatus"),
                  case .number(let code)? = status["code"] else { return nil }
            return .response(requestID: id, code: Int(code), comment: string(status, "comment"), data: object(d, "responseData"))
        default:
            return nil
        }
    }

    /// `Identify`, with the answer to the challenge when there is one.
    static func identify(password: String?, challenge: String?, salt: String?) -> String {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.field("op", integer: 1)
        w.key("d")
        w.beginObject()
        w.field("rpcVersion", integer: rpcVersion)
        if let challenge, let salt {
            w.field("authentication", authentication(password: password ?? "", salt: salt, challenge: challenge))
        }
        w.field("eventSubscriptions", integer: outputsEvents)
        w.endObject()
        w.endObject()
        return w.text
    }

    /// `base64(sha256(base64(sha256(password + salt)) + challenge))`.
    static func authentication(password: String, salt: String, challenge: String) -> String {
        let secret = Data(SHA256.digest(Array((password + salt).utf8))).base64EncodedString()
        return Data(SHA256.digest(Array((secret + challenge).utf8))).base64EncodedString()
    }

    /// A `Request`; `captionText` is the one field the feeder sends.
    static func request(_ type: String, id: String, captionText: String? = nil) -> String {
        var w = JSONWriter(capacity: 128)
        w.beginObject()
        w.field("op", integer: 6)
        w.key("d")
        w.beginObject()
        w.field("requestType", type)
        w.field("requestId", id)
        if let captionText {
            w.key("requestData")
            w.beginObject()
            w.field("captionText", captionText)
            w.endObject()
        }
        w.endObject()
        w.endObject()
        return w.text
    }
}
