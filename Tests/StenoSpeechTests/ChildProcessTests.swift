import Foundation
import StenoSystem
import Testing

/// `runChild`, with which the server runs festival for a session's unknown words: the child
/// starts with clean signals whatever this process ignores or blocks (Foundation's `Process`
/// passed on ignored ones, so that `steno serve`'s festival could not be stopped with SIGTERM),
/// and one that outlives its deadline is killed.
@Suite struct ChildProcessTests {
    @Test func theChildStartsWithNoSignalIgnoredOrBlocked() throws {
        // The test runner itself ignores SIGPIPE and its threads block some signals.
        let run = try runChild("/bin/grep", ["-E", "^Sig(Blk|Ign):", "/proc/self/status"])
        #expect(run.status == 0)
        let lines = run.stdout.split(separator: "\n")
        #expect(lines.count == 2, "\(run.stdout)")
        for line in lines {
            // Signals 1-31 (bit n-1 for signal n); 32 and 33 are glibc's own, which it keeps.
            let mask = UInt64(line.split(separator: "\t").last ?? "", radix: 16)
            #expect(mask.map { $0 & 0x7fff_ffff } == 0, "\(line)")
        }
    }

    @Test func oneStillRunningAtItsDeadlineIsKilledAndWhatItWroteIsKept() throws {
        // It ignores SIGTERM itself: only SIGKILL stops it.
        let run = try runChild("/bin/sh", ["-c", "trap '' TERM; echo started; exec sleep 60"], timeout: 1)
        #expect(run.timedOut)
        #expect(run.status == 128 + SIGKILL)
        #expect(run.stdout == "started\n")
    }

    @Test func bothStreamsAreReadToTheirEnd() throws {
        // More than a pipe holds on each, so that a runner reading one stream at a time would stall.
        let run = try runChild("/bin/sh", ["-c", "head -c 200000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero | tr '\\0' b >&2; exit 3"],
                               stderr: true)
        #expect(run.status == 3 && !run.timedOut)
        #expect(run.stdout.count == 200_000 && run.stdout.allSatisfy { $0 == "a" })
        #expect(run.stderr.count == 200_000 && run.stderr.allSatisfy { $0 == "b" })
    }

    /// `.inherit` gives the child this process's own stream, not a file opened by name (opening
    /// /dev/stderr fails where it is a socket, as under systemd's journal).
    @Test func anInheritedStreamIsThisProcesssOwn() throws {
        let child = try spawnChild("/bin/readlink", ["/proc/self/fd/2"], stdout: .pipe, stderr: .inherit)
        let read = FileHandle(fileDescriptor: child.stdout!, closeOnDealloc: true)
        let said = String(decoding: read.readDataToEndOfFile(), as: UTF8.self)
        var status: Int32 = 0
        _ = waitpid(child.pid, &status, 0)
        let ours = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/2")
        #expect(said == ours + "\n", "the child's: \(said), ours: \(ours)")
    }
}
