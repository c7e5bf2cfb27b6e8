import NIOCore

/// Incremental UTF-8 validation (RFC 3629), as RFC 6455 §8.1 asks of every text message and
/// close reason. Fed fragment by fragment it fails at the first byte that can not start or
/// continue a valid sequence (fail-fast), and ``isComplete`` says whether the bytes so far end
/// on a whole character.
///
/// Cheap: ASCII is checked eight bytes at a time; no copy, no allocation.
package struct UTF8Validator: Sendable {
    /// Continuation bytes the current sequence still needs.
    private var pending = 0
    /// The range the next continuation byte must fall in (narrower after E0, ED, F0, F4).
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    package init() {}

    /// True when the bytes fed so far end on a character boundary.
    package var isComplete: Bool { pending == 0 }

    /// Whether `buffer`'s readable bytes are, on their own, valid UTF-8.
    package static func isValid(_ buffer: ByteBuffer) -> Bool {
        var validator = UTF8Validator()
        return validator.feed(buffer) && validator.isComplete
    }

    /// Feeds `buffer`'s readable bytes; false if they can not be part of valid UTF-8.
    package mutating func feed(_ buffer: ByteBuffer) -> Bool {
        buffer.withUnsafeReadableBytes { feed($0) }
    }

    /// Feeds `bytes`; false if they can not be part of valid UTF-8 (the validator is then spent).
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var i = 0
        while i < count {
            if pending == 0 {
                // ASCII, eight bytes at a time.
                while i + 8 <= count, (base + i).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 == 0 { i += 8 }
                guard i < count else { break }
                let byte = base.load(fromByteOffset: i, as: UInt8.self)
                i += 1
                switch byte {   // RFC 3629 §4, the well-formed byte sequences
                case 0x00...0x7F: continue
                case 0xC2...0xDF: (pending, lower, upper) = (1, 0x80, 0xBF)
                case 0xE0: (pending, lower, upper) = (2, 0xA0, 0xBF)
                case 0xE1...0xEC, 0xEE...0xEF: (pending, lower, upper) = (2, 0x80, 0xBF)
                case 0xED: (pending, lower, upper) = (2, 0x80, 0x9F)   // no surrogates
                case 0xF0: (pending, lower, upper) = (3, 0x90, 0xBF)
                case 0xF1...0xF3: (pending, lower, upper) = (3, 0x80, 0xBF)
                case 0xF4: (pending, lower, upper) = (3, 0x80, 0x8F)   // nothing above U+10FFFF
                default: return false   // 80...C1 (continuation or overlong lead), F5...FF
                }
            } else {
                let byte = base.load(fromByteOffset: i, as: UInt8.self)
                i += 1
                guard byte >= lower, byte <= upper else { return false }
                (pending, lower, upper) = (pending - 1, 0x80, 0xBF)
            }
        }
        return true
    }
}
