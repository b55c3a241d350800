#!/usr/bin/env bash
# Builds the libFuzzer targets (swiftc -sanitize=fuzzer, straight from the module sources)
# and runs each over its corpus for a bounded number of inputs.
# Usage: scripts/fuzz.sh [RUNS]   (default 20000 inputs per target; 0 runs the corpus only)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
source "$repo/scripts/lib/common.sh"
runs="${1:-20000}"
out="$repo/.build/fuzz"
mkdir -p "$out"
abi="$repo/Sources/CCommandBusABI/include"
# CLinux: CommandBusSupport's system-library module (pidfd_open, timerfd), found by its module map.
flags=(-O -sanitize=fuzzer -parse-as-library -swift-version 6 -suppress-warnings -package-name commandbus
    -Xcc -fmodule-map-file="$repo/Sources/CLinux/module.modulemap")

build() {  # build NAME MODULE SOURCES...
    local name="$1" module="$2"; shift 2
    log "building fuzz target $name"
    swiftc "${flags[@]}" -module-name "$module" -Xcc -fmodule-map-file="$abi/module.modulemap" -I "$abi" \
        "$@" -o "$out/$name"
}

core=$(find "$repo/Sources/CommandBus" -name '*.swift')
sdk=$(find "$repo/Sources/CommandBusPlugin" -name '*.swift')
support=$(find "$repo/Sources/CommandBusSupport" -name '*.swift')
arguments="$repo/Sources/CommandBusCLI/Arguments"
cli=("$arguments/ArgumentParser.swift" "$arguments/ArgumentValues.swift" "$arguments/PayloadBuilder.swift" "$arguments/PayloadOperand.swift")

build dynamic-path CommandBus $core "$repo/Tests/Fuzz/DynamicPathFuzz.swift"
build sdk-decoder CommandBusPlugin $sdk "$repo/Tests/Fuzz/SDKDecoderFuzz.swift"
# The CLI sources import CommandBus: build the core as a library module first, instrumented too.
log "building the CommandBus module for the CLI target"
swiftc "${flags[@]}" -module-name CommandBus -emit-module -emit-module-path "$out/CommandBus.swiftmodule" \
    -emit-library -static $core -o "$out/libCommandBus.a"
# The CLI's parser and the server's request import CommandBusSupport and, from CommandBusHost, only
# HostFailure and the command-name check: build those two as modules.
library() {  # library MODULE SOURCES...
    local module="$1"; shift
    log "building the $module module for the CLI target"
    swiftc "${flags[@]}" -module-name "$module" -I "$out" -emit-module -emit-module-path "$out/$module.swiftmodule" \
        -emit-library -static "$@" -o "$out/lib$module.a"
}
library CommandBusSupport $support
library CommandBusHost "$repo/Sources/CommandBusHost/Session/HostFailure.swift" "$repo/Sources/CommandBusHost/CommandNameProblem.swift"
build arguments CommandBusCLI -I "$out" -L "$out" -lCommandBusHost -lCommandBusSupport -lCommandBus \
    "${cli[@]}" "$repo/Tests/Fuzz/ArgumentsFuzz.swift"

build http-request CommandBusHTTP "$repo/Sources/CommandBusHTTP/HTTPRequestParser.swift" "$repo/Sources/CommandBusHTTP/HTTPRequest.swift" \
    "$repo/Sources/CommandBusHTTP/HTTPLimits.swift" "$repo/Tests/Fuzz/HTTPRequestFuzz.swift"
build server-request CommandBusServer -I "$out" -L "$out" -lCommandBusHost -lCommandBusSupport -lCommandBus \
    "$repo/Sources/CommandBusServer/Connections/ServerRequest.swift" "$repo/Tests/Fuzz/ServerRequestFuzz.swift"

for target in dynamic-path sdk-decoder arguments http-request server-request; do
    corpus="$out/corpus-$target"
    mkdir -p "$corpus"
    cp -n "$repo/Tests/Fuzz/Corpus/$target/"* "$corpus/" 2>/dev/null || true
    log "fuzzing $target ($runs inputs)"
    "$out/$target" -runs="$runs" -max_len=4096 -timeout=10 "$corpus" 2>&1 | tail -n 2
done
