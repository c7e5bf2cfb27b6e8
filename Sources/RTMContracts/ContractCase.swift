import Dispatch
import Testing

/// One rule of a seam's contract, written once and run against every implementation of the
/// seam: a parameterised `@Test` takes a contract's `cases` as its arguments and runs each with
/// a fresh subject (the implementation under test and what it needs).
///
/// ```swift
/// @Test(arguments: LockStoreContract.cases)
/// func contract(_ rule: ContractCase<LockStoreSubject>) async throws {
///     try await rule.run(on: makeSubject())
/// }
/// ```
public struct ContractCase<Subject: Sendable>: Sendable, CustomTestStringConvertible {
    /// The rule, with the SPEC or reference id it checks (the test's name).
    public let name: String
    /// A rule that an implementation is known to break, and how: the case still runs, its
    /// failures reported as a known issue (and a pass reported too, once it is fixed).
    public let knownDifference: String?
    private let body: @Sendable (Subject) async throws -> Void

    /// A rule named `name`, checked by `body`; `knownDifference`: what is known to break it.
    public init(_ name: String, knownDifference: String? = nil, _ body: @escaping @Sendable (Subject) async throws -> Void) {
        self.name = name
        self.knownDifference = knownDifference
        self.body = body
    }

    /// The name the test report shows.
    public var testDescription: String { name }

    /// Checks the rule on `subject`.
    public func run(on subject: Subject) async throws {
        guard let knownDifference else { return try await body(subject) }
        await withKnownIssue(Comment(rawValue: knownDifference)) { try await body(subject) }
    }
}

/// Runs a blocking store call off the cooperative pool, as the server's store queues do (a
/// PostgreSQL store's synchronous call blocks its thread until the database answers).
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}
