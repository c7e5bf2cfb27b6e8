import RTMProtocol

/// An error from the SDK or the server: a stable numeric code (the reference's error codes,
/// `RTMErrorCode`), the operation that failed, and a readable reason.
public struct RTMError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The numeric code.
    public let code: RTMErrorCode
    /// The API that failed (`login`, `publish`, `config`, …).
    public let operation: String
    /// What went wrong, naming the field or limit concerned.
    public let reason: String

    /// Creates an error.
    public init(_ code: RTMErrorCode, operation: String, _ reason: String) {
        self.code = code
        self.operation = operation
        self.reason = reason
    }

    /// `publish failed: channelMessageLengthExceedLimitation (-11010): payload is …`.
    public var description: String { "\(operation) failed: \(code) (\(code.rawValue)): \(reason)" }
}
