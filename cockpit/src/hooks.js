// React hooks over the model, the page's location and the superuser state.
import { useEffect, useState, useSyncExternalStore } from 'react';

import cockpit from './cockpit.js';
import { model } from './client.js';
import { onSuperuserChanged, superuserAllowed } from './superuser.js';

// Redraws when the model has changed (at most once a frame); returns it.
export function useModel() {
    useSyncExternalStore(listener => model.subscribe(listener), () => model.version);
    return model;
}

// cockpit.location.path, followed.
export function useLocationPath() {
    const [path, setPath] = useState(cockpit.location.path);
    useEffect(() => {
        const update = () => setPath(cockpit.location.path);
        cockpit.addEventListener('locationchanged', update);
        return () => cockpit.removeEventListener('locationchanged', update);
    }, []);
    return path;
}

export function useSuperuser() {
    const [allowed, setAllowed] = useState(superuserAllowed());
    useEffect(() => onSuperuserChanged(() => setAllowed(superuserAllowed())), []);
    return allowed;
}

// Calls @fn every @ms while the component is shown (and once at once).
export function useInterval(fn, ms, deps) {
    useEffect(() => {
        let stopped = false;
        const tick = () => {
            if (!stopped)
                fn();
        };
        tick();
        const id = window.setInterval(tick, ms);
        return () => {
            stopped = true;
            window.clearInterval(id);
        };
    }, deps); // eslint-disable-line react-hooks/exhaustive-deps
}
