import Foundation
import JSONSchema
import Testing

/// The official JSON Schema Test Suite, draft-07, as Debian ships it. Required files must pass in
/// full; optional files may only fail where docs/json-schema.md says why (listed below).
@Suite("JSON-Schema-Test-Suite draft7")
struct TestSuiteTests {
    /// Optional tests known to fail, each explained in docs/json-schema.md. A failure not listed here
    /// fails the run; a listed one that starts passing is reported so the list can shrink.
    static let knownOptionalFailures: Set<String> = [
        // contentMediaType / contentEncoding are annotations in draft-07; not asserted.
        "optional/content.json | validation of string-encoded content based on media type | an invalid JSON document",
        "optional/content.json | validation of binary string-encoding | an invalid base64 string (% is not a valid character)",
        "optional/content.json | validation of binary-encoded media type documents | a validly-encoded invalid JSON document",
        "optional/content.json | validation of binary-encoded media type documents | an invalid base64 string that is valid JSON",
        // idn-hostname needs IDNA 2008 tables (RFC 5892) and Punycode lengths; not implemented.
        "optional/format/idn-hostname.json | validation of internationalized host names | illegal first char U+302E Hangul single dot tone mark",
        "optional/format/idn-hostname.json | validation of internationalized host names | contains illegal char U+302E Hangul single dot tone mark",
        "optional/format/idn-hostname.json | validation of internationalized host names | a host name with a component too long",
    ]

    @Test("required files: every test passes")
    func required() throws {
        let files = TestSuite.files(in: TestSuite.draft7)
        try #require(!files.isEmpty, "no suite at \(TestSuite.draft7): install Debian's json-schema-test-suite")
        var passed = 0
        var failures: [TestSuite.Failure] = []
        for file in files {
            let result = try TestSuite.run(file)
            print("draft7/\(result.file): \(result.passed) passed, \(result.failures.count) failed")
            passed += result.passed
            failures += result.failures
        }
        print("draft7 required total: \(passed) passed, \(failures.count) failed")
        for failure in failures { Issue.record("required test failed: \(failure)") }
        #expect(passed > 0)
    }

    @Test("optional files: only documented failures")
    func optional() throws {
        let files =
            TestSuite.files(in: TestSuite.draft7 + "/optional")
            + TestSuite.files(in: TestSuite.draft7 + "/optional/format")
        try #require(!files.isEmpty, "no optional suite files under \(TestSuite.draft7)/optional")
        var passed = 0
        var failures: [TestSuite.Failure] = []
        for file in files {
            let result = try TestSuite.run(file)
            print("draft7/\(result.file): \(result.passed) passed, \(result.failures.count) failed")
            passed += result.passed
            failures += result.failures
        }
        print("draft7 optional total: \(passed) passed, \(failures.count) failed")
        let failed = Set(failures.map { "\($0.file) | \($0.group) | \($0.test)" })
        for failure in failures {
            print("  optional failure: \(failure)")
            if !Self.knownOptionalFailures.contains("\(failure.file) | \(failure.group) | \(failure.test)") {
                Issue.record("optional test failed and is not documented: \(failure)")
            }
        }
        for known in Self.knownOptionalFailures.subtracting(failed) {
            print("  documented optional failure now passes: \(known)")
        }
        #expect(passed > 0)
    }
}
