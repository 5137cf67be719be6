import Dispatch
import Foundation
import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// `steno serve`: runs the server until SIGTERM or SIGINT, then drains (finalize every session,
/// deliver its finals, close with 1001) and exits 0.
enum Serve {
    /// Each pocketsphinx model's configuration, as `steno serve` loads them
    /// (`PocketSphinxProvider.configurations`; ServeOptionsSettingsTests reads them here).
    static func modelConfigurations(_ options: ServerOptions) throws(StenoError) -> [PocketSphinxConfiguration] {
        try PocketSphinxProvider.configurations(options)
    }

    static func run(_ arguments: [String]) -> Int32 {
        let machine = MachineDefaults.detect()
        let parsed: ServerOptions?
        do throws(UsageError) {
            parsed = try ServeOptions.parse(arguments, environment: ProcessEnvironment.current(), machine: machine)
        } catch {
            StandardStreams.stderr("steno serve: \(error)\n\nsee steno serve --help\n")
            return 2
        }
        guard let options = parsed else {
            StandardStreams.stdout(ServeOptions.spec(machine).helpText())
            return 0
        }

        let log = Log(minimum: options.logLevel)
        let engine: any SpeechEngine
        do throws(StenoError) {
            engine = try EngineRegistry.standard.load(options, log: log)
        } catch {
            StandardStreams.stderr("steno serve: cannot load the speech model: \(error.message)\n")
            return 1
        }

        // The drain runs on the main thread, woken by the signal sources.
        let stop = DispatchSemaphore(value: 0)
        let sources = InterruptSignals.install { _ in stop.signal() }

        let server = StenoServer(options: options, engine: engine, log: log)
        let port: Int
        do {
            port = try server.start()
        } catch {
            StandardStreams.stderr("steno serve: cannot listen on \(options.host):\(options.port): \(error)\n")
            return 1
        }
        let scheme = options.tls == nil ? "http" : "https"
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        StandardStreams.stdout("steno \(StenoVersion.string) listening on \(scheme)://\(host):\(port)\n")

        stop.wait()
        let drainSeconds = options.drainTimeout.inSeconds
        log.info("signal received: draining (at most \(drainSeconds) s)")
        // A second signal while draining stops at once.
        DispatchQueue.global().async {
            stop.wait()
            log.warning("second signal: stopping now")
            exit(1)
        }
        let clean = server.drain(timeout: drainSeconds)
        log.info(clean ? "drained: every session finished" : "drain timeout: some sessions were cut short")
        withExtendedLifetime(sources) {}
        return 0
    }
}
