import NIOCore

/// Unsigned decimals as JSON writes them: ids, sequence numbers and times in the replies and
/// requests that come by the hundred thousand a second (a publish's `ok`, a pong, the load
/// generator's JSON publishes). Both run in a few instructions whatever the length: the digit
/// count from the value's bit length and one comparison, the digits two at a time from a table.
extension FrameCodec {
    /// 10⁰ … 10¹⁹ (the powers of ten an unsigned 64-bit value can hold).
    private static let powersOfTen: [UInt64] = (0...19).map { power in (0..<power).reduce(1) { value, _ in value * 10 } }

    /// "00", "01", … "99": two digits per lookup.
    private static var digitPairs: StaticString {
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
    }

    /// How many decimal digits `value` has (1 for zero).
    @inline(__always)
    public static func decimalDigits(_ value: UInt64) -> Int {
        // ⌊log₁₀ 2^bits⌋ (1233 / 4096 ≈ log₁₀ 2): the count, or one below it.
        let bits = 64 - (value | 1).leadingZeroBitCount
        let guess = (bits &* 1233) &>> 12
        return powersOfTen.withUnsafeBufferPointer { value >= $0[guess] ? guess &+ 1 : max(guess, 1) }
    }

    /// Stores `value` in decimal as `count` digits at `out` (left-padded with zeros; `count`
    /// at least `decimalDigits(value)`).
    @inline(__always)
    package static func storeDecimal(_ value: UInt64, count: Int, at out: UnsafeMutableRawPointer) {
        let pairs = digitPairs.utf8Start
        var v = value
        var end = count
        while end >= 2 {
            let quotient = v / 100
            let pair = Int(truncatingIfNeeded: v &- quotient &* 100) &* 2
            end &-= 2
            out.storeBytes(of: pairs[pair], toByteOffset: end, as: UInt8.self)
            out.storeBytes(of: pairs[pair &+ 1], toByteOffset: end &+ 1, as: UInt8.self)
            v = quotient
        }
        if end == 1 { out.storeBytes(of: UInt8(truncatingIfNeeded: v % 10) &+ 0x30, as: UInt8.self) }
    }

    /// Appends `value` in decimal.
    public static func writeDecimal(_ value: UInt64, into buffer: inout ByteBuffer) {
        let count = decimalDigits(value)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
            storeDecimal(value, count: count, at: out.baseAddress!)
            return count
        }
    }
}
