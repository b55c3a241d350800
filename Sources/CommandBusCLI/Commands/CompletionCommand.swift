import CommandBusHost
import CommandBusSupport

/// `cmdbus completion bash`: a bash completion script made from the subcommands' own option
/// tables, so it offers every option `cmdbus` takes and none it does not; `cmdbus completion
/// zsh`, the same script through zsh's `bashcompinit`, which runs bash completion functions; and
/// `cmdbus completion commands`, which the script runs to offer, after `run` and `can`, the
/// command names the plugins handle.
enum CompletionCommand {
    /// What the script knows of one subcommand.
    struct Entry: Sendable {
        let name: String
        let options: [ArgumentSpec.Option]
        /// Its own subcommands (`journal list`), if it has any.
        let verbs: [String]
    }

    static let spec = ArgumentSpec(command: "completion", options: [.connect, .bus, .help] + PluginOptions.options)

    static let help = """
        Usage: cmdbus completion bash|zsh

        Prints a completion script for bash or zsh: the subcommands and theirs, each one's
        options and the values some take (a directory, a file, a mode), and after 'run' and
        'can' the names of the commands the bus the line names handles: a server's with
        --connect, the shared bus's with --bus, else the plugins' in the --plugins directories
        on the line (or the default ones). Add this line to ~/.bashrc:
          source <(cmdbus completion bash)
        or this one to ~/.zshrc (zsh runs the bash script through its bashcompinit):
          source <(cmdbus completion zsh)

        Options:
        \(spec.optionsHelp)
        """

    /// Prints the script, or (`completion commands`, as the script asks) the command names.
    static func run(_ arguments: ArgumentSpec.Parsed, console: Console, subcommands: [Entry]) async throws(HostFailure) {
        switch arguments.positionals.first {
        case "bash": console.out(bashScript(for: subcommands))
        case "zsh": console.out(zshScript(for: subcommands))
        case "commands": try await printCommandNames(arguments, console: console)
        case let other?: throw .usage("'cmdbus completion' writes a script for bash or zsh, not for \(quoted(other)); run 'cmdbus completion bash' (or zsh)")
        case nil: throw .usage("'cmdbus completion' needs the shell's name: cmdbus completion bash (or zsh)")
        }
    }

    /// The names of the commands the bus the options name handles, one a line: a server's, the
    /// shared bus's live hosts', or the local plugins' (from the registry's summaries where it
    /// has them, so a folder of plugins answers without opening each file).
    private static func printCommandNames(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        let client = try await BusClientFactory.client(
            connection: try ConnectionOptions(arguments), plugins: try PluginOptions(arguments).deferringLoads,
            journal: .withoutJournal(arguments), console: console, reportSkipped: false
        )
        let catalog = try await client.plugins()
        await client.close()
        let routes = catalog.objectValue?["commands"]?.arrayValue ?? []
        let names = Set(routes.compactMap { $0.objectValue?["command"]?.stringValue }).sorted()
        if !names.isEmpty { console.out(names.joined(separator: "\n")) }
    }

    /// The zsh script: the bash script, run by zsh's `bashcompinit` (which gives bash's `complete`
    /// and `compgen`, and calls `_cmdbus` in sh emulation, arrays counted from 0 as bash counts
    /// them), after `compinit` if the shell has not run it.
    static func zshScript(for subcommands: [Entry]) -> String {
        """
        #compdef cmdbus
        # zsh completion for cmdbus, written by 'cmdbus completion zsh': the bash script, through
        # zsh's bashcompinit. Add to ~/.zshrc:  source <(cmdbus completion zsh)
        (( $+functions[compdef] )) || { autoload -U compinit && compinit }
        autoload -U +X bashcompinit && bashcompinit
        \(bashScript(for: subcommands))
        """
    }

    /// The bash script: one function, `_cmdbus`, registered for `cmdbus`.
    static func bashScript(for subcommands: [Entry]) -> String {
        let names = subcommands.map(\.name).sorted()
        let options = subcommands.sorted { $0.name < $1.name }.map { entry in
            let words = entry.options.flatMap(\.spellings)
            let valued = entry.options.filter(\.takesValue).flatMap(\.spellings)
            return "        \(entry.name)) options=\"\(words.joined(separator: " "))\"; valued=\" \(valued.joined(separator: " ")) \" ;;"
        }
        // What each option's value completes to, by option: a directory, a file, or its choices.
        var values: [String: String] = [:]
        for option in subcommands.flatMap(\.options) where option.takesValue {
            let names = option.spellings.joined(separator: "|")
            if !option.choices.isEmpty {
                values[names] = "COMPREPLY=($(compgen -W \"\(option.choices.joined(separator: " "))\" -- \"$cur\"))"
            } else if option.valueName == "DIR" {
                values[names] = "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\"))"
            } else if option.valueName == "PATH" {
                values[names] = "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\"))"
            }
        }
        let valueArms = values.keys.sorted().map { "            \($0)) \(values[$0]!) ;;" }
        // Flags that may carry a value (`--connect SOCKET`, `--connect=SOCKET`).
        let optional = Set(subcommands.flatMap(\.options).filter(\.inlineValueAllowed).map { "--" + $0.name }).sorted()
        let verbArms = subcommands.filter { !$0.verbs.isEmpty }.sorted { $0.name < $1.name }.map { entry in
            "        \(entry.name):0:*) COMPREPLY=($(compgen -W \"\(entry.verbs.joined(separator: " "))\" -- \"$cur\")) ;;"
        }
        return """
            # bash completion for cmdbus, written by 'cmdbus completion bash'.
            # Add to ~/.bashrc:  source <(cmdbus completion bash)
            _cmdbus() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
                local sub=${COMP_WORDS[1]} options="" valued=" " pending="" verb="" word index positional=0 joined=0
                local optional=" \(optional.joined(separator: " ")) " carried=""
                local -a asked=()
                COMPREPLY=()
                if ((COMP_CWORD == 1)); then
                    COMPREPLY=($(compgen -W "\(names.joined(separator: " ")) --help --version" -- "$cur"))
                    return
                fi
                case $sub in
            \(options.joined(separator: "\n"))
                    help) ;;
                    *) return ;;
                esac
                # bash splits --name=value and key=value at '=': the value belongs to the word before.
                if [[ $cur == = ]]; then cur=""; elif [[ $prev == = ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
                for ((index = 2; index < COMP_CWORD; index++)); do
                    word=${COMP_WORDS[index]}
                    if [[ -n $carried ]]; then
                        # A flag's value: after '=', or a path (it holds a '/' or ends in .sock).
                        if [[ $word == = ]]; then continue; fi
                        if [[ ${COMP_WORDS[index-1]} == = || $word == */* || $word == *.sock ]]; then
                            asked+=("$carried=$word"); carried=""; continue
                        fi
                        asked+=("$carried"); carried=""
                    fi
                    if [[ -n $pending ]]; then
                        [[ $word == = ]] && continue
                        [[ $pending == --plugins || $pending == --bus ]] && asked+=("$pending" "$word")
                        pending=""
                        continue
                    fi
                    if [[ $optional == *" $word "* ]]; then carried=$word; continue; fi
                    # --name=value kept whole (a COMP_WORDBREAKS without '=').
                    if [[ $word == --*=* ]]; then
                        case ${word%%=*} in --plugins|--bus|--connect) asked+=("$word") ;; esac
                        continue
                    fi
                    if [[ $word == = ]]; then joined=1; continue; fi
                    if ((joined)); then joined=0; continue; fi
                    if [[ $valued == *" $word "* ]]; then pending=$word; continue; fi
                    [[ $word == -* ]] && continue
                    ((positional == 0)) && verb=$word
                    positional=$((positional + 1))
                done
                [[ -n $carried ]] && asked+=("$carried")
                if [[ $valued == *" $prev "* && ${COMP_WORDS[COMP_CWORD]} != -* ]]; then
                    case $prev in
            \(valueArms.joined(separator: "\n"))
                    esac
                    return
                fi
                if [[ $optional == *" $prev "* && ( $cur == */* || $cur == *.sock ) ]]; then
                    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))
                    return
                fi
                if [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W "$options" -- "$cur"))
                    return
                fi
                case $sub:$positional:$verb in
                    run:0:*|can:0:*)
                        local names
                        local -a bounded=()
                        command -v timeout >/dev/null && bounded=(timeout 5)
                        names=$("${bounded[@]}" "${COMP_WORDS[0]/#\\~/$HOME}" completion commands "${asked[@]}" 2>/dev/null)
                        COMPREPLY=($(compgen -W "$names" -- "$cur")) ;;
                    run:1:*|can:1:*)
                        # A payload file, @FILE.
                        [[ $cur == @* ]] && COMPREPLY=($(compgen -f -P @ -- "${cur#@}")) ;;
            \(verbArms.joined(separator: "\n"))
                    help:0:*) COMPREPLY=($(compgen -W "\(names.joined(separator: " "))" -- "$cur")) ;;
                    completion:0:*) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
                    batch:0:*|plugins:1:check|plugins:1:forget|journal:1:import)
                        compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
                esac
            }
            complete -F _cmdbus cmdbus
            """
    }
}
