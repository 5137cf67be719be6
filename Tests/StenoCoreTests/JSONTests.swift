import Testing
@testable import StenoCore

@Suite struct JSONReadingTests {
    let parser = JSONParser()

    @Test func parsesEveryKindOfValue() throws {
        let value = try parser.parse(#" {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d"}, "e": ""} "#)
        guard case .object(let object) = value else { Issue.record("not an object"); return }
        #expect(object.keys == ["a", "b", "e"])
        #expect(object["a"] == .array([.number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null]))
        #expect(object["b"] == .object(JSONObject(["c": .string("d")])))
        #expect(object["e"] == .string(""))
    }

    @Test func topLevelScalarsAreJSON() throws {
        #expect(try parser.parse("42") == .number(42))
        #expect(try parser.parse("\"x\"") == .string("x"))
        #expect(try parser.parse(" null ") == .null)
    }

    @Test func decodesEscapesAndUnicode() throws {
        let value = try parser.parse(#""a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20AC\ud83d\ude00 é😀""#)
        #expect(value == .string("a\"b\\c/d\u{8}\u{c}\n\r\tAé€😀 é😀"))
    }

    @Test(arguments: [
        ("", "unexpected end of input"),
        ("{", "unexpected end of input"),
        ("{\"a\":1,}", "expected a string key"),
        ("[1,]", "expected a value"),
        ("[1 2]", "expected ',' or ']'"),
        ("01", "leading zeros"),
        ("-", "expected a digit"),
        ("1.", "digit after the decimal point"),
        ("1e", "digit in the exponent"),
        (".5", "expected a value"),
        ("NaN", "expected a value"),
        ("Infinity", "expected a value"),
        ("tru", "unexpected character 't', expected a value"),
        ("nul", "unexpected character 'n', expected a value"),
        ("[nonsense]", "unexpected character 'n', expected a value"),
        ("{} x", "after the JSON value"),
        ("\"abc", "unterminated string"),
        ("\"a\u{1}b\"", "control character 0x01"),
        ("\"a\nb\"", "control character 0x0A"),
        ("\"\\x\"", "invalid escape"),
        ("\"\\u12\"", "invalid \\u escape"),
        ("\"\\ud800\"", "lone surrogate"),
        ("\"\\udc00\"", "lone surrogate"),
        ("\"\\ud800\\u0041\"", "lone surrogate"),
        ("{\"a\":1,\"a\":2}", "duplicate key \"a\""),
        ("1e400", "out of range"),
        ("-1e400", "out of range"),
        ("\u{FEFF}{}", "unexpected byte 0xEF"),
        ("// comment\n{}", "unexpected character '/'"),
        ("{'a':1}", "expected a string key"),
    ])
    func rejects(_ text: String, _ fragment: String) {
        #expect {
            _ = try parser.parse(text)
        } throws: { error in
            guard let error = error as? JSONError else { return false }
            return error.message.contains(fragment)
        }
    }

    @Test func rejectsInvalidUTF8InStrings() {
        for bytes: [UInt8] in [[0x22, 0xC3, 0x28, 0x22], [0x22, 0xFF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22]] {
            #expect(throws: JSONError.self) { _ = try parser.parse(bytes) }
        }
        // Also on the path that decodes escapes.
        #expect(throws: JSONError.self) { _ = try parser.parse([0x22, 0x5C, 0x6E, 0xC3, 0x22]) }
    }

    @Test func rejectsNonASCIIOutsideStrings() {
        #expect(throws: JSONError.self) { _ = try parser.parse([0x5B, 0xC3, 0xA9, 0x5D]) }
    }

    @Test func boundsDepth() throws {
        let limited = JSONParser(maxDepth: 4, maxBytes: 1 << 20)
        #expect(try limited.parse("[[[[1]]]]") == .array([.array([.array([.array([.number(1)])])])]))
        #expect {
            _ = try limited.parse("[[[[[1]]]]]")
        } throws: { ($0 as? JSONError)?.message == "nesting is deeper than 4 levels" }
        // Nesting far past any stack limit is refused cheaply, not by crashing.
        let deep = String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000)
        #expect(throws: JSONError.self) { _ = try JSONParser(maxDepth: 32, maxBytes: 1 << 20).parse(deep) }
        let deepObjects = String(repeating: "{\"a\":", count: 50_000)
        #expect(throws: JSONError.self) { _ = try JSONParser(maxDepth: 32, maxBytes: 1 << 20).parse(deepObjects) }
    }

    @Test func boundsSize() {
        let small = JSONParser(maxDepth: 8, maxBytes: 10)
        #expect(throws: JSONError.self) { _ = try small.parse("\"0123456789\"") }
        #expect((try? small.parse("\"0123456\"")) == .string("0123456"))
    }

    @Test func quotedInputIsClippedInErrors() {
        let key = String(repeating: "k", count: 10_000)
        #expect {
            _ = try parser.parse("{\"\(key)\":1,\"\(key)\":2}")
        } throws: { error in
            guard let message = (error as? JSONError)?.message else { return false }
            return message.count < 100 && message.hasPrefix("duplicate key \"kkk")
        }
    }

    @Test func errorsSayWhere() {
        #expect {
            _ = try parser.parse("[1, 2, x]")
        } throws: { ($0 as? JSONError)?.description == "unexpected character 'x', expected a value (at byte 7)" }
    }

    @Test func garbageNeverTraps() {
        // A deterministic pseudo-random walk over bytes JSON cares about.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let alphabet = Array("{}[]\",:0123456789-+.eEtrufalsn \\u\u{7f}é".utf8) + [0x00, 0x0A, 0xFF, 0xC3]
        var parsed = 0
        var refused = 0
        for _ in 0..<3000 {
            var bytes: [UInt8] = []
            let length = Int(state % 40)
            for _ in 0..<length {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                bytes.append(alphabet[Int((state >> 33) % UInt64(alphabet.count))])
            }
            state = state &* 6364136223846793005 &+ 1442695040888963407
            // Either a value that survives writing and reading again, or an error that points
            // inside the input; a client message is either parsed or refused with a code.
            do {
                let value = try parser.parse(bytes)
                var writer = JSONWriter()
                writer.value(value)
                #expect(try parser.parse(writer.bytes) == value, "round trip of \(bytes)")
                parsed += 1
            } catch {
                // The parser throws JSONError alone (typed throws): its offset is inside the input.
                #expect((0...bytes.count).contains(error.offset), "\(error) for \(bytes.count) bytes")
                refused += 1
            }
            do {
                _ = try ClientMessage.parse(utf8: bytes)
            } catch {
                #expect(!error.message.isEmpty)
            }
        }
        // The walk reaches both outcomes (a change of generator that stops it should be noticed).
        #expect(parsed > 0 && refused > 0, "parsed \(parsed), refused \(refused)")
    }
}

@Suite struct JSONWritingTests {
    func written(_ body: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter()
        body(&writer)
        return writer.text
    }

    @Test(arguments: [
        (1.2, "1.2"), (1.2000000000000002, "1.2"), (12.345, "12.345"), (0.0, "0"), (3.0, "3"),
        (0.1 + 0.2, "0.3"), (12.3449, "12.345"), (12.3444, "12.344"), (0.0005, "0.001"), (-1.5, "-1.5"),
        (-0.0001, "0"), (59.999, "59.999"), (59.9996, "60"), (3600.01, "3600.01"), (1e13, "10000000000000"),
        (Double.nan, "0"), (Double.infinity, "0"),
    ])
    func secondsHaveMillisecondPrecision(_ value: Double, _ expected: String) {
        #expect(written { $0.seconds(value) } == expected)
    }

    @Test func confidencesHaveThreeDecimalsAtMost() {
        #expect(written { $0.decimal(0.93, places: 3) } == "0.93")
        #expect(written { $0.decimal(0.9254, places: 3) } == "0.925")
        #expect(written { $0.decimal(1, places: 3) } == "1")
        #expect(written { $0.decimal(0.12345, places: 2) } == "0.12")
    }

    @Test func escapesStrings() {
        #expect(written { $0.string("a\"b\\c\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}") }
            == #""a\"b\\c\n\r\t\b\f\u0000\u001f\u007f""#)
        #expect(written { $0.string("é€😀 /") } == "\"é€😀 /\"")
        #expect(written { $0.string("\u{2028}\u{2029}") } == #""\u2028\u2029""#)
    }

    @Test func writesStructuresWithCommas() {
        let text = written { w in
            w.beginObject()
            w.field("a", integer: 1)
            w.key("b")
            w.beginArray()
            w.integer(-2)
            w.bool(true)
            w.null()
            w.beginObject()
            w.endObject()
            w.endArray()
            w.field("c", "x")
            w.endObject()
        }
        #expect(text == #"{"a":1,"b":[-2,true,null,{}],"c":"x"}"#)
    }

    @Test func roundTrips() throws {
        let source = #"{"type":"start","n":[1,2.5,-3,1e+20],"s":"\"é\n","o":{"x":null,"y":false}}"#
        let value = try JSONParser().parse(source)
        #expect(try JSONParser().parse(value.jsonText) == value)
        #expect(value.jsonText == source)
    }
}
