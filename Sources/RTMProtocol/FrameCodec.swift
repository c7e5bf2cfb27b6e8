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

    /// Decodes a frame; a malformed payload gives a `FrameDecodingError` naming the problem
    /// (the field and what was wrong with it) and carrying the request's `id` when it could be
    /// read, so the error reply can be matched to its request.
    public static func decode(_ buffer: ByteBuffer) throws(FrameDecodingError) -> Frame {
        let bytes = buffer.readableBytesView
        guard !bytes.isEmpty else { throw FrameDecodingError(reason: "empty frame") }
        let data = Data(bytes)
        do {
            return try JSONDecoder().decode(Frame.self, from: data)
        } catch {
            throw FrameDecodingError(reason: decodingProblem(error), requestID: requestID(in: data))
        }
    }

    /// The `id` of a request that did not decode as a whole (a field of the wrong type, say):
    /// nil if the JSON itself is broken or `id` is missing or not an unsigned integer.
    static func requestID(in data: Data) -> UInt64? {
        struct OnlyID: Decodable { let id: UInt64? }
        return (try? JSONDecoder().decode(OnlyID.self, from: data))?.id ?? nil
    }

    /// What was wrong with a JSON document that did not decode, in words naming the field
    /// ("wrong type for field 'channel': expected a string"), never Foundation's or Swift's
    /// descriptions: for any JSON input of the server (frames, and the admin API's bodies).
    public static func decodingProblem(_ error: any Error) -> String {
        func path(_ codingPath: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            (codingPath + (last.map { [$0] } ?? [])).map { key in key.intValue.map { "[\($0)]" } ?? key.stringValue }
                .joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        func expected(_ type: Any.Type) -> String {
            switch type {
            case is String.Type: "a string"
            case is Bool.Type: "true or false"
            case is Data.Type: "a base64 string"
            case is any FixedWidthInteger.Type: "a whole number"
            case is Double.Type, is Float.Type: "a number"
            case is [Any].Type: "an array"
            default: "a JSON object"
            }
        }
        // Only our own words reach the peer: never Foundation's or Swift's descriptions.
        guard let error = error as? DecodingError else { return "not valid JSON" }
        switch error {
        case .keyNotFound(let key, let context):
            return "missing field '\(path(context.codingPath, key))'"
        case .typeMismatch(let type, let context) where context.codingPath.isEmpty:
            return "expected \(expected(type)) at the top level"
        case .typeMismatch(let type, let context):
            return "wrong type for field '\(path(context.codingPath))': expected \(expected(type))"
        case .valueNotFound(let type, let context):
            return "null for field '\(path(context.codingPath))': expected \(expected(type))"
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            let field = "invalid value for field '\(path(context.codingPath))'"
            guard let problem = context.underlyingError as? FieldProblem else { return field }
            return field + ": " + problem.reason
        case .dataCorrupted:
            // Numbers that fit no field are caught at the field (`KeyedDecodingContainer.field`):
            // what is left is broken JSON.
            return "not valid JSON"
        @unknown default:
            return "not valid JSON"
        }
    }
}

/// A frame that could not be decoded.
public struct FrameDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong with it.
    public let reason: String
    /// The request's `id`, when it could be read (the error reply carries it).
    public var requestID: UInt64?
    /// Creates the error.
    public init(reason: String, requestID: UInt64? = nil) {
        self.reason = reason
        self.requestID = requestID
    }
    /// `malformed frame: <reason>`.
    public var description: String { "malformed frame: \(reason)" }
}
