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
///   instance holds it, the broadcast waits, its entries kept in order and none written, for
///   as long as a lease lasts and one renewal more: a publisher whose instance died (killed,
///   its machine gone) holds it until it expires, and the talker that came back here through
///   the balancer goes on publishing once it has. If the holder keeps it that long, it is alive:
///   the broadcast is withdrawn here (`conflict`: the session is told, as a second publisher on
///   one instance is) and its entries dropped. Viewers on this instance follow it meanwhile.
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
        var lease: Double = 6
        var leaseRenewal: Double = 2
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
    let log: Log
    /// Set once, before `start`.
    let hooks = Locked<Hooks?>(nil)
    let outbox = Locked(Outbox())
    let wake = DispatchSemaphore(value: 0)
    let stopping = Atomic<Bool>(false)
    private let threadsDone = DispatchSemaphore(value: 0)
    let isUp = Atomic<Bool>(true)

    struct Hooks: Sendable {
        let hub: ChannelHub
        /// A local session lost its channel to another instance's publisher.
        let conflict: @Sendable (_ session: String, _ channel: String) -> Void
    }

    struct Pending {
        /// The order entries were queued in.
        let number: UInt64
        let channel: String
        let session: String
        let entry: RelayEntry
    }

    struct Lease {
        let session: String
        let live: RelayEntry
        /// Taken (or confirmed) on the current connection.
        var held = false
        /// Since when another instance's publisher has held it (its entries wait meanwhile).
        var waitingSince: Double?
    }

    /// A local session that goes on from `previous`, a session of its talker's that another
    /// instance ran (`start`'s `continues`).
    struct Takeover {
        let channel: String
        let session: String
        let previous: StartRequest.Continuation
    }

    struct Outbox {
        var entries: [Pending] = []
        var head = 0
        var dropped = 0
        var nextNumber: UInt64 = 0
        /// Live local broadcasts by channel.
        var leases: [String: Lease] = [:]
        /// The digest of each live local publisher's resume token (by session), kept beside its
        /// lease in Redis so that its talker, gone on in a session elsewhere, can prove it is
        /// the same talker and take the channel over at once.
        var proofs: [String: String] = [:]
        /// Takeovers asked for and not yet tried, and the leases (channel and session) a
        /// takeover gave, whose broadcast still has to say it is live.
        var takeovers: [Takeover] = []
        var takenOver: Set<String> = []
        var count: Int { entries.count - head }

        /// Whether `pending`'s broadcast waits for its lease (another instance holds it).
        func waits(_ pending: Pending) -> Bool {
            guard let lease = leases[pending.channel], lease.session == pending.session else { return false }
            return lease.waitingSince != nil
        }
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
    /// The lease holder's proof: the digest of its session's resume token (channel names
    /// have no `:`).
    static func proofKey(_ channel: String) -> String { "steno:lease:" + channel + ":proof" }
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

    /// `proof`: for a `live` entry, the digest of the publisher's resume token (nil: none).
    func enqueue(_ entry: RelayEntry, channel: String, session: String, proof: String? = nil) {
        outbox.withLock { o in
            switch entry {
            case .live:
                o.leases[channel] = Lease(session: session, live: entry)
                if let proof { o.proofs[session] = proof }
            case .end:
                // One that waits for its lease keeps waiting until its entries are written.
                if o.leases[channel]?.session == session && o.leases[channel]?.waitingSince == nil { o.leases[channel] = nil }
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

    /// `session` goes on from `previous` (its talker lost that session with its instance): if
    /// `previous` still holds `channel`'s lease and the token proves it, the lease is
    /// `session`'s at once, instead of after it expires.
    func takeOver(_ channel: String, for session: String, from previous: StartRequest.Continuation) {
        outbox.withLock { $0.takeovers.append(Takeover(channel: channel, session: session, previous: previous)) }
        wake.signal()
    }

    // MARK: - Reader

    private func readerLoop() {
        var redis: RedisConnection?
        var followed: [String: String] = [:]  // channel → last entry id read
        var applied: [String: UInt64] = [:]  // channel + instance → the last entry number played
        var down = false
        var discovered: Set<String> = []   // the channels with a stream in Redis, at the last look
        var lastDiscovery = -Double.infinity
        var leaseless: Set<String> = []   // remote publishers whose lease was gone at the last look
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
                    try checkLeases(Array(followed.keys), connection, hub: hooks.hub, leaseless: &leaseless)
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

    /// Whether the other instances' live broadcasts followed here still hold their channels'
    /// leases: a publisher whose instance died (killed, its machine gone) leaves its broadcast
    /// live in every stream and hub, and only its lease expires. One whose lease is gone (or
    /// another's) at two looks in a row (so that a broadcast ending normally, which lets its
    /// lease go with its `end` entry, is read as ended first) is over here (`remoteGone`).
    private func checkLeases(_ channels: [String], _ redis: RedisConnection, hub: ChannelHub,
                             leaseless: inout Set<String>) throws(RedisError) {
        let live = channels.compactMap { channel in hub.remotePublisher(channel).map { (channel, $0) } }
        var missing: Set<String> = []
        if !live.isEmpty {
            let replies = try redis.pipeline(live.map { ["GET", Self.leaseKey($0.0)].map { Array($0.utf8) } })
            for ((channel, session), reply) in zip(live, replies) where !(reply.text?.hasSuffix("/" + session) ?? false) {
                let key = channel + "\u{0}" + session
                missing.insert(key)
                if leaseless.contains(key) {
                    log.info("redis: channel \(channel)'s publisher \(session) no longer holds it (its instance is gone); its broadcast is lost here")
                    hub.remoteGone(channel, session: session)
                }
            }
        }
        leaseless = missing
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
