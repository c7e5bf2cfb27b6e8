import struct Foundation.Data
import NIOCore

/// The JSON `publish` request and its `ok` reply without the general coder: what browsers and
/// other-language clients send most. `JSONDecoder` builds a keyed container, a `Frame` of sixty
/// optional fields and a `String` per value for every publish; this reads the one flat shape a
/// publish has and hands the payload on as a slice of the frame (no copy) when it needs no
/// unescaping.
///
/// The general codec stays the reference: anything this reader is not sure of (an unknown or
/// repeated key, `null`, a `\u` escape, a number with a sign, fraction, exponent or leading
/// zero, one above `Int64.max`, invalid UTF-8, a missing `id`, not exactly one of `text` /
/// `data`, `storeInHistory`, bytes after the object…) makes it answer nil, and the frame goes to
/// `decode(_:)`, which accepts it or names the problem. It never reads a frame differently from
/// `decode(_:)`.
extension FrameCodec {
    /// Reads `{"type":"publish","id":…,"channel":…,"text"|"data":…[,"customType":…][,"msgId":…]}`
    /// (keys in any order, JSON whitespace anywhere) as the equivalent binary publish; nil for
    /// anything else (decode it with `decode(_:)`).
    public static func readPublish(_ buffer: ByteBuffer) -> BinaryFrame.Publish? {
        // Filled in place: the fields are too large a value to return from the closure cheaply.
        var fields = PublishScanner.Fields()
        guard buffer.withUnsafeReadableBytes({ bytes -> Bool in
            var scanner = PublishScanner(bytes: bytes)
            return scanner.scan(into: &fields)
        }) else { return nil }
        guard let id = fields.id, let channel = fields.channel, !channel.escaped, channel.ascii,
              (fields.text == nil) != (fields.data == nil) else { return nil }
        let base = buffer.readerIndex
        guard let channelSlice = buffer.getSlice(at: base + channel.start, length: channel.length) else { return nil }
        var customType: String?
        if let span = fields.customType {
            guard let value = string(span, in: buffer) else { return nil }
            customType = value
        }
        let payload: ByteBuffer
        if let text = fields.text {
            if !text.escaped && text.ascii {
                guard let slice = buffer.getSlice(at: base + text.start, length: text.length) else { return nil }
                payload = slice
            } else {
                guard let bytes = unescaped(text, in: buffer), text.ascii || String(validating: bytes, as: UTF8.self) != nil else { return nil }
                payload = ByteBuffer(bytes: bytes)
            }
        } else {
            guard let span = fields.data, span.ascii, let encoded = unescaped(span, in: buffer),
                  let data = Data(base64Encoded: Data(encoded)) else { return nil }
            payload = ByteBuffer(bytes: data)
        }
        return BinaryFrame.Publish(requestID: id, msgId: fields.msgId, channelBytes: channelSlice.readableBytesView,
                                   customType: customType, isText: fields.text != nil, payload: payload)
    }

    /// Appends the reply to a publish, `{"epoch":"…","id":…,"seq":…,"type":"ok"}` (`epoch`, the
    /// message's channel epoch, left out when nil): the same bytes as
    /// `encode(Frame(type: .ok, id: id, seq: seq, epoch: epoch))`. Replies by the thousand
    /// share one `PublishOKTemplate` instead.
    public static func writePublishOK(id: UInt64, seq: UInt64, epoch: String?, into buffer: inout ByteBuffer) {
        PublishOKTemplate(epoch: epoch).write(id: id, seq: seq, into: &buffer)
    }

    /// Appends an error reply, `{"code":…,"id":…,"reason":"…","type":"error"}`: the same bytes
    /// as `encode(.error(id:…))` (sorted keys, the reason escaped as the JSON encoder does),
    /// without the encoder's cost, for refusals that come by the thousand (a flood).
    public static func writeError(id: UInt64?, code: Int, reason: String, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(#"{"code":"#)
        if code < 0 { buffer.writeInteger(UInt8(ascii: "-")) }
        writeDecimal(UInt64(code.magnitude), into: &buffer)
        if let id {
            buffer.writeStaticString(#","id":"#)
            writeDecimal(id, into: &buffer)
        }
        buffer.writeStaticString(#","reason":""#)
        writeEscaped(reason, into: &buffer)
        buffer.writeStaticString(#"","type":"error"}"#)
    }

    /// The length of `writeError`'s output.
    public static func errorLength(id: UInt64?, code: Int, reason: String) -> Int {
        var length = 36 + decimalDigits(UInt64(code.magnitude)) + (code < 0 ? 1 : 0)
        if let id { length += 6 + decimalDigits(id) }
        return length + escapedLength(reason)
    }

    /// The length of `writeEscaped`'s output.
    static func escapedLength(_ string: String) -> Int {
        var length = 0
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: "/"), 0x08, 0x0C, 0x0A, 0x0D, 0x09: length += 2
            case ..<0x20: length += 6
            default: length += 1
            }
        }
        return length
    }

    /// A JSON string's content: `"` and `\` and `/` escaped, control characters as the short
    /// escapes or `\u00xx` (what Foundation's JSON encoder writes).
    static func writeEscaped(_ string: String, into buffer: inout ByteBuffer) {
        if !string.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "/") }) {
            buffer.writeString(string)
            return
        }
        let hex: StaticString = "0123456789abcdef"
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.writeStaticString(#"\\"#)
            case UInt8(ascii: "\""): buffer.writeStaticString(#"\""#)
            case UInt8(ascii: "/"): buffer.writeStaticString(#"\/"#)
            case 0x08: buffer.writeStaticString(#"\b"#)
            case 0x0C: buffer.writeStaticString(#"\f"#)
            case 0x0A: buffer.writeStaticString(#"\n"#)
            case 0x0D: buffer.writeStaticString(#"\r"#)
            case 0x09: buffer.writeStaticString(#"\t"#)
            case ..<0x20:
                buffer.writeStaticString(#"\u00"#)
                buffer.writeInteger(hex.utf8Start[Int(byte >> 4)])
                buffer.writeInteger(hex.utf8Start[Int(byte & 0xF)])
            default: buffer.writeInteger(byte)
            }
        }
    }

    /// The length of `writePublishOK`'s output.
    public static func publishOKLength(id: UInt64, seq: UInt64, epoch: String?) -> Int {
        PublishOKTemplate(epoch: epoch).length(id: id, seq: seq)
    }

    /// A string value's bytes, unescaped (the scanner let only the two-character escapes through).
    private static func unescaped(_ span: PublishScanner.Span, in buffer: ByteBuffer) -> [UInt8]? {
        buffer.withUnsafeReadableBytes { bytes -> [UInt8]? in
            var out: [UInt8] = []
            out.reserveCapacity(span.length)
            var i = span.start
            while i < span.end {
                let byte = bytes[i]
                guard byte == PublishScanner.backslash else { out.append(byte); i += 1; continue }
                switch bytes[i + 1] {
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case let other: out.append(other)   // \" \\ \/
                }
                i += 2
            }
            return out
        }
    }

    /// A string value, unescaped; nil if it is not valid UTF-8.
    private static func string(_ span: PublishScanner.Span, in buffer: ByteBuffer) -> String? {
        guard let bytes = unescaped(span, in: buffer) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// A publish's `ok` reply, `{"epoch":"…","id":…,"seq":…,"type":"ok"}`, with everything before
/// the id (the channel epoch, escaped) written once: a run of publishes to one channel shares
/// its epoch, so each reply is two numbers and two constant pieces, copied in one write to the
/// buffer (the general encoder's bytes; `FrameCodec.writePublishOK` is this with a template of
/// its own).
public struct PublishOKTemplate: Sendable {
    /// The epoch the replies carry (nil: none).
    public let epoch: String?
    /// `{"epoch":"…","id":`, or `{"id":` without an epoch.
    private let head: [UInt8]
    private static var middle: StaticString { #","seq":"# }
    private static var tail: StaticString { #","type":"ok"}"# }

    public init(epoch: String?) {
        self.epoch = epoch
        guard let epoch else {
            head = Array(#"{"id":"#.utf8)
            return
        }
        var buffer = ByteBuffer()
        buffer.writeStaticString(#"{"epoch":""#)
        FrameCodec.writeEscaped(epoch, into: &buffer)
        buffer.writeStaticString(#"","id":"#)
        head = Array(buffer.readableBytesView)
    }

    /// The reply's length (without a frame header).
    public func length(id: UInt64, seq: UInt64) -> Int {
        head.count + FrameCodec.decimalDigits(id) + Self.middle.utf8CodeUnitCount + FrameCodec.decimalDigits(seq)
            + Self.tail.utf8CodeUnitCount
    }

    /// Appends the reply to publish `id`, numbered `seq`; `framed`: inside an unmasked, final
    /// WebSocket text frame (what the server writes below its frame encoder).
    public func write(id: UInt64, seq: UInt64, framed: Bool = false, into buffer: inout ByteBuffer) {
        let idDigits = FrameCodec.decimalDigits(id), seqDigits = FrameCodec.decimalDigits(seq)
        let body = head.count + idDigits + Self.middle.utf8CodeUnitCount + seqDigits + Self.tail.utf8CodeUnitCount
        let header = framed ? BinaryFrame.webSocketHeaderLength(body) : 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: header + body) { out in
            var at = out.baseAddress!
            if framed { BinaryFrame.storeWebSocketHeader(at: at, length: body, opcode: 0x1) }   // FIN, text
            at += header
            head.withUnsafeBytes { at.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            at += head.count
            FrameCodec.storeDecimal(id, count: idDigits, at: at)
            at += idDigits
            at.copyMemory(from: Self.middle.utf8Start, byteCount: Self.middle.utf8CodeUnitCount)
            at += Self.middle.utf8CodeUnitCount
            FrameCodec.storeDecimal(seq, count: seqDigits, at: at)
            at += seqDigits
            at.copyMemory(from: Self.tail.utf8Start, byteCount: Self.tail.utf8CodeUnitCount)
            return header + body
        }
    }
}

/// One pass over a publish request's bytes: where each known value lies, nothing copied.
struct PublishScanner {
    /// A string value's content (between the quotes), offsets from the start of the frame.
    struct Span {
        var start: Int
        var end: Int
        /// Holds a backslash escape (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`; never `\u`).
        var escaped: Bool
        /// Only bytes below 0x80.
        var ascii: Bool
        var length: Int { end - start }
    }

    struct Fields {
        var type = false
        var id: UInt64?
        var msgId: UInt64?
        var channel: Span?
        var text: Span?
        var data: Span?
        var customType: Span?
    }

    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")

    let bytes: UnsafeRawBufferPointer
    var at = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Reads the fields of a flat object of known keys, each at most once, into `fields`
    /// (fresh); false for anything else.
    mutating func scan(into fields: inout Fields) -> Bool {
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return false }
        skipSpace()
        while true {
            guard let key = string(), !key.escaped else { return false }
            skipSpace()
            guard take(UInt8(ascii: ":")) else { return false }
            skipSpace()
            switch (key.length, bytes[key.start]) {
            case (4, UInt8(ascii: "t")) where equals(key, "type"):
                guard !fields.type, let value = string(), !value.escaped, equals(value, "publish") else { return false }
                fields.type = true
            case (2, UInt8(ascii: "i")) where equals(key, "id"):
                guard fields.id == nil, let value = number() else { return false }
                fields.id = value
            case (7, UInt8(ascii: "c")) where equals(key, "channel"):
                guard fields.channel == nil, let value = string() else { return false }
                fields.channel = value
            case (4, UInt8(ascii: "t")) where equals(key, "text"):
                guard fields.text == nil, let value = string() else { return false }
                fields.text = value
            case (4, UInt8(ascii: "d")) where equals(key, "data"):
                guard fields.data == nil, let value = string() else { return false }
                fields.data = value
            case (10, UInt8(ascii: "c")) where equals(key, "customType"):
                guard fields.customType == nil, let value = string() else { return false }
                fields.customType = value
            case (5, UInt8(ascii: "m")) where equals(key, "msgId"):
                guard fields.msgId == nil, let value = number() else { return false }
                fields.msgId = value
            default:
                return false   // unknown, or a field this reader leaves to the decoder (storeInHistory)
            }
            skipSpace()
            if take(UInt8(ascii: ",")) { skipSpace(); continue }
            guard take(UInt8(ascii: "}")) else { return false }
            break
        }
        skipSpace()
        guard at == bytes.count, fields.type else { return false }
        return true
    }

    private mutating func skipSpace() {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return
            }
        }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard at < bytes.count, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    /// A string; nil at a control character, a `\u` or unknown escape, or no closing quote.
    private mutating func string() -> Span? {
        guard take(Self.quote) else { return nil }
        let start = at
        var escaped = false
        var high: UInt8 = 0
        while true {
            skipPlain()
            guard at < bytes.count else { return nil }
            let byte = bytes[at]
            if byte == Self.quote {
                at += 1
                return Span(start: start, end: at - 1, escaped: escaped, ascii: high < 0x80)
            }
            if byte < 0x20 { return nil }
            if byte == Self.backslash {
                guard at + 1 < bytes.count else { return nil }
                switch bytes[at + 1] {
                case Self.quote, Self.backslash, UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    escaped = true
                    at += 2
                    continue
                default:
                    return nil
                }
            }
            high |= byte   // non-ASCII
            at += 1
        }
    }

    /// Moves to the next quote, backslash, control character or non-ASCII byte (or the end),
    /// eight bytes at a time: each word's special bytes are flagged with exact "has a zero byte"
    /// tests, whose lowest flag is always the first such byte, so one count of trailing zeros
    /// lands on it.
    @inline(__always)
    private mutating func skipPlain() {
        guard let base = bytes.baseAddress else { return }
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func zeroBytes(_ v: UInt64) -> UInt64 { (v &- ones) & ~v & highs }
        while at + 8 <= bytes.count {
            let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            let special = word & highs | zeroBytes(word ^ (ones &* 0x22)) | zeroBytes(word ^ (ones &* 0x5C))
                | (word &- ones &* 0x20) & ~word & highs
            if special != 0 {
                at += special.trailingZeroBitCount &>> 3
                return
            }
            at += 8
        }
        while at < bytes.count {
            let byte = bytes[at]
            if byte == Self.quote || byte == Self.backslash || byte < 0x20 || byte >= 0x80 { return }
            at += 1
        }
    }

    /// A non-negative integer of at most 19 digits, no leading zero, up to `Int64.max` (the
    /// decoder reads ids as Int64); nil for anything else (sign, fraction, exponent, …).
    private mutating func number() -> UInt64? {
        let start = at
        var value: UInt64 = 0
        // Eight digits at a time while eight bytes are all digits (a client's message id has 19).
        if let base = bytes.baseAddress {
            while at + 8 <= bytes.count && at - start + 8 <= 19 {
                let word = base.loadUnaligned(fromByteOffset: at, as: UInt64.self)
                guard let digits = Self.eightDigits(word) else { break }
                value = value &* 100_000_000 &+ digits
                at += 8
            }
        }
        while at < bytes.count, case let byte = bytes[at], byte >= 0x30, byte <= 0x39 {
            guard at - start < 19 else { return nil }
            value = value &* 10 &+ UInt64(byte - 0x30)
            at += 1
        }
        guard at > start, !(bytes[start] == 0x30 && at - start > 1), value <= UInt64(Int64.max) else { return nil }
        if at < bytes.count {
            switch bytes[at] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        return value
    }

    /// The value of eight ASCII digits loaded little-endian (the first digit in the low byte),
    /// or nil if one of the bytes is not `0`…`9`: one test for all eight, three multiplications
    /// for the value.
    @inline(__always)
    static func eightDigits(_ word: UInt64) -> UInt64? {
        let nibbles: UInt64 = 0xF0F0_F0F0_F0F0_F0F0, zeros: UInt64 = 0x3030_3030_3030_3030
        // Each byte 0x30…0x3F, and still 0x3_ after adding 6 (no carry can cross bytes then).
        guard word & nibbles == zeros, (word &+ 0x0606_0606_0606_0606) & nibbles == zeros else { return nil }
        var value = word &- zeros
        value = value &* 10 &+ value &>> 8   // pairs of digits, in the low byte of each 16 bits
        let pairs: UInt64 = 0x0000_00FF_0000_00FF
        return ((value & pairs) &* (100 &+ 1_000_000 &<< 32) &+ (value &>> 16 & pairs) &* (1 &+ 10_000 &<< 32)) &>> 32 & 0xFFFF_FFFF
    }

    /// The span holds exactly `literal` (a key or `publish`: literals, so no array to reach).
    private func equals(_ span: Span, _ literal: StaticString) -> Bool {
        guard span.length == literal.utf8CodeUnitCount else { return false }
        let expected = literal.utf8Start
        for i in 0..<span.length where bytes[span.start + i] != expected[i] { return false }
        return true
    }
}
