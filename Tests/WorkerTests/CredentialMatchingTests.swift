import APNs
import Testing

@testable import Worker

@Suite("Credential matching")
struct CredentialMatchingTests {
    private let settings: APNsSettings = {
        let key = TokenCredentialSettings(teamID: "T", keyID: "K", key: .file("/k.p8"))
        return APNsSettings(credentials: [
            CredentialSettings(name: "app", topics: ["com.example.app", "com.example.app.*"], kind: .token(key)),
            CredentialSettings(
                name: "mdm", topics: ["com.apple.mgmt.External.*"],
                kind: .certificate(.init(source: .pkcs12(file: "/m.p12")))),
            CredentialSettings(name: "catch-voip", topics: ["com.example.app.voip", "com.other"], kind: .token(key)),
        ])
    }()

    @Test(
        "exact topics and .* prefixes, first match wins",
        arguments: [
            ("com.example.app", "app"), ("com.example.app.voip", "app"),
            ("com.example.app.push-type.liveactivity", "app"),
            ("com.apple.mgmt.External.1234-abcd", "mdm"), ("com.other", "catch-voip"),
        ])
    func matches(topic: String, credential: String) {
        #expect(settings.credential(forTopic: topic)?.name == credential)
    }

    @Test(
        "no match",
        arguments: [
            "com.example", "com.example.application", "com.apple.mgmt.External", "com.example.app.", "", "com.other.x",
        ])
    func noMatch(topic: String) {
        #expect(settings.credential(forTopic: topic) == nil)
    }
}

@Suite("apns.proxy")
struct ProxySettingTests {
    @Test("environment (the default) follows HTTPS_PROXY and NO_PROXY; none and a URL override it")
    func resolution() throws {
        var settings = APNsSettings(credentials: [])
        let environment = ["HTTPS_PROXY": "http://egress.corp:3128", "NO_PROXY": "localhost,.internal"]
        #expect(try settings.proxy(forHost: "api.push.apple.com", environment: environment)?.host == "egress.corp")
        #expect(try settings.proxy(forHost: "sim.internal", environment: environment) == nil)
        #expect(
            try settings.proxy(forHost: "api.push.apple.com", environment: ["https_proxy": "http://p:1"])?.port == 1)
        #expect(try settings.proxy(forHost: "api.push.apple.com", environment: [:]) == nil)
        settings.proxy = .none
        #expect(try settings.proxy(forHost: "api.push.apple.com", environment: environment) == nil)
        settings.proxy = .url(APNsProxy(host: "explicit", port: 8080))
        #expect(try settings.proxy(forHost: "sim.internal", environment: environment)?.host == "explicit")
        settings.proxy = .environment
        let bad = #expect(throws: ConfigurationError.self) {
            try settings.proxy(forHost: "api.push.apple.com", environment: ["HTTPS_PROXY": "socks5://u:hunter2@p:1"])
        }
        #expect(bad?.environmentVariable == "HTTPS_PROXY")
        #expect(!"\(String(describing: bad))".contains("hunter2"))
    }

    @Test("the file: a URL, none or environment; a bad URL names the key and never the password")
    func decoding() throws {
        func configuration(_ proxy: String) throws -> WorkerConfiguration {
            try WorkerConfiguration.parse(
                ConfigurationFixtures.minimalYAML.replacingOccurrences(
                    of: "apns:\n", with: "apns:\n  proxy: \"\(proxy)\"\n"))
        }
        #expect(try configuration("none").apns.proxy == .none)
        #expect(
            try configuration("http://u:p@egress:3128").apns.proxy
                == .url(APNsProxy(host: "egress", port: 3128, username: "u", password: "p")))
        let error = #expect(throws: ConfigurationError.self) { try configuration("ftp://u:hunter2@egress") }
        #expect(error?.keyPath == "apns.proxy")
        #expect(!"\(String(describing: error))".contains("hunter2"))
    }
}
