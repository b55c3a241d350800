#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension CommandID {
    private static let hexDigits: StaticString = "0123456789ABCDEF"

    /// The canonical text of `id`, exactly as `UUID.uuidString` writes it (upper-case, 8-4-4-4-12).
    ///
    /// Journals write an id or two for every command; Foundation formats through `snprintf`,
    /// which costs more than the rest of the row's binding.
    public static func text(_ id: UUID) -> String {
        String(unsafeUninitializedCapacity: textLength) { output in
            writeText(id, to: output.baseAddress!)
            return textLength
        }
    }

    /// The length of an id's text: 32 hex digits and 4 hyphens.
    package static let textLength = 36

    /// Appends `id`'s canonical text (``text(_:)``) to `bytes`, with no `String` in between.
    package static func appendText(_ id: UUID, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: textLength))
        bytes.withUnsafeMutableBufferPointer { writeText(id, to: $0.baseAddress! + start) }
    }

    /// Writes `id`'s canonical text (``text(_:)``) into the ``textLength`` bytes at `output`.
    package static func writeText(_ id: UUID, to output: UnsafeMutablePointer<UInt8>) {
        withUnsafeBytes(of: id.uuid) { bytes in
            hexDigits.withUTF8Buffer { digits in
                var position = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        output[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    output[position] = digits[Int(byte >> 4)]
                    output[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
            }
        }
    }

    /// The UUID written in `text` (8-4-4-4-12 hex digits, either case), or `nil` if it is not one.
    ///
    /// The same answers as `UUID(uuidString:)`, without parsing through `sscanf`.
    public static func parse(_ text: some StringProtocol) -> UUID? {
        var text = String(text)
        return text.withUTF8 { parse(utf8: $0) }
    }

    /// The UUID written in the UTF-8 bytes `text`, or `nil` if they are not one.
    ///
    /// Every id a journal reads back goes through here (two or more per entry of a replay), so
    /// the digits are read into two words without a branch per kind of character, and checked
    /// once at the end.
    public static func parse(utf8 text: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard text.count == 36, let start = text.baseAddress else { return nil }
        let dash = UInt8(ascii: "-")
        guard start[8] == dash, start[13] == dash, start[18] == dash, start[23] == dash else { return nil }
        // Each digit's value, or a bit above the low nibble if it is not a hex digit.
        var invalid: UInt8 = 0
        func digits(_ first: Int, _ count: Int) -> UInt64 {
            var value: UInt64 = 0
            for offset in first..<(first + count) {
                let digit = nibble(start[offset])
                invalid |= digit
                value = value << 4 | UInt64(digit & 0x0F)
            }
            return value
        }
        let high = digits(0, 8) << 32 | digits(9, 4) << 16 | digits(14, 4)
        let low = digits(19, 4) << 48 | digits(24, 12)
        guard invalid & 0xF0 == 0 else { return nil }
        func byte(_ word: UInt64, _ index: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: word >> (56 - 8 * index)) }
        return UUID(uuid: (
            byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5), byte(high, 6), byte(high, 7),
            byte(low, 0), byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5), byte(low, 6), byte(low, 7)
        ))
    }

    /// Each byte's value as a hex digit, plus 65 ("A"); "~" for a byte that is not one.
    /// Four lines of 64: bytes 0–63, 64–127, 128–191 and 192–255.
    private static let nibbles: StaticString = """
        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ABCDEFGHIJ~~~~~~\
        ~KLMNOP~~~~~~~~~~~~~~~~~~~~~~~~~~KLMNOP~~~~~~~~~~~~~~~~~~~~~~~~~\
        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\
        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
        """

    /// The value of the hex digit `character` (either case), or `0x10` or more if it is not one.
    @inline(__always)
    private static func nibble(_ character: UInt8) -> UInt8 {
        nibbles.utf8Start[Int(character)] &- UInt8(ascii: "A")
    }
}
