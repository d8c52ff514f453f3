// Builds the Cockpit package of microvmd into OUTDIR: the page, its
// bundled script and style sheet (esbuild, as Cockpit's own pages are
// built), the manifest and one po.LANG.js per translation.
//
//   node build.mjs SRCDIR NODE_MODULES OUTDIR MANIFEST
//
// SRCDIR is this directory, NODE_MODULES where `npm ci` put the packages
// (the build directory: the source tree stays clean), MANIFEST the
// manifest.json that meson configured.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

import { poToCockpitJs } from './src/po.js';

const [srcdir, modules, outdir, manifest] = process.argv.slice(2);
if (!manifest) {
    console.error('usage: node build.mjs SRCDIR NODE_MODULES OUTDIR MANIFEST');
    process.exit(2);
}

const require = createRequire(path.join(path.resolve(modules), 'build.cjs'));
const esbuild = require('esbuild');

// A fresh directory each time: nothing of an older build is installed.
const staging = `${outdir}.tmp`;
fs.rmSync(staging, { recursive: true, force: true });
fs.mkdirSync(staging, { recursive: true });

await esbuild.build({
    entryPoints: { index: path.join(srcdir, 'src', 'index.jsx') },
    bundle: true,
    outdir: staging,
    format: 'iife',
    target: ['es2020'],
    minify: true,
    sourcemap: false,
    legalComments: 'external',
    nodePaths: [path.resolve(modules)],
    // Cockpit's fonts, served by cockpit-ws (page.css).
    external: ['../../static/*'],
    jsx: 'automatic',
    loader: {
        '.js': 'jsx',
        // Cockpit serves the Red Hat fonts itself (/cockpit/static/fonts);
        // page.css points there, so PatternFly's copies are left out.
        '.woff': 'empty',
        '.woff2': 'empty',
        '.ttf': 'empty',
        '.eot': 'empty',
        '.otf': 'empty',
        '.svg': 'dataurl',
        '.png': 'empty',
        '.jpg': 'empty',
    },
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
});

fs.copyFileSync(path.join(srcdir, 'src', 'index.html'), path.join(staging, 'index.html'));
fs.copyFileSync(manifest, path.join(staging, 'manifest.json'));

const podir = path.join(srcdir, 'po');
for (const file of fs.readdirSync(podir)) {
    if (!file.endsWith('.po'))
        continue;
    const lang = file.slice(0, -3);
    const text = fs.readFileSync(path.join(podir, file), 'utf8');
    fs.writeFileSync(path.join(staging, `po.${lang}.js`), poToCockpitJs(text, lang));
}

fs.rmSync(outdir, { recursive: true, force: true });
fs.renameSync(staging, outdir);
