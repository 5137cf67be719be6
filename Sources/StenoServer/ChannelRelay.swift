import Foundation
import StenoCore
import StenoRedis
import StenoSystem
import Synchronization

/// Channels across instances, through Redis (`--redis`).
///
/// - **Publishing.** The hub hands every event of a local publisher to `enqueue` (under its
///   lock: an append to a bounded queue, nothing else), and the *writer* thread writes them in
///   order to the channel's stream `steno:channel:NAME` (`XADD … MAXLEN ~ N`). The stream expires
///   `streamTTL` after the last write or lease renewal, so a broadcast's entries outlive it by
///   that long and then go.
/// - **One publisher per channel across the cluster.** Before its first entry, a broadcast takes
///   the lease `steno:lease:NAME` (`SET NX PX`), renewed every `leaseRenewal`. When another
///   instance holds it, the broadcast is withdrawn here (`conflict`: the session is told, as a
///   second publisher on one instance is) and none of its entries are written.
/// - **Viewing.** The *reader* thread follows the stream of every channel in Redis (found by
///   `SCAN` every `discovery` seconds, and at once for a channel a viewer joins here), with
///   blocking `XREAD`s on its own connection, never on the lws thread, and plays other
///   instances' entries into the hub, which fans them out to its viewers and keeps the
///   backfill, channel list entry, caption files and HLS segments of the broadcast like a
///   local one; deliveries go through the transport's thread-safe queues and wake-up.
/// - **Redis away.** Publishing goes on; entries wait in the queue (the oldest dropped past
///   `maxQueued`) and are written when Redis is back, the lease and the `live` entry first.
///   Viewers of other instances' broadcasts get `relay` `down`, then `up` and what they missed
///   (the reader goes on from the last entry it read).
final class ChannelRelay: Sendable {
    struct Settings: Sendable {
        var lease: Double = 15
        var leaseRenewal: Double = 5
        var streamMaxLength = 10_000
        var streamTTL = 3600
        var maxQueued = 100_000
        var block: Double = 0.5
        var retry: Double = 0.5
        /// How often the reader looks for channels in Redis (`SCAN`): it follows all of them,
        /// so that any instance serves any channel's list entry, caption files and HLS; 0:
        /// only the channels with viewers here.
        var discovery: Double = 2
    }

    let url: RedisURL
    /// This process's name in the cluster (written in every entry it makes, so that its reader
    /// skips them and in its leases).
    let instance: String
    let settings: Settings
    private let log: Log
    /// Set once, before `start`.
    private let hooks = Locked<Hooks?>(nil)
    private let outbox = Locked(Outbox())
    private let wake = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let threadsDone = DispatchSemaphore(value: 0)
    private let isUp = Atomic<Bool>(true)

    struct Hooks: Sendable {
        let hub: ChannelHub
        /// A local session lost its channel to another instance's publisher.
        let conflict: @Sendable (_ session: String, _ channel: String) -> Void
    }

    private struct Pending {
        /// The order entries were queued in.
        let number: UInt64
        let channel: String
        let session: String
        let entry: RelayEntry
    }

    private struct Lease {
        let session: String
        let live: RelayEntry
        /// Taken (or confirmed) on the current connection.
        var held = false
    }

    private struct Outbox {
        var entries: [Pending] = []
        var head = 0
        var dropped = 0
        var nextNumber: UInt64 = 0
        /// Live local broadcasts by channel.
        var leases: [String: Lease] = [:]
        var count: Int { entries.count - head }
    }

    init(url: RedisURL, instance: String = ChannelRelay.makeInstanceName(), settings: Settings = Settings(), log: Log) {
        self.url = url
        self.instance = instance
        self.settings = settings
        self.log = log
    }

    static func makeInstanceName() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<10).map { _ in alphabet.randomElement()! })
    }

    static func streamKey(_ channel: String) -> String { "steno:channel:" + channel }
    static func leaseKey(_ channel: String) -> String { "steno:lease:" + channel }

    func start(hub: ChannelHub, conflict: @escaping @Sendable (String, String) -> Void) {
        hooks.withLock { $0 = Hooks(hub: hub, conflict: conflict) }
        for (name, body) in [("steno-redis-writer", writerLoop), ("steno-redis-reader", readerLoop)] as [(String, @Sendable () -> Void)] {
            let thread = Thread { [threadsDone] in
                body()
                threadsDone.signal()
            }
            thread.name = name
            thread.start()
        }
    }

    /// Stops both threads, after giving the writer up to `flush` seconds to write what is queued
    /// (a drain's last finals and `end`).
    func stop(flush: Double = 0) {
        let deadline = SystemClock.now() + flush
        while flush > 0 && outbox.withLock({ $0.count }) > 0 && SystemClock.now() < deadline && isUp.load(ordering: .relaxed) {
            wake.signal()
            usleep(20_000)
        }
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        wake.signal()
        let started = hooks.withLock { $0 != nil }
        if started { for _ in 0..<2 { _ = threadsDone.wait(timeout: .now() + settings.block + 3) } }
        // The hub and the relay hold each other while it runs.
        hooks.withLock { $0 = nil }
    }

    // MARK: - From the hub (under its lock: appends only)

    func enqueue(_ entry: RelayEntry, channel: String, session: String) {
        outbox.withLock { o in
            switch entry {
            case .live:
                o.leases[channel] = Lease(session: session, live: entry)
            case .end:
                if o.leases[channel]?.session == session { o.leases[channel] = nil }
            default:
                break
            }
            o.nextNumber += 1
            o.entries.append(Pending(number: o.nextNumber, channel: channel, session: session, entry: entry))
            if o.count > settings.maxQueued {
                o.head += 1
                o.dropped += 1
            }
            if o.head > 4096 && o.head * 2 > o.entries.count {
                o.entries.removeFirst(o.head)
                o.head = 0
            }
        }
        wake.signal()
    }

    // MARK: - Writer

    private func writerLoop() {
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

    /// The lease of `channel` for `lease.session`: taken, or kept when it is ours already.
    /// False (and the broadcast withdrawn) when another instance holds it.
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
            withdraw(channel, session: lease.session, holder: replies[2].text)
            return false
        }
        let taken = replies[0] == .simple("OK")
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
        try redis.command(["EXPIRE", stream, String(settings.streamTTL)])
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
        let (batch, dropped) = outbox.withLock { o -> ([Pending], Int) in
            let end = min(o.entries.count, o.head + 256)
            let dropped = o.dropped
            o.dropped = 0
            return (Array(o.entries[o.head..<end]), dropped)
        }
        if dropped > 0 { log.warning("redis: \(dropped) channel events were dropped while Redis was away") }
        guard !batch.isEmpty else { return false }
        // Each broadcast's lease first (its `live` entry comes with it), in queue order.
        var commands: [[[UInt8]]] = []
        var leased: Set<String> = []
        var skipped: Set<String> = []
        for pending in batch {
            let key = pending.channel + "\u{0}" + pending.session
            if skipped.contains(key) { continue }
            if case .live = pending.entry, !leased.contains(key) {
                if !commands.isEmpty { try flush(&commands, redis) }
                let lease = Lease(session: pending.session, live: pending.entry)
                if try !acquire(pending.channel, lease, redis: redis) { skipped.insert(key); continue }
                leased.insert(key)
                continue
            }
            let stream = Self.streamKey(pending.channel)
            commands.append(xadd(stream, pending.entry, session: pending.session, number: pending.number).map { Array($0.utf8) })
            if case .end = pending.entry {
                // The broadcast is over: its lease goes (if still ours), its stream expires later.
                let release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
                commands.append(["EVAL", release, "1", Self.leaseKey(pending.channel), instance + "/" + pending.session]
                    .map { Array($0.utf8) })
                commands.append(["EXPIRE", stream, String(settings.streamTTL)].map { Array($0.utf8) })
            }
        }
        if !commands.isEmpty { try flush(&commands, redis) }
        let through = batch[batch.count - 1].number
        outbox.withLock { o in
            // Entries queued meanwhile come after these; a withdrawal or a drop may have removed some.
            while o.head < o.entries.count && o.entries[o.head].number <= through { o.head += 1 }
        }
        return true
    }

    private func flush(_ commands: inout [[[UInt8]]], _ redis: RedisConnection) throws(RedisError) {
        let replies = try redis.pipeline(commands)
        for reply in replies {
            if case .error(let message) = reply { log.warning("redis: \(message)") }
        }
        commands.removeAll()
    }

    // MARK: - Reader

    private func readerLoop() {
        var redis: RedisConnection?
        var followed: [String: String] = [:]  // channel → last entry id read
        var applied: [String: UInt64] = [:]  // channel + instance → the last entry number played
        var down = false
        var discovered: Set<String> = []   // the channels with a stream in Redis, at the last look
        var lastDiscovery = -Double.infinity
        while !stopping.load(ordering: .relaxed) {
            guard let hooks = hooks.withLock({ $0 }) else { return }
            let discover = settings.discovery > 0 && SystemClock.now() - lastDiscovery >= settings.discovery
            var wanted = Set(hooks.hub.viewedChannels).union(discovered)
            for channel in followed.keys where !wanted.contains(channel) {
                followed[channel] = nil
                applied = applied.filter { !$0.key.hasPrefix(channel + "\u{0}") }
                hooks.hub.forgetRemote(channel)
            }
            if wanted.isEmpty && !discover {
                usleep(UInt32(settings.block * 500_000))
                continue
            }
            do throws(RedisError) {
                if redis == nil {
                    redis = try RedisConnection(url)
                    if down {
                        down = false
                        log.info("redis: following channels through \(url) again")
                        hooks.hub.relayChanged(up: true)
                    }
                }
                guard let connection = redis else { continue }
                if discover {
                    discovered = try Self.channelsWithStreams(connection)
                    lastDiscovery = SystemClock.now()
                    wanted.formUnion(discovered)
                    if wanted.isEmpty { continue }
                }
                for channel in wanted where followed[channel] == nil {
                    // Everything the stream holds (its broadcasts so far), then what comes.
                    let reply = try connection.command(["XRANGE", Self.streamKey(channel), "-", "+"])
                    followed[channel] = apply(reply.elements ?? [], channel: channel, hub: hooks.hub, applied: &applied) ?? "0-0"
                }
                let channels = followed.keys.sorted()
                let reply = try connection.command(
                    ["XREAD", "COUNT", "1000", "BLOCK", String(Int(settings.block * 1000)), "STREAMS"]
                        + channels.map(Self.streamKey) + channels.map { followed[$0]! },
                    extraWait: settings.block)
                for stream in reply.elements ?? [] {
                    guard let parts = stream.elements, parts.count == 2, let key = parts[0].text,
                          key.hasPrefix("steno:channel:") else { continue }
                    let channel = String(key.dropFirst("steno:channel:".count))
                    guard followed[channel] != nil else { continue }
                    if let last = apply(parts[1].elements ?? [], channel: channel, hub: hooks.hub, applied: &applied) {
                        followed[channel] = last
                    }
                }
            } catch {
                redis = nil
                if !down {
                    down = true
                    log.warning("redis: cannot follow channels through \(url) (\(error)); their viewers here are told")
                    hooks.hub.relayChanged(up: false)
                }
                usleep(UInt32(settings.retry * 1_000_000))
            }
        }
    }

    /// The channels that have a stream in Redis (live, or ended less than `streamTTL` ago), by
    /// `SCAN`, which walks the keyspace a batch at a time without holding Redis up.
    private static func channelsWithStreams(_ redis: RedisConnection) throws(RedisError) -> Set<String> {
        var found: Set<String> = []
        var cursor = "0"
        repeat {
            let reply = try redis.command(["SCAN", cursor, "MATCH", streamKey("*"), "COUNT", "1000", "TYPE", "stream"])
            guard let parts = reply.elements, parts.count == 2, let next = parts[0].text else { break }
            for key in parts[1].elements ?? [] {
                if let key = key.text, key.hasPrefix("steno:channel:") { found.insert(String(key.dropFirst("steno:channel:".count))) }
            }
            cursor = next
        } while cursor != "0"
        return found
    }

    /// Plays stream entries of other instances into the hub; the last entry's id.
    private func apply(_ entries: [RESPValue], channel: String, hub: ChannelHub, applied: inout [String: UInt64]) -> String? {
        var last: String?
        for item in entries {
            guard let parts = item.elements, parts.count == 2, let id = parts[0].text else { continue }
            last = id
            let includeWords = hub.remoteIncludesWords(channel)
            guard let (origin, session, number, entry) = RelayEntry.parse(parts[1].elements ?? [], includeWords: includeWords),
                  origin != instance else { continue }
            if number > 0 {
                let key = channel + "\u{0}" + origin
                if number <= applied[key] ?? 0 { continue }
                applied[key] = number
            }
            hub.applyRemote(entry, channel: channel, session: session, instance: origin)
        }
        return last
    }
}
