import Kafka

/// Fairness between apps in the pipeline's state: a decoded event over its credential's share is
/// parked (out of the in-flight count, into the parked one) and starts when one of its
/// credential's running events ends (`CredentialShares`).
extension WorkerPipeline.StateMachine {
    /// What parking or unparking changed about the hold.
    struct Parking {
        /// The bound (now parked events too) is reached: input is held from now on.
        var holdBegan = false
        /// The hold ended, and whom to resume.
        var action = FinishAction()
    }

    /// A decoded `run` of `credential` is about to make its first attempt: `nil` to make it now (it
    /// counts in the credential's share), or how parking it changed the hold. A run whose partition
    /// was handed over is never parked: its gate gives it up at once, and the revocation's sweep of
    /// the parked (`takeParked`, under this same lock) may have passed already.
    mutating func begin(_ run: EventRun, credential: String) -> Parking? {
        guard shares?.enter(credential, run, mayPark: run.lease.isActive) == false else { return nil }
        load.events -= 1
        load.bytes -= run.bytes
        load.parked += 1
        return rebound()
    }

    /// A running event of `credential` ended (after `finish` or `abandon`): the parked run that runs
    /// in its place, if any.
    mutating func leave(_ credential: String) -> (next: EventRun?, parking: Parking) {
        guard let next = shares?.leave(credential) else { return (nil, Parking()) }
        unpark(next)
        return (next, rebound())
    }

    /// Takes out parked runs to be given up unsent: those whose lease is no longer active (`all`:
    /// every one, at shutdown). They count as running again until their abandonment ends them.
    mutating func takeParked(all: Bool) -> (runs: [EventRun], parking: Parking) {
        let runs = shares?.remove { all || !$0.lease.isActive } ?? []
        for run in runs { unpark(run) }
        return (runs, runs.isEmpty ? Parking() : rebound())
    }

    var parked: Int { load.parked }

    private mutating func unpark(_ run: EventRun) {
        load.parked -= 1
        load.events += 1
        load.bytes += run.bytes
    }

    /// The hold after the load moved between running and parked.
    private mutating func rebound() -> Parking {
        var parking = Parking()
        if atBound {
            parking.holdBegan = holdAtBound()
        } else if boundReached, belowHalf {
            parking.action = endBoundHold()
        }
        return parking
    }
}
