// What the page knows of the daemon's objects, kept from the
// ObjectManager alone: one GetManagedObjects when the page starts, then
// InterfacesAdded, InterfacesRemoved and PropertiesChanged. Nothing is
// read again after an event: a signal carries what changed.
//
// Each object is a plain frozen object of its properties (variants
// unwrapped) plus `path`; a change makes a new object for that one path,
// so that views can compare by identity and redraw only what changed.
// Listeners hear of changes at most once per `schedule` tick, however
// many signals came in.
import { KINDS, MANAGER, MANAGER_PATH } from './names.js';

// A variant as cockpit's D-Bus channel gives it ({t, v}) becomes its
// value; containers of variants are unwrapped all the way down.
export function unwrap(value) {
    if (value && typeof value === 'object' && !Array.isArray(value) && 't' in value && 'v' in value &&
        Object.keys(value).length === 2 && typeof value.t === 'string')
        return unwrap(value.v);
    if (Array.isArray(value))
        return value.map(unwrap);
    if (value && typeof value === 'object') {
        const out = {};
        for (const [k, v] of Object.entries(value))
            out[k] = unwrap(v);
        return out;
    }
    return value;
}

function unwrapProperties(props) {
    const out = {};
    for (const [k, v] of Object.entries(props || {}))
        out[k] = unwrap(v);
    return out;
}

export class Model {
    // @schedule(callback): runs callback later, once (requestAnimationFrame
    // in the page, a microtask or a direct call in tests).
    constructor(schedule) {
        this.schedule = schedule || (fn => fn());
        this.manager = null;
        this.loaded = false;
        this.version = 0;
        for (const kind of Object.values(KINDS))
            this[kind] = new Map();
        this.listeners = new Set();
        this.pending = false;
        this.error = null;
    }

    subscribe(listener) {
        this.listeners.add(listener);
        return () => this.listeners.delete(listener);
    }

    changed() {
        this.version++;
        if (this.pending)
            return;
        this.pending = true;
        this.schedule(() => {
            this.pending = false;
            for (const listener of [...this.listeners])
                listener(this.version);
        });
    }

    // The reply of GetManagedObjects: {path: {interface: {property: variant}}}.
    load(objects) {
        for (const kind of Object.values(KINDS))
            this[kind].clear();
        for (const [path, interfaces] of Object.entries(objects || {}))
            this.addInterfaces(path, interfaces, false);
        this.loaded = true;
        this.changed();
    }

    addInterfaces(path, interfaces, notify = true) {
        let touched = false;
        for (const [iface, props] of Object.entries(interfaces || {})) {
            if (iface === MANAGER && path === MANAGER_PATH) {
                this.manager = Object.freeze({ path, ...unwrapProperties(props) });
                touched = true;
                continue;
            }
            const kind = KINDS[iface];
            if (!kind)
                continue;
            this[kind].set(path, Object.freeze({ path, ...unwrapProperties(props) }));
            touched = true;
        }
        if (touched && notify)
            this.changed();
    }

    removeInterfaces(path, interfaces) {
        let touched = false;
        for (const iface of interfaces || []) {
            const kind = KINDS[iface];
            if (kind && this[kind].delete(path))
                touched = true;
        }
        if (touched)
            this.changed();
    }

    // PropertiesChanged(interface, changed, invalidated). Invalidated
    // properties are dropped rather than read again; microvmd sends values.
    changeProperties(path, iface, changed, invalidated) {
        let map = null;
        let current;
        if (iface === MANAGER && path === MANAGER_PATH) {
            current = this.manager;
        } else {
            const kind = KINDS[iface];
            if (!kind)
                return;
            map = this[kind];
            current = map.get(path);
        }
        // Not announced yet (or already gone): InterfacesAdded brings it whole.
        if (!current)
            return;
        const next = { ...current, ...unwrapProperties(changed) };
        for (const name of invalidated || [])
            delete next[name];
        if (map)
            map.set(path, Object.freeze(next));
        else
            this.manager = Object.freeze(next);
        this.changed();
    }

    // One signal as cockpit's subscribe() hands it over.
    signal(path, iface, member, args) {
        if (member === 'InterfacesAdded')
            this.addInterfaces(args[0], args[1]);
        else if (member === 'InterfacesRemoved')
            this.removeInterfaces(args[0], args[1]);
        else if (member === 'PropertiesChanged')
            this.changeProperties(path, args[0], args[1], args[2]);
    }

    machineById(id) {
        for (const m of this.machines.values())
            if (m.Id === id)
                return m;
        return null;
    }

    sortedMachines() {
        return [...this.machines.values()].sort((a, b) => (a.Name || '').localeCompare(b.Name || ''));
    }
}
