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
