// The guest's serial console in xterm.js, through the daemon's console
// bridge, as any remote client reaches it: the page asks for a token
// (Machine.RequestConsole, as the logged-in user: polkit decides), and
// cockpit's bridge, on the host the daemon runs on (this one or a remote
// one), opens a WebSocket to the console bridge's address with it
// (payload websocket-stream1). On a host whose bridge is off
// (Manager.ConsoleURL is empty), a stream channel runs `microvmctl console
// ID` on a pty instead, which relays Machine.OpenConsole's descriptor.
// What the guest printed before (its boot) comes first, from the console
// log (`microvmctl logs --tail`).
import React, { useEffect, useRef, useState } from 'react';
import { Button, Flex, FlexItem, Label } from '@patternfly/react-core';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';

import cockpit from './cockpit.js';
import { call } from './client.js';
import { consoleBridge } from './console-bridge.js';
import { MACHINE, MANAGER, MANAGER_PATH, PROPERTIES } from './names.js';

const _ = cockpit.gettext;

// Manager.ConsoleURL, asked once.
let bridge = null;
function bridgeAddress() {
    if (!bridge) {
        bridge = call(MANAGER_PATH, PROPERTIES, 'Get', 'ss', [MANAGER, 'ConsoleURL'])
                .then(([variant]) => consoleBridge(variant.v))
                .catch(() => null);
    }
    return bridge;
}

// The channel of a console session: the bridge's, or microvmctl's.
async function openConsole(machine) {
    const at = await bridgeAddress();
    if (!at) {
        return cockpit.channel({
            payload: 'stream',
            spawn: ['microvmctl', 'console', machine.Id],
            pty: true,
            window: { rows: ROWS, cols: COLS },
            environ: ['TERM=xterm-256color'],
            superuser: 'try',
            binary: true,
        });
    }
    const [token] = await call(machine.path, MACHINE, 'RequestConsole', 's', ['serial']);
    return cockpit.channel({
        payload: 'websocket-stream1',
        address: at.address,
        port: at.port,
        path: `${at.path}?token=${encodeURIComponent(token)}`,
        binary: true,
        ...(at.tls ? { tls: {} } : {}),
    });
}

const ROWS = 30;
const COLS = 100;
const BACKLOG_LINES = 200;

// OpenConsole attaches to a running or paused guest.
function attachable(state) {
    return state === 'Running' || state === 'Paused';
}

export function Console({ machine }) {
    const container = useRef(null);
    const term = useRef(null);
    const channel = useRef(null);
    const [status, setStatus] = useState('closed');
    const [attempt, setAttempt] = useState(0);
    const canAttach = attachable(machine.State);

    useEffect(() => {
        const t = new Terminal({
            rows: ROWS,
            cols: COLS,
            convertEol: true,
            scrollback: 5000,
            fontFamily: 'RedHatMono, monospace',
            fontSize: 13,
        });
        t.open(container.current);
        t.onData(data => {
            if (channel.current && channel.current.valid)
                channel.current.send(new TextEncoder().encode(data));
        });
        term.current = t;
        return () => t.dispose();
    }, []);

    useEffect(() => {
        if (!canAttach)
            return undefined;
        const t = term.current;
        let live = null;
        let gone = false;
        setStatus('connecting');

        // Live output waits until the backlog is written.
        let held = [];
        const flush = () => {
            if (held) {
                held.forEach(d => t.write(d));
                held = null;
            }
        };
        const closed = why => {
            flush();
            t.write(`\r\n[${_("console closed")}${why ? ': ' + why : ''}]\r\n`);
            setStatus('closed');
        };

        openConsole(machine)
                .then(opened => {
                    if (gone) {
                        opened.close();
                        return;
                    }
                    live = opened;
                    channel.current = live;
                    live.addEventListener('message', (event, data) => {
                        if (held)
                            held.push(data);
                        else
                            t.write(data);
                    });
                    live.addEventListener('close', (event, options) =>
                        closed(options?.message || options?.problem || ''));
                    return cockpit.spawn(['microvmctl', 'logs', '--tail', String(BACKLOG_LINES), machine.Id],
                                         { superuser: 'try', err: 'message' })
                            .catch(() => '')
                            .then(text => {
                                if (text)
                                    t.write(text);
                                flush();
                                if (live.valid)
                                    setStatus('connected');
                                t.focus();
                            });
                })
                .catch(error => closed(error.message || String(error)));

        return () => {
            gone = true;
            if (live)
                live.close();
            if (channel.current === live)
                channel.current = null;
        };
    }, [canAttach, machine.Id, machine.path, attempt]);

    return (
        <div className="mv-console">
            <Flex className="mv-console-bar">
                <FlexItem>
                    <Label color={status === 'connected' ? 'green' : 'grey'} id="mv-console-status" data-status={status}>
                        {status === 'connected'
                            ? _("Connected")
                            : status === 'connecting' ? _("Connecting") : _("Disconnected")}
                    </Label>
                </FlexItem>
                {!canAttach &&
                    <FlexItem>{_("The console is there while the machine runs.")}</FlexItem>}
                {canAttach && status === 'closed' &&
                    <FlexItem>
                        <Button variant="secondary" onClick={() => setAttempt(a => a + 1)}>{_("Reconnect")}</Button>
                    </FlexItem>}
                <FlexItem>{_("Ctrl+] disconnects")}</FlexItem>
            </Flex>
            <div ref={container} className="mv-terminal" id="mv-terminal" />
        </div>
    );
}
