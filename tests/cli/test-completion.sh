#!/bin/bash
# The bash completion of microvmctl, driven as bash drives it: COMP_WORDS
# and COMP_CWORD set, the function called with the command's name. The
# command is a stand-in that answers "list --names" and records its
# arguments.
set -u

source "$1" || exit 1

passed=0
failed=0
# The stand-in runs in a command substitution: its arguments go to a file.
args_file=$(mktemp)
trap 'rm -f "$args_file"' EXIT

fake_ctl ()
{
    printf '%s\n' "$*" > "$args_file"
    case " $* " in
        *" volume list --names "*) printf 'cache\ndata\n' ;;
        *" snapshot list --names "*) printf 'before\nnightly\n' ;;
        *" network list --names "*) printf 'lan\nwan\n' ;;
        *" list --names "*) printf 'db\nweb\nwww\n' ;;
    esac
}

# Completes the words given, the last one being the word under the cursor.
completions ()
{
    COMP_WORDS=("$@")
    COMP_CWORD=$(( $# - 1 ))
    COMPREPLY=()
    _microvmctl fake_ctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

expect ()
{
    local want=$1
    shift
    local got
    got=$(completions "$@")
    if [[ $got == "$want" ]]; then
        passed=$(( passed + 1 ))
    else
        failed=$(( failed + 1 ))
        echo "not ok: completing '$*' gave '$got', expected '$want'" >&2
    fi
}

# This is what "complete" registered.
if complete -p microvmctl | grep -q -- '-F _microvmctl'; then
    passed=$(( passed + 1 ))
else
    failed=$(( failed + 1 )); echo "not ok: no completion registered for microvmctl" >&2
fi

expect "standby start stats stop" microvmctl st
expect "rename resize restart resume" microvmctl re
expect "set-desired shell show snapshot standby start stats stop" microvmctl --json s
expect "rename resize restart resume" microvmctl --timeout 5 re
expect "list" microvmctl li
expect "web www" microvmctl start w
expect "wait" microvmctl wa
expect "create list rm" microvmctl volume ""
expect "cache data" microvmctl volume rm ""
expect "data" microvmctl volume rm d
expect "" microvmctl volume create d
expect "create list rm" microvmctl network ""
expect "lan wan" microvmctl network rm ""
expect "wan" microvmctl network rm w
expect "" microvmctl network create l
expect "--gateway" microvmctl network create lan 10.0.0.0/24 --gat
expect "" microvmctl network create lan 10.0.0.0/24 --mtu ""
expect "db web www" microvmctl console ""
expect "db web www" microvmctl stats web ""
expect "--interval --iterations" microvmctl top --i
expect "" microvmctl top --interval ""
expect "" microvmctl top ""
expect "--since" microvmctl metrics web --si
expect "web www" microvmctl metrics --until 1h w
# Images: the verbs of image, the values of --policy.
expect "list prune rm" microvmctl image ""
expect "always" microvmctl pull --policy a
expect "--policy" microvmctl pull --pol
expect "" microvmctl image rm ""
expect "running" microvmctl set-desired web r
expect "" microvmctl rename web ""
expect "" microvmctl exec web -- l
expect "" microvmctl list ""
expect "--label" microvmctl list --la
expect "--names" microvmctl list --na
expect "--healthy --help" microvmctl wait --he
expect "--id" microvmctl wait --i
expect "--force" microvmctl delete --f
expect "--memory" microvmctl resize web --m
expect "--vcpus --version" microvmctl resize web --v
expect "db web www" microvmctl resize ""
expect "console vmm workload" microvmctl logs --source ""
# Snapshots: the verbs, machines to take and list them of, snapshots to
# name, and --set, whose value is free.
expect "create fork list restore rm show" microvmctl snapshot ""
expect "restore rm" microvmctl snapshot r
expect "db web www" microvmctl snapshot create ""
expect "web www" microvmctl snapshot list w
expect "" microvmctl snapshot create web ""
expect "before nightly" microvmctl snapshot restore ""
expect "nightly" microvmctl snapshot rm n
expect "before" microvmctl snapshot fork b
expect "" microvmctl snapshot fork before ""
expect "before" microvmctl --timeout 5 snapshot show b
expect "--names" microvmctl snapshot --na
expect "--session" microvmctl snapshot list --se
expect "--session --set" microvmctl snapshot fork before copy --se
expect "" microvmctl snapshot fork before copy --set ""
expect "fork" microvmctl fo
expect "db web www" microvmctl fork ""
expect "" microvmctl fork web ""
expect "--session --set" microvmctl fork web copy --se
expect "--session" microvmctl list --se

# Names come from the same bus as the command line's.
completions microvmctl --session stop "" > /dev/null
last_args=$(cat "$args_file")
if [[ " $last_args " == *" --session "* ]]; then
    passed=$(( passed + 1 ))
else
    failed=$(( failed + 1 )); echo "not ok: names not asked on the session bus: '$last_args'" >&2
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
