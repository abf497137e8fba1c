import NIOCore

extension APNsConnectionPool {
    /// Answers that say a connection's credential is refused outright: after a rotation, a connection
    /// still on the credential before (its key revoked once the new one was in place, its certificate
    /// revoked) is replaced at once and its request goes again on a current one. On a current
    /// connection these answers are the caller's, as before.
    static let refusingOldCredential: Set<APNsReason> = [.invalidProviderToken, .badCertificate]

    /// New connections authenticate with `credential` from now on (a reloaded key or certificate).
    /// Those open with the one before keep it (APNs binds a connection to its first key) and are
    /// replaced one per `Settings.replaceInterval`, the first at a random point within one interval:
    /// never all at once, and not in step with the other pods of a fleet.
    func rotate(to credential: Credential) {
        let start = state.withLock { machine -> Bool in
            let generation = machine.generation + 1
            credentials.withLock { credentials in
                credentials[generation] = credential
                // A connect names the generation current when it was decided: at most one behind.
                for old in credentials.keys where old < generation - 2 { credentials[old] = nil }
            }
            _ = machine.rotate(to: generation)
            return machine.beginReplacing()
        }
        if start { scheduleReplacement(first: true) }
    }

    private func scheduleReplacement(first: Bool) {
        let interval = settings.replaceInterval
        let delay = first ? TimeAmount.nanoseconds(Int64.random(in: 0...max(0, interval.nanoseconds))) : interval
        group.any().scheduleTask(in: delay) { [weak self] () -> Void in self?.replaceDue() }
    }

    /// One connection of an earlier credential is replaced; the timer runs again while any is left.
    private func replaceDue() {
        let (actions, replaced, left) = state.withLock { $0.replaceOne(now: .now()) }
        if replaced {
            logger.info(
                "replacing a connection opened with the credential before the reload",
                metadata: ["left": "\(left)"])
            retired.withLock { $0[APNsPoolStatistics.credentialReloaded, default: 0] += 1 }
        }
        perform(actions)
        if left > 0 { scheduleReplacement(first: false) }
    }

    /// A request refused for its credential on a connection of an earlier generation: that connection
    /// is replaced now, and the request goes again on another (APNs did not take it) while it may.
    /// `false`, having done nothing, when the connection is a current one.
    func refusedOldCredential(
        _ request: Request, _ result: Result<APNsResponse, APNsClientError>, reason: APNsReason, connectionID id: Int
    ) -> Bool {
        let actions: [Machine.Action]? = state.withLock { machine in
            guard machine.isEarlierGeneration(id) else { return nil }
            return machine.drain(id: id, cause: .replaced, now: .now()) + machine.release(connectionID: id)
        }
        guard let actions else { return false }
        logger.warning(
            "a connection opened with the credential before the reload was refused (\(reason.rawValue)): replacing it now",
            metadata: ["connection": "\(id)", "reason": "\(reason)"])
        retired.withLock { $0[APNsPoolStatistics.credentialReloaded, default: 0] += 1 }
        perform(actions)
        if request.resends < Self.maximumResends, NIODeadline.now() < request.deadline {
            execute(CollectionOfOne(request.again()))
        } else {
            request.complete(result)
        }
        return true
    }
}
