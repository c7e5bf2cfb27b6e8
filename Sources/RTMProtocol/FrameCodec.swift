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

    /// Recognises the heartbeat, the most frequent frame of an idle connection, without a JSON
    /// decoder: `{"type":"ping"}` or `{"ts":N,"type":"ping"}` (either key order). Returns
    /// `.some(ts)` for a ping (ts nil when absent), nil for anything else (decode it normally).
    public static func fastPing(_ buffer: ByteBuffer) -> Int64?? {
        let view = buffer.readableBytesView
        guard view.count <= 64, view.first == UInt8(ascii: "{"), view.last == UInt8(ascii: "}") else { return nil }
        let text = String(decoding: view, as: UTF8.self)
        let inner = text.dropFirst().dropLast()
        var type: Substring?
        var ts: Int64?
        for field in inner.split(separator: ",") {
            let parts = field.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            // A repeated key goes to the full decoder, which keeps the first value: the fast
            // path must never read a frame differently (found by the FuzzFrameCodec fuzzer:
            // `{"type":"pgin","type":"ping"}` was a ping here, an unknown type there).
            switch parts[0] {
            case "\"type\"" where type == nil: type = parts[1]
            case "\"ts\"" where ts == nil:
                guard let value = Int64(parts[1]) else { return nil }
                ts = value
            default: return nil
            }
        }
        guard type == "\"ping\"" else { return nil }
        return .some(ts)
    }

    /// The `pong` for a ping, encoded without a JSON encoder (same bytes as `encode`).
    public static func encodePong(ts: Int64?, allocator: ByteBufferAllocator) -> ByteBuffer {
        allocator.buffer(string: ts.map { "{\"ts\":\($0),\"type\":\"pong\"}" } ?? "{\"type\":\"pong\"}")
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
