/// The release this build is: `apns-worker --version`, the startup log line and the
/// `apns_worker_build_info` gauge print it. CHANGELOG.md's newest release heading names the same
/// version (a test compares them); bump both together when cutting a release.
package enum WorkerVersion {
    package static let current = "0.1.0"
}
