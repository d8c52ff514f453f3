#!/bin/bash
# The benchmark lives in bench/; this path is the one the issue names.
exec "$(dirname "$(readlink -f "$0")")/../../bench/run.sh" "$@"
