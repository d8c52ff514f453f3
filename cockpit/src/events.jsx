// The events feed: the daemon's Event signals as they come, after what
// Manager.GetEvents has kept (read once, when the feed is first shown).
import React, { useEffect, useState } from 'react';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';

import cockpit from './cockpit.js';
import { managerCall, onEvent } from './client.js';
import { ErrorAlert } from './errors.jsx';
import { formatTime } from './format.js';

const _ = cockpit.gettext;
const KEEP = 500;
const PAGE = 1000;

function toEvent([sequence, time, kind, machineId, machineName, operationId, message]) {
    return { sequence: Number(sequence), time, kind, machineId, machineName, operationId, message };
}

// Collected from when the page started, whether or not the feed is shown.
let feed = [];
let history = null;
const feedListeners = new Set();

function add(events) {
    const seen = new Set(feed.map(e => e.sequence));
    feed = [...feed, ...events.filter(e => !seen.has(e.sequence))]
            .sort((a, b) => a.sequence - b.sequence)
            .slice(-KEEP);
    feedListeners.forEach(l => l());
}

export function startEvents() {
    onEvent(args => add([toEvent(args)]));
}

async function loadHistory() {
    let since = 0;
    for (;;) {
        const [events] = await managerCall('GetEvents', 't', [since]);
        add(events.map(toEvent).slice(-KEEP));
        if (events.length < PAGE)
            return;
        since = Number(events[events.length - 1][0]);
    }
}

export function EventsPage() {
    const [events, setEvents] = useState(feed);
    const [error, setError] = useState(null);
    useEffect(() => {
        const update = () => setEvents(feed);
        feedListeners.add(update);
        if (!history)
            history = loadHistory().catch(err => { history = null; setError(err) });
        return () => feedListeners.delete(update);
    }, []);

    return (
        <>
            <ErrorAlert error={error} />
            <Table variant="compact" aria-label={_("Events")} id="mv-events">
                <Thead>
                    <Tr><Th>{_("Time")}</Th><Th>{_("Kind")}</Th><Th>{_("Machine")}</Th><Th>{_("Message")}</Th></Tr>
                </Thead>
                <Tbody>
                    {[...events].reverse().map(e => (
                        <Tr key={e.sequence} data-kind={e.kind}>
                            <Td>{formatTime(e.time)}</Td>
                            <Td>{e.kind}</Td>
                            <Td>{e.machineName}</Td>
                            <Td>{e.message}</Td>
                        </Tr>
                    ))}
                </Tbody>
            </Table>
        </>
    );
}
