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

    private let schedule: APNsTokenSchedule
    private let made = Locked<[Key: APNsTokenAuthenticator]>([:])
    private let logger: Logger?

    /// - Parameter logger: where a wall clock seen to jump is said (`nil`: nowhere).
    package init(schedule: APNsTokenSchedule = .apple, logger: Logger? = nil) {
        self.schedule = schedule
        self.logger = logger
    }

    /// Wall-clock jumps seen (30 s or more against the monotonic clock), by the key that saw most:
    /// every key's authenticator sees the same jump.
    package var clockJumps: Int {
        made.withLock { $0.values.map(\.clockJumps).max() ?? 0 }
    }

    /// Each key's figures since start, by key id: tokens signed, and connections that moved to a
    /// newer token.
    package var figures: [String: (signed: Int, switches: Int)] {
        made.withLock { made in
            made.values.reduce(into: [:]) { figures, authenticator in
                let before = figures[authenticator.keyID] ?? (0, 0)
                figures[authenticator.keyID] = (
                    before.signed + authenticator.tokensSigned, before.switches + authenticator.tokenSwitches
                )
            }
        }
    }

    /// The key's authenticator, made from its PEM text the first time.
    func authenticator(teamID: String, keyID: String, pem: [UInt8]) throws -> APNsTokenAuthenticator {
        let key = Key(teamID: teamID, keyID: keyID, pem: pem)
        if let existing = made.withLock({ $0[key] }) { return existing }
        let logger = self.logger
        let authenticator = try APNsTokenAuthenticator(
            teamID: teamID, keyID: keyID, key: try APNsSigningKey(pem: pem), schedule: schedule,
            onClockJump: { jump in
                logger?.warning(
                    "the wall clock moved \(jump > 0 ? "forward" : "back") by \(abs(jump)) s against the monotonic clock (NTP stepped it, or the machine was paused): new provider tokens follow the wall clock, connections keep theirs by the monotonic clock; APNs refuses tokens from a clock more than about 6 minutes behind its own",
                    metadata: ["keyID": "\(keyID)", "jumpSeconds": "\(jump)"])
            })
        return made.withLock { made in
            if let existing = made[key] { return existing }
            made[key] = authenticator
            return authenticator
        }
    }
}
