// Manager.ConsoleURL as cockpit's websocket-stream1 channel takes it:
// {address, port, path, tls}; null for an empty or foreign URL.
export function consoleBridge(url) {
    const m = /^(wss?):\/\/(\[[0-9a-fA-F:.]+\]|[0-9.]+):(\d{1,5})(\/[^?#]*)$/.exec(url || '');
    if (!m)
        return null;
    const port = Number(m[3]);
    if (port < 1 || port > 65535)
        return null;
    return { address: m[2].replace(/^\[(.*)\]$/, '$1'), port, path: m[4], tls: m[1] === 'wss' };
}
