/// What to do about one credential's files, from successive readings of them: the reloader's
/// decisions, without I/O or clocks, so that each rule is tested by feeding readings.
///
/// - Files as they were when the credential in use was loaded: nothing to do (and a problem reported
///   for other contents is over).
/// - Files that differ: loaded once two readings in a row agree, so that a file caught half-written
///   (a writer that does not replace it at once, as Kubernetes does) is not loaded, nor reported.
/// - Contents that failed to load, or files that cannot be read, are reported once, not at every
///   reading; the credential in use stays in use.
package struct CredentialFileWatch: Sendable {
    /// One reading of a credential's files.
    package enum Reading: Sendable, Hashable {
        case files(CredentialFiles)
        /// A file could not be read: why (missing, permission refused, a directory).
        case unreadable(String)
    }

    package enum Decision: Sendable, Equatable {
        case none
        /// Load these contents; say `loaded` or `failed` after.
        case load(CredentialFiles)
        /// The files cannot be read (reported once per reason); the credential in use stays.
        case unreadable(String)
        /// A problem reported before is over: the files are back to those in use.
        case restored
    }

    /// The contents of the credential in use.
    package private(set) var inUse: CredentialFiles
    /// Why the files on disk are not in use, while that lasts.
    package private(set) var problem: String?
    /// The reading before, when it differed from the files in use.
    private var previous: Reading?
    /// The reading last reported as a problem, so that it is reported once.
    private var reported: Reading?

    package init(inUse: CredentialFiles) {
        self.inUse = inUse
    }

    package mutating func observe(_ reading: Reading) -> Decision {
        if case .files(let files) = reading, files == inUse {
            previous = nil
            reported = nil
            guard problem != nil else { return .none }
            problem = nil
            return .restored
        }
        defer { previous = reading }
        guard reading == previous, reading != reported else { return .none }
        switch reading {
        case .files(let files): return .load(files)
        case .unreadable(let why):
            reported = reading
            problem = why
            return .unreadable(why)
        }
    }

    /// `files` loaded and in use.
    package mutating func loaded(_ files: CredentialFiles) {
        inUse = files
        previous = nil
        reported = nil
        problem = nil
    }

    /// The files loaded but the credential could not be put in use (`why`: not the files' fault, a
    /// TLS context that could not be made): the credential in use stays, and the same files are
    /// loaded again at the next reading. Whether `why` is new (to be said; not when it is the
    /// reason already reported).
    package mutating func switchFailed(why: String) -> Bool {
        defer { problem = why }
        return problem != why
    }

    /// `files` did not load (`why`); the credential in use stays.
    package mutating func failed(_ files: CredentialFiles, why: String) {
        reported = .files(files)
        problem = why
    }
}
