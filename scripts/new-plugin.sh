#!/usr/bin/env bash
# Makes a new plugin package from Plugins/Template.
# Usage: scripts/new-plugin.sh NAME [DIR]
#   NAME  the plugin's Swift name, such as Weather (its command is weather.hello)
#   DIR   where to create it; ./NAME by default. It must not exist yet, or be empty.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
source "$repo/scripts/lib/common.sh"

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/new-plugin.sh NAME [DIR]"
name="$1"
[[ "$name" =~ ^[A-Z][A-Za-z0-9]*$ ]] || die "plugin name '$name' must be a Swift type name: a capital letter, then letters and digits"
[ "$name" != "Template" ] || die "plugin name 'Template' is the template's own; choose another"
# The plugin's module takes its name: named as a module it builds against, it hides that module
# from its own code (in a plugin named Foundation, `import Foundation` is ignored and Date is unknown).
case "$name" in
    Swift|Foundation|FoundationEssentials|Glibc|Dispatch|Testing|XCTest|CommandBusPlugin|CCommandBusABI|Synchronization)
        die "plugin name '$name' is the name of a module the plugin builds against; choose another, such as ${name}Plugin" ;;
esac
[ $# -lt 2 ] || [ -n "$2" ] || die "DIR is empty; give a directory to create the plugin in, or leave it out for ./$name"
dir="${2:-./$name}"
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    die "'$dir' already exists and is not empty; choose another directory"
fi
lower="$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]')"
# SwiftPM names a path dependency after its directory, lowercased.
package="$(basename "$repo" | tr '[:upper:]' '[:lower:]')"

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
cp -R "$repo/Plugins/Template/." "$dir/"
rm -rf "$dir/.build" "$dir/Package.resolved"
# Rename paths that carry the template's name, deepest first.
find "$dir" -depth -name '*Template*' | while read -r path; do
    mv "$path" "$(dirname "$path")/$(basename "$path" | sed "s/Template/$name/g")"
done
find "$dir" -type f \( -name '*.swift' -o -name '*.md' \) -print0 | while IFS= read -r -d '' file; do
    sed -i \
        -e "s|@COMMANDBUS_PATH@|$repo|g" \
        -e "s|@COMMANDBUS_PACKAGE@|$package|g" \
        -e "s/Template/$name/g" \
        -e "s/template/$lower/g" \
        "$file"
done

cat <<MSG
Created plugin '$lower' in $dir (command: $lower.hello).

Build it and install it:
  (cd "$dir" && swift build -c release)
  mkdir -p plugins && cp "$dir/.build/release/lib$name.so" plugins/

Then: cmdbus run $lower.hello '{"name": "Ada"}'
MSG
