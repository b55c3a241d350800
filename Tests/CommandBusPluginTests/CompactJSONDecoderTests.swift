@testable import CommandBusPlugin
import Foundation
import Testing

/// `CompactJSONDecoding` gives the value `JSONDecoder` gives, or declines: checked against Foundation
/// on seeded random commands, and on thousands of mutations of them (where Foundation may fail).
struct CompactJSONDecoderTests {
    /// Bytes a hostile or careless client might send: the valid text with a few bytes changed.
    static func mutate(_ bytes: [UInt8], _ random: inout SplitMix) -> [UInt8] {
        let alphabet = Array(#"{}[]:,"\ 0123456789.-+eE truefalsnul\u/"#.utf8) + [0x00, 0x1F, 0xC3, 0xFF]
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...3, using: &random) where !bytes.isEmpty {
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: bytes[at] = alphabet.randomElement(using: &random)!
            case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
            default: bytes.remove(at: at)
            }
        }
        return bytes
    }

    @Test func itGivesFoundationsValueOrDeclines() throws {
        var random = SplitMix(state: UInt64(ProcessInfo.processInfo.environment["CMDBUS_TEST_SEED"] ?? "") ?? 20_261_122)
        var declinedValid = 0, agreed = 0, leftToFoundation = 0
        for _ in 0..<1_000 {
            let value = random.command(.init(bigUnsigned: false, zeros: false))
            let valid = try JSONWire.encoder.encode(value)
            let compact = CompactJSONDecoding.decode(SampleCommand.self, from: valid)
            #expect(compact == value, "\(String(decoding: valid, as: UTF8.self))")
            if compact == nil { declinedValid += 1 }
            for _ in 0..<20 {
                let bytes = Data(Self.mutate(Array(valid), &random))
                let foundation = try? JSONDecoder().decode(SampleCommand.self, from: bytes)
                guard let fast = CompactJSONDecoding.decode(SampleCommand.self, from: bytes) else {
                    if foundation != nil { leftToFoundation += 1 }
                    continue
                }
                agreed += 1
                if fast != foundation {
                    let error = Result { try JSONDecoder().decode(SampleCommand.self, from: bytes) }
                    Issue.record("decoded what Foundation \(foundation == nil ? "refuses" : "reads otherwise"): \(String(decoding: bytes, as: UTF8.self)) (\(error))")
                }
            }
        }
        #expect(declinedValid == 0)
        #expect(agreed > 100, "too few mutations decoded to compare: \(agreed)")
        print("compact decoder: \(agreed) mutated inputs agreed with Foundation, \(leftToFoundation) were left to it")
    }

    /// Foundation reads `-0` as -0.0 and refuses some spellings of zero: every zero is its to read.
    @Test func aZeroDoubleIsLeftToFoundation() throws {
        for text in ["0", "-0", "0.0", "-0.0", "0e1", "0.0e1", "1e-400"] {
            #expect(CompactJSONDecoding.decode(Double.self, from: Data(text.utf8)) == nil, "\(text)")
            let foundation = Result { try JSONDecoder().decode(Double.self, from: Data(text.utf8)) }
            let wired = Result { try JSONWire.decode(Double.self, from: Data(text.utf8)) }
            switch (foundation, wired) {
            case (.success(let a), .success(let b)): #expect(a.bitPattern == b.bitPattern, "\(text)")
            case (.failure, .failure): break
            default: Issue.record("JSONWire.decode and Foundation disagree on \(text)")
            }
        }
    }

    @Test func numbersAndStringsMatchFoundation() throws {
        let texts = ["0", "-0", "1", "-1", "1.0", "1e2", "1E-2", "0.1", "123456789012345678", "9223372036854775807",
                     "9223372036854775808", "-9223372036854775809", "18446744073709551615", "1e308", "1e309", "2.5e-324",
                     "01", "1.", ".5", "+1", "true", "null", "\"1\"", "[1]", "  7  ", "7 x"]
        for text in texts {
            for decode in [Self.compare(Int.self), Self.compare(Int8.self), Self.compare(UInt64.self), Self.compare(Double.self),
                           Self.compare(Bool.self), Self.compare(String.self), Self.compare(Int?.self), Self.compare([Int].self)] {
                decode(Data(text.utf8))
            }
        }
        let strings = [#""a\"b\\c\/d""#, #""\u00e9\u65e5""#, #""\ud83d\ude00""#, #""\ud83d""#, #""\udc00x""#, "\"tab\there\"", #""\x""#, "\"é\""]
        for text in strings { Self.compare(String.self)(Data(text.utf8)) }
    }

    /// Checks one type on one input: where the compact decoder answers, Foundation answers the same.
    static func compare<T: Decodable & Equatable>(_ type: T.Type) -> (Data) -> Void {
        { data in
            guard let fast = CompactJSONDecoding.decode(T.self, from: data) else { return }
            let foundation = try? JSONDecoder().decode(T.self, from: data)
            #expect(fast == foundation, "\(T.self) from \(String(decoding: data, as: UTF8.self)): \(fast) against \(String(describing: foundation))")
        }
    }

    struct WithDate: Codable, Equatable { var at: Date }
    struct WithFloat: Codable, Equatable { var f: Float }

    @Test func whatFoundationDecodesItsOwnWayIsLeftToIt() throws {
        #expect(CompactJSONDecoding.decode(WithDate.self, from: Data(#"{"at":1.5}"#.utf8)) == nil)
        #expect(CompactJSONDecoding.decode(WithFloat.self, from: Data(#"{"f":0.1}"#.utf8)) == nil)
        #expect(CompactJSONDecoding.decode(Data.self, from: Data(#""AQID""#.utf8)) == nil)
        #expect(try JSONWire.decode(WithDate.self, from: Data(#"{"at":1.5}"#.utf8)) == WithDate(at: Date(timeIntervalSinceReferenceDate: 1.5)))
        #expect(try JSONWire.decode(WithFloat.self, from: Data(#"{"f":0.1}"#.utf8)) == WithFloat(f: 0.1))
        // "02" and "2" are one Int key: which value Foundation keeps depends on its hash order.
        #expect(CompactJSONDecoding.decode([Int: String].self, from: Data(#"{"02":"a","2":"b"}"#.utf8)) == nil)
        let unfolded = Data(#"{"+2":"a","10":"b"}"#.utf8)
        #expect(CompactJSONDecoding.decode([Int: String].self, from: unfolded) == [2: "a", 10: "b"])
        #expect(try JSONDecoder().decode([Int: String].self, from: unfolded) == [2: "a", 10: "b"])
        // The parser reads integers as Int64: a larger UInt64 is Foundation's to read exactly.
        #expect(CompactJSONDecoding.decode(UInt64.self, from: Data("18446744073709551615".utf8)) == nil)
        #expect(try JSONWire.decode(UInt64.self, from: Data("18446744073709551615".utf8)) == .max)
        #expect(throws: DecodingError.self) { try JSONWire.decode(SampleCommand.Flat.self, from: Data(#"{"int":1}"#.utf8)) }
    }
}
