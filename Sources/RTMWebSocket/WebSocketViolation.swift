import NIOCore
import NIOWebSocket

/// A peer broke RFC 6455, and the close code that answers it (RFC 6455 §7.4.1).
///
/// Thrown by the server's frame decoder and the SDK's message aggregator; one
/// `WebSocketViolationHandler` turns it into a close frame with ``code`` and closes.
package struct WebSocketViolation: Error, Sendable, Equatable, CustomStringConvertible {
    /// The close code sent to the peer: 1002, 1007 or 1009.
    package let code: WebSocketErrorCode
    /// What the peer did, for logs and tests.
    package let description: String

    /// 1002: a frame or message that breaks the protocol (RFC 6455 §7.4.1).
    package static func protocolError(_ description: String) -> Self {
        Self(code: .protocolError, description: description)
    }

    /// 1007: a text message that is not valid UTF-8 (RFC 6455 §8.1).
    package static func invalidUTF8(_ description: String) -> Self {
        Self(code: .dataInconsistentWithMessage, description: description)
    }

    /// 1009: a frame or message larger than this endpoint takes.
    package static func tooBig(_ description: String) -> Self {
        Self(code: .messageTooLarge, description: description)
    }

    /// The violation behind an error of NIO's frame decoder (the SDK decodes with it).
    package init(_ error: NIOWebSocketError) {
        switch error {
        case .invalidFrameLength: self.init(code: .messageTooLarge, description: "\(error)")
        case .fragmentedControlFrame, .multiByteControlFrameLength: self.init(code: .protocolError, description: "\(error)")
        }
    }

    package init(code: WebSocketErrorCode, description: String) {
        self.code = code
        self.description = description
    }

    /// The close code as a number (1002, 1007, 1009).
    package var codeNumber: Int { Int(UInt16(webSocketErrorCode: code)) }
}
