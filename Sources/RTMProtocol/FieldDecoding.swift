import struct Foundation.Data

/// What is wrong with one field's value, in our words. Thrown as the underlying error of a
/// `DecodingError.dataCorrupted` whose coding path names the field; `FrameCodec` reports the
/// reason as it is.
struct FieldProblem: Error, Sendable, Equatable {
    /// What is wrong, without the field's name: "must be a whole number from 0 to 9".
    let reason: String

    /// The decoding error for `key` of `container` with this reason.
    func error<K: CodingKey>(at key: K, in container: KeyedDecodingContainer<K>) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: container.codingPath + [key], debugDescription: reason,
                                             underlyingError: self))
    }
}

extension KeyedDecodingContainer {
    /// `decodeIfPresent`, whose failures name the field and the problem in our words.
    ///
    /// Foundation's JSON reader reports a number that fits no Swift type (`1.5` for an integer,
    /// `1e400`, `300` for a `UInt8`) without the field ("not valid JSON") and a bad base64
    /// string in its own words; this catches both at the field.
    func field<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        try inOurWords(type, key) { try decodeIfPresent(type, forKey: key) }
    }

    /// `decode` (the field must be present), whose failures are worded like `field`'s.
    func required<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        try inOurWords(type, key) { try decode(type, forKey: key) }
    }

    /// An integer field that must lie in `range`: `field`, with the range in every complaint.
    func integer<I: FixedWidthInteger & Decodable>(_ type: I.Type, _ key: Key, in range: ClosedRange<I>) throws -> I? {
        let bounds = (low: "\(range.lowerBound)", high: "\(range.upperBound)")
        guard let value = try inOurWords(type, key, bounds: bounds, { try decodeIfPresent(type, forKey: key) }) else { return nil }
        guard range.contains(value) else { throw FieldProblem(reason: wholeNumber(key, bounds)).error(at: key, in: self) }
        return value
    }

    /// Runs `read`, turning its failures into ones that name the field; `bounds`: an integer's
    /// allowed range when it is narrower than its type's.
    private func inOurWords<T: Decodable, R>(_ type: T.Type, _ key: Key, bounds: (low: String, high: String)? = nil,
                                             _ read: () throws -> R) throws -> R {
        do {
            return try read()
        } catch let error as DecodingError {
            if type == Data.self, case .dataCorrupted(let context) = error, !(context.underlyingError is FieldProblem) {
                throw FieldProblem(reason: "must be a base64 string").error(at: key, in: self)
            }
            throw error
        } catch {
            // Not a DecodingError: the reader's own "number not representable" (it carries no path).
            let reason = if let integer = type as? any FixedWidthInteger.Type {
                wholeNumber(key, bounds ?? Self.bounds(integer))
            } else if type == Double.self || type == Float.self {
                "the number is out of range"
            } else {
                "holds a number that is not a whole number or is out of range"
            }
            throw FieldProblem(reason: reason).error(at: key, in: self)
        }
    }

    /// "must be a whole number from `low` to `high`", and the value sent when it has a fraction.
    private func wholeNumber(_ key: Key, _ bounds: (low: String, high: String)) -> String {
        let rule = "must be a whole number from \(bounds.low) to \(bounds.high)"
        if let number = (try? decodeIfPresent(Double.self, forKey: key)) ?? nil, number.isFinite, number.rounded(.towardZero) != number {
            return rule + ", got \(number)"
        }
        return rule
    }

    private static func bounds<I: FixedWidthInteger>(_ type: I.Type) -> (low: String, high: String) {
        ("\(I.min)", "\(I.max)")
    }
}
