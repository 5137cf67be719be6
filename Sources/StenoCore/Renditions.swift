/// The captions a broadcast carries, one rendition per language (docs/protocol.md, "A channel's
/// languages"): the publisher's own, and for a translated session the original speech beside
/// them (each translated final carries its `original`). Viewers choose one with `language`.
public struct Renditions: Sendable, Hashable {
    /// The language of the publisher's own captions: the translation's, the language the
    /// session names, or its model's; nil when it is found as the session goes (`auto`, lanes).
    public var captions: String?
    /// A translated session's original: its language when the session names one, "" when it is
    /// found as it goes; nil: the broadcast carries no original.
    public var original: String?

    /// What a viewer asks for to follow the original whatever its language.
    public static let originalName = "original"

    public init(captions: String? = nil, original: String? = nil) {
        self.captions = captions
        self.original = original
    }

    /// A session's renditions, from its `start` and the language of the model serving it.
    public init(request: StartRequest, modelLanguage: String?) {
        let plan = request.languagePlan
        let found = plan.map { $0.auto || !$0.lanes.isEmpty } ?? false || request.language == LanguageTag.auto
        let named = found ? nil : (request.language ?? modelLanguage).flatMap {
            $0 == LanguageTag.multilingual ? nil : LanguageTag.primary($0)
        }
        if let translate = plan?.translate {
            self.init(captions: translate, original: named ?? "")
        } else {
            self.init(captions: named)
        }
    }

    /// The rendition a viewer follows.
    public enum Choice: Sendable, Hashable {
        case captions, original
    }

    /// Which rendition a viewer asking for `language` follows (nil: the publisher's own); nil
    /// when this broadcast carries none in it.
    public func choose(_ language: String?) -> Choice? {
        guard let language else { return .captions }
        let asked = LanguageTag.primary(language)
        if let captions, asked == captions { return .captions }
        if let original, language == Self.originalName || (!original.isEmpty && asked == original) { return .original }
        return nil
    }

    /// What a viewer may ask for: the captions' language (when known), then the original's
    /// (its language, or "original").
    public var names: [String] {
        var names: [String] = []
        if let captions { names.append(captions) }
        if let original { names.append(original.isEmpty || original == captions ? Self.originalName : original) }
        return names
    }

    /// Whether `language` is something a viewer may ask for at all: a well-formed tag or "original".
    public static func isValidChoice(_ language: String) -> Bool {
        language == originalName || LanguageTag.isWellFormed(language)
    }
}
