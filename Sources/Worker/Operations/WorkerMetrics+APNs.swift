import APNs
import CoreMetrics

extension WorkerMetrics {
    /// One APNs client's connection pool (credential × environment), sampled at scrape time.
    package func setAPNsPool(credential: String, environment: String, _ statistics: APNsPoolStatistics) {
        let labels = [("credential", credential), ("environment", environment)]
        setRetiredConnections(credential: credential, environment: environment, statistics.retiredConnections)
        for (state, count) in [
            ("ready", statistics.readyConnections), ("connecting", statistics.connectingConnections),
            ("draining", statistics.drainingConnections),
        ] {
            gauge("apns_worker_apns_connections", labels + [("state", state)]).record(count)
        }
        gauge("apns_worker_apns_streams_in_use", labels).record(statistics.streamsInUse)
        gauge("apns_worker_apns_stream_capacity", labels).record(statistics.streamCapacity)
        gauge("apns_worker_apns_requests_waiting", labels).record(statistics.waitingRequests)
    }

    /// A provider-token key's figures since start (`TokenAuthenticators.figures`), at a scrape: tokens
    /// signed, connections that moved to a newer token, and tokens that could not be signed. A fleet
    /// on the shared schedule signs one token a period in every pod, whatever its connections.
    package func setProviderTokens(keyID: String, signed: Int, switches: Int, signingFailures: Int) {
        advance("apns_worker_apns_provider_tokens_signed_total", [("key_id", keyID)], to: signed)
        advance("apns_worker_apns_provider_token_switches_total", [("key_id", keyID)], to: switches)
        advance("apns_worker_apns_provider_token_signing_failures_total", [("key_id", keyID)], to: signingFailures)
    }

    /// Every key's provider-token figures at a scrape (`TokenAuthenticators.figures()`); the series of
    /// key ids no credential uses any more are taken out.
    package func setProviderTokens(of authenticators: TokenAuthenticators) {
        let (figures, gone) = authenticators.figures()
        for (keyID, figures) in figures {
            setProviderTokens(
                keyID: keyID, signed: figures.signed, switches: figures.switches,
                signingFailures: figures.signingFailures)
        }
        for keyID in gone { removeProviderTokens(keyID: keyID) }
    }

    /// A key id no credential uses any more (rotated away, its last connection replaced): its
    /// provider-token series leave `/metrics`.
    package func removeProviderTokens(keyID: String) {
        for name in [
            "apns_worker_apns_provider_tokens_signed_total", "apns_worker_apns_provider_token_switches_total",
            "apns_worker_apns_provider_token_signing_failures_total",
        ] {
            removeCounter(name, [("key_id", keyID)])
        }
    }

    /// Connections of a credential's pools retired because APNs would not take their provider token
    /// any more, by reason, or replaced after the credential was reloaded (`CredentialReloaded`); every
    /// reason's series exists from the first scrape, at 0, so that an
    /// `increase()` sees the first one.
    func setRetiredConnections(credential: String, environment: String, _ retired: [String: Int]) {
        for reason in [
            APNsReason.tooManyProviderTokenUpdates.rawValue, APNsReason.unrelatedKeyIDInToken.rawValue,
            "CredentialReloaded",
        ] {
            advance(
                "apns_worker_apns_connections_retired_total",
                [("credential", credential), ("environment", environment), ("reason", reason)],
                to: retired[reason] ?? 0)
        }
    }

    /// Wall-clock jumps seen since start (`TokenAuthenticators.clockJumps`), at a scrape.
    package func setClockJumps(_ total: Int) {
        advance("apns_worker_wall_clock_jumps_total", [], to: total)
    }

    /// The series of a credential whose files are watched (`CredentialReloader`), at 0 from the start.
    package func register(reloadedCredential credential: String) {
        for result in ["success", "failure"] {
            _ = counter("apns_worker_credential_reloads_total", [("credential", credential), ("result", result)])
        }
        setCredentialReloadFailing(credential, false)
    }

    /// A credential's files were read again after they changed: loaded and in use (`success`), or
    /// refused, the credential before staying in use (`failure`; counted once per content refused).
    package func credentialReloaded(_ credential: String, success: Bool) {
        counter(
            "apns_worker_credential_reloads_total",
            [("credential", credential), ("result", success ? "success" : "failure")]
        ).increment()
    }

    /// 1 while a credential's files on disk do not load (the one loaded before is in use), else 0.
    package func setCredentialReloadFailing(_ credential: String, _ failing: Bool) {
        gauge("apns_worker_credential_reload_failing", [("credential", credential)]).record(failing ? 1 : 0)
    }

    /// Moves a counter up to `total` (a figure kept elsewhere since start), by what it grew since the
    /// last call; created at 0 the first time.
    private func advance(_ name: String, _ labels: [(String, String)], to total: Int) {
        let key = SeriesKey(name: name, labels: labels.flatMap { [$0.0, $0.1] })
        let grown = scrapedTotals.withLock { totals in
            let grown = max(0, total - (totals[key] ?? 0))
            totals[key] = max(total, totals[key] ?? 0)
            return grown
        }
        counter(name, labels).increment(by: Int64(grown))
    }
}
