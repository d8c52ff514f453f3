#!/bin/bash
# The benchmark lives in bench/; this path leads there too.
exec "$(dirname "$(readlink -f "$0")")/../../bench/run.sh" "$@"
