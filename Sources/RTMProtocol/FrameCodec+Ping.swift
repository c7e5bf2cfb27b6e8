import Foundation
import NIOCore

/// The heartbeat (SPEC H-1), the one frame an idle connection sends: read and answered without a
/// JSON decoder or encoder, and without allocating.
extension FrameCodec {
    /// Recognises the heartbeat without a JSON decoder: exactly `{"type":"ping"}`,
    /// `{"type":"ping","ts":N}` or `{"ts":N,"type":"ping"}` (no whitespace; N a JSON integer
    /// that fits an `Int64`). Returns `.some(ts)` for a ping (ts nil when absent), nil for
    /// anything else, which the full decoder then reads: the fast path may decline a frame,
    /// never read one otherwise (the FuzzFrameCodec fuzzer checks it against `decode`).
    public static func fastPing(_ buffer: ByteBuffer) -> Int64?? {
        buffer.withUnsafeReadableBytes { bytes -> Int64?? in
            guard bytes.count <= 64 else { return nil }
            var scan = PingScanner(bytes: bytes)
            if scan.take(#"{"type":"ping""#) {
                if scan.take("}") { return scan.atEnd ? .some(nil) : nil }
                guard scan.take(#","ts":"#), let ts = scan.integer(), scan.take("}"), scan.atEnd else { return nil }
                return .some(ts)
            }
            guard scan.take(#"{"ts":"#), let ts = scan.integer(), scan.take(#","type":"ping"}"#), scan.atEnd else { return nil }
            return .some(ts)
        }
    }

    /// The pong's size in bytes (without a frame header): `{"ts":N,"type":"pong"}` or
    /// `{"type":"pong"}`.
    public static func pongLength(ts: Int64?) -> Int {
        guard let ts else { return 15 }
        return 21 + decimalDigits(ts.magnitude) + (ts < 0 ? 1 : 0)
    }

    /// Appends the pong for a ping (`encode(Frame(type: .pong, ts: ts))`'s bytes); `framed`:
    /// inside an unmasked, final text frame (RFC 6455 §5.2), ready to be written below the frame
    /// encoder in one piece.
    public static func writePong(ts: Int64?, framed: Bool, into buffer: inout ByteBuffer) {
        if framed { BinaryFrame.writeWebSocketHeader(into: &buffer, length: pongLength(ts: ts), opcode: 0x1) }
        guard let ts else {
            buffer.writeStaticString(#"{"type":"pong"}"#)
            return
        }
        buffer.writeStaticString(#"{"ts":"#)
        if ts < 0 { buffer.writeInteger(UInt8(ascii: "-")) }
        writeDecimal(ts.magnitude, into: &buffer)
        buffer.writeStaticString(#","type":"pong"}"#)
    }
}

/// Reads a heartbeat's fixed parts and its number from raw bytes, front to back.
private struct PingScanner {
    let bytes: UnsafeRawBufferPointer
    var at = 0

    var atEnd: Bool { at == bytes.count }

    /// Consumes `literal` if the bytes continue with it.
    mutating func take(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard at + count <= bytes.count, memcmp(bytes.baseAddress! + at, literal.utf8Start, count) == 0 else { return false }
        at += count
        return true
    }

    /// A JSON integer (`-?(0|[1-9][0-9]*)`) that fits an `Int64`, consumed; nil otherwise.
    mutating func integer() -> Int64? {
        let negative = at < bytes.count && bytes[at] == UInt8(ascii: "-")
        if negative { at += 1 }
        let start = at
        var magnitude: UInt64 = 0
        while at < bytes.count, bytes[at] &- 0x30 < 10 {
            let (times10, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times10.addingReportingOverflow(UInt64(bytes[at] &- 0x30))
            guard !overflow, !carry else { return nil }
            magnitude = sum
            at += 1
        }
        guard at > start, at - start == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if negative {
            guard magnitude <= Int64.min.magnitude else { return nil }
            return Int64(truncatingIfNeeded: 0 &- magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }
}
