/// A closure as a value a `Mutex` can hold and hand out: hold `Mutex<Callback<T>?>`, never
/// `Mutex<(@Sendable (T) -> Void)?>` or a tuple of closures.
///
/// `withLock` hands its body the value as a generic `inout`. A closure stored there directly
/// comes back from each access wrapped in two reabstraction thunks, and the wrapped copy is
/// written over the one stored (swiftlang/swift#91348; Swift 6.3 does it at `-O` too). So every
/// read made every later call one pair of thunks deeper: the journal's commit observer, read
/// at each commit, took 45% of a dashboard server's CPU after 3 million commands, its memory
/// grew by 7 bytes a command, and the chain would have overrun the stack. A struct's stored
/// closure keeps its own form, so a read copies it as it is.
package struct Callback<Input>: Sendable {
    /// The closure.
    package let body: @Sendable (Input) -> Void

    /// A callback that runs `body`.
    package init(_ body: @escaping @Sendable (Input) -> Void) {
        self.body = body
    }

    /// Runs the closure with `input`.
    package func callAsFunction(_ input: Input) {
        body(input)
    }
}

extension Callback where Input == Void {
    /// Runs the closure.
    package func callAsFunction() {
        body(())
    }
}
