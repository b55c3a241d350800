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
        withUnsafeBytes(of: id.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { output in
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
                    return position
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
    public static func parse(utf8 text: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard text.count == 36 else { return nil }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &uuid) { output -> Bool in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard text[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = hexValue(text[position]), let low = hexValue(text[position + 1]) else { return false }
                output[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return parsed ? UUID(uuid: uuid) : nil
    }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character &- UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character &- UInt8(ascii: "A") &+ 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character &- UInt8(ascii: "a") &+ 10
        default: nil
        }
    }
}
