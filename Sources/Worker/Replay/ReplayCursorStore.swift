import Threading
import Foundation
import Kafka
import Logging

/// The cursors of the reasons one replay run handles, read from and stored in their groups'
/// committed offsets and commit metadata, and the run's reservation of them: two runs over the same
/// cursors never both replay a dead letter, because all but one are refused.
///
/// Kafka has no compare-and-set for committed offsets: a commit overwrites what is there, and the
/// writer cannot tell what it overwrote. So the reservation uses two kinds of register per reason: the
/// cursors, whose metadata carries the run's reservation (its id and an expiry), and the claim,
/// the commit metadata of the reason's claim group (`<cursor group>.claim`) on the topic's first
/// partition, where a run writes its id and nothing else. `acquire`:
///
/// 1. reads the cursors, and is refused if another run's reservation is on any of them;
/// 2. writes its id to each reason's claim;
/// 3. per reason, reads the cursors again, is refused on another run's reservation, and stores them with
///    its own reservation (the read-then-store time is measured: the run's *blind time*);
/// 4. waits `settle`, or twice its blind time if longer (capped);
/// 5. reads the claims and the cursors: it goes on only if every claim still names it and every
///    cursor still carries its reservation.
///
/// Why two runs A and B never both go on, however slow Kafka is. Each read its own id in the claim
/// in (5), after storing its reservation in (3). Say A wrote the claim first. A read it back before B
/// wrote it (afterwards it names B or a later run), so B wrote the claim, and then read the cursors
/// in (3), after A had stored its reservation: B found it (or a reservation written since) and was refused. A
/// store without a live reservation over A's reservation in between would change that, and there is none: a run
/// stores the cursors without its reservation when it ends or fails after going on (then it and A went on
/// at once, and the same argument applied to the earliest such pair rules that out), and, refused,
/// only if its blind time was under `settle`, which rules it out too (below). Nothing here depends
/// on how long Kafka takes; a clock only decides when a reservation expires, which a run that goes on
/// keeps from happening by renewing it at every checkpoint.
///
/// What a refused run does with the reservation it stored: if its blind time was under `settle`, it gives
/// the reservation up at once (stores the cursors as they are now, without it). That cannot wipe out the
/// reservation of a run that went on: such a run stored its reservation after this one's read in (3) (else that
/// read would have found it) and read it back `settle` later in (5) (so this one's store came after
/// that): this run's blind time would be over `settle`. With a longer blind time the reservation stays
/// until it expires, and the next run is refused until then rather than risk running beside one
/// that went on.
///
/// The wait in (4) is only there so that of two runs started together one goes on: both have
/// written the claim and the cursors before either reads them back, and the later writer of both
/// wins. Runs whose writes crossed are both refused ("started at the same time"). Kafka so slow that
/// the blind time reaches a quarter of the reservation is refused: the reservation could lapse before it is
/// renewed. Every checkpoint checks the reservation is still this run's and renews it; the last one gives
/// it up.
///
/// On a broker that drops commit metadata (Tansu 0.6) nothing can be reserved or remembered beyond the
/// offsets: the run goes on, says so, and its cursors never pass a dead letter it left alone.
struct ReplayCursorStore: Sendable {
    typealias Cursors = [DeadLetterReason: [KafkaTopicPartition: ReplayCursor]]
    /// A cursor as read, the reservation in its metadata, and why its metadata could not be used.
    typealias Read = (cursor: ReplayCursor, reservation: CommitMetadata.Reservation?, problem: String?)

    let holder: String
    let groups: [DeadLetterReason: any CommittedOffsets]
    /// Each reason's claim group.
    let claims: [DeadLetterReason: any CommittedOffsets]
    let partitions: [KafkaTopicPartition]
    /// Each partition's first stored offset: a cursor never stays below it.
    let lows: [KafkaTopicPartition: Int64]
    let duration: Duration
    /// The least a run waits before reading its reservation back, and the longest blind time after which
    /// a refused run gives its reservation up at once. The same for every run (the argument above needs
    /// the waits of one run to cover the blind time of another).
    let settle: Duration
    let logger: Logger
    /// The most commit metadata a cursor stores (Kafka's default `offset.metadata.max.bytes`).
    var maxMetadataBytes = 4096
    /// What the blind time is read on and the wait in (4) waits on: the continuous clock, or a test's
    /// own, which decides how long Kafka took whatever else runs on the machine.
    var clock = ReservationClock.continuous
    private let keepsMetadata = Locked(true)
    /// Until when this run's reservation of each reason's cursors lasts for sure: the time of its last store
    /// with the reservation (taken before the store, so never later than the expiry written) plus `duration`.
    private let reservedUntil = Locked<[DeadLetterReason: ContinuousClock.Instant]>([:])

    init(
        holder: String, groups: [DeadLetterReason: any CommittedOffsets],
        claims: [DeadLetterReason: any CommittedOffsets], partitions: [KafkaTopicPartition],
        lows: [KafkaTopicPartition: Int64], duration: Duration, settle: Duration, logger: Logger
    ) {
        self.holder = holder
        self.groups = groups
        self.claims = claims
        self.partitions = partitions
        self.lows = lows
        self.duration = duration
        self.settle = settle
        self.logger = logger
    }

    /// The cursors a run starts from.
    struct Start: Sendable {
        var cursors: Cursors
        /// Lines for the report: metadata that could not be used, a broker that keeps none.
        var notes: [String] = []
    }

    private var reasons: [DeadLetterReason] { groups.keys.sorted { $0.rawValue < $1.rawValue } }

    /// The cursors as earlier runs left them, without reserving them (a dry run).
    func read() async throws -> Start {
        try await readWithReservations().start
    }

    /// The cursors with notes on what could not be used, and each reason's cursors as read.
    private func readWithReservations() async throws -> (
        start: Start, read: [DeadLetterReason: [KafkaTopicPartition: Read]]
    ) {
        var start = Start(cursors: [:])
        var all: [DeadLetterReason: [KafkaTopicPartition: Read]] = [:]
        for reason in reasons {
            let stored = try await cursors(of: groups[reason]!)
            for (partition, read) in stored.sorted(by: { $0.key < $1.key }) {
                guard let problem = read.problem else { continue }
                let note = "\(reason.rawValue) cursor of \(partition): its commit metadata is \(problem)"
                logger.warning("\(note)")
                start.notes.append(note)
            }
            start.cursors[reason] = stored.mapValues(\.cursor)
            all[reason] = stored
        }
        return (start, all)
    }

    /// Reads the cursors and reserves them (steps 1 to 5 above), or throws `ReplayError`
    /// when another run has it or is taking it.
    func acquire() async throws -> Start {
        var (start, found) = try await readWithReservations()
        for reason in reasons { try refuseIfReserved(reason, found[reason]!) }
        guard let first = partitions.first else { return start }
        try await claim(first)
        var blind = Duration.zero
        do {
            for reason in reasons {
                let began = clock.now()
                defer { blind = max(blind, clock.now() - began) }
                found[reason] = try await cursors(of: groups[reason]!)
                try refuseIfReserved(reason, found[reason]!)
                // As they are now: a run that ended since the first read moved them.
                start.cursors[reason] = found[reason]!.mapValues(\.cursor)
                try await store(reason, start.cursors[reason]!, reserved: true)
            }
            guard blind < duration / 4 else {
                throw DeadLetterReplayer.ReplayError(
                    description:
                        "Kafka took \(blind) to read and store the cursors, too slow to reserve them safely (a quarter or "
                        + "more of the \(duration) a reservation lasts); nothing was replayed. Check the brokers and the "
                        + "network to them (the group coordinator of the cursors' groups)")
            }
            try await clock.sleep(min(max(settle, blind * 2), duration / 4))
            try await checkClaimed(first, &start)
        } catch {
            try await refused(error, blind: blind)
        }
        return start
    }

    /// Step 5: throws unless the reservation is this run's. On a broker that keeps no metadata, adds a
    /// note saying so to `start`.
    private func checkClaimed(_ first: KafkaTopicPartition, _ start: inout Start) async throws {
        var claimants: [DeadLetterReason: String?] = [:]
        for reason in reasons {
            let stored = try await claims[reason]!.readCommitted([first])[first]
            let reservation = stored?.metadata.flatMap { try? CommitMetadata.decode($0, committed: 0) }?.reservation
            claimants[reason] = reservation.flatMap { $0.holderIsValid ? $0.holder : "a holder no run writes" }
        }
        var lost: DeadLetterReplayer.ReplayError?
        var reservations = 0
        for reason in reasons {
            for (partition, read) in try await cursors(of: groups[reason]!).sorted(by: { $0.key < $1.key }) {
                if read.reservation != nil { reservations += 1 }
                guard lost == nil, read.reservation?.holder != holder else { continue }
                lost =
                    read.reservation.map { busy(reason, partition, $0) }
                    ?? DeadLetterReplayer.ReplayError(
                        description:
                            "another replay run stored the \(reason.rawValue) cursor of \(partition) over this run's reservation "
                            + "while it started; nothing was replayed: run it again")
            }
        }
        if reservations == 0, claimants.values.allSatisfy({ $0 == nil }) {
            keepsMetadata.withLock { $0 = false }
            start.notes.append(
                "this broker keeps no commit metadata: a replay run started meanwhile would not be noticed, and what "
                    + "this run replays past a dead letter it leaves alone is replayed again by the next run")
            return
        }
        if let lost { throw lost }
        for reason in reasons where claimants[reason]! != holder {
            throw DeadLetterReplayer.ReplayError(
                description:
                    "another replay run (\(claimants[reason]! ?? "unknown")) started at the same time over the "
                    + "\(reason.rawValue) cursors; nothing was replayed. Run it again once that run has ended")
        }
    }

    /// Gives the reservation up at once where that is safe (see above), then throws `error`, saying when
    /// the reservation lapses otherwise.
    private func refused(_ error: any Error, blind: Duration) async throws -> Never {
        if blind < settle {
            await letGo()
            throw error
        }
        guard await anyReservationLeft() else { throw error }
        let lapses = DeadLetterTime.format(Date().addingTimeInterval(duration.seconds))
        logger.warning(
            "refused after storing the cursors in \(blind) (\(settle) or more): the reservation lapses at \(lapses)")
        guard let refusal = error as? DeadLetterReplayer.ReplayError else { throw error }
        throw DeadLetterReplayer.ReplayError(
            description:
                "\(refusal.description) (Kafka took \(blind) to store this run's reservation, too long to give it up safely: "
                + "it lapses at \(lapses))")
    }

    /// Whether this run's reservation is still on a cursor (when unsure, yes).
    private func anyReservationLeft() async -> Bool {
        for reason in reasons {
            guard let read = try? await cursors(of: groups[reason]!) else { return true }
            if read.values.contains(where: { $0.reservation?.holder == holder }) { return true }
        }
        return false
    }

    /// Step 2: this run's id in each reason's claim.
    private func claim(_ first: KafkaTopicPartition) async throws {
        let expires = Int64((Date().timeIntervalSince1970 + duration.seconds) * 1000)
        let text = CommitMetadata(
            committed: 0, reservation: CommitMetadata.Reservation(holder: holder, expires: expires)
        )
        .encoded().text
        for reason in reasons {
            try await claims[reason]!.writeCommitted([KafkaTopicPartitionOffset(first, offset: 0, metadata: text)])
        }
    }

    private func refuseIfReserved(_ reason: DeadLetterReason, _ stored: [KafkaTopicPartition: Read]) throws {
        for (partition, read) in stored.sorted(by: { $0.key < $1.key }) {
            if let reservation = read.reservation, reservation.holder != holder, reservation.expiryDate > Date() {
                throw busy(reason, partition, reservation)
            }
        }
    }

    /// Stores the cursors and renews the reservation, once sure it is still this run's.
    func renew(_ cursors: Cursors) async throws {
        try await checkStillReserved()
        for reason in reasons { try await store(reason, cursors[reason], reserved: true) }
    }

    /// Stores the cursors and gives the reservation up, once sure it is still this run's.
    func giveUp(_ cursors: Cursors) async throws {
        try await checkStillReserved()
        for reason in reasons { try await store(reason, cursors[reason], reserved: false) }
    }

    /// Whether the reservation is still this run's for sure, `settle` ahead: a run whose reservation may have lapsed
    /// (a checkpoint that took most of `duration`) must not produce another dead letter, since another
    /// run may have reserved the cursors by now.
    var reservationLasts: Bool {
        guard keepsMetadata.withLock({ $0 }), let until = reservedUntil.withLock({ $0.values.min() }) else {
            return true
        }
        return clock.now() + settle < until
    }

    private func checkStillReserved() async throws {
        guard keepsMetadata.withLock({ $0 }) else { return }
        if !reservationLasts {
            throw DeadLetterReplayer.ReplayError(
                description: "this run's reservation of its cursors may have lapsed before it could renew it; stopped")
        }
        for reason in reasons {
            for (partition, read) in try await cursors(of: groups[reason]!) where read.reservation?.holder != holder {
                let other = read.reservation.map { "replay run \($0.holder)" } ?? "something else"
                throw DeadLetterReplayer.ReplayError(
                    description:
                        "the \(reason.rawValue) cursor of \(partition) was taken over by \(other) (this run's reservation "
                        + "lapsed); stopped")
            }
        }
    }

    /// Gives up whatever of the reservation is still this run's: each such cursor is stored again as it is
    /// now, without the reservation (never as this run last saw it: a run that gave up may have seen it
    /// before another run moved it). Best effort: otherwise the reservation expires.
    private func letGo() async {
        for reason in reasons {
            do {
                let offsets = try await cursors(of: groups[reason]!).compactMap {
                    partition, read -> KafkaTopicPartitionOffset? in
                    guard read.reservation?.holder == holder else { return nil }
                    let text = read.cursor.metadata(reservation: nil).encoded(maxBytes: maxMetadataBytes).text
                    return KafkaTopicPartitionOffset(partition, offset: read.cursor.low, metadata: text)
                }
                if !offsets.isEmpty { try await groups[reason]!.writeCommitted(offsets) }
            } catch {
                logger.warning(
                    "could not give up the reservation of the \(reason.rawValue) cursors: \(error); it expires in \(duration)"
                )
            }
        }
    }

    /// After a failure: gives up what of the reservation is still this run's (best effort; otherwise it
    /// expires).
    func abandon() async {
        await letGo()
    }

    // MARK: -

    private func busy(
        _ reason: DeadLetterReason, _ partition: KafkaTopicPartition, _ reservation: CommitMetadata.Reservation
    ) -> DeadLetterReplayer.ReplayError {
        DeadLetterReplayer.ReplayError(
            description:
                "another replay run (\(reservation.holder)) has reserved the \(reason.rawValue) cursor of \(partition) until "
                + "\(DeadLetterTime.format(reservation.expiryDate)); nothing was replayed. Wait for it to end (a run that "
                + "died, or was refused while Kafka was slow, lets go at that time)")
    }

    private func store(
        _ reason: DeadLetterReason, _ cursors: [KafkaTopicPartition: ReplayCursor]?, reserved: Bool
    ) async throws {
        guard let cursors else { return }
        let storing = clock.now()
        let expires = Int64((Date().timeIntervalSince1970 + duration.seconds) * 1000)
        var offsets: [KafkaTopicPartitionOffset] = []
        for (partition, cursor) in cursors.sorted(by: { $0.key < $1.key }) {
            let metadata = cursor.metadata(
                reservation: reserved ? CommitMetadata.Reservation(holder: holder, expires: expires) : nil)
            let (text, omitted) = metadata.encoded(maxBytes: maxMetadataBytes)
            if omitted > 0 {
                logger.warning(
                    "\(reason.rawValue) cursor of \(partition): \(omitted) replayed offsets do not fit in the commit metadata; the next run replays them again"
                )
            }
            offsets.append(KafkaTopicPartitionOffset(partition, offset: cursor.low, metadata: text))
        }
        try await groups[reason]!.writeCommitted(offsets)
        if reserved { reservedUntil.withLock { $0[reason] = storing + duration } }
    }

    /// Each partition's cursor (its group's committed offset and what its metadata says), the reservation
    /// in it, and why its metadata could not be used, if it could not.
    private func cursors(of group: any CommittedOffsets) async throws -> [KafkaTopicPartition: Read] {
        let committed = try await group.readCommitted(partitions)
        var result: [KafkaTopicPartition: Read] = [:]
        for partition in partitions {
            let low = lows[partition] ?? 0
            guard let stored = committed[partition] else {
                result[partition] = (ReplayCursor(low: low), nil, nil)
                continue
            }
            var metadata: CommitMetadata?
            var problem: String?
            if let text = stored.metadata {
                do {
                    metadata = try CommitMetadata.decode(text, committed: stored.offset)
                } catch {
                    problem = "\(error); replaying from its offset \(stored.offset)"
                }
            }
            // A reservation no run could have written (an expiry years ahead would block every run until
            // someone edits the group; a holder of any text would reach messages and logs whole) is
            // ignored, the cursor kept.
            var reservation = metadata?.reservation
            if let found = reservation, let why = found.implausibility(now: Date(), duration: duration) {
                problem = "carrying a reservation with \(why); the reservation is ignored"
                reservation = nil
            }
            // Nothing is stored below the partition's first offset any more.
            result[partition] = (
                ReplayCursor(low: max(stored.offset, low), handled: metadata?.done ?? OffsetRanges()), reservation,
                problem
            )
        }
        return result
    }
}

/// A consumer group's committed offsets with their metadata, as replay's cursors and reservations read and
/// write them: Kafka's (a `KafkaConsumer` of the group), or a test's stand-in.
protocol CommittedOffsets: Sendable {
    func readCommitted(_ partitions: [KafkaTopicPartition]) async throws -> [KafkaTopicPartition:
        KafkaTopicPartitionOffset]
    func writeCommitted(_ offsets: [KafkaTopicPartitionOffset]) async throws
}

extension KafkaConsumer: CommittedOffsets {
    func readCommitted(
        _ partitions: [KafkaTopicPartition]
    ) async throws -> [KafkaTopicPartition: KafkaTopicPartitionOffset] {
        try await committed(partitions)
    }

    func writeCommitted(_ offsets: [KafkaTopicPartitionOffset]) async throws {
        try await commit(offsets)
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}

/// The time a replay run's reservation is measured and waited in.
struct ReservationClock: Sendable {
    var now: @Sendable () -> ContinuousClock.Instant
    var sleep: @Sendable (Duration) async throws -> Void

    static let continuous = ReservationClock(now: { .now }, sleep: { try await Task.sleep(for: $0) })
}
