// Translations as Cockpit loads them: po.LANG.js calls cockpit.locale().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import vm from 'node:vm';

import { parsePo, poToCockpitJs } from '../src/po.js';

const PO = `
msgid ""
msgstr ""
"Language: de\\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\\n"

msgid "Start"
msgstr "Starten"

#, fuzzy
msgid "Stop"
msgstr "Halt"

msgctxt "verb"
msgid "Delete"
msgstr "Löschen"

msgid "$0 machine"
msgid_plural "$0 machines"
msgstr[0] "$0 Maschine"
msgstr[1] "$0 Maschi"
"nen"
`;

function load(js) {
    let locale = null;
    vm.runInNewContext(js, { cockpit: { locale: l => { locale = l } } });
    return locale;
}

test('entries, contexts, plurals and continued strings are read', () => {
    const entries = parsePo(PO);
    const plural = entries.find(e => e.plural);
    assert.deepEqual(plural.strings, ['$0 Maschine', '$0 Maschinen']);
    assert.equal(entries.find(e => e.id === 'Stop').fuzzy, true);
});

test('po.LANG.js hands cockpit.locale() the translations and the plural rule', () => {
    const locale = load(poToCockpitJs(PO, 'de'));
    assert.equal(locale[''].language, 'de');
    assert.equal(locale[''][('plural-forms')](1), false);
    assert.equal(locale[''][('plural-forms')](2), true);
    // Arrays of another realm: compared by their items.
    assert.deepEqual([...locale.Start], [null, 'Starten']);
    assert.equal(locale.Stop, undefined, 'fuzzy entries are left out');
    assert.deepEqual([...locale['verb\u0004Delete']], [null, 'Löschen']);
    assert.deepEqual([...locale['$0 machine']], ['$0 machines', '$0 Maschine', '$0 Maschinen']);
});

test('the shipped translations load', () => {
    const dir = new URL('../po/', import.meta.url);
    for (const file of fs.readdirSync(dir).filter(f => f.endsWith('.po'))) {
        const locale = load(poToCockpitJs(fs.readFileSync(new URL(file, dir), 'utf8'), file.slice(0, -3)));
        assert.equal(locale[''].language, file.slice(0, -3));
        assert.ok(Object.keys(locale).length > 10, `${file} translates something`);
    }
});
