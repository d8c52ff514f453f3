// The guest's serial console in xterm.js. cockpit's D-Bus channel cannot
// hand a file descriptor to the page, so the console is a Cockpit stream
// channel running `microvmctl console ID` on a pty: microvmctl calls
// Machine.OpenConsole as the logged-in user (polkit decides) and relays
// the descriptor both ways. What the guest printed before (its boot) comes
// first, from the console log (`microvmctl logs --tail`).
import React, { useEffect, useRef, useState } from 'react';
import { Button, Flex, FlexItem, Label } from '@patternfly/react-core';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';

import cockpit from './cockpit.js';

const _ = cockpit.gettext;

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
        const live = cockpit.channel({
            payload: 'stream',
            spawn: ['microvmctl', 'console', machine.Id],
            pty: true,
            window: { rows: ROWS, cols: COLS },
            environ: ['TERM=xterm-256color'],
            superuser: 'try',
            binary: true,
        });
        channel.current = live;
        setStatus('connecting');

        // Live output waits until the backlog is written.
        let held = [];
        live.addEventListener('message', (event, data) => {
            if (held)
                held.push(data);
            else
                t.write(data);
        });
        live.addEventListener('close', (event, options) => {
            if (held) {
                held.forEach(d => t.write(d));
                held = null;
            }
            const why = options?.message || options?.problem || '';
            t.write(`\r\n[${_("console closed")}${why ? ': ' + why : ''}]\r\n`);
            setStatus('closed');
        });

        cockpit.spawn(['microvmctl', 'logs', '--tail', String(BACKLOG_LINES), machine.Id],
                      { superuser: 'try', err: 'message' })
                .catch(() => '')
                .then(text => {
                    if (text)
                        t.write(text);
                    if (held) {
                        held.forEach(d => t.write(d));
                        held = null;
                    }
                    if (live.valid)
                        setStatus('connected');
                    t.focus();
                });

        return () => {
            live.close();
            if (channel.current === live)
                channel.current = null;
        };
    }, [canAttach, machine.Id, attempt]);

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
