import Foundation
import StenoCore
import StenoSpeech
import StenoTestSupport
import Testing
@testable import StenoServer

/// Models, phrases and alternatives on a real server over a real socket.
@Suite(.serialized) struct ServerModelTests {
    /// A second model of the same files under another name, as `--model second=DIR` serves it.
    static let second: PocketSphinxEngine = {
        do throws(StenoError) {
            var configuration = PocketSphinxConfiguration(recognizers: 1)
            configuration.name = "second"
            return try PocketSphinxEngine(configuration: configuration)
        } catch {
            fatalError("the pocketsphinx model cannot be loaded: \(error.message)")
        }
    }()

    static func json(_ text: String) throws -> JSONObject {
        guard case .object(let object) = try JSONParser().parse(text) else {
            throw TestClientError.protocolError("not a JSON object: \(text)")
        }
        return object
    }

    /// `/v1/models` lists every model loaded, the default first, with the files it came from.
    @Test func modelsListsWhatWasLoaded() throws {
        let server = try LiveServer(engine: ModelSet([SharedEngine.engine, Self.second]))
        let response = try server.get("/v1/models")
        #expect(response.status == 200)
        let document = try Self.json(response.bodyText)
        guard case .array(let models)? = document["models"] else {
            Issue.record("no models array: \(response.bodyText)")
            return
        }
        let configuration = SharedEngine.engine.configuration
        var names: [String] = []
        for (index, value) in models.enumerated() {
            guard case .object(let model) = value else { continue }
            if case .string(let name)? = model["name"] { names.append(name) }
            #expect(model["language"] == .string("en-US"))
            #expect(model["sampleRate"] == .number(16000))
            #expect(model["default"] == .bool(index == 0))
            guard case .object(let loaded)? = model["loadedFrom"] else {
                Issue.record("no loadedFrom: \(model)")
                continue
            }
            #expect(loaded["acousticModel"] == .string(configuration.resolvedAcousticModel))
            #expect(loaded["languageModel"] == .string(configuration.resolvedLanguageModel))
            #expect(loaded["dictionary"] == .string(configuration.resolvedDictionary))
        }
        #expect(names == ["en-us", "second"])
    }

    /// `start` chooses a model by name and `ready.engine` says which runs; an unknown model is
    /// a non-fatal `bad_message` naming the ones there are, and a corrected `start` goes on.
    @Test func startChoosesTheModelAndReadySaysWhichRuns() throws {
        let server = try LiveServer(engine: ModelSet([SharedEngine.engine, Self.second]))
        let client = try server.connect()
        let input = TestInput.pcm16k()
        try client.send(StartMessage.text(input.format, extra: #""model":"third""#))
        let error = try client.waitFor("error")
        #expect(error.string("code") == "bad_message" && error.bool("fatal") == false)
        #expect(error.string("message")?.contains("en-us, second") == true, "\(error)")
        let ready = try client.start(input, extra: #""model":"second""#)
        guard case .object(let engine)? = ready.object["engine"] else {
            Issue.record("no engine in \(ready)")
            return
        }
        #expect(engine["model"] == .string("second"))
        try client.send(audio: input.messages, of: input)
        try client.end()
        #expect(client.closeCode == 1000)
        #expect(client.events.finals.map(\.text) == Reference.finals(input).map(\.text))
    }

    /// Phrases sent in `start` fix the words they name (Beckett's hard "ever tried" takes a
    /// boost: bench/README.md, "Phrases"); finals carry the alternatives asked for;
    /// a pronunciation with a phone the model lacks gets its non-fatal error before `ready`.
    @Test func phrasesAndAlternativesOverTheWire() throws {
        let server = try LiveServer()
        let input = TestInput.pcm16k()
        let client = try server.connect()
        try client.send(StartMessage.text(input.format, extra: #""phrases":["Steno"],"pronunciations":{"Steno":"S T EH N QX"}"#))
        let error = try client.waitFor("error")
        #expect(error.string("code") == "bad_message" && error.bool("fatal") == false)
        #expect(error.string("message")?.contains("\"QX\" is not a phone of this model") == true, "\(error)")
        try client.start(input, extra: #""phrases":["ever tried","ever failed","fail better"],"boost":4,"alternatives":3"#)
        try client.send(audio: input.messages, of: input)
        try client.end()
        #expect(client.closeCode == 1000)
        let text = client.events.finals.map(\.text).joined(separator: " | ")
        #expect(text.lowercased().hasPrefix("ever tried"), "\(text)")
        let finals = client.events.filter { $0.type == "final" }
        #expect(!finals.isEmpty)
        for final in finals {
            guard case .array(let alternatives)? = final.object["alternatives"], case .object(let first)? = alternatives.first else {
                Issue.record("no alternatives in \(final)")
                continue
            }
            #expect((1...3).contains(alternatives.count))
            #expect(first["text"] == final.object["text"])
            #expect(first["score"] == .number(0))
        }
    }
}
