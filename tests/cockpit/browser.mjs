// Drives microvmd's Cockpit page in headless Chromium (Debian's, through
// playwright-core) for test-cockpit.c, which has started the daemon, the
// bus, polkitd and cockpit-ws. One scenario per run:
//
//   node browser.mjs machine    a machine's life in the page
//   node browser.mjs thousand   a list of 1,000 machines following a change
//   node browser.mjs limited    a user polkit gives nothing
//
// Environment: MV_COCKPIT_URL (the page), MV_NODE_MODULES (where npm put
// playwright-core), MV_ARTIFACTS (screenshots), MV_MICROVMCTL,
// MV_BROWSER_PROFILE (a fresh Chromium profile), and per scenario
// MV_SPEC_FILE and MV_KERNEL. Exits 0 when every check passed.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';

const env = name => {
    const v = process.env[name];
    if (!v)
        throw new Error(`${name} is not set`);
    return v;
};

const require = createRequire(path.join(env('MV_NODE_MODULES'), 'driver.cjs'));
const { chromium } = require('playwright-core');
const run = promisify(execFile);

const CHROMIUM = process.env.MV_CHROMIUM || '/usr/bin/chromium';
const artifacts = env('MV_ARTIFACTS');
const started = Date.now();

function log(...args) {
    const t = ((Date.now() - started) / 1000).toFixed(1);
    console.log(`[${t}s]`, ...args);
}

function check(condition, message) {
    if (!condition)
        throw new Error(`check failed: ${message}`);
}

async function microvmctl(...args) {
    const { stdout } = await run(env('MV_MICROVMCTL'), args, { env: process.env });
    return stdout;
}

// Types @text on a machine's console with `microvmctl console`, as another
// client would, and leaves with the escape key.
function typeOnConsole(name, text) {
    return new Promise((resolve, reject) => {
        const child = execFile(env('MV_MICROVMCTL'), ['console', name], { env: process.env, timeout: 10000 },
                               error => (error && !error.killed ? reject(error) : resolve()));
        child.stdin.write(text);
        setTimeout(() => child.stdin.write('\x1d'), 500);
    });
}

// The daemon's own idea of a machine's state, for comparing with the page.
async function daemonState(name) {
    const machines = JSON.parse(await microvmctl('--json', 'list'));
    return machines.find(m => m.name === name)?.state;
}

async function launch() {
    // A fresh profile of the test's own.
    const context = await chromium.launchPersistentContext(env('MV_BROWSER_PROFILE'), {
        executablePath: CHROMIUM,
        headless: true,
        args: [
            '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
            '--disable-background-networking', '--disable-component-update', '--disable-sync',
        ],
        viewport: { width: 1400, height: 900 },
        locale: 'en-US',
    });
    const page = context.pages()[0] || await context.newPage();
    page.on('pageerror', err => log('page error:', err.message));
    page.on('console', msg => {
        if (msg.type() === 'error' || msg.type() === 'warning')
            log(`page console ${msg.type()}:`, msg.text());
    });
    return { browser: context, page };
}

async function open(page) {
    await page.goto(env('MV_COCKPIT_URL'));
    // Marks this document: a reload would lose it.
    await page.evaluate(() => { window.mvNotReloaded = true });
}

async function notReloaded(page) {
    check(await page.evaluate(() => window.mvNotReloaded === true), 'the page was not reloaded');
}

const tab = (page, name) => page.getByRole('tab', { name, exact: true });
const row = (page, name) => page.locator(`tr.mv-machine-row[data-machine="${name}"]`);

async function screenshot(page, name, fullPage = true) {
    const file = path.join(artifacts, name);
    await page.screenshot({ path: file, fullPage });
    log('screenshot:', file);
}

// ---- a machine's life ----

async function machineScenario(page) {
    await open(page);
    await page.locator('text=No machines').waitFor({ timeout: 20000 });
    check(await page.locator('#mv-connection-error').count() === 0, 'the daemon is reached');

    // Created from outside; the list follows without a reload.
    await microvmctl('create', '-f', env('MV_SPEC_FILE'));
    log('created "web" with microvmctl');
    await row(page, 'web').locator('[data-state="Stopped"]').waitFor({ timeout: 10000 });
    await notReloaded(page);
    check((await row(page, 'web').locator('.mv-hypervisor').innerText()) === 'cloud-hypervisor',
          'the list shows the hypervisor');
    check((await row(page, 'web').locator('.mv-memory').innerText()) === '256 MiB', 'the list shows the memory');
    check((await row(page, 'web').locator('.mv-vcpus').innerText()) === '1', 'the list shows the vCPUs');
    await screenshot(page, 'machine-list.png');

    // Its page; Start from the page's button, the state follows.
    await row(page, 'web').locator('.mv-name button').click();
    await page.locator('#mv-machine-name', { hasText: 'web' }).waitFor();
    await page.locator('#mv-properties [data-property="Labels"]', { hasText: 'tier=front' }).waitFor();
    await page.locator('#mv-action-start').click();
    await page.locator('#mv-machine-state [data-state="Running"]').waitFor({ timeout: 30000 });
    check(await daemonState('web') === 'Running', 'the daemon says Running too');
    log('started from the page');

    // The console: the boot output, then a typed command's answer.
    await tab(page, 'Console').click();
    const terminal = page.locator('#mv-terminal .xterm-rows');
    await terminal.filter({ hasText: 'Linux version' }).waitFor({ timeout: 15000 });
    await page.locator('#mv-console-status[data-status="connected"]').waitFor({ timeout: 15000 });
    await page.locator('#mv-terminal').click();
    // Typed until the guest answers: the first keys may go out before
    // microvmctl holds the console.
    let answered = false;
    for (let attempt = 0; attempt < 10 && !answered; attempt++) {
        await page.keyboard.type('echo COCKPIT-$((6*7))');
        await page.keyboard.press('Enter');
        try {
            await terminal.filter({ hasText: 'COCKPIT-42' }).waitFor({ timeout: 3000 });
            answered = true;
        } catch (e) {
            log('no answer yet; typing again');
        }
    }
    check(answered, 'the guest answered the typed command on the console');
    log('the console answered');
    await screenshot(page, 'machine-console.png');

    // The console log, followed: what the guest says after the log is
    // shown comes in too (typed here through microvmctl's own console).
    await tab(page, 'Logs').click();
    await page.locator('#mv-logs', { hasText: 'Linux version' }).waitFor({ timeout: 10000 });
    await page.locator('#mv-logs', { hasText: 'COCKPIT-42' }).waitFor({ timeout: 10000 });
    let followed = false;
    for (let attempt = 0; attempt < 10 && !followed; attempt++) {
        // The page's console may not have let go of typing yet.
        await typeOnConsole('web', 'echo FOLLOWED-$((2*4))\n');
        try {
            await page.locator('#mv-logs', { hasText: 'FOLLOWED-8' }).waitFor({ timeout: 2000 });
            followed = true;
        } catch (e) {
            log('not in the log yet; typing again');
        }
    }
    check(followed, 'the log follows what the guest prints');
    log('the log followed');

    // Snapshots of the running guest: taken, forked into a new machine,
    // deleted, each seen through the ObjectManager's signals.
    await tab(page, 'Snapshots').click();
    await page.locator('#mv-snapshot-create').click();
    await page.locator('#mv-snapshot-dialog-name').fill('before');
    await page.locator('#mv-snapshot-dialog .mv-dialog-submit').click();
    const snapshot = page.locator('#mv-snapshots tr[data-snapshot="before"]');
    await snapshot.waitFor({ timeout: 30000 });
    log('snapshot taken from the page');
    await snapshot.getByRole('button', { name: 'Fork' }).click();
    await page.locator('#mv-fork-dialog-name').fill('web-fork');
    await page.locator('#mv-fork-dialog .mv-dialog-submit').click();
    await page.locator('#mv-fork-dialog').waitFor({ state: 'detached', timeout: 30000 });
    check((await microvmctl('--json', 'list')).includes('"web-fork"'), 'the fork is a machine');
    await snapshot.getByRole('button', { name: 'Delete' }).click();
    await page.locator('.mv-confirm-button').click();
    await snapshot.waitFor({ state: 'detached', timeout: 30000 });
    log('forked and deleted from the page');

    // Pause and resume, standby and back, restart (confirmed first): the
    // state follows each, as the daemon has it.
    const state = page.locator('#mv-machine-state');
    const expectState = async (want, what) => {
        await state.locator(`[data-state="${want}"]`).waitFor({ timeout: 30000 });
        check(await daemonState('web') === want, `${what}: the daemon says ${want} too`);
    };
    await page.locator('#mv-action-pause').click();
    await expectState('Paused', 'paused');
    await page.locator('#mv-action-resume').click();
    await expectState('Running', 'resumed');
    await page.locator('#mv-action-standby').click();
    await expectState('Standby', 'on standby');
    await page.locator('#mv-action-start').click();
    await expectState('Running', 'back from standby');
    await page.locator('#mv-action-restart').click();
    await page.locator('.mv-confirm-button').click();
    await page.locator('#mv-action-restart:not([disabled])').waitFor({ timeout: 30000 });
    await expectState('Running', 'restarted');
    log('paused, resumed, on standby and back, restarted from the page');

    // Stop, confirmed first.
    await page.locator('#mv-action-stop').click();
    await page.locator('.mv-confirm-button').click();
    await page.locator('#mv-machine-state [data-state="Stopped"]').waitFor({ timeout: 30000 });
    check(await daemonState('web') === 'Stopped', 'the daemon says Stopped too');
    log('stopped from the page');
    await tab(page, 'Overview').click();
    await page.locator('#mv-generations [data-property="ObservedGeneration"]').waitFor();
    check(await page.locator('#mv-generations [data-property="RestartGeneration"]').innerText() === '1',
          'the restart raised RestartGeneration, as the signals told the page');
    await screenshot(page, 'machine-page.png');

    // The fork deleted from its own page, confirmed first.
    await page.getByRole('link', { name: 'Machines', exact: true }).click();
    await row(page, 'web-fork').locator('.mv-name button').click();
    await page.locator('#mv-machine-name', { hasText: 'web-fork' }).waitFor();
    await page.locator('#mv-action-delete').click();
    await page.locator('#mv-delete-force').check();
    await page.locator('.mv-confirm-button').click();
    await row(page, 'web').waitFor({ timeout: 30000 });
    await row(page, 'web-fork').waitFor({ state: 'detached', timeout: 30000 });
    check(!(await microvmctl('--json', 'list')).includes('"web-fork"'), 'the fork is gone');
    log('deleted the fork from its page');

    // The events feed has what happened to it.
    await page.goto(env('MV_COCKPIT_URL') + '#/events');
    await page.locator('#mv-events tr[data-kind="started"]', { hasText: 'web' }).first().waitFor({ timeout: 10000 });

    // A volume, created and deleted from its page.
    await tab(page, 'Volumes').click();
    await page.locator('#mv-volume-create').click();
    await page.locator('#mv-volume-dialog-name').fill('data');
    await page.locator('#mv-volume-size').fill('16');
    await page.locator('#mv-volume-dialog .mv-dialog-submit').click();
    const volume = page.locator('#mv-volumes tr[data-row="data"]');
    await volume.waitFor({ timeout: 30000 });
    check((await volume.innerText()).includes('16 MiB'), 'the volume has its size');
    await volume.getByRole('button', { name: 'Delete' }).click();
    await page.locator('.mv-confirm-button').click();
    await volume.waitFor({ state: 'detached', timeout: 30000 });
    log('volume created and deleted from the page');

    // The create dialog shows the daemon's refusal on the field it names.
    await page.goto(env('MV_COCKPIT_URL'));
    await row(page, 'web').waitFor();
    await page.locator('#mv-create').click();
    // The host's hypervisors to choose from.
    await page.locator('#mv-create-hypervisor_type option[value="cloud-hypervisor"]')
            .waitFor({ state: 'attached', timeout: 10000 });
    await page.locator('#mv-create-name').fill('tiny');
    await page.locator('#mv-create-kernel').fill(env('MV_KERNEL'));
    await page.locator('#mv-create-cpu_millicores').fill('50');
    await page.locator('#mv-create-submit').click();
    const fieldError = page.locator('.mv-field-error[data-field="cpu_millicores"]');
    await fieldError.waitFor({ timeout: 10000 });
    const message = await fieldError.innerText();
    log('the dialog says:', message);
    check(message.startsWith('cpu_millicores:') && message.includes('100'),
          `the field shows the daemon's message naming cpu_millicores and its limit (${message})`);
    check(await page.locator('#mv-create-cpu_millicores[aria-invalid="true"]').count() === 1,
          'the field is marked invalid');
    await screenshot(page, 'create-dialog-error.png');
    const list = JSON.parse(await microvmctl('--json', 'list'));
    check(!JSON.stringify(list).includes('"tiny"'), 'nothing was created');

    // In German, as the bridge serves po.js for the browser's language.
    await page.setExtraHTTPHeaders({ 'Accept-Language': 'de' });
    await page.goto(env('MV_COCKPIT_URL'));
    await page.getByRole('tab', { name: 'Maschinen', exact: true }).waitFor({ timeout: 10000 });
    await page.locator('#mv-create', { hasText: 'Maschine erstellen' }).waitFor();
    check((await row(page, 'web').locator('.mv-state').innerText()) === 'Gestoppt', 'states are translated');
    log('the page speaks German to a German browser');
}

// ---- a thousand machines ----

async function thousandScenario(page) {
    const t0 = Date.now();
    await open(page);
    await page.locator('.mv-count[data-count="1000"]').waitFor({ timeout: 60000 });
    const rows = await page.locator('tr.mv-machine-row').count();
    const shown = Date.now() - t0;
    log(`1000 machines listed, ${rows} rows, ${shown} ms after the page was asked for`);
    check(rows === 1000, `1000 rows (${rows})`);
    await screenshot(page, 'thousand.png', false);

    // Long tasks on the page's main thread from now on.
    await page.evaluate(() => {
        window.mvLongTasks = [];
        new PerformanceObserver(list => {
            for (const e of list.getEntries())
                window.mvLongTasks.push(e.duration);
        }).observe({ type: 'longtask' });
    });

    const name = 'machine-0500';
    const t1 = Date.now();
    await microvmctl('start', name);
    await row(page, name).locator('[data-state="Running"]').waitFor({ timeout: 10000 });
    log(`the list showed ${name} Running ${Date.now() - t1} ms after microvmctl start returned`);
    await notReloaded(page);
    check(await row(page, 'machine-0499').locator('[data-state="Stopped"]').count() === 1,
          'its neighbours are still Stopped');
    await microvmctl('stop', name);
    await row(page, name).locator('[data-state="Stopped"]').waitFor({ timeout: 10000 });

    const longTasks = await page.evaluate(() => window.mvLongTasks);
    const longest = Math.max(0, ...longTasks);
    // A figure for the log, not a verdict: how fast is for bench/ to say,
    // and a loaded machine stretches any task. That the page follows the
    // change without re-reading the machines is what the call count checks.
    log(`long tasks while following: ${longTasks.length}, longest ${longest.toFixed(0)} ms`);
}

// ---- limited access ----

async function limitedScenario(page) {
    await open(page);
    await row(page, 'guarded').locator('[data-state="Stopped"]').waitFor({ timeout: 20000 });
    // Cockpit's limited access mode, said and offered to change.
    const alert = page.locator('.mv-limited-access');
    await alert.waitFor({ timeout: 10000 });
    check((await alert.innerText()).includes('limited access mode'), 'the page says it runs in limited access mode');

    await row(page, 'guarded').locator('.mv-name button').click();
    await page.locator('#mv-action-start').click();
    const error = page.locator('.mv-error');
    await error.waitFor({ timeout: 20000 });
    const text = await error.innerText();
    log('the page says:', text.replace(/\n+/g, ' | '));
    check(text.includes('Not permitted to perform this action.'), 'the refusal is shown as one');
    check(await error.locator('.mv-superuser-button').count() === 1, 'the refusal offers administrative access');
    check(await daemonState('guarded') === 'Stopped', 'the machine was not started');
    check(await page.locator('#mv-machine-state [data-state="Stopped"]').count() === 1, 'the page shows it Stopped');
    await screenshot(page, 'limited-access.png');

    // The prompt itself.
    await error.locator('.mv-superuser-button').click();
    await page.getByRole('dialog', { name: 'Switch to administrative access' }).waitFor({ timeout: 10000 });
}

const scenarios = { machine: machineScenario, thousand: thousandScenario, limited: limitedScenario };

async function main() {
    const scenario = scenarios[process.argv[2]];
    if (!scenario) {
        console.error(`usage: node browser.mjs ${Object.keys(scenarios).join('|')}`);
        process.exit(2);
    }
    const { browser, page } = await launch();
    try {
        await scenario(page);
        log(`${process.argv[2]}: passed`);
    } catch (e) {
        log(`${process.argv[2]}: FAILED: ${e.message}`);
        await screenshot(page, `failed-${process.argv[2]}.png`).catch(() => {});
        process.exitCode = 1;
    } finally {
        await browser.close();
    }
}

await main();
