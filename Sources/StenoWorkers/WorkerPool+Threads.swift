// How the pool's threads run: each waits for a lane on the ready queue, runs a slice of
// that lane's jobs (timing them for the lane's and the pool's meters),
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

    func startThread(name: String) {
        threadsExited.enter()
        let thread = Thread { [self] in
            // Set from inside (see `nameCurrentThread`).
            nameCurrentThread(name)
            self.threadMain()
        }
        thread.start()
    }

    private func threadMain() {
        let me = currentThreadID()
        state.withLock { _ = $0.threads.insert(me) }
        while true {
            ready.wait()
            // Every push onto the ready queue is paired with one signal, so a signal finds
            // a lane, except the exit signals, which are sent only when no lane is left.
            let picked: Int? = state.withLock { s in
                guard let id = s.ready.popFirst() else { return nil }
                s.busy += 1
                return id
            }
            guard let id = picked else { break }
            runSlice(lane: id, thread: me)
        }
        state.withLock { s in
            s.threads.remove(me)
            s.liveThreads -= 1
        }
        threadsExited.leave()
    }

    /// Runs jobs of one lane until its slice is used up or it has nothing left.
    @discardableResult
    func runSlice(lane id: Int, thread me: UInt) -> Int {
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
                return s.nextStep(lane: id, withinSlice: withinSlice, thread: me)
            }
            switch step {
            case .run(let job, let laneMeter):
                let startedAt = clock.now
                let cpuBefore = threadCPUSeconds()
                job.body()
                let busy = Self.seconds(startedAt.duration(to: clock.now))
                let cpu = max(0, threadCPUSeconds() - cpuBefore)
                laneMeter.add(busy: busy, cpu: cpu)
                meter.add(busy: busy, cpu: cpu)
                ran += 1
            case .yielded:
                wake()
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

    func wake() {
        ready.signal()
    }

    /// One signal per thread: each finds the ready queue empty and exits.
    func signalExit() {
        for _ in 0..<workerCount { ready.signal() }
    }
}

/// The CPU time of the calling thread, in seconds (0 where the clock is missing).
private func threadCPUSeconds() -> Double {
    var time = timespec()
    guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
