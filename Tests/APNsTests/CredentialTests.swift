import Foundation
import Testing
import Threading

@testable import APNs

@Suite("Credentials and provider tokens")
struct CredentialTests {
    @Test("a .p8 key signs an ES256 JWT that openssl verifies")
    func jwtVerifiesWithOpenSSL() throws {
        let pki = try TestPKI()
        let key = try APNsSigningKey(file: pki.tokenKey)
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: key, clock: ManualClock(), epochNow: 1_700_000_000)
        let token = try authenticator.currentToken()
        let parts = token.jwt.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        #expect(
            String(decoding: try base64URLDecode(parts[0]), as: UTF8.self) == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(
            String(decoding: try base64URLDecode(parts[1]), as: UTF8.self)
                == #"{"iss":"TEAM123456","iat":1699999200}"#, "the period's iat: on the 30-minute grid")
        #expect(token.authorization.hasPrefix("bearer "))
        #expect(!token.description.contains(parts[2]))

        let signature = try base64URLDecode(parts[2])
        #expect(signature.count == 64)
        let directory = try TemporaryDirectory()
        try Data((parts[0] + "." + parts[1]).utf8).write(to: URL(fileURLWithPath: directory.file("input")))
        try Data(derSignature(joseSignature: signature)).write(to: URL(fileURLWithPath: directory.file("sig.der")))
        let output = try runCommand([
            "openssl", "dgst", "-sha256", "-verify", pki.tokenPublicKey, "-signature", directory.file("sig.der"),
            directory.file("input"),
        ])
        #expect(String(decoding: output, as: UTF8.self).contains("Verified OK"))
    }

    @Test("keys that are not P-256 or not PEM are refused, with OpenSSL's words")
    func badKeysRefused() throws {
        let pki = try TestPKI()
        #expect(throws: APNsCredentialError.self) { try APNsSigningKey(file: pki.makeRSAKey()) }
        do {
            _ = try APNsSigningKey(
                pem: Array("-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n".utf8))
            Issue.record("garbage key accepted")
        } catch {
            #expect(error.code == .keyUnreadable)
            #expect(error.openSSL?.stack.isEmpty == false)
        }
        #expect(throws: APNsCredentialError.self) { try APNsSigningKey(file: pki.directory.file("missing.p8")) }
    }

    @Test("team and key ids must be 10 letters or digits")
    func identifiersChecked() throws {
        let pki = try TestPKI()
        let key = try APNsSigningKey(file: pki.tokenKey)
        #expect(throws: APNsCredentialError.self) {
            try APNsTokenAuthenticator(teamID: "TEAM:23456", keyID: "KEY1234567", key: key)
        }
        #expect(throws: APNsCredentialError.self) {
            try APNsTokenAuthenticator(teamID: "TEAM123456", keyID: "SHORT", key: key)
        }
    }

    @Test("certificate identities load from PEM and PKCS#12; a wrong password is refused")
    func certificateIdentities() throws {
        let pki = try TestPKI()
        let pem = try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.clientKey)
        #expect(pem.commonName == "Apple Push Services: com.example.app")
        let p12 = try APNsCertificateIdentity(pkcs12File: pki.clientPKCS12, password: pki.pkcs12Password)
        #expect(p12.commonName == "Apple Push Services: com.example.app")
        #expect(throws: APNsCredentialError.self) {
            try APNsCertificateIdentity(pkcs12File: pki.clientPKCS12, password: "wrong")
        }
        // A key that is not the certificate's.
        #expect(throws: APNsCredentialError.self) {
            try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.serverKey)
        }
    }

    @Test(
        "a certificate's validity is read as openssl wrote it; outside it, the identity says expired or not yet valid")
    func certificateValidity() throws {
        let pki = try TestPKI()  // the client certificate: valid from now for 2 days
        let now = Date()
        let pem = try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.clientKey)
        let p12 = try APNsCertificateIdentity(pkcs12File: pki.clientPKCS12, password: pki.pkcs12Password)
        let validity = try #require(pem.validity)
        #expect(p12.validity == validity)
        #expect(abs(validity.lowerBound.timeIntervalSince(now)) < 120, "\(validity)")
        #expect(abs(validity.upperBound.timeIntervalSince(now) - 2 * 86_400) < 120, "\(validity)")
        try pem.checkValid(at: now)
        let expired = #expect(throws: APNsCredentialError.self) {
            try pem.checkValid(at: now.addingTimeInterval(3 * 86_400))
        }
        #expect(expired?.code == .certificateExpired)
        #expect(expired?.message.contains("expired on \(validity.upperBound.formatted(.iso8601))") == true)
        let early = #expect(throws: APNsCredentialError.self) {
            try pem.checkValid(at: now.addingTimeInterval(-86_400))
        }
        #expect(early?.code == .certificateNotYetValid)
    }
}

@Suite("Provider tokens on the fleet's schedule (manual clocks, no sleeps)")
struct TokenTimingTests {
    let schedule = APNsTokenSchedule.apple
    static let start: Int64 = 1_800_000_000 - 1_800_000_000 % 1800  // on the grid

    private func makeAuthenticator(_ wall: SettableWallClock, key: String) throws -> APNsTokenAuthenticator {
        try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: try APNsSigningKey(file: key),
            wallClock: { wall.now })
    }

    // Every connection, opened at any minute of three hours, keeps the token it first used for at
    // least 22 minutes (Apple's 20 and a margin) and never uses one 54 minutes old (6 minutes before
    // the hour: a pod's clock may run that far behind); at any minute at most two tokens are in use,
    // and a new one comes into use once per period.
    @Test("connections opened at every minute: each token kept 22 minutes or more, none used at 54, two at most in use")
    func scheduleBounds() {
        struct Use {
            var issuedAt: Int64
            var firstUse: Int64
            var lastUse: Int64
        }
        var connections: [[Use]] = []
        var inUse: [Int64: Set<Int64>] = [:]
        let minutes = 3 * 60
        for opened in 0..<minutes {
            var bound: Int64?
            var uses: [Use] = []
            for minute in opened..<(minutes + 60) {
                let now = Self.start + Int64(minute * 60)
                let issuedAt = schedule.issuedAt(bound: bound, now: now)
                if issuedAt != bound { uses.append(Use(issuedAt: issuedAt, firstUse: now, lastUse: now)) }
                uses[uses.count - 1].lastUse = now
                bound = issuedAt
                #expect(now - issuedAt < 54 * 60, "used at \(now - issuedAt) s old")
                #expect(issuedAt <= now - schedule.adoptionDelay, "used before it came into use")
                if minute < minutes { inUse[now, default: []].insert(issuedAt) }
            }
            connections.append(uses)
        }
        for uses in connections {
            // The last token of each run is cut short by the end of the run, not by a switch.
            for use in uses.dropLast() {
                #expect(use.lastUse + 60 - use.firstUse >= 22 * 60, "kept \(use.lastUse + 60 - use.firstUse) s")
            }
            #expect(uses.allSatisfy { $0.issuedAt % 1800 == 0 })
        }
        #expect(inUse.values.allSatisfy { $0.count <= 2 }, "\(inUse.values.map(\.count).max() ?? 0) at once")
        let distinct = Set(inUse.values.flatMap { $0 })
        #expect(distinct.count == 3 * 60 / 30 + 1, "one new token per period: \(distinct.count)")
    }

    @Test("two pods, clocks a minute apart, sign the same bytes for a period; a connection switches at 54 minutes")
    func sameTokenAcrossPods() throws {
        let pki = try TestPKI()
        let early = SettableWallClock(Double(Self.start) + 5 * 60)
        let late = SettableWallClock(Double(Self.start) + 4 * 60)
        let first = try makeAuthenticator(early, key: pki.tokenKey)
        let second = try makeAuthenticator(late, key: pki.tokenKey)
        #expect(try first.currentToken() == second.currentToken())
        #expect(try first.currentToken().issuedAt == Self.start)
        // A connection of the first pod, from minute 5: its token until minute 54, then the next.
        var bound: APNsTokenBinding?
        let opening = first.token(forConnection: &bound)
        early.set(Double(Self.start) + 53 * 60 + 59)
        #expect(first.token(forConnection: &bound) == opening)
        early.set(Double(Self.start) + 54 * 60)
        let next = first.token(forConnection: &bound)
        #expect(next?.issuedAt == Self.start + 1800)
        #expect(first.tokenSwitches == 1)
        late.set(Double(Self.start) + 54 * 60 - 60)
        #expect(try second.currentToken() == next, "the other pod's current token: the same bytes")
        #expect(first.tokensSigned == 2)
    }

    // iat was the wall clock at start plus the monotonic age: a clock corrected after start (NTP)
    // never reached the tokens, and APNs kept refusing them as expired or from the future.
    @Test("iat follows the wall clock: a corrected clock shows in the next period's token")
    func issuedAtFollowsTheWallClock() throws {
        let pki = try TestPKI()
        let wall = SettableWallClock(Double(Self.start) + 300)
        let authenticator = try makeAuthenticator(wall, key: pki.tokenKey)
        #expect(try authenticator.currentToken().issuedAt == Self.start)
        wall.set(Double(Self.start) + 3600 + 300)  // corrected an hour ahead
        #expect(try authenticator.currentToken().issuedAt == Self.start + 3600)
    }

    // The request's token is picked when its headers are encoded, after APNsClient.prepare made sure
    // the period's token was signed. A connection reaching its switch age as a period turns signs the
    // next token there; when that failed, the request went out without `authorization` (403
    // MissingProviderToken) although the connection's own token had minutes left.
    @Test("a token that cannot be signed: the connection keeps its own until it is an hour old, counted and said")
    func failedResignKeepsTheBoundToken() throws {
        let pki = try TestPKI()
        let failing = Locked(false)
        let failures = Locked<[String]>([])
        let key = try APNsSigningKey(
            pem: try pki.bytes(pki.tokenKey),
            signing: { key, message in
                if failing.withLock({ $0 }) { throw OpenSSLError(.signingFailed, "signing failed (test)") }
                return try key.signES256Deterministic(message)
            })
        let wall = SettableWallClock(Double(Self.start) + 5 * 60)
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: key, wallClock: { wall.now },
            onSigningFailure: { error, kept in
                failures.withLock { $0.append("\(error.code) kept \(kept?.issuedAt ?? -1)") }
            })
        var encoder = APNsHeaderEncoder(authority: "api.push.apple.com")
        let request = APNsHTTP2Request(
            content: .notification(
                APNsNotification(
                    deviceToken: try APNsDeviceToken("abcd"), topic: "com.example.app", pushType: .alert,
                    priority: .immediate, payload: Array("{}".utf8))),
            tokens: authenticator, deadline: .now(), completion: { _ in })
        func authorization() -> String? {
            encoder.headers(for: request).first { $0.name == "authorization" }?.value
        }
        let first = try #require(authorization())
        #expect(first == (try authenticator.currentToken()).authorization)

        // 54 minutes: the connection's switch age; the next period's token cannot be signed.
        failing.withLock { $0 = true }
        wall.set(Double(Self.start) + 54 * 60)
        #expect(authorization() == first, "the connection keeps its token")
        #expect(authenticator.signingFailures == 1)
        #expect(failures.withLock { $0 } == ["signingFailed kept \(Self.start)"])
        // Tried again at most every 10 s, not at every request.
        wall.set(Double(Self.start) + 54 * 60 + 5)
        #expect(authorization() == first)
        #expect(authenticator.signingFailures == 1)
        wall.set(Double(Self.start) + 54 * 60 + 11)
        #expect(authorization() == first)
        #expect(authenticator.signingFailures == 2)
        // An hour old: APNs would refuse it; nothing to keep.
        wall.set(Double(Self.start) + 60 * 60)
        #expect(authorization() == nil)
        // Signing works again: the next token.
        failing.withLock { $0 = false }
        wall.set(Double(Self.start) + 60 * 60 + 1)
        let next = try #require(authorization())
        #expect(next != first)
        #expect(next == (try authenticator.token(issuedAt: Self.start + 1800)).authorization)
    }

    @Test("a key that cannot sign: currentToken throws signingFailed, counted")
    func signingFailureCounted() throws {
        let pki = try TestPKI()
        let key = try APNsSigningKey(
            pem: try pki.bytes(pki.tokenKey),
            signing: { key, message in
                try key.signES256Deterministic(
                    message, implementation: DeterministicES256.implementation, tamper: { $0[40] ^= 0x80 })
            })
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: key, wallClock: { Double(Self.start) })
        #expect {
            try authenticator.currentToken()
        } throws: { error in
            (error as? APNsCredentialError)?.code == .signingFailed
                && "\(error)".contains("did not verify with the key's public key")
        }
        #expect(authenticator.signingFailures == 1)
        #expect(authenticator.tokensSigned == 0)
    }

    @Test("a schedule scaled down for tests keeps the same proportions; the shortest is 15 s")
    func scaledSchedule() {
        let scaled = APNsTokenSchedule(periodSeconds: 60)
        #expect(scaled.adoptionDelay == 4 && scaled.switchAge == 108)
        #expect(APNsTokenSchedule(periodSeconds: 1).period == 15)
        #expect(APNsTokenSchedule.apple.adoptionDelay == 120 && APNsTokenSchedule.apple.switchAge == 3240)
    }
}

func base64URLDecode(_ text: String) throws -> [UInt8] {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let data = Data(base64Encoded: base64) else { throw TestFailure("not base64url") }
    return Array(data)
}

/// r || s back to a DER ECDSA-Sig-Value, written here independently of the code under test.
func derSignature(joseSignature: [UInt8]) -> [UInt8] {
    func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var value = Array(bytes.drop(while: { $0 == 0 }))
        if value.isEmpty { value = [0] }
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02, UInt8(value.count)] + value
    }
    let body = integer(joseSignature[0..<32]) + integer(joseSignature[32..<64])
    return [0x30, UInt8(body.count)] + body
}

/// A settable wall clock (seconds since 1970) for token tests.
final class SettableWallClock: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Double

    init(_ value: Double) { self.value = value }

    var now: Double { lock.withLock { value } }
    func set(_ newValue: Double) { lock.withLock { value = newValue } }
}
