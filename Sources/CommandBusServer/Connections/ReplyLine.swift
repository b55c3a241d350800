import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reply lines as the server writes them: a JSON value and a newline. The two it writes most, a
/// `post`'s acknowledgement and a `send`'s result, are written straight into bytes, with no
/// dictionary to merge and sort for every command: byte for byte what ``CommandServer/success(_:_:)``
/// gives through `JSONValue.text`, which a test holds them to.
package enum ReplyLine {
    /// `value`'s text and a newline.
    package static func line(_ value: JSONValue) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(96)
        value.write(into: &line)
        line.append(0x0A)
        return line
    }

    /// `{"commandId":"…","id":…,"ok":true}` and a newline: a command accepted.
    package static func accepted(_ id: JSONValue?, commandID: UUID) -> [UInt8] {
        var line = opening(id, commandID: commandID)
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    /// `{"commandId":"…","id":…,"ok":true,"result":…}` and a newline: a command's result.
    package static func succeeded(_ id: JSONValue?, commandID: UUID, result: JSONValue) -> [UInt8] {
        var line = opening(id, commandID: commandID)
        line.append(contentsOf: #","result":"#.utf8)
        result.write(into: &line)
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    /// The members both share, in key order: `{"commandId":"…","id":…,"ok":true`.
    private static func opening(_ id: JSONValue?, commandID: UUID) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(128)
        line.append(contentsOf: #"{"commandId":""#.utf8)
        CommandID.appendText(commandID, to: &line)
        line.append(contentsOf: #"","id":"#.utf8)
        (id ?? .null).write(into: &line)
        line.append(contentsOf: #","ok":true"#.utf8)
        return line
    }
}
