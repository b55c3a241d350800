#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// What one `CompactJSON.encode` writes into, and how: one byte buffer, filled as the value's
/// `encode(to:)` runs, with no tree of values in between.
///
/// Each object's members are written in the order they come, and put in key order when the
/// object closes: an object closes when the `encode(to:)` that opened it returns, or when
/// something outside it is written next, as a synthesized enum's nested container is left. A
/// container written to after it closed, a key written twice, a value that writes nothing or
/// more than once, and `superEncoder` make it give up, and the value goes to `JSONEncoder`.
///
/// ```
/// {"value":1,"name":"a"}   as written: members start at 1 and 11, the first ends at the comma
/// {"name":"a","value":1}   at close: the members, copied out and written back in key order
/// ```
final class CompactJSONBuffer {
    // The properties are used by one thread, inside one encode: they need no exclusivity checks,
    // which cost about 100 instructions an access.

    /// What is written so far.
    @exclusivity(unchecked) var bytes: [UInt8] = []
    /// Set when the value needs `JSONEncoder`: every later write is then ignored.
    @exclusivity(unchecked) var gaveUp = false
    /// The open containers, innermost last.
    @exclusivity(unchecked) private var frames: [Frame] = []
    /// Per value being encoded (innermost last): the container it opened, or whether it wrote a single value.
    @exclusivity(unchecked) private var levels: [Level] = []
    /// Where each member of the open objects starts in ``bytes`` (at its key's opening quote). A
    /// member ends at the comma before the next, or where its object closes.
    @exclusivity(unchecked) private var members: [Int] = []
    /// The next frame's or level's id; ids are never reused, so a closed container, or an encoder
    /// whose value is done, is known by its id.
    @exclusivity(unchecked) private var nextID = 0

    /// An open container.
    struct Frame {
        let id: Int
        let isObject: Bool
        /// The first of its entries in ``members`` (objects).
        let firstMember: Int
        /// How many members or items it has.
        var count = 0
    }

    /// A value being encoded.
    struct Level {
        let id: Int
        /// The frame of the container it opened, if any.
        var frameID: Int?
        var wroteSingle = false
    }

    init() {
        bytes.reserveCapacity(128)
    }

    // MARK: One per thread

    /// The thread's state, kept between encodes so that its buffers are allocated once: its
    /// allocations and frees were half of a small command's encode.
    private static let cached: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { state in
            if let state { Unmanaged<CompactJSONBuffer>.fromOpaque(state).release() }
        }
        return key
    }()

    /// How large a buffer is kept for the next encode; a larger one (a big payload's) is let go.
    static let keptCapacity = 64 << 10

    /// The thread's state, emptied, or a new one if the thread has none (or is in an encode already).
    static func take() -> CompactJSONBuffer {
        guard let kept = pthread_getspecific(cached) else { return CompactJSONBuffer() }
        pthread_setspecific(cached, nil)
        return Unmanaged<CompactJSONBuffer>.fromOpaque(kept).takeRetainedValue()
    }

    /// Empties this state and keeps it for the thread's next encode, unless its buffer grew large.
    func putBack() {
        guard bytes.capacity <= Self.keptCapacity, pthread_getspecific(Self.cached) == nil else { return }
        // A finished encode leaves no frame, level or member; one that gave up may.
        bytes.removeAll(keepingCapacity: true)
        if !frames.isEmpty { frames.removeAll(keepingCapacity: true) }
        if !levels.isEmpty { levels.removeAll(keepingCapacity: true) }
        if !members.isEmpty { members.removeAll(keepingCapacity: true) }
        gaveUp = false
        nextID = 0
        pthread_setspecific(Self.cached, Unmanaged.passRetained(self).toOpaque())
    }

    /// Encodes `value` as the next value (the whole, an item or a member's value); `false` if it wrote nothing.
    func encodeValue<T: Encodable>(_ value: T) -> Bool {
        if T.self == Data.self || T.self == URL.self || T.self == Decimal.self { return giveUp() }
        let level = levels.count
        let openFrames = frames.count
        let id = nextID
        nextID += 1
        levels.append(Level(id: id))
        do { try value.encode(to: CompactEncoder(state: self, level: level, id: id)) } catch { return giveUp() }
        close(downTo: openFrames)
        let wrote = levels[level].frameID != nil || levels[level].wroteSingle
        levels.removeLast()
        return wrote || giveUp()
    }

    /// Gives up; returns `false` for callers that answer with it.
    @discardableResult
    func giveUp() -> Bool {
        gaveUp = true
        return false
    }

    // MARK: Containers

    /// The frame a level's keyed or unkeyed container writes to: its own, or a new one if it has
    /// none; -1 once given up.
    func frame(forLevel level: Int, id: Int, object: Bool) -> Int {
        guard !gaveUp, isCurrent(level: level, id: id) else { return -1 }
        if levels[level].wroteSingle { giveUp() }
        if let id = levels[level].frameID {
            if let frame = frames.last(where: { $0.id == id }), frame.isObject != object { giveUp() }
            return id
        }
        let frame = open(object: object)
        levels[level].frameID = frame
        return frame
    }

    /// Whether level `level` is still being encoded by the encoder that has `id`; gives up if not
    /// (an encoder kept and used after its value was done).
    private func isCurrent(level: Int, id: Int) -> Bool {
        guard level >= 0, level < levels.count, levels[level].id == id else { return giveUp() }
        return true
    }

    /// How many items or members frame `id` has; gives up if it is closed.
    func count(of id: Int) -> Int {
        guard let frame = frames.last(where: { $0.id == id }) else {
            giveUp()
            return 0
        }
        return frame.count
    }

    /// Opens a container as the value being written: a level's own, or a nested one.
    func open(object: Bool) -> Int {
        guard !gaveUp else { return -1 }
        let id = nextID
        nextID += 1
        bytes.append(object ? UInt8(ascii: "{") : UInt8(ascii: "["))
        frames.append(Frame(id: id, isObject: object, firstMember: members.count))
        return id
    }

    /// Makes frame `id` the innermost, closing any opened inside it; `false` (and gives up) if it is closed.
    func reopen(_ id: Int) -> Bool {
        guard !gaveUp else { return false }
        guard let index = frames.lastIndex(where: { $0.id == id }) else { return giveUp() }
        close(downTo: index + 1)
        return true
    }

    /// Closes the frames above the first `count`, innermost first.
    private func close(downTo count: Int) {
        while frames.count > count {
            let frame = frames.removeLast()
            if frame.isObject {
                sortMembers(of: frame)
                members.removeSubrange(frame.firstMember...)
                bytes.append(UInt8(ascii: "}"))
            } else {
                bytes.append(UInt8(ascii: "]"))
            }
        }
    }

    // MARK: Writing

    /// Starts a member of object `id`: its comma, key and colon. `false` if the writer must stop.
    func beginMember(of id: Int, key: String) -> Bool {
        guard reopen(id) else { return false }
        var key = key
        // Only ASCII keys: their bytes sort as JSONEncoder sorts keys.
        guard key.withUTF8({ $0.allSatisfy { $0 < 0x80 } }) else { return giveUp() }
        if frames[frames.count - 1].count > 0 { bytes.append(UInt8(ascii: ",")) }
        frames[frames.count - 1].count += 1
        members.append(bytes.count)
        CompactJSON.writeString(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
        return true
    }

    /// Starts an item of array `id`: its comma. `false` if the writer must stop.
    func beginItem(of id: Int) -> Bool {
        guard reopen(id) else { return false }
        if frames[frames.count - 1].count > 0 { bytes.append(UInt8(ascii: ",")) }
        frames[frames.count - 1].count += 1
        return true
    }

    /// Marks a level's single value written; `false` (and gives up) if it already wrote one or opened a container.
    func beginSingle(level: Int, id: Int) -> Bool {
        guard !gaveUp, isCurrent(level: level, id: id) else { return false }
        guard levels[level].frameID == nil, !levels[level].wroteSingle else { return giveUp() }
        levels[level].wroteSingle = true
        return true
    }

    /// Writes a scalar's text, or gives up on `nil` (a number JSON cannot hold).
    func write(_ text: ScalarText?) {
        switch text {
        case .literal(let literal): literal.withUTF8Buffer { bytes.append(contentsOf: $0) }
        case .raw(let text): bytes.append(contentsOf: text.utf8)
        case .string(let string): CompactJSON.writeString(string, into: &bytes)
        case .integer(let magnitude, let negative): writeInteger(magnitude, negative: negative)
        case nil: giveUp()
        }
    }

    private func writeInteger(_ magnitude: UInt64, negative: Bool) {
        if negative { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var count = 0
        var rest = magnitude
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                count += 1
                buffer[24 - count] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    // MARK: Sorting

    /// Puts a closing object's members in key order, in place; gives up on a key written twice.
    private func sortMembers(of frame: Frame) {
        let count = frame.count
        guard count > 1, !gaveUp else { return }
        let first = frame.firstMember
        var sorted = true
        for index in 1..<count where compareKeys(members[first + index - 1], members[first + index]) >= 0 {
            sorted = false
            break
        }
        if sorted { return }
        var order = Array(0..<count)
        order.sort { compareKeys(members[first + $0], members[first + $1]) < 0 }
        for position in 1..<count where compareKeys(members[first + order[position - 1]], members[first + order[position]]) == 0 {
            giveUp()
            return
        }
        // Member i runs from its start to the comma before member i + 1, the last to the end.
        let regionStart = members[first]
        let region = Array(bytes[regionStart...])
        bytes.removeSubrange(regionStart...)
        for (position, index) in order.enumerated() {
            if position > 0 { bytes.append(UInt8(ascii: ",")) }
            let start = members[first + index] - regionStart
            let end = index + 1 < count ? members[first + index + 1] - regionStart - 1 : region.count
            bytes.append(contentsOf: region[start..<end])
        }
    }

    /// Compares the keys of the members starting at `left` and `right` (each at its opening
    /// quote) by their bytes before escaping: a key that is a prefix of another sorts first.
    private func compareKeys(_ left: Int, _ right: Int) -> Int {
        bytes.withUnsafeBufferPointer { bytes in
            var a = left + 1, b = right + 1
            while true {
                let x = Self.keyByte(at: &a, in: bytes), y = Self.keyByte(at: &b, in: bytes)
                if x != y { return x < y ? -1 : 1 }
                if x < 0 { return 0 }
            }
        }
    }

    /// The key byte that the escaped text at `position` stands for, moving past it; -1 at the
    /// closing quote. Keys are ASCII, so a `\u` escape is `\u00` and two hex digits.
    private static func keyByte(at position: inout Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        let byte = bytes[position]
        if byte == UInt8(ascii: "\"") { return -1 }
        guard byte == UInt8(ascii: "\\") else {
            position += 1
            return Int(byte)
        }
        let escape = bytes[position + 1]
        position += 2
        switch escape {
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "f"): return 0x0C
        case UInt8(ascii: "n"): return 0x0A
        case UInt8(ascii: "r"): return 0x0D
        case UInt8(ascii: "t"): return 0x09
        case UInt8(ascii: "u"):
            defer { position += 4 }
            return hexValue(bytes[position + 2]) << 4 | hexValue(bytes[position + 3])
        default: return Int(escape)
        }
    }

    private static func hexValue(_ digit: UInt8) -> Int {
        digit <= UInt8(ascii: "9") ? Int(digit - UInt8(ascii: "0")) : Int(digit - UInt8(ascii: "a") + 10)
    }
}
