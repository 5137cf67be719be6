import StenoCore
import StenoSystem
import StenoTransport

/// `steno models [--server URL]`: the models a server has (`/v1/models`), one a line: its
/// name, engine, whether it is the default, and the languages it recognizes.
enum Models {
    static let spec = CommandSpec(
        command: "steno models",
        summary: """
            Prints the models a server has (its /v1/models), the default first: name, engine, and
            the languages each recognizes (BCP 47 primary subtags; `start`'s "language" chooses by them).
            """,
        flags: [ClientOptions.Flags.server, ClientOptions.Flags.token, ClientOptions.Flags.ca],
        epilogue: "Exit codes: 0 printed; 2 bad command line; 3 refused by the server; 4 the server could not be reached.")

    static func run(_ arguments: [String]) -> Int32 {
        var server = ClientOptions().server
        var token: String?
        var caFile: String?
        do throws(UsageError) {
            let given = try spec.parse(arguments, environment: ProcessEnvironment.current())
            if given.helpRequested {
                StandardStreams.stdout(spec.helpText())
                return ExitCode.done
            }
            if let value = given.single(ClientOptions.Flags.server) {
                guard let url = WebSocketURL(value.text) else {
                    throw given.error(.invalidValue(source: value.source, value: value.text, expected: "ws://HOST[:PORT] or wss://HOST[:PORT]"))
                }
                server = url
            }
            if let value = given.single(ClientOptions.Flags.token) { token = try given.token(value) }
            if let value = given.single(ClientOptions.Flags.ca) { caFile = try given.path(value) }
        } catch {
            StandardStreams.stderr("steno models: \(error)\n")
            return ExitCode.usage
        }
        var client = ClientOptions()
        client.server = server
        let route = client.url("/v1/models")
        let url = (route.secure ? "https://" : "http://") + route.hostHeader + route.path
        switch HTTPRequest.get(url, authorization: token.map { "Bearer " + $0 }, caFile: caFile) {
        case .failure(let failure):
            StandardStreams.stderr("steno models: cannot reach \(url): \(failure.message)\n")
            return ExitCode.unreachable
        case .success(let answer) where answer.status != 200:
            StandardStreams.stderr("steno models: \(url) answered HTTP \(answer.status)\n")
            return ExitCode.refused
        case .success(let answer):
            guard let lines = table(answer.body) else {
                StandardStreams.stderr("steno models: \(url) did not answer with a list of models\n")
                return ExitCode.refused
            }
            StandardStreams.stdout(lines)
            return ExitCode.done
        }
    }

    /// `/v1/models`'s JSON as lines: `NAME  ENGINE  [default]  LANGUAGES`.
    static func table(_ json: String) -> String? {
        guard case .object(let root)? = try? JSONParser(maxDepth: 8, maxBytes: 1 << 20).parse(json),
              case .array(let models)? = root["models"] else { return nil }
        var rows: [(String, String, String, String)] = []
        for case .object(let model) in models {
            func text(_ key: String) -> String { if case .string(let s)? = model[key] { s } else { "" } }
            var languages: [String] = []
            if case .array(let list)? = model["languages"] {
                languages = list.compactMap { if case .string(let s) = $0 { s } else { nil } }
            }
            let isDefault = model["default"] == .bool(true)
            let spoken = languages.count > 12 ? "\(languages.count) languages: " + languages.joined(separator: " ")
                                              : languages.joined(separator: " ")
            rows.append((text("name"), text("engine"), isDefault ? "default" : "", spoken))
        }
        let nameWidth = rows.map(\.0.count).max() ?? 0
        let engineWidth = rows.map(\.1.count).max() ?? 0
        return rows.map { name, engine, mark, languages in
            name.padding(toLength: nameWidth + 2, withPad: " ", startingAt: 0)
                + engine.padding(toLength: engineWidth + 2, withPad: " ", startingAt: 0)
                + mark.padding(toLength: 9, withPad: " ", startingAt: 0) + languages + "\n"
        }.joined()
    }
}
