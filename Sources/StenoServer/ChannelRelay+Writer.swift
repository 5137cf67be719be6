// ChannelRelay's writer thread: the local broadcasts' entries written to their streams in
// order, each broadcast's lease taken first and renewed, a broadcast whose lease another
// instance holds kept waiting for it (or withdrawn, if that publisher is alive), Redis lost and
// found again.

import Foundation
import StenoCore
import StenoRedis
import StenoSystem

extension ChannelRelay {
    // MARK: - Writer

    func writerLoop() {
        var redis: RedisConnection?
        var lastRenewal = 0.0
        var down = false
        while !stopping.load(ordering: .relaxed) {
            if redis == nil {
                do {
                    redis = try RedisConnection(url)
                    outbox.withLock { o in for key in o.leases.keys { o.leases[key]?.held = false } }
                    if down { log.info("redis: publishing to \(url) again") }
                    down = false
                    isUp.store(true, ordering: .relaxed)
                } catch {
                    if !down {
                        let queued = outbox.withLock { $0.count }
                        log.warning("redis: cannot publish to \(url) (\(error)); captioning goes on here, "
                                    + "\(queued) events wait for it")
                    }
                    down = true
                    isUp.store(false, ordering: .relaxed)
                    _ = wake.wait(timeout: .now() + settings.retry)
                    continue
                }
            }
            guard let connection = redis else { continue }
            do throws(RedisError) {
                if try takeOver(connection) { lastRenewal = 0 }
                let now = SystemClock.now()
                if now - lastRenewal >= settings.leaseRenewal {
                    try renewLeases(connection)
                    lastRenewal = now
                }
                let wrote = try writeQueued(connection)
                if !wrote { _ = wake.wait(timeout: .now() + min(1, settings.leaseRenewal)) }
            } catch {
                log.warning("redis: lost the connection to \(url) (\(error)); captioning goes on here")
                down = true
                isUp.store(false, ordering: .relaxed)
                redis = nil
                lastRenewal = 0
            }
        }
    }

    /// Takes or keeps the lease of every live local broadcast; a broadcast whose lease another
    /// instance holds is withdrawn.
    private func renewLeases(_ redis: RedisConnection) throws(RedisError) {
        let leases = outbox.withLock { $0.leases }
        for (channel, lease) in leases {
            _ = try acquire(channel, lease, redis: redis)
        }
    }

    /// The takeovers asked for: a lease held by the session a local one goes on from, whose
    /// proof (the digest of its resume token) matches the token the talker gave, is set to the
    /// local session in one step, and that broadcast is over here (its viewers follow the new
    /// one as soon as it says it is live). True if any was taken.
    private func takeOver(_ redis: RedisConnection) throws(RedisError) -> Bool {
        let asked = outbox.withLock { o -> [Takeover] in
            defer { o.takeovers = [] }
            return o.takeovers
        }
        var any = false
        // Only another instance's lease: a session this instance still runs keeps its channel
        // (the new one is refused here as any second local publisher is).
        let script = "local v = redis.call('get', KEYS[1]) "
            + "if v and string.sub(v, -string.len(ARGV[1])) == ARGV[1] and string.sub(v, 1, string.len(ARGV[5])) ~= ARGV[5] "
            + "and redis.call('get', KEYS[2]) == ARGV[2] then "
            + "redis.call('set', KEYS[1], ARGV[3], 'PX', ARGV[4]) redis.call('del', KEYS[2]) return 1 end return 0"
        for takeover in asked {
            let reply = try redis.command(["EVAL", script, "2", Self.leaseKey(takeover.channel), Self.proofKey(takeover.channel),
                                           "/" + takeover.previous.session, SHA256.hex(takeover.previous.resumeToken),
                                           instance + "/" + takeover.session, String(Int(settings.lease * 1000)), instance + "/"])
            guard reply == .integer(1) else {
                log.info("redis: session \(takeover.session) continues \(takeover.previous.session), which does not hold channel "
                         + "\(takeover.channel) with that token (its lease is gone or another's): nothing taken over")
                continue
            }
            any = true
            outbox.withLock { _ = $0.takenOver.insert(takeover.channel + "\u{0}" + takeover.session) }
            log.info("redis: channel \(takeover.channel) taken over from session \(takeover.previous.session), "
                     + "whose talker goes on in session \(takeover.session)")
            hooks.withLock { $0 }?.hub.remoteGone(takeover.channel, session: takeover.previous.session)
        }
        return any
    }

    /// The lease of `channel` for `lease.session`: taken, or kept when it is ours already.
    /// False when another instance holds it: the broadcast waits for it to expire, and is
    /// withdrawn if it has not within a lease and a renewal.
    private func acquire(_ channel: String, _ lease: Lease, redis: RedisConnection) throws(RedisError) -> Bool {
        let key = Self.leaseKey(channel)
        let value = instance + "/" + lease.session
        let ms = String(Int(settings.lease * 1000))
        // Take it if nobody has it; lengthen it only if it is ours (the script runs in one step).
        let renew = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
        let replies = try redis.pipeline([
            ["SET", key, value, "NX", "PX", ms].map { Array($0.utf8) },
            ["EVAL", renew, "1", key, value, ms].map { Array($0.utf8) },
            ["GET", key].map { Array($0.utf8) },
        ])
        guard replies[1] == .integer(1) else {
            let now = SystemClock.now()
            let since = outbox.withLock { o -> Double? in
                guard o.leases[channel]?.session == lease.session else { return nil }
                if o.leases[channel]?.waitingSince == nil {
                    o.leases[channel]?.waitingSince = now
                    log.info("redis: channel \(channel) is held by \(replies[2].text ?? "?"); session \(lease.session) waits for it "
                             + "(a publisher that is gone lets it expire within \(JSONWriter.secondsText(settings.lease)) s)")
                }
                return o.leases[channel]?.waitingSince
            }
            if let since, now - since < settings.lease + settings.leaseRenewal { return false }
            withdraw(channel, session: lease.session, holder: replies[2].text)
            return false
        }
        outbox.withLock { o in
            if o.leases[channel]?.session == lease.session, o.leases[channel]?.waitingSince != nil {
                o.leases[channel]?.waitingSince = nil
                log.info("redis: channel \(channel) is session \(lease.session)'s now")
            }
        }
        // A lease a takeover set is new to its broadcast as one taken now is.
        let takenOver = outbox.withLock { $0.takenOver.remove(channel + "\u{0}" + lease.session) != nil }
        let taken = replies[0] == .simple("OK") || takenOver
        let proof = outbox.withLock { $0.proofs[lease.session] }
        let stream = Self.streamKey(channel)
        if taken && lease.held == false {
            // A new lease (a broadcast's first, or Redis lost it): say again that it is live, for
            // instances that come to it with nothing (a restarted Redis has no stream).
            let wasHeld = outbox.withLock { o -> Bool in
                let held = o.leases[channel]?.held ?? false
                o.leases[channel]?.held = true
                return held
            }
            if !wasHeld { try redis.command(xadd(stream, lease.live, session: lease.session)) }
        } else {
            outbox.withLock { $0.leases[channel]?.held = true }
        }
        var commands = [["EXPIRE", stream, String(settings.streamTTL)]]
        if let proof { commands.append(["SET", Self.proofKey(channel), proof, "PX", ms]) }
        _ = try redis.pipeline(commands.map { $0.map { Array($0.utf8) } })
        return true
    }

    private func withdraw(_ channel: String, session: String, holder: String?) {
        log.warning("redis: channel \(channel) has a publisher on another instance (\(holder ?? "?")); session \(session) is not published")
        outbox.withLock { o in
            if o.leases[channel]?.session == session { o.leases[channel] = nil }
            o.entries = o.entries[o.head...].filter { !($0.channel == channel && $0.session == session) }
            o.head = 0
        }
        guard let hooks = hooks.withLock({ $0 }) else { return }
        hooks.hub.withdraw(channel, session: session)
        hooks.conflict(session, channel)
    }

    private func xadd(_ stream: String, _ entry: RelayEntry, session: String, number: UInt64 = 0) -> [String] {
        ["XADD", stream, "MAXLEN", "~", String(settings.streamMaxLength), "*"]
            + entry.fields(instance: instance, session: session, number: number)
    }

    /// Writes up to 256 queued entries in one pipeline; false when there was nothing to write.
    private func writeQueued(_ redis: RedisConnection) throws(RedisError) -> Bool {
        // Entries of a broadcast that waits for its lease stay queued, in order, and are passed over.
        let (batch, dropped) = outbox.withLock { o -> ([Pending], Int) in
            var batch: [Pending] = []
            var index = o.head
            while index < o.entries.count && batch.count < 256 {
                if !o.waits(o.entries[index]) { batch.append(o.entries[index]) }
                index += 1
            }
            let dropped = o.dropped
            o.dropped = 0
            return (batch, dropped)
        }
        if dropped > 0 { log.warning("redis: \(dropped) channel events were dropped while Redis was away") }
        guard !batch.isEmpty else { return false }
        // Each broadcast's lease first (its `live` entry comes with it), in queue order.
        var commands: [[[UInt8]]] = []
        var leased: Set<String> = []
        var skipped: Set<String> = []
        var written: Set<UInt64> = []
        for pending in batch {
            let key = pending.channel + "\u{0}" + pending.session
            if skipped.contains(key) { continue }
            if case .live = pending.entry, !leased.contains(key) {
                if !commands.isEmpty { try flush(&commands, redis) }
                let lease = Lease(session: pending.session, live: pending.entry)
                if try !acquire(pending.channel, lease, redis: redis) { skipped.insert(key); continue }
                leased.insert(key)
                written.insert(pending.number)
                continue
            }
            written.insert(pending.number)
            let stream = Self.streamKey(pending.channel)
            commands.append(xadd(stream, pending.entry, session: pending.session, number: pending.number).map { Array($0.utf8) })
            if case .end = pending.entry {
                // The broadcast is over: its lease goes (if still ours), its stream expires later.
                outbox.withLock { o in
                    if o.leases[pending.channel]?.session == pending.session { o.leases[pending.channel] = nil }
                    o.proofs[pending.session] = nil
                    o.takenOver.remove(pending.channel + "\u{0}" + pending.session)
                }
                let release = "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[2]) "
                    + "return redis.call('del', KEYS[1]) else return 0 end"
                commands.append(["EVAL", release, "2", Self.leaseKey(pending.channel), Self.proofKey(pending.channel),
                                 instance + "/" + pending.session].map { Array($0.utf8) })
                commands.append(["EXPIRE", stream, String(settings.streamTTL)].map { Array($0.utf8) })
            }
        }
        if !commands.isEmpty { try flush(&commands, redis) }
        let through = batch[batch.count - 1].number
        outbox.withLock { o in
            // What was written goes; what waits stays, in order, at the head. Entries queued
            // meanwhile come after these; a withdrawal or a drop may have removed some.
            var kept: [Pending] = []
            while o.head < o.entries.count && o.entries[o.head].number <= through {
                let pending = o.entries[o.head]
                if !written.contains(pending.number) && o.leases[pending.channel]?.session == pending.session { kept.append(pending) }
                o.head += 1
            }
            o.head -= kept.count
            o.entries.replaceSubrange(o.head..<(o.head + kept.count), with: kept)
        }
        return !written.isEmpty
    }

    private func flush(_ commands: inout [[[UInt8]]], _ redis: RedisConnection) throws(RedisError) {
        let replies = try redis.pipeline(commands)
        for reply in replies {
            if case .error(let message) = reply { log.warning("redis: \(message)") }
        }
        commands.removeAll()
    }
}
