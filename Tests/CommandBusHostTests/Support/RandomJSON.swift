import CommandBus

/// A random JSON document for comparing our JSON reading and writing with Foundation's: every
/// kind of value, strings of any scalar up to the emoji planes, and keys whose order and
/// escaping are easy to get wrong (upper before lower case, `_`, spaces, quotes, newlines).
func randomJSONValue(depth: Int = 0, using generator: inout some RandomNumberGenerator) -> JSONValue {
    switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator) {
    case 0: return .null
    case 1: return .bool(Bool.random(using: &generator))
    case 2: return .integer(Int64.random(in: .min ... .max, using: &generator))
    case 3: return .number(Double.random(in: -1e9...1e9, using: &generator))
    case 4:
        let scalars = (0..<Int.random(in: 0..<12, using: &generator)).compactMap { _ in
            Unicode.Scalar(UInt32.random(in: 0..<0x1F700, using: &generator))
        }
        return .string(String(String.UnicodeScalarView(scalars)))
    case 5:
        return .array((0..<Int.random(in: 0..<5, using: &generator)).map { _ in randomJSONValue(depth: depth + 1, using: &generator) })
    default:
        let keys = ["id", "Op", "_k", "key", "ü", "a b", "é", "\n", "\""]
        return .object(Dictionary((0..<Int.random(in: 0..<5, using: &generator)).map { index in
            (keys.randomElement(using: &generator)! + "\(index)", randomJSONValue(depth: depth + 1, using: &generator))
        }, uniquingKeysWith: { first, _ in first }))
    }
}
