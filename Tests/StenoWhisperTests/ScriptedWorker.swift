import Foundation
import StenoSystem
@testable import StenoWhisper

/// A worker that speaks the real one's framing (frames on descriptors 3 and 4, as the supervisor
/// starts it) and answers each request as `answer` says: Python defining `answer(options)`, which
/// returns the result's JSON. For the recognizer's side of a rule whose model side Tests/whisper
/// checks with the real model.
enum ScriptedWorker {
    static func start(name: String, multilingual: Bool, languages: [String], answer: String) throws -> WhisperWorker {
        let hello = #"{"ready": True, "model": "scripted", "path": "/nowhere", "ctranslate2": "0", "#
            + #""multilingual": \#(multilingual ? "True" : "False"), "languages": \#(languages)}"#
        let script = """
            import json, os, struct, sys
            source, out = os.fdopen(3, "rb"), os.fdopen(4, "wb")
            def send(kind, ident, body):
                data = json.dumps(body).encode()
                rest = struct.pack("<BQI", kind, ident, len(data)) + data
                out.write(struct.pack("<I", len(rest)) + rest)
                out.flush()
            \(answer)
            send(0, 0, \(hello))
            while True:
                head = source.read(4)
                if len(head) < 4:
                    break
                rest = source.read(struct.unpack("<I", head)[0])
                kind, ident, length = struct.unpack_from("<BQI", rest, 0)
                if kind == 1:
                    send(2, ident, answer(json.loads(rest[13:13 + length])))
            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-\(name)-\(getpid()).py").path
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return try WhisperWorker(options: .init(python: WorkerPaths.python, script: path, events: .silent), timeout: 30)
    }
}
