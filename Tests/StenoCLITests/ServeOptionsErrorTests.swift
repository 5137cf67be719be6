import Testing
@testable import steno

/// ServeOptionsTests (its helpers are in ServeOptionsTests.swift): usage errors and what they say.
extension ServeOptionsTests {
    @Test func badNumbers() {
        #expect(problem(["--port", "abc"]) == .invalidValue(
            source: "--port", value: "abc", expected: "a whole number from 0 to 65535"))
        #expect(problem(["--port", "-1"]) == .invalidValue(
            source: "--port", value: "-1", expected: "a whole number from 0 to 65535 (not negative)"))
        #expect(failure(["--port", "65536"]) != nil)
        #expect(failure(["--port", "99999999999999999999999"]) != nil)
        #expect(failure(["--port", "8080x"]) != nil)
        #expect(failure(["--port", "+80"]) != nil)
        #expect(failure(["--port", " 80"]) != nil)
        #expect(failure(["--max-sessions", "0"]) != nil)
        #expect(failure(["--workers", "0"]) != nil)
        #expect(failure(["--workers", "1000"]) != nil)
        #expect(failure(["--max-frame-bytes", "10"]) != nil)
        #expect(failure(["--outbound-bytes", "-5"]) != nil)
    }

    @Test func badSeconds() {
        #expect(problem(["--buffer-seconds", "-2"]) == .invalidValue(
            source: "--buffer-seconds", value: "-2",
            expected: "seconds from 0.1 to 3600, such as 30 or 2.5 (not negative)"))
        for bad in ["0", "abc", "1e3", "nan", "inf", "0x10", "1.2.3", ".", "", "5s", "--"] {
            #expect(failure(["--buffer-seconds=\(bad)"]) != nil, "accepted \(bad)")
        }
        #expect(failure(["--idle-timeout", "-1"]) != nil)
        #expect(failure(["--max-session-seconds", "-0.5"]) != nil)
        #expect(failure(["--drain-timeout", "99999"]) != nil)
        #expect((try? parse(["--buffer-seconds", ".5"]))?.limits.bufferSeconds == 0.5)
        #expect((try? parse(["--buffer-seconds", "3."]))?.limits.bufferSeconds == 3)
    }

    @Test func environmentErrorsNameTheVariable() {
        let error = failure([], ["STENO_PORT": "abc"])
        #expect(error?.problem == .invalidValue(
            source: "STENO_PORT (environment)", value: "abc", expected: "a whole number from 0 to 65535"))
        #expect(error?.description
            == "invalid value 'abc' for STENO_PORT (environment): expected a whole number from 0 to 65535")
        #expect(failure([], ["STENO_TOKENS": "good,b@d token"]) != nil)
        // A bad variable is ignored when the flag overrides it.
        #expect(failure(["--port", "1"], ["STENO_PORT": "abc"]) == nil)
    }

    @Test func missingValues() {
        #expect(problem(["--port"]) == .missingValue(option: "--port"))
        #expect(problem(["--port", "--host", "x"]) == .missingValue(option: "--port"))
        #expect(problem(["--token"]) == .missingValue(option: "--token"))
        #expect(failure(["--port"])?.description == "--port needs a value")
        // An explicitly empty value is a value, and a bad one.
        #expect(problem(["--model="]) == .invalidValue(source: "--model", value: "", expected: "a path"))
        #expect(failure(["--host", ""]) != nil)
    }

    @Test func unknownFlagsAndStrayArguments() {
        #expect(problem(["--prot", "1"]) == .unknownOption("--prot", suggestion: "--port"))
        #expect(failure(["--prot", "1"])?.description
            == "unknown option --prot (did you mean --port?); see steno serve --help")
        #expect(problem(["--max-session", "1"]) == .unknownOption("--max-session", suggestion: "--max-sessions"))
        #expect(problem(["--frobnicate"]) == .unknownOption("--frobnicate", suggestion: nil))
        #expect(problem(["-p", "80"]) == .unknownOption("-p", suggestion: nil))
        #expect(problem(["--"]) == .unknownOption("--", suggestion: nil))
        #expect(problem(["--hel"]) == .unknownOption("--hel", suggestion: "--help"))
        #expect(problem(["serve"]) == .unexpectedArgument("serve"))
        #expect(problem(["-"]) == .unexpectedArgument("-"))
        #expect(problem(["--port", "80", "extra"]) == .unexpectedArgument("extra"))
        #expect(failure(["extra"])?.description == "unexpected argument 'extra'; see steno serve --help")
    }

    @Test func tlsNeedsBothFiles() {
        let certificateWithoutKey = UsageError.Problem.requires(
            option: "--cert", other: "--key", reason: "TLS needs the certificate and its private key")
        #expect(problem(["--cert", "/c.pem"]) == certificateWithoutKey)
        #expect(problem(["--key", "/k.pem"]) == .requires(
            option: "--key", other: "--cert", reason: "TLS needs the certificate and its private key"))
        #expect(problem([], ["STENO_CERT": "/c.pem"]) == certificateWithoutKey)
        #expect(failure(["--cert", "/c.pem"])?.description
            == "--cert needs --key as well: TLS needs the certificate and its private key")
    }

    @Test func badTokensOriginsAndLevels() {
        #expect(failure(["--token", "has space"]) != nil)
        #expect(failure(["--token", "a,b"]) != nil)
        #expect(failure(["--token", "tëst"]) != nil)
        #expect(failure(["--token="]) != nil)
        #expect(failure(["--allowed-origin", "example.com"]) != nil)
        #expect(failure(["--allowed-origin", "https://example.com/"]) != nil)
        #expect(failure(["--allowed-origin", "https://"]) != nil)
        #expect(failure(["--allowed-origin", "https://a.example/path"]) != nil)
        #expect(problem(["--log-level", "loud"]) == .invalidValue(
            source: "--log-level", value: "loud", expected: "one of error, warning, info, debug, trace"))
        #expect(failure(["--host", "a b"]) != nil)
    }
}
