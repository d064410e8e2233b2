# bash completion for handoffctl(1)                      -*- shell-script -*-

_handoffctl()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local commands="status submit verify consume inbox wait cancel mcp list show render baton keygen"
    local cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            -*) ;;
            *) cmd=${words[i]}; break ;;
        esac
    done

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi

    # -s is --state for list, --spool elsewhere.
    [[ $cmd == list && $prev == -s ]] && prev=--state
    # -f is --follow for inbox, -t --timeout for wait: no argument / none to offer.
    [[ $cmd == inbox && $prev == -f ]] && prev=--follow

    # Options that take an argument.
    case $prev in
        -c|--config|-k|--key|--transcript|--payload|-o|--output)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        -s|--spool|-d|--state-dir)
            COMPREPLY=($(compgen -d -- "$cur"))
            return ;;
        -t|--type)
            [[ $cmd == render ]] || { [[ $prev == --type ]] || return; }
            COMPREPLY=($(compgen -W "vox/1.0 baton/1 U.AgentHandoff/0.1.0 act/1.0" -- "$cur"))
            return ;;
        --state)
            COMPREPLY=($(compgen -W "handoff claimed archive rejected" -- "$cur"))
            return ;;
        -u|--until)
            COMPREPLY=($(compgen -W "claimed" -- "$cur"))
            return ;;
        --timeout|-w|--window)
            return ;;
        -f|--from|-t|--to|--agent|-r|--reason|--context|--ttl|--id|--kid|\
        --caller-hash|--now|--max-window|--max-clock-skew|--max-size)
            return ;;
    esac

    local opts="--help --version"
    case $cmd in
        status)  opts+=" -c --config -j --json" ;;
        submit)  opts+=" -c --config -s --spool --create-spool -k --key -f --from -t --to
                        -r --reason --transcript --context --ttl --id --kid --type --payload
                        --caller-hash -o --output" ;;
        verify)  opts+=" -c --config -k --key --kid --now --max-window --max-clock-skew --max-size" ;;
        consume) opts+=" -c --config -a --agent -d --state-dir -w --window -x --context" ;;
        inbox)   opts+=" -c --config -a --agent -d --state-dir -w --window -f --follow -j --json" ;;
        wait)    opts+=" -c --config -s --spool -t --timeout -u --until -j --json" ;;
        cancel)  opts+=" -c --config -s --spool -k --key -f --from -t --timeout -j --json" ;;
        mcp)     opts+=" -a --agent -c --config -k --key --kid" ;;
        list)    opts+=" -c --config -s --state -a --agent -j --json" ;;
        show)    opts+=" -c --config -j --json" ;;
        render)  opts+=" -t --type" ;;
        baton)   opts+=" -c --config -s --spool -H --history -j --json" ;;
        keygen)  opts+=" -o --output --ed25519 --kid" ;;
    esac

    if [[ $cmd == baton && $cword -eq $((i + 1)) && $cur != -* ]]; then
        COMPREPLY=($(compgen -W "show list" -- "$cur"))
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $cmd == verify || $cmd == render ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
} &&
    complete -F _handoffctl handoffctl

# ex: filetype=sh
