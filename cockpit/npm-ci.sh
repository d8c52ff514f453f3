#!/bin/sh
# Installs the page's npm packages as package-lock.json pins them, into
# the build directory (DIR/node_modules), and touches STAMP. Meson runs it
# again only when the lock file changes.
#   npm-ci.sh PACKAGE_JSON PACKAGE_LOCK DIR STAMP
set -eu
package=$1 lock=$2 dir=$3
stamp="$(cd "$(dirname "$4")" && pwd)/$(basename "$4")"
cp "$package" "$dir/package.json"
cp "$lock" "$dir/package-lock.json"
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
touch "$stamp"
