// Numbers as people read them.
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes) {
    let n = Number(bytes || 0);
    let u = 0;
    while (n >= 1024 && u < UNITS.length - 1) {
        n /= 1024;
        u++;
    }
    const shown = u === 0 || n >= 100 || Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1);
    return `${shown} ${UNITS[u]}`;
}

// µs since the epoch (microvmd's times), 0 for never.
export function formatTime(usec) {
    if (!usec)
        return '';
    return new Date(Number(usec) / 1000).toLocaleString();
}

// CPU use in percent of one CPU between two stats readings of one VMM
// (Machine.GetStats fields), or null when they cannot be compared.
export function cpuPercent(before, after) {
    if (!before || !after)
        return null;
    if (Number(before.started_at) !== Number(after.started_at))
        return null;
    const wall = (Number(after.read_at) - Number(before.read_at)) * 1000; // ns
    const used = Number(after.cpu_time_ns) - Number(before.cpu_time_ns);
    if (!(wall > 0) || used < 0)
        return null;
    return (used / wall) * 100;
}

export function formatPercent(p) {
    if (p === null || p === undefined)
        return '';
    return `${p.toFixed(p < 10 ? 1 : 0)} %`;
}

export function shortDigest(digest) {
    const d = String(digest || '');
    const at = d.indexOf(':');
    return at >= 0 ? `${d.slice(0, at + 1)}${d.slice(at + 1, at + 13)}` : d.slice(0, 12);
}
