import APNs
import Logging
import Threading

/// One provider-token authenticator per key in the process, shared by every credential entry and
/// every lane that uses the key: the key signs each period's token once, and its figures (tokens
/// signed, switches) are the key's. (The tokens would be the same bytes anyway: they are signed
/// deterministically on a schedule every process computes alike.) A key is its team, id and PEM
/// text: a key file reloaded with new text is a new key, the same text found again the same one.
package final class TokenAuthenticators: Sendable {
    private struct Key: Hashable {
        var teamID: String
        var keyID: String
        var pem: [UInt8]
    }

    /// A key id's figures, added up.
    package struct Figures: Sendable, Hashable {
        package var signed = 0
        package var switches = 0
        package var signingFailures = 0
    }

    private struct Made {
        var live: [Key: APNsTokenAuthenticator] = [:]
        /// The figures of authenticators dropped since, by key id, while the id has a live one.
        var dropped: [String: Figures] = [:]
    }

    private let schedule: APNsTokenSchedule
    private let made = Locked(Made())
    private let logger: Logger?

    /// - Parameter logger: where a wall clock seen to jump is said (`nil`: nowhere).
    package init(schedule: APNsTokenSchedule = .apple, logger: Logger? = nil) {
        self.schedule = schedule
        self.logger = logger
    }

    /// Wall-clock jumps seen (30 s or more against the monotonic clock), by the key that saw most:
    /// every key's authenticator sees the same jump.
    package var clockJumps: Int {
        made.withLock { $0.live.values.map(\.clockJumps).max() ?? 0 }
    }

    /// Each key id's figures since start (those of its authenticators dropped since included), and
    /// the key ids that have no authenticator left (a rotation moved every credential off them):
    /// their series leave `/metrics`. Authenticators no credential, pool or connection holds any
    /// more are dropped first (`drop`).
    package func figures() -> (byKeyID: [String: Figures], gone: [String]) {
        made.withLock { made in
            let gone = Self.drop(&made)
            var figures = made.dropped
            for authenticator in made.live.values {
                var sum = figures[authenticator.keyID] ?? Figures()
                sum.signed += authenticator.tokensSigned
                sum.switches += authenticator.tokenSwitches
                sum.signingFailures += authenticator.signingFailures
                figures[authenticator.keyID] = sum
            }
            return (figures, gone)
        }
    }

    /// How many authenticators are kept (each holds its private key): for tests.
    package var count: Int {
        made.withLock { made in
            _ = Self.drop(&made); return made.live.count
        }
    }

    /// Drops every authenticator that only this holds: a key rotated away, once the last connection
    /// that used it is replaced, or a key loaded and then refused. Its private key is freed with it.
    /// Returns the key ids left with none. (Nothing else can take a new reference meanwhile: one is
    /// only handed out under this lock.)
    private static func drop(_ made: inout Made) -> [String] {
        var droppedIDs: Set<String> = []
        for key in Array(made.live.keys) where isKnownUniquelyReferenced(&made.live[key]!) {
            let authenticator = made.live.removeValue(forKey: key)!
            var sum = made.dropped[key.keyID] ?? Figures()
            sum.signed += authenticator.tokensSigned
            sum.switches += authenticator.tokenSwitches
            sum.signingFailures += authenticator.signingFailures
            made.dropped[key.keyID] = sum
            droppedIDs.insert(key.keyID)
        }
        let liveIDs = Set(made.live.keys.map(\.keyID))
        let gone = droppedIDs.subtracting(liveIDs).union(Set(made.dropped.keys).subtracting(liveIDs))
        for keyID in gone { made.dropped[keyID] = nil }
        return gone.sorted()
    }

    /// The key's authenticator, made from its PEM text the first time.
    func authenticator(teamID: String, keyID: String, pem: [UInt8]) throws -> APNsTokenAuthenticator {
        let key = Key(teamID: teamID, keyID: keyID, pem: pem)
        if let existing = made.withLock({ $0.live[key] }) { return existing }
        let logger = self.logger
        let authenticator = try APNsTokenAuthenticator(
            teamID: teamID, keyID: keyID, key: try APNsSigningKey(pem: pem), schedule: schedule,
            onClockJump: { jump in
                logger?.warning(
                    "the wall clock moved \(jump > 0 ? "forward" : "back") by \(abs(jump)) s against the monotonic clock (NTP stepped it, or the machine was paused): new provider tokens follow the wall clock, connections keep theirs by the monotonic clock; APNs refuses tokens from a clock more than about 6 minutes behind its own",
                    metadata: ["keyID": "\(keyID)", "jumpSeconds": "\(jump)"])
            },
            onSigningFailure: { error, kept in
                // At most one a connection's retry interval: a failed token is not signed again sooner.
                logger?.error(
                    "the provider token of key \(keyID) could not be signed: \(error); \(kept.map { "connections keep \($0) until it is an hour old" } ?? "requests that need it fail")",
                    metadata: ["keyID": "\(keyID)", "teamID": "\(teamID)"])
            })
        return made.withLock { made in
            if let existing = made.live[key] { return existing }
            made.live[key] = authenticator
            return authenticator
        }
    }
}
