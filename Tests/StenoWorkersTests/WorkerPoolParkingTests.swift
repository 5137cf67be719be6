import Dispatch
import Foundation
import Synchronization
import Testing
@testable import StenoWorkers
import StenoSystem

/// WorkerPoolTests: a parked lane holds its jobs until unparked.
extension WorkerPoolTests {
    @Test func aParkedLaneHoldsItsJobsUntilUnparkedAndOtherLanesGoOn() {
        let pool = WorkerPool(workers: 1)
        let parked = pool.makeLane(label: "parked")
        let other = pool.makeLane(label: "other")
        let log = Log<String>()
        let parkedNow = DispatchSemaphore(value: 0)
        parked.submit {
            log.append("a1")
            parked.park()
            parkedNow.signal()
        }
        parked.submit { log.append("a2") }
        #expect(waited(parkedNow))
        let otherDone = DispatchSemaphore(value: 0)
        other.submit {
            log.append("b")
            otherDone.signal()
        }
        #expect(waited(otherDone))
        #expect(parked.isParked)
        #expect(log.all == ["a1", "b"], "a2 waits, the thread served the other lane")
        let resumed = DispatchSemaphore(value: 0)
        parked.submit {
            log.append("a3")
            resumed.signal()
        }
        #expect(parked.unpark { log.append("unparked") })
        #expect(waited(resumed))
        #expect(log.all == ["a1", "b", "unparked", "a2", "a3"], "the unpark's job first, then the rest in order")
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
    }

    @Test func anUnparkBeforeItsParkIsNotLost() {
        let pool = WorkerPool(workers: 2)
        let lane = pool.makeLane(label: "race")
        let log = Log<String>()
        let done = DispatchSemaphore(value: 0)
        lane.submit {
            // The wake-up comes while the job is still deciding to park.
            lane.unpark { log.append("woken") }
            lane.park()
            log.append("job")
        }
        lane.submit {
            log.append("next")
            done.signal()
        }
        #expect(waited(done))
        #expect(log.all == ["job", "woken", "next"])
        #expect(!lane.isParked)
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
    }

    @Test func closingAParkedLaneRunsItsFinalJob() {
        let pool = WorkerPool(workers: 1)
        let lane = pool.makeLane(label: "closing")
        let log = Log<String>()
        let parkedNow = DispatchSemaphore(value: 0)
        lane.submit {
            lane.park()
            parkedNow.signal()
        }
        lane.submit { log.append("dropped") }
        #expect(waited(parkedNow))
        let final = DispatchSemaphore(value: 0)
        lane.close(.cancel) {
            log.append("final")
            final.signal()
        }
        #expect(waited(final))
        #expect(log.all == ["final"])
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
    }
}
