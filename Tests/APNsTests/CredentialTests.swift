import Foundation
import Testing

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
            String(decoding: try base64URLDecode(parts[1]), as: UTF8.self) == #"{"iss":"TEAM123456","iat":1700000000}"#)
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

@Suite("Provider token timing (manual clock, no sleeps)")
struct TokenTimingTests {
    private func makeAuthenticator(_ clock: ManualClock) throws -> APNsTokenAuthenticator {
        let pki = try TestPKI()
        return try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: try APNsSigningKey(file: pki.tokenKey),
            clock: clock, epochNow: 1_700_000_000)
    }

    @Test("a token is reused for 50 minutes, then replaced, with iat moving with the clock")
    func refreshAfterFiftyMinutes() throws {
        let clock = ManualClock()
        let authenticator = try makeAuthenticator(clock)
        let first = try authenticator.currentToken()
        clock.advance(by: .seconds(49 * 60 + 59))
        #expect(try authenticator.currentToken() == first)
        clock.advance(by: .seconds(1))
        let second = try authenticator.currentToken()
        #expect(second != first)
        #expect(second.generation == 2)
        #expect(second.issuedAt == 1_700_000_000 + 50 * 60)
        #expect(authenticator.tokensIssued == 2)
    }

    // iat was the wall clock at start plus the monotonic age: a clock corrected after start (NTP)
    // never reached the tokens, and APNs kept refusing them as expired or from the future.
    @Test("iat is the wall clock at signing: a corrected clock shows in the next token")
    func issuedAtFollowsTheWallClock() throws {
        let clock = ManualClock()
        let wall = SettableWallClock(1_700_000_000)
        let pki = try TestPKI()
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: try APNsSigningKey(file: pki.tokenKey), clock: clock,
            wallClock: { wall.now })
        #expect(try authenticator.currentToken().issuedAt == 1_700_000_000)
        wall.set(1_700_003_600 + 0.9)  // corrected an hour ahead while the monotonic clock moved 50 min
        clock.advance(by: .seconds(50 * 60))
        #expect(try authenticator.currentToken().issuedAt == 1_700_003_600)
    }

    @Test("ExpiredProviderToken refreshes only if the token is 20 minutes old, and only once")
    func expiredProviderTokenRespectsTwentyMinutes() throws {
        let clock = ManualClock()
        let authenticator = try makeAuthenticator(clock)
        let first = try authenticator.currentToken()
        clock.advance(by: .seconds(19 * 60))
        #expect(try authenticator.tokenExpired(first) == false)
        #expect(try authenticator.currentToken() == first)
        clock.advance(by: .seconds(60))
        #expect(try authenticator.tokenExpired(first) == true)
        let second = try authenticator.currentToken()
        #expect(second.generation == 2)
        // Every other connection reporting the same old token changes nothing more.
        for _ in 0..<100 { #expect(try authenticator.tokenExpired(first) == true) }
        #expect(try authenticator.currentToken() == second)
        #expect(authenticator.tokensIssued == 2)
    }

    @Test("TooManyProviderTokenUpdates cannot be provoked: at most one token per 20 minutes under any load")
    func neverMoreThanOnePerTwentyMinutes() async throws {
        let clock = ManualClock()
        let authenticator = try makeAuthenticator(clock)
        // Three simulated hours in 1-minute steps; 50 "connections" each take a token and report it expired.
        for _ in 0..<(3 * 60) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        let token = try authenticator.currentToken()
                        try authenticator.tokenExpired(token)
                    }
                }
                try await group.waitForAll()
            }
            clock.advance(by: .seconds(60))
        }
        // 180 minutes / 20 = 9 refreshes at most, plus the first token.
        #expect(authenticator.tokensIssued <= 10)
        #expect(authenticator.tokensIssued >= 9)
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
