import StenoCore
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// `steno send [INPUT] [options]`.
enum Send {
    static func run(_ arguments: [String]) -> Int32 {
        var options: SendOptions
        do throws(UsageError) {
            guard let parsed = try SendOptions.parse(arguments, environment: ProcessEnvironment.current()) else {
                StandardStreams.stdout(SendOptions.spec.helpText())
                return ExitCode.done
            }
            options = parsed
        } catch {
            StandardStreams.stderr("steno send: \(error)\n")
            return ExitCode.usage
        }
        if let path = options.phrasesFile {
            switch PhraseFile.read(path) {
            case .success(let phrases): options.phrases = phrases
            case .failure(let error):
                StandardStreams.stderr("steno send: --phrases \(path): \(error.message)\n")
                return ExitCode.usage
            }
        }
        if options.listDevices {
            let devices = AlsaInput.devices()
            if devices.isEmpty { StandardStreams.stderr("steno send: ALSA lists no capture devices\n") }
            for device in devices {
                StandardStreams.stdout(device.name + (device.description.isEmpty ? "" : "\t" + device.description) + "\n")
            }
            return ExitCode.done
        }
        let status = StatusLine()
        let log = Log(minimum: options.client.logLevel, sink: { line in status.log(line) })
        let input: any AudioInput
        let encoder: FrameEncoder
        do throws(StenoError) {
            switch options.input {
            case .file(let path): input = try StreamInput(path: path)
            case .standardInput(let raw): input = try StreamInput(raw: raw)
            case .device(let name, let rate, let channels): input = try AlsaInput(device: name, sampleRate: rate, channels: channels)
            }
            encoder = try FrameEncoder(input.format, encoding: options.encoding, suppressingSilence: options.suppressesSilence)
        } catch {
            StandardStreams.stderr("steno send: \(inputName(options.input)): \(error.message)\n")
            return ExitCode.inputFailed
        }
        let inbox = Inbox()
        let signals = InterruptSignals.install(into: inbox)
        defer { withExtendedLifetime(signals) {} }
        log.debug("sending \(inputName(options.input)) as \(encoder.format)"
                  + (encoder.suppressesSilence ? ", leaving silence out" : ""))
        return Sender(options: options, input: input, encoder: encoder, log: log, status: status, inbox: inbox).run()
    }

    static func inputName(_ input: SendOptions.Input) -> String {
        switch input {
        case .file(let path): path
        case .standardInput: "standard input"
        case .device(let name, _, _): "device \(name)"
        }
    }
}

/// `steno listen --channel NAME [options]`.
enum Listen {
    static func run(_ arguments: [String]) -> Int32 {
        let options: ListenOptions
        do throws(UsageError) {
            guard let parsed = try ListenOptions.parse(arguments, environment: ProcessEnvironment.current()) else {
                StandardStreams.stdout(ListenOptions.spec.helpText())
                return ExitCode.done
            }
            options = parsed
        } catch {
            StandardStreams.stderr("steno listen: \(error)\n")
            return ExitCode.usage
        }
        let status = StatusLine()
        let log = Log(minimum: options.client.logLevel, sink: { line in status.log(line) })
        let inbox = Inbox()
        let signals = InterruptSignals.install(into: inbox)
        defer { withExtendedLifetime(signals) {} }
        return Listener(options: options, log: log, status: status, inbox: inbox).run()
    }
}
