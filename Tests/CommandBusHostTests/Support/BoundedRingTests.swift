import CommandBusSupport
import Testing

/// `BoundedRing` keeps what an array trimmed with `removeFirst` kept, in the same order, and
/// hands back what it drops, oldest first.
struct BoundedRingTests {
    @Test(arguments: [1, 2, 7, 1_000])
    func keepsTheLatestInOrderAsATrimmedArrayWould(capacity: Int) {
        var ring = BoundedRing<Int>(capacity: capacity)
        var model: [Int] = []
        var dropped: [Int] = []
        for value in 0..<(capacity * 3 + 5) {
            if let old = ring.append(value) { dropped.append(old) }
            model.append(value)
            if model.count > capacity { model.removeFirst(model.count - capacity) }
            #expect(ring.count == model.count)
            #expect(ring.elements == model)
        }
        // Everything that left the window came back from `append`, oldest first.
        #expect(dropped == Array(0..<(capacity * 2 + 5)))
        for count in [-1, 0, 1, capacity / 2, capacity, capacity + 10] {
            #expect(ring.suffix(count) == Array(model.suffix(max(0, count))), "suffix(\(count))")
        }
    }

    @Test func anEmptyRingHasNothingAndACapacityBelowOneKeepsOne() {
        var ring = BoundedRing<String>(capacity: 0)
        #expect(ring.capacity == 1)
        #expect(ring.elements.isEmpty && ring.suffix(3).isEmpty)
        #expect(ring.append("a") == nil)
        #expect(ring.append("b") == "a")
        #expect(ring.elements == ["b"])
    }
}
