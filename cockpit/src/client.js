// The page's one connection to microvmd: cockpit's D-Bus channel on the
// system bus, as the logged-in user (superuser "try": as root once the
// user has turned on administrative access). polkit decides in the
// daemon, as for any other client.
//
// The objects come from the ObjectManager only (model.js). No proxies and
// no watches: those would make the bridge introspect and read every
// object itself.
import cockpit from './cockpit.js';
import { Model } from './model.js';
import { BUS_NAME, MANAGER, MANAGER_PATH, OBJECT_MANAGER, PROPERTIES } from './names.js';

// Lifecycle calls reply when the machine has got where it was asked to go:
// a guest may take a while to boot.
const LONG_CALL_MS = 10 * 60 * 1000;

const _ = cockpit.gettext;

let client = null;
export const model = new Model(fn => window.requestAnimationFrame(fn));

const eventListeners = new Set();

export function onEvent(listener) {
    eventListeners.add(listener);
    return () => eventListeners.delete(listener);
}

function connect() {
    client = cockpit.dbus(BUS_NAME, { bus: 'system', superuser: 'try' });

    // Signals that come before the listing are already in it.
    let ready = false;
    const deliver = (path, iface, member, args) => {
        if (iface === MANAGER && member === 'Event') {
            for (const listener of [...eventListeners])
                listener(args);
            return;
        }
        if (ready)
            model.signal(path, iface, member, args);
    };

    client.subscribe({ path: MANAGER_PATH, interface: OBJECT_MANAGER }, deliver);
    client.subscribe({ path_namespace: MANAGER_PATH, interface: PROPERTIES, member: 'PropertiesChanged' }, deliver);
    client.subscribe({ path: MANAGER_PATH, interface: MANAGER, member: 'Event' }, deliver);

    const list = () => {
        ready = false;
        client.call(MANAGER_PATH, OBJECT_MANAGER, 'GetManagedObjects', [], { type: '' })
                .then(([objects]) => {
                    ready = true;
                    model.error = null;
                    model.load(objects);
                })
                .catch(error => {
                    model.error = error;
                    model.changed();
                });
    };
    list();

    // The daemon's name changing hands means it restarted: what the page
    // had is listed anew, once. While nobody owns it, the page says so.
    let owner;
    client.addEventListener('owner', (event, now) => {
        const before = owner;
        owner = now;
        if (!now) {
            model.error = { message: _("microvmd is not running") };
            model.changed();
        } else if (before !== undefined && before !== now) {
            list();
        }
    });

    client.addEventListener('close', (event, options) => {
        model.error = { problem: options?.problem, message: options?.message || options?.problem };
        model.changed();
    });
}

export function start() {
    if (!client)
        connect();
    return model;
}

// A method call with its signature given, so that the bridge never has to
// introspect the daemon to send it.
export function call(path, iface, method, type, args, long = false) {
    const options = { type };
    if (long)
        options.timeout = LONG_CALL_MS;
    return client.call(path, iface, method, args, options);
}

export function managerCall(method, type, args, long = false) {
    return call(MANAGER_PATH, MANAGER, method, type, args, long);
}
