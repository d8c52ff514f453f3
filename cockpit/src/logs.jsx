// A machine's log, followed: a Cockpit stream channel running `microvmctl
// logs --follow` (Machine.StreamLogs as the logged-in user). A new run of
// the machine is followed anew.
import React, { useEffect, useRef, useState } from 'react';
import { Checkbox, Flex, FlexItem, FormSelect, FormSelectOption } from '@patternfly/react-core';

import cockpit from './cockpit.js';

const _ = cockpit.gettext;
const TAIL_LINES = 500;
const MAX_CHARS = 512 * 1024;

export function Logs({ machine }) {
    const [source, setSource] = useState('console');
    const [follow, setFollow] = useState(true);
    const [text, setText] = useState('');
    const [status, setStatus] = useState('');
    const pre = useRef(null);

    useEffect(() => {
        setText('');
        const argv = ['microvmctl', 'logs', '--tail', String(TAIL_LINES), '--source', source];
        if (follow)
            argv.push('--follow');
        argv.push(machine.Id);
        const channel = cockpit.channel({ payload: 'stream', spawn: argv, err: 'message', superuser: 'try' });
        setStatus(follow ? _("Following") : '');
        channel.addEventListener('message', (event, data) => {
            setText(t => (t + data).slice(-MAX_CHARS));
        });
        channel.addEventListener('close', (event, options) => {
            setStatus(options?.problem ? (options.message || options.problem) : _("End of the log"));
        });
        return () => channel.close();
    }, [source, follow, machine.Id, machine.StartedAt]);

    useEffect(() => {
        if (pre.current)
            pre.current.scrollTop = pre.current.scrollHeight;
    }, [text]);

    return (
        <>
            <Flex className="mv-logs-bar">
                <FlexItem>
                    <FormSelect id="mv-logs-source" value={source} onChange={(_e, v) => setSource(v)}
                                aria-label={_("Log")}>
                        <FormSelectOption value="console" label={_("Console")} />
                        <FormSelectOption value="vmm" label={_("Hypervisor")} />
                        <FormSelectOption value="workload" label={_("Workload")} />
                    </FormSelect>
                </FlexItem>
                <FlexItem>
                    <Checkbox id="mv-logs-follow" label={_("Follow")} isChecked={follow}
                              onChange={(_e, v) => setFollow(v)} />
                </FlexItem>
                <FlexItem id="mv-logs-status">{status}</FlexItem>
            </Flex>
            <pre className="mv-logs" id="mv-logs" ref={pre}>{text}</pre>
        </>
    );
}
