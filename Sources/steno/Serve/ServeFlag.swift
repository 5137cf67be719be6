import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem

/// One row of `steno serve`'s table of flags (`ServeOptions.Flags`): the flag (name, value,
/// help, default, variable) and how what it is given goes into the `ServerOptions`.
struct ServeFlag: Sendable {
    /// Puts what the command line or the environment gives for the flag into the options. It
    /// runs for every flag, given or not, in the table's order, so it may check an option
    /// read before it.
    typealias Read = @Sendable (ParsedCommandLine, Flag, inout ServerOptions) throws(UsageError) -> Void

    let flag: Flag
    let read: Read

    /// A flag read by `read` itself.
    init(_ flag: Flag, read: @escaping Read) {
        self.flag = flag
        self.read = read
    }

    /// A flag whose value (the last one given, else its variable's) is parsed into the
    /// option at `keyPath`; not given, the option keeps its default.
    init<Value>(_ flag: Flag, _ keyPath: WritableKeyPath<ServerOptions, Value> & Sendable, _ parser: ValueParser<Value>) {
        self.init(flag) { given, flag, options throws(UsageError) in
            if let value = given.single(flag) { options[keyPath: keyPath] = try parser.parse(given, value) }
        }
    }

    /// The same, parsed by `parse`.
    init<Value>(_ flag: Flag, _ keyPath: WritableKeyPath<ServerOptions, Value> & Sendable,
                parse: @escaping @Sendable (ParsedCommandLine, FlagValue) throws(UsageError) -> Value) {
        self.init(flag, keyPath, ValueParser(parse: parse))
    }

    /// The same for an option whose default is none (nil).
    init<Value>(_ flag: Flag, _ keyPath: WritableKeyPath<ServerOptions, Value?> & Sendable, _ parser: ValueParser<Value>) {
        self.init(flag) { given, flag, options throws(UsageError) in
            if let value = given.single(flag) { options[keyPath: keyPath] = try parser.parse(given, value) }
        }
    }

    /// A repeatable flag whose values (else its variable's list) are each parsed into the
    /// list at `keyPath`.
    init(_ flag: Flag, each keyPath: WritableKeyPath<ServerOptions, [String]> & Sendable, _ parser: ValueParser<String>) {
        self.init(flag) { given, flag, options throws(UsageError) in
            options[keyPath: keyPath] = try given.list(flag).map { (value) throws(UsageError) in try parser.parse(given, value) }
        }
    }
}

/// How a flag's value (as given, with where it came from) becomes an option's value, or a
/// usage error that says what was expected. The common ones are `ParsedCommandLine`'s typed values.
struct ValueParser<Value>: Sendable {
    let parse: @Sendable (ParsedCommandLine, FlagValue) throws(UsageError) -> Value
}

extension ValueParser where Value == Int {
    static func integer(_ range: ClosedRange<Int>) -> Self {
        Self { given, value throws(UsageError) in try given.integer(value, in: range) }
    }

    /// Whole megabytes in `range`, as bytes.
    static func megabytes(_ range: ClosedRange<Int>) -> Self {
        Self { given, value throws(UsageError) in try given.integer(value, in: range) << 20 }
    }
}

extension ValueParser where Value == Double {
    static func seconds(_ range: ClosedRange<Double>) -> Self {
        Self { given, value throws(UsageError) in try given.seconds(value, in: range) }
    }

    static var fraction: Self { Self { given, value throws(UsageError) in try given.fraction(value) } }
}

extension ValueParser where Value == String {
    static var path: Self { Self { given, value throws(UsageError) in try given.path(value) } }
    static var host: Self { Self { given, value throws(UsageError) in try given.host(value) } }
    static var token: Self { Self { given, value throws(UsageError) in try given.token(value) } }
    static var origin: Self { Self { given, value throws(UsageError) in try given.origin(value) } }
    static var ipAddress: Self { Self { given, value throws(UsageError) in try given.ipAddress(value) } }

    static func choice(_ choices: [String]) -> Self {
        Self { given, value throws(UsageError) in try given.choice(value, choices) }
    }
}

extension ValueParser where Value == [String] {
    static var decoderArguments: Self { Self { given, value throws(UsageError) in try given.decoderArguments(value) } }
}

extension ValueParser where Value == Endpointing {
    static var endpointing: Self { Self { given, value throws(UsageError) in try given.endpointing(value) } }
}

extension ValueParser where Value == LogLevel {
    static var logLevel: Self { Self { given, value throws(UsageError) in try given.logLevel(value) } }
}
