# The instruction-count mode of scripts/bench.sh. Source it; don't run it.
#
# Runs each fixed workload of the benchmark executable under `valgrind --tool=callgrind` at
# COUNT and 2*COUNT operations and reports (instructions at 2*COUNT - instructions at COUNT) / COUNT:
# instructions per operation, without start-up and set-up; and whole `cmdbus` starts with 1 and
# 100 plugins. Counts barely move with the machine's load: two runs of one build agree to a
# fraction of a percent where time swings twofold, except where scheduling decides the path
# (post's runners, the baseline's second thread; the README says how much).

INSTRUCTION_COUNT=${CMDBUS_INSTRUCTION_COUNT:-1000}
# The benchmark executable: the release build for figures; the test script checks the debug one.
BENCH_BINARY=${BENCH_BINARY:-.build/release/CommandBusBenchmarks}

# Reads the workload names from the benchmark executable into INSTRUCTION_WORKLOADS.
load_instruction_workloads() {
    mapfile -t INSTRUCTION_WORKLOADS < <("$BENCH_BINARY" --list-workloads)
    [ ${#INSTRUCTION_WORKLOADS[@]} -gt 0 ] || die "$BENCH_BINARY --list-workloads named no workloads; is it built?"
}

# Prints the instructions callgrind collected for one run of WORKLOAD at COUNT operations.
collected_instructions() {
    local workload=$1 count=$2 output
    output=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$BENCH_BINARY" --workload "$workload" --count "$count" 2>&1) \
        || die "the $workload workload failed under valgrind; run it without valgrind to see why: $BENCH_BINARY --workload $workload --count $count"
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' <<<"$output" | grep . \
        || die "callgrind printed no instruction total for the $workload workload; is valgrind $(valgrind --version 2>/dev/null) working here?"
}

# Prints the instructions callgrind collected for one `cmdbus run greet` (no journal, no probe)
# with COUNT copies of the Greeter plugin in a fresh folder: plugin loading as the timed
# cold-start figures measure it. With `first`, the folder's first run (every file opened, the
# registry written); otherwise a later one (a run first fills the registry, and the counted run
# opens only the plugin its command reaches). cmdbus parks its main thread instead of
# `dispatchMain`, which valgrind cannot follow.
cold_start_instructions() {
    local count=$1 run=${2:-later} folder output index
    # cmdbus and the plugin come from the same build as the benchmark executable.
    local cmdbus greeter
    cmdbus="$(dirname "$BENCH_BINARY")/cmdbus"
    greeter="$(dirname "$BENCH_BINARY")/libGreeter.so"
    folder=$(mktemp -d)
    for ((index = 0; index < count; index++)); do cp "$greeter" "$folder/libGreeter$index.so"; done
    if [ "$run" != first ]; then
        CMDBUS_REGISTRY="$folder/registry.json" "$cmdbus" run greet '{"name":"Ada"}' --no-journal --no-probe --plugins "$folder" >/dev/null 2>&1 \
            || { rm -rf "$folder"; die "cmdbus run greet with $count plugins failed; run it without valgrind to see why"; }
    fi
    output=$(CMDBUS_PARK_MAIN_THREAD=1 CMDBUS_REGISTRY="$folder/registry.json" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$cmdbus" run greet '{"name":"Ada"}' --no-journal --no-probe --plugins "$folder" 2>&1) \
        || { rm -rf "$folder"; die "cmdbus run greet with $count plugins failed under valgrind: $output"; }
    rm -rf "$folder"
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' <<<"$output" | grep . \
        || die "callgrind printed no instruction total for cmdbus with $count plugins"
}

# Prints instructions per operation for every workload, send over baseline, and the cold-start
# counts, as text or JSON.
run_instruction_counts() {
    local format=$1 name single double per_op
    declare -A figures
    load_instruction_workloads
    for name in "${INSTRUCTION_WORKLOADS[@]}"; do
        log "counting instructions: $name ($INSTRUCTION_COUNT and $((2 * INSTRUCTION_COUNT)) operations)"
        single=$(collected_instructions "$name" "$INSTRUCTION_COUNT")
        double=$(collected_instructions "$name" "$((2 * INSTRUCTION_COUNT))")
        per_op=$(( (double - single) / INSTRUCTION_COUNT ))
        figures["${name}_instructions_per_op"]=$per_op
    done
    log "counting instructions: cmdbus run greet with 1 and 100 plugins"
    local one hundred
    one=$(cold_start_instructions 1)
    hundred=$(cold_start_instructions 100)
    figures[cold_start_1_plugin_instructions]=$one
    figures[cold_start_100_plugins_instructions]=$hundred
    figures[cold_start_instructions_per_plugin]=$(( (hundred - one) / 99 ))
    log "counting instructions: the first cmdbus run greet in a folder of 100 plugins (every file opened)"
    figures[cold_start_100_plugins_first_run_instructions]=$(cold_start_instructions 100 first)
    local ratio
    ratio=$(awk -v s="${figures[send_instructions_per_op]}" -v b="${figures[baseline_instructions_per_op]}" 'BEGIN { printf "%.3f", s / b }')
    # As journal_vs_raw_ratio, but in work: raw SQLite's instructions per row over the journal's per command.
    figures[journal_vs_raw_instructions_ratio]=$(awk -v r="${figures[sqlite_raw_insert_instructions_per_op]}" \
        -v j="${figures[journaled_post_instructions_per_op]}" 'BEGIN { printf "%.3f", r / j }')
    local keys=()
    for name in "${INSTRUCTION_WORKLOADS[@]}"; do keys+=("${name}_instructions_per_op"); done
    figures[send_vs_baseline_instructions_ratio]=$ratio
    keys+=(send_vs_baseline_instructions_ratio journal_vs_raw_instructions_ratio cold_start_1_plugin_instructions cold_start_100_plugins_instructions cold_start_instructions_per_plugin cold_start_100_plugins_first_run_instructions)
    if [ "$format" = json ]; then
        local key separator=""
        printf '{\n'
        for key in "${keys[@]}"; do printf '%s  "%s": %s' "$separator" "$key" "${figures[$key]}"; separator=$',\n'; done
        printf '\n}\n'
    else
        local key
        for key in "${keys[@]}"; do printf '%-38s %s\n' "$key" "${figures[$key]}"; done
    fi
}

# The test script's check that the mode works: every workload runs, and callgrind counts one under valgrind.
check_instruction_mode() {
    local name
    load_instruction_workloads
    for name in "${INSTRUCTION_WORKLOADS[@]}"; do
        "$BENCH_BINARY" --workload "$name" --count 20 || die "the $name benchmark workload failed; run: $BENCH_BINARY --workload $name --count 20"
    done
    # A flag it does not know is refused at once, not taken for a full timed run.
    if "$BENCH_BINARY" --no-such-flag >/dev/null 2>&1; then die "$BENCH_BINARY accepted an unknown flag; it must refuse one"; fi
    local total
    total=$(collected_instructions send 20)
    [ "$total" -gt 0 ] || die "callgrind counted no instructions for the send workload"
    total=$(cold_start_instructions 1)
    [ "$total" -gt 0 ] || die "callgrind counted no instructions for a cmdbus start"
}
