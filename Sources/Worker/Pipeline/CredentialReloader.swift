import APNs
import Threading
import Foundation
import Logging
import ServiceLifecycle

/// Reads every credential's key and certificate files again every `credentialReloadInterval`, and
/// when they changed and load, hands the new credential to the senders (both lanes'): new connections
/// use it, open ones move to it gradually (`APNsClient.replaceCredential`). Kubernetes replaces a
/// mounted Secret's files in place; this is how a key or certificate rotates without a restart.
///
/// Files that changed and do not load (unreadable, half-written, not a P-256 key, a certificate
/// without its key) leave the credential in use as it is: each is logged and counted once
/// (`apns_worker_credential_reloads_total{result="failure"}`), `apns_worker_credential_reload_failing`
/// is 1 and `/health/ready` names it under `credentialFiles` while it lasts; the worker stays ready.
/// A key given in an environment variable (`keyEnv`) is not watched: it changes with a restart.
package final class CredentialReloader: Service, Sendable {
    private struct Watched: Sendable {
        let index: Int
        let settings: CredentialSettings
    }

    private let watched: [Watched]
    private let senders: [APNsSender]
    private let interval: Duration
    private let environment: [String: String]
    private let authenticators: TokenAuthenticators
    private let metrics: WorkerMetrics
    private let health: HealthState
    private let observer: OperationsObserver
    private let logger: Logger
    private let watches: Locked<[Int: CredentialFileWatch]>

    /// - Parameters:
    ///   - senders: every sender of the worker (the lanes' own), each with every credential of
    ///     `settings`, in its order; `senders[0].loadedFiles` is what they were loaded from.
    package init(
        settings: APNsSettings, interval: Duration, senders: [APNsSender], environment: [String: String],
        authenticators: TokenAuthenticators, metrics: WorkerMetrics, health: HealthState,
        observer: OperationsObserver, logger: Logger
    ) {
        self.watched = settings.credentials.enumerated().filter { !$0.element.files.isEmpty }
            .map { Watched(index: $0.offset, settings: $0.element) }
        self.senders = senders
        self.interval = interval
        self.environment = environment
        self.authenticators = authenticators
        self.metrics = metrics
        self.health = health
        self.observer = observer
        self.logger = logger
        let loaded = senders.first?.loadedFiles ?? []
        self.watches = Locked(
            Dictionary(
                uniqueKeysWithValues: watched.map {
                    (
                        $0.index,
                        CredentialFileWatch(inUse: loaded.indices.contains($0.index) ? loaded[$0.index] : .init([:]))
                    )
                }))
        for entry in watched { metrics.register(reloadedCredential: entry.settings.name) }
    }

    /// Whether any credential is read from files (else there is nothing to watch).
    package var watchesAny: Bool { !watched.isEmpty }

    package func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: self.interval)
                self.check()
            }
        }
    }

    /// One reading of every watched credential's files, and what follows from it.
    package func check() {
        for entry in watched {
            let reading: CredentialFileWatch.Reading
            do {
                reading = .files(try CredentialFiles.read(entry.settings))
            } catch {
                reading = .unreadable(error.description)
            }
            let decision = watches.withLock { $0[entry.index]!.observe(reading) }
            act(on: decision, for: entry)
        }
    }

    private func act(on decision: CredentialFileWatch.Decision, for entry: Watched) {
        let name = entry.settings.name
        let metadata: Logger.Metadata = [
            "credential": "\(name)", "files": "\(entry.settings.files.joined(separator: ", "))",
        ]
        switch decision {
        case .none:
            return
        case .restored:
            logger.notice(
                "credential \(name): its files are back to those in use", metadata: metadata)
            report(problem: nil, for: name)
        case .unreadable(let why):
            logger.error(
                "credential \(name): its files changed and cannot be read (\(why)); the credential loaded before stays in use",
                metadata: metadata)
            metrics.credentialReloaded(name, success: false)
            report(problem: "\(why); the credential loaded before stays in use", for: name)
        case .load(let files):
            let credential: APNsCredential
            do {
                credential = try APNsSender.load(
                    entry.settings, environment: environment, namingCredential: false,
                    authenticators: authenticators, files: files)
                if let senderInUse = senders.first,
                    let why = Self.newKeyUnderOldID(
                        credential, replacing: senderInUse.credential(at: entry.index), settings: entry.settings)
                {
                    throw APNsCredentialError(.badIdentifier, why)
                }
            } catch {
                let why = (error as? APNsCredentialError)?.description ?? "\(error)"
                watches.withLock { $0[entry.index]!.failed(files, why: why) }
                logger.error(
                    "credential \(name): its files changed and do not load (\(why)); the credential loaded before stays in use",
                    metadata: metadata)
                metrics.credentialReloaded(name, success: false)
                report(
                    problem: "the new files do not load (\(why)); the credential loaded before stays in use", for: name)
                return
            }
            // Every lane's clients made ready first (their TLS contexts), then all switched: a
            // failure leaves every lane on the credential before, never some on each.
            let prepared: [APNsSender.PreparedCredential]
            do {
                prepared = try senders.map { try $0.prepareCredential(credential, at: entry.index) }
            } catch {
                let why = (error as? APNsCredentialError)?.description ?? "\(error)"
                // Not the files' fault: tried again at the next reading, said once per reason.
                guard watches.withLock({ $0[entry.index]!.switchFailed(why: why) }) else { return }
                logger.error(
                    "credential \(name): its new files load but cannot be put in use (\(why)); the credential loaded before stays in use everywhere, and the switch is tried again every \(interval)",
                    metadata: metadata)
                metrics.credentialReloaded(name, success: false)
                report(
                    problem: "the new files cannot be put in use (\(why)); the credential loaded before stays in use",
                    for: name)
                return
            }
            for (sender, prepared) in zip(senders, prepared) { sender.switchCredential(prepared) }
            watches.withLock { $0[entry.index]!.loaded(files) }
            metrics.credentialReloaded(name, success: true)
            report(problem: nil, for: name)
            // What APNs refused was the credential before: the new one starts healthy (its gauge 0,
            // readiness no longer naming it), and APNs' next answer judges it.
            observer.credentialHealthy(name)
            logger.notice(
                "credential \(name): reloaded from its files (\(Self.describe(credential))); new connections use it, open ones move to it one at a time",
                metadata: metadata)
            if case .certificate(let identity) = credential, let validity = identity.validity {
                WorkerRuntime.checkCertificates(
                    [(name, validity)], now: Date(), metrics: metrics, observer: observer, logger: logger)
            }
        }
    }

    /// Why a reloaded token key cannot be used, when its key changed and its id did not: APNs knows
    /// a key by its id, and refuses tokens signed by another key under it (403
    /// InvalidProviderToken), so every connection replaced after such a reload would fail its pushes.
    /// Apple issues every key with an id of its own. The same key in other PEM text is no change.
    static func newKeyUnderOldID(
        _ loaded: APNsCredential, replacing inUse: APNsCredential, settings: CredentialSettings
    ) -> String? {
        guard case .token(let new) = loaded, case .token(let old) = inUse, new.keyID == old.keyID,
            !new.hasSameKey(as: old), case .token(let token) = settings.kind
        else { return nil }
        let where_: String
        switch token.keyID {
        case .value: where_ = "keyId is fixed to \(old.keyID) in the configuration"
        case .file(let path): where_ = "keyIdFile \(path) still says \(old.keyID)"
        }
        return
            "the key file holds another key but \(where_): APNs would refuse the new key under the old id (403 InvalidProviderToken); a new key comes with its own id: give it in keyIdFile beside the key (both in the Secret), or set the new keyId and restart"
    }

    private func report(problem: String?, for name: String) {
        metrics.setCredentialReloadFailing(name, problem != nil)
        health.markCredentialFiles(name: name, problem: problem)
    }

    /// What an operator checks after a rotation: the key id, or the certificate's subject and expiry.
    private static func describe(_ credential: APNsCredential) -> String {
        switch credential {
        case .token(let tokens): return "key id \(tokens.keyID)"
        case .certificate(let identity):
            let expiry = identity.validity.map { ", valid until \($0.upperBound.formatted(.iso8601))" } ?? ""
            return "certificate \(identity.commonName ?? "without a common name")\(expiry)"
        }
    }
}
