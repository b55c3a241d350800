import CommandBusSupport
import Foundation
import Synchronization
import Testing

/// A closure held under a lock stays the closure that was set, however often it is read.
///
/// Held as a `Mutex`'s value itself, each `withLock` wrapped it in two more reabstraction
/// thunks (swiftlang/swift#91348): the journal's commit observer, read at each commit, made a
/// dashboard server slower and larger with every command it ran.
struct CallbackTests {
    @Test func aCallbackReadAThousandTimesIsCalledAsShallowlyAsWhenItWasSet() {
        let held = Mutex<Callback<UInt>?>(nil)
        let depth = Mutex(0)
        held.withLock {
            $0 = Callback { caller in
                var here = 0
                let local = withUnsafeMutablePointer(to: &here) { UInt(bitPattern: $0) }
                depth.withLock { $0 = Int(caller) - Int(local) }
            }
        }
        var depths: [Int] = []
        for reads in [0, 1_000] {
            for _ in 0..<reads { _ = held.withLock { $0 } }
            var mark = 0
            let caller = withUnsafeMutablePointer(to: &mark) { UInt(bitPattern: $0) }
            held.withLock { $0 }?(caller)
            depths.append(depth.withLock { $0 })
        }
        // A closure held bare is 64 bytes deeper per read: 65 KB after a thousand.
        #expect(depths[1] - depths[0] < 1_024, "stack between caller and callback: \(depths) bytes")
        let calls = Mutex(0)
        let plain = Mutex(Callback<Void> { calls.withLock { $0 += 1 } })
        for _ in 0..<3 { plain.withLock { $0 }() }
        #expect(calls.withLock { $0 } == 3)
    }

    /// No `Mutex` in the package holds a closure, or a tuple with one, as its value: each holds a
    /// `Callback` or a struct instead. (An array or a dictionary of closures is safe: its
    /// elements keep one form.)
    @Test func noMutexHoldsAClosureAsItsValue() throws {
        var found: [String] = []
        for folder in ["Sources", "Plugins", "Tests"] {
            let root = TestPaths.packageRoot.appendingPathComponent(folder)
            let files = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files where file != "CommandBusHostTests/CallbackTests.swift" {
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where !line.drop(while: \.isWhitespace).hasPrefix("//") {
                    for value in Self.mutexValueTypes(in: String(line)) where Self.holdsAClosure(value) {
                        found.append("\(folder)/\(file):\(number + 1): Mutex<\(value)>")
                    }
                }
            }
        }
        #expect(found.isEmpty, "hold a Callback (CommandBusSupport) or a struct instead: \(found)")
        #expect(Self.holdsAClosure("(@Sendable () -> Void)?") && Self.holdsAClosure("(first: @Sendable () -> Void, n: Int)"))
        #expect(!Self.holdsAClosure("Callback<(LogLevel, String)>?") && !Self.holdsAClosure("(next: UInt64, waiting: [UInt64: @Sendable (Int32) -> Void])"))
    }

    /// The generic arguments of each `Mutex<…>` on `line` (an arrow's `>` does not close one).
    static func mutexValueTypes(in line: String) -> [String] {
        var values: [String] = []
        var rest = Substring(line)
        while let start = rest.range(of: "Mutex<") {
            var depth = 1
            var index = start.upperBound
            var value = ""
            while index < rest.endIndex, depth > 0 {
                let character = rest[index]
                if character == "-", rest[index...].hasPrefix("->") {
                    value += "->"
                    index = rest.index(index, offsetBy: 2)
                    continue
                }
                if character == "<" { depth += 1 }
                if character == ">" { depth -= 1 }
                if depth > 0 { value.append(character) }
                index = rest.index(after: index)
            }
            values.append(value)
            rest = rest[index...]
        }
        return values
    }

    /// Whether a value of type `text` is or holds a closure outside an array or a dictionary.
    static func holdsAClosure(_ text: String) -> Bool {
        var outside = ""
        var brackets = 0
        for character in text {
            if character == "[" { brackets += 1 } else if character == "]" { brackets -= 1 } else if brackets == 0 { outside.append(character) }
        }
        return outside.contains("->")
    }
}
