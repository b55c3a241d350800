/// The latest `capacity` elements appended, oldest first.
///
/// Appending past the capacity overwrites the oldest element in place. The windows it replaced
/// (the last thousand latencies of a name, the last thousand commands ended) were arrays trimmed
/// with `removeFirst`, which moved every element left on every command: a fifth of a busy
/// server's copying.
package struct BoundedRing<Element> {
    /// The most elements kept.
    package let capacity: Int
    private var storage: [Element] = []
    /// Where the oldest element is, once the ring is full.
    private var oldest = 0

    /// An empty ring that keeps at most `capacity` elements (at least one).
    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// How many elements are kept.
    package var count: Int { storage.count }

    /// Appends `element`; returns the oldest one, which it replaced, if the ring was full.
    @discardableResult
    package mutating func append(_ element: Element) -> Element? {
        guard storage.count == capacity else {
            storage.append(element)
            return nil
        }
        let dropped = storage[oldest]
        storage[oldest] = element
        oldest = (oldest + 1) % capacity
        return dropped
    }

    /// The kept elements, oldest first.
    package var elements: [Element] { suffix(storage.count) }

    /// The newest `count` kept elements (all of them if fewer are kept), oldest first.
    package func suffix(_ count: Int) -> [Element] {
        let count = min(max(0, count), storage.count)
        return (storage.count - count..<storage.count).map { storage[(oldest + $0) % storage.count] }
    }
}

extension BoundedRing: Sendable where Element: Sendable {}
