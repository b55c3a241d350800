/// `value` as a `U`, when the caller has checked that its dynamic type is `U`.
///
/// The typed path hands a command and its result through existentials, and the common case is
/// the exact same type on both sides. There, `as?` is measurably slower, and an unspecialized
/// generic caller would also ask the runtime for `Optional<U>` metadata on every call: a type
/// comparison and this reinterpretation need neither.
@inline(__always)
func reinterpret<T, U>(_ value: T, as type: U.Type) -> U {
    unsafeBitCast(value, to: U.self)
}
