import Foundation
import StenoCore

/// What a CTranslate2 Whisper model folder says of its languages before a worker has loaded it
/// (a worker started on demand): `config.json`'s `lang_ids` are tokens of `vocabulary.json`, each
/// "<|xx|>" with Whisper's code of a language. An English-only model has none, or one.
enum WhisperModelFolder {
    /// Whisper's codes of the folder's languages (nil: it cannot be read).
    static func languages(at folder: String) -> [String]? {
        let parser = JSONParser(maxDepth: 8, maxBytes: 32 << 20)
        func read(_ name: String) -> JSONValue? {
            guard let data = FileManager.default.contents(atPath: folder + "/" + name) else { return nil }
            return try? parser.parse([UInt8](data))
        }
        guard case .object(let config)? = read("config.json") else { return nil }
        guard case .array(let ids)? = config["lang_ids"], ids.count > 1 else { return ["en"] }
        guard case .array(let vocabulary)? = read("vocabulary.json") else { return nil }
        var codes: [String] = []
        for case .number(let id) in ids {
            let index = Int(id)
            guard vocabulary.indices.contains(index), case .string(let token) = vocabulary[index],
                  token.hasPrefix("<|"), token.hasSuffix("|>") else { return nil }
            codes.append(String(token.dropFirst(2).dropLast(2)))
        }
        return codes
    }
}
