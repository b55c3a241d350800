/// `value` as a `U`, when the caller has checked that its dynamic type is `U`.
///
/// The typed path hands a command and its result through existentials, and the common case is
/// the exact same type on both sides. There, `as?` is measurably slower, and an unspecialized
/// generic caller would also ask the runtime for `Optional<U>` metadata on every call: a type
/// comparison and this reinterpretation need neither.
@inlinable @inline(__always)
func reinterpret<T, U>(_ value: T, as type: U.Type) -> U {
    unsafeBitCast(value, to: U.self)
}

/// Whether `value` is held as exactly a `U`.
///
/// Called with an existential, Swift opens it: `T` is the type the existential holds, read from
/// its container, so the check is one comparison of type metadata where `type(of:) == U.self`
/// asks the runtime for the value's dynamic type (about 60 instructions, four times a command).
/// A class instance held under a superclass's type answers `false`, and the caller then takes
/// its general path, which casts.
@inlinable @inline(__always)
func holds<T, U>(_ value: T, exactly type: U.Type) -> Bool {
    T.self == U.self
}
