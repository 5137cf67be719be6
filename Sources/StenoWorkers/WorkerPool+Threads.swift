// How the pool's threads run: each waits for a lane on the ready queue of its kind, runs a
// slice of that lane's jobs (timing the compute ones for the lane's and the pool's meters),
// and puts the lane back or lets it go; and how threads are woken, and told to exit.

import Dispatch
import Foundation
import StenoSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension WorkerPool {
    // MARK: Threads

    func startThread(kind: JobKind, name: String) {
        threadsExited.enter()
        let thread = Thread { [self] in
            // Set from inside (see `nameCurrentThread`).
            nameCurrentThread(name)
            self.threadMain(kind: kind)
        }
        thread.start()
    }

    private func threadMain(kind: JobKind) {
        let me = currentThreadID()
        state.withLock { $0.threads[me] = kind }
        let ready = semaphore(kind)
        while true {
            ready.wait()
            // Every push onto a ready queue is paired with one signal, so a signal finds
            // a lane, except the exit signals, which are sent only when no lane is left.
            let picked: Int? = state.withLock { s in
                guard let id = s[ready: kind].popFirst() else { return nil }
                s.busy(kind, +1)
                return id
            }
            guard let id = picked else { break }
            runSlice(lane: id, kind: kind, thread: me)
        }
        state.withLock { s in
            s.threads[me] = nil
            s.liveThreads -= 1
        }
        threadsExited.leave()
    }

    /// Runs jobs of one lane until its slice is used up, it has nothing left, or its next
    /// job is for the other kind of thread.
    @discardableResult
    func runSlice(lane id: Int, kind: JobKind, thread me: UInt) -> Int {
        let clock = ContinuousClock()
        let began = clock.now
        var ran = 0
        while true {
            let withinSlice = ran < sliceJobs && (ran == 0 || began.duration(to: clock.now) < sliceDuration)
            let step: SliceStep = state.withLock { s in
                if ran > 0 {
                    s.completed += 1
                    s.lanes[id]?.runner = 0
                }
                return s.nextStep(lane: id, kind: kind, withinSlice: withinSlice, thread: me)
            }
            switch step {
            case .run(let job, let laneMeter):
                guard job.kind == .compute else {
                    job.body()
                    ran += 1
                    continue
                }
                let startedAt = clock.now
                let cpuBefore = threadCPUSeconds()
                job.body()
                let busy = Self.seconds(startedAt.duration(to: clock.now))
                let cpu = max(0, threadCPUSeconds() - cpuBefore)
                laneMeter?.add(busy: busy, cpu: cpu)
                meter.add(busy: busy, cpu: cpu)
                ran += 1
            case .yielded(let kind):
                wake(kind)
                return ran
            case .finished(let exit):
                if exit { signalExit() }
                return ran
            }
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    private func semaphore(_ kind: JobKind) -> DispatchSemaphore {
        switch kind {
        case .compute: return computeReady
        case .preparation: return preparationReady
        }
    }

    func wake(_ kind: JobKind) {
        semaphore(kind).signal()
    }

    /// One signal per thread: each finds the ready queues empty and exits.
    func signalExit() {
        for _ in 0..<workerCount { computeReady.signal() }
        for _ in 0..<preparerCount { preparationReady.signal() }
    }
}

/// The CPU time of the calling thread, in seconds (0 where the clock is missing).
private func threadCPUSeconds() -> Double {
    var time = timespec()
    guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
