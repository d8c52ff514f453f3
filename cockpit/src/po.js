// Translations in Cockpit's form: a gettext .po file becomes a po.LANG.js
// that calls cockpit.locale() with {msgid: [plural, translation...]} and
// a header carrying the language and the plural rule. The bridge serves
// the one of the browser's language as po.js.

// The text of a quoted .po string, escapes resolved.
function unquote(line) {
    const m = line.match(/^"(.*)"\s*$/);
    if (!m)
        throw new Error(`not a quoted string: ${line}`);
    return m[1].replace(/\\(.)/g, (all, c) => ({ n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\' })[c] ?? c);
}

// The entries of a .po file: {context, id, plural, strings, fuzzy}.
export function parsePo(text) {
    const entries = [];
    let entry = null;
    let field = null;

    const finish = () => {
        if (entry && entry.id !== undefined)
            entries.push(entry);
        entry = null;
        field = null;
    };

    for (const raw of text.split('\n')) {
        const line = raw.trim();
        if (line === '') {
            finish();
            continue;
        }
        if (line.startsWith('#,')) {
            if (entry && entry.id !== undefined)
                finish();
            entry = entry || { strings: [], fuzzy: false };
            if (line.includes('fuzzy'))
                entry.fuzzy = true;
            continue;
        }
        if (line.startsWith('#'))
            continue;
        const m = line.match(/^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(".*")$/);
        if (m) {
            if (m[1] === 'msgctxt' || (m[1] === 'msgid' && entry && entry.id !== undefined))
                finish();
            entry = entry || { strings: [], fuzzy: false };
            if (m[1] === 'msgctxt') {
                field = ['context'];
                entry.context = unquote(m[3]);
            } else if (m[1] === 'msgid') {
                field = ['id'];
                entry.id = unquote(m[3]);
            } else if (m[1] === 'msgid_plural') {
                field = ['plural'];
                entry.plural = unquote(m[3]);
            } else {
                const index = m[2] === undefined ? 0 : Number(m[2]);
                field = ['strings', index];
                entry.strings[index] = unquote(m[3]);
            }
            continue;
        }
        if (line.startsWith('"') && entry && field) {
            if (field[0] === 'strings')
                entry.strings[field[1]] += unquote(line);
            else
                entry[field[0]] += unquote(line);
            continue;
        }
        throw new Error(`cannot read this line of a .po file: ${raw}`);
    }
    finish();
    return entries;
}

// The header's fields, by lower-case name.
function headerFields(entries) {
    const header = entries.find(e => e.id === '' && e.context === undefined);
    const fields = {};
    for (const line of (header?.strings[0] || '').split('\n')) {
        const at = line.indexOf(':');
        if (at > 0)
            fields[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
    }
    return fields;
}

// The plural rule of a Plural-Forms header as the text of a JS function.
function pluralFunction(pluralForms) {
    const m = (pluralForms || '').match(/plural\s*=\s*([^;]+);?/);
    const expression = m ? m[1].trim() : '(n != 1)';
    if (!/^[n0-9\s()!=<>&|?:%+\-*/]+$/.test(expression))
        throw new Error(`unexpected plural rule: ${expression}`);
    return `function (n) { return ${expression}; }`;
}

// The object handed to cockpit.locale(), with the plural rule as text
// (functions have no JSON form).
export function poToLocale(text, language) {
    const entries = parsePo(text);
    const fields = headerFields(entries);
    const locale = { '': { language: fields.language || language, 'plural-forms': pluralFunction(fields['plural-forms']) } };
    for (const e of entries) {
        if (e.id === '' || e.fuzzy || !e.strings.some(s => s))
            continue;
        const key = e.context !== undefined ? `${e.context}\u0004${e.id}` : e.id;
        locale[key] = [e.plural ?? null, ...e.strings];
    }
    return locale;
}

export function poToCockpitJs(text, language) {
    const locale = poToLocale(text, language);
    const plural = locale[''][('plural-forms')];
    const header = `{"language": ${JSON.stringify(locale[''].language)}, "plural-forms": ${plural}}`;
    const body = Object.entries(locale)
            .filter(([key]) => key !== '')
            .map(([key, value]) => `${JSON.stringify(key)}: ${JSON.stringify(value)}`);
    return `cockpit.locale({"": ${header}${body.map(b => ',\n ' + b).join('')}\n});\n`;
}
