import Foundation
import StenoCore
import StenoSpeech
import StenoSystem
import Testing
@testable import StenoWhisper

/// A final whose prompt holds earlier finals tells the worker what to hear it with instead if it
/// comes out unsure (`"unsurePrompt"`: the phrases alone, or none). A scripted worker says in its
/// text what it was told; the worker's own rule, with the real model on a clip that loses its way,
/// is checked by Tests/whisper/test_worker.py. The detector and the recognizer are the real ones.
@Suite struct UnsurePromptTests {
    static let script = """
        import json, os, struct, sys
        source, out = os.fdopen(3, "rb"), os.fdopen(4, "wb")
        def send(kind, ident, body):
            data = json.dumps(body).encode()
            rest = struct.pack("<BQI", kind, ident, len(data)) + data
            out.write(struct.pack("<I", len(rest)) + rest)
            out.flush()
        send(0, 0, {"ready": True, "model": "scripted", "path": "/nowhere", "ctranslate2": "0",
                    "multilingual": False, "languages": ["en"]})
        while True:
            head = source.read(4)
            if len(head) < 4:
                break
            rest = source.read(struct.unpack("<I", head)[0])
            kind, ident, length = struct.unpack_from("<BQI", rest, 0)
            if kind != 1:
                continue
            options = json.loads(rest[13:13 + length])
            if "unsurePrompt" not in options:
                said = "Sure."
            elif options["unsurePrompt"] is None:
                said = "Unsure alone."
            else:
                said = "Unsure with " + options["unsurePrompt"]
            words = [[w, 0.1 + 0.3 * i, 0.35 + 0.3 * i, 0.9] for i, w in enumerate(said.split())]
            send(2, ident, {"text": said, "words": words, "noSpeech": 0.01, "logprob": -0.2, "dropped": None,
                            "window": 1000, "seconds": 0.001, "language": "en"})
        """

    static let worker = Result { () throws -> WhisperWorker in
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-unsure-\(getpid()).py").path
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return try WhisperWorker(options: .init(python: WorkerPaths.python, script: path, events: .silent), timeout: 30)
    }

    /// The first final has no earlier finals to leave out; the next ones do, and keep the phrases.
    @Test func aFinalAfterOthersSaysWhatToHearItWithIfUnsure() throws {
        let sentence = try WorkerPaths.sentence("0930")
        let twice = NotSpeech.silence(0.5) + sentence + NotSpeech.silence(1.5) + sentence + NotSpeech.silence(1)
        for (phrases, unsure) in [([String](), "Unsure alone."), (["Marianne"], "Unsure with Marianne.")] {
            let vocabulary = phrases.isEmpty ? nil : try Vocabulary(phrases: phrases)
            let run = try RecognizerRun(options: RecognizerOptions(volatileResults: false, vocabulary: vocabulary),
                                        worker: try Self.worker.get())
            try run.feed(twice, untilIdle: true)
            try run.finish()
            let texts = run.finals.map(\.text)
            #expect(texts.count == 2 && texts.first == "Sure." && texts.last == unsure, "\(texts)")
        }
    }
}
