#!/bin/sh
# Refreshes the page's translation template (po/microvmd-cockpit.pot) from
# the cockpit.gettext calls in src/ and merges it into every language:
#   ninja -C build cockpit-update-po
# The sources are read as C, as Cockpit reads its own .js and .jsx: the
# translatable strings are double-quoted, _("..."), N_("...") and
# cockpit.ngettext("...", "...", n).
set -eu
cd "$(dirname "$0")/.."
xgettext --language=C --from-code=UTF-8 --no-location --sort-output \
  --keyword= --keyword=_ --keyword=N_ --keyword=ngettext:1,2 \
  --package-name=microvmd-cockpit --msgid-bugs-address= \
  --output=po/microvmd-cockpit.pot src/*.js src/*.jsx 2>/dev/null
for po in po/*.po; do
  msgmerge --quiet --update --backup=none --no-location --sort-output "$po" po/microvmd-cockpit.pot
done
