import Foundation
import NIOCore

/// Encodes and decodes `Frame`s as JSON (one frame per WebSocket text message).
public enum FrameCodec {
    /// The WebSocket subprotocol that selects this protocol version at the upgrade.
    public static let subprotocol = "rtm.v1"
    /// The HTTP path of the WebSocket endpoint.
    public static let path = "/v1"

    /// Encodes a frame into a new buffer.
    public static func encode(_ frame: Frame, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        // Encoding a value type made only of strings, numbers, bools and Data cannot fail.
        // Sorted keys: the same frame always encodes to the same bytes.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let bytes = (try? encoder.encode(frame)) ?? Data("{\"type\":\"error\"}".utf8)
        var buffer = allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        return buffer
    }

    /// Decodes a frame; a malformed payload gives a `FrameDecodingError` naming the problem.
    public static func decode(_ buffer: ByteBuffer) throws(FrameDecodingError) -> Frame {
        let bytes = buffer.readableBytesView
        guard !bytes.isEmpty else { throw FrameDecodingError(reason: "empty frame") }
        do {
            return try JSONDecoder().decode(Frame.self, from: Data(bytes))
        } catch let DecodingError.keyNotFound(key, _) {
            throw FrameDecodingError(reason: "missing field '\(key.stringValue)'")
        } catch let DecodingError.typeMismatch(_, context) {
            throw FrameDecodingError(reason: "wrong type for field '\(context.codingPath.map(\.stringValue).joined(separator: "."))'")
        } catch let DecodingError.valueNotFound(_, context) {
            throw FrameDecodingError(reason: "null for field '\(context.codingPath.map(\.stringValue).joined(separator: "."))'")
        } catch let DecodingError.dataCorrupted(context) where !context.codingPath.isEmpty {
            throw FrameDecodingError(reason: "invalid value for field '\(context.codingPath.map(\.stringValue).joined(separator: "."))'")
        } catch {
            throw FrameDecodingError(reason: "not a JSON object")
        }
    }
}

/// A frame that could not be decoded.
public struct FrameDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong with it.
    public let reason: String
    /// Creates the error.
    public init(reason: String) { self.reason = reason }
    /// `malformed frame: <reason>`.
    public var description: String { "malformed frame: \(reason)" }
}
