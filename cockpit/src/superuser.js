// Whether this page may use administrative access, and the way to ask
// for it: the bridge's own cockpit.Superuser object on its internal bus,
// as Cockpit's shell does. Without administrative access every call
// still goes to microvmd as the logged-in user, and polkit decides.
import cockpit from './cockpit.js';

let proxy = null;
const listeners = new Set();

function notify() {
    for (const listener of [...listeners])
        listener();
}

export function superuserProxy() {
    if (!proxy) {
        proxy = cockpit.dbus(null, { bus: 'internal' }).proxy('cockpit.Superuser', '/superuser');
        proxy.addEventListener('changed', notify);
        proxy.wait(notify);
    }
    return proxy;
}

// true: administrative access is on; false: limited access; null: not
// known yet.
export function superuserAllowed() {
    const p = superuserProxy();
    if (!p.valid || p.Current === 'init' || p.Current === undefined)
        return null;
    return p.Current !== 'none';
}

export function onSuperuserChanged(listener) {
    superuserProxy();
    listeners.add(listener);
    return () => listeners.delete(listener);
}

// The bridges that can give administrative access (sudo, pkexec, ...),
// as the superuser object lists them.
export function superuserBridges() {
    const p = superuserProxy();
    return p.valid && Array.isArray(p.Bridges) ? p.Bridges : [];
}
