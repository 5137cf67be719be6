import Foundation
import StenoServer
import StenoSpeech

/// What `steno serve`'s defaults depend on: the machine and where the program was built.
struct MachineDefaults: Sendable, Equatable {
    /// Cores and memory (the workers and recognizers follow from them).
    var hardware: ServerOptions.Hardware
    /// The model directory of Debian's `pocketsphinx-en-us` package.
    var modelPath: String
    /// The web client folder (see ``findWebRoot(currentDirectory:executablePath:sourceFile:isDirectory:)``).
    var webRoot: String
    /// The Whisper worker program (`scripts/whisper_worker.py`), found as the web root is, and
    /// the Python of the `.venv` beside its `scripts/` that `scripts/bootstrap.sh` makes.
    var whisperWorker: String
    var whisperPython: String
    /// The multilingual Whisper model scripts/bootstrap.sh assembles in that `.venv`.
    var whisperMultilingual: String

    /// Where the Whisper worker program is, from the package's root.
    static let whisperWorkerInPackage = "scripts/whisper_worker.py"

    init(cores: Int, physicalMemory: UInt64, modelPath: String, webRoot: String,
         whisperWorker: String = MachineDefaults.whisperWorkerInPackage) {
        self.hardware = ServerOptions.Hardware(cores: cores, physicalMemory: physicalMemory)
        self.modelPath = modelPath
        self.webRoot = webRoot
        self.whisperWorker = whisperWorker
        let root = Self.parent(of: Self.parent(of: whisperWorker))
        self.whisperPython = Self.join(root, ".venv/bin/python")
        self.whisperMultilingual = Self.join(root, ".venv/models/whisper-base")
    }

    /// The defaults of this machine and program (reads the file system only to find
    /// the web root).
    static func detect() -> MachineDefaults {
        let executable = Bundle.main.executableURL?.resolvingSymlinksInPath().path
        let webRoot = findWebRoot(
            currentDirectory: FileManager.default.currentDirectoryPath,
            executablePath: executable,
            sourceFile: #filePath,
            isDirectory: { path in
                var directory: ObjCBool = false
                return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
            })
        let worker = find(whisperWorkerInPackage, currentDirectory: FileManager.default.currentDirectoryPath,
                          executablePath: executable, sourceFile: #filePath,
                          exists: { FileManager.default.fileExists(atPath: $0) })
        let hardware = ServerOptions.Hardware.current
        return MachineDefaults(
            cores: hardware.cores, physicalMemory: hardware.physicalMemory,
            modelPath: PocketSphinxConfiguration.debianModelDirectory, webRoot: webRoot, whisperWorker: worker)
    }

    /// Where the web client is when `--web-root` is not given. The first folder named
    /// `web-client` that exists among:
    /// 1. the current directory (`swift run steno serve` from the package, or CI);
    /// 2. the executable's directory and each of its parents (a build under the
    ///    package's `.build/…/debug/`), and `share/steno/web-client` beside an
    ///    installed `bin/steno`;
    /// 3. the package the program was compiled from (found from this source file's
    ///    path at build time: `Sources/steno/Serve/` is three levels below the root).
    /// When none exists, `web-client` in the current directory, which the server then
    /// reports as missing.
    static func findWebRoot(
        currentDirectory: String, executablePath: String?, sourceFile: String,
        isDirectory: (String) -> Bool
    ) -> String {
        find("web-client", currentDirectory: currentDirectory, executablePath: executablePath, sourceFile: sourceFile,
             exists: isDirectory)
    }

    /// The first `relative` path that exists, looked for as the web root is (above).
    static func find(_ relative: String, currentDirectory: String, executablePath: String?, sourceFile: String,
                     exists: (String) -> Bool) -> String {
        var candidates = [join(currentDirectory, relative)]
        if let executablePath {
            var directory = parent(of: executablePath)
            for _ in 0..<6 {
                candidates.append(join(directory, relative))
                if parent(of: directory) == directory { break }
                directory = parent(of: directory)
            }
            let prefix = parent(of: parent(of: executablePath))
            candidates.append(join(prefix, "share/steno/" + relative))
        }
        let packageRoot = parent(of: parent(of: parent(of: parent(of: sourceFile))))
        candidates.append(join(packageRoot, relative))
        return candidates.first(where: exists) ?? candidates[0]
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
