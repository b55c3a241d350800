/// Casts `value` to `U`, taking a pointer comparison instead of a dynamic cast when the types are the same.
///
/// The typed path hands a command and its result through existentials; the common case
/// is the exact same type on both sides, and `as?` is measurably slower there.
@inline(__always)
func cast<T: Command, U>(_ value: T, to type: U.Type) -> U? {
    if T.self == U.self { return unsafeBitCast(value, to: U.self) }
    return value as? U
}

/// The same for results, which travel as `any Encodable & Sendable`.
@inline(__always)
func cast<T: Encodable, U>(_ value: T, to type: U.Type) -> U? {
    if T.self == U.self { return unsafeBitCast(value, to: U.self) }
    return value as? U
}

/// `value` as a `U`, when the caller has checked that its dynamic type is `U`: no optional and
/// no dynamic cast, so an unspecialized generic caller needs no `Optional<U>` metadata.
@inline(__always)
func reinterpret<T, U>(_ value: T, as type: U.Type) -> U {
    unsafeBitCast(value, to: U.self)
}
